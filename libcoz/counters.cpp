#include "counters.h"

#include <linux/perf_event.h>
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

}  // namespace

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
