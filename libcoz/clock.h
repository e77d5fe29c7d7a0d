// Clocks in nanoseconds. Safe in signal context (clock_gettime is
// async-signal-safe).
#pragma once

#include <cstdint>
#include <ctime>

namespace coz {

inline uint64_t clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}
inline uint64_t now_mono() { return clock_ns(CLOCK_MONOTONIC); }  // intervals
inline uint64_t now_real() { return clock_ns(CLOCK_REALTIME); }   // timestamps in the profile

}  // namespace coz
