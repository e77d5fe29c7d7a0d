// runs in signal context: no malloc, no locks, no stdio.
//
// Everything below marked [sig] is called from the sample signal handler.
// sampler_start/sampler_stop are not: they run in the owning thread at
// thread start and exit.
#include "sampler.h"

#include <fcntl.h>
#include <sched.h>
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#if COZ_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "clock.h"
#include "delays.h"
#include "loaded_objects.h"
#include "fds.h"
#include "unwind.h"
#include "sys.h"

namespace coz {

namespace {

SamplerSettings g_settings;
std::atomic<bool> g_any_timer{false};

// Sampling-only's CPU rings (see sampler_open_cpu_rings).
struct CpuRing {
  long cpu = -1;
  int fd = -1;
  int alt_fd = -1;  // the second event, its records in fd's ring (PERF_EVENT_IOC_SET_OUTPUT)
  perf_event_mmap_page* page = nullptr;
  size_t len = 0;
};
std::vector<CpuRing>* g_cpu_rings = nullptr;  // null: threads sample themselves
bool g_alt_active = false;                   // the profiler thread's: which of each CPU's events samples
// The profiler thread's (take_cpu_records). On the heap: the runtime starts
// that thread from its constructor, which may run before this file's static
// initializers (a global map was constructed over the one in use).
CpuMigrations& cpu_migrations() {
  static CpuMigrations* m = new CpuMigrations();
  return *m;
}
// Records the last take left for the next one, per ring (CpuRecordCut).
std::vector<std::vector<char>>& cpu_held() {
  static auto* h = new std::vector<std::vector<char>>();
  return *h;
}
constexpr uint64_t kCpuCutMarginNs = 1000000;
uint64_t g_cpu_rng = 0;
std::atomic<pid_t> g_ignored_tid{0};
std::atomic<bool> g_alone{false};  // sampler_sample_new_threads_alone

void close_cpu_rings() {
  if (!g_cpu_rings) return;
  for (CpuRing& c : *g_cpu_rings) {
    if (c.alt_fd >= 0) close(c.alt_fd);
    if (c.page) munmap(c.page, c.len);
    if (c.fd >= 0) close(c.fd);
  }
  g_alt_active = false;
  delete g_cpu_rings;
  g_cpu_rings = nullptr;
  cpu_held().clear();
}

constexpr size_t kDataPages = 8;  // ring buffer pages (power of two)
// Sampling-only records carry 2 KiB of stack each, and wait for the profiler
// thread's next look (every 5 ms) instead of a signal: 64 pages hold about
// 110 of them, 110 ms of a thread's samples at 1 kHz, what a profiler thread
// waiting for a CPU on a loaded machine can need (measured beside a busy
// loop, 2 CPUs, load 5: 16 pages lost 2-14% of the records of a 2 s run, 64
// pages none). Where the locked-memory allowance refuses that much (perf
// rings count against it for unprivileged users), the ring halves until it
// fits.
constexpr size_t kSignalFreeDataPages = 64;

long perf_event_open(perf_event_attr* attr, pid_t pid, int cpu, int group, unsigned long flags) {
  return sys(SYS_perf_event_open, attr, pid, cpu, group, flags);
}

pid_t gettid_raw() { return static_cast<pid_t>(sys(SYS_gettid)); }

// [sig] Counts the sample and hands it to the profiler thread. Hit test:
// chain_selected(), the rule the profiler thread attributes samples by.
// Returns the CPU time the hit stands for (0: no hit).
uint64_t record_sample(ThreadState* t, Sample* smp) {
  Shared& s = shared();
  uint64_t hit_ns = 0;
  const RangeSet* sel = s.selected.load(std::memory_order_acquire);
  add_origin(t->origin_pc, s.scope.load(std::memory_order_acquire), smp);
  note_cpu_share(t, smp->weight_ns, smp->wait_ns);
  if (sel && chain_selected(sel, s.scope.load(std::memory_order_acquire),
                            s.selected_any_frame.load(std::memory_order_relaxed), smp->pcs, smp->n)) {
    // The unit's cost in wall time: its CPU time, and the time the thread
    // waited for a CPU meanwhile (a faster unit would have needed less of
    // both).
    hit_ns = smp->weight_ns + smp->wait_ns;
    s.selected_samples.fetch_add(1, std::memory_order_relaxed);
    s.selected_ns.fetch_add(hit_ns, std::memory_order_relaxed);
  }
  if (experiment_delaying()) smp->flags |= kSampleDelaying;
  if (!t->ring.push(*smp)) t->dropped_samples.fetch_add(1, std::memory_order_relaxed);
  return hit_ns;
}

// Sampling periods are drawn uniformly from [period/2, 3 period/2), as
// DCPI does, so that samples do not fall in step with a program whose loop
// takes a multiple or a fraction of the period. A new period every few
// samples: PERF_EVENT_IOC_PERIOD restarts the event's timer and costs about
// 10 us in the handler (measured), too much at every sample.
constexpr uint32_t kSamplesPerPeriod = 8;

uint64_t random_period(ThreadState* t) { return draw_period(&t->rng, g_settings.period_ns); }

// A thread's first period: uniform in (0, period] (draw_period's draw less
// its period / 2), so that the thread's samples, each weighing `period`,
// hold on average all of its CPU time however short it is (a first period
// of `period` itself puts a thread shorter than it in no sample at all).
uint64_t first_period(ThreadState* t, uint64_t period) { return 1 + (draw_period(&t->rng, period) - period / 2); }

// [sig] The callchain of the interrupted context, unwound with the DWARF
// call frame information (libunwind): right in code built without frame
// pointers, where the kernel's frame-pointer callchain skips the caller of a
// frameless function (memcpy, strlen, any -O2 leaf) and loses track beyond.
// False when it yields nothing (no libunwind, or no unwind information).
bool unwind_context(void* uc_void, Sample* smp) {
#if COZ_HAVE_LIBUNWIND
  uint32_t kept = smp->n;
  uint32_t flags = smp->flags;
  smp->n = 0;
  smp->flags &= ~(kSampleTruncated | kSampleFramePointers);
  ObjectsFromCopy no_loader_lock;  // loaded_objects.h: the thread may be inside the loader's lock
  unw_cursor_t cursor;
  if (unw_init_local2(&cursor, static_cast<unw_context_t*>(uc_void), UNW_INIT_SIGNAL_FRAME) != 0) {
    smp->n = kept;
    smp->flags = flags;
    return false;
  }
  do {
    unw_word_t ip;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    if (smp->n == kMaxFrames) {
      smp->flags |= kSampleTruncated;
      break;
    }
    smp->pcs[smp->n] = smp->n ? ip - 1 : ip;  // return addresses: look up the call instruction
    smp->n++;
  } while (unw_step(&cursor) > 0);
  if (smp->n > 0) return true;
  smp->n = kept;  // nothing unwound: keep what there was
  smp->flags = flags;
  return false;
#else
  (void)uc_void;
  (void)smp;
  return false;
#endif
}

uintptr_t context_ip(void* uc) {
  return static_cast<uintptr_t>(static_cast<ucontext_t*>(uc)->uc_mcontext.gregs[REG_RIP]);
}

// [sig] Fills smp (frames from the kernel's callchain; weight and wait left
// to the caller) from the sample record whose body starts at `body`. With
// `copy`, the record also holds the user registers and the top of the
// stack (sampling-only mode): they go to *copy, the stack bytes into
// copy->stack's buffer. False for a malformed record.
bool parse_sample(const RecordReader& r, uint64_t body, uint64_t len, Sample* smp, StackCopy* copy,
                  uint8_t* stack_buf, uint64_t* period = nullptr, bool cpu_field = false) {
  // Layout: ip, time, nr, ips[nr] (PERF_SAMPLE_IP | TIME | CALLCHAIN), then
  // with copies: abi, regs[kCopiedRegs], size, data[size], dyn_size. The
  // CPU rings' records (g_cpu_rings) also hold pid/tid after ip and the
  // period after time (PERF_SAMPLE_TID | PERIOD): `period` then receives it.
  // A thread's own event in the causal modes holds the CPU after time
  // (PERF_SAMPLE_CPU, `cpu_field`).
  const uint64_t skip = (period ? 16 : 0) + (cpu_field ? 8 : 0);  // pid/tid and period; cpu
  const uint64_t head = 2 + skip / 8;       // words before nr
  const uint64_t words = len / sizeof(uint64_t);
  uint64_t nr = words > head ? r.word(body + head * 8) : 0;
  if (words <= head || nr > words - head - 1) return false;
  uint64_t ip = r.word(body);
  if (period) *period = r.word(body + 24);
  body += skip;  // from here on nr is at body + 16 and the frames follow, as in a thread's ring
  len -= skip;
  smp->flags = kSampleFramePointers;
  smp->n = 0;
  smp->pcs[smp->n++] = ip;
  bool seen_ip = false;
  for (uint64_t i = 0; i < nr; i++) {
    uint64_t pc = r.word(body + 24 + i * 8);
    if (pc >= static_cast<uint64_t>(PERF_CONTEXT_MAX)) continue;  // context markers
    if (!seen_ip) {
      seen_ip = true;
      if (pc == ip) continue;  // the callchain repeats the sampled ip first
    }
    if (smp->n == kMaxFrames) {
      smp->flags |= kSampleTruncated;
      break;
    }
    smp->pcs[smp->n++] = pc ? pc - 1 : 0;  // a return address: look up the call instruction
  }
  if (!copy) return true;
  uint64_t at = body + 24 + nr * 8;
  copy->size = 0;
  if (at + 8 > body + len) return false;
  uint64_t abi = r.word(at);
  at += 8;
  if (abi != 0) {
    if (at + kCopiedRegs * 8 > body + len) return false;
    for (int i = 0; i < kCopiedRegs; i++) copy->regs[i] = r.word(at + static_cast<uint64_t>(i) * 8);
    at += kCopiedRegs * 8;
  } else {
    return true;  // no user registers (a kernel thread's sample): the callchain only
  }
  if (at + 8 > body + len) return false;
  uint64_t size = r.word(at);
  at += 8;
  if (size > kSampleStackBytes || at + size + 8 > body + len) return false;
  uint64_t dyn = r.word(at + size);
  uint64_t used = dyn < size ? dyn : size;
  r.copy(at, stack_buf, used);
  copy->stack = stack_buf;
  copy->size = used;
  return true;
}

// [sig] Reads every complete record in the thread's perf ring buffer (the
// causal mode's handler, in the sampled thread). Returns the CPU time of the
// hits among them. `uc`, when given, is the context the sample signal
// interrupted: it is the thread's state at its newest sample (the kernel
// signals at each sample, on the way back to user mode), so that sample's
// callchain is unwound from it with the CFI rather than taken from the
// kernel's frame pointers.
uint64_t drain_perf(ThreadState* t, void* uc) {
  perf_event_mmap_page* page = t->page;
  // Sampling-only: the profiler thread alone reads the ring (take_records).
  if (!page || g_settings.signal_free) return 0;
  RecordReader r{reinterpret_cast<const char*>(page) + page->data_offset, page->data_size};
  uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = page->data_tail;
  const uint64_t first = tail;
  uint64_t hit_ns = 0;
  // The newest sample: switch records may follow it (the thread was
  // switched out between the sample and the signal's delivery), and the
  // interrupted context is still that sample's.
  uint64_t newest = UINT64_MAX;
  for (uint64_t at = tail; uc && at < head;) {
    perf_event_header hdr;
    r.copy(at, &hdr, sizeof hdr);
    if (hdr.size < sizeof hdr) break;
    if (hdr.type == PERF_RECORD_SAMPLE) newest = at;
    at += hdr.size;
  }
  Sample smp;
  while (tail < head) {
    perf_event_header hdr;
    r.copy(tail, &hdr, sizeof hdr);
    if (hdr.size < sizeof hdr || tail + hdr.size > head) {
      // Not a whole record: nothing after it can be trusted either.
      t->skipped_records.fetch_add(1, std::memory_order_relaxed);
      tail = head;
      break;
    }
    const uint64_t body = tail + sizeof hdr, len = hdr.size - sizeof hdr;
    if (hdr.type == PERF_RECORD_SAMPLE) {
      if (!parse_sample(r, body, len, &smp, nullptr, nullptr, nullptr, t->counts_moves)) {
        t->skipped_records.fetch_add(1, std::memory_order_relaxed);
      } else if (len >= 16 && in_cpu_pause(t, r.word(body + 8))) {  // ip, time
        t->switches.take_preempted();  // the runtime's pause, not the program's
      } else {
        if (tail == newest && smp.pcs[0] == context_ip(uc)) unwind_context(uc, &smp);
        // The period it ended (PERF_SAMPLE_PERIOD would say the first one,
        // whatever PERF_EVENT_IOC_PERIOD set since).
        smp.weight_ns = t->period_ns;
        smp.wait_ns = t->switches.take_preempted();
        uint64_t hit = record_sample(t, &smp);
        hit_ns += hit;
        settle_preempted(t, hit != 0);
      }
    } else if (hdr.type == PERF_RECORD_SWITCH && len >= 8) {
      bool ended = t->switches.on_switch(hdr.misc, r.word(body), tail == t->wake_tail);  // sample_id: the time[, cpu]
      if (hdr.misc & PERF_RECORD_MISC_SWITCH_OUT) t->out_early_credit = t->switches.out_uncharged && t->wake_fits;
      if (ended) note_preempted(t, t->switches.preempted_from, t->switches.preempted_to, t->out_early_credit);
      if (t->counts_moves && len >= 16 && !(hdr.misc & PERF_RECORD_MISC_SWITCH_OUT)) {
        uint32_t cpu = static_cast<uint32_t>(r.word(body + 8));  // u32 cpu, u32 reserved (little-endian)
        if (t->last_cpu != UINT32_MAX && cpu != t->last_cpu) t->cpu_moves++;
        t->last_cpu = cpu;
      }
    } else if (hdr.type == PERF_RECORD_LOST && len >= 16) {
      t->lost_records.fetch_add(r.word(body + 8), std::memory_order_relaxed);  // id, lost
    }
    tail += hdr.size;
  }
  // (Not stored when nothing was read: the wakes' drains find the ring
  // empty most of the time.)
  if (tail != first) __atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
  // A drain outside a sample signal is a wake's (hook_wake): what the ring
  // shows next happened after it.
  t->wake_tail = uc ? UINT64_MAX : tail;
  if (!uc) t->wake_fits = program_fits_one_more();
  return hit_ns;
}

// [sig] After a pause that held the CPU (delays.h, set_after_held_pause_fn):
// the records of its samples are dropped while its window is still known,
// those before it counted.
void drain_after_held_pause(ThreadState* t) { drain_own_records(t); }

// [sig] Timer sampler: the sample is the interrupted context itself, and
// stands for every period that elapsed since the previous one (the timer's
// overruns: with coarse ticks, one signal can cover several periods).
uint64_t sample_from_context(ThreadState* t, void* uc, int overrun) {
  Sample smp;
  smp.flags = 0;
  smp.weight_ns = g_settings.period_ns * (1 + static_cast<uint64_t>(overrun > 0 ? overrun : 0));
  // No switch records without perf_event: the scheduler's own count of the
  // time this thread waited for a CPU gives the same figure, read from the
  // descriptor the thread keeps (opening the file cost 5 us a sample, and
  // took the program's lowest free descriptor for that moment). It grows
  // only across a switch of the thread, so it is read only after one
  // (getrusage's counts).
  rusage ru;
  uint64_t switches = sys(SYS_getrusage, RUSAGE_THREAD, &ru) == 0
                          ? static_cast<uint64_t>(ru.ru_nvcsw) + static_cast<uint64_t>(ru.ru_nivcsw) + 1
                          : 0;
  smp.wait_ns = 0;
  if (!switches || switches != t->timer_switches) {
    uint64_t waited = t->schedstat_fd >= 0 ? schedstat_wait_ns(t->schedstat_fd) : schedstat_wait_ns();
    // (The first read, or one after a failed read, is the baseline only:
    // timer_switches is 0 then.)
    if (t->timer_switches && waited > t->timer_waited_ns) smp.wait_ns = waited - t->timer_waited_ns;
    t->timer_waited_ns = waited;
    t->timer_switches = waited ? switches : 0;
  }
  if (in_cpu_pause(t, now_mono())) return 0;  // the runtime's pause, not the program's
  smp.n = 1;
  smp.pcs[0] = context_ip(uc);
  unwind_context(uc, &smp);
  return record_sample(t, &smp);
}

}  // namespace

// [sig] Reads the thread's own records now, outside a sample signal and
// not for a wake: a wake's mark is kept while no record was read, and what
// was read consumed it. False when the thread does not read its own ring
// (sampling-only, the timer sampler).
bool drain_own_records(ThreadState* t) {
  if (!t->page || g_settings.signal_free) return false;
  const uint64_t wake = t->wake_tail, before = t->page->data_tail;
  const bool fits = t->wake_fits;
  add_hits(t, drain_perf(t, nullptr));
  t->wake_tail = t->page->data_tail == before ? wake : UINT64_MAX;
  t->wake_fits = fits;
  return true;
}

uint64_t draw_period(uint64_t* state, uint64_t mean) {
  uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;  // xorshift64*
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  uint64_t r = (x * 0x2545f4914f6cdd1dull) >> 11;  // 53 random bits
  return mean / 2 + r % (mean ? mean : 1);
}

int sample_signal() { return SIGRTMAX - 3; }

// [sig] The thread's total time runnable but waiting for a CPU
// (/proc/thread-self/schedstat, second field, in ns); 0 if unreadable.
uint64_t schedstat_wait_ns() {
  int fd = static_cast<int>(sys(SYS_open, "/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC));
  if (fd < 0) return 0;
  uint64_t v = schedstat_wait_ns(fd);
  close(fd);
  return v;
}

uint64_t schedstat_wait_ns(int fd) {
  char buf[96];
  ssize_t n = static_cast<ssize_t>(sys(SYS_pread64, fd, buf, sizeof buf - 1, 0));
  if (n <= 0) return 0;
  buf[n] = 0;
  const char* p = buf;
  while (*p && *p != ' ') p++;  // run time
  uint64_t v = 0;
  for (p++; *p >= '0' && *p <= '9'; p++) v = v * 10 + static_cast<uint64_t>(*p - '0');
  return v;
}

uint64_t sample_period_ns() { return g_settings.period_ns; }

void sampler_configure(const SamplerSettings& s) {
  g_settings = s;
  set_after_held_pause_fn(s.signal_free ? nullptr : drain_after_held_pause);
#if COZ_HAVE_LIBUNWIND
  // Per-thread caches: unwinding in a signal handler must take no lock
  // another thread may hold.
  unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
#endif
}

bool sampler_uses_timer() { return g_any_timer.load(); }
bool sampler_signals_threads() {
  return !g_settings.signal_free || g_any_timer.load(std::memory_order_relaxed) ||
         g_alone.load(std::memory_order_relaxed);
}

namespace {
// Task-clock sampling of user code, every `period_ns` of CPU time: the
// sampled ip and the callchain, the time on CLOCK_MONOTONIC, and
// context-switch records (allowed unprivileged for one's own events: an
// out with the PREEMPT flag to the next in is time the thread was runnable
// but had no CPU, which a sample's CPU time does not show). Disabled until
// enabled. `copies`: records also carry the user registers and the top of
// the stack, and wake nobody (sampling-only: the profiler thread looks).
perf_event_attr sampling_attr(uint64_t period_ns, bool copies) {
  perf_event_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_TASK_CLOCK;
  attr.sample_period = period_ns;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TIME | PERF_SAMPLE_CALLCHAIN;
  attr.context_switch = 1;
  attr.sample_id_all = 1;
  attr.use_clockid = 1;
  attr.clockid = CLOCK_MONOTONIC;
  attr.sample_max_stack = kMaxFrames;  // the kernel's limit is 127 by default
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.exclude_callchain_kernel = 1;
  attr.disabled = 1;
  if (copies) {
    attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = kSampleRegsMask;
    attr.sample_stack_user = kSampleStackBytes;
    attr.watermark = 1;
    attr.wakeup_watermark = 1u << 30;  // never: nobody waits on the descriptor
  }
  return attr;
}

// perf_event_open of a sampling_attr event. Kernels before 4.8 know no
// sample_max_stack (E2BIG or EINVAL): it is opened again without, its
// records then as long as the kernel's own limit, and read whole all the
// same.
long open_sampling_event(perf_event_attr* attr, pid_t pid, int cpu) {
  long fd = perf_event_open(attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  if (fd < 0 && (errno == E2BIG || errno == EINVAL)) {
    attr->sample_max_stack = 0;
    fd = perf_event_open(attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
  }
  return fd;
}
}  // namespace

namespace {
void close_event(int fd, void* ring, size_t len) {
  if (ring) munmap(ring, len);
  close(fd);
}

// The event's wakeups signal thread `tid` with the sample signal (O_ASYNC).
bool signals_thread(int fd, pid_t tid) {
  f_owner_ex owner{F_OWNER_TID, tid};
  return fcntl(fd, F_SETFL, O_ASYNC | O_NONBLOCK) == 0 && fcntl(fd, F_SETSIG, sample_signal()) == 0 &&
         fcntl(fd, F_SETOWN_EX, &owner) == 0;
}

// A thread's own generator, seeded from the clock and its id.
void seed_rng(ThreadState* t) { t->rng = now_mono() ^ (static_cast<uint64_t>(t->tid) << 32); }

// A thread sampled alone (sampler_sample_new_threads_alone): a task-clock
// event of its own with the CPU rings' records, a first period uniform in
// (0, period] (the kernel starts a new event's timer with a whole one, and
// offers no other way to set where the first one ends), and one signal at
// its end, whose handler sets the period itself (end_random_phase). Records
// wake nobody after that: the profiler thread takes them at its looks. False
// where refused, nothing left open: the CPU rings' events sample it then.
// Enabled by sampler_thread_ready, once the signal's handler knows the thread.
bool open_alone_event(ThreadState* t) {
  // Its own period, drawn as the causal modes draw theirs, for its whole
  // life: threads' samples do not fall in step with one another's loops
  // (one thread's may with its own, at a fixed period: the CPU rings'
  // turns are not theirs).
  seed_rng(t);
  const uint64_t period = random_period(t);
  perf_event_attr attr = sampling_attr(first_period(t, period), true);
  attr.watermark = 0;
  attr.wakeup_events = 1;  // a wakeup, and so the signal, at the first sample
  int fd = move_fd_high(static_cast<int>(open_sampling_event(&attr, t->tid, -1)));
  if (fd < 0) return false;
  const size_t len = (1 + kDataPages) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED || !signals_thread(fd, t->tid)) {
    close_event(fd, m == MAP_FAILED ? nullptr : m, len);
    return false;
  }
  t->perf_fd = fd;
  t->page = static_cast<perf_event_mmap_page*>(m);
  t->mmap_len = len;
  t->period_ns = period;  // the weight of each of its samples, the first included
  t->alone = true;
  t->phase_pending = t->random_first = true;
  return true;
}

// [sig] A thread's first period has ended, and its event with it
// (PERF_EVENT_IOC_REFRESH): from now on its own period (t->period_ns), and,
// sampled alone, no more signals. (PERF_EVENT_IOC_PERIOD restarts the
// event's timer: the signal at the first period's end is the place for it.)
void end_random_phase(ThreadState* t) {
  if (t->alone) fcntl(t->perf_fd, F_SETFL, O_NONBLOCK);
  uint64_t period = t->period_ns;
  ioctl(t->perf_fd, PERF_EVENT_IOC_PERIOD, &period);
  ioctl(t->perf_fd, PERF_EVENT_IOC_ENABLE, 0);
  t->phase_pending = false;
}
}  // namespace

void sampler_thread_ready(ThreadState* t) {
  if (!t->phase_pending) return;
  // For one sample only: the event stops itself there, and signals once
  // (POLL_HUP). Enabled for good, an event whose signal waits (a thread
  // that blocks it, or one whose handler does not know it yet) would queue
  // one per first period, microseconds apart, until the user's queue of
  // real-time signals is full and the kernel sends SIGIO instead, which
  // kills any process of that user that has not caught it.
  if (ioctl(t->perf_fd, PERF_EVENT_IOC_REFRESH, 1) == 0) return;
  if (t->alone) {
    close_event(t->perf_fd, t->page, t->mmap_len);
    t->page = nullptr;
    t->perf_fd = -1;
    t->alone = t->phase_pending = t->random_first = false;  // the CPU rings sample it
  } else {
    end_random_phase(t);  // (a whole first period then)
    t->random_first = false;
  }
}

void sampler_sample_new_threads_alone() { g_alone.store(true); }
bool sampler_samples_new_threads_alone() { return g_alone.load(std::memory_order_relaxed); }

SamplerKind sampler_start(ThreadState* t, std::string* why) {
  if (g_cpu_rings) {
    // Its events are inherited ones, its records in the CPU rings; or, once
    // short threads hold much of the CPU time, an event of its own.
    if (g_alone.load(std::memory_order_relaxed)) open_alone_event(t);
    return SamplerKind::kPerfEvent;
  }
  seed_rng(t);
  t->period_ns = random_period(t);
  // Causal modes: a random first period, the drawn one after it (sampler_thread_ready).
  perf_event_attr attr = sampling_attr(g_settings.signal_free ? t->period_ns : first_period(t, t->period_ns),
                                       g_settings.signal_free);
  if (!g_settings.signal_free) {
    attr.wakeup_events = g_settings.batch;
    // The CPU of each record: the thread's migrations, counted from its
    // switches in, where reading its /proc count at its end cost 30 us.
    attr.sample_type |= PERF_SAMPLE_CPU;
  }
  long fd = open_sampling_event(&attr, t->tid, -1);
  if (fd >= 0 && (fd = move_fd_high(static_cast<int>(fd))) < 0) {
    rlimit rl{};
    getrlimit(RLIMIT_NOFILE, &rl);
    *why = "the upper half of the open-file limit (ulimit -n = " + std::to_string(rl.rlim_cur) +
           ") is full of the profiler's descriptors, the lower half is left to the program";
  } else if (fd >= 0) {
    size_t pages = g_settings.signal_free ? kSignalFreeDataPages : kDataPages;
    size_t len = 0;
    void* m = MAP_FAILED;
    for (; pages >= kDataPages / 2 && m == MAP_FAILED; pages /= 2) {
      len = (1 + pages) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
      m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, static_cast<int>(fd), 0);
    }
    if (m != MAP_FAILED && (g_settings.signal_free || signals_thread(static_cast<int>(fd), t->tid))) {
      t->perf_fd = static_cast<int>(fd);
      t->page = static_cast<perf_event_mmap_page*>(m);
      t->mmap_len = len;
      t->counts_moves = !g_settings.signal_free;  // (its records' layout: before the first one)
      ioctl(t->perf_fd, PERF_EVENT_IOC_RESET, 0);
      if (g_settings.signal_free) ioctl(t->perf_fd, PERF_EVENT_IOC_ENABLE, 0);
      else t->phase_pending = t->random_first = true;  // started by sampler_thread_ready
      return SamplerKind::kPerfEvent;
    }
    close_event(static_cast<int>(fd), m == MAP_FAILED ? nullptr : m, len);
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
  t->schedstat_fd = open_high("/proc/thread-self/schedstat");  // (this thread's: the file names its opener)
  timer_settime(timer, 0, &its, nullptr);
  t->timer = timer;
  t->has_timer = true;
  g_any_timer.store(true);
  return SamplerKind::kTimer;
}

void sampler_stop(ThreadState* t) {
  if (t->perf_fd >= 0) {
    ioctl(t->perf_fd, PERF_EVENT_IOC_DISABLE, 0);
    // Sampling-only: the profiler thread takes the last records, then
    // releases the ring (sampler_forget) before recycling the state.
    if (g_settings.signal_free) return;
    process_samples(t, nullptr);
  }
  sampler_forget(t);
}

namespace {
std::atomic<uint64_t> g_ring_fill_permille{0};  // sampler_take_ring_fill_permille

// Appends a ring's pending records, whole, to *out, and frees their room.
void take_ring(perf_event_mmap_page* page, std::vector<char>* out) {
  RecordReader r{reinterpret_cast<const char*>(page) + page->data_offset, page->data_size};
  uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = page->data_tail;
  if (head > tail && page->data_size) {
    const uint64_t fill = std::min<uint64_t>(head - tail, page->data_size) * 1000 / page->data_size;
    uint64_t seen = g_ring_fill_permille.load(std::memory_order_relaxed);
    while (fill > seen && !g_ring_fill_permille.compare_exchange_weak(seen, fill, std::memory_order_relaxed)) {
    }
  }
  if (head > tail) {
    size_t at = out->size();
    out->resize(at + (head - tail));
    r.copy(tail, out->data() + at, head - tail);
  }
  __atomic_store_n(&page->data_tail, head, __ATOMIC_RELEASE);
}
}  // namespace

void take_records(ThreadState* t, std::vector<char>* out) {
  if (t->page) take_ring(t->page, out);
}

uint64_t sampler_take_ring_fill_permille() { return g_ring_fill_permille.exchange(0, std::memory_order_relaxed); }

void parse_records(const char* data, size_t len, SwitchState* sw, uint64_t period_ns, uint64_t* lost,
                   uint64_t* skipped, const std::function<void(Sample&)>& fn, bool cpu_layout) {
  RecordReader r{data, UINT64_MAX};
  Sample smp;
  uint64_t period = 0;
  StackCopy copy;
  static thread_local uint8_t stack_buf[kSampleStackBytes];
  for (uint64_t at = 0; at + sizeof(perf_event_header) <= len;) {
    perf_event_header hdr;
    r.copy(at, &hdr, sizeof hdr);
    if (hdr.size < sizeof hdr || at + hdr.size > len) {
      (*skipped)++;
      break;
    }
    const uint64_t body = at + sizeof hdr, blen = hdr.size - sizeof hdr;
    if (hdr.type == PERF_RECORD_SAMPLE) {
      if (!parse_sample(r, body, blen, &smp, &copy, stack_buf, cpu_layout ? &period : nullptr)) {
        (*skipped)++;
      } else {
        if (copy.size) {
          uintptr_t pcs[kMaxFrames];
          bool truncated = false;
          uint32_t n = static_cast<uint32_t>(unwind_copy(copy, pcs, kMaxFrames, &truncated));
          if (n > 1) {
            memcpy(smp.pcs, pcs, n * sizeof pcs[0]);
            smp.n = n;
            smp.flags = truncated ? uint32_t{kSampleTruncated} : 0u;
          }
        }
        // Else the kernel's chain, checked by the profiler (kSampleFramePointers).
        smp.weight_ns = cpu_layout && period ? period : period_ns;
        smp.wait_ns = sw->take_preempted();
        fn(smp);
      }
    } else if (hdr.type == PERF_RECORD_SWITCH && blen >= (cpu_layout ? 16u : 8u)) {
      sw->on_switch(hdr.misc, r.word(body + (cpu_layout ? 8 : 0)));  // sample_id: [pid, tid,] time
    } else if (hdr.type == PERF_RECORD_LOST && blen >= 16) {
      *lost += r.word(body + 8);
    }
    at += hdr.size;
  }
}

// ---- Sampling-only: one ring per CPU, events inherited by new threads ----
//
// A thread's own event (sampler_start) is scheduled out and in at each of
// its context switches, and its timer restarted: on the 2-CPU virtual test
// machine that cost 11% of `pipeline`'s time (26,000 switches in 1.9 s),
// where `perf record` (per-CPU events that new threads inherit, whose
// contexts the kernel swaps between sibling threads without scheduling
// them) cost 2%. Sampling-only does the same: the main thread opens one
// task-clock event per CPU with inherit and inherit_thread (threads, not
// child processes, inherit them; Linux 5.13), and every thread started
// after it writes to those rings. Records carry the thread's id and the
// period (PERF_SAMPLE_TID | PERIOD). The profiler thread splits them by
// thread and orders each thread's by time (its switch out and in may sit in
// two CPUs' rings).

namespace {
// A CPU's event: a period of its own, inherited by threads.
perf_event_attr cpu_ring_attr() {
  perf_event_attr attr = sampling_attr(draw_period(&g_cpu_rng, g_settings.period_ns), true);
  attr.sample_type |= PERF_SAMPLE_TID | PERF_SAMPLE_PERIOD;  // which thread; the event's period
  attr.inherit = 1;
  attr.inherit_thread = 1;
  return attr;
}

// One CPU's event and ring of `pages` pages, or why not (`*ring_refused`:
// the ring alone, which a smaller one may avoid).
bool open_cpu_ring(long cpu, size_t pages, CpuRing* c, bool* offline, bool* ring_refused, std::string* why) {
  perf_event_attr attr = cpu_ring_attr();
  long fd = open_sampling_event(&attr, 0, static_cast<int>(cpu));
  if (fd < 0) {
    *offline = errno == ENODEV || errno == ENXIO;
    *why = std::string("per-CPU inherited events refused: ") + strerror(errno);
    return false;
  }
  c->fd = move_fd_high(static_cast<int>(fd));
  if (c->fd < 0) {
    *why = "no descriptor free in the upper half of the open-file limit";
    return false;
  }
  c->len = (1 + pages) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* m = mmap(nullptr, c->len, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
  if (m == MAP_FAILED) {
    *ring_refused = true;
    *why = std::string("perf_event ring buffer setup failed: ") + strerror(errno);
    close(c->fd);
    c->fd = -1;
    return false;
  }
  c->page = static_cast<perf_event_mmap_page*>(m);
  return true;
}

// The CPU's second event: its own period, the same records, in the first
// one's ring. False where refused (a descriptor limit, an old kernel).
bool open_alternate(CpuRing* c) {
  perf_event_attr attr = cpu_ring_attr();
  int fd = move_fd_high(static_cast<int>(open_sampling_event(&attr, 0, static_cast<int>(c->cpu))));
  if (fd >= 0 && ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, c->fd) != 0) {
    close(fd);
    fd = -1;
  }
  c->alt_fd = fd;
  return fd >= 0;
}
// Whether the upper half of the open-file limit, where the runtime keeps its
// descriptors, can spare one more per CPU: the second events are the ones
// to do without (the objects' debug information is read through that half
// too, and a thread's own events where it opens them).
bool room_for_alternates(size_t cpus) {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return true;
  const uint64_t base = static_cast<uint64_t>(runtime_fd_base());
  const uint64_t room = rl.rlim_cur > base ? rl.rlim_cur - base : 0;
  return room >= 4 * cpus + 64;
}
}  // namespace

bool sampler_open_cpu_rings(std::string* why) {
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  g_cpu_rng = now_mono() ^ (static_cast<uint64_t>(gettid_raw()) << 32);
  // Every CPU's ring the same size, halved for all until every one fits the
  // locked-memory allowance.
  for (size_t pages = kSignalFreeDataPages; pages >= kDataPages / 2; pages /= 2) {
    g_cpu_rings = new std::vector<CpuRing>();
    bool ring_refused = false, failed = false;
    for (long cpu = 0; cpu < cpus && !failed; cpu++) {
      CpuRing c;
      c.cpu = cpu;
      bool offline = false;
      if (open_cpu_ring(cpu, pages, &c, &offline, &ring_refused, why))
        g_cpu_rings->push_back(c);
      else
        failed = !offline;
    }
    if (!failed && !g_cpu_rings->empty()) {
      // The second events once every CPU has its first (they are the ones
      // to do without): on every CPU, or on none.
      bool alternate = room_for_alternates(g_cpu_rings->size());
      for (size_t i = 0; i < g_cpu_rings->size() && alternate; i++) alternate = open_alternate(&(*g_cpu_rings)[i]);
      for (CpuRing& c : *g_cpu_rings) {
        if (!alternate && c.alt_fd >= 0) {
          close(c.alt_fd);
          c.alt_fd = -1;
        }
        ioctl(c.fd, PERF_EVENT_IOC_ENABLE, 0);
      }
      g_alt_active = false;
      return true;
    }
    close_cpu_rings();
    if (!ring_refused) {
      if (!failed) *why = "no CPU accepted an event";
      return false;
    }
  }
  return false;
}

bool sampler_cpu_rings() { return g_cpu_rings != nullptr; }

bool sampler_cpu_rings_alternate() { return g_cpu_rings && !g_cpu_rings->empty() && g_cpu_rings->front().alt_fd >= 0; }

void sampler_alternate_cpu_events() {
  if (!sampler_cpu_rings_alternate()) return;
  // The other events first, then these: for the few microseconds between,
  // both sample (a switch record twice reads as once, parse_records), where
  // the other order would leave that time to none.
  for (CpuRing& c : *g_cpu_rings) ioctl(g_alt_active ? c.fd : c.alt_fd, PERF_EVENT_IOC_ENABLE, 0);
  for (CpuRing& c : *g_cpu_rings) ioctl(g_alt_active ? c.alt_fd : c.fd, PERF_EVENT_IOC_DISABLE, 0);
  g_alt_active = !g_alt_active;
}

void sampler_ignore_thread(pid_t tid) { g_ignored_tid.store(tid); }

void split_cpu_records(const std::vector<char>& raw_buf, const std::vector<RingSpan>& spans, pid_t ignored,
                       std::vector<char>* out, std::vector<ThreadRecords>* chunks, uint64_t* lost,
                       CpuMigrations* migrations, const CpuRecordCut& cut) {
  struct Rec {
    pid_t tid;
    uint32_t ring;
    uint64_t time;
    size_t at, size;  // in raw
  };
  static thread_local std::vector<Rec> recs;
  recs.clear();
  const char* raw = raw_buf.data();
  RecordReader cr{raw, UINT64_MAX};
  for (uint32_t ring = 0; ring < spans.size(); ring++) {
    const RingSpan& span = spans[ring];
    for (size_t at = span.begin; at + sizeof(perf_event_header) <= span.end;) {
      perf_event_header hdr;
      cr.copy(at, &hdr, sizeof hdr);
      if (hdr.size < sizeof hdr || at + hdr.size > span.end) break;
      const size_t body = at + sizeof hdr, blen = hdr.size - sizeof hdr;
      uint32_t tid = 0;
      uint64_t time = 0;
      bool keep = false;
      if (hdr.type == PERF_RECORD_SAMPLE && blen >= 32) {  // ip, pid/tid, time, period
        memcpy(&tid, raw + body + 12, sizeof tid);
        time = cr.word(body + 16);
        keep = true;
      } else if (hdr.type == PERF_RECORD_SWITCH && blen >= 16) {  // sample_id: pid/tid, time
        memcpy(&tid, raw + body + 4, sizeof tid);
        time = cr.word(body + 8);
        keep = true;
      } else if (hdr.type == PERF_RECORD_LOST && blen >= 16) {
        *lost += cr.word(body + 8);  // id, lost
      }
      if (keep && static_cast<pid_t>(tid) != ignored) {
        if (cut.held && time >= cut.time &&
            !(cut.whole && std::find(cut.whole->begin(), cut.whole->end(), static_cast<pid_t>(tid)) != cut.whole->end()))
          (*cut.held)[ring].insert((*cut.held)[ring].end(), raw + at, raw + at + hdr.size);
        else
          recs.push_back({static_cast<pid_t>(tid), ring, time, at, hdr.size});
      }
      at += hdr.size;
    }
  }
  // Each thread's records in time order (the stable sort keeps one CPU's
  // order among equal times).
  std::stable_sort(recs.begin(), recs.end(),
                   [](const Rec& a, const Rec& b) { return a.tid != b.tid ? a.tid < b.tid : a.time < b.time; });
  for (size_t i = 0; i < recs.size();) {
    ThreadRecords ch{recs[i].tid, out->size(), 0};
    uint32_t* last = nullptr;
    if (migrations) {
      auto ins = migrations->last_ring.emplace(ch.tid, recs[i].ring);  // its first record: no move yet
      last = &ins.first->second;
    }
    for (; i < recs.size() && recs[i].tid == ch.tid; i++) {
      if (last && *last != recs[i].ring) {
        migrations->count++;
        *last = recs[i].ring;
      }
      out->insert(out->end(), raw + recs[i].at, raw + recs[i].at + recs[i].size);
    }
    ch.size = out->size() - ch.offset;
    chunks->push_back(ch);
  }
}

uint64_t take_cpu_records(std::vector<char>* out, std::vector<ThreadRecords>* chunks, uint64_t* lost,
                          const std::vector<pid_t>* ended, bool last) {
  if (!g_cpu_rings) return UINT64_MAX;
  static thread_local std::vector<char> raw;
  static thread_local std::vector<RingSpan> spans;
  raw.clear();
  spans.clear();
  // A record is in its ring microseconds after its time stamp (the kernel
  // writes it without being preempted); a virtual CPU the host stops
  // meanwhile takes longer: a millisecond's margin.
  const uint64_t now = now_mono();
  CpuRecordCut cut;
  cut.time = last ? UINT64_MAX : now > kCpuCutMarginNs ? now - kCpuCutMarginNs : 0;
  cut.whole = ended;
  std::vector<std::vector<char>>& held = cpu_held();
  cut.held = &held;
  held.resize(g_cpu_rings->size());
  for (size_t i = 0; i < g_cpu_rings->size(); i++) {
    size_t base = raw.size();
    raw.insert(raw.end(), held[i].begin(), held[i].end());  // older than the ring's
    held[i].clear();
    take_ring((*g_cpu_rings)[i].page, &raw);
    spans.push_back({base, raw.size()});
  }
  split_cpu_records(raw, spans, g_ignored_tid.load(), out, chunks, lost, &cpu_migrations(), cut);
  return cut.time;
}

uint64_t cpu_ring_migrations() { return cpu_migrations().count; }

void cpu_ring_thread_ended(pid_t tid) { cpu_migrations().last_ring.erase(tid); }

void sampler_forget_cpu_rings() {
  close_cpu_rings();
  cpu_migrations() = CpuMigrations();  // the child counts its own
  g_alone.store(false);                // and decides for itself
}

uint64_t rerandomize_period(ThreadState* t) {
  uint64_t next = random_period(t);
  if (t->perf_fd >= 0 && ioctl(t->perf_fd, PERF_EVENT_IOC_PERIOD, &next) == 0) t->period_ns = next;
  return t->period_ns;
}

namespace {
constexpr size_t kSignalStackBytes = 64 * 1024;  // an unmapped page at its low end
constexpr size_t kSignalGuardBytes = 4096;
}  // namespace

char* map_guarded_stack(size_t bytes) {
  long p = sys(SYS_mmap, nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE,
               -1, 0);
  if (p == -1) return nullptr;
  if (sys(SYS_mprotect, p, kSignalGuardBytes, PROT_NONE) != 0) {
    sys(SYS_munmap, p, bytes);
    return nullptr;
  }
  return reinterpret_cast<char*>(p);
}

void run_on_signal_stack(ThreadState* t, void (*fn)(void*), void* arg) {
  if (!t->signal_stack) {
    // (A failure is kept: two system calls at every sample would not find
    // memory the first ones did not.)
    if (t->signal_stack_refused) return fn(arg);
    t->signal_stack = map_guarded_stack(kSignalStackBytes);
    if (!t->signal_stack) {
      t->signal_stack_refused = true;
      return fn(arg);
    }
  }
  call_on_stack(fn, arg, t->signal_stack + kSignalStackBytes);
}

void sampler_forget(ThreadState* t) {
  t->ring_gone.store(true);
  while (t->ring_watch.load()) sched_yield();  // the profiler thread's look (sampler_watch_signals)
  if (t->page) munmap(t->page, t->mmap_len);
  t->page = nullptr;
  if (t->perf_fd >= 0) close(t->perf_fd);
  t->perf_fd = -1;
  if (t->has_timer) timer_delete(static_cast<timer_t>(t->timer));
  t->has_timer = false;
  if (t->schedstat_fd >= 0) close(t->schedstat_fd);
  t->schedstat_fd = -1;
  for (int i = 0; i < t->bp_count; i++)
    if (t->bp_fds[i] >= 0) close(t->bp_fds[i]);
  t->bp_count = 0;
  // Last: a late signal that still found a descriptor or timer above would
  // have mapped it again.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  if (t->signal_stack) sys(SYS_munmap, t->signal_stack, kSignalStackBytes);
  t->signal_stack = nullptr;
}

void stamp_wake_paying(ThreadState* t, const void* object) {
  if (!t->enter()) return;
  add_hits(t, drain_perf(t, nullptr));
  record_wake_stamp(t, object);
  t->leave();
}

namespace {
// The event signals the thread again (sampler_watch_signals).
void unpark_signals(ThreadState* t) {
  if (t->signals_parked.load(std::memory_order_relaxed) && t->signals_parked.exchange(false))
    fcntl(t->perf_fd, F_SETFL, O_ASYNC | O_NONBLOCK);
}

// Whether the sample signal waits in thread `tid`'s own pending set
// (SigPnd in /proc/self/task/TID/status, a mask in hex, bit n-1 for signal n).
bool sample_signal_pending(pid_t tid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/self/task/%d/status", static_cast<int>(tid));
  // (Not open_high: a read of a moment does not give up a number held back
  // for the runtime's files.)
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = 0;
  const char* p = strstr(buf, "\nSigPnd:");
  if (!p) return false;
  const unsigned long long mask = strtoull(p + 9, nullptr, 16);
  return (mask >> (sample_signal() - 1)) & 1;
}

void watch_signals(ThreadState* t) {
  if (t->perf_fd < 0 || !t->page || t->alone || g_settings.signal_free) return;
  const perf_event_mmap_page* page = t->page;
  if (t->signals_parked.load()) {
    // Its handler unparks it at the thread's next signal; here, once none
    // waits (the thread took its last ones before it was parked).
    if (!sample_signal_pending(t->tid)) unpark_signals(t);
    return;
  }
  const uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
  if (head - page->data_tail < page->data_size / 8 || !sample_signal_pending(t->tid)) return;
  // Signals off, then the flag: a handler that runs between the two finds
  // it down and leaves them off, and the next look, finding none waiting,
  // turns them on (above).
  fcntl(t->perf_fd, F_SETFL, O_NONBLOCK);
  t->signals_parked.store(true);
}
}  // namespace

void sampler_watch_signals(ThreadState* t) {
  // (The thread may be ending: its ring unmapped, its descriptor's number
  // the program's again.)
  t->ring_watch.fetch_add(1);
  if (!t->ring_gone.load()) watch_signals(t);
  t->ring_watch.fetch_sub(1);
}

void process_samples(ThreadState* t, void* uc) {
  // A signal reached the handler: the thread takes them again.
  if (uc) unpark_signals(t);
  // The first period's signal (not a wake's look), whether or not the
  // thread is inside the runtime: the event waits for it.
  if (uc && t->phase_pending) end_random_phase(t);
  if (t->alone) return;  // sampling-only: the profiler thread takes its records
  if (!t->enter()) return;
  add_hits(t, drain_perf(t, uc));
  if (!uc) settle_preempted_by_wake(t);  // a wake's look, before catch_up pays
  if (uc && ++t->samples_at_period >= kSamplesPerPeriod) {
    t->samples_at_period = 0;
    uint64_t next = random_period(t);
    if (ioctl(t->perf_fd, PERF_EVENT_IOC_PERIOD, &next) == 0) t->period_ns = next;
  }
  catch_up(t);
  t->leave();
}

// [sig] Called by the runtime's signal handler for a sample signal of ours.
void process_timer_sample(ThreadState* t, void* uc, int overrun) {
  if (!t->enter()) return;
  add_hits(t, sample_from_context(t, uc, overrun));
  catch_up(t);
  t->leave();
}

}  // namespace coz
