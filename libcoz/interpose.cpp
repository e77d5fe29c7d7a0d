// Every libc/pthread symbol the runtime overrides, each a thin wrapper:
// pre-hook, the original call, post-hook. The comment on each says what the
// call means for virtual speedup:
//   wake   - may release another thread: pay own delays first (hook_wake)
//   block  - may wait for another thread: credited with the delays inserted
//            meanwhile when another program thread released it (pre/post block)
//   self   - waits on its own (time, I/O): pays its debt after it wakes
// Logic lives in runtime.cpp, threads.cpp, signals.cpp and delays.cpp, never here.
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <threads.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <alloca.h>

#include "real.h"
#include "environment.h"
#include "fds.h"
#include "loaded_objects.h"
#include "runtime.h"
#include "sampler.h"
#include "sync_hooks.h"
#include "waits.h"

#define COZ_EXPORT extern "C" __attribute__((visibility("default")))

using coz::hook_post_block;
using coz::hook_wake;

using coz::LockKind;
using coz::WaitKind;

// The interposed function's return address: the program's call site when it
// called the function itself.
#define RA __builtin_return_address(0)

// Runs `call` as a blocking call of category `kind`; `woken` is an
// expression of `rc` telling whether another program thread released this one.
// `kind` and `woken` may look at `rc` (a timed wait that timed out is a sleep).
// `unwound_kind`: the wait's kind if it is left by an unwind (WaitGuard),
// when `kind` depends on the call's result.
#define COZ_WAIT_AS(unwound_kind, kind, call, woken)                          \
  ({                                                                          \
    coz::WaitGuard wait_guard_((unwound_kind), __builtin_return_address(0));  \
    auto rc = (call);                                                         \
    wait_guard_.returned();                                                   \
    hook_post_block((kind), (woken), __builtin_return_address(0));            \
    rc;                                                                       \
  })
#define COZ_WAIT(kind, call, woken) COZ_WAIT_AS(kind, kind, call, woken)
#define COZ_BLOCK(call, woken) COZ_WAIT(WaitKind::kSync, call, woken)
// A timed wait that ran out of time was a sleep, whatever it waited for.
#define COZ_TIMED(kind, call, woken, timed_out) \
  COZ_WAIT_AS(kind, (timed_out) ? WaitKind::kSleep : (kind), call, woken)
#define COZ_LOCK(call, woken) COZ_WAIT(WaitKind::kLock, call, woken)
#define COZ_SLEEP(call) COZ_WAIT(WaitKind::kSleep, call, false)
#define COZ_IO(call, woken) COZ_WAIT(WaitKind::kIo, call, woken)
#define COZ_SELF_IO(call) COZ_IO(call, false)

// glibc keeps the pre-2.3.2 condition variables under the default-less name.
#define COND_VERSION "GLIBC_2.3.2"

COZ_REAL_FN(pthread_create, nullptr)
COZ_REAL_FN(pthread_exit, nullptr)
COZ_REAL_FN(pthread_join, nullptr)
COZ_REAL_FN(pthread_tryjoin_np, nullptr)
COZ_REAL_FN(pthread_timedjoin_np, nullptr)
COZ_REAL_FN(pthread_clockjoin_np, nullptr)
COZ_REAL_FN(pthread_mutex_lock, nullptr)
COZ_REAL_FN(pthread_mutex_trylock, nullptr)
COZ_REAL_FN(pthread_mutex_timedlock, nullptr)
COZ_REAL_FN(pthread_mutex_clocklock, nullptr)
COZ_REAL_FN(pthread_mutex_unlock, nullptr)
COZ_REAL_FN(pthread_mutex_init, nullptr)
COZ_REAL_FN(pthread_rwlock_init, nullptr)
COZ_REAL_FN(pthread_cond_init, COND_VERSION)
COZ_REAL_FN(pthread_barrier_init, nullptr)
COZ_REAL_FN(sem_init, nullptr)
COZ_REAL_FN(pthread_spin_trylock, nullptr)
COZ_REAL_FN(pthread_spin_init, nullptr)
COZ_REAL_FN(mtx_trylock, nullptr)
COZ_REAL_FN(mtx_init, nullptr)
COZ_REAL_FN(cnd_init, nullptr)
COZ_REAL_FN(pthread_cond_wait, COND_VERSION)
COZ_REAL_FN(pthread_cond_timedwait, COND_VERSION)
COZ_REAL_FN(pthread_cond_clockwait, nullptr)
COZ_REAL_FN(pthread_cond_signal, COND_VERSION)
COZ_REAL_FN(pthread_cond_broadcast, COND_VERSION)
COZ_REAL_FN(pthread_barrier_wait, nullptr)
COZ_REAL_FN(pthread_rwlock_rdlock, nullptr)
COZ_REAL_FN(pthread_rwlock_tryrdlock, nullptr)
COZ_REAL_FN(pthread_rwlock_timedrdlock, nullptr)
COZ_REAL_FN(pthread_rwlock_clockrdlock, nullptr)
COZ_REAL_FN(pthread_rwlock_wrlock, nullptr)
COZ_REAL_FN(pthread_rwlock_trywrlock, nullptr)
COZ_REAL_FN(pthread_rwlock_timedwrlock, nullptr)
COZ_REAL_FN(pthread_rwlock_clockwrlock, nullptr)
COZ_REAL_FN(pthread_rwlock_unlock, nullptr)
COZ_REAL_FN(sem_wait, nullptr)
COZ_REAL_FN(sem_timedwait, nullptr)
COZ_REAL_FN(sem_clockwait, nullptr)
COZ_REAL_FN(sem_trywait, nullptr)
COZ_REAL_FN(sem_post, nullptr)
COZ_REAL_FN(sigwait, nullptr)
COZ_REAL_FN(sigwaitinfo, nullptr)
COZ_REAL_FN(sigtimedwait, nullptr)
COZ_REAL_FN(sigsuspend, nullptr)
COZ_REAL_FN(pause, nullptr)
COZ_REAL_FN(kill, nullptr)
COZ_REAL_FN(raise, nullptr)
COZ_REAL_FN(pthread_kill, nullptr)
COZ_REAL_FN(pthread_sigqueue, nullptr)
COZ_REAL_FN(sigqueue, nullptr)
COZ_REAL_FN(sigaction, nullptr)
COZ_REAL_FN(signal, nullptr)
COZ_REAL_FN(sigprocmask, nullptr)
COZ_REAL_FN(pthread_sigmask, nullptr)
COZ_REAL_FN(nanosleep, nullptr)
COZ_REAL_FN(clock_nanosleep, nullptr)
COZ_REAL_FN(usleep, nullptr)
COZ_REAL_FN(sleep, nullptr)
COZ_REAL_FN(read, nullptr)
COZ_REAL_FN(write, nullptr)
COZ_REAL_FN(recv, nullptr)
COZ_REAL_FN(recvfrom, nullptr)
COZ_REAL_FN(recvmsg, nullptr)
COZ_REAL_FN(send, nullptr)
COZ_REAL_FN(sendto, nullptr)
COZ_REAL_FN(sendmsg, nullptr)
COZ_REAL_FN(accept, nullptr)
COZ_REAL_FN(accept4, nullptr)
COZ_REAL_FN(connect, nullptr)
COZ_REAL_FN(poll, nullptr)
COZ_REAL_FN(ppoll, nullptr)
COZ_REAL_FN(select, nullptr)
COZ_REAL_FN(pselect, nullptr)
COZ_REAL_FN(epoll_wait, nullptr)
COZ_REAL_FN(epoll_pwait, nullptr)
COZ_REAL_FN(_exit, nullptr)
COZ_REAL_FN(daemon, nullptr)
COZ_REAL_FN(syscall, nullptr)
COZ_REAL_FN(thrd_create, nullptr)
COZ_REAL_FN(thrd_join, nullptr)
COZ_REAL_FN(thrd_exit, nullptr)
COZ_REAL_FN(thrd_sleep, nullptr)
COZ_REAL_FN(mtx_lock, nullptr)
COZ_REAL_FN(mtx_timedlock, nullptr)
COZ_REAL_FN(mtx_unlock, nullptr)
COZ_REAL_FN(cnd_wait, nullptr)
COZ_REAL_FN(cnd_timedwait, nullptr)
COZ_REAL_FN(cnd_signal, nullptr)
COZ_REAL_FN(cnd_broadcast, nullptr)
COZ_REAL_FN(pthread_spin_lock, nullptr)
COZ_REAL_FN(pthread_spin_unlock, nullptr)
COZ_REAL_FN(waitpid, nullptr)
COZ_REAL_FN(waitid, nullptr)
COZ_REAL_FN(wait, nullptr)
COZ_REAL_FN(wait3, nullptr)
COZ_REAL_FN(wait4, nullptr)
COZ_REAL_FN(posix_spawn, nullptr)
COZ_REAL_FN(posix_spawnp, nullptr)
COZ_REAL_FN(vfork, nullptr)
COZ_REAL_FN(pipe, nullptr)
COZ_REAL_FN(pipe2, nullptr)
COZ_REAL_FN(eventfd, nullptr)
COZ_REAL_FN(eventfd_read, nullptr)
COZ_REAL_FN(eventfd_write, nullptr)
COZ_REAL_FN(close, nullptr)
COZ_REAL_FN(dup, nullptr)
COZ_REAL_FN(dup2, nullptr)
COZ_REAL_FN(dup3, nullptr)
COZ_REAL_FN(epoll_ctl, nullptr)
COZ_REAL_FN(epoll_pwait2, nullptr)
COZ_REAL_FN(readv, nullptr)
COZ_REAL_FN(writev, nullptr)
COZ_REAL_FN(pread, nullptr)
COZ_REAL_FN(pread64, nullptr)
COZ_REAL_FN(pwrite, nullptr)
COZ_REAL_FN(pwrite64, nullptr)
COZ_REAL_FN(preadv, nullptr)
COZ_REAL_FN(preadv64, nullptr)
COZ_REAL_FN(pwritev, nullptr)
COZ_REAL_FN(pwritev64, nullptr)
COZ_REAL_FN(preadv2, nullptr)
COZ_REAL_FN(pwritev2, nullptr)
COZ_REAL_FN(recvmmsg, nullptr)
COZ_REAL_FN(sendmmsg, nullptr)
COZ_REAL_FN(sendfile, nullptr)
COZ_REAL_FN(fsync, nullptr)
COZ_REAL_FN(fdatasync, nullptr)
COZ_REAL_FN(flock, nullptr)
COZ_REAL_FN(lockf, nullptr)
COZ_REAL_FN(fcntl, nullptr)
COZ_REAL_FN(fcntl64, nullptr)
COZ_REAL_FN(_Exit, nullptr)
COZ_REAL_FN(execve, nullptr)
COZ_REAL_FN(execv, nullptr)
COZ_REAL_FN(execvp, nullptr)
COZ_REAL_FN(execvpe, nullptr)
COZ_REAL_FN(fexecve, nullptr)
COZ_REAL_FN(dl_iterate_phdr, nullptr)
COZ_REAL_FN(dlclose, nullptr)

