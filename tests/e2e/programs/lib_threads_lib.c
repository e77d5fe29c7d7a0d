/* The library of lib_threads.c: built as a distribution builds it (-O2,
 * frame pointers omitted, no -g). lib_compress works on a thread it starts
 * itself, through a frameless leaf. */
#include <pthread.h>
#include <stdint.h>

#include "spin.h"

static volatile uint64_t sink;

__attribute__((noinline)) static uint64_t encode(uint64_t x, long steps) {
  SPIN(x, steps);
  return x;
}

static void* worker(void* arg) {
  sink = encode(sink + 1, *(const long*)arg);
  return 0;
}

void lib_compress(long steps) {
  pthread_t t;
  if (pthread_create(&t, 0, worker, &steps) == 0) pthread_join(t, 0);
}
