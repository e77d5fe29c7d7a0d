#include "clock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>

namespace coz {

namespace {
// A counter read and a clock read taken together: the clock read bracketed
// by two counter reads, the tightest bracket of four tries (a preemption
// between the reads would spoil one).
void paired_read(uint64_t* tick, uint64_t* ns) {
  uint64_t best = UINT64_MAX;
  for (int i = 0; i < 4; i++) {
    uint64_t a = cpu_ticks();
    uint64_t n = now_mono();
    uint64_t b = cpu_ticks();
    if (b >= a && b - a < best) {
      best = b - a;
      *tick = a + (b - a) / 2;
      *ns = n;
    }
  }
}
}  // namespace

uint64_t TickCalibration::measure(uint64_t min_span_ns) {
  uint64_t tick = 0, ns = 0;
  paired_read(&tick, &ns);
  if (!tick0_) {
    tick0_ = tick;
    ns0_ = ns;
    return 0;
  }
  if (ns < ns0_ + min_span_ns || tick <= tick0_) return 0;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ns - ns0_) << 32) / (tick - tick0_));
}

bool tsc_is_clock_source() {
  int fd = open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[32] = {0};
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  return n >= 3 && std::strncmp(buf, "tsc", 3) == 0 && (n == 3 || buf[3] == '\n');
}

}  // namespace coz
