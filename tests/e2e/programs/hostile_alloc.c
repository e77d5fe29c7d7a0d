/* Allocation-heavy threads, for running beside a preloaded allocator
 * (jemalloc, tcmalloc) or, built with -DOWN_MALLOC, with the program's own
 * malloc/free/calloc/realloc (a bump allocator) that the runtime must use
 * without trouble. With -DWALK_IN_MALLOC as well, its malloc also walks the
 * loaded objects while it holds its lock, as a heap profiler taking a
 * backtrace does: the loader's lock is then taken inside the malloc lock on
 * every call, so that a runtime that allocated under the loader's lock
 * would hang at once instead of now and then. */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef OWN_MALLOC
#include <stdint.h>
#include <sys/mman.h>
#ifdef WALK_IN_MALLOC
#include <link.h>
static int count_object(struct dl_phdr_info* info, size_t size, void* data) {
  (void)info, (void)size;
  ++*(int*)data;
  return 0;
}
#endif
#include <unistd.h>

static char* arena;
static size_t arena_used;
static const size_t arena_size = (size_t)1 << 31; /* reserved, touched lazily */
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long own_calls;

void* malloc(size_t n) {
  /* a spin on a lock-free counter would do too; this lock is the program's */
  pthread_mutex_lock(&arena_lock);
#ifdef WALK_IN_MALLOC
  int objects = 0;
  dl_iterate_phdr(count_object, &objects);
#endif
  if (!arena) {
    arena = mmap(NULL, arena_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (arena == MAP_FAILED) {
      static const char msg[] = "bump allocator: mmap failed\n";
      write(2, msg, sizeof msg - 1);
      _exit(99);
    }
  }
  size_t total = (n + 16 + 15) & ~(size_t)15;
  if (arena_used + total > arena_size) {
    pthread_mutex_unlock(&arena_lock);
    return NULL;
  }
  char* p = arena + arena_used;
  arena_used += total;
  own_calls++;
  pthread_mutex_unlock(&arena_lock);
  *(size_t*)p = n;
  return p + 16;
}
void free(void* p) { (void)p; }
void* calloc(size_t a, size_t b) {
  if (b && a > SIZE_MAX / b) return NULL;
  void* p = malloc(a * b);
  if (p) memset(p, 0, a * b); /* mmap'd memory is zero, but be honest */
  return p;
}
void* realloc(void* old, size_t n) {
  void* p = malloc(n);
  if (p && old) {
    size_t was = *(size_t*)((char*)old - 16);
    memcpy(p, old, was < n ? was : n);
  }
  return p;
}
void* memalign(size_t align, size_t n) {
  char* p = malloc(n + align);
  return p ? (void*)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1)) : NULL;
}
int posix_memalign(void** out, size_t align, size_t n) {
  void* p = memalign(align, n);
  if (!p) return 12;
  *out = p;
  return 0;
}
void* aligned_alloc(size_t align, size_t n) { return memalign(align, n); }
#endif

static void* churn(void* arg) {
  unsigned long id = (unsigned long)arg, sum = 0;
  for (int round = 0; round < 40000; round++) {
    size_t n = 16 + (size_t)((round * 7919 + id * 104729) % 2000);
    unsigned char* p = malloc(n);
    memset(p, (int)(round & 0xff), n);
    p = realloc(p, n + 64);
    for (int pass = 0; pass < 30; pass++) /* some CPU time per allocation: ~0.25 s in all */
      for (size_t k = 0; k < n; k += 8) sum += (unsigned long)p[k] * (unsigned long)(pass + 1);
    free(p);
  }
  return (void*)sum;
}

int main(void) {
  pthread_t t[4];
  for (unsigned long i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void*)i);
  unsigned long total = 0;
  for (int i = 0; i < 4; i++) {
    void* r;
    pthread_join(t[i], &r);
    total += (unsigned long)r;
  }
  printf("checksum %lu\n", total);
#ifdef OWN_MALLOC
  printf("own malloc calls %s\n", own_calls > 160000 ? "all" : "missing");
#endif
  return 0;
}
