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
// Exact and estimated. Contended acquisitions, waits, try-lock calls and
// failures are counted exactly; so are acquisitions and threads, until a
// thread's table overflows (more (object, call site) pairs than a bucket
// holds: thousands of locks). From then on, that thread's uncontended
// acquisitions of any lock but the one it took last are counted one in
// kAcquisitionSampleEvery at random (a geometric countdown), each standing
// for kAcquisitionSampleEvery, their holds timed: counting each of them
// cost a table lookup (about 10 ns, as much as the lock itself), and the
// acquisitions of such a table's extra locks are folded per call site
// anyway. Such counts are estimates, with their standard error
// (acquisitions_sd). Hold times are timed
// (two time-stamp counter reads and an entry of the held table) for every
// contended acquisition, for the first kExactHolds acquisitions of each
// slot, and for a random one in m of the others: each of those is timed
// with probability 1/m, independently of the others (a geometric countdown
// per thread, so a periodic program cannot alias with it), and the merge
// scales its time by m (an unbiased estimate, docs/locks.md section 1). m
// is kHoldSampleEvery, growing for a slot taken hundreds of thousands of
// times (hold_sample_mean). Timing every hold cost about as much as all the
// other counting together on tens of millions of uncontended pairs; timing
// one in 64 of them, a third of the counters' cost.
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
#include "thread_state.h"

namespace coz {

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
  std::atomic<uint64_t> acquisitions{0}, contended{0}, wait_ns{0}, trylocks{0}, trylock_failures{0};
  std::atomic<uint64_t> sampled_acquisitions{0};  // counted by the acquisition sampler: each stands for kAcquisitionSampleEvery
  std::atomic<uint64_t> hold_ticks{0};            // holds timed with certainty (contended, or among the first)
  std::atomic<uint64_t> weighted_hold_ticks{0};   // sampled holds, each times its weight (1 / its chance of being timed)
  std::atomic<uint64_t> sampled_holds{0};         // how many of those
  std::atomic<double> hold_var{0};                // the sum of (w - 1) w ticks^2 over them: the estimate's variance
  // Of those, the one that weighs most: (w - 1) ticks, what it adds to
  // the estimate beyond itself. One hold timed across a preemption of its
  // holder can be most of a short section's estimate (docs/locks.md 4).
  std::atomic<uint64_t> top_excess_ticks{0};
};

// Hold-time sampling (see the header comment).
constexpr uint64_t kHoldSampleEvery = 64;  // mean acquisitions per timed one, beyond the exact ones
constexpr uint64_t kExactHolds = 64;       // acquisitions of a slot whose holds are all timed
// A slot taken very often needs fewer timed holds for the same precision:
// the mean interval drawn after a timed hold of a slot acquired n times is
// the power of two at or below n / kHoldSamplesPerDoubling, within
// [kHoldSampleEvery, kHoldSampleEveryMax]. Such a slot gets about 1,024
// timed holds each time its count doubles (from 131,072 acquisitions on),
// then one in 4,096 (from 4 million on).
constexpr uint64_t kHoldSamplesPerDoubling = 1024;
constexpr uint64_t kHoldSampleEveryMax = 4096;
constexpr uint64_t hold_sample_mean(uint64_t acquisitions) {
  uint64_t m = kHoldSampleEvery;
  while (m < kHoldSampleEveryMax && 2 * m * kHoldSamplesPerDoubling <= acquisitions) m *= 2;
  return m;
}
constexpr int kHoldSampleMeans = 7;  // 64, 128, ..., 4096
// Acquisition sampling (see the header comment): the mean number of
// uncontended acquisitions per counted one, in a thread whose table overflowed.
constexpr uint64_t kAcquisitionSampleEvery = 64;

// A thread's table (allocated at its first synchronization call).
struct LockTable {
  static constexpr uint32_t kSlots = 256;  // (object, caller) pairs; more are folded per site
  static constexpr uint32_t kWays = 8;     // slots an (object, caller) may take: one bucket
  static constexpr uint32_t kFolded = 64;  // sites of the folded ones
  static constexpr uint32_t kHeld = 16;    // locks held at once, for hold times
  // The slot of the latest acquisition: a loop that takes one lock again
  // and again finds it without hashing.
  uintptr_t last_object = 0, last_caller = 0;
  LockCounts* last = nullptr;
  // The sampler: acquisitions (not timed with certainty) left before the
  // next timed one, drawn geometric with mean countdown_mean (the timed one
  // then stands for countdown_mean acquisitions).
  uint64_t countdown = 1;
  uint64_t countdown_mean = kHoldSampleEvery;
  // The acquisition sampler, once `overflowed`: uncontended acquisitions
  // (not of the latest slot) left before the next counted one.
  uint64_t acq_countdown = 1;
  bool overflowed = false;  // an (object, caller) pair has been folded
  uint64_t rng = 0;  // xorshift64 state, never 0
  // ln(1 - 1/mean) of each hold sampling mean and of the acquisition
  // sampler's, computed once at the seed: a draw then costs one log().
  double log_keep[kHoldSampleMeans] = {};
  double log_keep_acq = 0;
  uint32_t nheld = 0;
  std::atomic<uint32_t> used{0};
  alignas(64) uint8_t tags[kSlots];  // per slot, for the owner's lookups: 0 free, else 0x80 | 7 bits of its hash
  LockCounts slots[kSlots];
  LockCounts folded[kFolded];  // `object` holds the number of distinct objects seen (approximately)
  struct Held {
    uintptr_t object;
    uint64_t since;  // ticks
    LockCounts* counts;
    uint64_t weight;  // 1: timed with certainty; else sampled, standing for this many
  } held[kHeld];
};
// Reseeds a table's sampler and draws its countdown (new tables are seeded
// from the time-stamp counter and the table's address; tests seed them).
void seed_lock_sampler(LockTable* table, uint64_t seed);

