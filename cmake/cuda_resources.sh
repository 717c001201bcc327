#!/usr/bin/env bash
# Registers, shared memory and spills of every CUDA kernel (issue 24), in two steps that
# cmake/cuda_resources.cmake wires into the nvcc build:
#
#   cuda_resources.sh capture LOG_DIR NVCC ARGS...
#       The compiler launcher of the .cu files: runs the compile and keeps ptxas's report (nvcc
#       --resource-usage) in LOG_DIR/<source>.log. Warnings and errors still reach the build output.
#       It also compiles the file once more to PTX (nvcc -ptx, for the newest architecture built)
#       and keeps, per entry function, how many tensor-core instructions (wmma.mma, mma.sync,
#       wgmma.mma_async) its PTX holds, in LOG_DIR/<source>.log.tc.
#   cuda_resources.sh report TABLE ACCEPTED LOG...
#       Turns the reports into one table row per kernel and architecture, writes it to TABLE and
#       prints it, then fails naming every kernel that spills unless ACCEPTED lists it.
#   cuda_resources.sh count-mma ARCH PTX
#       The tensor-core instructions of each entry function of a PTX file (what capture keeps).
#   cuda_resources.sh tensor-cores TABLE LOG...
#       The tensor-core instruction counts of the kernels (LOG.tc), one row per kernel, in TABLE.
#       `linattn-bench gpu-plan` reads both tables.
#
# Only bash, awk and c++filt (binutils), which every machine that has nvcc also has.
set -euo pipefail

die() {
  echo "cuda_resources.sh: $*" >&2
  exit 2
}

capture() {
  local log_dir=$1
  shift
  # The object is named after the source (CMakeFiles/TARGET.dir/kernels/cuda/rope.cu.o), and so
  # is the log (LOG_DIR/kernels/cuda/rope.cu.log), where cuda_resources.cmake looks for it.
  local object="" previous=""
  for arg in "$@"; do
    [[ $previous == -o ]] && object=$arg
    previous=$arg
  done
  [[ -n $object ]] || die "capture: no '-o OBJECT' in the compile command: $*"
  local log="$log_dir/${object#*.dir/}"
  log="${log%.o}.log"
  mkdir -p "$(dirname "$log")"
  local status=0
  "$@" 2>"$log.partial" || status=$?
  # ptxas's per-function lines would bury the build output; everything else passes through.
  grep -v -e '^ptxas info' -e '^ *[0-9]* bytes stack frame' "$log.partial" >&2 || true
  mv "$log.partial" "$log"
  [[ $status == 0 ]] || return "$status"
  count_tensor_core_instructions "$log" "$@"
}

# The compile of `capture` once more, to PTX for the newest architecture it builds (-ptx takes one),
# without the dependency file; then per entry function the count of tensor-core instructions, in
# LOG.tc ("mangled-name<TAB>sm_NN<TAB>count"). A device function that an entry calls without
# inlining is not counted in the entry.
count_tensor_core_instructions() {
  local log=$1
  shift
  local args=() skip=0 arch=0 arg
  for arg in "$@"; do
    if ((skip)); then  # the value of -MT, -MF or -o
      skip=0
      continue
    fi
    case $arg in
      -MD | --resource-usage) ;;
      -MT | -MF) skip=1 ;;
      -o) args+=(-o "$log.ptx"); skip=1 ;;
      -c) args+=(-ptx) ;;
      --generate-code=arch=compute_*)
        local n=${arg#--generate-code=arch=compute_}
        n=${n%%,*}
        ((n > arch)) && arch=$n
        ;;
      *) args+=("$arg") ;;
    esac
  done
  ((arch > 0)) || die "capture: no --generate-code=arch=compute_NN in the compile command: $*"
  "${args[@]}" "-arch=compute_$arch" 2>/dev/null || die "capture: the PTX compile failed: ${args[*]} -arch=compute_$arch"
  count_mma "sm_$arch" "$log.ptx" >"$log.tc"
  rm -f "$log.ptx"
}

