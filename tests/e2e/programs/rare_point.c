/* A loop with a frequent progress point ("round") that runs for SECONDS
 * seconds, then one line (FINAL) reached once, at the end: a --progress point
 * on FINAL is registered at start but not visited while the loop runs.
 * Usage: rare_point SECONDS */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  unsigned long x = 7927, rounds = 0;
  double end = now() + seconds;
  while (now() < end) {
    for (int i = 0; i < 20000; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* HOT */
    rounds++;
    COZ_PROGRESS_NAMED("round");
  }
  printf("rare_point %lu\n", x % 1000); /* FINAL */
  return 0;
}
