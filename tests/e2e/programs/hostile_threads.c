/* Thread stress for the hostile-host tests. Modes (argv[1]):
 *   many N     - N threads alive at once (held at a barrier), each opening a
 *                file while all are alive: the program's own open() must work
 *   ctor       - threads created by a constructor before main
 *   pthread_exit - main ends with pthread_exit while workers still run
 *   thread_exit  - a worker calls exit(7) while the others run
 * Output is deterministic; a distinctive checksum ties it to this program. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long sink;

static unsigned long spin(unsigned long n) {
  unsigned long x = 7919;
  for (unsigned long i = 0; i < n; i++) x = x * 6364136223846793005ul + 1442695040888963407ul;
  return x;
}

/* ---- many live threads ---- */
static pthread_barrier_t all_alive;
static int open_failures;
static pthread_mutex_t count_lock = PTHREAD_MUTEX_INITIALIZER;

static void* many_worker(void* arg) {
  (void)arg;
  sink += spin(2000);
  pthread_barrier_wait(&all_alive);
  int fd = open("/dev/null", O_RDONLY);
  if (fd < 0) {
    pthread_mutex_lock(&count_lock);
    open_failures++;
    pthread_mutex_unlock(&count_lock);
  } else {
    close(fd);
  }
  pthread_barrier_wait(&all_alive);
  return NULL;
}

static int run_many(int n) {
  pthread_t* t = calloc((size_t)n, sizeof *t);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_barrier_init(&all_alive, NULL, (unsigned)n + 1);
  int created = 0;
  for (int i = 0; i < n; i++) {
    int rc = pthread_create(&t[i], &attr, many_worker, NULL);
    if (rc != 0) {
      printf("pthread_create %d failed: %s\n", i, strerror(rc));
      return 1;
    }
    created++;
  }
  pthread_barrier_wait(&all_alive); /* every thread is alive now */
  /* the main thread opens many files too, with all threads alive */
  int fds[64], main_failures = 0;
  for (int i = 0; i < 64; i++) {
    fds[i] = open("/dev/null", O_RDONLY);
    if (fds[i] < 0) main_failures++;
  }
  for (int i = 0; i < 64; i++)
    if (fds[i] >= 0) close(fds[i]);
  pthread_barrier_wait(&all_alive);
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  printf("threads %d open failures %d main failures %d\n", created, open_failures, main_failures);
  return open_failures || main_failures ? 1 : 0;
}

/* ---- threads from a constructor ---- */
static pthread_t ctor_threads[3];
static unsigned long ctor_results[3];

static void* ctor_worker(void* arg) {
  long i = (long)arg;
  ctor_results[i] = spin(30000000 + (unsigned long)i) % 9973;
  return NULL;
}

__attribute__((constructor)) static void start_early(void) {
  const char* mode = getenv("HOSTILE_CTOR");
  if (!mode) return;
  for (long i = 0; i < 3; i++) pthread_create(&ctor_threads[i], NULL, ctor_worker, (void*)i);
}

static int run_ctor(void) {
  for (int i = 0; i < 3; i++) pthread_join(ctor_threads[i], NULL);
  printf("ctor results %lu %lu %lu\n", ctor_results[0], ctor_results[1], ctor_results[2]);
  return 0;
}

/* ---- main ends with pthread_exit ---- */
static void* late_worker(void* arg) {
  long i = (long)arg;
  unsigned long r = spin(40000000ul + (unsigned long)i) % 7919;
  printf("worker %ld done %lu\n", i, r);
  fflush(stdout);
  return NULL;
}

static int run_pthread_exit(void) {
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, late_worker, (void*)i);
  printf("main leaves\n");
  fflush(stdout);
  pthread_exit(NULL);
}

/* ---- exit() from a worker while others run ---- */
static void* busy_forever(void* arg) {
  (void)arg;
  for (;;) sink += spin(100000);
  return NULL;
}
static void* exiter(void* arg) {
  (void)arg;
  sink += spin(30000000);
  printf("worker calls exit(7)\n");
  fflush(stdout);
  exit(7);
}

static int run_thread_exit(void) {
  pthread_t a, b;
  pthread_create(&a, NULL, busy_forever, NULL);
  pthread_create(&b, NULL, exiter, NULL);
  for (;;) sink += spin(100000); /* main keeps running too */
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  if (!strcmp(argv[1], "many")) return run_many(argc > 2 ? atoi(argv[2]) : 2000);
  if (!strcmp(argv[1], "ctor")) return run_ctor();
  if (!strcmp(argv[1], "pthread_exit")) return run_pthread_exit();
  if (!strcmp(argv[1], "thread_exit")) return run_thread_exit();
  return 2;
}
