/* A thread per task: starts N threads (default 150), two at a time, and
 * joins them; each runs MS milliseconds (default 3) of its own CPU time,
 * by its own clock, in user-mode work (the clock is read every 20,000
 * steps). Prints the threads' CPU time in all as one JSON line.
 * Usage: short_tasks [N] [MS] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double task_ms;
static uint64_t sink;

static double cpu_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void *task(void *arg) {
  uint64_t x = (uintptr_t)arg;
  double start = cpu_ms(), ran;
  while ((ran = cpu_ms() - start) < task_ms)
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
  __atomic_fetch_add(&sink, x, __ATOMIC_RELAXED);
  double *out = malloc(sizeof *out);
  *out = ran;
  return out;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 150;
  task_ms = argc > 2 ? atof(argv[2]) : 3;
  double total = 0;
  for (int i = 0; i < n; i += 2) {
    pthread_t t[2];
    int k = n - i < 2 ? n - i : 2;
    for (int j = 0; j < k; j++)
      if (pthread_create(&t[j], NULL, task, (void *)(uintptr_t)(i + j + 1)) != 0) return 1;
    for (int j = 0; j < k; j++) {
      void *r;
      pthread_join(t[j], &r);
      total += *(double *)r;
      free(r);
    }
  }
  printf("{\"threads\":%d,\"task_ms\":%g,\"cpu_ms\":%.1f}\n", n, task_ms, total);
  return 0;
}
