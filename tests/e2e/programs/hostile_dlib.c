/* A library the hostile_dlopen program loads with dlopen at run time. */
unsigned long hostile_dlib_work(unsigned long rounds) {
  unsigned long x = 15485863;
  for (unsigned long r = 0; r < rounds; r++)
    for (int i = 0; i < 20000; i++) x = x * 3935559000370003845ul + 2691343689449507681ul; /* library's hot line */
  return x % 1000003;
}
