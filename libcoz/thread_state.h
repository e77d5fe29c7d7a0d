// Per-thread profiler state, and the process-wide state read in signal
// context.
//
// Fields marked [sig] are read or written by the owning thread's sample
// handler (signal context): they are plain data or lock-free atomics, never
// containers. Everything else is set up outside signal context.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "line_map.h"

struct perf_event_mmap_page;

namespace coz {

struct LockTable;

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

// Builds a RangeSet (sorted, merged) on the heap; never freed (kept_for_readers).
const RangeSet* make_range_set(std::vector<AddrRange> ranges);

// One sample as the sampled thread hands it to the profiler thread: its
// whole callchain, innermost first (return addresses already moved back into
// their call instruction), the CPU time it stands for, and flags.
constexpr size_t kMaxFrames = 64;  // deeper stacks keep their innermost 64 frames (counted as truncated)
enum SampleFlags : uint32_t {
  kSampleDelaying = 1,   // taken after the running experiment inserted delays (other threads were paused)
  kSampleTruncated = 2,  // the callchain was deeper than kMaxFrames
  // Its callers are the kernel's frame-pointer chain, not unwound: the
  // profiler thread keeps them only as far as their addresses are code.
  kSampleFramePointers = 4,
};
// A sample is on the CPU (kind 0), or a blocked sample of a wait: its kind
// is 1 + the wait's category (WaitKind), in bits 8-15 of the flags.
constexpr uint32_t kSampleKindShift = 8;
inline uint32_t sample_kind(uint32_t flags) { return (flags >> kSampleKindShift) & 0xff; }
struct Sample {
  uint64_t weight_ns = 0;  // CPU time since the thread's previous sample (the real, randomized period)
  uint64_t wait_ns = 0;    // time runnable but preempted since the previous sample (scheduling delay)
  // A blocked sample: the call that pushed it (its stack is the call's),
  // ended at call_end_ns (CLOCK_MONOTONIC) after call_ns, of which call_off_ns
  // off the CPU of the thread's own accord (kCallOffUnknown: not measured
  // by the thread; the profiler thread measures it where it parses the
  // thread's switch records). Blocked samples stand for the off-CPU part.
  static constexpr uint64_t kCallOffUnknown = UINT64_MAX;
  uint64_t call_end_ns = 0;
  uint64_t call_ns = 0;
  uint64_t call_off_ns = kCallOffUnknown;
  uint64_t call_preempted_ns = 0;  // and preempted (known when call_off_ns is)
  uint32_t flags = 0;
  uint32_t n = 0;
  uintptr_t pcs[kMaxFrames];
};

// A thread's name (its comm, 15 bytes and a NUL), kept by the runtime so
// that the profiler thread never opens /proc/self/task/N/comm: such an
// open takes the program's lowest free descriptor for that moment, and a
// one-threaded program that closes 0 and opens a file expects 0. Set by
// the thread at its start and end (PR_GET_NAME), and by the interposed
// renames (prctl PR_SET_NAME, pthread_setname_np), whichever thread makes
// them; read by the profiler thread at each look. A sequence lock: writers
// take it (odd), readers retry while it moves.
class ThreadName {
 public:
  void set(const char* name) {
    uint64_t w[2] = {0, 0};
    char* b = reinterpret_cast<char*>(w);
    for (size_t i = 0; i < sizeof w - 1 && name[i]; i++) b[i] = name[i];
    uint32_t s = seq_.load(std::memory_order_relaxed);
    for (;;) {
      if (!(s & 1) && seq_.compare_exchange_weak(s, s + 1, std::memory_order_acquire)) break;
      s = seq_.load(std::memory_order_relaxed);
    }
    std::atomic_thread_fence(std::memory_order_release);
    words_[0].store(w[0], std::memory_order_relaxed);
    words_[1].store(w[1], std::memory_order_relaxed);
    seq_.store(s + 2, std::memory_order_release);
  }
  // Copies it into `out` (NUL-terminated); false when never set, or when
  // writes kept it moving.
  bool get(char out[16]) const {
    for (int tries = 0; tries < 8; tries++) {
      uint32_t s = seq_.load(std::memory_order_acquire);
      if (s & 1) continue;
      uint64_t w[2] = {words_[0].load(std::memory_order_relaxed), words_[1].load(std::memory_order_relaxed)};
      std::atomic_thread_fence(std::memory_order_acquire);
      if (seq_.load(std::memory_order_relaxed) != s) continue;
      if (!s) return false;
      memcpy(out, w, 16);
      out[15] = 0;
      return true;
    }
    return false;
  }

