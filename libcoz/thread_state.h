// Per-thread profiler state, and the process-wide state read in signal
// context.
//
// Fields marked [sig] are read or written by the owning thread's sample
// handler (signal context): they are plain data or lock-free atomics, never
// containers. Everything else is set up outside signal context.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "line_map.h"

struct perf_event_mmap_page;

namespace coz {

// An immutable, sorted set of address ranges, published through an atomic
// pointer and never freed while the runtime runs (a new set replaces it).
struct RangeSet {
  size_t count = 0;
  const AddrRange* ranges = nullptr;
  // Binary search. Safe in signal context.
  bool contains(uintptr_t pc) const {
    size_t lo = 0, hi = count;
    while (lo < hi) {
      size_t mid = (lo + hi) / 2;
      if (pc < ranges[mid].start) hi = mid;
      else if (pc >= ranges[mid].end) lo = mid + 1;
      else return true;
    }
    return false;
  }
};

// Builds a RangeSet (sorted, merged) on the heap; never freed.
const RangeSet* make_range_set(std::vector<AddrRange> ranges);

// One sample as handed from a thread to the profiler thread: the first few
// frames that fall in in-scope binaries (return addresses already moved back
// into their call instruction). n == 0: no in-scope frame.
constexpr size_t kSlotFrames = 4;
struct SampleSlot {
  uintptr_t pcs[kSlotFrames];
  uint32_t n;
};
constexpr uint32_t kRingSlots = 256;  // ~256 ms of samples at 1 ms per thread

struct ThreadState {
  pid_t tid = 0;

  // Sampler (set up and torn down by the owning thread).
  int perf_fd = -1;
  perf_event_mmap_page* page = nullptr;  // [sig] read
  size_t mmap_len = 0;
  bool has_timer = false;
  void* timer = nullptr;  // timer_t
  static constexpr int kMaxBreakpoints = 4;
  int bp_fds[kMaxBreakpoints] = {-1, -1, -1, -1};
  int bp_count = 0;

  // Delay accounting [sig]: only the owning thread writes these.
  uint64_t local_delay = 0;  // delay accounted for: earned by running the selected line, or paid
  uint64_t excess_ns = 0;    // slept beyond what was owed, banked against the next debt
  uint64_t epoch = 0;        // experiment these counts belong to
  uint64_t pre_block_global = 0;
  bool blocked = false;      // between pre_block and post_block: debts wait for post_block
  std::atomic<int> busy{0};  // [sig] re-entrancy guard of sample processing

  // Samples for the profiler thread: single producer (owner), single consumer.
  SampleSlot ring[kRingSlots];
  std::atomic<uint32_t> ring_head{0};  // [sig] written by the owner
  std::atomic<uint32_t> ring_tail{0};  // written by the profiler thread

  // Statistics [sig] (owner writes, profiler reads).
  std::atomic<uint64_t> samples{0};
  std::atomic<uint64_t> lost_records{0};
  std::atomic<uint64_t> dropped_samples{0};

  // What the profiler thread has already added to its totals (profiler only).
  uint64_t reported_samples = 0;
  uint64_t reported_lost = 0;
  uint64_t reported_dropped = 0;

  // The program's own view of whether it blocked the sample signal.
  bool program_blocks_sample_signal = false;

  // 1 live, 2 exited (the profiler thread drains its ring, then recycles it).
  std::atomic<int> state{1};
  ThreadState* next_free = nullptr;
};

// Process-wide state read in signal context.
struct Shared {
  std::atomic<bool> sampling{false};               // runtime active in this process
  std::atomic<const RangeSet*> scope{nullptr};     // executable ranges of in-scope binaries
  std::atomic<const RangeSet*> selected{nullptr};  // ranges of the selected line; null: none
  std::atomic<uint64_t> delay_per_hit_ns{0};       // speedup x sample period
  std::atomic<bool> paying{false};                 // an experiment runs or delays drain after it
  std::atomic<uint64_t> global_delay{0};           // largest local delay of the experiment
  std::atomic<uint64_t> epoch{0};                  // experiment number; locals reset when it changes
  std::atomic<uint64_t> epoch_start_global{0};     // global delay when the current experiment began
  std::atomic<uint64_t> selected_samples{0};       // samples of the selected line, all threads
  std::atomic<uint64_t> out_of_scope{0};           // samples with no in-scope frame
};

Shared& shared();

}  // namespace coz
