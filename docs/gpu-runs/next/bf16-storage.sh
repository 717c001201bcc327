#!/bin/bash
# Sessions 14-18's bf16 activation storage and fused ops on a GPU (about 8 minutes): the device
# suites, then the 85.5M model at micro-batch 8 in the three recompute modes and the 1.3B configs,
# each with its --dry-run prediction beside the measured peak, and tokens/s. Before (session 13, f32
# keeps): 85.5M none 9,825.6 MiB at 209,932 tokens/s; full 1,984.0 MiB. The emulation counts 611
# stream operations a bf16 step of the 85.5M model's layers at session 18's end (the residual adds
# in the norms' passes, the gated output norm and o_proj as one node), 666 at session 17's, 692 at
# session 16's, 852 at session 15's, 1,911 at session 14's (docs/gpu.md, What a step launches): the
# tokens/s here say what that and the bf16 copies are worth on the GPU.
# Usage: ../shared/tools/device-bundle .gpu test_cuda test_train linattn-bench linattn-train linattn-data,
# then run with carry [".gpu", "data/corpus", "data/cache/sotu-gpt2"]: OUT=$OUT docs/gpu-runs/next/bf16-storage.sh
set -u
. docs/gpu-runs/bundle-env.sh  # BIN, R, W, step
step test_cuda 60 "$BIN/test_cuda" --gtest_brief=1
step test_train_gpu 90 "$BIN/test_train" --gtest_brief=1 --gtest_filter='Cuda*:TrainRecompute.*:MemoryPlan.*'
"$BIN/linattn-data" prepare data/corpus/sotu --tokenizer bytes --out data/cache/sotu-bytes > /dev/null 2>&1
M85="--set model.hidden_size=768 --set model.num_hidden_layers=12 --set model.num_heads=12 --set data.seq_len=2048 --set train.batch_size=8 --set train.precision=bf16 --set train.device=cuda --set train.max_steps=12 --set train.log_every=4 --set train.eval_every=0"
for mode in none selective full; do
  step m85_${mode}_dry 60 "$BIN/linattn-train" configs/bench.yaml $M85 --set train.recompute=$mode --dry-run --out "$W/d$mode"
  step m85_$mode 90 "$BIN/linattn-train" configs/bench.yaml $M85 --set train.recompute=$mode --out "$W/m$mode"
  rm -rf "$W/d$mode" "$W/m$mode"
done
S="--set train.batch_size=8 --set train.max_steps=4 --set train.log_every=1 --set train.eval_every=0 --set data.val_tokens=16384"
for cfg in gla-1.3b:none gla-1.3b:selective gdn-1.3b:selective; do
  c=${cfg%%:*}; mode=${cfg##*:}
  step ${c}_${mode} 150 "$BIN/linattn-train" configs/$c.yaml $S --set train.recompute=$mode --out "$W/$c$mode"
  rm -rf "$W/$c$mode"
done
grep -h -E "^(memory|train|step +(4|12) )" "$R"/m85_*.txt "$R"/g*-1.3b_*.txt > "$R/training.txt"
cat "$R/summary.txt" "$R/training.txt"
