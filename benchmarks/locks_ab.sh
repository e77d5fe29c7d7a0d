#!/bin/bash
# The lock counters' cost, pinned: a lock program run plain and under
# `coz run --locks-only` with and without the counters (--no-lock-counters),
# with each libcoz.so given, all on CPU 1 (taskset -c 1: pinned runs vary
# much less than free ones on a 2-CPU VM), ROUNDS rounds, every mode once
# per round in turn. Prints each mode's median elapsed_s (the program's own).
#
# Usage: benchmarks/locks_ab.sh PROGRAM ROUNDS LIBCOZ...
#   e.g. benchmarks/locks_ab.sh build/benchmarks/locks_oversync 9 \
#          /tmp/before/libcoz.so build/libcoz/libcoz.so
# `coz` is the one on PATH (the checkout's .venv/bin/coz after bootstrap).
set -euo pipefail
[ $# -ge 3 ] || { sed -n 2,12p "$0" >&2; exit 2; }
program=$1 rounds=$2
shift 2
elapsed() { grep -o '"elapsed_s":[0-9.]*' | cut -d: -f2; }
declare -A runs
for _ in $(seq "$rounds"); do
  runs[plain]+="$(taskset -c 1 "$program" | elapsed) "
  for lib in "$@"; do
    for counters in on off; do
      extra=()
      [ "$counters" = off ] && extra=(--no-lock-counters)
      out=$(mktemp)
      runs["$lib counters $counters"]+="$(COZ_LIBRARY=$lib taskset -c 1 coz run --locks-only "${extra[@]}" \
        -o "$out" --- "$program" 2>/dev/null | elapsed) "
      rm -f "$out"
    done
  done
done
for mode in "${!runs[@]}"; do
  printf '%s: %s\n' "$mode" "$(tr ' ' '\n' <<<"${runs[$mode]}" | grep . | sort -n |
    awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}')"
done | sort
