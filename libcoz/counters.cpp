#include "counters.h"

#include <linux/perf_event.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fds.h"
#include "sys.h"
#include "thread_state.h"

namespace coz {

namespace {

constexpr struct {
  uint64_t config;
  const char* name;
} kHardware[ThreadState::kHardwareCounters] = {
    {PERF_COUNT_HW_CPU_CYCLES, "cycles"},
    {PERF_COUNT_HW_INSTRUCTIONS, "instructions"},
};

bool g_hw_available = false;
std::string* g_hw_reason = nullptr;  // heap: read from exit hooks
std::atomic<uint64_t> g_hw_ended[ThreadState::kHardwareCounters];

long open_counter(uint64_t config, pid_t tid) {
  perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = config;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  return sys(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

uint64_t read_counter(int fd) {
  uint64_t v = 0;
  return fd >= 0 && read(fd, &v, sizeof v) == sizeof v ? v : 0;
}

// The first line of a small file, or "" when it cannot be read.
std::string first_line(const std::string& path) {
  FILE* f = fopen(path.c_str(), "re");
  if (!f) return "";
  char line[128];
  std::string text = fgets(line, sizeof line, f) ? line : "";
  fclose(f);
  return text;
}

// The smaller of two quotas, 0 meaning none.
int tighter(int a, int b) { return a > 0 && (b <= 0 || a < b) ? a : b; }

// The smallest quota of `dir` and its ancestors up to `root` (both without
// a trailing slash), `quota_of` reading one directory's; 0 for none.
template <typename QuotaOf>
int walk_up(const std::string& root, std::string dir, QuotaOf quota_of) {
  int least = 0;
  for (;;) {
    least = tighter(quota_of(root + dir), least);
    if (dir.empty()) return least;
    dir.resize(dir.rfind('/'));
  }
}

}  // namespace

int cpus_of_quota(int64_t quota, int64_t period) {
  if (quota <= 0 || period <= 0) return 0;
  int64_t cpus = (quota + period - 1) / period;
  return cpus > 1 << 20 ? 1 << 20 : static_cast<int>(cpus);
}

int cgroup_cpu_limit(const std::string& proc_cgroup, const std::string& fs_root) {
  int least = 0;
  auto keep = [&least](int q) { least = tighter(q, least); };
  size_t at = 0;
  while (at < proc_cgroup.size()) {
    size_t end = proc_cgroup.find('\n', at);
    if (end == std::string::npos) end = proc_cgroup.size();
    const std::string line = proc_cgroup.substr(at, end - at);
    at = end + 1;
    // hierarchy-id:controllers:path
    size_t c1 = line.find(':'), c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    std::string path = line.substr(c2 + 1);
    if (path.empty() || path[0] != '/') continue;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (path == "/") path.clear();
    if (line.compare(0, c1, "0") == 0 && controllers.empty()) {
      keep(walk_up(fs_root, path, [](const std::string& dir) {
        long long quota = 0, period = 0;
        std::string text = first_line(dir + "/cpu.max");
        if (sscanf(text.c_str(), "%lld %lld", &quota, &period) != 2) return 0;  // "max ...": none
        return cpus_of_quota(quota, period);
      }));
      continue;
    }
    if (("," + controllers + ",").find(",cpu,") == std::string::npos) continue;
    // The controller is mounted once, under one of these names (the others,
    // where present, are links to it).
    for (const char* mount : {"/cpu", "/cpu,cpuacct", "/cpuacct,cpu"}) {
      if (access((fs_root + mount + "/cpu.cfs_period_us").c_str(), R_OK) != 0) continue;
      keep(walk_up(fs_root + mount, path, [](const std::string& dir) {
        std::string quota = first_line(dir + "/cpu.cfs_quota_us");
        std::string period = first_line(dir + "/cpu.cfs_period_us");
        if (quota.empty() || period.empty()) return 0;
        return cpus_of_quota(strtoll(quota.c_str(), nullptr, 10), strtoll(period.c_str(), nullptr, 10));
      }));
      break;
    }
  }
  return least;
}

UsableCpus usable_cpus() {
  UsableCpus u;
  cpu_set_t set;
  u.affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  if (u.affinity <= 0) u.affinity = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  if (u.affinity <= 0) u.affinity = 1;
  std::string cgroups;
  if (FILE* f = fopen("/proc/self/cgroup", "re")) {
    char buf[512];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) cgroups.append(buf, n);
    fclose(f);
  }
  u.quota = cgroup_cpu_limit(cgroups, "/sys/fs/cgroup");
  u.cpus = tighter(u.quota, u.affinity);
  return u;
}

int64_t thread_migrations(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/sched", static_cast<int>(tid));
  FILE* f = fopen(path, "re");
  if (!f) return -1;
  char line[256];
  int64_t v = -1;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "se.nr_migrations", 16) != 0) continue;
    const char* colon = strchr(line, ':');
    if (colon) v = strtoll(colon + 1, nullptr, 10);
    break;
  }
  fclose(f);
  return v;
}

void hardware_probe() {
  long fd = open_counter(PERF_COUNT_HW_CPU_CYCLES, 0);
  if (fd >= 0) {
    close(static_cast<int>(fd));
    g_hw_available = true;
    return;
  }
  int e = errno;
  std::string why = std::string("perf_event_open refuses the CPU's counters: ") + strerror(e);
  if (e == ENOENT || e == EOPNOTSUPP) why += " (no performance monitoring unit, as in many virtual machines)";
  else if (e == EACCES || e == EPERM) why += " (perf_event_paranoid or a container's seccomp profile forbids them)";
  g_hw_reason = new std::string(why);
}

void hardware_thread_start(ThreadState* t) {
  for (int i = 0; i < ThreadState::kHardwareCounters; i++)
    t->hw_fds[i] = g_hw_available ? move_fd_high(static_cast<int>(open_counter(kHardware[i].config, t->tid))) : -1;
}

void hardware_thread_end(ThreadState* t) {
  for (int i = 0; i < ThreadState::kHardwareCounters; i++) {
    if (t->hw_fds[i] < 0) continue;
    g_hw_ended[i].fetch_add(read_counter(t->hw_fds[i]));
    close(t->hw_fds[i]);
    t->hw_fds[i] = -1;
  }
}

void hardware_totals(const std::vector<ThreadState*>& live, std::vector<std::pair<std::string, uint64_t>>* out,
                     std::string* unavailable) {
  if (!g_hw_available) {
    *unavailable = g_hw_reason ? *g_hw_reason : "the CPU's counters were not probed";
    return;
  }
  for (int i = 0; i < ThreadState::kHardwareCounters; i++) {
    uint64_t total = g_hw_ended[i].load();
    for (ThreadState* t : live) total += read_counter(t->hw_fds[i]);
    out->emplace_back(kHardware[i].name, total);
  }
}

}  // namespace coz
