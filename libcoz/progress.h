// Progress points: counters handed to COZ_PROGRESS / COZ_BEGIN / COZ_END
// (through _coz_get_counter), and points given on the command line
// (--progress file:line), counted with hardware breakpoints in every thread.
//
// The hot path of a source progress point is one relaxed atomic add in the
// program's own code; nothing here runs on it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "profile_writer.h"

extern "C" {
// Layout shared with coz.h (and upstream's): first field is the count.
struct coz_counter_layout {
  size_t count;
  size_t backoff;
};
}

namespace coz {

struct ThreadState;

constexpr int kCounterThroughput = 1;
constexpr int kCounterBegin = 2;
constexpr int kCounterEnd = 3;

// A snapshot of every point's totals.
struct ProgressTotals {
  struct Point {
    std::string name;
    bool latency;
    uint64_t visits;     // throughput
    uint64_t begins;     // latency
    uint64_t ends;       // latency
  };
  std::vector<Point> points;
};

class ProgressRegistry {
 public:
  // The counter for (type, name), created on first use; stable for the life
  // of the process. nullptr for an unknown type.
  coz_counter_layout* counter(int type, const char* name);

  // Breakpoint points: addresses of each --progress line (first address of
  // each of its ranges). Set once at start-up, before threads sample.
  void set_breakpoints(const std::vector<std::pair<std::string, std::vector<uintptr_t>>>& points);
  // Opens this thread's breakpoint counters (outside signal context).
  void attach_thread(ThreadState* t);
  // Folds an exiting thread's breakpoint counts into the totals.
  void detach_thread(ThreadState* t);

  ProgressTotals totals();
  // The counter of a source throughput point (COZ_PROGRESS), to poll its
  // count; nullptr for other points (latency pairs, --progress lines).
  const coz_counter_layout* throughput_counter(const std::string& name);
  bool empty();

  // Around fork (see fork_prepare in fork.cpp): the child keeps using
  // the registry, so its lock must not be inherited held.
  void fork_prepare() { mu_.lock(); }
  void fork_parent() { mu_.unlock(); }
  void fork_child() { new (&mu_) std::mutex(); }

  // Deltas between two snapshots, in the profile's terms.
  static std::vector<PointDelta> deltas(const ProgressTotals& before, const ProgressTotals& after);

 private:
  struct Entry {
    std::string name;
    coz_counter_layout* throughput = nullptr;
    coz_counter_layout* begin = nullptr;
    coz_counter_layout* end = nullptr;
  };
  struct Breakpoint {
    std::string name;
    std::vector<uintptr_t> addrs;
    uint64_t retired = 0;  // counts of threads that exited
    size_t first_fd_slot = 0;
  };
  uint64_t read_breakpoint(size_t index);

  std::mutex mu_;
  std::vector<Entry> entries_;
  std::vector<Breakpoint> breakpoints_;
  std::vector<ThreadState*> bp_threads_;
  std::atomic<bool> breakpoints_dropped_{false};
};

ProgressRegistry& progress();

}  // namespace coz
