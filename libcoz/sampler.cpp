// runs in signal context: no malloc, no locks, no stdio.
//
// Everything below marked [sig] is called from the sample signal handler.
// sampler_start/sampler_stop are not: they run in the owning thread at
// thread start and exit.
#include "sampler.h"

#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#if COZ_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "delays.h"
#include "fds.h"

namespace coz {

namespace {

SamplerSettings g_settings;
std::atomic<bool> g_any_timer{false};

constexpr size_t kDataPages = 8;  // ring buffer pages (power of two)

long perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group, unsigned long flags) {
  return syscall(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

pid_t gettid_raw() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// [sig] Records one sample given its frames (innermost first; frames after
// the first are return addresses).
void record_sample(ThreadState* t, const uintptr_t* frames, size_t n, uint64_t* hits) {
  Shared& s = shared();
  const RangeSet* scope = s.scope.load(std::memory_order_acquire);
  SampleSlot slot;
  slot.n = 0;
  for (size_t i = 0; i < n && slot.n < kSlotFrames; i++) {
    uintptr_t pc = frames[i];
    if (i > 0 && pc) pc -= 1;  // a return address: look up the call instruction
    if (scope && scope->contains(pc)) slot.pcs[slot.n++] = pc;
  }
  t->samples.fetch_add(1, std::memory_order_relaxed);
  if (slot.n == 0) {
    s.out_of_scope.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const RangeSet* sel = s.selected.load(std::memory_order_acquire);
  if (sel && sel->contains(slot.pcs[0])) {
    (*hits)++;
    s.selected_samples.fetch_add(1, std::memory_order_relaxed);
  }
  uint32_t head = t->ring_head.load(std::memory_order_relaxed);
  uint32_t tail = t->ring_tail.load(std::memory_order_acquire);
  if (head - tail >= kRingSlots) {
    t->dropped_samples.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  t->ring[head % kRingSlots] = slot;
  t->ring_head.store(head + 1, std::memory_order_release);
}

// [sig] Copies `len` bytes at ring offset `off`, handling wrap-around.
void ring_copy(const char* data, size_t size, uint64_t off, void* dst, size_t len) {
  size_t start = off % size;
  size_t first = len < size - start ? len : size - start;
  memcpy(dst, data + start, first);
  if (first < len) memcpy(static_cast<char*>(dst) + first, data, len - first);
}

// [sig] Reads every complete record in the perf ring buffer.
uint64_t drain_perf(ThreadState* t) {
  perf_event_mmap_page* page = t->page;
  if (!page) return 0;
  const char* data = reinterpret_cast<const char*>(page) + page->data_offset;
  const size_t size = page->data_size;
  uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = page->data_tail;
  uint64_t hits = 0;
  alignas(8) char buf[1024];
  while (tail < head) {
    perf_event_header hdr;
    ring_copy(data, size, tail, &hdr, sizeof hdr);
    if (hdr.size < sizeof hdr || tail + hdr.size > head) break;
    if (hdr.type == PERF_RECORD_SAMPLE && hdr.size <= sizeof buf) {
      ring_copy(data, size, tail, buf, hdr.size);
      // Layout for PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN: ip, nr, ips[nr].
      const uint64_t* p = reinterpret_cast<const uint64_t*>(buf + sizeof hdr);
      uint64_t ip = p[0];
      uint64_t nr = p[1];
      const uint64_t* ips = p + 2;
      uintptr_t frames[32];
      size_t n = 0;
      frames[n++] = ip;
      bool seen_ip = false;
      for (uint64_t i = 0; i < nr && n < 32; i++) {
        if (ips[i] >= static_cast<uint64_t>(PERF_CONTEXT_MAX)) continue;  // context markers
        if (!seen_ip) {
          seen_ip = true;
          if (ips[i] == ip) continue;  // the callchain repeats the sampled ip first
        }
        frames[n++] = ips[i];
      }
      record_sample(t, frames, n, &hits);
    } else if (hdr.type == PERF_RECORD_LOST) {
      uint64_t lost[3];  // id, lost
      ring_copy(data, size, tail + sizeof hdr, lost, 2 * sizeof(uint64_t));
      t->lost_records.fetch_add(lost[1], std::memory_order_relaxed);
    }
    tail += hdr.size;
  }
  __atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
  return hits;
}

// [sig] Timer sampler: the sample is the interrupted context itself.
uint64_t sample_from_context(ThreadState* t, void* uc_void) {
  uintptr_t frames[16];
  size_t n = 0;
#if COZ_HAVE_LIBUNWIND
  unw_cursor_t cursor;
  if (unw_init_local2(&cursor, static_cast<unw_context_t*>(uc_void), UNW_INIT_SIGNAL_FRAME) == 0) {
    do {
      unw_word_t ip;
      if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0) break;
      frames[n++] = ip;
    } while (n < 16 && unw_step(&cursor) > 0);
  }
#endif
  if (n == 0) {
    ucontext_t* uc = static_cast<ucontext_t*>(uc_void);
    frames[n++] = static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
  }
  uint64_t hits = 0;
  record_sample(t, frames, n, &hits);
  return hits;
}

}  // namespace

int sample_signal() { return SIGRTMAX - 3; }

void sampler_configure(const SamplerSettings& s) { g_settings = s; }

bool sampler_uses_timer() { return g_any_timer.load(); }

SamplerKind sampler_start(ThreadState* t, std::string* why) {
  t->tid = gettid_raw();
  perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.sample_period = g_settings.period_ns;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_CALLCHAIN;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.exclude_callchain_kernel = 1;
  attr.wakeup_events = g_settings.batch;
  attr.disabled = 1;
  long fd = perf_event_open(&attr, t->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd >= 0 && (fd = move_fd_high(static_cast<int>(fd))) < 0) {
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    *why = "the upper half of the open-file limit (ulimit -n = " + std::to_string(rl.rlim_cur) +
           ") is full of the profiler's descriptors, the lower half is left to the program";
  } else if (fd >= 0) {
    size_t len = (1 + kDataPages) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
    void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<int>(fd), 0);
    f_owner_ex owner{F_OWNER_TID, t->tid};
    if (m != MAP_FAILED && fcntl(static_cast<int>(fd), F_SETFL, O_ASYNC | O_NONBLOCK) == 0 &&
        fcntl(static_cast<int>(fd), F_SETSIG, sample_signal()) == 0 &&
        fcntl(static_cast<int>(fd), F_SETOWN_EX, &owner) == 0) {
      t->perf_fd = static_cast<int>(fd);
      t->page = static_cast<perf_event_mmap_page*>(m);
      t->mmap_len = len;
      ioctl(t->perf_fd, PERF_EVENT_IOC_RESET, 0);
      ioctl(t->perf_fd, PERF_EVENT_IOC_ENABLE, 0);
      return SamplerKind::kPerfEvent;
    }
    if (m != MAP_FAILED) munmap(m, len);
    close(static_cast<int>(fd));
    *why = std::string("perf_event ring buffer setup failed: ") + strerror(errno);
  } else if (errno == EMFILE || errno == ENFILE) {
    *why = std::string("perf_event_open found no free file descriptor (") + strerror(errno) + ")";
  } else {
    *why = std::string("perf_event_open refused: ") + strerror(errno);
  }

  // Fallback: a CPU-time timer of this thread, signalling this thread.
  sigevent sev;
  memset(&sev, 0, sizeof sev);
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = sample_signal();
  sev.sigev_value.sival_ptr = t;  // tells our timer's signals from the program's own timers
  sev._sigev_un._tid = t->tid;
  timer_t timer;
  if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &timer) != 0) {
    *why += std::string("; CPU timer refused too: ") + strerror(errno);
    return SamplerKind::kNone;
  }
  itimerspec its;
  its.it_interval.tv_sec = static_cast<time_t>(g_settings.period_ns / 1000000000ull);
  its.it_interval.tv_nsec = static_cast<long>(g_settings.period_ns % 1000000000ull);
  its.it_value = its.it_interval;
  timer_settime(timer, 0, &its, nullptr);
  t->timer = timer;
  t->has_timer = true;
  g_any_timer.store(true);
  return SamplerKind::kTimer;
}

