/* A request loop measured with COZ_BEGIN/COZ_END: two worker threads each
 * serve requests made of a parse step and a lookup step.
 * Usage: requests SECONDS */
#include <coz.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

volatile unsigned long sink_4099;
static double seconds = 1.0;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void* worker(void* arg) {
  double end = now() + seconds;
  long served = 0;
  while (now() < end) {
    COZ_BEGIN("request");
    for (unsigned long i = 0; i < 300000; i++) sink_4099 += i; /* LINE_PARSE */
    for (unsigned long i = 0; i < 100000; i++) sink_4099 ^= i; /* LINE_LOOKUP */
    COZ_END("request");
    served++;
  }
  *(long*)arg = served;
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) seconds = atof(argv[1]);
  long a = 0, b = 0;
  pthread_t t1, t2;
  pthread_create(&t1, NULL, worker, &a);
  pthread_create(&t2, NULL, worker, &b);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  printf("requests served\n");
  return 0;
}