// Whether the interposed calls keep these counters (COZ_LOCK_COUNTERS, set
// by the profiler before the program's threads are hooked). Off only to
// measure the counters' cost beside a run without them
// (benchmarks/overhead.py): the waits are still measured and delayed.
extern std::atomic<bool> g_lock_counters;
inline bool lock_counters_on() { return g_lock_counters.load(std::memory_order_relaxed); }

// Kinds whose acquisitions hold nothing (waits for others' work): no hold time.
inline bool lock_kind_holds(LockKind k) {
  return !(k == LockKind::kSemaphore || k == LockKind::kCond || k == LockKind::kC11Cond || k == LockKind::kBarrier ||
           k == LockKind::kFutex || k == LockKind::kJoin);
}

// The hooks of the interposed calls. `caller` is the interposed function's
// return address. `waited_ns` is the time a contended call waited (0 when
// it did not wait). `clock` reads the time of hold times (tests give
// synthetic ones); it is called only for the holds timed.
//
// The common cases are inline: the thread takes the lock it took last, does
// not wait, and the hold is not timed (one count and the hold sampler's
// countdown); or its table overflowed and the acquisition sampler passes
// this one over (its countdown). Everything else is the out-of-line *_slow
// (locks.cpp). Forced inline: GCC kept lock_acquired out of line in the
// interposed pthread_mutex_lock, and that call at every acquisition was most
// of the counters' cost on locks_oversync (pinned, 7 to 9 rounds: +16% beside
// the run without counters, +4% to +8% inlined; docs/benchmarks.md).
using LockClock = uint64_t (*)();
void lock_acquired_slow(ThreadState* t, LockKind kind, const void* object, uintptr_t caller, bool contended,
                        uint64_t waited_ns, LockClock clock, bool sampled = false);
void lock_released_slow(LockTable* tab, const void* object, LockClock clock);

__attribute__((always_inline)) inline void lock_acquired(ThreadState* t, LockKind kind, const void* object,
                                                        uintptr_t caller, bool contended, uint64_t waited_ns,
                                                        LockClock clock = lock_ticks) {
  LockTable* tab = t->locks;
  if (tab && !contended) {
    if (tab->last_object == reinterpret_cast<uintptr_t>(object) && tab->last_caller == caller) {
      LockCounts* c = tab->last;
      uint64_t n = c->acquisitions.load(std::memory_order_relaxed);
      if (n >= kExactHolds && (!lock_kind_holds(kind) || tab->countdown > 1)) {
        c->acquisitions.store(n + 1, std::memory_order_relaxed);  // one writer: no locked add
        if (lock_kind_holds(kind)) tab->countdown--;
        return;
      }
    } else if (tab->overflowed) {
      if (--tab->acq_countdown != 0) return;  // estimated from the ones counted
      lock_acquired_slow(t, kind, object, caller, false, 0, clock, true);
      return;
    }
  }
  lock_acquired_slow(t, kind, object, caller, contended, waited_ns, clock);
}
inline void lock_released(ThreadState* t, const void* object, LockClock clock = lock_ticks) {
  LockTable* tab = t->locks;
  if (tab && tab->nheld) lock_released_slow(tab, object, clock);
}
void lock_tried(ThreadState* t, LockKind kind, const void* object, uintptr_t caller, bool failed,
                LockClock clock = lock_ticks);
// Frees a thread's table (the profiler thread, once merged).
void free_lock_table(LockTable* table);
// pthread_mutex_init and the like: the object's initialization site.
void lock_initialized(const void* object, uintptr_t caller);

// The profiler thread's merge of every table.
struct LockSiteTotals {
  // acquisitions: the estimate, counted ones plus the sampled ones scaled
  // by kAcquisitionSampleEvery; acquisitions_var: its estimated variance
  // (0 when exact). hold_ticks: the estimate, timed holds plus the sampled
  // ones scaled by their weights; sampled_holds: how many holds that
  // estimate rests on besides the ones timed with certainty (0: exact);
  // hold_var: the estimated variance of hold_ticks (ticks^2; 0 when exact);
  // top_excess_ticks: the sum over the slots of their top_excess_ticks.
  uint64_t acquisitions = 0, contended = 0, wait_ns = 0, hold_ticks = 0, trylocks = 0, trylock_failures = 0;
  uint64_t sampled_holds = 0, top_excess_ticks = 0;
  double acquisitions_var = 0, hold_var = 0;
  void add(const LockCounts& c);
  void add(const LockSiteTotals& s);
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