 private:
  std::atomic<uint32_t> seq_{0};
  std::atomic<uint64_t> words_[2] = {};
};

// Single producer (the owning thread, in its signal handler), single
// consumer (the profiler thread): variable-length records of 64-bit words,
// [n | flags << 32][weight_ns][wait_ns][pc x n], and for a blocked sample
// (a kind in the flags) [call_end_ns][call_ns][call_off_ns][call_preempted_ns]
// before the pcs.
// [sig] for push.
class SampleRing {
 public:
  static constexpr uint32_t kWords = 2048;  // 16 KiB: ~100 samples of 20 frames, ~10 ms of them at most
  // [sig] False when the ring is full (the profiler thread fell behind).
  bool push(const Sample& s) {
    const uint32_t call = sample_kind(s.flags) ? 4 : 0;
    uint32_t words = 3 + call + s.n;
    uint32_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_.load(std::memory_order_acquire) + words > kWords) return false;
    put(head, static_cast<uint64_t>(s.n) | static_cast<uint64_t>(s.flags) << 32);
    put(head + 1, s.weight_ns);
    put(head + 2, s.wait_ns);
    if (call) {
      put(head + 3, s.call_end_ns);
      put(head + 4, s.call_ns);
      put(head + 5, s.call_off_ns);
      put(head + 6, s.call_preempted_ns);
    }
    for (uint32_t i = 0; i < s.n; i++) put(head + 3 + call + i, s.pcs[i]);
    head_.store(head + words, std::memory_order_release);
    return true;
  }
  // Profiler thread: the next sample, if any.
  bool pop(Sample* s) {
    uint32_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == head_.load(std::memory_order_acquire)) return false;
    uint64_t w0 = words_[tail % kWords];
    s->n = static_cast<uint32_t>(w0);
    s->flags = static_cast<uint32_t>(w0 >> 32);
    s->weight_ns = words_[(tail + 1) % kWords];
    s->wait_ns = words_[(tail + 2) % kWords];
    const uint32_t call = sample_kind(s->flags) ? 4 : 0;
    s->call_end_ns = call ? words_[(tail + 3) % kWords] : 0;
    s->call_ns = call ? words_[(tail + 4) % kWords] : 0;
    s->call_off_ns = call ? words_[(tail + 5) % kWords] : Sample::kCallOffUnknown;
    s->call_preempted_ns = call ? words_[(tail + 6) % kWords] : 0;
    for (uint32_t i = 0; i < s->n; i++) s->pcs[i] = static_cast<uintptr_t>(words_[(tail + 3 + call + i) % kWords]);
    tail_.store(tail + 3 + call + s->n, std::memory_order_release);
    return true;
  }
  bool empty() const { return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire); }

 private:
  void put(uint32_t at, uint64_t v) { words_[at % kWords] = v; }
  uint64_t words_[kWords];
  std::atomic<uint32_t> head_{0};  // in words; wraps at 2^32, a multiple of kWords
  std::atomic<uint32_t> tail_{0};
};

// A thread's context switches as its perf ring's switch records tell them:
// from a switch out with the PREEMPT flag to the next switch in, the
// thread was runnable but had no CPU. [sig]
struct SwitchState {
  uint64_t out_ns = 0;  // CLOCK_MONOTONIC time of the last switch out; 0 while on a CPU
  bool out_preempted = false;
  bool out_uncharged = false;  // the switch out was a wakeup preemption (see on_switch)
  uint64_t preempted_ns = 0;  // since the last take_preempted()
  uint64_t voluntary_ns = 0;  // total off the CPU of its own accord (blocked, asleep); read by the profiler
  uint64_t uncharged_ns = 0;  // total wakeup preemptions, charged to no line (see on_switch); read by the profiler
  // The interval the last switch in ended, when the thread had sat
  // preempted (either kind); 0, 0 when that switch in ended no preemption.
  uint64_t preempted_from = 0, preempted_to = 0;

