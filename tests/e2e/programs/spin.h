/* The one CPU kernel of the known-answer test programs, and their clocks.
 *
 * SPIN(x, n): n steps of a dependent multiply-add chain kept in a register.
 * Each step waits for the one before, so a step costs the latency of one
 * 64-bit multiply and one add on every x86-64 CPU, whatever the alignment of
 * the loop, with no memory access (loops of volatile stores cost what store
 * forwarding and alignment make them cost, differently on each core). Every
 * key line uses this same code, so the ratio of two lines' costs is the same
 * on any CPU; the tests still take it from what the run measures. A macro,
 * so that its instructions belong to the source line that uses it. */
#ifndef SPIN_H
#define SPIN_H

#include <stdint.h>
#include <time.h>

/* Knuth's MMIX LCG constants: the chain cannot be folded by the compiler. */
#define SPIN(x, n)                                               \
  for (long spin_i_ = 0; spin_i_ < (long)(n); spin_i_++) {       \
    (x) = (x) * 6364136223846793005ULL + 1442695040888963407ULL; \
    __asm__ volatile("" : "+r"(x));                              \
  }

static inline uint64_t clock_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Wall time (CLOCK_MONOTONIC) and the calling thread's CPU time, in ns. */
static inline uint64_t wall_ns(void) { return clock_ns(CLOCK_MONOTONIC); }
static inline uint64_t thread_cpu_ns(void) { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

#endif
