/*
 * calls_on_cpu: interposed calls that keep the thread on the CPU beside
 * calls that leave it. Thread `writer` rewrites 1 MiB of a file in
 * /dev/shm with pwrite for SECONDS: the kernel copies, the thread never
 * blocks. Thread `sleeper` sleeps 5 ms at a time for as long. The thread
 * table's `io` of the writer is then CPU time, and its `off` about 0; the
 * sleeper's `sleep` is time off the CPU, its `off` about the same. Thread
 * `idler` waits on a condition variable no one signals, until the process
 * exits: a wait still under way at the end, `sync` and `off` all along.
 *
 * Usage: calls_on_cpu [SECONDS=1]
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double seconds = 1.0;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *writer(void *arg) {
  (void)arg;
  size_t n = 1 << 20;
  char *buf = malloc(n);
  memset(buf, 7, n);
  char path[64];
  snprintf(path, sizeof path, "/dev/shm/calls_on_cpu.%d", (int)getpid());
  int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
  if (fd < 0) {
    perror(path);
    exit(2);
  }
  unlink(path);
  long writes = 0;
  for (double start = now(); now() - start < seconds; writes++)
    if (pwrite(fd, buf, n, 0) != (ssize_t)n) {
      perror("pwrite");
      exit(2);
    }
  close(fd);
  free(buf);
  printf("writes %ld\n", writes);
  return NULL;
}

static void *sleeper(void *arg) {
  (void)arg;
  struct timespec five_ms = {0, 5000000};
  for (double start = now(); now() - start < seconds;) nanosleep(&five_ms, NULL);
  return NULL;
}

static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t never = PTHREAD_COND_INITIALIZER;

static void *idler(void *arg) {
  (void)arg;
  pthread_mutex_lock(&idle_lock);
  for (;;) pthread_cond_wait(&never, &idle_lock);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) seconds = atof(argv[1]);
  pthread_t w, s, i;
  pthread_create(&i, NULL, idler, NULL);
  pthread_create(&w, NULL, writer, NULL);
  pthread_create(&s, NULL, sleeper, NULL);
  pthread_join(w, NULL);
  pthread_join(s, NULL);
  return 0;
}