  // `misc` is the record header's (PERF_RECORD_MISC_SWITCH_OUT, _PREEMPT
  // bits). `by_wake`: the switch out is the first record since the thread
  // woke another (the woken thread took its CPU: a wakeup preemption).
  // True when this record, a switch in, ended a preemption: the interval is
  // then preempted_from..preempted_to, once (it stays set until the next
  // switch in, past the switch out after it).
  bool on_switch(uint16_t misc, uint64_t time, bool by_wake = false) {
    if (misc & (1u << 13)) {  // PERF_RECORD_MISC_SWITCH_OUT
      out_ns = time;
      out_preempted = (misc & (1u << 14)) != 0;  // PERF_RECORD_MISC_SWITCH_OUT_PREEMPT
      out_uncharged = out_preempted && by_wake;
      return false;
    } else {
      preempted_from = preempted_to = 0;
      if (out_ns && time > out_ns) {
        if (out_preempted) {
          preempted_from = out_ns;
          preempted_to = time;
        }
        if (out_uncharged)
          // Sat preempted by the thread it had just woken, in the hand-off
          // code: the time belongs to the hand-off (the woken thread's run),
          // not to the line this thread runs next.
          __atomic_store_n(&uncharged_ns, uncharged_ns + (time - out_ns), __ATOMIC_RELAXED);
        else if (out_preempted)
          preempted_ns += time - out_ns;
        else
          __atomic_store_n(&voluntary_ns, voluntary_ns + (time - out_ns), __ATOMIC_RELAXED);
        note_off(out_ns, time, !out_preempted);
      }
      out_ns = 0;
      return preempted_to != 0;
    }
  }
  uint64_t take_preempted() {
    uint64_t v = preempted_ns;
    preempted_ns = 0;
    return v;
  }

  // An interval off the CPU, [from, to) on CLOCK_MONOTONIC: of its own
  // accord (blocked, asleep) or preempted.
  struct Off {
    uint64_t from, to;
    bool voluntary;
  };
  // The profiler thread's (sampling-only), where it reads the thread's
  // records a look at a time: a busy thread switches many more than 16
  // times a look (an nginx worker). Every interval of the look and of the
  // one before it, and the end of the latest one before them.
  struct OffLog {
    std::vector<Off> cur, prev;
    uint64_t since = 0;
    uint64_t look = 0;  // the look `cur` is of
    // Once per look, before its records are parsed: the previous look's go.
    void start_look(uint64_t at) {
      if (at == look) return;
      look = at;
      if (!prev.empty()) since = prev.back().to;
      prev.swap(cur);
      cur.clear();
    }
  };
  // When set, every interval parsed is logged there too, and off_within
  // reads the log. Never set in the thread itself (no allocation in its
  // signal handler).
  OffLog* log = nullptr;

  // The time off the CPU within [from, to] (CLOCK_MONOTONIC), of its own
  // accord (`voluntary`) and preempted (`preempted`), from the log when there
  // is one, else from the latest 16 intervals parsed so far. False when they
  // do not reach back to `from`, or a switch out before `to` has no switch
  // in yet.
  bool off_within(uint64_t from, uint64_t to, uint64_t* voluntary, uint64_t* preempted) const {
    if (out_ns && out_ns < to) return false;
    if (log) {
      const std::vector<Off>& cur = log->cur;
      const std::vector<Off>& prev = log->prev;
      return overlap(
          [&](size_t i) -> const Off* {  // newest first: this look's, then the previous one's
            if (i < cur.size()) return &cur[cur.size() - 1 - i];
            i -= cur.size();
            return i < prev.size() ? &prev[prev.size() - 1 - i] : nullptr;
          },
          log->since, from, to, voluntary, preempted);
    }
    const uint32_t kept = off_count < kOffHistory ? off_count : kOffHistory;
    return overlap(
        [&](size_t i) { return i < kept ? &history[(off_count - 1 - i) % kOffHistory] : nullptr; },  // newest first
        off_count <= kOffHistory ? 0 : UINT64_MAX, from, to, voluntary, preempted);
  }

  // off_within of a call that ended at `end` after `len` (a blocked
  // sample's call: Sample::call_end_ns, call_ns).
  bool call_within(uint64_t end, uint64_t len, uint64_t* voluntary, uint64_t* preempted) const {
    return off_within(end > len ? end - len : 0, end, voluntary, preempted);
  }

