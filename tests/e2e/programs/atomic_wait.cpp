// C++20 waits that libstdc++ makes with syscall(SYS_futex) from code
// inlined into the program (bits/atomic_wait.h), not through any pthread
// call: std::atomic<int>::wait, and std::latch::wait (a ptrdiff_t counter,
// waited on through libstdc++'s pool of proxy futexes). A thread of its own
// waits; the main thread releases it 200 ms after the waiter says it is
// about to wait. The waiter's own measure of its wait goes to REPORT (ns).
// Usage: atomic_wait atomic|latch REPORT (lasts about 1.2 s)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <latch>
#include <thread>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const bool latch_mode = !strcmp(argv[1], "latch");
  if (!latch_mode && strcmp(argv[1], "atomic")) return 2;
  std::atomic<int> ready{0}, flag{0};
  std::latch done(1);
  long long waited_ns = 0;
  std::thread waiter([&] {
    ready.store(1);
    auto start = std::chrono::steady_clock::now();
    if (latch_mode)
      done.wait();  // WAIT_latch
    else
      flag.wait(0);  // WAIT_atomic
    waited_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
  });
  while (!ready.load()) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  if (latch_mode) {
    done.count_down();
  } else {
    flag.store(1);
    flag.notify_one();
  }
  waiter.join();
  // A second more, so that a profiler thread on a busy machine is done with
  // its start before the exit gives it half a second for its last records.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  std::ofstream(argv[2]) << waited_ns << "\n";
  std::printf("atomic_wait %s done\n", argv[1]);
  return 0;
}
