#include "rawlog.h"

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <fcntl.h>
#include <unistd.h>

#include "fds.h"

namespace coz {

namespace {
constexpr int kNoStderr = -1;
std::atomic<int> g_log_fd{STDERR_FILENO};
}  // namespace

void raw_log_keep_stderr() {
  int kept = g_log_fd.load(std::memory_order_relaxed);
  if (kept != STDERR_FILENO) return;
  int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == EBADF) g_log_fd.store(kNoStderr, std::memory_order_relaxed);
    return;
  }
  fd = move_fd_high(fd);
  if (fd >= 0) g_log_fd.store(fd, std::memory_order_relaxed);
}

void raw_log(const char* fmt, ...) {
  char buf[1024] = "coz: ";
  const int prefix = 5;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + prefix, sizeof(buf) - prefix - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  size_t len = prefix + (static_cast<size_t>(n) < sizeof(buf) - prefix - 1 ? n : sizeof(buf) - prefix - 2);
  buf[len++] = '\n';
  int fd = g_log_fd.load(std::memory_order_relaxed);
  // Ours unless the program closed it or put a descriptor of its own there.
  if (fd == kNoStderr || (fd != STDERR_FILENO && !fd_is_runtimes(fd))) return;
  size_t off = 0;
  while (off < len) {
    ssize_t w = write(fd, buf + off, len - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
}

}  // namespace coz
