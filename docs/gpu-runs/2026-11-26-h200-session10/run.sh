#!/bin/bash
# Session 10, call 3: main at 12050d7 (tensor-core LA/GLA/DeltaNet forward, chunk-parallel DeltaNet
# backward, documents in one call, fewer host syncs): device suite, benchmarks, training, sanitizers.
set -u
ROOT=$PWD; R=$(mktemp -d); W=$(mktemp -d)
B=$(mktemp -d); tar -xJf .gpu/bundle.tar.xz -C $B
[ -d data/cache/sotu-bytes ] || tar -xJf .gpu-data/data.tar.xz -C $ROOT
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d $SP/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
BIN=$B/bundle/bin
export LINATTN_BUILD_DIR=$BIN
[ -e /work/main ] || { mkdir -p /work && ln -s $ROOT /work/main; }
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout -k 3 $t "$@" > $R/$name.txt 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a $R/summary.txt
  tar -czf $OUT/results.tgz -C $R .
}
step test_cuda 40 $BIN/test_cuda
step bench_mixers_f32 30 $BIN/linattn-bench mixers --device cuda --precision f32 --max-t 2048
step bench_mixers_bf16 30 $BIN/linattn-bench mixers --device cuda --precision bf16 --max-t 2048
step test_train_gpu 40 $BIN/test_train --gtest_filter='CudaTraining.*:Communicator.*:CudaDataParallel.*'
step default_300 20 $BIN/linattn-train configs/default.yaml --set train.device=cuda --set train.max_steps=300 --set train.eval_every=0 --set train.sample_every=0 --out $W/f
T="$BIN/linattn-train configs/bench.yaml --set train.device=cuda --set data.document_boundaries=cross"
step bench_tf32 15 $T --set train.tf32=true --out $W/b
step bench_bf16 15 $T --set train.precision=bf16 --out $W/c
M="--set model.hidden_size=768 --set model.num_hidden_layers=12 --set model.num_heads=12 --set data.seq_len=2048 --set train.max_steps=8 --set train.log_every=1"
step m85_tf32 20 $T $M --set train.tf32=true --set train.log_grad_norms=true --out $W/d
step m85_bf16 20 $T $M --set train.precision=bf16 --set train.log_grad_norms=true --out $W/e
step memcheck 40 compute-sanitizer --tool memcheck $BIN/test_cuda --gtest_brief=1 --gtest_filter='CudaChunkPrecision*:CudaDeltaNet*:CudaDocuments*:CudaAttention*'
step racecheck 30 compute-sanitizer --tool racecheck $BIN/test_cuda --gtest_brief=1 --gtest_filter='CudaChunkPrecision.ToleranceCatchesAPerturbedInput/*:CudaDeltaNetPrecision.ToleranceCatchesAPerturbedInput/*:CudaDeltaNet.Float32MatchesTheCpuInFloat64'
cat $R/summary.txt
