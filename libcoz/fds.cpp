#include "fds.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

namespace coz {

namespace {
// One bit per descriptor number below kNotedFds (runtime_fd_base() is at most
// 4096; a process with 60,000 threads of ours would pass it, and its
// descriptors above are then not spared).
constexpr int kNotedFds = 65536;
std::atomic<uint64_t> g_runtimes[kNotedFds / 64];  // zero-initialized: static storage

void note(int fd) {
  if (fd >= 0 && fd < kNotedFds) g_runtimes[fd / 64].fetch_or(uint64_t{1} << (fd % 64), std::memory_order_relaxed);
}

// The lowest descriptor of the runtime's in [from, kNotedFds), or kNotedFds.
int next_runtimes(int from) {
  for (int w = from / 64; w < kNotedFds / 64; w++) {
    uint64_t bits = g_runtimes[w].load(std::memory_order_relaxed);
    if (w == from / 64) bits &= ~uint64_t{0} << (from % 64);
    if (bits) return w * 64 + __builtin_ctzll(bits);
  }
  return kNotedFds;
}

int sys_close_range(unsigned first, unsigned last, int flags) {
#ifdef SYS_close_range
  return static_cast<int>(syscall(SYS_close_range, first, last, flags));
#else
  (void)first, (void)last, (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}
// Descriptors held back for the runtime's own files (fds_hold_reserve):
// each slot the number plus one, 0 when empty.
constexpr int kReserveFds = 8;
std::atomic<int> g_reserve[kReserveFds];  // zero-initialized: static storage

}  // namespace

bool fds_release_reserve() {
  for (std::atomic<int>& r : g_reserve) {
    const int v = r.exchange(0);
    if (!v) continue;
    fd_forget(v - 1);
    syscall(SYS_close, v - 1);
    return true;
  }
  return false;
}

void fds_hold_reserve() {
  for (std::atomic<int>& r : g_reserve)
    if (r.load()) return;  // (a forked child profiled afresh: the parent's are its own)
  const int first = move_fd_high(static_cast<int>(syscall(SYS_open, "/dev/null", O_RDONLY | O_CLOEXEC)));
  if (first < 0) return;
  g_reserve[0].store(first + 1);
  for (int i = 1; i < kReserveFds; i++) {
    const int fd = fcntl(first, F_DUPFD_CLOEXEC, runtime_fd_base());
    if (fd < 0) break;
    note(fd);
    g_reserve[i].store(fd + 1);
  }
}

void fd_forget(int fd) {
  if (fd >= 0 && fd < kNotedFds) g_runtimes[fd / 64].fetch_and(~(uint64_t{1} << (fd % 64)), std::memory_order_relaxed);
}

bool fd_is_runtimes(int fd) {
  return fd >= 0 && fd < kNotedFds && (g_runtimes[fd / 64].load(std::memory_order_relaxed) >> (fd % 64)) & 1;
}

int close_range_sparing_runtime(unsigned first, unsigned last, int flags) {
  if (first > last || (flags & CLOSE_RANGE_CLOEXEC)) return sys_close_range(first, last, flags);
  unsigned from = first;
  while (from <= last && from < static_cast<unsigned>(kNotedFds)) {
    int ours = next_runtimes(static_cast<int>(from));
    if (ours >= kNotedFds || static_cast<unsigned>(ours) > last) break;
    if (static_cast<unsigned>(ours) > from && sys_close_range(from, ours - 1, flags) != 0) return -1;
    from = static_cast<unsigned>(ours) + 1;
  }
  if (from > last) return 0;
  return sys_close_range(from, last, flags);
}

int runtime_fd_base() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > 4096) return 4096;
  return static_cast<int>(rl.rlim_cur / 2);
}

int move_fd_high(int fd) {
  if (fd < 0) return -1;
  int base = runtime_fd_base();
  if (fd >= base) {  // the low numbers are full already: opened with O_CLOEXEC, it can stay
    note(fd);
    return fd;
  }
  int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
  int saved = errno;
  close(fd);
  errno = saved;
  note(high);
  return high;
}

int open_high(const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  // Every number taken (a program that opened up to its limit): one of the
  // numbers held back is given up for this file.
  if (fd < 0 && errno == EMFILE && fds_release_reserve()) fd = open(path, O_RDONLY | O_CLOEXEC);
  return move_fd_high(fd);
}

void move_pipe_high(int fds[2]) {
  const int base = runtime_fd_base();
  for (int i = 0; i < 2; i++) {
    if (fds[i] < base) {
      int saved = errno;
      int high = fcntl(fds[i], F_DUPFD_CLOEXEC, base);
      if (high >= 0) {
        close(fds[i]);
        fds[i] = high;
      }
      errno = saved;
    }
    note(fds[i]);
  }
}

}  // namespace coz
