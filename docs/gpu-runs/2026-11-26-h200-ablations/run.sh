#!/bin/bash
# Both shipped ablations (issue 28; docs/ablations.md) on one GPU: configs/ablations/mqar.yaml (108
# runs) and configs/ablations/mixers.yaml (45 runs), each run on the GPU (train.device=cuda), JOBS
# runs at once. Run from the repository root, after the caller has unpacked the data
# (data/cache/sotu-bytes) and set LD_LIBRARY_PATH for the bundle's CUDA libraries.
#   BIN      folder of linattn-sweep and linattn-train (required)
#   OUT_DIR  where the sweep folders OUT_DIR/mqar and OUT_DIR/mixers go (required)
#   JOBS     runs at once (default 8)
#   MQAR_LIMIT, MIXERS_LIMIT  seconds each sweep may take before it is stopped with Ctrl-C
#            (default 75 and 120): a stopped sweep still writes results.md for the runs it finished,
#            and as the runs go seed by seed, it has every configuration at the first seeds
#   SWEEPS   which to run (default "mqar mixers")
#   DEVICE   train.device (default cuda; cpu for a check on a machine without a GPU)
#   MQAR_ARGS, MIXERS_ARGS  more linattn-sweep arguments for one sweep, e.g. "--only NAME" or
#            "--set train.max_tokens=4096" for a smoke test, "--set train.max_tokens=2048000" for
#            MQAR's earlier 500 steps (into another OUT_DIR)
#   RESUME_FROM  a folder holding earlier sweep folders (mqar/, mixers/), e.g. an earlier OUT_DIR:
#            each is copied into OUT_DIR first, so that its finished runs are skipped and only the
#            rest run (the sweep's own "Continue with")
# Expected on one H200 (not yet measured): each run starts CUDA and cuBLAS (about 1 s: the default
# model's 300-step run took 2.8 s in all, 1.5 s of it training); an MQAR run's 200 steps are
# launch-bound (a few ms each), so the 108 runs take about 30-60 s 8 at a time; the language models
# train at about 400K tokens/s (GLA, attention) and about 75K (DeltaNet and Gated DeltaNet, whose
# backward is a sequential scan: 3.3 us per token and layer in linattn-bench mixers), about
# 1.5 and 3.5 s of GPU time per run, so the 45 runs take 60-120 s. Processes share the GPU by time
# slices, so 8 at a time hide the launch and start-up gaps but do not add up GPU time.
# Afterwards OUT_DIR holds each sweep's folder (results.md, results.csv, the plots, and per run its
# config.yaml, metrics.jsonl and train.log; checkpoints are deleted), its log, and summary.txt.
set -u
: "${BIN:?set BIN to the folder of linattn-sweep and linattn-train}"
: "${OUT_DIR:?set OUT_DIR to the folder the sweeps write into}"
JOBS=${JOBS:-8}
MQAR_LIMIT=${MQAR_LIMIT:-75}
MIXERS_LIMIT=${MIXERS_LIMIT:-120}
SWEEPS=${SWEEPS:-mqar mixers}
DEVICE=${DEVICE:-cuda}
MQAR_ARGS=${MQAR_ARGS:-}
MIXERS_ARGS=${MIXERS_ARGS:-}
for f in linattn-sweep linattn-train; do
  [ -x "$BIN/$f" ] || { echo "run.sh: no $BIN/$f: set BIN to the bundle's bin folder" >&2; exit 1; }
done
for f in configs/ablations/mqar.yaml configs/ablations/mixers.yaml data/cache/sotu-bytes/train.bin; do
  [ -e "$f" ] || { echo "run.sh: no $f: run from the repository root, with the data unpacked" >&2; exit 1; }
done
mkdir -p "$OUT_DIR"
if [ -n "${RESUME_FROM:-}" ]; then
  for name in $SWEEPS; do
    if [ -d "$RESUME_FROM/$name" ]; then cp -r "$RESUME_FROM/$name" "$OUT_DIR/"; fi
  done
fi
{ date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1; nproc; } > "$OUT_DIR/machine.txt"

# On a GPU each process needs little of the CPU: 2 threads each (all cores each would oversubscribe
# 16 cores JOBS times). Checkpoints only at the end (and on Ctrl-C), deleted afterwards: 45 of the
# language models' would be 2 GB.
COMMON="--jobs $JOBS --set train.device=$DEVICE --set train.threads=2 --set checkpoint.every=0"
sweep() {
  local name=$1 file=$2 limit=$3 args=$4
  local start=$(date +%s%N)
  "$BIN/linattn-sweep" "$file" $COMMON $args --out "$OUT_DIR/$name" > "$OUT_DIR/$name.log" 2>&1 &
  local pid=$!
  # A Ctrl-C at the limit: the running runs stop after their step and the sweep writes its results;
  # 15 s later a second one stops them at once; 10 s after that the sweep is killed (its runs get
  # SIGTERM).
  ( sleep "$limit"; kill -INT $pid; sleep 15; kill -INT $pid; sleep 10; kill -KILL $pid ) 2>/dev/null &
  local watcher=$!
  wait $pid
  local rc=$?
  kill $watcher 2>/dev/null
  find "$OUT_DIR/$name" -mindepth 2 -maxdepth 2 -type d -name checkpoints -exec rm -rf {} + 2>/dev/null
  echo "$name rc=$rc $(( ($(date +%s%N) - start) / 1000000 )) ms, $(grep -c ': done in ' "$OUT_DIR/$name.log") runs done" \
    | tee -a "$OUT_DIR/summary.txt"
  tail -n 1 "$OUT_DIR/$name.log" | tee -a "$OUT_DIR/summary.txt"
}
for name in $SWEEPS; do
  case $name in
    mqar) sweep mqar configs/ablations/mqar.yaml "$MQAR_LIMIT" "$MQAR_ARGS" ;;
    mixers) sweep mixers configs/ablations/mixers.yaml "$MIXERS_LIMIT" "$MIXERS_ARGS" ;;
    *) echo "run.sh: SWEEPS: no sweep '$name' (mqar, mixers)" >&2; exit 1 ;;
  esac
done
