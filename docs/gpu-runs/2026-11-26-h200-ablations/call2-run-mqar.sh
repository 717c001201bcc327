#!/bin/bash
# Session 10, call 2: the MQAR ablation at 500 steps (60 runs) on the GPU.
set -u
ROOT=$PWD; R=$(mktemp -d)
B=$(mktemp -d); tar -xJf .gpu/bundle.tar.xz -C $B
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d $SP/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
export BIN=$B/bundle/bin OUT_DIR=$R/ablations
mkdir -p data/cache/sotu-bytes && touch data/cache/sotu-bytes/train.bin   # run-ablations.sh checks for it; MQAR needs no corpus
( while sleep 20; do tar -czf $OUT/results.tgz -C $R . 2>/dev/null; done ) & LOOP=$!
SWEEPS=mqar MQAR_LIMIT=225 JOBS=8 bash .gpu-data/run-ablations.sh
kill $LOOP
tar -czf $OUT/results.tgz -C $R .
cat $R/ablations/summary.txt
