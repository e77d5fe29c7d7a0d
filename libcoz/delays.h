// Virtual speedup: global and local delay counts, pausing, blocking.
//
// runs in signal context: no malloc, no locks, no stdio. Every function here
// is safe to call from the owning thread's sample handler, and from the
// interposed calls of that thread.
//
// Model (COZ paper, section 3): while line L is sped up by s, each sample of
// a thread whose first in-scope frame is L adds s x its period to that thread's
// local delay; the global delay is the largest local delay. A thread whose
// local delay is behind the global one pauses for the difference (a sleep,
// or, for a thread that shares its CPU, CPU time: real_cpu_pause). A thread
// woken by another is credited with the delay inserted while it waited (its
// waker paid it before waking it); a thread that blocked on its own pays
// after it wakes.
#pragma once

#include <cstdint>

#include "thread_state.h"

namespace coz {

// Sleeps about `ns` nanoseconds and returns the time really slept. Replaced
// in tests.
using PauseFn = uint64_t (*)(uint64_t ns);
uint64_t real_pause(uint64_t ns);  // nanosleep + CLOCK_MONOTONIC; safe in signal context
void set_pause_fn(PauseFn fn);

// A pause that keeps the CPU: runs until the thread's own CPU clock has
// advanced by `cpu_ns`, and returns the wall time it took. Replaced in tests.
//
// Why: a thread that waits for a CPU (more runnable threads than CPUs, or
// other processes) and sleeps its debt hands its CPU to the next runnable
// thread, which runs sooner than it would have: the pause delays the
// program less than its length, and the prediction overshoots (about twice
// the real gain with 4 workers on 2 CPUs; docs/analysis.md, "More threads
// than cores"). A thread that gets a share p of a CPU while runnable and
// holds it for p x d of CPU time takes about d of wall time, and leaves the
// other threads the CPU time they had: the delay of one thread that
// virtual speedup assumes. When the scheduler gives it more than its share
// meanwhile, catch_up sleeps the rest of d: a pause never sets the thread
// back less than its debt (one that took longer is banked, as oversleep is).
uint64_t real_cpu_pause(uint64_t cpu_ns);
void set_cpu_pause_fn(PauseFn fn);
// Called at the end of each pause that held the CPU, its window recorded
// (in_cpu_pause): the sampler reads the thread's ring there. A sample
// signal that arrives while the thread is in the runtime (in catch_up, in
// such a pause) leaves its records in the ring; a thread that pays a
// pause at every wake, and runs little else, would otherwise have them
// read only pauses later, once their windows are forgotten, and count the
// pauses as its CPU time. None: nothing is read.
using HeldPauseFn = void (*)(ThreadState* t);
void set_after_held_pause_fn(HeldPauseFn fn);

// Below this share of a CPU while runnable (permille), the thread's own or
// the program's (CrowdWindow), a debt is paid with real_cpu_pause; above
// both, with real_pause (what a sleep gives away is then at most a tenth of
// it, and a sleep costs the machine nothing).
constexpr uint64_t kSleepShareMin = 900;
// The program's share of the CPUs while runnable, over all its threads'
// recent samples (the profiler thread adds them as it processes them, and
// the time threads sat preempted by a thread they had just woken, which no
// sample carries), published as Shared::crowded: below kSleepShareMin,
// threads wait for a CPU, and any thread that pays a debt holds its CPU
// (catch_up), whatever its own share. A thread that waits little itself
// (one that blocks on a queue most of the time, then runs at once when
// woken) would otherwise sleep its pauses and hand its CPU to the threads
// that wait for one: a pipeline's last stage did, and the pipeline's
// predictions overshot by 8 to 11 points (docs/analysis.md, "More threads
// than cores").
struct CrowdWindow {
  uint64_t cpu_ns = 0, preempted_ns = 0;
  void add(uint64_t cpu, uint64_t preempted) {
    cpu_ns += cpu;
    preempted_ns += preempted;
  }
  // Once the window holds kCrowdWindowNs of runnable time: publishes whether
  // the share in it was below kSleepShareMin, and halves the window (older
  // samples count less).
  void publish();
};
constexpr uint64_t kCrowdWindowNs = 20000000;  // 20 ms of the threads' runnable time

// [sig] Records a sample's CPU time and the time its thread sat preempted
// before it: the thread's recent share of a CPU while runnable.
void note_cpu_share(ThreadState* t, uint64_t cpu_ns, uint64_t preempted_ns);
// The thread's recent share of a CPU while runnable, in permille (1000 when
// no sample has told yet).
uint64_t cpu_share_permille(const ThreadState* t);
// [sig] Whether `time_ns` (CLOCK_MONOTONIC) fell in one of the thread's
// last pauses that held the CPU, or in the one under way: a sample taken
// then is the runtime's CPU time.
bool in_cpu_pause(const ThreadState* t, uint64_t time_ns);

// The clock of waits (CLOCK_MONOTONIC; replaced in tests).
using ClockFn = uint64_t (*)();
uint64_t wait_clock();
void set_clock_fn(ClockFn fn);  // a test clock also stops the timing by ticks below

// Waits are timed with the time-stamp counter once its rate against
// CLOCK_MONOTONIC is measured (calibrate_wait_ticks), where the kernel keeps
// the counter as its clock source; with CLOCK_MONOTONIC before, elsewhere,
// and under a test clock. The profiler thread calls calibrate_wait_ticks
// at each look at the threads: from 10 ms after its first call on, waits
// begun then are timed by ticks, at the rate measured over the whole run so
// far. Should the rate measured later stray from the one in use by more
// than 0.1% (a counter that does not keep a constant rate after all), waits
// go back to the clock for the rest of the run.
void calibrate_wait_ticks();
// The time since the current wait began (pre_block), in nanoseconds.
uint64_t wait_elapsed(const ThreadState* t);

// Brings the thread's counts into the current experiment: a new experiment
// forgives the debts of the previous one, and every thread owes the delays
// inserted since the experiment began.
void sync_epoch(ThreadState* t);

// Samples of the selected line standing for `weight_ns` of the thread's CPU
// time: earn speedup x weight of delay.
void add_hits(ThreadState* t, uint64_t weight_ns);

// [sig] The delay the current experiment inserted between two
// CLOCK_MONOTONIC times, from the history of the global count's raises (the
// last 4096 of them); 0 when the history no longer reaches back that far.
uint64_t delay_inserted_between(uint64_t from_ns, uint64_t to_ns);
// [sig] The switch records say the thread sat preempted from `from_ns` to
// `to_ns`, waiting for a CPU. It is credited as a blocked thread its waker
// released is: with the delay inserted meanwhile, at most the interval's
// length (had the line been faster, the CPU it waited for would have come
// free that much sooner). The credit is held until the thread's next sample
// (settle_preempted): a sample of the selected line already counts the time
// its thread sat preempted before it, in the hit. A thread that has not run
// the selected unit in the current experiment has the credit sooner, at its
// next payment (catch_up): its next sample is no such hit. Not while the
// thread held its CPU in a pause (that pause's wall time is paid).
// `early`: its credit is settled at the thread's next wake's look
// (settle_preempted_by_wake), not at its next sample.
void note_preempted(ThreadState* t, uint64_t from_ns, uint64_t to_ns, bool early = false);
// [sig] At a sample: the credit held is granted unless the sample is a hit,
// and only in the experiment it was earned in.
void settle_preempted(ThreadState* t, bool hit);
// [sig] At a wake's look, before the thread pays: the credit held for
// sitting preempted by the thread it had just woken, when at that wake the
// program's own threads fitted its CPUs (program_fits_one_more), is granted
// now. The woken thread then preempted its waker only because other work
// held the other CPUs, and it often ends its sped-up wait and inserts its
// delay while the waker sits preempted; settled only at the waker's next
// sample, the credit came after the waker had paid that delay at its next
// wrapper call. In a program whose threads outnumber the cores another of
// its threads would have taken the CPU anyway: settled early there, the
// credit over-credited it (docs/analysis.md), so it waits for the sample,
// as other preemptions' credit does.
void settle_preempted_by_wake(ThreadState* t);
// [sig] Whether the program's threads not blocked in a wait, and one more
// (the thread a wake is about to release), are no more than its CPUs
// (Shared::unblocked_threads, Shared::cpus).
bool program_fits_one_more();

// Pays what the thread owes: pauses global - local (less banked excess),
// sleeping, or holding its CPU for its share of it (real_cpu_pause).
// The caller holds t->busy (process_samples does), or is a test.
void catch_up(ThreadState* t);

// Around a blocking call. post_block takes t->busy itself: it credits the
// wait (credit_wait, which needs t->busy held) and pays what is owed.
void pre_block(ThreadState* t);
void post_block(ThreadState* t, bool woken_by_program_thread);
void credit_wait(ThreadState* t, bool woken_by_program_thread);

// A debt found while the thread holds a mutex waits for its release when
// it is below this: paid inside the critical section, it would stop every
// thread queued on the mutex too.
constexpr uint64_t kDeferInMutexNs = 10000000;  // 10 ms

// Wake stamps: a thread that releases a mutex or signals a condition
// variable records what it still owes (it pays after the release). The
// thread it wakes was let go that much sooner than the virtual program
// would have let it: its wait is credited that much less, and the rest is
// its wait's extension (wait_debt_ns), slept. One slot per object hash; a
// slot another object took, or one of another experiment, says nothing.
void record_wake_stamp(ThreadState* t, const void* object);
bool find_wake_stamp(const void* object, uint64_t epoch, uint64_t* debt);
// False while leaving a wait nested in another (only the outer one settles).
bool leave_wait(ThreadState* t);

// A new thread starts level with its creator.
void inherit_delay(ThreadState* child, const ThreadState* parent);

}  // namespace coz
