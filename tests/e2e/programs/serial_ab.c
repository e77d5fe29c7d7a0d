/* One thread; each round runs line A (about 2/3 of the round) then line B
 * (about 1/3). Known answer: speeding A by x speeds the program by 2x/3;
 * speeding B by x, by x/3.
 * Usage: serial_ab ROUNDS [A_STEPS B_STEPS] */
#include <coz.h>
#include <stdio.h>
#include <stdlib.h>

volatile unsigned long sink_7919;

int main(int argc, char** argv) {
  long rounds = argc > 1 ? atol(argv[1]) : 2000;
  unsigned long a = argc > 2 ? strtoul(argv[2], 0, 10) : 400000;
  unsigned long b = argc > 3 ? strtoul(argv[3], 0, 10) : 200000;
  for (long r = 0; r < rounds; r++) {
    for (unsigned long i = 0; i < a; i++) sink_7919 += i; /* LINE_A */
    for (unsigned long i = 0; i < b; i++) sink_7919 += i; /* LINE_B */
    COZ_PROGRESS_NAMED("round");
  }
  printf("serial_ab %ld rounds\n", rounds);
  return 0;
}