  // Adds up the intervals `newest(0)`, `newest(1)`, ... (newest first, a
  // null pointer after the last) that overlap [from, to]; every interval
  // that ended after `since` is among them (UINT64_MAX: not known). True
  // when they reach back to `from`: those not given ended before the
  // oldest given began, and before `since`.
  template <typename Newest>
  static bool overlap(Newest newest, uint64_t since, uint64_t from, uint64_t to, uint64_t* voluntary,
                      uint64_t* preempted) {
    *voluntary = *preempted = 0;
    const Off* oldest = nullptr;
    for (size_t i = 0;; i++) {
      const Off* o = newest(i);
      if (!o) break;
      if (o->to <= from) return true;
      uint64_t a = o->from > from ? o->from : from, b = o->to < to ? o->to : to;
      if (b > a) *(o->voluntary ? voluntary : preempted) += b - a;
      oldest = o;
    }
    return since <= from || (oldest && oldest->from <= from);
  }

 private:
  static constexpr uint32_t kOffHistory = 16;
  Off history[kOffHistory] = {};
  uint32_t off_count = 0;

  void note_off(uint64_t from, uint64_t to, bool voluntary) {
    history[off_count % kOffHistory] = {from, to, voluntary};
    off_count++;
    if (log) log->cur.push_back({from, to, voluntary});
  }
};

enum : int { kThreadLive = 1, kThreadEnded = 2, kThreadRetired = 3 };

struct ThreadState {
  pid_t tid = 0;

  // Sampler (set up and torn down by the owning thread).
  int perf_fd = -1;
  perf_event_mmap_page* page = nullptr;  // [sig] read
  size_t mmap_len = 0;
  bool has_timer = false;
  void* timer = nullptr;  // timer_t
  // Sampling-only, a thread sampled alone (sampler_sample_new_threads_alone):
  // its own event, not the CPU rings', samples it, at a fixed period from a
  // random first one.
  bool alone = false;
  // Its own event's first period, random, is under way [sig] (sampling
  // alone, and the causal modes): the event stops at its end, and the
  // signal handler sets the period and starts it again.
  bool phase_pending = false;
  bool random_first = false;  // its samples started so: a short thread is not under-sampled
  static constexpr int kMaxBreakpoints = 4;
  int bp_fds[kMaxBreakpoints] = {-1, -1, -1, -1};
  int bp_count = 0;

  // Delay accounting [sig]: only the owning thread writes these.
  uint64_t local_delay = 0;  // delay accounted for: earned by running the selected line, or paid
  uint64_t excess_ns = 0;    // slept beyond what was owed, banked against the next debt
  // Of the debt, what a wait's credit left owing because its waker had not
  // paid (the wake stamps, delays.h): the wait's own extension, slept.
  uint64_t wait_debt_ns = 0;
  // Its recent samples' CPU time and time preempted (each decayed by 1/16
  // per sample): its share of a CPU while runnable, which decides how a
  // debt is paid (catch_up).
  uint64_t recent_cpu_ns = 0;
  uint64_t recent_preempted_ns = 0;
  // The last pauses that held the CPU, [from, to] on CLOCK_MONOTONIC (to:
  // UINT64_MAX while one runs): the samples taken in them are the runtime's
  // CPU time, not the program's, and are dropped (in_cpu_pause).
  static constexpr uint32_t kPauseWindows = 8;
  uint64_t pause_from_ns[kPauseWindows] = {};
  uint64_t pause_to_ns[kPauseWindows] = {};
  uint32_t pause_next = 0;
  uint64_t epoch = 0;        // experiment these counts belong to
  uint64_t hit_epoch = 0;    // the last experiment in which it ran the selected unit (add_hits)
  // Mutexes held (pthread and C11, taken through the wrappers): while any
  // is, debts under kDeferInMutexNs wait for the last one's release.
  uint32_t mutexes_held = 0;
  // The object whose release or signal ends the current wait (a mutex, a
  // condition variable), looked up in the wake stamps; null for others.
  const void* wake_object = nullptr;
  uint64_t pre_block_global = 0;
  bool blocked = false;      // between pre_block and post_block: debts wait for post_block
  // When the current wait began: counter ticks when wait_tick_rate (ns
  // per tick, 32.32) is set, else CLOCK_MONOTONIC ns (delays.h, wait_elapsed).
  uint64_t wait_start = 0;
  uint64_t wait_tick_rate = 0;
  uint64_t wait_epoch = 0;  // the experiment (Shared::epoch) when the current wait began
  uint32_t wait_depth = 0;     // waits entered and not left (a signal handler's wait nests in another)
  // The outermost open wait's kind (WaitKind) and call site: what a longjmp
  // out of a signal handler that interrupted it ends (jumped_out_of_waits).
  uint8_t open_wait_kind = 0;
  uintptr_t open_wait_caller = 0;
  uint64_t last_wait_ns = 0;   // how long the last wait lasted (for the synchronization counters)
  // Credit for sitting preempted (delays.h, note_preempted), held until
  // the next sample says whether the time was the selected line's own; and
  // the experiment it belongs to.
  uint64_t preempt_credit_ns = 0, preempt_credit_epoch = 0;
  // The part of it settled at the next wake's look rather than the next
  // sample (note_preempted's `early`, settle_preempted_by_wake).
  uint64_t preempt_credit_early_ns = 0;

