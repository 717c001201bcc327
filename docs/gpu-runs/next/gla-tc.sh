#!/bin/bash
# Issue 26, GLA's tensor-core slowdown: after the fix (chunk_apply_kernel at <= 128 registers and
# chunk_dqk_kernel at <= 112 KiB of shared memory in bf16 and tf32, two blocks per SM; the diagonal
# sub-chunk blocks with every lane busy; gate_cumsum over 512 blocks), time GLA and linear attention
# in f32 / tf32 / bf16 and the two training runs that slowed down in session 10, on a lent GPU.
#
# Session 10 (H200, main at 12050d7), forward+backward at B4 T2048 H4 D64, median of 20:
#   linear attention f32 0.608 ms, bf16 0.572 ms;  GLA f32 1.050 ms, bf16 1.253 ms;
#   bench.yaml tf32 505,974 -> 476,084 tokens/s;  85.5M model tf32 138,598 -> 121,718 tokens/s.
# The fix is right when GLA bf16 and tf32 are no slower than GLA f32, and LA no slower than before.
#
# Usage: BIN=build docs/gpu-runs/next/gla-tc.sh   (from the repository root; BIN holds linattn-bench,
# linattn-train and test_cuda of an nvcc build). Results in $OUT (or ./gla-tc-results), about 3 minutes.
set -u
BIN=${BIN:-build}
OUT=${OUT:-$PWD/gla-tc-results}
mkdir -p "$OUT"
W=$(mktemp -d)
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout -k 3 "$t" "$@" > "$OUT/$name.txt" 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$OUT/summary.txt"
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > "$OUT/gpu.txt" 2>&1
# correctness on the GPU first: the precision tests and GLA / LA against the CPU
step test_chunks 60 "$BIN/test_cuda" --gtest_filter='CudaChunkPrecision*:CudaGla*:CudaLinearAttention*:CudaDocuments*:ChunkLayout*'
# the timings, twice each in alternating order (the spread between the rounds is the noise)
for round in 1 2; do
  for precision in f32 tf32 bf16; do
    for mixer in gla linear_attn; do
      step "mixers_${mixer}_${precision}_$round" 30 "$BIN/linattn-bench" mixers --device cuda --only "$mixer" \
        --precision "$precision" --max-t 2048
    done
  done
done
# the training runs that lost 3-12% of their tokens/s in session 10
T="$BIN/linattn-train configs/bench.yaml --set train.device=cuda --set data.document_boundaries=cross"
step bench_f32 15 $T --out "$W/a"
step bench_tf32 15 $T --set train.tf32=true --out "$W/b"
step bench_bf16 15 $T --set train.precision=bf16 --out "$W/c"
M="--set model.hidden_size=768 --set model.num_hidden_layers=12 --set model.num_heads=12 --set data.seq_len=2048 --set train.max_steps=8 --set train.log_every=1"
step m85_tf32 25 $T $M --set train.tf32=true --out "$W/d"
step m85_bf16 25 $T $M --set train.precision=bf16 --out "$W/e"
# the plan beside it (registers, shared memory, occupancy of the kernels that were timed)
step gpu_plan 30 "$BIN/linattn-bench" gpu-plan --precision bf16 --build-dir "$BIN"
# one line per timing: mixer, precision, round, the B4 T2048 H4 D64 row
grep -H -E "^(gla|linear_attn) +4 +2048 +4 +64" "$OUT"/mixers_*.txt | tee "$OUT/mixers_b4_t2048.txt"
grep -H "tok/s" "$OUT"/bench_*.txt "$OUT"/m85_*.txt | grep "^[^:]*:step" > "$OUT/training_tokens.txt"
cat "$OUT/summary.txt"
