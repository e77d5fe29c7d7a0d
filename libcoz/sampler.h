// Per-thread CPU-time sampling: perf_event task-clock with user IP and
// callchain, read from a ring buffer in the sampled thread itself. Falls
// back to a per-thread CPU-time timer (timer_create on
// CLOCK_THREAD_CPUTIME_ID) where perf_event is refused.
//
// sampler_start/sampler_stop run in the owning thread, outside signal
// context. process_samples and handle_signal run in signal context (see
// sampler.cpp's header).
#pragma once

#include <linux/perf_event.h>

#include <csignal>
#include <cstring>
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "thread_state.h"

namespace coz {

// Reads perf records from a ring buffer (whose offsets wrap at `size`) or
// from a copy of its records (size: UINT64_MAX, no wrap). [sig]
struct RecordReader {
  const char* data;
  uint64_t size;
  void copy(uint64_t off, void* dst, size_t len) const {
    uint64_t start = off % size;
    uint64_t first = len < size - start ? len : size - start;
    memcpy(dst, data + start, first);
    if (first < len) memcpy(static_cast<char*>(dst) + first, data, len - first);
  }
  uint64_t word(uint64_t off) const {
    uint64_t v;
    copy(off, &v, sizeof v);
    return v;
  }
};

// The real-time signal that carries sample notifications. The program may
// install its own handler for it: such signals are passed on to that handler.
int sample_signal();

struct SamplerSettings {
  uint64_t period_ns = 1000000;
  uint32_t batch = 1;  // samples per notification: every sample, so delays reach other threads within ~1 period
  // Sampling-only mode: no signal at all; each record carries the user
  // registers and the top of the stack, and the profiler thread takes the
  // records and unwinds them (take_records, parse_records).
  bool signal_free = false;
};
void sampler_configure(const SamplerSettings& s);
// The mean sampling period (also the time one blocked sample stands for).
uint64_t sample_period_ns();
// [sig] The calling thread's total time runnable but waiting for a CPU
// (/proc/thread-self/schedstat, second field, in ns); 0 if unreadable.
uint64_t schedstat_wait_ns();
// [sig] The same, from `fd`, a descriptor of some thread's schedstat file
// kept open (read again from its start); 0 if unreadable.
uint64_t schedstat_wait_ns(int fd);

enum class SamplerKind { kNone, kPerfEvent, kTimer };

// Starts sampling the calling thread, whose id t->tid holds. Returns which
// sampler is used; on kNone, *why holds the reason.
SamplerKind sampler_start(ThreadState* t, std::string* why);
void sampler_stop(ThreadState* t);
// After fork, in the child: release the parent thread's descriptors without
// touching the parent's events.
void sampler_forget(ThreadState* t);

// Drains the thread's perf ring buffer: counts selected-line hits, hands
// samples to the profiler thread, earns and pays delays. Safe in signal context;
// re-entry is refused (a nested call returns at once).
// `uc` is the interrupted context when called from the sample signal's
// handler (its newest sample is then unwound from it), else null.
void process_samples(ThreadState* t, void* uc);
// [sig] The thread reads its own perf records now (its switch records
// above all), outside a sample signal and not as a wake, with t->enter()
// held. False when it does not read its own ring (sampling-only, where the
// profiler thread does; the timer sampler, which has none).
bool drain_own_records(ThreadState* t);
// [sig] Whether the thread's perf ring holds records it has not read (a
// sample, a switch record).
inline bool ring_has_records(const ThreadState* t) {
  const perf_event_mmap_page* page = t->page;
  return page && __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE) != page->data_tail;
}
// The same, paying nothing, and then records the thread's delay count as
// the wake stamp of `object` (delays.h): before a release or a signal whose
// debt is paid after it. Only while experiments run: the check is inline, so
// that a run without them (sampling-only, locks-only) pays no call at every
// unlock.
void stamp_wake_paying(ThreadState* t, const void* object);
inline void stamp_wake(ThreadState* t, const void* object) {
  if (shared().paying.load(std::memory_order_relaxed)) stamp_wake_paying(t, object);
}

