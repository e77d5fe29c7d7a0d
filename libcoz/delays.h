// Virtual speedup: global and local delay counts, pausing, blocking.
//
// runs in signal context: no malloc, no locks, no stdio. Every function here
// is safe to call from the owning thread's sample handler, and from the
// interposed calls of that thread.
//
// Model (COZ paper, section 3): while line L is sped up by s, each sample of
// a thread whose first in-scope frame is L adds s x its period to that thread's
// local delay; the global delay is the largest local delay. A thread whose
// local delay is behind the global one pauses for the difference. A thread
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

// Pays what the thread owes: pauses global - local (less banked excess).
// The caller holds t->busy (process_samples does), or is a test.
void catch_up(ThreadState* t);

// Around a blocking call. post_block takes t->busy itself: it credits the
// wait (credit_wait, which needs t->busy held) and pays what is owed.
void pre_block(ThreadState* t);
void post_block(ThreadState* t, bool woken_by_program_thread);
void credit_wait(ThreadState* t, bool woken_by_program_thread);
// False while leaving a wait nested in another (only the outer one settles).
bool leave_wait(ThreadState* t);

// A new thread starts level with its creator.
void inherit_delay(ThreadState* child, const ThreadState* parent);

}  // namespace coz