  // Waits (waits.cpp): time waited per category not yet worth a whole
  // blocked sample, and totals the profiler thread reads.
  uint64_t wait_rest_ns[6] = {0, 0, 0, 0, 0, 0};
  std::atomic<uint64_t> wait_total_ns[6] = {};
  std::atomic<uint64_t> paused_ns{0};  // paying delays: wall time slept, or spent holding the CPU
  std::atomic<uint64_t> held_ns{0};    // of it, the wall time of pauses that held the CPU (real_cpu_pause)
  std::atomic<uint64_t> held_cpu_ns{0};  // their CPU time
  std::atomic<uint64_t> preempt_credited_ns{0};  // delay credited for sitting preempted (delays.h, note_preempted)
  // [sig] Re-entrancy guard of sample processing: only the owning thread
  // and its own signal handler use it, and a handler runs to its end before
  // the code it interrupted goes on, so a load and a store ordered against
  // the handler by signal fences do what an atomic exchange would, without
  // the exchange's bus lock (issue 11: the interposed calls' fast path).
  std::atomic<int> busy{0};
  bool enter() {
    if (busy.load(std::memory_order_relaxed)) return false;
    busy.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    return true;
  }
  void leave() {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    busy.store(0, std::memory_order_relaxed);
  }

  // The sampling period in force [sig], drawn afresh every few samples.
  uint64_t period_ns = 0;
  uint32_t samples_at_period = 0;
  uint64_t rng = 0;

  // Context switches, from the perf ring's switch records [sig].
  SwitchState switches;
  // CPU migrations, from the CPU of those records (causal modes: the thread's
  // own event carries PERF_SAMPLE_CPU) [sig]: a switch in on another CPU
  // than the previous one. Read by the thread itself at its end.
  bool counts_moves = false;
  uint32_t last_cpu = UINT32_MAX;
  int64_t cpu_moves = 0;
  // The stack the sample signal's work runs on (run_on_signal_stack), mapped
  // at its first use; unmapped by sampler_forget.
  char* signal_stack = nullptr;
  bool signal_stack_refused = false;  // its mapping failed once: not tried at every sample
  // The alternate signal stack the runtime gave the thread, which had none,
  // so that a crash by stack overflow still writes the final records
  // (give_alt_stack, signals.cpp); its guard page's address, or null.
  char* alt_stack = nullptr;
  // An alternate stack the program set that is too small for the sample
  // signal's frame (virtual_sigaltstack, signals.cpp): the runtime's stays
  // the thread's, and the program reads its own back from here.
  stack_t program_alt{};
  bool program_alt_set = false;
  // Timer sampler: the thread's /proc/thread-self/schedstat, opened at its
  // start and kept high (-1: not open; each read then opens it).
  int schedstat_fd = -1;
  uint64_t timer_waited_ns = 0;  // timer sampler: schedstat's wait time at the previous sample
  uint64_t timer_switches = 0;   // and the thread's context switches then, plus 1 (0: unknown)
  uint64_t wake_tail = UINT64_MAX;  // perf ring position where records after the latest wake begin
  // At the latest wake's look, the program's unblocked threads and the one
  // the wake may release fitted its CPUs (program_fits_one_more); and
  // whether the latest switch out was a wakeup preemption after such a look,
  // whose credit is settled at the next look (settle_preempted_by_wake).
  bool wake_fits = false, out_early_credit = false;

