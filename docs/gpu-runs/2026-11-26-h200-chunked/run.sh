#!/bin/bash
# h1's device check of the chunk-parallel linear attention / GLA kernels: bash run.sh (next to bundle.tar.xz)
HERE=$(cd "$(dirname "$0")" && pwd); OUT=${OUT:-$(mktemp -d)}
B=$(mktemp -d) && tar -xJf $HERE/bundle.tar.xz -C $B
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d $SP/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
nvidia-smi -L
T=$B/bundle/bin/test_cuda
timeout 90 $T --gtest_filter='CudaLinearAttention*:CudaGla*:CudaBackendOps*:ChunkLayout*' > $OUT/tests.txt 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" $OUT/tests.txt | head; grep -A1 -E "CudaColumnMatchesCpuColumn/(gla|linear_attention)" $OUT/tests.txt | grep worst
for m in linear_attn gla; do timeout 60 $B/bundle/bin/linattn-bench mixers --device cuda --only $m --max-t 4096 > $OUT/bench_$m.txt 2>&1; echo "bench $m rc=$?"; tail -6 $OUT/bench_$m.txt; done
timeout 100 compute-sanitizer --tool memcheck $T --gtest_filter='CudaGla.MatchesTheCpuEntry:CudaLinearAttention.MatchesTheCpuEntry' > $OUT/memcheck.txt 2>&1; echo "memcheck rc=$?"; tail -3 $OUT/memcheck.txt
timeout 100 compute-sanitizer --tool racecheck $T --gtest_filter='CudaGla.MatchesTheCpuEntry' > $OUT/racecheck.txt 2>&1; echo "racecheck rc=$?"; tail -3 $OUT/racecheck.txt
