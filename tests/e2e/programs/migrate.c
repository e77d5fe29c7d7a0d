/* Moves its one worker thread between the first two allowed CPUs `n` times
 * (sched_setaffinity), spinning a little on each, then prints the kernel's
 * own count of the worker's migrations (se.nr_migrations) and the main
 * thread's, read by the threads themselves. Usage: migrate N */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static int cpus[2];
static long moves;

static long own_migrations(void) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/self/task/%ld/sched", (long)syscall(SYS_gettid));
  FILE* f = fopen(path, "r");
  long v = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "se.nr_migrations", 16) == 0) v = strtol(strchr(line, ':') + 1, NULL, 10);
  if (f) fclose(f);
  return v;
}

static void* worker(void* arg) {
  volatile unsigned long x = 0;
  for (long i = 0; i < moves; i++) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpus[i % 2], &s);
    if (sched_setaffinity(0, sizeof s, &s) != 0) return NULL;
    for (int k = 0; k < 200000; k++) x += k;
  }
  *(long*)arg = own_migrations();
  return NULL;
}

int main(int argc, char** argv) {
  moves = argc > 1 ? atol(argv[1]) : 200;
  cpu_set_t all;
  sched_getaffinity(0, sizeof all, &all);
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < 2; c++)
    if (CPU_ISSET(c, &all)) cpus[n++] = c;
  if (n < 2) {
    printf("{\"cpus\":1}\n");
    return 0;
  }
  long worker_migrations = -1;
  pthread_t t;
  pthread_create(&t, NULL, worker, &worker_migrations);
  pthread_join(t, NULL);
  printf("{\"cpus\":2,\"worker\":%ld,\"main\":%ld}\n", worker_migrations, own_migrations());
  return 0;
}
