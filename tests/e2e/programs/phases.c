/* The phase correction's known-answer program (docs/analysis.md, section 3).
 * One thread, rounds of SPIN work, one progress point per round, for SECONDS
 * of wall time.
 *
 *   mixed:  every round runs line LINE_A (2 units) then LINE_B (1 unit). No
 *           phases: each line's share of the run is its share of a round,
 *           so the correction must leave its curve alone (factor 1).
 *   phased: the run alternates between phases of N rounds of LINE_A alone
 *           (3 units) and N rounds of LINE_B alone (3 units), N set at the
 *           start so that a phase takes about PHASE_MS (a count of rounds,
 *           not a clock: a real speedup of LINE_A shortens its phases).
 *           Experiments on LINE_A run in its phases, where it is all the
 *           work; over the run it is only its phases' share of the time,
 *           which its share of the run's samples measures.
 *
 * Usage: phases SECONDS mixed|phased [PHASE_MS] */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spin.h"

#define UNIT 100000

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 1.0;
  int phased = argc > 2 && strcmp(argv[2], "phased") == 0;
  uint64_t phase_ns = (uint64_t)(argc > 3 ? atol(argv[3]) : 1000) * 1000000ull;
  uint64_t x = 7937, start = clock_ns(CLOCK_MONOTONIC), end = start + (uint64_t)(seconds * 1e9);
  /* N: rounds of 3 units in PHASE_MS, from the time of 20 rounds here. */
  uint64_t t0 = clock_ns(CLOCK_MONOTONIC);
  for (int i = 0; i < 20; i++) SPIN(x, 3 * UNIT);
  uint64_t n = phase_ns / ((clock_ns(CLOCK_MONOTONIC) - t0) / 20 + 1) + 1;
  for (uint64_t round = 0; clock_ns(CLOCK_MONOTONIC) < end; round++) {
    int a_phase = !phased || (round / n) % 2 == 0;
    long a = phased ? (a_phase ? 3 * UNIT : 0) : 2 * UNIT;
    long b = phased ? (a_phase ? 0 : 3 * UNIT) : UNIT;
    SPIN(x, a); /* LINE_A */
    SPIN(x, b); /* LINE_B */
    COZ_PROGRESS_NAMED("round");
  }
  printf("phases %llu\n", (unsigned long long)(x % 1000));
  return 0;
}
