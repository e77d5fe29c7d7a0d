/* Synchronization with known counts, for the runtime's SyncPerf counters.
 * Modes:
 *   contended - THREADS threads take one global lock ROUNDS times each, with
 *               a critical section of STEPS steps: contended, long holds
 *   private   - each thread takes its own lock (initialized with
 *               pthread_mutex_init) ROUNDS times: never contended
 *   trylock   - thread A holds the lock for 50 ms while B (main, once A
 *               holds it) try-locks it in a loop until it succeeds: many
 *               failures, then one success
 *   blocked   - thread A holds the lock for 50 ms while B (main, once A
 *               holds it) locks it: one contended acquisition that waits
 *               for the rest of A's hold
 *   many      - THREADS threads lock each of N distinct mutexes once, from
 *               one call site, the odd ones from the end (memory must stay
 *               bounded)
 *   cond      - a producer signals a consumer ROUNDS times through a
 *               condition variable
 *   join      - joins a thread that has ended (seen gone from
 *               /proc/self/task: no wait), then one that still runs (it
 *               sleeps 50 ms once main is blocked in the join: a wait)
 * Prints what it did; each lock call is on a line of its own (markers).
 * With LOCKS_PRINT_HWM set, prints the process's peak resident set (VmHWM)
 * on stderr as it ends: after the runtime's exit handler, which ran first. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static const char* mode;
static long rounds = 20000, steps = 2000, n_many = 100000;
static pthread_mutex_t global = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t own[8];
static pthread_mutex_t* many;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static long produced, consumed;
static volatile long ended_tid, joining, holding;
static volatile unsigned long sink;

/* An ELF destructor of the program: run by exit() after every atexit handler
 * (the runtime's, which writes the profile, included). */
__attribute__((destructor)) static void print_hwm(void) {
  if (!getenv("LOCKS_PRINT_HWM")) return;
  char buf[8192];
  int fd = open("/proc/self/status", O_RDONLY);
  ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof buf - 1);
  if (fd >= 0) close(fd);
  if (n <= 0) return;
  buf[n] = 0;
  char* line = strstr(buf, "VmHWM:");
  if (!line) return;
  size_t len = strcspn(line, "\n");
  line[len] = '\n';
  if (write(2, line, len + 1) < 0) return;
}

static void* worker(void* arg) {
  long id = (long)arg;
  if (!strcmp(mode, "contended")) {
    for (long r = 0; r < rounds; r++) {
      pthread_mutex_lock(&global); /* LOCK_GLOBAL */
      for (long i = 0; i < steps; i++) sink += i;
      pthread_mutex_unlock(&global);
    }
  } else if (!strcmp(mode, "private")) {
    for (long r = 0; r < rounds; r++) {
      pthread_mutex_lock(&own[id]); /* LOCK_OWN */
      sink += r;
      pthread_mutex_unlock(&own[id]);
    }
  } else if (!strcmp(mode, "many")) {
    for (long j = 0; j < n_many; j++) {
      long k = id & 1 ? n_many - 1 - j : j;  /* the two threads meet once: uncontended */
      pthread_mutex_lock(&many[k]); /* LOCK_MANY */
      sink += k;
      pthread_mutex_unlock(&many[k]);
    }
  }
  return NULL;
}

static void* holder(void* arg) {
  pthread_mutex_lock(&global);
  holding = 1;
  struct timespec d = {0, 50000000};
  nanosleep(&d, NULL);
  pthread_mutex_unlock(&global);
  return arg;
}

static void* ends_at_once(void* arg) {
  ended_tid = syscall(SYS_gettid);
  return arg;
}

/* Whether the main thread is blocked (state S in /proc: it runs nothing
 * but its join once it has said it is about to join). */
static int main_blocked(void) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)getpid());
  int fd = open(path, O_RDONLY);
  if (fd < 0) return 1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 1;
  buf[n] = 0;
  const char* p = strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] == 'S';
}

static void* runs_on(void* arg) {
  while (!joining) nanosleep(&(struct timespec){0, 1000000}, NULL);
  while (!main_blocked()) nanosleep(&(struct timespec){0, 1000000}, NULL);
  nanosleep(&(struct timespec){0, 50000000}, NULL);
  return arg;
}

static void* consumer(void* arg) {
  pthread_mutex_lock(&global);
  while (consumed < rounds) {
    while (consumed == produced) pthread_cond_wait(&cond, &global); /* COND_WAIT */
    consumed = produced;
  }
  pthread_mutex_unlock(&global);
  return arg;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  mode = argv[1];
  int threads = argc > 2 ? atoi(argv[2]) : 2;
  if (argc > 3) rounds = n_many = atol(argv[3]);
  pthread_t t[8];
  if (!strcmp(mode, "trylock")) {
    pthread_create(&t[0], NULL, holder, NULL);
    while (!holding) nanosleep(&(struct timespec){0, 1000000}, NULL);  /* A holds it */
    long failures = 0;
    while (pthread_mutex_trylock(&global) != 0) { /* TRYLOCK */
      failures++;
      nanosleep(&(struct timespec){0, 100000}, NULL);
    }
    pthread_mutex_unlock(&global);
    pthread_join(t[0], NULL);
    printf("trylock failures %ld\n", failures);
    return 0;
  }
  if (!strcmp(mode, "blocked")) {
    pthread_create(&t[0], NULL, holder, NULL);
    while (!holding) nanosleep(&(struct timespec){0, 1000000}, NULL);  /* A holds it */
    pthread_mutex_lock(&global); /* LOCK_BLOCKED */
    pthread_mutex_unlock(&global);
    pthread_join(t[0], NULL);
    printf("blocked done\n");
    return 0;
  }
  if (!strcmp(mode, "cond")) {
    pthread_create(&t[0], NULL, consumer, NULL);
    for (long r = 1; r <= rounds; r++) {
      pthread_mutex_lock(&global);
      produced = r;
      pthread_cond_signal(&cond);
      pthread_mutex_unlock(&global);
      nanosleep(&(struct timespec){0, 200000}, NULL);  /* the consumer waits for each item */
    }
    pthread_join(t[0], NULL);
    printf("cond rounds %ld\n", rounds);
    return 0;
  }
  if (!strcmp(mode, "join")) {
    pthread_create(&t[0], NULL, ends_at_once, NULL);
    char task[64];
    struct stat st;
    while (!ended_tid) nanosleep(&(struct timespec){0, 1000000}, NULL);
    snprintf(task, sizeof task, "/proc/self/task/%ld", ended_tid);
    while (stat(task, &st) == 0) nanosleep(&(struct timespec){0, 1000000}, NULL);  /* reaped: it has ended */
    pthread_create(&t[1], NULL, runs_on, NULL);
    joining = 1;
    pthread_join(t[1], NULL); /* JOIN_RUNNING */
    pthread_join(t[0], NULL); /* JOIN_ENDED */
    printf("join done\n");
    return 0;
  }
  if (!strcmp(mode, "many")) many = calloc((size_t)n_many, sizeof *many);
  for (int i = 0; i < 8; i++) pthread_mutex_init(&own[i], NULL); /* INIT_OWN */
  for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void*)i);
  for (long i = 0; i < threads; i++) pthread_join(t[i], NULL);
  printf("%s threads %d rounds %ld\n", mode, threads, rounds);
  return 0;
}