namespace {
// Runs a sleep with the sample signal blocked. A sample's signal pending as
// the sleep begins (its period ended on the way in) ended nanosleep, usleep,
// sleep, a select or poll of no descriptor and sem_timedwait at once with
// EINTR or time left (after a handler they are not restarted, SA_RESTART or
// not): a program sleeping 100 ms slept none. The sample is taken as the
// call returns. Waits on descriptors (select, poll and epoll with some) are
// left as they are: any signal may end them, and their callers retry.
template <typename F>
auto unsampled(F call) -> decltype(call()) {
  if (!coz::sampler_signals_threads()) return call();
  sigset_t ss, old;
  sigemptyset(&ss);
  sigaddset(&ss, coz::sample_signal());
  real_pthread_sigmask()(SIG_BLOCK, &ss, &old);
  auto rc = call();
  int saved = errno;
  real_pthread_sigmask()(SIG_SETMASK, &old, nullptr);
  errno = saved;
  return rc;
}
}  // namespace

// ---- threads ----

// wake: the new thread starts level with its creator.
COZ_EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
  coz::runtime_init();  // a thread created by a constructor that ran before ours
  hook_wake();
  coz::ThreadStart* start = coz::prepare_thread(fn, arg);
  int rc = real_pthread_create()(thread, attr, coz::thread_trampoline, start);
  if (rc != 0) coz::discard_thread_start(start);
  return rc;
}
// Renames: the runtime keeps each thread's name (runtime.h,
// on_thread_renamed), so that it never opens /proc to read one.
COZ_REAL_FN(prctl, nullptr)
COZ_REAL_FN(pthread_setname_np, nullptr)
COZ_EXPORT int prctl(int option, ...) noexcept {
  // prctl takes up to four more arguments, as unsigned longs (the system
  // call's): all are passed on, as glibc's own wrapper passes them.
  va_list ap;
  va_start(ap, option);
  unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
  unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
  va_end(ap);
  int rc = real_prctl()(option, a2, a3, a4, a5);
  if (rc == 0 && option == PR_SET_NAME) {
    int saved = errno;
    coz::on_thread_renamed(pthread_self(), reinterpret_cast<const char*>(a2));
    errno = saved;
  }
  return rc;
}
COZ_EXPORT int pthread_setname_np(pthread_t t, const char* name) noexcept {
  int rc = real_pthread_setname_np()(t, name);
  if (rc == 0) {
    int saved = errno;
    coz::on_thread_renamed(t, name);
    errno = saved;
  }
  return rc;
}

// A jump out of a signal handler that interrupted a wait ends the wait
// (runtime.h, hook_jump): a program that times its reads out with alarm()
// and siglongjmp, as old network code does, left the wait open for good,
// and every later wait of the thread nested in it and went uncounted.
// glibc's fortified builds call __longjmp_chk for both.
extern "C" void __longjmp_chk(struct __jmp_buf_tag env[1], int val) noexcept __attribute__((noreturn));
COZ_REAL_FN(longjmp, nullptr)
COZ_REAL_FN(_longjmp, nullptr)
COZ_REAL_FN(siglongjmp, nullptr)
COZ_REAL_FN(__longjmp_chk, nullptr)
#define COZ_JUMP(name)                                                        \
  COZ_EXPORT void name(struct __jmp_buf_tag env[1], int val) noexcept {       \
    coz::hook_jump();                                                         \
    real_##name()(env, val);                                                  \
    __builtin_unreachable();                                                  \
  }
