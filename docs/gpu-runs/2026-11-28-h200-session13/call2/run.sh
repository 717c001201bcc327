#!/bin/bash
# Session 13, call 2 (about 4 minutes): the 1.3B configs' measured activation peaks against the
# predictions of call 1 (gdn-1.3b with its default selective recomputation, gla-1.3b with full), their
# tokens/s, and racecheck of GLA's kernels (call 1's filter matched no test).
# Usage as session13.sh: OUT=/some/dir docs/gpu-runs/next/session13b.sh
set -u
ROOT=$PWD; R=$(mktemp -d); W=$(mktemp -d)
B=$(mktemp -d); tar -xJf .gpu/bundle.tar.xz -C "$B"
SP=$(python3 -c 'import site;print(site.getsitepackages()[0])')
export LD_LIBRARY_PATH=$B/bundle/lib:$(ls -d "$SP"/nvidia/*/lib | tr '\n' ':')/usr/local/cuda/lib64
BIN=$B/bundle/bin
export LINATTN_BUILD_DIR=$BIN
[ -e /work/main ] || { mkdir -p /work && ln -s "$ROOT" /work/main; }
step() {
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  timeout -k 3 "$t" "$@" > "$R/$name.txt" 2>&1; local rc=$?
  echo "$name rc=$rc $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a "$R/summary.txt"
  tar -czf "$OUT/results.tgz" -C "$R" .
}
S="--set train.batch_size=8 --set train.max_steps=4 --set train.log_every=1 --set train.eval_every=0 --set data.val_tokens=16384"
step gdn13_train 140 "$BIN/linattn-train" configs/gdn-1.3b.yaml $S --out "$W/gdn"
rm -rf "$W/gdn"
step gla13_full_train 140 "$BIN/linattn-train" configs/gla-1.3b.yaml $S --set train.recompute=full --out "$W/glaf"
rm -rf "$W/glaf"
step racecheck 60 compute-sanitizer --tool racecheck "$BIN/test_cuda" --gtest_brief=1 --gtest_filter='CudaGla.*'
grep -h -E "^(memory|train|step +(1|4) )" "$R"/gdn13_train.txt "$R"/gla13_full_train.txt > "$R/training.txt"
cat "$R/summary.txt" "$R/training.txt"; tail -4 "$R/racecheck.txt"
