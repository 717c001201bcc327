#!/bin/bash
# For the next GPU lent (H100 or H200; about 3 minutes): DeltaNet's and Gated DeltaNet's backward on
# the tensor cores (chunk_backward_inputs_tc_kernel<P>, chunk_backward_grads_tc_kernel<P>, issue 26).
# Times linattn-bench mixers for deltanet and gated_deltanet in f32, tf32 and bf16 (forward +
# backward, B4 H4 D64 at T 1K and 2K, and B8 H16 D128 at T 2K, where the backward takes the float32
# kernels: heads past 64), runs the device tests of the new kernels, and racecheck / memcheck on them.
# Run from the repository root, as docs/gpu-runs/2026-11-26-h200-session10/run.sh (same bundle
# layout: .gpu/bundle.tar.xz holds bin/ and lib/ of an nvcc build); results in $OUT/results.tgz.
# Compare with the H200 figures at 12050d7 (bench_mixers_*.txt in 2026-11-26-h200-session10/):
# deltanet 2.555 ms f32 / 2.545 ms bf16, gated_deltanet 2.618 / 2.595 ms at B4 T2048.
set -u
ROOT=$PWD; R=$(mktemp -d)
B=$(mktemp -d); tar -xJf .gpu/bundle.tar.xz -C $B
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d $SP/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
BIN=$B/bundle/bin
export LINATTN_BUILD_DIR=$BIN
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout -k 3 $t "$@" > $R/$name.txt 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a $R/summary.txt
  tar -czf ${OUT:-.}/results.tgz -C $R .
}
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv > $R/gpu.txt 2>&1
step test_deltanet 60 $BIN/test_cuda --gtest_filter='CudaDeltaNet*:LaunchPlan.DeltaNet*:DeltaNetLayout.*'
for p in f32 tf32 bf16; do
  for m in deltanet gated_deltanet; do
    step mixers_${m}_$p 30 $BIN/linattn-bench mixers --device cuda --precision $p --only $m --max-t 2048
  done
done
step racecheck 60 compute-sanitizer --tool racecheck $BIN/test_cuda --gtest_brief=1 --gtest_filter='CudaDeltaNetPrecision.MatchesTheCpuInFloat64/*'
step memcheck 60 compute-sanitizer --tool memcheck $BIN/test_cuda --gtest_brief=1 --gtest_filter='CudaDeltaNetPrecision.*'
cat $R/summary.txt
grep -h "deltanet  *4  *2048" $R/mixers_*.txt
