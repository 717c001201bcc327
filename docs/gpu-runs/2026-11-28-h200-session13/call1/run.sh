#!/bin/bash
# Session 13 on a lent GPU (one call, about 7 minutes): main after issue 35's memory plan, with session
# 12's work (one-launch AdamW, bf16 weight copy, freeing arena, recompute) never yet run on a GPU.
# 1. the device suite (test_cuda) and the GPU tests of test_train (the memory plan on cuda included);
# 2. the 85.5M model (bench.yaml at hidden 768, 12 layers, 12 heads, seq 2048, micro-batch 8) in bf16
#    with recompute none / selective / full: tokens/s, MFU and the measured activation peak (session 10,
#    12050d7: 130,875 tokens/s, 27,286 MiB), and --dry-run's prediction beside the measurement;
# 3. configs/gla-1.3b.yaml and gdn-1.3b.yaml: --dry-run (predicted, then measured on the H200) and a
#    few steps of gla-1.3b at micro-batch 8: tokens/s, MFU, device memory at the peak;
# 4. compute-sanitizer memcheck of the optimizer and arena tests, racecheck of GLA's kernels.
# Usage, from the repository root with the bundle in .gpu/ (linattn-data added to the default targets),
# data/corpus and data/cache/sotu-gpt2 carried (sotu-bytes is prepared here: it is 21 MB):
#   OUT=/some/dir docs/gpu-runs/next/session13.sh
set -u
ROOT=$PWD; R=$(mktemp -d); W=$(mktemp -d)
B=$(mktemp -d); tar -xJf .gpu/bundle.tar.xz -C "$B"
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d "$SP"/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
BIN=$B/bundle/bin
export LINATTN_BUILD_DIR=$BIN
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
[ -f data/cache/sotu-bytes/val.bin ] || "$BIN/linattn-data" prepare data/corpus/sotu --tokenizer bytes \
  --out data/cache/sotu-bytes --val-glob '201*,202*' --quiet
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout -k 3 "$t" "$@" > "$R/$name.txt" 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$R/summary.txt"
  tar -czf "$OUT/results.tgz" -C "$R" .
}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$R/gpu.txt" 2>&1
step test_cuda 70 "$BIN/test_cuda" --gtest_brief=1
step test_train_gpu 90 "$BIN/test_train" --gtest_brief=1 --gtest_filter='Cuda*:Communicator.*'
T="$BIN/linattn-train configs/bench.yaml --set train.device=cuda --set data.document_boundaries=cross --set train.precision=bf16"
M="--set model.hidden_size=768 --set model.num_hidden_layers=12 --set model.num_heads=12 --set data.seq_len=2048 --set train.max_steps=12 --set train.log_every=1"
for r in none selective full; do
  step m85_bf16_${r}_dry 40 $T $M --set train.recompute=$r --dry-run --out "$W/dry_$r"
  step m85_bf16_$r 40 $T $M --set train.recompute=$r --out "$W/m85_$r"
done
S="--set train.batch_size=8 --set train.max_steps=4 --set train.log_every=1 --set train.eval_every=0 --set data.val_tokens=16384"
step gla13_dry 60 "$BIN/linattn-train" configs/gla-1.3b.yaml --dry-run --out "$W/gla_dry"
step gla13_train 120 "$BIN/linattn-train" configs/gla-1.3b.yaml $S --out "$W/gla"
rm -rf "$W/gla"
step gdn13_dry 60 "$BIN/linattn-train" configs/gdn-1.3b.yaml --dry-run --out "$W/gdn_dry"
step memcheck 45 compute-sanitizer --tool memcheck "$BIN/test_cuda" --gtest_brief=1 --gtest_filter='CudaOptimizer*:CudaArena*:CudaBackendOps*adamw*:CudaBackendOps*step_*'
step racecheck 45 compute-sanitizer --tool racecheck "$BIN/test_cuda" --gtest_brief=1 --gtest_filter='CudaGla*Precision*'
grep -h -E "^(memory|  |train|step +(1|4|6|12) |dry run)" "$R"/m85_*.txt "$R"/gla13_*.txt "$R"/gdn13_*.txt > "$R/training.txt"
cat "$R/summary.txt" "$R/training.txt"
tar -czf "$OUT/results.tgz" -C "$R" .
