#!/bin/bash
# The first run of linattn's CUDA backend on a real GPU: device suite, benchmarks, training, sanitizer.
set -u
ROOT=$PWD
B=$(mktemp -d); tar -xJf .gpu/bundle.tar.xz -C $B
tar -xJf .gpu-data/data.tar.xz -C $ROOT
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d $SP/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
BIN=$B/bundle/bin
export LINATTN_BUILD_DIR=$BIN
[ -e /work/main ] || { mkdir -p /work && ln -s $ROOT /work/main; }
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout -k 5 $t "$@" > $OUT/$name.txt 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a $OUT/summary.txt
}
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
step test_cuda 100 $BIN/test_cuda --gtest_output=xml:$OUT/test_cuda.xml
step bench_mixers 60 $BIN/linattn-bench mixers --device cuda --max-t 16384
step bench_attention 30 $BIN/linattn-bench attention --device cuda
step bench_gemm 20 $BIN/linattn-bench gemm --device cuda
step test_train_gpu 60 $BIN/test_train --gtest_filter='Communicator.*:Cuda*:Nccl*'
step train_bench 40 $BIN/linattn-train configs/bench.yaml --set train.device=cuda --out /tmp/r1
step train_bench_tf32 40 $BIN/linattn-train configs/bench.yaml --set train.device=cuda --set train.tf32=true --out /tmp/r2
step train_125m 60 $BIN/linattn-train configs/bench.yaml --set train.device=cuda --set train.tf32=true \
  --set model.hidden_size=768 --set model.num_hidden_layers=12 --set model.num_heads=12 \
  --set data.seq_len=2048 --set train.max_steps=8 --set train.log_every=1 --out /tmp/r3
step train_default 45 $BIN/linattn-train configs/default.yaml --set train.device=cuda --set train.max_steps=150 \
  --set train.eval_every=0 --set train.sample_every=0 --out /tmp/r4
step sanitizer 100 compute-sanitizer --tool memcheck $BIN/test_cuda --gtest_brief=1
