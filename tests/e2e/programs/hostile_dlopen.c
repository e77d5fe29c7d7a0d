/* Loads argv[1] with dlopen after start-up and runs its hot loop: code that
 * enters the binary scope late must be profiled. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  unsigned long (*work)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, "hostile_dlib_work");
  if (!work) return 1;
  printf("library result %lu\n", work(12000));
  dlclose(h);
  return 0;
}
