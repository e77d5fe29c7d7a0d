/*
 * serial_chain: one thread, a chain of two lines per iteration. Line A costs
 * a (about 2/3 of the time by default), line B costs b (about 1/3).
 *
 * Known answer (defaults a=1400000, b=700000 spin steps):
 *   - speeding line A by x: program speedup x * a/(a+b) = 2x/3
 *     (16.7% at 25%, 33.3% at 50%, 50% at 75%);
 *   - speeding line B by x: x/3 (8.3%, 16.7%, 25%).
 *
 * Usage: serial_chain [iters=N] [a=STEPS] [b=STEPS] [--short]
 */
#include "bench.h"
#include "coz.h"

int main(int argc, char **argv) {
  static const char *const names[] = {"iters", "a", "b", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long iters = bench_arg(argc, argv, "iters", quick ? 50 : 1000);
  long a = bench_arg(argc, argv, "a", 1400000);
  long b = bench_arg(argc, argv, "b", 700000);

  uint64_t x = 31337;
  double start = bench_now();
  for (long i = 0; i < iters; i++) {
    BENCH_SPIN(x, a); /* KEY:A */
    BENCH_SPIN(x, b); /* KEY:B */
    COZ_PROGRESS_NAMED("serial_chain.iter");
  }
  bench_report("serial_chain", bench_now() - start, iters, x);
  return 0;
}
