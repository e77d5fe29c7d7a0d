/* Starts and joins N threads one after another (default 3000), then prints
 * how long each start and join took on average. Usage: thread_churn [N] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void* nothing(void* arg) { return arg; }

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 3000;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int i = 0; i < n; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, nothing, NULL) != 0) return 1;
    pthread_join(t, NULL);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  printf("{\"threads\":%d,\"elapsed_s\":%.6f,\"per_thread_us\":%.1f}\n", n, s, s * 1e6 / n);
  return 0;
}
