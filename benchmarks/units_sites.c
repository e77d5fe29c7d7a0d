/*
 * units_sites: one helper called from two call sites with 2:1 work. Each
 * iteration calls work() from line SITE_A with a spin steps and from line
 * SITE_B with b = a / 2, then spends o spin steps of its own on line OTHER;
 * one progress point per iteration. work() spins on line WORK_LOOP.
 *
 * Known answers (units of virtual speedup, `coz run --unit`):
 *   - call site SITE_A by x: lowering that call's argument (a' = (1 - x) a)
 *     gives x times its share of the run (about 0.5 x with the defaults);
 *   - call site SITE_B by x: b' = (1 - x) b, about 0.25 x;
 *   - function work by x (both calls): a and b lowered, about 0.75 x; the
 *     line WORK_LOOP is the same code, so the same answer.
 *
 * Usage: units_sites [iters=N] [a=STEPS] [b=STEPS] [o=STEPS] [--short]
 */
#include "bench.h"
#include "coz.h"

__attribute__((noinline)) static uint64_t work(uint64_t x, long n) { /* KEY:FN_WORK */
  BENCH_SPIN(x, n); /* KEY:WORK_LOOP */
  return x;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"iters", "a", "b", "o", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long iters = bench_arg(argc, argv, "iters", quick ? 100 : 1000);
  long a = bench_arg(argc, argv, "a", 1000000);
  long b = bench_arg(argc, argv, "b", 500000);
  long o = bench_arg(argc, argv, "o", 500000);

  double start = bench_now();
  uint64_t x = 2147483647;
  for (long i = 0; i < iters; i++) {
    x = work(x, a); /* KEY:SITE_A */
    x = work(x, b); /* KEY:SITE_B */
    BENCH_SPIN(x, o); /* KEY:OTHER */
    COZ_PROGRESS_NAMED("units_sites.iter");
  }
  bench_report("units_sites", bench_now() - start, iters, x);
  return 0;
}
