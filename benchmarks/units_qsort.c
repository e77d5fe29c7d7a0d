/*
 * units_qsort: a library function called from two call sites. Each iteration
 * refills two arrays with pseudo-random keys (line FILL) and sorts them with
 * the C library's qsort(): na keys from line SORT_A, nb keys from line
 * SORT_B; the comparison function is in the program (line CMP). One
 * progress point per iteration.
 *
 * Known answers (`coz run --unit callsite`): making a call x cheaper gives
 * x times its share of the run. qsort's time is not proportional to the
 * number of keys, so the program times each call site ("parts": SORT_A,
 * SORT_B) and a script reads the real speedup off the measured shortening
 * of the call when fewer keys are sorted (na, nb). A line unit sees only
 * part of a call: the comparisons are on line CMP, qsort's own code
 * outside the scope is counted for the call site's line.
 *
 * Usage: units_qsort [iters=N] [na=KEYS] [nb=KEYS] [--short]
 */
#include "bench.h"
#include "coz.h"

static int cmp(const void *p, const void *q) {
  uint64_t a = *(const uint64_t *)p, b = *(const uint64_t *)q;
  return (a > b) - (a < b); /* KEY:CMP */
}

int main(int argc, char **argv) {
  static const char *const names[] = {"iters", "na", "nb", NULL};
  bench_check_args(argc, argv, names);
  int quick = bench_short(argc, argv);
  long iters = bench_arg(argc, argv, "iters", quick ? 60 : 600);
  long na = bench_arg(argc, argv, "na", 20000);
  long nb = bench_arg(argc, argv, "nb", 10000);
  uint64_t *ka = malloc(sizeof(uint64_t) * (size_t)(na ? na : 1));
  uint64_t *kb = malloc(sizeof(uint64_t) * (size_t)(nb ? nb : 1));
  if (!ka || !kb) return 1;

  double start = bench_now(), ta = 0, tb = 0;
  uint64_t x = 2305843009213693951ULL, sum = 0;
  for (long i = 0; i < iters; i++) {
    for (long k = 0; k < na; k++) ka[k] = x = x * 6364136223846793005ULL + 1442695040888963407ULL; /* KEY:FILL */
    for (long k = 0; k < nb; k++) kb[k] = x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    double t0 = bench_now();
    qsort(ka, (size_t)na, sizeof *ka, cmp); /* KEY:SORT_A */
    double t1 = bench_now();
    qsort(kb, (size_t)nb, sizeof *kb, cmp); /* KEY:SORT_B */
    double t2 = bench_now();
    ta += t1 - t0;
    tb += t2 - t1;
    sum += (na ? ka[na / 2] : 0) ^ (nb ? kb[nb / 2] : 0);
    COZ_PROGRESS_NAMED("units_qsort.iter");
  }
  static const char *const parts[] = {"SORT_A", "SORT_B"};
  double secs[] = {ta, tb};
  bench_report_parts("units_qsort", bench_now() - start, iters, sum, 2, parts, secs);
  free(ka);
  free(kb);
  return 0;
}