COZ_JUMP(longjmp)
COZ_JUMP(_longjmp)
COZ_JUMP(siglongjmp)
COZ_JUMP(__longjmp_chk)

// wake: joiners of this thread are released.
COZ_EXPORT void pthread_exit(void* value) {
  hook_wake();
  real_pthread_exit()(value);
  __builtin_unreachable();
}
// block (when the thread still runs): released when the other thread ends.
// Counted as a join of the thread's handle (tried first, as locks are).
#define COZ_JOIN(call, wait_kind)                                                                          \
  coz::acquire(LockKind::kJoin, reinterpret_cast<const void*>(t), RA, wait_kind,                             \
               [&] { return real_pthread_tryjoin_np()(t, value); },                                           \
               [&] { return call; }, coz::join_taken, coz::join_got)
COZ_EXPORT int pthread_join(pthread_t t, void** value) { return COZ_JOIN(real_pthread_join()(t, value), coz::join_wait); }
// never blocks: nothing to account.
COZ_EXPORT int pthread_tryjoin_np(pthread_t t, void** value) noexcept { return real_pthread_tryjoin_np()(t, value); }
// block (when the thread still runs), bounded by a timeout.
COZ_EXPORT int pthread_timedjoin_np(pthread_t t, void** value, const struct timespec* abstime) {
  return COZ_JOIN(real_pthread_timedjoin_np()(t, value, abstime), coz::timed_join_wait);
}
COZ_EXPORT int pthread_clockjoin_np(pthread_t t, void** value, clockid_t clock, const struct timespec* abstime) {
  return COZ_JOIN(real_pthread_clockjoin_np()(t, value, clock, abstime), coz::timed_join_wait);
}

// ---- mutexes ----

// block (when taken): released by the holder's unlock.
COZ_EXPORT int pthread_mutex_lock(pthread_mutex_t* m) noexcept {
  return coz::acquire(
      LockKind::kMutex, m, RA, coz::lock_wait, [&] { return real_pthread_mutex_trylock()(m); },
      [&] { return real_pthread_mutex_lock()(m); }, coz::pthread_taken, coz::pthread_got);
}
// never blocks: counted as a try.
COZ_EXPORT int pthread_mutex_trylock(pthread_mutex_t* m) noexcept {
  return coz::try_acquire(LockKind::kMutex, m, RA, [&] { return real_pthread_mutex_trylock()(m); }, coz::pthread_got);
}
// block (when taken), bounded by a timeout.
COZ_EXPORT int pthread_mutex_timedlock(pthread_mutex_t* m, const struct timespec* abstime) noexcept {
  return coz::acquire(
      LockKind::kMutex, m, RA, coz::timed_lock_wait, [&] { return real_pthread_mutex_trylock()(m); },
      [&] { return real_pthread_mutex_timedlock()(m, abstime); }, coz::pthread_taken, coz::pthread_got);
}
COZ_EXPORT int pthread_mutex_clocklock(pthread_mutex_t* m, clockid_t clock, const struct timespec* abstime) noexcept {
  return coz::acquire(
      LockKind::kMutex, m, RA, coz::timed_lock_wait, [&] { return real_pthread_mutex_trylock()(m); },
      [&] { return real_pthread_mutex_clocklock()(m, clock, abstime); }, coz::pthread_taken, coz::pthread_got);
}
// wake: a waiter may take the lock.
COZ_EXPORT int pthread_mutex_unlock(pthread_mutex_t* m) noexcept {
  coz::release_mutex(m);
  int rc = real_pthread_mutex_unlock()(m);
  coz::released();
  return rc;
}
// the lock's identity: where it was initialized.
COZ_EXPORT int pthread_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t* a) noexcept {
  coz::initialized(m, RA);
  return real_pthread_mutex_init()(m, a);
}

// ---- condition variables ----

// wake (the mutex is released: its hold ends), then block until
// signalled; the mutex is held again when it returns.
#define COZ_COND_WAIT(kind, call, m, c)                                 \
  ({                                                                     \
    coz::release_mutex(m, false);                                        \
    coz::WaitObject cw_(coz::hooked_thread(), c);                        \
    int rc_ = COZ_TIMED(kind, call, rc == 0, rc == ETIMEDOUT);            \
    coz::waited_for(LockKind::kCond, c, RA);                             \
    coz::reacquired(m, RA);                                              \
    rc_;                                                                 \
  })
COZ_EXPORT int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
  return COZ_COND_WAIT(WaitKind::kSync, real_pthread_cond_wait()(c, m), m, c);
}
COZ_EXPORT int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const struct timespec* abstime) {
  return COZ_COND_WAIT(WaitKind::kSync, real_pthread_cond_timedwait()(c, m, abstime), m, c);
}
COZ_EXPORT int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clock,
                                      const struct timespec* abstime) {
  return COZ_COND_WAIT(WaitKind::kSync, real_pthread_cond_clockwait()(c, m, clock, abstime), m, c);
}
COZ_EXPORT int pthread_cond_init(pthread_cond_t* c, const pthread_condattr_t* a) noexcept {
  coz::initialized(c, RA);
  return real_pthread_cond_init()(c, a);
}
// wake.
COZ_EXPORT int pthread_cond_signal(pthread_cond_t* c) noexcept {
  coz::signalling(c);
  int rc = real_pthread_cond_signal()(c);
  coz::released();
  return rc;
}
COZ_EXPORT int pthread_cond_broadcast(pthread_cond_t* c) noexcept {
  coz::signalling(c);
  int rc = real_pthread_cond_broadcast()(c);
  coz::released();
  return rc;
}

// ---- barriers ----

// wake (the last arrival releases all), and block until all arrive.
COZ_EXPORT int pthread_barrier_wait(pthread_barrier_t* b) noexcept {
  hook_wake();
  int rc = COZ_BLOCK(real_pthread_barrier_wait()(b), true);
  coz::waited_for(LockKind::kBarrier, b, RA);
  return rc;
}
COZ_EXPORT int pthread_barrier_init(pthread_barrier_t* b, const pthread_barrierattr_t* a, unsigned n) noexcept {
  coz::initialized(b, RA);
  return real_pthread_barrier_init()(b, a, n);
}

// ---- read-write locks ----

