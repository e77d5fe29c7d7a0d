// SyncPerf's counters: per synchronization object and call site,
// acquisitions, how many found it taken, waiting and holding time, try-lock
// calls and failures, and the threads involved.
//
// Each thread counts in a table of its own (no lock, no atomic
// read-modify-write on the hot path: the profiler thread only reads), with
// a fixed number of entries: objects beyond it are folded per call site, so
// memory stays bounded whatever the number of distinct locks. The profiler
// thread merges the tables off the hot path.
//
// Not for signal context.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "clock.h"

namespace coz {

struct ThreadState;

// kJoin: a join (pthread_join and its timed forms, thrd_join); its object is
// the joined thread's handle (pthread_t, reused by glibc once joined), and
// it waited when the thread was still running.
enum class LockKind : uint8_t { kMutex, kRwlock, kSpinlock, kSemaphore, kCond, kBarrier, kC11Mutex, kC11Cond, kFutex, kJoin };
const char* lock_kind_name(LockKind k);

// Timestamps of the hot path: the CPU's time-stamp counter (constant rate),
// converted to nanoseconds off the hot path.
inline uint64_t lock_ticks() { return cpu_ticks(); }

// One (object, call site) of one thread. Written by the owning thread,
// read by the profiler thread (relaxed: counts only grow).
struct LockCounts {
  std::atomic<uintptr_t> object{0};  // 0: free slot
  uintptr_t caller = 0;              // the interposed function's return address (with object, the key)
  std::atomic<uintptr_t> site{0};    // call site: the first in-scope frame (the caller when none is)
  LockKind kind = LockKind::kMutex;
  std::atomic<uint64_t> acquisitions{0}, contended{0}, wait_ns{0}, hold_ticks{0}, trylocks{0}, trylock_failures{0};
};

// A thread's table (allocated at its first synchronization call).
struct LockTable {
  static constexpr uint32_t kSlots = 256;  // (object, caller) pairs; more are folded per site
  static constexpr uint32_t kFolded = 64;  // sites of the folded ones
  static constexpr uint32_t kHeld = 16;    // locks held at once, for hold times
  LockCounts slots[kSlots];
  LockCounts folded[kFolded];  // `object` holds the number of distinct objects seen (approximately)
  struct Held {
    uintptr_t object;
    uint64_t since;  // ticks
    LockCounts* counts;
  } held[kHeld];
  uint32_t nheld = 0;
  std::atomic<uint32_t> used{0};
};

// Whether the interposed calls keep these counters (COZ_LOCK_COUNTERS, set
// by the profiler before the program's threads are hooked). Off only to
// measure the counters' cost beside a run without them
// (benchmarks/overhead.py): the waits are still measured and delayed.
extern std::atomic<bool> g_lock_counters;
inline bool lock_counters_on() { return g_lock_counters.load(std::memory_order_relaxed); }

// The hooks of the interposed calls (locks.cpp). `caller` is the interposed
// function's return address. `waited_ns` is the time a contended call
// waited (0 when it did not wait).
void lock_acquired(ThreadState* t, LockKind kind, const void* object, uintptr_t caller, bool contended,
                   uint64_t waited_ns);
void lock_released(ThreadState* t, const void* object);
void lock_tried(ThreadState* t, LockKind kind, const void* object, uintptr_t caller, bool failed);
// Frees a thread's table (the profiler thread, once merged).
void free_lock_table(LockTable* table);
// pthread_mutex_init and the like: the object's initialization site.
void lock_initialized(const void* object, uintptr_t caller);

// The profiler thread's merge of every table.
struct LockSiteTotals {
  uint64_t acquisitions = 0, contended = 0, wait_ns = 0, hold_ticks = 0, trylocks = 0, trylock_failures = 0;
  void add(const LockCounts& c);
};
struct LockTotals {
  LockKind kind = LockKind::kMutex;
  uintptr_t init_site = 0;  // 0: unknown (static initializer): the first use site is shown
  uintptr_t first_site = 0;
  LockSiteTotals all;
  std::unordered_map<uintptr_t, LockSiteTotals> sites;
  std::vector<pid_t> threads;
};
class LockMerger {
 public:
  // Adds a thread's table as it is now (a live thread: its counts replace
  // the ones it gave last time; an ended one: they are final).
  void take(pid_t tid, const LockTable& table, bool final);
  // Totals per object, and per folded call site.
  std::unordered_map<uintptr_t, LockTotals> objects() const;
  std::unordered_map<uintptr_t, LockTotals> folded() const;  // key: site
  double ns_per_tick() const { return ns_per_tick_; }
  void calibrate();  // measures the TSC's rate against CLOCK_MONOTONIC since the first call

 private:
  struct Snapshot {
    std::vector<std::pair<uintptr_t, LockTotals>> objects;  // one entry per (object, site) slot
    std::vector<std::pair<uintptr_t, LockTotals>> folded;
  };
  Snapshot snapshot(const LockTable& table) const;
  std::unordered_map<pid_t, Snapshot> live_;
  std::unordered_map<uintptr_t, LockTotals> ended_objects_, ended_folded_;
  double ns_per_tick_ = 1.0;
  TickCalibration calibration_;
};

// Where each object was initialized (lock_initialized), if seen.
uintptr_t lock_init_site(uintptr_t object);

}  // namespace coz
