/* The one kernel of chain.c, in a file of its own (so that a source scope
 * can leave it out): a dependent multiply chain kept in a register, whose
 * cost per step is the same on every line that calls it. */
__attribute__((noinline)) unsigned long chain_work(unsigned long x, long steps) {
  for (long i = 0; i < steps; i++) {
    x = x * 6364136223846793005ul + 1442695040888963407ul; /* WORK */
    __asm__ volatile("" : "+r"(x));
  }
  return x;
}
