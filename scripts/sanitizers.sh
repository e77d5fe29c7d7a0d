#!/bin/sh
# Builds the unit tests under AddressSanitizer + UndefinedBehaviorSanitizer
# and under ThreadSanitizer (the CMake options COZ_ASAN / COZ_TSAN), and
# runs them. About 40 s per sanitizer on 2 idle cores. The default pytest run
# does the ASan+UBSan half (tests/e2e/test_hostile_sanitizers.py).
#
#   scripts/sanitizers.sh [BUILD_ROOT]     (default: /tmp/coz-sanitizers)
#   COZ_SANITIZERS="ASAN" scripts/sanitizers.sh ...   (one of them only)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
root=${1:-/tmp/coz-sanitizers}
mkdir -p "$root"

# Objects the runtime hands out for the life of the process on purpose:
# progress counters (programs keep pointers to them). (Address-range sets,
# read by signal handlers and never freed, are marked for LeakSanitizer by
# the runtime itself: libcoz/kept.h.)
supp="$root/lsan.supp"
cat > "$supp" <<'SUPP'
leak:coz::ProgressRegistry::counter
SUPP

# GCC 12's ThreadSanitizer fails a CHECK of its own in pthread_tryjoin_np
# when the thread still runs (its interceptor looks the thread up as tid -1
# and stops the process): the one test that tries to join a running thread
# is left to the ASan run and the plain one.
tsan_filter="-Locks.JoinTriesSayWhetherTheThreadStillRuns"

status=0
for san in ${COZ_SANITIZERS:-ASAN TSAN}; do
  dir="$root/$san"
  echo "== COZ_$san=ON: building coz_unit_tests in $dir"
  cmake -S "$src" -B "$dir" -G Ninja -DCOZ_$san=ON >/dev/null
  ninja -C "$dir" coz_unit_tests
  echo "== COZ_$san=ON: running"
  filter=""
  if [ "$san" = TSAN ]; then filter="--gtest_filter=$tsan_filter"; fi
  if ASAN_OPTIONS=abort_on_error=0:detect_leaks=1 LSAN_OPTIONS=suppressions="$supp" \
     UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 TSAN_OPTIONS=halt_on_error=1 \
     "$dir/tests/unit/coz_unit_tests" $filter; then
    echo "== COZ_$san=ON: passed"
  else
    echo "== COZ_$san=ON: FAILED"
    status=1
  fi
done
exit $status