  // Samples for the profiler thread.
  SampleRing ring;

  // Statistics [sig] (owner writes, profiler reads).
  std::atomic<uint64_t> lost_records{0};      // the kernel's PERF_RECORD_LOST counts
  std::atomic<uint64_t> dropped_samples{0};   // ring full
  std::atomic<uint64_t> skipped_records{0};   // records the sampler could not read (malformed, too long)

  // What the profiler thread has already added to its totals (profiler only).
  uint64_t reported_lost = 0;
  uint64_t reported_dropped = 0;
  uint64_t reported_skipped = 0;

  // The program's own view of whether it blocked the sample signal.
  bool program_blocks_sample_signal = false;
  // The event signals nobody for now: the thread had the sample signal
  // blocked for real, out of the runtime's sight (a raw rt_sigprocmask),
  // and its signals were queuing (sampler_watch_signals, sampler.cpp).
  std::atomic<bool> signals_parked{false};
  // The profiler thread looks at the ring and the descriptor from outside
  // (sampler_watch_signals) only while `ring_watch` is raised, and not once
  // `ring_gone` is: sampler_forget waits for it before it unmaps and closes.
  std::atomic<int> ring_watch{0};
  std::atomic<bool> ring_gone{false};

  // Who the thread is, for the conventional profile and thread groups: set
  // by its creator (start routine) and by the thread itself (times, its
  // name when it ends, and its CPU migrations then).
  uintptr_t start_fn = 0;  // the function it was started with; 0: the main thread
  // A thread started by code outside the scope (a library's own worker):
  // the first in-scope frame of the call that started it (or its creator's
  // origin when that call had none); 0: none, or the thread starts in scope.
  // See add_origin().
  uintptr_t origin_pc = 0;
  uint64_t start_ns = 0, end_ns = 0;  // CLOCK_MONOTONIC
  ThreadName name;
  uintptr_t handle = 0;  // its pthread_t (pthread_setname_np finds it by this)
  int64_t migrations = -1;  // its migrations at its end (cpu_moves, or se.nr_migrations); -1: unknown
  uint64_t cpu_clock_ns = 0;  // its CPU time at its end (CLOCK_THREAD_CPUTIME_ID)
  static constexpr int kHardwareCounters = 2;  // cycles, instructions
  int hw_fds[kHardwareCounters] = {-1, -1};    // counting events, when the CPU has them

  // Synchronization counters (locks.cpp): allocated at the first call,
  // merged by the profiler thread, freed with the state.
  struct LockTable* locks = nullptr;

  // kThreadLive, then kThreadEnded (set by the thread, its last act), then
  // kThreadRetired (set by the profiler thread once a drain has taken all
  // it left: samples, lock counts, its record). Only a retired state is
  // recycled: one that ends while a drain looks at it is the next drain's.
  std::atomic<int> state{kThreadLive};
  ThreadState* next_free = nullptr;
};

// Whether the registry may recycle a thread's state: a drain retired it,
// and nothing of it is left to take.
inline bool recyclable(const ThreadState& t) {
  return t.state.load() == kThreadRetired && t.ring.empty() && !t.page;
}