// block (when taken): released by a writer's (or the last reader's) unlock.
#define COZ_RWLOCK(tryfn, call, wait_kind)                                                              \
  coz::acquire(LockKind::kRwlock, l, RA, wait_kind, [&] { return real_##tryfn()(l); }, [&] { return call; }, \
               coz::pthread_taken, coz::pthread_got)
COZ_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t* l) noexcept {
  return COZ_RWLOCK(pthread_rwlock_tryrdlock, real_pthread_rwlock_rdlock()(l), coz::lock_wait);
}
COZ_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t* l) noexcept {
  return COZ_RWLOCK(pthread_rwlock_trywrlock, real_pthread_rwlock_wrlock()(l), coz::lock_wait);
}
// never block: counted as tries.
COZ_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t* l) noexcept {
  return coz::try_acquire(LockKind::kRwlock, l, RA, [&] { return real_pthread_rwlock_tryrdlock()(l); }, coz::pthread_got);
}
COZ_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t* l) noexcept {
  return coz::try_acquire(LockKind::kRwlock, l, RA, [&] { return real_pthread_rwlock_trywrlock()(l); }, coz::pthread_got);
}
// block (when taken), bounded by a timeout.
COZ_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t* l, const struct timespec* t) noexcept {
  return COZ_RWLOCK(pthread_rwlock_tryrdlock, real_pthread_rwlock_timedrdlock()(l, t), coz::timed_lock_wait);
}
COZ_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t* l, const struct timespec* t) noexcept {
  return COZ_RWLOCK(pthread_rwlock_trywrlock, real_pthread_rwlock_timedwrlock()(l, t), coz::timed_lock_wait);
}
COZ_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t* l, clockid_t c, const struct timespec* t) noexcept {
  return COZ_RWLOCK(pthread_rwlock_tryrdlock, real_pthread_rwlock_clockrdlock()(l, c, t), coz::timed_lock_wait);
}
COZ_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t* l, clockid_t c, const struct timespec* t) noexcept {
  return COZ_RWLOCK(pthread_rwlock_trywrlock, real_pthread_rwlock_clockwrlock()(l, c, t), coz::timed_lock_wait);
}
// wake.
COZ_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t* l) noexcept {
  coz::release(l);
  return real_pthread_rwlock_unlock()(l);
}
COZ_EXPORT int pthread_rwlock_init(pthread_rwlock_t* l, const pthread_rwlockattr_t* a) noexcept {
  coz::initialized(l, RA);
  return real_pthread_rwlock_init()(l, a);
}

// ---- POSIX semaphores ----

// block (when none is left): released by sem_post.
#define COZ_SEM(call, wait_kind)                                                                          \
  coz::acquire(LockKind::kSemaphore, s, RA, wait_kind, [&] { return real_sem_trywait()(s); }, [&] { return call; }, \
               [](int rc) { return rc == -1 && errno == EAGAIN; }, [](int rc) { return rc == 0; })
COZ_EXPORT int sem_wait(sem_t* s) { return COZ_SEM(real_sem_wait()(s), coz::lock_wait); }
COZ_EXPORT int sem_timedwait(sem_t* s, const struct timespec* t) {
  return COZ_SEM(unsampled([&] { return real_sem_timedwait()(s, t); }), [](int rc) { return rc == -1 && errno == ETIMEDOUT ? WaitKind::kSleep : WaitKind::kLock; });
}
COZ_EXPORT int sem_clockwait(sem_t* s, clockid_t c, const struct timespec* t) {
  return COZ_SEM(unsampled([&] { return real_sem_clockwait()(s, c, t); }), [](int rc) { return rc == -1 && errno == ETIMEDOUT ? WaitKind::kSleep : WaitKind::kLock; });
}
// never blocks: counted as a try.
COZ_EXPORT int sem_trywait(sem_t* s) noexcept {
  return coz::try_acquire(LockKind::kSemaphore, s, RA, [&] { return real_sem_trywait()(s); }, [](int rc) { return rc == 0; });
}
// wake.
COZ_EXPORT int sem_post(sem_t* s) noexcept {
  hook_wake();
  return real_sem_post()(s);
}
COZ_EXPORT int sem_init(sem_t* s, int shared, unsigned value) noexcept {
  coz::initialized(s, RA);
  return real_sem_init()(s, shared, value);
}

// ---- signals as synchronization ----

// block: released by a signal, usually sent by another thread of the program.
COZ_EXPORT int sigwait(const sigset_t* set, int* sig) { return COZ_BLOCK(real_sigwait()(set, sig), rc == 0); }
COZ_EXPORT int sigwaitinfo(const sigset_t* set, siginfo_t* info) {
  return COZ_BLOCK(real_sigwaitinfo()(set, info), rc > 0);
}
COZ_EXPORT int sigtimedwait(const sigset_t* set, siginfo_t* info, const struct timespec* t) {
  return COZ_TIMED(WaitKind::kSync, real_sigtimedwait()(set, info, t), rc > 0, rc == -1 && errno == EAGAIN);
}
COZ_EXPORT int sigsuspend(const sigset_t* mask) { return COZ_BLOCK(real_sigsuspend()(mask), true); }
COZ_EXPORT int pause() { return COZ_BLOCK(real_pause()(), true); }
// wake: the signal may release a waiting thread of this process.
COZ_EXPORT int kill(pid_t pid, int sig) noexcept {
  hook_wake();
  return real_kill()(pid, sig);
}
COZ_EXPORT int raise(int sig) noexcept {
  hook_wake();
  return real_raise()(sig);
}
COZ_EXPORT int pthread_kill(pthread_t t, int sig) noexcept {
  hook_wake();
  return real_pthread_kill()(t, sig);
}
COZ_EXPORT int pthread_sigqueue(pthread_t t, int sig, const union sigval v) noexcept {
  hook_wake();
  return real_pthread_sigqueue()(t, sig, v);
}
COZ_EXPORT int sigqueue(pid_t pid, int sig, const union sigval v) noexcept {
  hook_wake();
  return real_sigqueue()(pid, sig, v);
}

// ---- signal dispositions and masks: the program sees only its own ----

COZ_EXPORT int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
  if (sig > 0 && sig < _NSIG && coz::signal_is_virtualized(sig)) return coz::virtual_sigaction(sig, act, old);
  return real_sigaction()(sig, act, old);
}
COZ_EXPORT sighandler_t signal(int sig, sighandler_t handler) noexcept {
  if (!(sig > 0 && sig < _NSIG && coz::signal_is_virtualized(sig))) return real_signal()(sig, handler);
  struct sigaction act, old;
  act.sa_handler = handler;
  act.sa_flags = SA_RESTART;  // BSD semantics, as glibc's signal()
  sigemptyset(&act.sa_mask);
  sigaddset(&act.sa_mask, sig);
  if (coz::virtual_sigaction(sig, &act, &old) != 0) return SIG_ERR;
  return old.sa_handler;
}
COZ_EXPORT int sigprocmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  return coz::virtual_sigmask(real_sigprocmask(), how, set, old);
}
COZ_EXPORT int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) noexcept {
  return coz::virtual_sigmask(real_pthread_sigmask(), how, set, old);
}
COZ_EXPORT int sigaltstack(const stack_t* ss, stack_t* old) noexcept { return coz::virtual_sigaltstack(ss, old); }

// ---- sleeps: self ----

COZ_EXPORT int nanosleep(const struct timespec* req, struct timespec* rem) {
  return COZ_SLEEP(unsampled([&] { return real_nanosleep()(req, rem); }));
}
COZ_EXPORT int clock_nanosleep(clockid_t clock, int flags, const struct timespec* req, struct timespec* rem) {
  return COZ_SLEEP(unsampled([&] { return real_clock_nanosleep()(clock, flags, req, rem); }));
}
COZ_EXPORT int usleep(useconds_t us) { return COZ_SLEEP(unsampled([&] { return real_usleep()(us); })); }
COZ_EXPORT unsigned int sleep(unsigned int s) { return COZ_SLEEP(unsampled([&] { return real_sleep()(s); })); }

// ---- blocking I/O ----
// Reads: self, unless the descriptor is a pipe or a local socket, whose other
// end is most likely a thread of the program that paid before writing (block).
// Writes: wake (a reader may be released), then self while the write blocks.

