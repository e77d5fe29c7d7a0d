/* One thread; each round runs line A, then line B, then a progress point.
 * Both lines run the same kernel (spin.h): about A_STEPS and B_STEPS steps
 * (default 200,000 and 100,000, about 0.2 and 0.1 ms), each round's counts
 * drawn between 3/4 and 5/4 of them so that rounds never keep step with the
 * 1 ms sampling period (which would put every sample on the same line).
 * Known answer: speeding a line by x speeds the program by x times the
 * line's share of the round's time. The tests take that share from what
 * this program measures (the time of each line, printed at exit), never
 * from the step counts.
 * The program runs rounds for MS milliseconds of wall time, so a slower
 * machine does fewer rounds instead of running longer.
 * Usage: serial_ab MS [A_STEPS B_STEPS]
 * Prints at exit, in ns, the wall time (CLOCK_MONOTONIC) and this thread's
 * CPU time (CLOCK_THREAD_CPUTIME_ID) on each line and in the whole loop:
 *   serial_ab rounds=N a_wall_ns=.. b_wall_ns=.. a_cpu_ns=.. b_cpu_ns=.. loop_wall_ns=.. loop_cpu_ns=.. */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>

#include "spin.h"

uint64_t sink_7919;

/* n times a factor between 3/4 and 5/4 taken from the chain's high bits. */
static long jitter(long n, uint64_t x) { return n - n / 4 + (long)((uint64_t)n * ((x >> 40) % 512) / 1024); }

int main(int argc, char** argv) {
  uint64_t run_ns = (argc > 1 ? strtoull(argv[1], 0, 10) : 1000) * 1000000ull;
  long a = argc > 3 ? atol(argv[2]) : 200000;
  long b = argc > 3 ? atol(argv[3]) : 100000;
  uint64_t x = 7919, rounds = 0, a_wall = 0, b_wall = 0, a_cpu = 0, b_cpu = 0;
  uint64_t wall0 = wall_ns(), cpu0 = thread_cpu_ns(), w = wall0, c = cpu0;
  while (w - wall0 < run_ns) {
    long a_steps = jitter(a, x), b_steps = jitter(b, x * 31);
    SPIN(x, a_steps); /* LINE_A */
    uint64_t wa = wall_ns(), ca = thread_cpu_ns();
    SPIN(x, b_steps); /* LINE_B */
    uint64_t wb = wall_ns(), cb = thread_cpu_ns();
    COZ_PROGRESS_NAMED("round");
    a_wall += wa - w;
    b_wall += wb - wa;
    a_cpu += ca - c;
    b_cpu += cb - ca;
    w = wb;
    c = cb;
    rounds++;
  }
  sink_7919 = x;
  printf("serial_ab rounds=%llu a_wall_ns=%llu b_wall_ns=%llu a_cpu_ns=%llu b_cpu_ns=%llu loop_wall_ns=%llu "
         "loop_cpu_ns=%llu\n",
         (unsigned long long)rounds, (unsigned long long)a_wall, (unsigned long long)b_wall,
         (unsigned long long)a_cpu, (unsigned long long)b_cpu, (unsigned long long)(wall_ns() - wall0),
         (unsigned long long)(thread_cpu_ns() - cpu0));
  return 0;
}
