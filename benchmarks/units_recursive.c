/*
 * units_recursive: a recursive function. Each iteration calls walk() from
 * line TOP_CALL; walk(depth) spins s steps on line STEP, calls itself with
 * depth - 1 on line REC_CALL (while depth > 0), then spins t steps on line
 * AFTER (so the call is not a tail call); main also spins o steps on line
 * OTHER. One progress point per iteration.
 *
 * A sample deep in the recursion has walk() many times on its stack and
 * REC_CALL many times: it counts once for the function and once for the
 * call site (issue 12).
 *
 * Known answers (`coz run --unit`):
 *   - function walk by x: all of walk's work x cheaper (s' = (1 - x) s,
 *     t' = (1 - x) t): x times its share of the run (about 0.8 x);
 *   - call site REC_CALL by x: everything below the outermost level x
 *     cheaper (inner=(1 - x) 1000: the levels below the top spin
 *     inner/1000 of s and t): x times that share (depth/(depth + 1) of
 *     walk's share, about 0.7 x with the defaults);
 *   - call site TOP_CALL: the same as the function.
 *
 * Usage: units_recursive [iters=N] [depth=N] [s=STEPS] [t=STEPS] [o=STEPS] [inner=PERMILLE] [--short]
 */
#include "bench.h"
#include "coz.h"

static long s_steps, t_steps, inner_permille;

__attribute__((noinline)) static uint64_t walk(uint64_t x, long depth, int top) { /* KEY:FN_WALK */
  long s = top ? s_steps : s_steps * inner_permille / 1000;
  long t = top ? t_steps : t_steps * inner_permille / 1000;
  BENCH_SPIN(x, s); /* KEY:STEP */
  if (depth > 0) x = walk(x, depth - 1, 0); /* KEY:REC_CALL */
  BENCH_SPIN(x, t); /* KEY:AFTER */
  return x;
}

int main(int argc, char **argv) {
  static const char *const names[] = {"iters", "depth", "s", "t", "o", "inner", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long iters = bench_arg(argc, argv, "iters", quick ? 100 : 1000);
  long depth = bench_arg(argc, argv, "depth", 7);
  s_steps = bench_arg(argc, argv, "s", 150000);
  t_steps = bench_arg(argc, argv, "t", 50000);
  long o = bench_arg(argc, argv, "o", 400000);
  inner_permille = bench_arg(argc, argv, "inner", 1000);

  double start = bench_now();
  uint64_t x = 67280421310721ULL;
  for (long i = 0; i < iters; i++) {
    x = walk(x, depth, 1); /* KEY:TOP_CALL */
    BENCH_SPIN(x, o); /* KEY:OTHER */
    COZ_PROGRESS_NAMED("units_recursive.iter");
  }
  bench_report("units_recursive", bench_now() - start, iters, x);
  return 0;
}