# "mangled-name<TAB>ARCH<TAB>count" for each entry function of a PTX file: its instructions that run
# on the tensor cores (wmma.mma, mma.sync, wgmma.mma_async, predicated or not). The lines of a .func
# (a device function not inlined) count for no entry.
count_mma() {
  awk -v arch="$1" '
    function flush() { if (entry != "") printf "%s\t%s\t%d\n", entry, arch, count }
    /^[ \t]*(\.visible[ \t]+|\.weak[ \t]+)?\.entry[ \t]/ {
      flush(); name = $0; sub(/^.*\.entry[ \t]+/, "", name); sub(/[ \t]*\(.*$/, "", name); entry = name; count = 0; next
    }
    /^[ \t]*(\.visible[ \t]+|\.weak[ \t]+)?\.func[ \t]/ { flush(); entry = ""; next }
    entry != "" && /^[ \t]*(@!?%p[0-9]+[ \t]+)?(wmma\.mma|mma\.sync|wgmma\.mma_async)/ { count++ }
    END { flush() }' "$2"
}

# One tab-separated line per function, in the columns of the table:
#   file  mangled-name  arch  registers  smem  spill-stores  spill-loads  stack  cmem  kind
# from ptxas's report, which reads (one block per entry function and architecture):
#   ptxas info    : Compiling entry function '_Z...' for 'sm_90'
#   ptxas info    : Function properties for _Z...
#       40 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
#   ptxas info    : Used 31 registers, used 1 barriers, 4096 bytes smem, 424 bytes cmem[0]
# followed by a "Function properties" block for each device function the entry calls without
# inlining (kind "function", listed only when it spills: it has no registers of its own to show).
parse_logs() {
  awk '
    function bytes(what) { return match($0, "[0-9]+ bytes " what) ? substr($0, RSTART, RLENGTH) + 0 : 0 }
    function first_seen(key, what) {
      if (key in kind) return
      order[++count] = key; kind[key] = what
      row[key, "regs"] = what == "kernel" ? 0 : "-"; row[key, "cmem"] = what == "kernel" ? 0 : "-"
    }
    FNR == 1 { file = FILENAME; sub(/.*\//, "", file); sub(/\.log$/, "", file); arch = "?"; entry = "" }
    /^ptxas info *: Compiling entry function / {
      split($0, quoted, "\047"); entry = quoted[2]; arch = quoted[4]
      first_seen(file SUBSEP entry SUBSEP arch, "kernel")
      next
    }
    /^ptxas info *: Function properties for / {
      key = file SUBSEP $NF SUBSEP arch
      first_seen(key, "function")
      next
    }
    /bytes stack frame/ {
      # A device function called from several entries is reported once per entry: keep the worst.
      if (bytes("stack frame") > row[key, "stack"]) row[key, "stack"] = bytes("stack frame")
      if (bytes("spill stores") > row[key, "stores"]) row[key, "stores"] = bytes("spill stores")
      if (bytes("spill loads") > row[key, "loads"]) row[key, "loads"] = bytes("spill loads")
      next
    }
    /^ptxas info *: Used [0-9]+ registers/ {
      key = file SUBSEP entry SUBSEP arch
      match($0, /Used [0-9]+/); row[key, "regs"] = substr($0, RSTART + 5, RLENGTH - 5) + 0
      row[key, "smem"] = bytes("smem")
      # Every constant bank the kernel uses: [0] holds its parameters, [2] the compiler constants.
      # ptxas 13 names no bank for sm_90: "-" there, not a 0 that nobody measured.
      cmem = "-"; rest = $0
      while (match(rest, /[0-9]+ bytes cmem/)) { cmem += substr(rest, RSTART, RLENGTH) + 0; rest = substr(rest, RSTART + RLENGTH) }
      row[key, "cmem"] = cmem
    }
    END {
      for (i = 1; i <= count; i++) {
        key = order[i]; split(key, part, SUBSEP)
        if (kind[key] == "function" && row[key, "stores"] + row[key, "loads"] == 0) continue
        printf "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", part[1], part[2], part[3], row[key, "regs"],
               row[key, "smem"], row[key, "stores"], row[key, "loads"], row[key, "stack"], row[key, "cmem"], kind[key]
      }
    }' "$@"
}

# linattn::cuda::(anonymous namespace)::rope_kernel<true>(float*, long) -> rope_kernel<true>:
# the file column says where it is, and a kernel's parameters are in its source.
shorten_names() {
  awk -F '\t' -v OFS='\t' '{
    name = $2
    gsub(/\(anonymous namespace\)::/, "", name)
    gsub(/linattn::cuda::/, "", name)
    gsub(/linattn::/, "", name)
    sub(/^void /, "", name)
    depth = 0
    for (i = 1; i <= length(name); i++) {
      c = substr(name, i, 1)
      if (c == "<") depth++
      else if (c == ">") depth--
      else if (c == "(" && depth == 0) { name = substr(name, 1, i - 1); break }
    }
    gsub(/, /, ",", name)
    while (sub(/> >/, ">>", name)) {}
    if ($10 == "function") name = name " (device function)"
    $2 = name; NF = 9
    print
  }'
}

# The table (markdown, aligned so that it also reads in a terminal) and the spill check.
check_spills() {
  local table=$1 accepted=$2 rows=$3
  awk -F '\t' -v accepted="$accepted" -v table="$table" '
    # A glob (* and ?) as an anchored awk regex.
    function glob_regex(glob,   out, i, c) {
      out = "^"
      for (i = 1; i <= length(glob); i++) {
        c = substr(glob, i, 1)
        if (c == "*") out = out ".*"
        else if (c == "?") out = out "."
        else if (index("\\.^$+()[]{}|/", c)) out = out "\\" c
        else out = out c
      }
      return out "$"
    }
    FILENAME == accepted {
      if ($0 ~ /^[ \t]*(#|$)/) next
      if (split($0, word, /[ \t]+/) < 4 || word[2] !~ /^(sm_[0-9]+a?|\*)$/ || word[3] !~ /^[0-9]+$/) {
        printf "%s:%d: expected \"KERNEL-GLOB ARCH MAX-BYTES REASON\" (ARCH like sm_90, or *), got: %s\n", accepted, FNR, $0 > "/dev/stderr"
        bad_list = 1; next
      }
      n_accepted++; pattern[n_accepted] = glob_regex(word[1]); pattern_arch[n_accepted] = word[2]
      pattern_bytes[n_accepted] = word[3]; pattern_line[n_accepted] = FNR; pattern_text[n_accepted] = word[1] " " word[2]
      next
    }
    {
      n++; for (c = 1; c <= 9; c++) cell[n, c] = $c
      built_arch[$3] = 1
      spilled = $6 + $7
      if (spilled == 0) next
      name = $2; sub(/ \(device function\)$/, "", name)
      for (a = 1; a <= n_accepted; a++)
        if (name ~ pattern[a] && (pattern_arch[a] == "*" || pattern_arch[a] == $3)) break
      if (a <= n_accepted) used[a] = 1
      if (a <= n_accepted && spilled <= pattern_bytes[a]) { cell[n, 10] = "accepted (line " pattern_line[a] ")"; next }
      cell[n, 10] = "NOT ACCEPTED"
      refused = refused sprintf("  %s  %s  %s: %d bytes spill stores + %d bytes spill loads", $1, name, $3, $6, $7)
      if (a <= n_accepted)
        refused = refused sprintf(", more than the %d bytes that line %d accepts", pattern_bytes[a], pattern_line[a])
      refused = refused "\n"
      suggestion = sprintf("  %s %s %d <why this spill costs nothing that matters>\n", name, $3, spilled)
      if (!(suggestion in suggested)) { suggested[suggestion] = 1; accept_lines = accept_lines suggestion }
    }
    END {
      split("file|kernel|arch|registers|static smem (B)|spill stores (B)|spill loads (B)|stack (B)|cmem (B)|spill check", head, "|")
      for (c = 1; c <= 10; c++) width[c] = length(head[c])
      for (r = 1; r <= n; r++) for (c = 1; c <= 10; c++) if (length(cell[r, c]) > width[c]) width[c] = length(cell[r, c])
      line = "|"; rule = "|"
      for (c = 1; c <= 10; c++) {
        line = line sprintf(" %-" width[c] "s |", head[c])
        dashes = sprintf("%" width[c] "s", ""); gsub(/ /, "-", dashes)
        rule = rule " " (c >= 4 && c <= 9 ? substr(dashes, 2) ":" : dashes) " |"  # numbers align right
      }
      print line > table; print rule > table
      for (r = 1; r <= n; r++) {
        line = "|"
        for (c = 1; c <= 10; c++) line = line sprintf(c >= 4 && c <= 9 ? " %" width[c] "s |" : " %-" width[c] "s |", cell[r, c])
        print line > table
      }
      close(table)
      while ((getline line < table) > 0) print line
      for (a = 1; a <= n_accepted; a++)
        if (!used[a] && (pattern_arch[a] == "*" || pattern_arch[a] in built_arch))
          printf "warning: %s:%d: \"%s\" accepts a spill that no kernel has any more: delete the line\n", accepted, pattern_line[a], pattern_text[a]
      fflush()
      if (refused != "") {
        printf "error: these kernels spill registers to local memory, and %s does not accept the spills:\n%s", accepted, refused > "/dev/stderr"
        printf "Lower the register pressure (fewer values live across the main loop, smaller tiles, __launch_bounds__),\n" > "/dev/stderr"
        printf "or, where the spill costs nothing that matters (say where the reloads are), accept it in %s:\n%s", accepted, accept_lines > "/dev/stderr"
        exit 1
      }
      if (bad_list) exit 2
    }' "$accepted" "$rows"
}

report() {
  local table=$1 accepted=$2
  shift 2
  [[ -f $accepted ]] || die "report: no list of accepted spills at $accepted"
  local log
  for log in "$@"; do
    [[ -f $log ]] || die "report: no ptxas report $log: its object was compiled without the launcher of cmake/cuda_resources.cmake; delete the object (or touch its .cu) and build again"
  done
  rows=$(mktemp)
  trap 'rm -f "$rows"' EXIT
  parse_logs "$@" | c++filt | shorten_names | LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2 -k3,3 >"$rows"
  echo "Kernel resources, one row per kernel and architecture ($table):"
  check_spills "$table" "$accepted" "$rows"
}

# One row per kernel: file, kernel, arch, the tensor-core instructions of its PTX.
tensor_cores() {
  local table=$1
  shift
  local log
  {
    echo "| file | kernel | arch | tensor-core instructions (PTX) |"
    echo "| --- | --- | --- | ---: |"
    for log in "$@"; do
      [[ -f $log.tc ]] || die "tensor-cores: no $log.tc: its object was compiled without the launcher of cmake/cuda_resources.cmake; delete the object (or touch its .cu) and build again"
      local file=${log##*/}
      file=${file%.log}
      # the columns shorten_names expects: file, name, arch, then the count, padded to its 10
      awk -F '\t' -v OFS='\t' -v file="$file" '{ print file, $1, $2, $3, "", "", "", "", "", "kernel" }' "$log.tc"
    done | c++filt | shorten_names | LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2 -k3,3 |
      awk -F '\t' '{ printf "| %s | %s | %s | %d |\n", $1, $2, $3, $4 }'
  } >"$table"
}

case "${1:-}" in
  capture) shift; [[ $# -ge 2 ]] || die "usage: cuda_resources.sh capture LOG_DIR NVCC ARGS..."; capture "$@" ;;
  report) shift; [[ $# -ge 2 ]] || die "usage: cuda_resources.sh report TABLE ACCEPTED LOG..."; report "$@" ;;
  count-mma) shift; [[ $# -eq 2 ]] || die "usage: cuda_resources.sh count-mma ARCH PTX"; count_mma "$@" ;;
  tensor-cores) shift; [[ $# -ge 1 ]] || die "usage: cuda_resources.sh tensor-cores TABLE LOG..."; tensor_cores "$@" ;;
  *) die "usage: cuda_resources.sh capture LOG_DIR NVCC ARGS... | report TABLE ACCEPTED LOG... | tensor-cores TABLE LOG..." ;;
esac
