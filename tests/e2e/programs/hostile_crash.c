/* Ends badly, for the hostile-host tests. Modes (argv[1]):
 *   segv          - runs for 0.6 s of CPU time (several experiments), then dereferences null
 *   abort         - the same, then abort()
 *   kill_segv     - the same, then sends itself SIGSEGV with kill() (no fault to repeat)
 *   own_segv      - the same as segv, with a SIGSEGV handler of its own that says
 *                   "caught <handler seen>" and _exits 4 (sigaction must read
 *                   SIG_DFL back before, and its handler after)
 *   wait          - prints "ready <pid>" after 0.6 s of CPU time, then spins until killed
 *   term_handler  - as wait, with a SIGTERM handler of its own that calls exit(3)
 *   resethand     - as wait, after a SIGTERM handler installed with SA_RESETHAND ran
 *                   once (raised by itself); prints "dfl=1" when sigaction then
 *                   reads the default action back, as the kernel reset it
 *   quick_exit    - after 0.6 s of CPU time, quick_exit(6), an at_quick_exit
 *                   handler of its own printing "quick handler"
 *   _Exit         - the same, then _Exit(7)
 *   exit_group    - the same, then syscall(SYS_exit_group, 8)
 *   pipe          - the same, then writes to a pipe it closed the reading end of:
 *                   the kernel's SIGPIPE (`prog | head`)
 *   alarm         - the same, then a 50 ms real-time timer without a handler: SIGALRM
 *   xcpu          - the same, then a CPU time limit 1 s above the time used: the
 *                   kernel's SIGXCPU (si_code SI_KERNEL, a signal that does not
 *                   happen again if its handler returns)
 *   quit          - the same, then sends itself SIGQUIT (Ctrl-\)
 *   overflow      - the same, then recurses until its stack overflows: a fault
 *                   with no room left on the stack for a handler's frame
 *   thread_overflow - the same in a thread of its own (a 256 KiB stack)
 *   altstack      - prints what sigaltstack reads in the main thread, in a
 *                   new thread and in a forked child ("none" when disabled),
 *                   sets one of its own, reads it back, disables it, reads
 *                   again; exits 0
 *   tiny_altstack - the main thread sets an alternate stack of 2 KiB
 *                   (MINSIGSTKSZ) above an unmapped page, works, prints what
 *                   sigaltstack reads, disables it, reads again; exits 0
 * Two threads spin so that experiments have samples. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile unsigned long sink;

static void spin_for_ms(long ms) {
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  do {
    for (int i = 0; i < 20000; i++) sink += (unsigned long)i * 40503u; /* hot line */
    clock_gettime(CLOCK_MONOTONIC, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

/* Spins until the process has used `ms` of CPU time in all: on a busy
 * machine it then still has as many samples as on a quiet one. */
static void spin_until_cpu_ms(long ms) {
  struct timespec c;
  do {
    spin_for_ms(1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
  } while (c.tv_sec * 1000 + c.tv_nsec / 1000000 < ms);
}

static void* spinner(void* arg) {
  (void)arg;
  for (;;) spin_for_ms(1000);
  return NULL;
}

static void on_term(int sig) {
  (void)sig;
  exit(3);
}

static void on_segv(int sig) {
  (void)sig;
  static const char msg[] = "caught\n";
  if (write(1, msg, sizeof msg - 1) < 0) _exit(5);
  _exit(4);
}

/* Each call keeps a frame of its own (the buffer, the call after it). */
static int recurse(int depth) {
  volatile char frame[512];
  frame[0] = (char)depth;
  return recurse(depth + 1) + frame[0];
}

static void* overflow_thread(void* arg) {
  (void)arg;
  recurse(0);
  return NULL;
}

static void say_altstack(const char* where) {
  stack_t cur;
  if (sigaltstack(NULL, &cur) != 0) {
    printf("%s: error\n", where);
  } else if (cur.ss_flags & SS_DISABLE) {
    printf("%s: none\n", where);
  } else {
    printf("%s: %zu bytes, flags %d\n", where, cur.ss_size, cur.ss_flags);
  }
}

static void* altstack_thread(void* arg) {
  (void)arg;
  say_altstack("thread");
  return NULL;
}

static void on_quick_exit(void) {
  static const char msg[] = "quick handler\n";
  if (write(1, msg, sizeof msg - 1) < 0) _exit(5);
}

static volatile sig_atomic_t term_seen;
static void on_term_once(int sig) {
  (void)sig;
  term_seen = 1;
}

/* Maps 2 KiB of stack above an unmapped page: the start of `ss`. */
static int tiny_altstack(stack_t* ss) {
  long page = sysconf(_SC_PAGESIZE);
  char* m = mmap(NULL, 2 * (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED || mprotect(m, (size_t)page, PROT_NONE) != 0) return -1;
  ss->ss_sp = m + page;
  ss->ss_size = 2048;
  ss->ss_flags = 0;
  return sigaltstack(ss, NULL);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  stack_t tiny;
  if (!strcmp(argv[1], "tiny_altstack") && tiny_altstack(&tiny) != 0) return 12;
  pthread_t t;
  pthread_create(&t, NULL, spinner, NULL);
  if (!strcmp(argv[1], "term_handler")) signal(SIGTERM, on_term);
  spin_until_cpu_ms(600);
  if (!strcmp(argv[1], "own_segv")) {
    struct sigaction sa, before, after;
    sigaction(SIGSEGV, NULL, &before);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGSEGV, NULL, &after);
    printf("default before: %d, own after: %d\n", before.sa_handler == SIG_DFL, after.sa_handler == on_segv);
  }
  if (!strcmp(argv[1], "segv") || !strcmp(argv[1], "own_segv")) {
    printf("crashing\n");
    fflush(stdout);
    *(volatile int*)(argc == 99 ? (void*)&sink : NULL) = 1;
    return 0;
  }
  if (!strcmp(argv[1], "abort")) {
    printf("aborting\n");
    fflush(stdout);
    abort();
  }
  if (!strcmp(argv[1], "quick_exit")) {
    at_quick_exit(on_quick_exit);
    quick_exit(6);
  }
  if (!strcmp(argv[1], "_Exit")) _Exit(7);
  if (!strcmp(argv[1], "exit_group")) syscall(SYS_exit_group, 8);
  if (!strcmp(argv[1], "pipe")) {
    int fds[2];
    if (pipe(fds) != 0) return 9;
    close(fds[0]);
    if (write(fds[1], "x", 1) < 0) printf("write failed\n");  /* not reached: SIGPIPE */
    return 0;
  }
  if (!strcmp(argv[1], "alarm")) {
    struct itimerval it = {{0, 0}, {0, 50000}};
    setitimer(ITIMER_REAL, &it, NULL);
    for (;;) spin_for_ms(1000);
  }
  if (!strcmp(argv[1], "xcpu")) {
    struct timespec c;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
    struct rlimit rl = {(rlim_t)c.tv_sec + 1, (rlim_t)c.tv_sec + 30};
    setrlimit(RLIMIT_CPU, &rl);
    for (;;) spin_for_ms(1000);
  }
  if (!strcmp(argv[1], "quit")) {
    kill(getpid(), SIGQUIT);
    for (;;) spin_for_ms(1000);
  }
  if (!strcmp(argv[1], "overflow")) {
    printf("overflowing\n");
    fflush(stdout);
    return recurse(0);
  }
  if (!strcmp(argv[1], "thread_overflow")) {
    printf("overflowing\n");
    fflush(stdout);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t o;
    pthread_create(&o, &attr, overflow_thread, NULL);
    pthread_join(o, NULL);
    return 0;
  }
  if (!strcmp(argv[1], "altstack")) {
    say_altstack("main");
    pthread_t a;
    pthread_create(&a, NULL, altstack_thread, NULL);
    pthread_join(a, NULL);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
      say_altstack("child");
      fflush(stdout);
      _exit(0);
    }
    waitpid(child, NULL, 0);
    static char own[65536];
    stack_t ss = {.ss_sp = own, .ss_flags = 0, .ss_size = sizeof own}, old;
    if (sigaltstack(&ss, &old) != 0) return 10;
    printf("old when set: %s\n", (old.ss_flags & SS_DISABLE) ? "none" : "some");
    say_altstack("own");
    stack_t off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
    if (sigaltstack(&off, &old) != 0) return 11;
    printf("old when disabled: %s\n", old.ss_sp == own ? "own" : "other");
    say_altstack("after");
    return 0;
  }
  if (!strcmp(argv[1], "tiny_altstack")) {
    stack_t cur, off = {.ss_sp = NULL, .ss_flags = SS_DISABLE, .ss_size = 0};
    if (sigaltstack(NULL, &cur) != 0) return 13;
    printf("tiny: %zu bytes, flags %d, %s\n", cur.ss_size, cur.ss_flags, cur.ss_sp == tiny.ss_sp ? "own" : "other");
    if (sigaltstack(&off, &cur) != 0) return 14;
    printf("old when disabled: %s\n", cur.ss_sp == tiny.ss_sp ? "own" : "other");
    say_altstack("after");
    return 0;
  }
  if (!strcmp(argv[1], "kill_segv")) {
    printf("killing\n");
    fflush(stdout);
    kill(getpid(), SIGSEGV);
    printf("still here\n");
    return 0;
  }
  int dfl = -1;
  if (!strcmp(argv[1], "resethand")) {
    struct sigaction sa, now;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term_once;
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGTERM, &sa, NULL);
    raise(SIGTERM);
    sigaction(SIGTERM, NULL, &now);
    dfl = term_seen && now.sa_handler == SIG_DFL;
  }
  /* write(2), not stdio: the SIGTERM handler's exit() flushes stdio. One
   * write: a SIGTERM sent on "ready" must not fall between two. */
  char line[64];
  int n = dfl >= 0 ? snprintf(line, sizeof line, "ready %d\ndfl=%d\n", (int)getpid(), dfl)
                   : snprintf(line, sizeof line, "ready %d\n", (int)getpid());
  if (write(1, line, (size_t)n) != n) return 1;
  for (;;) spin_for_ms(1000);
}
