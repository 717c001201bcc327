#!/bin/bash
# Session 12 on a lent GPU (about 6 minutes): main after issues 35/36/39's first parts on real hardware.
# 1. the device suite (test_cuda) and the GPU tests of test_train: the one-launch AdamW with the clip and
#    skip on the device, bf16 GEMM operands (cublasGemmEx), the freeing arena on device memory, Mamba2's
#    group-wise gated norm, the warp-race fixes;
# 2. the 85.5M model (bench.yaml at hidden 768, 12 layers, 12 heads, seq 2048, micro-batch 8): bf16 with
#    recompute none / selective / full and tf32: tokens/s, MFU against the datasheet peak, and the
#    activation peak the trainer measures; before (session 10, 12050d7): bf16 130,875 tokens/s, 27,286 MiB;
# 3. the mixers at the benchmark shape in bf16; compute-sanitizer memcheck and racecheck on new kernels.
# Usage, from the repository root with the bundle in .gpu/ and data/cache/sotu-bytes carried:
#   OUT=/some/dir docs/gpu-runs/next/session12.sh
set -u
R=${OUT:-$PWD/session12-results}; mkdir -p "$R"
W=$(mktemp -d)
B=$(mktemp -d); tar -xJf .gpu/bundle.tar.xz -C "$B"
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d "$SP"/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
BIN=$B/bundle/bin
export LINATTN_BUILD_DIR=$BIN
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout -k 3 "$t" "$@" > "$R/$name.txt" 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$R/summary.txt"
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > "$R/gpu.txt" 2>&1
step test_cuda 90 "$BIN/test_cuda" --gtest_brief=1
step test_train_gpu 120 "$BIN/test_train" --gtest_brief=1 --gtest_filter='Cuda*:Communicator.*'
T="$BIN/linattn-train configs/bench.yaml --set train.device=cuda --set data.document_boundaries=cross"
M="--set model.hidden_size=768 --set model.num_hidden_layers=12 --set model.num_heads=12 --set data.seq_len=2048 --set train.max_steps=12 --set train.log_every=1"
step m85_bf16_none 45 $T $M --set train.precision=bf16 --out "$W/a"
step m85_bf16_selective 45 $T $M --set train.precision=bf16 --set train.recompute=selective --out "$W/b"
step m85_bf16_full 45 $T $M --set train.precision=bf16 --set train.recompute=full --out "$W/c"
step m85_tf32 45 $T $M --set train.tf32=true --out "$W/d"
step bench_bf16 25 $T --set train.precision=bf16 --out "$W/e"
step mixers_bf16 60 "$BIN/linattn-bench" mixers --device cuda --precision bf16 --max-t 2048
step memcheck 60 compute-sanitizer --tool memcheck "$BIN/test_cuda" --gtest_brief=1 --gtest_filter='CudaOptimizer*:CudaArena*:CudaBackendOps*adamw*:CudaBackendOps*step_*:CudaBackendOps*rmsnorm*'
step racecheck 60 compute-sanitizer --tool racecheck "$BIN/test_cuda" --gtest_brief=1 --gtest_filter='CudaGla*Precision*:CudaDeltaNetPrecision.MatchesTheCpuInFloat64/*'
grep -h -E "^(memory|train|step +(1|6|12) )" "$R"/m85_*.txt "$R"/bench_bf16.txt > "$R/training.txt"
cat "$R/summary.txt" "$R/training.txt"
