/* Signals the program owns, for the hostile-host tests: every handler it
 * installs must run as without the profiler, sigaction must return the true
 * previous action, and masks must read back as the program set them.
 * Each check prints one line; the test compares the output with and without
 * the profiler, and also checks that every line says "ok". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static sigjmp_buf jump;
static volatile sig_atomic_t got_segv, got_bus, got_abrt, prof_ticks, alrm_ticks;
static volatile int rt_value, rt_code, rtmax3_value, rtmax3_code, rtmax3_count, timer_ticks;

static void check(const char* what, int ok) { printf("%s: %s\n", what, ok ? "ok" : "FAILED"); }

static void on_segv(int sig, siginfo_t* si, void* uc) {
  (void)uc;
  got_segv = sig == SIGSEGV && si->si_addr == (void*)0x10;
  siglongjmp(jump, 1);
}
static void on_bus(int sig) {
  got_bus = sig == SIGBUS;
  siglongjmp(jump, 1);
}
static void on_abrt(int sig) {
  got_abrt = sig == SIGABRT;
  siglongjmp(jump, 1);
}
static void on_prof(int sig) { prof_ticks += sig == SIGPROF; }
static void on_alrm(int sig) { alrm_ticks += sig == SIGALRM; }
static void on_rtmin(int sig, siginfo_t* si, void* uc) {
  (void)sig, (void)uc;
  rt_value = si->si_value.sival_int;
  rt_code = si->si_code;
}
static void on_rtmax3(int sig, siginfo_t* si, void* uc) {
  (void)uc;
  if (sig != SIGRTMAX - 3) return;
  if (si->si_code == SI_TIMER) {
    if (si->si_value.sival_int == 77) timer_ticks++;
    return;
  }
  rtmax3_value = si->si_value.sival_int;
  rtmax3_code = si->si_code;
  rtmax3_count++;
}
static void other_handler(int sig) { (void)sig; }
static volatile int once_count, usr1_blocked_inside;
static void on_once(int sig) {
  (void)sig;
  once_count++;
  sigset_t cur;
  pthread_sigmask(SIG_BLOCK, NULL, &cur);
  usr1_blocked_inside = sigismember(&cur, SIGUSR1);
}

static void install(int sig, void (*fn)(int, siginfo_t*, void*)) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = fn;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(sig, &sa, NULL);
}

static volatile unsigned long sink;
static void spin_cpu_ms(int ms) { /* burns CPU time: ITIMER_PROF and CPU timers advance */
  struct timespec a, b;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  do {
    for (int i = 0; i < 10000; i++) sink += (unsigned long)i * 2654435761u;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  } while ((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < ms);
}

static int blocked_now(int sig) {
  sigset_t cur;
  sigprocmask(SIG_BLOCK, NULL, &cur);
  return sigismember(&cur, sig);
}

static void* mask_thread(void* arg) {
  (void)arg;
  /* a new thread inherits its creator's mask: SIGUSR2 and SIGRTMAX-3 */
  sigset_t cur;
  pthread_sigmask(SIG_SETMASK, NULL, &cur);
  check("thread inherits blocked SIGRTMAX-3", sigismember(&cur, SIGRTMAX - 3) == 1);
  check("thread inherits blocked SIGUSR2", sigismember(&cur, SIGUSR2) == 1);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGRTMAX - 3);
  pthread_sigmask(SIG_UNBLOCK, &s, NULL);
  pthread_sigmask(SIG_SETMASK, NULL, &cur);
  check("thread unblocks SIGRTMAX-3", sigismember(&cur, SIGRTMAX - 3) == 0);
  return NULL;
}

