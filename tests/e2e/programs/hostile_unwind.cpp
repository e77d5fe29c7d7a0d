/*
 * A C++ program whose threads are unwound through the runtime's wrappers:
 * cancelled while blocked in interposed calls (read, pthread_cond_wait),
 * ended by pthread_exit deep in their own frames, and throwing exceptions
 * that their own frames catch. Cancellation and pthread_exit are forced
 * unwinds: they pass the wrapper of the blocked call and the runtime's
 * thread start, and must still run the program's cleanup handlers and
 * destructors.
 *
 * Prints one line per event, in an order that does not depend on timing.
 */
#include <pthread.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

struct Noisy {
  const char *what;
  ~Noisy() { std::printf("destructor: %s\n", what); }
};

void cleanup(void *what) { std::printf("cleanup handler: %s\n", static_cast<const char *>(what)); }

int pipe_fds[2];

void *blocked_in_read(void *) {
  Noisy noisy{"reader"};
  pthread_cleanup_push(cleanup, const_cast<char *>("reader"));
  char c;
  ssize_t n = read(pipe_fds[0], &c, 1);  // a cancellation point; nothing is ever written
  std::printf("read returned %zd\n", n);
  pthread_cleanup_pop(0);
  return nullptr;
}

pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t cond = PTHREAD_COND_INITIALIZER;

void unlock(void *) {
  pthread_mutex_unlock(&mutex);
  std::printf("cleanup handler: waiter unlocks\n");
}

void *blocked_in_cond_wait(void *) {
  Noisy noisy{"waiter"};
  pthread_mutex_lock(&mutex);
  pthread_cleanup_push(unlock, nullptr);
  for (;;) pthread_cond_wait(&cond, &mutex);  // never signalled: only a cancel ends it
  pthread_cleanup_pop(1);
  return nullptr;
}

[[noreturn]] void leave_from_deep(int depth) {
  Noisy noisy{depth == 0 ? "deepest frame" : "outer frame"};
  if (depth == 0) pthread_exit(reinterpret_cast<void *>(42));
  leave_from_deep(depth - 1);
}

void *exits_from_deep(void *) {
  Noisy noisy{"exiting thread"};
  leave_from_deep(1);
}

int parse(const std::string &text) {
  std::istringstream in(text);
  int value;
  if (!(in >> value)) throw std::invalid_argument("not a number: " + text);
  return value;
}

void *throws_and_catches(void *) {
  for (const char *text : {"17", "x17"}) {
    try {
      Noisy noisy{"inside try"};
      std::printf("parsed %d\n", parse(text));
    } catch (const std::exception &e) {
      std::printf("caught: %s\n", e.what());
    }
  }
  return nullptr;
}

void join_and_say(pthread_t thread, const char *name) {
  void *result = nullptr;
  int rc = pthread_join(thread, &result);
  if (rc != 0)
    std::printf("%s: join failed %d\n", name, rc);
  else if (result == PTHREAD_CANCELED)
    std::printf("%s: cancelled\n", name);
  else
    std::printf("%s: returned %ld\n", name, reinterpret_cast<long>(result));
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (pipe(pipe_fds) != 0) return 2;
  pthread_t thread;

  pthread_create(&thread, nullptr, blocked_in_read, nullptr);
  usleep(20000);  // most often blocked in read by now; a pending cancel ends it at read either way
  pthread_cancel(thread);
  join_and_say(thread, "reader");

  pthread_create(&thread, nullptr, blocked_in_cond_wait, nullptr);
  usleep(20000);
  pthread_cancel(thread);
  join_and_say(thread, "waiter");
  // The cleanup handler released the mutex: the cancelled wait took it back first.
  std::printf("mutex free after cancel: %s\n", pthread_mutex_trylock(&mutex) == 0 ? "yes" : "no");
  pthread_mutex_unlock(&mutex);

  pthread_create(&thread, nullptr, exits_from_deep, nullptr);
  join_and_say(thread, "exiting thread");

  pthread_create(&thread, nullptr, throws_and_catches, nullptr);
  join_and_say(thread, "thrower");

  // An exception carried from a std::thread to main and rethrown there.
  std::exception_ptr carried;
  std::thread worker([&carried] {
    try {
      parse("twelve");
    } catch (...) {
      carried = std::current_exception();
    }
  });
  worker.join();
  try {
    if (carried) std::rethrow_exception(carried);
  } catch (const std::invalid_argument &e) {
    std::cout << "rethrown in main: " << e.what() << std::endl;
  }
  return 0;
}