COZ_EXPORT ssize_t read(int fd, void* buf, size_t n) {
  return COZ_IO(real_read()(fd, buf, n), rc >= 0 && coz::fd_woken_by_sibling(fd));
}
COZ_EXPORT ssize_t write(int fd, const void* buf, size_t n) {
  hook_wake();
  return COZ_SELF_IO(real_write()(fd, buf, n));
}
COZ_EXPORT ssize_t recv(int fd, void* buf, size_t n, int flags) {
  return COZ_IO(real_recv()(fd, buf, n, flags), rc >= 0 && coz::fd_woken_by_sibling(fd));
}
COZ_EXPORT ssize_t recvfrom(int fd, void* buf, size_t n, int flags, struct sockaddr* addr, socklen_t* len) {
  return COZ_IO(real_recvfrom()(fd, buf, n, flags, addr, len), rc >= 0 && coz::fd_woken_by_sibling(fd));
}
COZ_EXPORT ssize_t recvmsg(int fd, struct msghdr* msg, int flags) {
  return COZ_IO(real_recvmsg()(fd, msg, flags), rc >= 0 && coz::fd_woken_by_sibling(fd));
}
COZ_EXPORT ssize_t send(int fd, const void* buf, size_t n, int flags) {
  hook_wake();
  return COZ_SELF_IO(real_send()(fd, buf, n, flags));
}
COZ_EXPORT ssize_t sendto(int fd, const void* buf, size_t n, int flags, const struct sockaddr* addr, socklen_t len) {
  hook_wake();
  return COZ_SELF_IO(real_sendto()(fd, buf, n, flags, addr, len));
}
COZ_EXPORT ssize_t sendmsg(int fd, const struct msghdr* msg, int flags) {
  hook_wake();
  return COZ_SELF_IO(real_sendmsg()(fd, msg, flags));
}
// Accept and connect: self (the peer is usually another process).
COZ_EXPORT int accept(int fd, struct sockaddr* addr, socklen_t* len) { return COZ_SELF_IO(real_accept()(fd, addr, len)); }
COZ_EXPORT int accept4(int fd, struct sockaddr* addr, socklen_t* len, int flags) {
  return COZ_SELF_IO(real_accept4()(fd, addr, len, flags));
}
COZ_EXPORT int connect(int fd, const struct sockaddr* addr, socklen_t len) {
  return COZ_SELF_IO(real_connect()(fd, addr, len));
}
COZ_EXPORT int poll(struct pollfd* fds, nfds_t n, int timeout) {
  if (n == 0 && timeout != 0) return COZ_SLEEP(unsampled([&] { return real_poll()(fds, n, timeout); }));  // a sleep
  return COZ_TIMED(WaitKind::kIo, real_poll()(fds, n, timeout), coz::poll_woken_by_sibling(fds, n, rc), rc == 0);
}
COZ_EXPORT int ppoll(struct pollfd* fds, nfds_t n, const struct timespec* t, const sigset_t* mask) {
  return COZ_TIMED(WaitKind::kIo, real_ppoll()(fds, n, t, mask), coz::poll_woken_by_sibling(fds, n, rc), rc == 0);
}
COZ_EXPORT int select(int n, fd_set* r, fd_set* w, fd_set* e, struct timeval* t) {
  if ((n == 0 || (!r && !w && !e)) && t && (t->tv_sec || t->tv_usec))  // select(0, ..., &tv): a sleep
    return COZ_SLEEP(unsampled([&] { return real_select()(n, r, w, e, t); }));
  return COZ_TIMED(WaitKind::kIo, real_select()(n, r, w, e, t), coz::select_woken_by_sibling(n, r, rc), rc == 0);
}
COZ_EXPORT int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const struct timespec* t, const sigset_t* mask) {
  return COZ_TIMED(WaitKind::kIo, real_pselect()(n, r, w, e, t, mask), coz::select_woken_by_sibling(n, r, rc), rc == 0);
}
COZ_EXPORT int epoll_wait(int fd, struct epoll_event* ev, int n, int timeout) {
  return COZ_TIMED(WaitKind::kIo, real_epoll_wait()(fd, ev, n, timeout), coz::epoll_woken_by_sibling(fd, ev, rc), rc == 0);
}
COZ_EXPORT int epoll_pwait(int fd, struct epoll_event* ev, int n, int timeout, const sigset_t* mask) {
  return COZ_TIMED(WaitKind::kIo, real_epoll_pwait()(fd, ev, n, timeout, mask), coz::epoll_woken_by_sibling(fd, ev, rc), rc == 0);
}

// ---- more blocking I/O: self, or woken when the descriptor links siblings ----

COZ_EXPORT ssize_t readv(int fd, const struct iovec* iov, int n) {
  return COZ_IO(real_readv()(fd, iov, n), rc >= 0 && coz::fd_woken_by_sibling(fd));
}
COZ_EXPORT ssize_t writev(int fd, const struct iovec* iov, int n) {
  hook_wake();
  return COZ_SELF_IO(real_writev()(fd, iov, n));
}
// Positional reads and writes: files, where nothing of the program's wakes anyone.
COZ_EXPORT ssize_t pread(int fd, void* buf, size_t n, off_t off) { return COZ_SELF_IO(real_pread()(fd, buf, n, off)); }
COZ_EXPORT ssize_t pread64(int fd, void* buf, size_t n, off64_t off) {
  return COZ_SELF_IO(real_pread64()(fd, buf, n, off));
}
COZ_EXPORT ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  return COZ_SELF_IO(real_pwrite()(fd, buf, n, off));
}
COZ_EXPORT ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  return COZ_SELF_IO(real_pwrite64()(fd, buf, n, off));
}
COZ_EXPORT ssize_t preadv(int fd, const struct iovec* iov, int n, off_t off) {
  return COZ_SELF_IO(real_preadv()(fd, iov, n, off));
}
COZ_EXPORT ssize_t preadv64(int fd, const struct iovec* iov, int n, off64_t off) {
  return COZ_SELF_IO(real_preadv64()(fd, iov, n, off));
}
COZ_EXPORT ssize_t pwritev(int fd, const struct iovec* iov, int n, off_t off) {
  return COZ_SELF_IO(real_pwritev()(fd, iov, n, off));
}
COZ_EXPORT ssize_t pwritev64(int fd, const struct iovec* iov, int n, off64_t off) {
  return COZ_SELF_IO(real_pwritev64()(fd, iov, n, off));
}
COZ_EXPORT ssize_t preadv2(int fd, const struct iovec* iov, int n, off_t off, int flags) {
  return COZ_IO(real_preadv2()(fd, iov, n, off, flags), rc >= 0 && off == -1 && coz::fd_woken_by_sibling(fd));
}
COZ_EXPORT ssize_t pwritev2(int fd, const struct iovec* iov, int n, off_t off, int flags) {
  hook_wake();
  return COZ_SELF_IO(real_pwritev2()(fd, iov, n, off, flags));
}
COZ_EXPORT int recvmmsg(int fd, struct mmsghdr* v, unsigned int n, int flags, struct timespec* t) {
  return COZ_IO(real_recvmmsg()(fd, v, n, flags, t), rc >= 0 && coz::fd_woken_by_sibling(fd));
}
COZ_EXPORT int sendmmsg(int fd, struct mmsghdr* v, unsigned int n, int flags) {
  hook_wake();
  return COZ_SELF_IO(real_sendmmsg()(fd, v, n, flags));
}
COZ_EXPORT ssize_t sendfile(int out, int in, off_t* off, size_t n) noexcept {
  hook_wake();
  return COZ_SELF_IO(real_sendfile()(out, in, off, n));
}
COZ_EXPORT int fsync(int fd) { return COZ_SELF_IO(real_fsync()(fd)); }
COZ_EXPORT int fdatasync(int fd) { return COZ_SELF_IO(real_fdatasync()(fd)); }
COZ_EXPORT int epoll_pwait2(int fd, struct epoll_event* ev, int n, const struct timespec* t, const sigset_t* mask) {
  return COZ_TIMED(WaitKind::kIo, real_epoll_pwait2()(fd, ev, n, t, mask), coz::epoll_woken_by_sibling(fd, ev, rc), rc == 0);
}

