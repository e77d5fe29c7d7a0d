#include "waits.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "runtime.h"
#include "sys.h"

namespace coz {

namespace {

constexpr int kTrackedFds = 65536;
enum FdKind : uint8_t { kUnknown = 0, kEventfd = 1, kEpollWithSiblings = 2 };
std::atomic<uint8_t> g_fd_kind[kTrackedFds];  // zero-initialized: static storage

// Inode numbers of the pipes this process created (both ends share one).
// Open addressing, insert-only; a full table forgets new pipes (they are
// then treated as the outside world, the safe side for delays).
constexpr size_t kPipeSlots = 4096;
std::atomic<uint64_t> g_pipe_inodes[kPipeSlots];

void remember_pipe(uint64_t ino) {
  if (!ino) return;
  for (size_t i = 0, h = (ino * 0x9e3779b97f4a7c15ull) >> 52; i < kPipeSlots; i++, h = (h + 1) % kPipeSlots) {
    uint64_t cur = g_pipe_inodes[h].load(std::memory_order_relaxed);
    if (cur == ino) return;
    if (cur == 0 && g_pipe_inodes[h].compare_exchange_strong(cur, ino)) return;
    if (cur == ino) return;
  }
}

bool own_pipe(uint64_t ino) {
  for (size_t i = 0, h = (ino * 0x9e3779b97f4a7c15ull) >> 52; i < kPipeSlots; i++, h = (h + 1) % kPipeSlots) {
    uint64_t cur = g_pipe_inodes[h].load(std::memory_order_relaxed);
    if (cur == ino) return true;
    if (cur == 0) return false;
  }
  return false;
}

bool tracked(int fd) { return fd >= 0 && fd < kTrackedFds; }

// epoll sets holding sibling links: epfd -> the event data of those members.
std::mutex g_epoll_mu;
std::unordered_map<int, std::unordered_set<uint64_t>>* g_epoll_siblings = nullptr;

bool experiment_running() { return hooked_thread() && shared().paying.load(std::memory_order_relaxed); }

}  // namespace

void fds_pipe_created(const int fds[2]) {
  struct stat st;
  if (fstat(fds[0], &st) == 0) remember_pipe(st.st_ino);
}

void fds_eventfd_created(int fd) {
  if (tracked(fd)) g_fd_kind[fd].store(kEventfd, std::memory_order_relaxed);
}

void fds_closed(int fd) {
  if (!tracked(fd)) return;
  uint8_t was = g_fd_kind[fd].exchange(kUnknown, std::memory_order_relaxed);
  if (was == kEpollWithSiblings) {
    RuntimeGuard guard;
    std::lock_guard<std::mutex> g(g_epoll_mu);
    if (g_epoll_siblings) g_epoll_siblings->erase(fd);
  }
}

void fds_copied(int from, int to) {
  if (!tracked(to)) return;
  fds_closed(to);  // dup2/dup3 close the target first
  uint8_t k = tracked(from) ? g_fd_kind[from].load(std::memory_order_relaxed) : uint8_t{kUnknown};
  if (k == kEventfd) g_fd_kind[to].store(k, std::memory_order_relaxed);
}

void fds_epoll_ctl(int epfd, int op, int fd, const struct epoll_event* ev) {
  if (!tracked(epfd) || (op != EPOLL_CTL_ADD && op != EPOLL_CTL_MOD) || !ev) return;
  if (!fd_links_siblings(fd)) return;
  RuntimeGuard guard;  // the lock below is the runtime's, not a wait of the program's
  std::lock_guard<std::mutex> g(g_epoll_mu);
  if (!g_epoll_siblings) g_epoll_siblings = new std::unordered_map<int, std::unordered_set<uint64_t>>();
  (*g_epoll_siblings)[epfd].insert(ev->data.u64);
  g_fd_kind[epfd].store(kEpollWithSiblings, std::memory_order_relaxed);
}

bool fd_links_siblings(int fd) {
  if (tracked(fd) && g_fd_kind[fd].load(std::memory_order_relaxed) == kEventfd) return true;
  struct stat st;
  if (fstat(fd, &st) != 0) return false;
  if (S_ISFIFO(st.st_mode)) return own_pipe(st.st_ino);
  if (!S_ISSOCK(st.st_mode)) return false;
  struct ucred cred;
  socklen_t len = sizeof cred;
  // A socketpair, or a connection to a listener of this process: the peer's
  // credentials are this process's. (TCP sockets have none.)
  return getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred &&
         cred.pid == static_cast<pid_t>(sys(SYS_getpid));
}

bool fd_woken_by_sibling(int fd) { return experiment_running() && fd_links_siblings(fd); }

bool poll_woken_by_sibling(const struct pollfd* fds, unsigned long n, int ready) {
  if (ready <= 0 || !experiment_running()) return false;
  int checked = 0;
  for (unsigned long i = 0; i < n && checked < 8; i++) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLPRI))) continue;
    checked++;
    if (fd_links_siblings(fds[i].fd)) return true;
  }
  return false;
}

bool select_woken_by_sibling(int nfds, const fd_set* readfds, int ready) {
  if (ready <= 0 || !readfds || !experiment_running()) return false;
  int checked = 0;
  for (int fd = 0; fd < nfds && fd < FD_SETSIZE && checked < 8; fd++) {
    if (!FD_ISSET(fd, readfds)) continue;
    checked++;
    if (fd_links_siblings(fd)) return true;
  }
  return false;
}

bool epoll_woken_by_sibling(int epfd, const struct epoll_event* events, int ready) {
  if (ready <= 0 || !tracked(epfd) || g_fd_kind[epfd].load(std::memory_order_relaxed) != kEpollWithSiblings ||
      !experiment_running())
    return false;
  RuntimeGuard guard;
  std::lock_guard<std::mutex> g(g_epoll_mu);
  auto it = g_epoll_siblings ? g_epoll_siblings->find(epfd) : decltype(g_epoll_siblings->end()){};
  if (!g_epoll_siblings || it == g_epoll_siblings->end()) return false;
  for (int i = 0; i < ready; i++)
    if (it->second.count(events[i].data.u64)) return true;
  return false;
}

}  // namespace coz
