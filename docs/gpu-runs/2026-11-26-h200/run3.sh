#!/bin/bash
# Third call: the training runs on the GPU (fresh run folders), reset and cross documents.
set -u
ROOT=$PWD; R=$(mktemp -d); W=$(mktemp -d)
B=$(mktemp -d); tar -xJf .gpu/bundle.tar.xz -C $B
[ -d data/cache/sotu-bytes ] || tar -xJf .gpu-data/data.tar.xz -C $ROOT
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d $SP/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
BIN=$B/bundle/bin
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout -k 5 $t "$@" --out $W/$name > $R/$name.txt 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a $R/summary.txt
  tar -czf $OUT/results.tgz -C $R .
}
T="$BIN/linattn-train configs/bench.yaml --set train.device=cuda"
step bench_f32 40 $T
step bench_tf32 40 $T --set train.tf32=true
step bench_tf32_cross 40 $T --set train.tf32=true --set data.document_boundaries=cross
step m125_tf32_cross 60 $T --set train.tf32=true --set model.hidden_size=768 --set model.num_hidden_layers=12 \
  --set model.num_heads=12 --set data.seq_len=2048 --set train.max_steps=8 --set train.log_every=1 --set data.document_boundaries=cross
step m125_tf32_reset 60 $T --set train.tf32=true --set model.hidden_size=768 --set model.num_hidden_layers=12 \
  --set model.num_heads=12 --set data.seq_len=2048 --set train.max_steps=8 --set train.log_every=1
D="$BIN/linattn-train configs/default.yaml --set train.device=cuda --set train.eval_every=0 --set train.sample_every=0"
step default_300 60 $D --set train.max_steps=300
step default_300_cross 60 $D --set train.max_steps=300 --set data.document_boundaries=cross