int main(void) {
  struct sigaction old;

  /* sigaction returns the true previous action */
  sigaction(SIGRTMAX - 3, NULL, &old);
  check("SIGRTMAX-3 starts at SIG_DFL", !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL);
  sigaction(SIGINT, NULL, &old);
  check("SIGINT starts at SIG_DFL", !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL);
  sigaction(SIGTERM, NULL, &old);
  check("SIGTERM starts at SIG_DFL", !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL);
  sigaction(SIGPROF, NULL, &old);
  check("SIGPROF starts at SIG_DFL", !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL);
  check("signal(SIGTERM) returns SIG_DFL", signal(SIGTERM, other_handler) == SIG_DFL);
  check("signal(SIGTERM) returns the handler", signal(SIGTERM, SIG_DFL) == other_handler);
  check("signal(SIGRTMAX-3) returns SIG_DFL", signal(SIGRTMAX - 3, other_handler) == SIG_DFL);

  install(SIGSEGV, on_segv);
  install(SIGRTMIN, on_rtmin);
  install(SIGRTMAX - 3, on_rtmax3);
  sigaction(SIGRTMAX - 3, NULL, &old);
  check("sigaction(SIGRTMAX-3) returns the program's handler",
        (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_rtmax3);
  sigaction(SIGSEGV, NULL, &old);
  check("sigaction(SIGSEGV) returns the program's handler", (old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_segv);
  signal(SIGINT, other_handler);
  sigaction(SIGINT, NULL, &old);
  check("sigaction(SIGINT) returns the program's handler", old.sa_handler == other_handler);
  signal(SIGINT, SIG_DFL);

  /* SIGSEGV: a real fault, recovered */
  if (sigsetjmp(jump, 1) == 0) *(volatile int*)0x10 = 1;
  check("SIGSEGV handler", got_segv);

  /* SIGBUS: a real one, from touching a mapping beyond the end of its file */
  signal(SIGBUS, on_bus);
  FILE* f = tmpfile();
  char* map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fileno(f), 0);
  if (sigsetjmp(jump, 1) == 0) sink += (unsigned long)map[0];
  check("SIGBUS handler", got_bus);

  /* SIGABRT: abort() runs the handler, which jumps out */
  signal(SIGABRT, on_abrt);
  if (sigsetjmp(jump, 1) == 0) abort();
  check("SIGABRT handler", got_abrt);

  /* SIGPROF: a profiling interval timer of the program's own */
  signal(SIGPROF, on_prof);
  struct itimerval it = {{0, 2000}, {0, 2000}};
  setitimer(ITIMER_PROF, &it, NULL);
  spin_cpu_ms(60);
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  check("SIGPROF timer ticks", prof_ticks >= 10);

  /* SIGALRM: a real-time interval timer */
  signal(SIGALRM, on_alrm);
  struct itimerval rt = {{0, 3000}, {0, 3000}};
  setitimer(ITIMER_REAL, &rt, NULL);
  while (alrm_ticks < 5) pause();
  setitimer(ITIMER_REAL, &off, NULL);
  check("SIGALRM timer ticks", alrm_ticks >= 5);

  /* real-time signals with a value */
  union sigval v = {.sival_int = 1234};
  sigqueue(getpid(), SIGRTMIN, v);
  check("SIGRTMIN value", rt_value == 1234 && rt_code == SI_QUEUE);
  v.sival_int = 4321;
  sigqueue(getpid(), SIGRTMAX - 3, v);
  check("SIGRTMAX-3 sigqueue value", rtmax3_value == 4321 && rtmax3_code == SI_QUEUE);
  raise(SIGRTMAX - 3);
  check("SIGRTMAX-3 raise", rtmax3_code == SI_TKILL && rtmax3_count == 2);

  /* SIGRTMAX-3 from a POSIX timer of the program's own */
  struct sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_SIGNAL;
  sev.sigev_signo = SIGRTMAX - 3;
  sev.sigev_value.sival_int = 77;
  timer_t timer;
  timer_create(CLOCK_MONOTONIC, &sev, &timer);
  struct itimerspec its = {{0, 2000000}, {0, 2000000}};
  timer_settime(timer, 0, &its, NULL);
  while (timer_ticks < 5) pause();
  timer_delete(timer);
  check("SIGRTMAX-3 POSIX timer ticks", timer_ticks >= 5);

  /* SA_RESETHAND and sa_mask on SIGRTMAX-3; then SIG_IGN given with SA_SIGINFO */
  struct sigaction once;
  memset(&once, 0, sizeof once);
  once.sa_handler = on_once;
  once.sa_flags = SA_RESETHAND;
  sigemptyset(&once.sa_mask);
  sigaddset(&once.sa_mask, SIGUSR1);
  sigaction(SIGRTMAX - 3, &once, NULL);
  raise(SIGRTMAX - 3);
  sigaction(SIGRTMAX - 3, NULL, &old);
  check("SA_RESETHAND handler ran once, then SIG_DFL", once_count == 1 && old.sa_handler == SIG_DFL);
  check("handler ran with its sa_mask blocked", usr1_blocked_inside == 1 && blocked_now(SIGUSR1) == 0);
  struct sigaction ign;
  memset(&ign, 0, sizeof ign);
  ign.sa_handler = SIG_IGN;
  ign.sa_flags = SA_SIGINFO;
  sigaction(SIGRTMAX - 3, &ign, NULL);
  raise(SIGRTMAX - 3);
  check("survived SIGRTMAX-3 set to SIG_IGN with SA_SIGINFO", 1); /* reached only if it did */
  install(SIGRTMAX - 3, on_rtmax3);

  /* masks: the program's own view, and a blocked signal stays pending */
  sigset_t s, oldset;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR2);
  sigaddset(&s, SIGRTMAX - 3);
  sigprocmask(SIG_BLOCK, &s, &oldset);
  check("old mask had neither", !sigismember(&oldset, SIGUSR2) && !sigismember(&oldset, SIGRTMAX - 3));
  check("SIGRTMAX-3 reads back blocked", blocked_now(SIGRTMAX - 3) == 1);
  check("SIGUSR2 reads back blocked", blocked_now(SIGUSR2) == 1);
  int before = rtmax3_count;
  v.sival_int = 5555;
  sigqueue(getpid(), SIGRTMAX - 3, v);
  spin_cpu_ms(20);
  check("blocked SIGRTMAX-3 is not delivered", rtmax3_count == before);
  pthread_t th;
  pthread_create(&th, NULL, mask_thread, NULL);
  pthread_join(th, NULL);
  sigset_t un;
  sigemptyset(&un);
  sigaddset(&un, SIGRTMAX - 3);
  sigprocmask(SIG_UNBLOCK, &un, &oldset);
  check("old mask had SIGRTMAX-3 and SIGUSR2", sigismember(&oldset, SIGRTMAX - 3) && sigismember(&oldset, SIGUSR2));
  check("pending SIGRTMAX-3 delivered on unblock", rtmax3_count == before + 1 && rtmax3_value == 5555);
  check("SIGRTMAX-3 reads back unblocked", blocked_now(SIGRTMAX - 3) == 0);
  pthread_sigmask(SIG_SETMASK, NULL, &oldset);
  check("SIGUSR2 still blocked", sigismember(&oldset, SIGUSR2) == 1);
  return 0;
}
