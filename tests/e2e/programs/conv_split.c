/* Known split for the conventional profile (tests/e2e/test_conventional_profile.py).
 *
 * The main thread calls conv_alpha_7919() and conv_beta_7927() in turns; beta's
 * work is an always-inlined kernel, conv_kernel_7933(), so that it shows as an
 * inlined frame. A worker thread started with conv_worker_7937() runs
 * conv_gamma_7949(), and a third thread, conv_napper_7951(), sleeps in
 * nanosleep for most of the run. Runs for SECONDS of wall time, whatever the
 * machine's speed.
 *
 * The program measures its own split: each function's thread CPU time
 * (CLOCK_THREAD_CPUTIME_ID around every call) and the napper's time asleep
 * (CLOCK_MONOTONIC around every nanosleep), and prints them on stdout as one
 * JSON object at the end. The tests compare the profile with these figures.
 * Usage: conv_split SECONDS */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double seconds = 1.0;
static volatile int stop;

static long long ns_of(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline __attribute__((always_inline)) unsigned long conv_kernel_7933(unsigned long x, long steps) {
  for (long i = 0; i < steps; i++) {
    x = x * 2862933555777941757ul + 3037000493ul; /* KERNEL */
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

__attribute__((noinline)) unsigned long conv_alpha_7919(unsigned long x, long steps) {
  for (long i = 0; i < steps; i++) {
    x = x * 6364136223846793005ul + 1442695040888963407ul; /* ALPHA */
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

__attribute__((noinline)) unsigned long conv_beta_7927(unsigned long x, long steps) {
  x ^= 0x9e3779b97f4a7c15ul;
  return conv_kernel_7933(x, steps); /* BETA */
}

__attribute__((noinline)) unsigned long conv_gamma_7949(unsigned long x, long steps) {
  for (long i = 0; i < steps; i++) {
    x = x * 3935559000370003845ul + 2691343689449507681ul; /* GAMMA */
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}

static long long gamma_ns, nap_ns;

static void* conv_worker_7937(void* arg) {
  (void)arg;
  unsigned long x = 3;
  while (!stop) {
    long long t0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
    x = conv_gamma_7949(x, 150000);
    gamma_ns += ns_of(CLOCK_THREAD_CPUTIME_ID) - t0;
  }
  return (void*)x;
}

__attribute__((noinline)) static void conv_nap_7963(void) {
  struct timespec ts = {0, 20 * 1000 * 1000};
  long long t0 = ns_of(CLOCK_MONOTONIC);
  nanosleep(&ts, NULL); /* NAP */
  nap_ns += ns_of(CLOCK_MONOTONIC) - t0;
}

static void* conv_napper_7951(void* arg) {
  (void)arg;
  while (!stop) conv_nap_7963();
  return NULL;
}

int main(int argc, char** argv) {
  if (argc > 1) seconds = atof(argv[1]);
  pthread_t worker, napper;
  pthread_create(&worker, NULL, conv_worker_7937, NULL);
  pthread_create(&napper, NULL, conv_napper_7951, NULL);
  long long alpha_ns = 0, beta_ns = 0;
  unsigned long x = 11;
  long long end = ns_of(CLOCK_MONOTONIC) + (long long)(seconds * 1e9);
  while (ns_of(CLOCK_MONOTONIC) < end) {
    long long t0 = ns_of(CLOCK_THREAD_CPUTIME_ID);
    x = conv_alpha_7919(x, 200000);
    long long t1 = ns_of(CLOCK_THREAD_CPUTIME_ID);
    x = conv_beta_7927(x, 100000);
    long long t2 = ns_of(CLOCK_THREAD_CPUTIME_ID);
    alpha_ns += t1 - t0;
    beta_ns += t2 - t1;
  }
  stop = 1;
  void* wx;
  pthread_join(worker, &wx);
  pthread_join(napper, NULL);
  printf("{\"alpha_ns\": %lld, \"beta_ns\": %lld, \"gamma_ns\": %lld, \"nap_ns\": %lld, \"x\": %lu}\n",
         alpha_ns, beta_ns, gamma_ns, nap_ns, (x ^ (unsigned long)wx) % 1000);
  return 0;
}
