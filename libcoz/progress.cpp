#include "progress.h"

#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "fds.h"
#include "warnings.h"
#include "sampler.h"
#include "thread_state.h"
#include "sys.h"

namespace coz {

ProgressRegistry& progress() {
  static ProgressRegistry* r = new ProgressRegistry();  // never destroyed: used until the last exit hook
  return *r;
}

coz_counter_layout* ProgressRegistry::counter(int type, const char* name) {
  if (type != kCounterThroughput && type != kCounterBegin && type != kCounterEnd) return nullptr;
  std::lock_guard<std::mutex> g(mu_);
  std::string n = name ? name : "(unnamed)";
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.name == n; });
  if (it == entries_.end()) {
    entries_.push_back(Entry{n});
    it = entries_.end() - 1;
  }
  coz_counter_layout** slot = type == kCounterThroughput ? &it->throughput : type == kCounterBegin ? &it->begin : &it->end;
  if (!*slot) *slot = new coz_counter_layout{0, 0};
  return *slot;
}

void ProgressRegistry::set_breakpoints(
    const std::vector<std::pair<std::string, std::vector<uintptr_t>>>& points) {
  std::lock_guard<std::mutex> g(mu_);
  breakpoints_.clear();
  for (auto& p : points) {
    if (breakpoints_.size() == static_cast<size_t>(ThreadState::kMaxBreakpoints)) break;
    breakpoints_.push_back(Breakpoint{p.first, p.second, 0, 0});
  }
}

void ProgressRegistry::attach_thread(ThreadState* t) {
  std::lock_guard<std::mutex> g(mu_);
  if (breakpoints_.empty()) return;
  for (size_t i = 0; i < breakpoints_.size(); i++) {
    perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_BREAKPOINT;
    attr.bp_type = HW_BREAKPOINT_X;
    attr.bp_addr = breakpoints_[i].addrs.empty() ? 0 : breakpoints_[i].addrs[0];
    attr.bp_len = sizeof(long);
    attr.exclude_kernel = 1;
    attr.exclude_hv = 1;
    long fd = sys(SYS_perf_event_open, &attr, t->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd >= 0 && (fd = move_fd_high(static_cast<int>(fd))) < 0) {
      // The program's own open() must not fail because of us: this thread's
      // visits go uncounted (said once).
      if (!breakpoints_dropped_.exchange(true))
        warn("breakpoints-dropped",
             "the upper half of the open-file limit is full of the profiler's descriptors: threads started "
             "from now on do not count --progress points");
    }
    t->bp_fds[i] = static_cast<int>(fd);
  }
  t->bp_count = static_cast<int>(breakpoints_.size());
  bp_threads_.push_back(t);
}

void ProgressRegistry::detach_thread(ThreadState* t) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = std::find(bp_threads_.begin(), bp_threads_.end(), t);
  if (it == bp_threads_.end()) return;
  for (int i = 0; i < t->bp_count && static_cast<size_t>(i) < breakpoints_.size(); i++) {
    uint64_t v = 0;
    if (t->bp_fds[i] >= 0 && read(t->bp_fds[i], &v, sizeof v) == sizeof v) breakpoints_[i].retired += v;
  }
  bp_threads_.erase(it);
}

uint64_t ProgressRegistry::read_breakpoint(size_t index) {
  uint64_t total = breakpoints_[index].retired;
  for (ThreadState* t : bp_threads_) {
    uint64_t v = 0;
    if (static_cast<int>(index) < t->bp_count && t->bp_fds[index] >= 0 &&
        read(t->bp_fds[index], &v, sizeof v) == sizeof v)
      total += v;
  }
  return total;
}

ProgressTotals ProgressRegistry::totals() {
  std::lock_guard<std::mutex> g(mu_);
  ProgressTotals out;
  for (const Entry& e : entries_) {
    ProgressTotals::Point p{e.name, false, 0, 0, 0};
    if (e.begin || e.end) {
      p.latency = true;
      p.begins = e.begin ? __atomic_load_n(&e.begin->count, __ATOMIC_RELAXED) : 0;
      p.ends = e.end ? __atomic_load_n(&e.end->count, __ATOMIC_RELAXED) : 0;
    }
    p.visits = e.throughput ? __atomic_load_n(&e.throughput->count, __ATOMIC_RELAXED) : 0;
    out.points.push_back(p);
  }
  for (size_t i = 0; i < breakpoints_.size(); i++)
    out.points.push_back({breakpoints_[i].name, false, read_breakpoint(i), 0, 0});
  return out;
}

const coz_counter_layout* ProgressRegistry::throughput_counter(const std::string& name) {
  std::lock_guard<std::mutex> g(mu_);
  for (const Entry& e : entries_)
    if (e.name == name && !e.begin && !e.end) return e.throughput;
  return nullptr;
}

bool ProgressRegistry::empty() {
  std::lock_guard<std::mutex> g(mu_);
  return entries_.empty() && breakpoints_.empty();
}

std::vector<PointDelta> ProgressRegistry::deltas(const ProgressTotals& before, const ProgressTotals& after) {
  std::vector<PointDelta> out;
  for (const auto& a : after.points) {
    const ProgressTotals::Point* b = nullptr;
    for (const auto& x : before.points)
      if (x.name == a.name && x.latency == a.latency) b = &x;
    PointDelta d;
    d.name = a.name;
    d.latency = a.latency;
    if (a.latency) {
      d.arrivals = a.begins - (b ? b->begins : 0);
      d.departures = a.ends - (b ? b->ends : 0);
      d.difference = static_cast<int64_t>(a.begins) - static_cast<int64_t>(a.ends);
    } else {
      d.delta = a.visits - (b ? b->visits : 0);
    }
    out.push_back(d);
  }
  return out;
}

}  // namespace coz
