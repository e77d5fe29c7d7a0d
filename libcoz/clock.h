// Clocks in nanoseconds. Safe in signal context (clock_gettime is
// async-signal-safe; the time-stamp counter is one instruction).
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

// The CPU's time-stamp counter (constant rate on the CPUs Linux keeps it as
// its clock source): about 10 ns a read where clock_gettime costs 23 ns,
// and 50 ns just after a system call (the wait path; measured on the
// project's AMD EPYC host). Ticks become nanoseconds at a measured rate.
inline uint64_t cpu_ticks() {
  uint32_t lo, hi;
  __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Nanoseconds per tick in 32.32 fixed point (`rate`), applied to `ticks`.
inline uint64_t ticks_to_ns(uint64_t ticks, uint64_t rate) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(ticks) * rate) >> 32);
}

// The counter's rate against CLOCK_MONOTONIC, measured from the first call
// to the latest one (the longer the span, the closer: each end is a
// counter read bracketing a clock read, within ~20 ns, so 10 ms give the
// rate within 1e-5). Not for signal context; one owner.
class TickCalibration {
 public:
  // Takes a measurement. Returns the rate (ns per tick, 32.32) once the
  // span reaches `min_span_ns`, else 0.
  uint64_t measure(uint64_t min_span_ns);

 private:
  uint64_t tick0_ = 0, ns0_ = 0;
};

// Whether the kernel keeps the time-stamp counter as its clock source (it
// then found it constant-rate and synchronized across CPUs).
bool tsc_is_clock_source();

}  // namespace coz
