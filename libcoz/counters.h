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

// The CPUs a quota of `quota` per `period` (any one unit) lets a program
// keep busy: the quota rounded up to whole CPUs, at least 1; 0 for no quota
// (quota or period not positive).
int cpus_of_quota(int64_t quota, int64_t period);

// The CPU quota that binds this process's cgroup, in CPUs as above, or 0 for
// none: the smallest over the cgroup and its ancestors, from cgroup v2's
// `cpu.max` and v1's `cpu.cfs_quota_us` / `cpu.cfs_period_us` (the cpu
// controller mounted at `<fs_root>/cpu` or `<fs_root>/cpu,cpuacct`).
// `proc_cgroup` is the text of /proc/self/cgroup; a path that is not there
// (a container's view without a cgroup namespace) is walked up to the
// mount's root, which is then the container's own cgroup.
int cgroup_cpu_limit(const std::string& proc_cgroup, const std::string& fs_root);

// The CPUs this process can run on at once: its affinity mask's count,
// fewer when its cgroup's CPU quota allows fewer (`quota`: that quota in
// CPUs, 0 for none). Once, at start-up.
struct UsableCpus {
  int cpus = 1;
  int affinity = 0;
  int quota = 0;
};
UsableCpus usable_cpus();

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
