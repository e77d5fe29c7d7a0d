// The counters of a perf stat-style summary that are not in getrusage():
// CPU migrations (from the scheduler's per-thread statistics) and the CPU's
// hardware counters when the machine has them (a virtual machine often has
// no PMU; the reason is kept for the summary).
//
// Not for signal context.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace coz {

struct ThreadState;

// se.nr_migrations of a thread of this process, or -1 when the kernel does not say.
int64_t thread_migrations(pid_t tid);

// Once, at start-up: whether hardware counters can be opened here.
void hardware_probe();
// In the thread itself, at its start and its end: opens its counters, and
// adds them to the totals when it ends.
void hardware_thread_start(ThreadState* t);
void hardware_thread_end(ThreadState* t);
// The totals so far (the threads that ended, plus `live` read now), or why
// there are none.
void hardware_totals(const std::vector<ThreadState*>& live, std::vector<std::pair<std::string, uint64_t>>* out,
                     std::string* unavailable);

}  // namespace coz
