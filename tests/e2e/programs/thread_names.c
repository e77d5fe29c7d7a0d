/* Threads renamed in each way a program can: by themselves with
 * pthread_setname_np and with prctl(PR_SET_NAME) (a name longer than the
 * kernel's 15 bytes, cut), and by the main thread with pthread_setname_np
 * on another thread. Once all are renamed, each computes for SECONDS.
 * Usage: thread_names SECONDS */
#define _GNU_SOURCE
#include <coz.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

static pthread_barrier_t renamed;
static double seconds;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void* compute(void) {
  unsigned long x = 7949;
  double end = now() + seconds;
  while (now() < end) {
    for (int i = 0; i < 20000; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); }
    COZ_PROGRESS_NAMED("round");
  }
  return (void*)(x & 1);
}

static void* self_named(void* arg) {
  pthread_setname_np(pthread_self(), "by-setname");
  pthread_barrier_wait(&renamed);
  return compute();
}

static void* prctl_named(void* arg) {
  prctl(PR_SET_NAME, "by-prctl-and-cut-short");
  pthread_barrier_wait(&renamed);
  return compute();
}

static void* other_named(void* arg) {
  pthread_barrier_wait(&renamed);
  return compute();
}

int main(int argc, char** argv) {
  seconds = argc > 1 ? atof(argv[1]) : 1;
  pthread_barrier_init(&renamed, NULL, 4);
  pthread_t t[3];
  pthread_create(&t[0], NULL, self_named, NULL);
  pthread_create(&t[1], NULL, prctl_named, NULL);
  pthread_create(&t[2], NULL, other_named, NULL);
  pthread_setname_np(t[2], "by-main");
  pthread_barrier_wait(&renamed);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  return 0;
}
