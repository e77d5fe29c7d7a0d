/*
 * offcpu_sleep: compute, then sleep. One thread; each iteration spends c spin
 * steps on line CPU, then nanosleep()s sleep_us microseconds on line SLEEP;
 * one progress point per iteration.
 *
 * Known answer: both lines are on the critical path. Shortening the sleep
 * by x shortens each iteration by x times the time really slept, so the
 * program speedup is x times the sleep's share of the run (about 0.45 x
 * with the defaults here). The program times its sleeps ("parts": SLEEP,
 * wall seconds in nanosleep, which includes the kernel's timer slack), so a
 * script can tell how much shorter the sleep really got with a smaller
 * sleep_us. A CPU sampler sees no time on SLEEP: only off-CPU samples can
 * predict it.
 *
 * Usage: offcpu_sleep [iters=N] [c=STEPS] [sleep_us=N] [--short]
 */
#include <time.h>

#include "bench.h"
#include "coz.h"

int main(int argc, char **argv) {
  static const char *const names[] = {"iters", "c", "sleep_us", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long iters = bench_arg(argc, argv, "iters", quick ? 100 : 1000);
  long c = bench_arg(argc, argv, "c", 1000000);
  long sleep_us = bench_arg(argc, argv, "sleep_us", 1000);
  struct timespec ts = {sleep_us / 1000000, (sleep_us % 1000000) * 1000};

  double start = bench_now(), slept = 0;
  uint64_t x = 1000003;
  for (long i = 0; i < iters; i++) {
    BENCH_SPIN(x, c); /* KEY:CPU */
    double t0 = bench_now();
    if (sleep_us) nanosleep(&ts, NULL); /* KEY:SLEEP */
    slept += bench_now() - t0;
    COZ_PROGRESS_NAMED("offcpu_sleep.iter");
  }
  static const char *const parts[] = {"SLEEP"};
  bench_report_parts("offcpu_sleep", bench_now() - start, iters, x, 1, parts, &slept);
  return 0;
}
