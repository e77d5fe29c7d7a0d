#include "waits.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <new>
#include <unordered_map>
#include <unordered_set>

#include "clock.h"
#include "delays.h"
#include "loaded_objects.h"
#include "runtime.h"
#include "sampler.h"
#include "sys.h"

#if COZ_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

namespace coz {

namespace {

constexpr int kTrackedFds = 65536;
// What a descriptor links to, learned once per descriptor and forgotten when
// it is closed or replaced (close, dup2, dup3 are interposed). A descriptor
// closed by libc itself (fclose) and reused keeps its old answer: the
// price of not asking the kernel at every read.
enum FdKind : uint8_t { kUnknown = 0, kEventfd = 1, kEpollWithSiblings = 2, kSiblingLink = 3, kExternal = 4 };
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

void settle_handed_descriptors();  // below, beside the fork handlers

// The runtime's own code (libcoz.so): its frames are left out of a call's stack.
struct OwnText {
  uintptr_t start = 0, end = 0;
  bool known = false;
};

// The executable segment of the object that holds `fn`.
void text_of(void* fn, OwnText* t) {
  Dl_info obj;
  if (!dladdr(fn, &obj) || !obj.dli_fbase) return;
  struct Ctx {
    uintptr_t base;
    OwnText* t;
  } ctx{reinterpret_cast<uintptr_t>(obj.dli_fbase), t};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        Ctx* c = static_cast<Ctx*>(data);
        for (int i = 0; i < info->dlpi_phnum; i++) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          uintptr_t a = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
          if (c->base < a + ph.p_memsz && info->dlpi_addr <= c->base) {
            c->t->start = a;
            c->t->end = a + ph.p_memsz;
            return 1;
          }
        }
        return 0;
      },
      &ctx);
}

OwnText& own_text() {
  static OwnText t;
  if (!t.known) {
    t.known = true;
    text_of(reinterpret_cast<void*>(&own_text), &t);
  }
  return t;
}

// Whether a wait, given the frames of its call stack, counts for the
// running experiment's unit: the rule of CPU samples (chain_selected).
bool call_site_selected(const uintptr_t* pcs, uint32_t n) {
  return chain_selected(shared().selected.load(std::memory_order_acquire),
                        shared().scope.load(std::memory_order_acquire),
                        shared().selected_any_frame.load(std::memory_order_relaxed), pcs, n);
}

}  // namespace

void runtime_text(uintptr_t* start, uintptr_t* end) {
  const OwnText& own = own_text();
  *start = own.start;
  *end = own.end;
}

void unwinder_text(uintptr_t* start, uintptr_t* end) {
  OwnText t;
#if COZ_HAVE_LIBUNWIND
  text_of(reinterpret_cast<void*>(&unw_step), &t);
#endif
  *start = t.start;
  *end = t.end;
}

// Never called: its address stands for a sample taken inside libunwind in
// the runtime's sample handler, whose callers the kernel could not give.
// The frame is its address plus one (a return address, as the stacks'
// frames are): its body is longer than one byte, so that the frame is
// inside it and symbolizes to its name.
extern "C" __attribute__((noinline, used)) void coz_runtime_unwinding() { __asm__ volatile("nop\n\tnop"); }
uintptr_t runtime_unwinding_frame() { return reinterpret_cast<uintptr_t>(&coz_runtime_unwinding) + 1; }
// Never called either: each one's address stands for the kernel's CPU time
// inside an interposed call of its category. Bodies of their own lengths,
// so that no pass folds them into one.
extern "C" __attribute__((noinline, used)) void coz_kernel_in_io() { __asm__ volatile("nop"); }
extern "C" __attribute__((noinline, used)) void coz_kernel_in_lock() { __asm__ volatile("nop\n\tnop\n\tnop"); }
extern "C" __attribute__((noinline, used)) void coz_kernel_in_sleep() { __asm__ volatile("nop\n\tnop\n\tnop\n\tnop"); }
extern "C" __attribute__((noinline, used)) void coz_kernel_in_sync() {
  __asm__ volatile("nop\n\tnop\n\tnop\n\tnop\n\tnop");
}
uintptr_t kernel_in_call_frame(WaitKind kind) {
  void (*fn)() = coz_kernel_in_io;
  if (kind == WaitKind::kLock) fn = coz_kernel_in_lock;
  if (kind == WaitKind::kSleep) fn = coz_kernel_in_sleep;
  if (kind == WaitKind::kSync) fn = coz_kernel_in_sync;
  return reinterpret_cast<uintptr_t>(fn) + 1;
}

