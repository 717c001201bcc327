#!/bin/bash
# Second call: training on the GPU, the NCCL/Cuda* tests of test_train; all outputs in one archive.
set -u
ROOT=$PWD; R=$(mktemp -d)
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
  timeout -k 5 $t "$@" > $R/$name.txt 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a $R/summary.txt
  tar -czf $OUT/results.tgz -C $R .
}
step test_train_gpu 60 $BIN/test_train --gtest_filter='Communicator.*:Cuda*:Nccl*'
step train_bench 40 $BIN/linattn-train configs/bench.yaml --set train.device=cuda --out /tmp/r1
step train_bench_tf32 40 $BIN/linattn-train configs/bench.yaml --set train.device=cuda --set train.tf32=true --out /tmp/r2
step train_bench_cross 40 $BIN/linattn-train configs/bench.yaml --set train.device=cuda --set train.tf32=true --set data.document_boundaries=cross --out /tmp/r2c
step train_125m 60 $BIN/linattn-train configs/bench.yaml --set train.device=cuda --set train.tf32=true \
  --set model.hidden_size=768 --set model.num_hidden_layers=12 --set model.num_heads=12 \
  --set data.seq_len=2048 --set train.max_steps=8 --set train.log_every=1 --out /tmp/r3
step train_default 60 $BIN/linattn-train configs/default.yaml --set train.device=cuda --set train.max_steps=300 \
  --set train.eval_every=0 --set train.sample_every=0 --out /tmp/r4
step bench_gdn_big 40 $BIN/linattn-bench mixers --device cuda --only gated_deltanet --max-t 2048
step ncu_gla 90 ncu --kernel-name regex:"scan_|chunk_" --launch-count 6 $BIN/linattn-bench mixers --device cuda --only gla --max-t 1024
