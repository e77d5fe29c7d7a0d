/* OpenMP: each round, a parallel loop (libgomp's threads, which wait for
 * work with futexes made by inline system calls) computes a chain per
 * element; one progress point per round; SECONDS of wall time.
 * Prints its user CPU time (all threads) on standard error.
 * Usage: omp_rounds SECONDS */
#include <coz.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double end = now() + (argc > 1 ? atof(argv[1]) : 1.0);
  unsigned long total = 0;
  while (now() < end) {
#pragma omp parallel for reduction(^ : total) num_threads(2)
    for (int e = 0; e < 64; e++) {
      unsigned long x = 7919 + e;
      for (int i = 0; i < 20000; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* OMP_BODY */
      total ^= x;
    }
    COZ_PROGRESS_NAMED("round");
  }
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  printf("omp rounds done %lu\n", total & 0);
  fprintf(stderr, "user_ms=%ld\n", ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000);
  return 0;
}
