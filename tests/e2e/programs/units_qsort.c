/* qsort, a library function, called from two lines: SORT_A sorts twice as
 * many numbers as SORT_B each round, and the comparator is this file's.
 * Runs for SECONDS of wall time; prints the CPU time each call site took,
 * measured around the calls (the known answer of each site's share).
 * Usage: units_qsort SECONDS [N_A N_B] */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int compare(const void* a, const void* b) {
  unsigned x = *(const unsigned*)a, y = *(const unsigned*)b; /* COMPARE */
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  size_t na = argc > 3 ? (size_t)atol(argv[2]) : 40000, nb = argc > 3 ? (size_t)atol(argv[3]) : 20000;
  size_t n = na > nb ? na : nb;
  unsigned* src = malloc(n * sizeof *src);
  unsigned* a = malloc(na * sizeof *a);
  unsigned* b = malloc(nb * sizeof *b);
  unsigned s = 12345;
  for (size_t i = 0; i < n; i++) src[i] = s = s * 1103515245u + 12345u;
  double ta = 0, tb = 0, end = now(CLOCK_MONOTONIC) + seconds;
  unsigned long rounds = 0;
  while (now(CLOCK_MONOTONIC) < end) {
    memcpy(a, src, na * sizeof *a);
    memcpy(b, src, nb * sizeof *b);
    double t0 = now(CLOCK_THREAD_CPUTIME_ID);
    qsort(a, na, sizeof *a, compare); /* SORT_A */
    double t1 = now(CLOCK_THREAD_CPUTIME_ID);
    qsort(b, nb, sizeof *b, compare); /* SORT_B */
    double t2 = now(CLOCK_THREAD_CPUTIME_ID);
    ta += t1 - t0;
    tb += t2 - t1;
    rounds++;
    COZ_PROGRESS_NAMED("round");
  }
  printf("units_qsort rounds=%lu a_ms=%.0f b_ms=%.0f cpu_ms=%.0f check=%u\n", rounds, ta * 1e3, tb * 1e3,
         now(CLOCK_THREAD_CPUTIME_ID) * 1e3, a[na / 2] ^ b[nb / 2]);
  return 0;
}