// ---- descriptors: what each links to (see waits.h) ----

// a pipe of the program's links its threads; one of the runtime's own moves high.
COZ_EXPORT int pipe(int fds[2]) noexcept {
  int rc = real_pipe()(fds);
  if (rc == 0) coz::tls_in_runtime ? coz::move_pipe_high(fds) : coz::fds_pipe_created(fds);
  return rc;
}
COZ_EXPORT int pipe2(int fds[2], int flags) noexcept {
  int rc = real_pipe2()(fds, flags);
  if (rc == 0) coz::tls_in_runtime ? coz::move_pipe_high(fds) : coz::fds_pipe_created(fds);
  return rc;
}
COZ_EXPORT int eventfd(unsigned int count, int flags) noexcept {
  int fd = real_eventfd()(count, flags);
  coz::fds_eventfd_created(fd);
  return fd;
}
// block: an eventfd created here is released by another of the program's threads.
COZ_EXPORT int eventfd_read(int fd, eventfd_t* value) {
  return COZ_IO(real_eventfd_read()(fd, value), rc == 0 && coz::fd_woken_by_sibling(fd));
}
// wake.
COZ_EXPORT int eventfd_write(int fd, eventfd_t value) {
  hook_wake();
  return real_eventfd_write()(fd, value);
}
COZ_EXPORT int close(int fd) {
  // A program that calls close() on every number up to its limit (a
  // daemon's loop) would close the runtime's descriptors, its profile and
  // perf events: those numbers are not the program's, and closing them
  // fails as it would without the profiler. The runtime's own closes run
  // inside it (tls_in_runtime), or on threads it does not track.
  if (coz::fd_is_runtimes(fd) && !coz::tls_in_runtime && coz::tls_state) {
    errno = EBADF;
    return -1;
  }
  coz::fds_closed(fd);
  coz::fd_forget(fd);
  return real_close()(fd);
}
// A program that closes every descriptor but 0-2 before its work (daemons,
// sandboxes) keeps the runtime's: its profile, its perf events.
COZ_EXPORT int close_range(unsigned first, unsigned last, int flags) noexcept {
  int rc = coz::close_range_sparing_runtime(first, last, flags);
  if (rc == 0 && !(flags & CLOSE_RANGE_CLOEXEC)) coz::fds_closed_range(first, last);
  return rc;
}
COZ_EXPORT void closefrom(int lowfd) noexcept {
  if (lowfd < 0) lowfd = 0;
  if (close_range(static_cast<unsigned>(lowfd), ~0U, 0) == 0) return;
  // No close_range system call (before Linux 5.9): each number up to the
  // open-file limit, as glibc falls back to.
  long limit = sysconf(_SC_OPEN_MAX);
  for (long fd = lowfd; fd < limit; fd++)
    if (!coz::fd_is_runtimes(static_cast<int>(fd))) close(static_cast<int>(fd));
}
COZ_EXPORT int dup(int from) noexcept {
  int rc = real_dup()(from);
  if (rc >= 0) coz::fds_copied(from, rc);
  return rc;
}
COZ_EXPORT int dup2(int from, int to) noexcept {
  if (from != to) coz::fd_forget(to);  // the program's now, whatever was there
  int rc = real_dup2()(from, to);
  if (rc >= 0) coz::fds_copied(from, rc);
  return rc;
}
COZ_EXPORT int dup3(int from, int to, int flags) noexcept {
  if (from != to) coz::fd_forget(to);
  int rc = real_dup3()(from, to, flags);
  if (rc >= 0) coz::fds_copied(from, rc);
  return rc;
}
COZ_EXPORT int epoll_ctl(int epfd, int op, int fd, struct epoll_event* ev) noexcept {
  int rc = real_epoll_ctl()(epfd, op, fd, ev);
  if (rc == 0) coz::fds_epoll_ctl(epfd, op, fd, ev);
  return rc;
}

// ---- file locks: self (another process usually holds them) ----

COZ_EXPORT int flock(int fd, int op) noexcept {
  if (op & LOCK_NB) return real_flock()(fd, op);  // never blocks
  return COZ_LOCK(real_flock()(fd, op), false);
}
COZ_EXPORT int lockf(int fd, int cmd, off_t len) {
  if (cmd != F_LOCK) return real_lockf()(fd, cmd, len);
  return COZ_LOCK(real_lockf()(fd, cmd, len), false);
}
// fcntl takes an int or a pointer as its third argument: both travel in the
// same register, read as a pointer-sized value as glibc does. Only the
// waiting lock commands are accounted; every other command passes through.
#define COZ_FCNTL(real)                                                               \
  va_list ap;                                                                         \
  va_start(ap, cmd);                                                                  \
  void* arg = va_arg(ap, void*);                                                      \
  va_end(ap);                                                                         \
  if (cmd == F_SETLKW || cmd == F_OFD_SETLKW) return COZ_LOCK(real()(fd, cmd, arg), false); \
  if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {                                     \
    int rc = real()(fd, cmd, arg);                                                    \
    if (rc >= 0) coz::fds_copied(fd, rc);                                             \
    return rc;                                                                        \
  }                                                                                   \
  return real()(fd, cmd, arg);
COZ_EXPORT int fcntl(int fd, int cmd, ...) { COZ_FCNTL(real_fcntl) }
COZ_EXPORT int fcntl64(int fd, int cmd, ...) { COZ_FCNTL(real_fcntl64) }

// ---- child processes: self (another process ends) ----

COZ_EXPORT pid_t waitpid(pid_t pid, int* status, int options) {
  return COZ_WAIT(WaitKind::kSync, real_waitpid()(pid, status, options), false);
}
COZ_EXPORT int waitid(idtype_t type, id_t id, siginfo_t* info, int options) {
  return COZ_WAIT(WaitKind::kSync, real_waitid()(type, id, info, options), false);
}
COZ_EXPORT pid_t wait(int* status) { return COZ_WAIT(WaitKind::kSync, real_wait()(status), false); }
COZ_EXPORT pid_t wait3(int* status, int options, struct rusage* usage) noexcept {
  return COZ_WAIT(WaitKind::kSync, real_wait3()(status, options, usage), false);
}
COZ_EXPORT pid_t wait4(pid_t pid, int* status, int options, struct rusage* usage) noexcept {
  return COZ_WAIT(WaitKind::kSync, real_wait4()(pid, status, options, usage), false);
}