void sampler_stop(ThreadState* t) {
  if (t->perf_fd >= 0) {
    ioctl(t->perf_fd, PERF_EVENT_IOC_DISABLE, 0);
    process_samples(t);
  }
  sampler_forget(t);
}

void sampler_forget(ThreadState* t) {
  if (t->page) munmap(t->page, t->mmap_len);
  t->page = nullptr;
  if (t->perf_fd >= 0) close(t->perf_fd);
  t->perf_fd = -1;
  if (t->has_timer) timer_delete(static_cast<timer_t>(t->timer));
  t->has_timer = false;
  for (int i = 0; i < t->bp_count; i++)
    if (t->bp_fds[i] >= 0) close(t->bp_fds[i]);
  t->bp_count = 0;
}

void process_samples(ThreadState* t) {
  if (t->busy.exchange(1, std::memory_order_acquire)) return;
  uint64_t hits = drain_perf(t);
  add_hits(t, hits);
  catch_up(t);
  t->busy.store(0, std::memory_order_release);
}

// [sig] Called by the runtime's signal handler for a sample signal of ours.
void process_timer_sample(ThreadState* t, void* uc) {
  if (t->busy.exchange(1, std::memory_order_acquire)) return;
  uint64_t hits = sample_from_context(t, uc);
  add_hits(t, hits);
  catch_up(t);
  t->busy.store(0, std::memory_order_release);
}

}  // namespace coz