// [sig] Runs fn(arg) on the thread's own stack for the runtime's signal
// work, mapped at its first use (with an unmapped page below it), or on the
// current stack if that mapping fails. The sample signal's handler runs on
// the thread's alternate signal stack when it has one (SA_ONSTACK, which Go
// requires of every handler: its goroutines' stacks are 2 KiB), and such a
// stack can be small (Rust's threads have 8 KiB, of which the kernel's signal
// frame takes up to 3.4 KiB with AVX-512), while unwinding a sample with
// libunwind takes about 6 KiB: the work moves to this stack.
void run_on_signal_stack(ThreadState* t, void (*fn)(void*), void* arg);
// [sig] A stack of `bytes` (a multiple of the page size) whose lowest page
// is unmapped (PROT_NONE), for a signal's work; its lowest address, or null
// when the kernel refused. Unmapped with munmap(p, bytes).
char* map_guarded_stack(size_t bytes);

// The timer sampler's signal: the interrupted context is the sample, worth
// 1 + `overrun` periods (si_overrun). Safe in signal context.
void process_timer_sample(ThreadState* t, void* ucontext, int overrun);

// A sampling period drawn uniformly from [mean/2, 3 mean/2) with the
// generator state *state (xorshift64*). Safe in signal context.
uint64_t draw_period(uint64_t* state, uint64_t mean);

// Sampling-only mode, in the profiler thread. Appends the thread's pending
// perf records, whole, to *out, and frees their room in the ring.
void take_records(ThreadState* t, std::vector<char>* out);
// The fullest any ring was when its records were taken (take_records,
// take_cpu_records) since the last call, in permille of its size; reset.
uint64_t sampler_take_ring_fill_permille();
// Parses records taken by take_records: calls fn(Sample&) for each sample,
// unwound from its stack copy, weighing `period_ns`, with the preempted time
// the switch records in *sw tell. Counts lost and unreadable records.
// `cpu_layout`: records of the CPU rings (take_cpu_records), which carry
// each sample's period (the weight then) and the thread's id.
void parse_records(const char* data, size_t len, SwitchState* sw, uint64_t period_ns, uint64_t* lost,
                   uint64_t* skipped, const std::function<void(Sample&)>& fn, bool cpu_layout = false);

