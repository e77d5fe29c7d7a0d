/* small_stacks MS: two threads, each running its work on a stack of 2 KiB
 * with an unmapped page below it, as Go runs goroutines and as coroutine
 * libraries run their tasks. Each thread has an alternate signal stack of
 * 64 KiB (sigaltstack), as Go's threads, Rust's and many servers' have: a
 * signal handler that asks for it (SA_ONSTACK) runs there; one that does
 * not runs on the 2 KiB stack, and overflows it into the unmapped page
 * (SIGSEGV).
 *
 * The work passes the progress point "round" every few microseconds, for MS
 * milliseconds of wall time. Printed at exit:
 *   small_stacks rounds=N altstack_used=U frame=F checksum=C
 * where U is the most bytes of an alternate stack any signal wrote to (the
 * stacks are filled with a pattern first; the kernel's signal frame counts),
 * and F the bytes a signal to an empty handler takes there: the kernel's
 * frame on this CPU (the least of a few tries). */
#include <coz.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <ucontext.h>

#define SMALL_STACK 2048
#define ALT_STACK (64 * 1024)
#define PATTERN 0xa5

static long run_ms;

struct worker {
  ucontext_t caller, task;
  unsigned char* alt;
  uint64_t x;
  long rounds;
  size_t frame;
};

static void empty_handler(int sig) { (void)sig; }

static size_t used_of(const unsigned char* alt) {
  size_t low = 0;
  while (low < ALT_STACK && alt[low] == PATTERN) low++;
  return ALT_STACK - low;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The progress point. Its first visit looks the runtime's counter up
 * (dlsym, a string search, the loader's lazy binding: kilobytes of stack),
 * and the macro keeps what it found per call site: each thread visits it
 * once on its own stack before its work moves to the small one. */
static void pass(void) { COZ_PROGRESS_NAMED("round"); }

/* Runs on the small stack: no call deeper than clock_gettime's vDSO and the
 * progress point's counter. */
static void task(unsigned lo, unsigned hi) {
  struct worker* w = (struct worker*)(((uintptr_t)hi << 32) | lo);
  uint64_t end = now_ns() + (uint64_t)run_ms * 1000000ull;
  uint64_t x = w->x;
  while (now_ns() < end) {
    for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ull + 1442695040888963407ull;
    w->rounds++;
    pass();
  }
  w->x = x;
}

static void* thread_main(void* arg) {
  struct worker* w = arg;
  w->alt = mmap(NULL, ALT_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  unsigned char* small = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (w->alt == MAP_FAILED || small == MAP_FAILED || mprotect(small, 4096, PROT_NONE) != 0) {
    perror("small_stacks: mmap");
    exit(2);
  }
  stack_t ss = {.ss_sp = w->alt, .ss_size = ALT_STACK, .ss_flags = 0};
  if (sigaltstack(&ss, NULL) != 0) {
    perror("small_stacks: sigaltstack");
    exit(2);
  }
  w->frame = ALT_STACK;
  for (int i = 0; i < 5; i++) {
    memset(w->alt, PATTERN, ALT_STACK);
    pthread_kill(pthread_self(), SIGUSR1);
    size_t used = used_of(w->alt);
    if (used < w->frame) w->frame = used;
  }
  memset(w->alt, PATTERN, ALT_STACK);
  /* The first visit of the progress point, and the first clock read (its
   * lazy binding): here, on the thread's own stack. */
  pass();
  now_ns();
  getcontext(&w->task);
  w->task.uc_stack.ss_sp = small + 4096;
  w->task.uc_stack.ss_size = SMALL_STACK;
  w->task.uc_link = &w->caller;
  uintptr_t p = (uintptr_t)w;
  makecontext(&w->task, (void (*)(void))task, 2, (unsigned)(p & 0xffffffffu), (unsigned)(p >> 32));
  swapcontext(&w->caller, &w->task);
  /* Back on the thread's own stack: no signal is on the alternate one now. */
  stack_t off = {.ss_flags = SS_DISABLE};
  sigaltstack(&off, NULL);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: small_stacks MS\n");
    return 2;
  }
  run_ms = atol(argv[1]);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = empty_handler;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGUSR1, &sa, NULL);
  struct worker w[2];
  memset(w, 0, sizeof w);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) {
    w[i].x = (uint64_t)i + 1;
    pthread_create(&t[i], NULL, thread_main, &w[i]);
  }
  size_t used = 0, frame = ALT_STACK;
  long rounds = 0;
  uint64_t sum = 0;
  for (int i = 0; i < 2; i++) {
    pthread_join(t[i], NULL);
    if (used_of(w[i].alt) > used) used = used_of(w[i].alt);
    if (w[i].frame < frame) frame = w[i].frame;
    rounds += w[i].rounds;
    sum ^= w[i].x;
  }
  printf("small_stacks rounds=%ld altstack_used=%zu frame=%zu checksum=%llu\n", rounds, used, frame,
         (unsigned long long)(sum & 0xffff));
  return 0;
}
