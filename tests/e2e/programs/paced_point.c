/* A progress point visited on a fixed schedule: every PERIOD_US
 * microseconds (absolute deadlines, so late wake-ups do not accumulate),
 * after a little work on line HOT. Its true rate is 1e6 / PERIOD_US visits
 * a second whatever the machine.
 * Usage: paced_point SECONDS PERIOD_US */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  long period_ns = (argc > 2 ? atol(argv[2]) : 7000) * 1000L;
  unsigned long x = 7927;
  struct timespec next;
  clock_gettime(CLOCK_MONOTONIC, &next);
  long ticks = (long)(seconds * 1e9 / period_ns);
  for (long t = 0; t < ticks; t++) {
    for (int i = 0; i < 20000; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* HOT */
    next.tv_nsec += period_ns;
    while (next.tv_nsec >= 1000000000L) {
      next.tv_nsec -= 1000000000L;
      next.tv_sec++;
    }
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
    COZ_PROGRESS_NAMED("tick");
  }
  printf("paced_point %lu\n", x % 1000);
  return 0;
}
