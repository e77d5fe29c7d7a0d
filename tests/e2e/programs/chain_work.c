/* The one kernel of chain.c, in a file of its own (so that a source scope
 * can leave it out): a dependent multiply chain kept in a register, whose
 * cost per step is the same on every line that calls it. */
__attribute__((noinline)) unsigned long chain_work(unsigned long x, long steps) {
  /* One line for the whole loop, so that every instruction of it (the
   * multiply and the loop's own count and branch, where the sampled PC lands
   * depends on the CPU) belongs to the WORK line. */
  for (long i = 0; i < steps; i++) { x = x * 6364136223846793005ul + 1442695040888963407ul; __asm__ volatile("" : "+r"(x)); } /* WORK */
  return x;
}