uint32_t call_stack(uintptr_t* pcs, uint32_t max, bool* truncated) {
  *truncated = false;
  uint32_t n = 0;
  RuntimeGuard guard;  // libunwind's own locks are not waits of the program
#if COZ_HAVE_LIBUNWIND
  const OwnText& own = own_text();
  ObjectsFromCopy no_loader_lock;  // loaded_objects.h: the thread may hold a lock the loader's holder waits for
  unw_context_t ctx;
  unw_cursor_t cursor;
  if (unw_getcontext(&ctx) != 0 || unw_init_local(&cursor, &ctx) != 0) return 0;
  while (unw_step(&cursor) > 0) {
    unw_word_t ip;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    uintptr_t pc = ip - 1;  // return addresses: look up the call instruction
    if (n == 0 && pc >= own.start && pc < own.end) continue;  // the wrapper and the hooks
    if (n == max) {
      *truncated = true;
      break;
    }
    pcs[n++] = pc;
  }
#else
  (void)pcs;
  (void)max;
#endif
  return n;
}

namespace {

// What a wait's end records, with t->busy held: its credit, its time under
// its kind, the hits of a sped-up wait, and its blocked samples. `unwinding`:
// the wait ends by an unwind through its wrapper or a jump out of a signal
// handler (unwound_wait), where the stack is not walked: its samples carry
// the call site alone, or the thread's origin.
void settle_wait(ThreadState* t, WaitKind kind, bool woken, uintptr_t caller, bool unwinding) {
  credit_wait(t, woken);
  uint64_t waited = wait_elapsed(t);
  t->last_wait_ns = waited;
  const int k = static_cast<int>(kind);
  if (waited) {
    // One writer, this thread (a wait nested in this one returns above):
    // no locked add, the profiler thread only reads.
    t->wait_total_ns[k].store(t->wait_total_ns[k].load(std::memory_order_relaxed) + waited,
                              std::memory_order_relaxed);
    const uint64_t period = sample_period_ns();
    t->wait_rest_ns[k] += waited;
    const bool sped = (shared().blocked_scope.load(std::memory_order_relaxed) >> k & 1) &&
                      shared().selected.load(std::memory_order_relaxed) &&
                      shared().paying.load(std::memory_order_relaxed);
    Sample smp;
    smp.n = 0;
    if (t->wait_rest_ns[k] >= period || sped) {
      // The call's stack: its first in-scope frame is the call site. The
      // fast path: the wrapper's own caller is in scope (and the selected
      // unit, if any, is decided by that frame: not a call site).
      const RangeSet* scope = shared().scope.load(std::memory_order_acquire);
      const bool whole_chain = sped && shared().selected_any_frame.load(std::memory_order_relaxed);
      if (caller && (unwinding || (!whole_chain && t->wait_rest_ns[k] < period)) && scope &&
          scope->contains(caller - 1)) {
        smp.pcs[0] = caller - 1;
        smp.n = 1;
      } else if (unwinding) {
        add_origin(t->origin_pc, scope, &smp);
      } else {
        bool truncated = false;
        smp.n = call_stack(smp.pcs, kMaxFrames, &truncated);
        smp.flags = truncated ? uint32_t{kSampleTruncated} : 0u;
        add_origin(t->origin_pc, scope, &smp);
      }
    }
    if (sped && call_site_selected(smp.pcs, smp.n)) {
      // The wait, sped up, earns delay as CPU samples of the line do: for
      // its part inside the experiment (the part before it began is not in
      // what the experiment measures). A wait begun in this experiment is
      // inside it whole; one begun before, from the experiment's start on.
      uint64_t inside = waited;
      if (t->wait_epoch != shared().epoch.load(std::memory_order_acquire)) {
        const uint64_t now = wait_clock();
        uint64_t start = now > waited ? now - waited : 0;
        uint64_t from = std::max(start, shared().experiment_start_ns.load(std::memory_order_relaxed));
        inside = now > from ? now - from : 0;
      }
      add_hits(t, inside);
      shared().selected_blocked_ns.fetch_add(inside, std::memory_order_relaxed);
    }
    if (t->wait_rest_ns[k] >= period) {
      uint64_t n = t->wait_rest_ns[k] / period;
      t->wait_rest_ns[k] -= n * period;
      smp.flags = (smp.flags & kSampleTruncated) | static_cast<uint32_t>(k + 1) << kSampleKindShift;
      smp.weight_ns = n * period;
      smp.wait_ns = 0;
      // The call's time off the CPU, for the profile's stacks: a call can
      // keep the CPU (a write the kernel copies at once). Its switch records
      // are read now, where the thread reads its own (once per period of
      // waiting at most); elsewhere the profiler thread measures it.
      smp.call_ns = waited;
      smp.call_end_ns = wait_clock();
      if (drain_own_records(t)) {
        uint64_t off = 0, preempted = 0;
        if (t->switches.call_within(smp.call_end_ns, waited, &off, &preempted)) {
          smp.call_off_ns = off;
          smp.call_preempted_ns = preempted;
        }
      }
      if (!t->ring.push(smp)) t->dropped_samples.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

}  // namespace

void end_wait(ThreadState* t, WaitKind kind, bool woken, uintptr_t caller) {
  if (!leave_wait(t)) return;
  // Hold off the sample handler meanwhile: it would pay from the same counts
  // and push to the same ring.
  if (!t->enter()) return;
  settle_wait(t, kind, woken, caller, false);
  catch_up(t);
  t->leave();
}

void unwound_wait(ThreadState* t, WaitKind kind, uintptr_t caller) {
  if (!leave_wait(t)) return;
  if (!t->enter()) return;
  settle_wait(t, kind, false, caller, true);
  t->leave();
}

void jumped_out_of_waits(ThreadState* t) {
  if (!t->wait_depth) return;
  t->wait_depth = 1;
  unwound_wait(t, static_cast<WaitKind>(t->open_wait_kind), t->open_wait_caller);
}

void fds_pipe_created(const int fds[2]) {
  settle_handed_descriptors();  // a pipe made after the child started is not the child's
  struct stat st;
  if (fstat(fds[0], &st) == 0) remember_pipe(st.st_ino);
  for (int i = 0; i < 2; i++)
    if (tracked(fds[i])) g_fd_kind[fds[i]].store(kSiblingLink, std::memory_order_relaxed);
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

void fds_closed_range(unsigned first, unsigned last) {
  for (unsigned fd = first; fd <= last && fd < static_cast<unsigned>(kTrackedFds); fd++) fds_closed(static_cast<int>(fd));
}

void fds_copied(int from, int to) {
  if (!tracked(to)) return;
  fds_closed(to);  // dup2/dup3 close the target first
  uint8_t k = tracked(from) ? g_fd_kind[from].load(std::memory_order_relaxed) : uint8_t{kUnknown};
  if (k == kEventfd || k == kSiblingLink || k == kExternal) g_fd_kind[to].store(k, std::memory_order_relaxed);
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

namespace {
bool classify(int fd) {
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
}  // namespace

bool fd_links_siblings(int fd) {
  settle_handed_descriptors();
  if (!tracked(fd)) return classify(fd);
  uint8_t k = g_fd_kind[fd].load(std::memory_order_relaxed);
  if (k == kEventfd || k == kSiblingLink) return true;
  if (k == kExternal) return false;
  bool sibling = classify(fd);
  // A socket not connected yet has no peer: ask again next time.
  struct stat st;
  if (!sibling && fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode)) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.pid == 0) return false;
  }
  if (k == kUnknown) {
    uint8_t expected = kUnknown;
    g_fd_kind[fd].compare_exchange_strong(expected, sibling ? kSiblingLink : kExternal, std::memory_order_relaxed);
  }
  return sibling;
}

namespace {
// The descriptors open at a fork are shared with the other process from
// then on: a pipe, socketpair or eventfd made before it now links two
// processes (a prefork server's workers, a multiprocessing pipe), and its
// reads are waits on the outside world in both. Each becomes external; the
// pipes created so far are forgotten, and epoll sets lose their sibling
// members (the epoll instance itself is shared too). Descriptors made after
// the fork are learned afresh. Raw system calls, no allocation: in the
// child of a threaded program only async-signal-safe calls are allowed (the
// child drops the epoll table, a copy of the parent's, without freeing it).
void demote_shared_descriptors(bool child) {
  for (auto& slot : g_pipe_inodes) slot.store(0, std::memory_order_relaxed);
  if (child)
    g_epoll_siblings = nullptr;
  else if (g_epoll_siblings)
    g_epoll_siblings->clear();
  int dir = static_cast<int>(sys(SYS_openat, AT_FDCWD, "/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir < 0) {
    // No /proc: the descriptors learned so far are all there is to go by
    // (an unclassified socketpair keeps its SO_PEERCRED answer).
    for (auto& k : g_fd_kind)
      if (k.load(std::memory_order_relaxed) != kUnknown) k.store(kExternal, std::memory_order_relaxed);
    return;
  }
  struct Dirent64 {
    uint64_t ino;
    int64_t off;
    unsigned short reclen;
    unsigned char type;
    char name[1];
  };
  alignas(8) char buf[2048];
  long n;
  while ((n = sys(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
    for (long at = 0; at < n;) {
      const Dirent64* d = reinterpret_cast<const Dirent64*>(buf + at);
      at += d->reclen;
      int fd = 0;
      const char* c = d->name;
      if (*c < '0' || *c > '9') continue;  // "." and ".."
      for (; *c >= '0' && *c <= '9' && fd < kTrackedFds; c++) fd = fd * 10 + (*c - '0');
      if (*c == 0 && fd != dir && tracked(fd)) g_fd_kind[fd].store(kExternal, std::memory_order_relaxed);
    }
  }
  sys(SYS_close, dir);
}
}  // namespace

namespace {
// Set when a child was started without a fork handler (posix_spawn, vfork):
// the descriptors open then are demoted as after a fork, by the parent, at
// its next look at a descriptor's class (a vfork child shares the parent's
// memory and may run only exec or _exit: it must not do it itself).
std::atomic<bool> g_handed_to_child{false};

void settle_handed_descriptors() {
  if (__builtin_expect(!g_handed_to_child.load(std::memory_order_relaxed), 1)) return;
  if (!g_handed_to_child.exchange(false, std::memory_order_acq_rel)) return;
  RuntimeGuard guard;
  std::lock_guard<std::mutex> g(g_epoll_mu);
  demote_shared_descriptors(false);
}
}  // namespace

void fds_handed_to_child() { g_handed_to_child.store(true, std::memory_order_release); }

void fds_fork_prepare() {
  RuntimeGuard guard;  // the runtime's own lock, not a lock of the program's
  g_epoll_mu.lock();
}

void fds_fork_parent() {
  RuntimeGuard guard;
  demote_shared_descriptors(false);
  g_epoll_mu.unlock();
}

void fds_fork_child() {
  new (&g_epoll_mu) std::mutex();  // taken by prepare, in a thread the child does not have
  demote_shared_descriptors(true);
}

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
  if (ready <= 0 || !experiment_running()) return false;
  settle_handed_descriptors();
  if (!tracked(epfd) || g_fd_kind[epfd].load(std::memory_order_relaxed) != kEpollWithSiblings) return false;
  RuntimeGuard guard;
  std::lock_guard<std::mutex> g(g_epoll_mu);
  auto it = g_epoll_siblings ? g_epoll_siblings->find(epfd) : decltype(g_epoll_siblings->end()){};
  if (!g_epoll_siblings || it == g_epoll_siblings->end()) return false;
  for (int i = 0; i < ready; i++)
    if (it->second.count(events[i].data.u64)) return true;
  return false;
}

}  // namespace coz