// Children started without the fork handlers: the descriptors they inherit
// link processes from now on, as after a fork (waits.h).
COZ_EXPORT int posix_spawn(pid_t* pid, const char* path, const posix_spawn_file_actions_t* actions,
                           const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  coz::fds_handed_to_child();
  return real_posix_spawn()(pid, path, actions, attr, argv, envp);
}
COZ_EXPORT int posix_spawnp(pid_t* pid, const char* file, const posix_spawn_file_actions_t* actions,
                            const posix_spawnattr_t* attr, char* const argv[], char* const envp[]) {
  coz::fds_handed_to_child();
  return real_posix_spawnp()(pid, file, actions, attr, argv, envp);
}
// vfork returns twice on one stack, so its wrapper cannot be a C function
// that calls the original and returns: it calls the pre-hook, then jumps to
// the original with the caller's return address on top of the stack.
extern "C" __attribute__((visibility("hidden"), used)) void* coz_vfork_prepare() {
  coz::fds_handed_to_child();
  return reinterpret_cast<void*>(real_vfork());
}
#if defined(__x86_64__)
__asm__(
    ".text\n"
    ".globl vfork\n"
    ".type vfork, @function\n"
    "vfork:\n"
    "  endbr64\n"
    "  sub $8, %rsp\n"  // the pre-hook gets an aligned stack
    "  call coz_vfork_prepare\n"
    "  add $8, %rsp\n"
    "  jmp *%rax\n"
    ".size vfork, .-vfork\n");
#endif

// ---- spin locks ----

// (A spin lock is a volatile int: its address as the object's identity.)
#define SPIN_OBJ reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(l))
// block (when taken): spins until the holder's unlock.
COZ_EXPORT int pthread_spin_lock(pthread_spinlock_t* l) noexcept {
  return coz::acquire(
      LockKind::kSpinlock, SPIN_OBJ, RA, coz::lock_wait, [&] { return real_pthread_spin_trylock()(l); },
      [&] { return real_pthread_spin_lock()(l); }, coz::pthread_taken, coz::pthread_got);
}
// never blocks: counted as a try.
COZ_EXPORT int pthread_spin_trylock(pthread_spinlock_t* l) noexcept {
  return coz::try_acquire(LockKind::kSpinlock, SPIN_OBJ, RA, [&] { return real_pthread_spin_trylock()(l); }, coz::pthread_got);
}
// wake.
COZ_EXPORT int pthread_spin_unlock(pthread_spinlock_t* l) noexcept {
  coz::release(SPIN_OBJ);
  return real_pthread_spin_unlock()(l);
}
COZ_EXPORT int pthread_spin_init(pthread_spinlock_t* l, int shared) noexcept {
  coz::initialized(SPIN_OBJ, RA);
  return real_pthread_spin_init()(l, shared);
}

// ---- C11 threads (glibc implements them on its internal pthread symbols,
// which no wrapper above sees) ----

// wake: the new thread starts level with its creator, and is sampled.
COZ_EXPORT int thrd_create(thrd_t* thr, thrd_start_t fn, void* arg) {
  coz::runtime_init();
  hook_wake();
  coz::ThreadStart* start = coz::prepare_c11_thread(fn, arg);
  int rc = real_thrd_create()(thr, coz::c11_thread_trampoline, start);
  if (rc != thrd_success) coz::discard_thread_start(start);
  return rc;
}
// block (when the thread still runs): released when the other thread ends.
// Counted as a join; glibc's thrd_t is a pthread_t, tried as pthread_join's.
COZ_EXPORT int thrd_join(thrd_t thr, int* res) {
  return coz::acquire(
      LockKind::kJoin, reinterpret_cast<const void*>(thr), RA, coz::join_wait,
      [&] { return coz::c11_tryjoin(thr, res, real_pthread_tryjoin_np()); }, [&] { return real_thrd_join()(thr, res); },
      [](int rc) { return rc == thrd_busy; }, [](int rc) { return rc == thrd_success; });
}
// wake: joiners are released.
COZ_EXPORT void thrd_exit(int res) {
  hook_wake();
  real_thrd_exit()(res);
  __builtin_unreachable();
}
COZ_EXPORT int thrd_sleep(const struct timespec* d, struct timespec* rem) {
  return COZ_SLEEP(real_thrd_sleep()(d, rem));
}
// block (when taken): released by the holder's unlock.
#define COZ_MTX(call, wait_kind)                                                                             \
  coz::acquire(LockKind::kC11Mutex, m, RA, wait_kind, [&] { return real_mtx_trylock()(m); }, [&] { return call; }, \
               [](int rc) { return rc == thrd_busy; }, [](int rc) { return rc == thrd_success; })
COZ_EXPORT int mtx_lock(mtx_t* m) { return COZ_MTX(real_mtx_lock()(m), coz::lock_wait); }
COZ_EXPORT int mtx_timedlock(mtx_t* __restrict m, const struct timespec* __restrict t) {
  return COZ_MTX(real_mtx_timedlock()(m, t), [](int rc) { return rc == thrd_timedout ? WaitKind::kSleep : WaitKind::kLock; });
}
// never blocks: counted as a try.
COZ_EXPORT int mtx_trylock(mtx_t* m) {
  return coz::try_acquire(LockKind::kC11Mutex, m, RA, [&] { return real_mtx_trylock()(m); },
                          [](int rc) { return rc == thrd_success; });
}
// wake.
COZ_EXPORT int mtx_unlock(mtx_t* m) {
  coz::release_mutex(m);
  int rc = real_mtx_unlock()(m);
  coz::released();
  return rc;
}
COZ_EXPORT int mtx_init(mtx_t* m, int type) {
  coz::initialized(m, RA);
  return real_mtx_init()(m, type);
}
// wake (the mutex is released: its hold ends), then block until signalled.
#define COZ_CND_WAIT(call, timed_out)                                                        \
  ({                                                                                          \
    coz::release_mutex(m, false);                                                             \
    coz::WaitObject cw_(coz::hooked_thread(), c);                                             \
    int rc_ = COZ_TIMED(WaitKind::kSync, call, rc == thrd_success, timed_out);                \
    coz::waited_for(LockKind::kC11Cond, c, RA);                                               \
    coz::reacquired(m, RA, LockKind::kC11Mutex);                                              \
    rc_;                                                                                      \
  })
COZ_EXPORT int cnd_wait(cnd_t* c, mtx_t* m) { return COZ_CND_WAIT(real_cnd_wait()(c, m), false); }
COZ_EXPORT int cnd_timedwait(cnd_t* __restrict c, mtx_t* __restrict m, const struct timespec* __restrict t) {
  return COZ_CND_WAIT(real_cnd_timedwait()(c, m, t), rc == thrd_timedout);
}
COZ_EXPORT int cnd_init(cnd_t* c) {
  coz::initialized(c, RA);
  return real_cnd_init()(c);
}
// wake.
COZ_EXPORT int cnd_signal(cnd_t* c) {
  coz::signalling(c);
  int rc = real_cnd_signal()(c);
  coz::released();
  return rc;
}
COZ_EXPORT int cnd_broadcast(cnd_t* c) {
  coz::signalling(c);
  int rc = real_cnd_broadcast()(c);
  coz::released();
  return rc;
}

// ---- futexes made with syscall(2): Rust's std, C++20 atomic::wait and
// std::latch/barrier/counting_semaphore, abseil, folly ----

