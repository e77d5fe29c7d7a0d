#include "fds.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>

namespace coz {

int runtime_fd_base() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 2 > 4096) return 4096;
  return static_cast<int>(rl.rlim_cur / 2);
}

int move_fd_high(int fd) {
  if (fd < 0) return -1;
  int base = runtime_fd_base();
  if (fd >= base) return fd;  // the low numbers are full already: opened with O_CLOEXEC, it can stay
  int high = fcntl(fd, F_DUPFD_CLOEXEC, base);
  int saved = errno;
  close(fd);
  errno = saved;
  return high;
}

int open_high(const char* path) { return move_fd_high(open(path, O_RDONLY | O_CLOEXEC)); }

void move_pipe_high(int fds[2]) {
  const int base = runtime_fd_base();
  for (int i = 0; i < 2; i++) {
    if (fds[i] >= base) continue;
    int saved = errno;
    int high = fcntl(fds[i], F_DUPFD_CLOEXEC, base);
    if (high >= 0) {
      close(fds[i]);
      fds[i] = high;
    }
    errno = saved;
  }
}

}  // namespace coz
