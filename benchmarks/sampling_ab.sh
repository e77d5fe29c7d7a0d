#!/bin/bash
# Sampling-only's in-program cost beside `perf record` recording the same
# kinds of data. ROUNDS rounds; in each, the program runs plain, then once
# in every mode, in turn. Prints each mode's median and mean, over rounds,
# of its run's `elapsed_s` (the program's own time) over the same round's
# plain run: a host that slows down for seconds moves a whole round, not
# one mode.
#
# Modes:
#   sampling         coz run --sampling-only
#   sampling_direct  the same runtime and environment without the launcher:
#                    bash starts the program and waits (the launcher's
#                    interpreter and helper are not running beside it)
#   locks            coz run --locks-only (the interposed calls, no perf event)
#   perf_fp          perf record -g: frame-pointer callchains
#   perf_dwarf       perf record --call-graph dwarf,2048: the user stack
#                    copied at each sample, as sampling-only copies it
#   perf_dwarf_switch  the same and --switch-events: the context-switch
#                    records sampling-only reads too
# Every perf record samples task-clock:u every 10 ms, sampling-only's
# default period.
#
# Usage: benchmarks/sampling_ab.sh PROGRAM ROUNDS [ARG...]
#   e.g. benchmarks/sampling_ab.sh build/benchmarks/pipeline 11
# `coz` is the one on PATH (the checkout's .venv/bin/coz after bootstrap);
# COZ_LIBRARY, if set, selects the runtime (the launcher's default otherwise).
set -euo pipefail
[ $# -ge 2 ] || { sed -n 2,27p "$0" >&2; exit 2; }
program=$1 rounds=$2
shift 2
command -v perf >/dev/null || { echo "sampling_ab.sh: perf is not installed" >&2; exit 2; }
command -v coz >/dev/null || { echo "sampling_ab.sh: no coz on PATH" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
elapsed() { grep -o '"elapsed_s":[0-9.]*' | cut -d: -f2; }

# The runtime's environment for --sampling-only, as the launcher builds it
# (the block a program under coz run starts with: the runtime takes the
# variables out of its environment once read), with bash as the launcher.
coz run --sampling-only -o "$tmp/env.coz" --- /bin/cat /proc/self/environ 2>/dev/null | tr '\0' '\n' |
  grep -E '^(COZ_|LD_PRELOAD=)' | grep -v '^COZ_LAUNCHER_PID=' >"$tmp/env"
direct() {
  (
    while IFS= read -r kv; do export "${kv?}"; done <"$tmp/env"
    export COZ_OUTPUT="$tmp/direct.coz" COZ_LAUNCHER_PID=$BASHPID
    "$program" "$@"  # a child of this subshell, which waits: not an exec
    true
  )
}

modes=(sampling sampling_direct locks perf_fp perf_dwarf perf_dwarf_switch)
run_mode() {
  case $1 in
    sampling) coz run --sampling-only -o "$tmp/p.coz" --- "$program" "${@:2}" 2>/dev/null ;;
    sampling_direct) direct "${@:2}" 2>/dev/null ;;
    locks) coz run --locks-only -o "$tmp/p.coz" --- "$program" "${@:2}" 2>/dev/null ;;
    perf_fp) perf record -q -e task-clock:u -c 10000000 -g -o "$tmp/p.data" -- "$program" "${@:2}" 2>/dev/null ;;
    perf_dwarf) perf record -q -e task-clock:u -c 10000000 --call-graph dwarf,2048 -o "$tmp/p.data" \
      -- "$program" "${@:2}" 2>/dev/null ;;
    perf_dwarf_switch) perf record -q -e task-clock:u -c 10000000 --call-graph dwarf,2048 --switch-events \
      -o "$tmp/p.data" -- "$program" "${@:2}" 2>/dev/null ;;
  esac
  rm -f "$tmp/p.coz" "$tmp/p.data" "$tmp/direct.coz"
}

: >"$tmp/ratios"
for _ in $(seq "$rounds"); do
  plain=$("$program" "$@" | elapsed)
  for m in "${modes[@]}"; do
    t=$(run_mode "$m" "$@" | elapsed)
    echo "$m $(awk -v a="$t" -v b="$plain" 'BEGIN {printf "%.4f", a / b}')" >>"$tmp/ratios"
  done
done
echo "# $(basename "$program"): in-program time over plain's in the same round, $rounds rounds"
for m in "${modes[@]}"; do
  awk -v m="$m" '$1 == m {print $2}' "$tmp/ratios" | sort -n |
    awk -v m="$m" '{v[NR] = $1; s += $1} END {printf "%-18s median x%.4f  mean x%.4f  (x%.3f to x%.3f)\n", m, v[int((NR + 1) / 2)], s / NR, v[1], v[NR]}'
done
