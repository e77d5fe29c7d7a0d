#!/usr/bin/env bash
# Every benchmark figure that docs/benchmarks.md and docs/locks.md quote, from
# ONE invocation: the scripts run one after the other (never in parallel, so
# none measures another's load), ours beside upstream COZ where both apply.
#
#   benchmarks/run_all.sh OUTDIR [--build DIR] [--also NAME=LIBCOZ]...
#
# --also runs another libcoz.so (a build of an earlier commit) beside ours in
# accuracy.py: before and after in the same invocation. experiment_rate.py
# profiles for 30 s a run (its default is 45 s), so that the whole
# invocation stays near an hour on 2 CPUs. benchmarks/figures.py OUTDIR
# prints the Markdown of docs/benchmarks.md's generated figures.
#
# OUTDIR gets one log per script (its whole output, the JSON summary last)
# and header.txt: date, machine, kernel, load, commit and the exact commands,
# which the docs copy with the figures. Stop anything else that uses the CPUs
# first: the load average is recorded at the start and at the end.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
USAGE="usage: benchmarks/run_all.sh OUTDIR [--build DIR] [--also NAME=LIBCOZ]..."
OUT=${1:?$USAGE}
shift
BUILD=$ROOT/build
ALSO=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD=${2:?--build needs a directory}; shift 2 ;;
    --also) ALSO="$ALSO --also ${2:?--also needs NAME=LIBCOZ}"; shift 2 ;;
    *) echo "$USAGE" >&2; exit 2 ;;
  esac
done
PY=${COZ_PYTHON:-$ROOT/.venv/bin/python}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export PATH="$ROOT/.venv/bin:$PATH"

STEPS=(
  "accuracy.py --build $BUILD --keep-profiles $OUT/profiles$ALSO"
  "overhead.py --build $BUILD"
  "micro_waits.py --build $BUILD"
  "locks.py --build $BUILD"
  "experiment_rate.py --build $BUILD --seconds 30"
  "parse_bench.py"
  "conventional_bench.py"
  "real_xz.py --build $BUILD"
)

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, $(free -g | awk '/Mem:/ {print $2}') GiB"
  echo "kernel: $(uname -r); perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)"
  echo "os: $(. /etc/os-release && echo "$PRETTY_NAME"); $(cc --version | head -1)"
  echo "upstream: $(dpkg-query -W -f='coz-profiler ${Version}' coz-profiler 2>/dev/null || echo 'coz-profiler not installed')"
  echo "commit: $(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo ' (with uncommitted changes)')"
  echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "command: benchmarks/run_all.sh $OUT --build $BUILD$ALSO"
  for s in "${STEPS[@]}"; do echo "  python3 benchmarks/$s"; done
} > "$OUT/header.txt"
cat "$OUT/header.txt"

failed=0
for s in "${STEPS[@]}"; do
  name=${s%%.py*}
  start=$(date +%s)
  echo "==> $s" >&2
  # shellcheck disable=SC2086
  if ! "$PY" "$HERE"/$s > "$OUT/$name.log" 2>&1; then
    echo "    $name.py failed (see $OUT/$name.log)" >&2
    failed=1
  fi
  echo "    $(( $(date +%s) - start )) s" >&2
  echo "$name: $(( $(date +%s) - start )) s" >> "$OUT/header.txt"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/header.txt"
exit $failed
