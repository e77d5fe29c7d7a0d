// How the interposed synchronization calls feed the one stream of waits:
// delay accounting (hook_pre_block / hook_post_block), blocked samples, and
// SyncPerf's counters (locks.h), from the same measurements.
//
// Acquiring a lock first pays the caller's debt (settle_before_lock in
// runtime.h: outside the critical section, where a pause holds up no other
// thread), then tries the lock (SyncPerf's way to know contention): an
// uncontended acquisition costs the try and a count (its hold is timed only
// now and then, locks.h), and no wait is recorded; only when the lock is taken does the thread wait, as
// a blocking call (credited when the releaser paid first). With the counters
// off (COZ_LOCK_COUNTERS=0) the same calls are made, the counting skipped.
#pragma once

#include <errno.h>
#include <pthread.h>
#include <threads.h>

#include <cstdint>

#include "locks.h"
#include "runtime.h"

namespace coz {

inline bool is_mutex(LockKind k) { return k == LockKind::kMutex || k == LockKind::kC11Mutex; }

// Around a wait that a mutex's release or a condition variable's signal
// ends: the object whose wake stamp its credit reads (null: none).
struct WaitObject {
  ThreadState* t;
  const void* outer;
  WaitObject(ThreadState* thread, const void* object) : t(thread), outer(t ? t->wake_object : nullptr) {
    if (t) t->wake_object = object;
  }
  ~WaitObject() {
    if (t) t->wake_object = outer;
  }
  WaitObject(const WaitObject&) = delete;
  WaitObject& operator=(const WaitObject&) = delete;
};

// `try_once()` and `wait()` return the call's result; `taken(rc)` says
// whether a try found the object taken, `got(rc)` whether it was acquired.
// `wait_kind(rc)`: the wait's category (a timed one that ran out is a sleep).
template <typename Try, typename Wait, typename Taken, typename Got, typename KindOf>
inline int acquire(LockKind kind, const void* object, void* caller, KindOf wait_kind, Try try_once, Wait wait,
                   Taken taken, Got got) {
  ThreadState* t = hooked_thread();
  if (!t) return wait();
  settle_before_lock(t);
  int rc = try_once();
  if (got(rc)) {
    if (is_mutex(kind)) t->mutexes_held++;
    if (lock_counters_on()) lock_acquired(t, kind, object, reinterpret_cast<uintptr_t>(caller), false, 0);
    return rc;
  }
  if (!taken(rc)) return rc;  // an error the waiting call would give too
  {
    WaitObject releaser(t, is_mutex(kind) ? object : nullptr);
    WaitGuard guard(wait_kind(0), caller);  // sem_wait and the joins are cancellation points
    rc = wait();
    guard.returned();
    if (got(rc) && is_mutex(kind)) t->mutexes_held++;  // before the wait is settled: its debt waits for the release
    hook_post_block(wait_kind(rc), got(rc), caller);
  }
  if (got(rc) && lock_counters_on())
    lock_acquired(t, kind, object, reinterpret_cast<uintptr_t>(caller), true, t->last_wait_ns);
  return rc;
}

// A try-lock call of the program's own.
template <typename Try, typename Got>
inline int try_acquire(LockKind kind, const void* object, void* caller, Try try_once, Got got) {
  int rc = try_once();
  ThreadState* t = hooked_thread();
  if (!t) return rc;
  if (is_mutex(kind) && got(rc)) t->mutexes_held++;
  if (lock_counters_on()) lock_tried(t, kind, object, reinterpret_cast<uintptr_t>(caller), !got(rc));
  return rc;
}

// A release: the hold time ends, and waiters may be released (wake).
inline void release(const void* object) {
  ThreadState* t = hooked_thread();
  if (!t) return;
  if (lock_counters_on()) lock_released(t, object);
  wake(t);
}

// A mutex's release (`ends_hold`: false for a condition wait's, which holds
// it again on return): its hold ends, and its waiter takes it owing what
// this thread owes (the wake stamp); the debt itself is paid after the
// release (released), outside the critical section.
inline void release_mutex(const void* object, bool ends_hold = true) {
  ThreadState* t = hooked_thread();
  if (!t) return;
  if (lock_counters_on()) lock_released(t, object);
  if (ends_hold && t->mutexes_held) t->mutexes_held--;
  stamp_wake(t, object);
}
// Before a condition variable's signal or broadcast.
inline void signalling(const void* cond) {
  if (ThreadState* t = hooked_thread()) stamp_wake(t, cond);
}
// After a mutex's release or a signal: the debt is paid once no mutex is
// held (a signal inside a critical section leaves it to the unlock).
inline void released() {
  ThreadState* t = hooked_thread();
  if (t && !t->mutexes_held) wake(t);
}

// A wait for someone else's work (condition variable, barrier, futex):
// counted as an acquisition of the object, with the time waited.
inline void waited_for(LockKind kind, const void* object, void* caller) {
  if (!lock_counters_on()) return;
  if (ThreadState* t = hooked_thread())
    lock_acquired(t, kind, object, reinterpret_cast<uintptr_t>(caller), t->last_wait_ns > 0, t->last_wait_ns);
}

// A condition wait's mutex is held again when it returns (glibc re-takes it
// inside): a new hold, and an acquisition.
inline void reacquired(const void* mutex, void* caller, LockKind kind = LockKind::kMutex) {
  if (!lock_counters_on()) return;
  if (ThreadState* t = hooked_thread()) lock_acquired(t, kind, mutex, reinterpret_cast<uintptr_t>(caller), false, 0);
}

inline void initialized(const void* object, void* caller) {
  if (!lock_counters_on()) return;
  if (hooked_thread() || !tls_in_runtime) lock_initialized(object, reinterpret_cast<uintptr_t>(caller));
}

// The usual result conventions.
inline bool pthread_got(int rc) { return rc == 0 || rc == EOWNERDEAD; }
inline bool pthread_taken(int rc) { return rc == EBUSY; }
inline WaitKind lock_wait(int) { return WaitKind::kLock; }
inline WaitKind timed_lock_wait(int rc) { return rc == ETIMEDOUT ? WaitKind::kSleep : WaitKind::kLock; }
// Joins: tried first with pthread_tryjoin_np (EBUSY: the thread still runs,
// so the join waits, a wait of category sync); a try that succeeds has
// joined an ended thread without waiting.
inline bool join_got(int rc) { return rc == 0; }
inline bool join_taken(int rc) { return rc == EBUSY; }
inline WaitKind join_wait(int) { return WaitKind::kSync; }
inline WaitKind timed_join_wait(int rc) { return rc == ETIMEDOUT ? WaitKind::kSleep : WaitKind::kSync; }
// thrd_join's try, in C11's codes: glibc's thrd_t is a pthread_t, and
// thrd_join gives the thread's int result through pthread_join's void*.
inline int c11_tryjoin(thrd_t thr, int* res, int (*tryjoin)(pthread_t, void**)) {
  void* v = nullptr;
  int rc = tryjoin(static_cast<pthread_t>(thr), &v);
  if (rc == EBUSY) return thrd_busy;
  if (rc != 0) return thrd_error;
  if (res) *res = static_cast<int>(reinterpret_cast<uintptr_t>(v));
  return thrd_success;
}

}  // namespace coz