// Sampling-only mode's CPU rings (sampler.cpp explains why): one task-clock
// event per CPU, opened by the calling thread (the main thread, before any
// other) and inherited by every thread it or they start. False (and *why)
// where refused: threads then sample themselves (sampler_start).
bool sampler_open_cpu_rings(std::string* why);
bool sampler_cpu_rings();
// Each CPU has a second inherited event of another random period, writing
// to the same ring, disabled: the profiler thread enables one and disables
// the other at random times (sampler.cpp says why). False where the second
// events were refused (one period per CPU then, for the whole run).
bool sampler_cpu_rings_alternate();
// From the profiler thread: the CPUs' other events sample from now on.
void sampler_alternate_cpu_events();
// The profiler thread inherits the events too: its records are dropped.
void sampler_ignore_thread(pid_t tid);
// From the profiler thread, once threads too short for the period hold much
// of the CPU time (Profiler::finish_threads): each thread started from now
// on gets its own event, whose first period is drawn uniformly from
// (0, period] and whose later ones are the period itself, so that each
// thread's samples hold, on average, all of its CPU time however short it
// is (an inherited event starts every thread with a whole period, and the
// period under way at its end is in no sample). Its records come from its
// own ring; the CPU rings' for it are the profiler's to drop. Where its
// event or ring is refused, the CPU rings sample it as before.
void sampler_sample_new_threads_alone();
bool sampler_samples_new_threads_alone();
// A thread's runtime state is in place (the signal's handler finds it):
// its event of its own, if it has one, starts, for its random first period.
void sampler_thread_ready(ThreadState* t);
// One thread's records, in time order, at `offset` in take_cpu_records' out.
struct ThreadRecords {
  pid_t tid;
  size_t offset, size;
};
// The records taken from each CPU ring: [begin, end) in one buffer.
struct RingSpan {
  size_t begin, end;
};
// CPU migrations seen in the CPU rings: each time a thread's record comes
// from another CPU's ring than its previous record (its switch in on the
// CPU it moved to, after its switch out on the one it left).
struct CpuMigrations {
  std::unordered_map<pid_t, uint32_t> last_ring;  // per thread: the ring of its latest record
  uint64_t count = 0;
};
// Where one take of the CPU rings stops. The rings are read one after the
// other: a thread that switches out on a CPU whose ring was read already
// and in on one read after it has its switch in in this take and its switch
// out in the next: the switch in pairs with nothing, the switch out with
// the thread's next switch in, and the time between reads as off the CPU
// when the thread ran. So records from `time` on (stamped
// before the first ring was read, less a margin) wait in held[ring] for the
// next take, which puts them before that ring's new ones; all of them at
// the last take, and all of the threads in `whole` (ended: nothing of
// theirs comes after).
struct CpuRecordCut {
  uint64_t time = UINT64_MAX;
  const std::vector<pid_t>* whole = nullptr;
  std::vector<std::vector<char>>* held = nullptr;  // one per ring
};
// Splits them by thread, each thread's in time order, appended to *out (the
// `ignored` thread's left out); counts the records the kernel lost, and the
// migrations into *migrations (spans[i] is ring i, the same CPU at every
// call). (take_cpu_records' work, apart for tests.)
void split_cpu_records(const std::vector<char>& raw, const std::vector<RingSpan>& spans, pid_t ignored,
                       std::vector<char>* out, std::vector<ThreadRecords>* chunks, uint64_t* lost,
                       CpuMigrations* migrations = nullptr, const CpuRecordCut& cut = CpuRecordCut());
// The migrations the CPU rings have shown so far (the profiler thread's).
uint64_t cpu_ring_migrations();
// A thread has ended: its tid may come back for another thread.
void cpu_ring_thread_ended(pid_t tid);
// The CPU rings' pending records, split by thread (the ignored one left
// out), appended to *out; counts the records the kernel lost. Those of the
// last moments wait for the next take (CpuRecordCut), unless `last`, or of
// a thread in `ended`. Returns the time from which records wait
// (UINT64_MAX: none wait).
uint64_t take_cpu_records(std::vector<char>* out, std::vector<ThreadRecords>* chunks, uint64_t* lost,
                      const std::vector<pid_t>* ended = nullptr, bool last = false);
// After fork, in the child: release the parent's CPU rings.
void sampler_forget_cpu_rings();
// The causal modes, from the profiler thread at its looks: a thread whose
// ring is an eighth full with the sample signal waiting in its pending set has it
// blocked for real, where the runtime does not see (a raw rt_sigprocmask:
// the interposed calls keep it unblocked). Each wakeup of its event would
// queue one more real-time signal, against the user's limit
// (RLIMIT_SIGPENDING), past which the kernel sends SIGIO instead, to this
// process and any other of the user's: its event stops signalling
// (signals_parked) until a signal reaches its handler again, or none waits.
void sampler_watch_signals(ThreadState* t);

// A new random period for the thread, from the profiler thread (the
// sampling-only mode's DCPI-style randomization). Returns the period set.
uint64_t rerandomize_period(ThreadState* t);

// Whether any thread fell back to the timer sampler (for the startup record).
bool sampler_uses_timer();

// Whether samples reach threads as signals (not in sampling-only's
// signal-free mode, unless a thread fell back to a timer).
bool sampler_signals_threads();

}  // namespace coz
