# Sourced by the run scripts in docs/gpu-runs/next/, from the repository root on the GPU machine:
# unpacks the nvcc build that ../shared/tools/device-bundle made (.gpu/bundle.tar.xz) and sets
# BIN (its binaries), LINATTN_BUILD_DIR, LD_LIBRARY_PATH (its libraries, the Python wheels' CUDA
# libraries, the toolkit's), ROOT, R (the results folder) and W (a work folder), and defines
#   step NAME SECONDS COMMAND...
# which runs COMMAND into $R/NAME.txt under a time limit, appends its exit status and time to
# $R/summary.txt and packs $R into $OUT/results.tgz (so a run cut short still returns its steps).
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
