/*
 * Prints the libstdc++ images mapped in this process (from /proc/self/maps),
 * one per line, then the spin's result. Built as C (no libstdc++ of its
 * own) or linked with -lstdc++ (one): under coz the list must be the same,
 * since libcoz.so carries a private copy (libcoz/CMakeLists.txt).
 */
#include <stdio.h>
#include <string.h>

int main(void) {
  char line[4096], seen[16][4096];
  int n = 0;
  FILE *maps = fopen("/proc/self/maps", "r");
  if (!maps) return 2;
  while (fgets(line, sizeof line, maps)) {
    char *path = strchr(line, '/');
    if (!path || !strstr(path, "libstdc++")) continue;
    path[strcspn(path, "\n")] = 0;
    int known = 0;
    for (int i = 0; i < n; i++) known |= strcmp(seen[i], path) == 0;
    if (!known && n < 16) {
      strcpy(seen[n++], path);
      printf("mapped %s\n", path);
    }
  }
  fclose(maps);
  printf("libstdc++ images: %d\n", n);
  return 0;
}