// Process-wide state read in signal context.
struct Shared {
  std::atomic<bool> sampling{false};               // the interposed calls' hooks active in this process
  // Experiments may insert delays (not in sampling-only or locks-only mode):
  // only then has a wake samples or debts to settle (runtime.h, wake), and
  // only then is the count of unblocked threads kept (count_unblocked).
  std::atomic<bool> delays{false};
  // Addresses a sample can be attributed to: code with a source line in the
  // binary and source scopes (objects whose line table is not read yet: all
  // their code). A sample's first frame in it is its "first in-scope frame",
  // the one rule of both the hit test here and the profiler's attribution.
  std::atomic<const RangeSet*> scope{nullptr};
  std::atomic<const RangeSet*> selected{nullptr};  // code of the selected unit; null: none
  // How a callchain counts for the selected unit (stored before `selected`):
  // false, by its first in-scope frame (lines, functions); true, by any frame
  // (call sites). See chain_selected().
  std::atomic<bool> selected_any_frame{false};
  std::atomic<uint32_t> speedup_pct{0};            // of the running experiment; delay = weight x speedup
  std::atomic<bool> paying{false};                 // an experiment runs or delays drain after it
  std::atomic<uint64_t> global_delay{0};           // largest local delay of the experiment
  std::atomic<uint64_t> epoch{0};                  // experiment number; locals reset when it changes
  std::atomic<uint64_t> epoch_start_global{0};     // global delay when the current experiment began
  std::atomic<uint64_t> selected_samples{0};       // samples of the selected line, all threads
  // Waits an experiment speeds up: bit k for WaitKind k (--blocked-scope).
  std::atomic<uint32_t> blocked_scope{0};
  std::atomic<uint64_t> selected_ns{0};            // the time those samples stand for (record_sample's hit_ns)
  std::atomic<uint64_t> selected_blocked_ns{0};    // waits of the selected line ended in the experiment
  std::atomic<uint64_t> experiment_start_ns{0};    // CLOCK_MONOTONIC start of the running experiment
  // The program's threads, all together, recently got less than
  // kSleepShareMin of a CPU while runnable (CrowdWindow, delays.h): a sleep
  // would hand the CPU to a thread that waits for one.
  std::atomic<bool> crowded{false};
  // The program's live threads not blocked in an interposed wait (runnable
  // or running), and the CPUs it can run on at once (its affinity mask's,
  // fewer under a cgroup CPU quota: usable_cpus(), at the start):
  // whether its own threads could have filled the CPUs (delays.h,
  // settle_preempted_by_wake). On a cache line of its own: every wait
  // changes the count, and every interposed call reads the flags above.
  // Counted only where experiments may insert delays (`delays`): nothing
  // else reads it, and its locked adds cost each wait two cache-line
  // round trips between CPUs.
  alignas(64) std::atomic<int> unblocked_threads{0};
  std::atomic<int> cpus{0};
};

// Constant-initialized (its constructor is constexpr): usable before any
// constructor runs. Inline, so that the interposed calls' checks are a load.
extern Shared g_shared;
inline Shared& shared() { return g_shared; }
// [sig] Whether the running experiment (or its cool-off) has inserted
// delays: the samples taken from then on are disturbed (kSampleDelaying).
// A sped-up experiment whose unit has not run yet, or never runs, has
// paused nobody.
inline bool experiment_delaying() {
  return g_shared.paying.load(std::memory_order_relaxed) && g_shared.speedup_pct.load(std::memory_order_relaxed) &&
         g_shared.global_delay.load(std::memory_order_relaxed) >
             g_shared.epoch_start_global.load(std::memory_order_relaxed);
}
// A thread enters (+1) or leaves (-1) the program's unblocked threads.
inline void count_unblocked(int delta) {
  if (g_shared.delays.load(std::memory_order_relaxed))
    g_shared.unblocked_threads.fetch_add(delta, std::memory_order_relaxed);
}

// [sig] Whether a callchain (innermost first) counts for the selected unit
// `sel`: by its first frame in `scope` (the sample's first in-scope frame,
// the one the profiler thread attributes it to), or, with `any_frame`, by
// any of its frames. One rule for CPU samples and for waits.
inline bool chain_selected(const RangeSet* sel, const RangeSet* scope, bool any_frame, const uintptr_t* pcs,
                           uint32_t n) {
  if (!sel) return false;
  for (uint32_t i = 0; i < n; i++) {
    if (any_frame) {
      if (sel->contains(pcs[i])) return true;
    } else if (scope && scope->contains(pcs[i])) {
      return sel->contains(pcs[i]);
    }
  }
  return false;
}

// [sig] A thread that a library started itself (liblzma's compressing
// threads, a codec's pool) has no in-scope frame of its own: its time is
// charged to the program's call that started it, `origin` (ThreadState::
// origin_pc), added as the callchain's outermost frame when no frame of
// the chain is in `scope`. A truncated chain is left alone (its deeper,
// unknown frames may be in scope).
inline void add_origin(uintptr_t origin, const RangeSet* scope, Sample* smp) {
  if (!origin || !scope || smp->n >= kMaxFrames || (smp->flags & kSampleTruncated)) return;
  for (uint32_t i = 0; i < smp->n; i++)
    if (scope->contains(smp->pcs[i])) return;
  smp->pcs[smp->n++] = origin;
}

}  // namespace coz