// block for the waiting operations, wake for the waking ones. The six
// arguments are read as glibc's syscall() reads them (registers, whatever
// the caller passed).
COZ_EXPORT long syscall(long n, ...) {
  va_list ap;
  va_start(ap, n);
  long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long);
  long a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  if (n == SYS_futex) {
    switch (a2 & FUTEX_CMD_MASK) {
      case FUTEX_WAIT:
      case FUTEX_WAIT_BITSET:
      case FUTEX_WAIT_REQUEUE_PI: {
        long r = COZ_BLOCK(real_syscall()(n, a1, a2, a3, a4, a5, a6), rc == 0);
        coz::waited_for(LockKind::kFutex, reinterpret_cast<void*>(a1), RA);
        return r;
      }
      case FUTEX_LOCK_PI:
      case FUTEX_LOCK_PI2:
        return COZ_LOCK(real_syscall()(n, a1, a2, a3, a4, a5, a6), rc == 0);
      case FUTEX_WAKE:
      case FUTEX_WAKE_BITSET:
      case FUTEX_WAKE_OP:
      case FUTEX_REQUEUE:
      case FUTEX_CMP_REQUEUE:
      case FUTEX_CMP_REQUEUE_PI:
      case FUTEX_UNLOCK_PI:
        hook_wake();
        break;
      default:
        break;
    }
  } else if (n == SYS_futex_waitv) {
    return COZ_BLOCK(real_syscall()(n, a1, a2, a3, a4, a5, a6), rc >= 0);
  } else if (n == SYS_exit_group) {
    coz::on_fast_exit();  // as _exit: the final records first
  }
  return real_syscall()(n, a1, a2, a3, a4, a5, a6);
}

// ---- libraries and exit ----

// dlopen is not interposed: glibc searches a library's RUNPATH from the
// object that called dlopen, which a wrapper would replace with libcoz. The
// profiler thread notices new libraries itself (dl_iterate_phdr's counters).

// Not a wait: the objects it unloads stay nameable in the stacks sampled
// before, which the profiler thread symbolizes later (loaded_objects.h).
COZ_EXPORT int dlclose(void* handle) {
  uint64_t closing = coz::dlclose_begin(handle);
  int rc = real_dlclose()(handle);
  coz::dlclose_done(closing);
  return rc;
}

// Unchanged for the program and the profiler thread. libunwind's lookups
// in program threads (the sample handler, a contended lock's stack) are
// answered from the runtime's published copy instead, without the loader's
// lock, which the thread may be in the middle of taking (loaded_objects.h).
COZ_EXPORT int dl_iterate_phdr(int (*callback)(dl_phdr_info*, size_t, void*), void* data) {
  if (coz::tls_objects_from_copy) return coz::iterate_published_objects(callback, data);
  return real_dl_iterate_phdr()(callback, data);
}

// libunwind's calls, which the sample handler makes as it unwinds: its
// memory check writes to a pipe through syscall() (the pipe made with
// pipe2 the first time), it masks signals around its locks, and it looks
// the loaded objects up. Their originals are resolved with dlsym, which
// takes the loader's lock: resolved in a handler that interrupted a thread
// holding that lock (bash loading an NSS module in dlopen), it waited for
// itself. So they are resolved at the start, before any sample.
void coz::resolve_sample_handler_calls() {
  real_syscall();
  real_pipe2();
  real_read();
  real_write();
  real_close();
  real_sigprocmask();
  real_pthread_sigmask();
  real_pthread_mutex_init();
  real_pthread_mutex_lock();
  real_pthread_mutex_unlock();
  real_dl_iterate_phdr();
}

// glibc's daemon() forks and ends the parent with an internal _exit: the
// fork's parent handler writes the parent's final records (runtime.h).
COZ_EXPORT int daemon(int nochdir, int noclose) noexcept {
  coz::tls_in_daemon = true;
  int rc = real_daemon()(nochdir, noclose);
  coz::tls_in_daemon = false;  // the child, or a parent whose fork failed
  return rc;
}

// Exit without atexit handlers: write the final records first.
COZ_EXPORT void _exit(int status) {
  coz::on_fast_exit();
  real__exit()(status);
  __builtin_unreachable();
}
COZ_EXPORT void _Exit(int status) noexcept {
  coz::on_fast_exit();
  real__Exit()(status);
  __builtin_unreachable();
}

// ---- exec: the final records first (when it can succeed) ----
// glibc's execl*, execvp and posix_spawn call its internal execve, which no
// preload reaches: each entry point is interposed.

// The profiled process's next image gets the runtime's variables back,
// whatever environment the exec passes (environment.h).
COZ_EXPORT int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  coz::on_exec(path, false);
  coz::ExecEnvironment env(envp);
  return real_execve()(path, argv, env.get());
}
COZ_EXPORT int execv(const char* path, char* const argv[]) noexcept {
  coz::on_exec(path, false);
  coz::ExecEnvironment env(environ);
  return env.rebuilt() ? real_execve()(path, argv, env.get()) : real_execv()(path, argv);
}
COZ_EXPORT int execvp(const char* file, char* const argv[]) noexcept {
  coz::on_exec(file, true);
  coz::ExecEnvironment env(environ);
  return env.rebuilt() ? real_execvpe()(file, argv, env.get()) : real_execvp()(file, argv);
}
COZ_EXPORT int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  coz::on_exec(file, true);
  coz::ExecEnvironment env(envp);
  return real_execvpe()(file, argv, env.get());
}
COZ_EXPORT int fexecve(int fd, char* const argv[], char* const envp[]) noexcept {
  coz::on_exec_fd(fd);
  coz::ExecEnvironment env(envp);
  return real_fexecve()(fd, argv, env.get());
}

namespace {
// How many arguments execl and friends were given, up to their null (arg,
// their first, is never null: glibc declares it nonnull).
size_t arg_count(va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  size_t n = 1;
  while (va_arg(copy, char*)) n++;
  va_end(copy);
  return n;
}

// argv[0] = first, then the list's arguments and its null; `ap` is left
// after the null (execle's environment follows).
void take_args(char** argv, const char* first, va_list* ap) {
  argv[0] = const_cast<char*>(first);
  for (size_t i = 1; (argv[i] = va_arg(*ap, char*)) != nullptr; i++) {
  }
}

// The execl family: the arguments up to their null as an argv on this
// frame's stack (no malloc: these run in vfork children too), then the v
// form; execle's environment follows the null.
enum class ExecForm { kPath, kSearch, kEnv };
int exec_listed(ExecForm form, const char* file, const char* arg, va_list* ap) {
  char** argv = static_cast<char**>(alloca((arg_count(*ap) + 1) * sizeof(char*)));
  take_args(argv, arg, ap);
  if (form == ExecForm::kEnv) return execve(file, argv, va_arg(*ap, char* const*));
  return form == ExecForm::kSearch ? execvp(file, argv) : execv(file, argv);
}
}  // namespace

COZ_EXPORT int execl(const char* path, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  int rc = exec_listed(ExecForm::kPath, path, arg, &ap);
  va_end(ap);
  return rc;
}
COZ_EXPORT int execlp(const char* file, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  int rc = exec_listed(ExecForm::kSearch, file, arg, &ap);
  va_end(ap);
  return rc;
}
COZ_EXPORT int execle(const char* path, const char* arg, ...) noexcept {
  va_list ap;
  va_start(ap, arg);
  int rc = exec_listed(ExecForm::kEnv, path, arg, &ap);
  va_end(ap);
  return rc;
}
