/*
 * coz.h: progress points for the causal profiler.
 *
 *   COZ_PROGRESS              a throughput point named "file:line"
 *   COZ_PROGRESS_NAMED("x")   a throughput point named x
 *   COZ_BEGIN("x") ... COZ_END("x")
 *                             a latency point: one transaction between the two
 *
 * Binary compatible with upstream COZ's header: the runtime exports
 * `_coz_get_counter(int type, const char* name)` returning a pointer to a
 * counter whose first field is a size_t count; programs built against either
 * header work with either runtime. Without the runtime loaded, each macro
 * costs one well-predicted branch.
 *
 * For custom synchronization (spin locks, lock-free queues), tell the
 * profiler where a thread blocks and wakes:
 *   COZ_PRE_BLOCK()           before a thread blocks waiting for another
 *   COZ_POST_BLOCK(woken)     after it resumes; woken != 0 when another
 *                             thread of the program released it
 *   COZ_WAKE()                in the waking thread, before it releases others
 *
 * This header defines no feature macros and needs no library at link time
 * (dlsym is referenced weakly).
 */
#ifndef COZ_H
#define COZ_H

#include <stddef.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define COZ_COUNTER_TYPE_THROUGHPUT 1
#define COZ_COUNTER_TYPE_BEGIN 2
#define COZ_COUNTER_TYPE_END 3

/* Layout shared with the runtime; `backoff` is reserved. */
typedef struct {
  size_t count;
  size_t backoff;
} coz_counter_t;

typedef coz_counter_t* (*coz_get_counter_t)(int, const char*);

/* Declared here rather than through <dlfcn.h> so that no _GNU_SOURCE is
 * needed for RTLD_DEFAULT ((void*)0 on glibc). Weak: no -ldl required. */
extern void* dlsym(void*, const char*) __attribute__((weak));
#define _COZ_RTLD_DEFAULT ((void*)0)

static inline void* _coz_lookup(const char* symbol) {
  return dlsym ? dlsym(_COZ_RTLD_DEFAULT, symbol) : (void*)0;
}

static inline coz_counter_t* _coz_counter_for(int type, const char* name) {
  union { void* p; coz_get_counter_t f; } u;
  u.p = _coz_lookup("_coz_get_counter");
  return u.f ? u.f(type, name) : (coz_counter_t*)0;
}

#define _COZ_STR2(x) #x
#define _COZ_STR(x) _COZ_STR2(x)

#define COZ_INCREMENT_COUNTER(type, name)                              \
  do {                                                                 \
    static unsigned char _coz_ready = 0;                               \
    static coz_counter_t* _coz_ctr = 0;                                \
    if (!__atomic_load_n(&_coz_ready, __ATOMIC_ACQUIRE)) {             \
      _coz_ctr = _coz_counter_for((type), (name));                     \
      __atomic_store_n(&_coz_ready, 1, __ATOMIC_RELEASE);              \
    }                                                                  \
    if (_coz_ctr) __atomic_add_fetch(&_coz_ctr->count, 1, __ATOMIC_RELAXED); \
  } while (0)

#define COZ_PROGRESS_NAMED(name) COZ_INCREMENT_COUNTER(COZ_COUNTER_TYPE_THROUGHPUT, name)
#define COZ_PROGRESS COZ_INCREMENT_COUNTER(COZ_COUNTER_TYPE_THROUGHPUT, __FILE__ ":" _COZ_STR(__LINE__))
#define COZ_BEGIN(name) COZ_INCREMENT_COUNTER(COZ_COUNTER_TYPE_BEGIN, name)
#define COZ_END(name) COZ_INCREMENT_COUNTER(COZ_COUNTER_TYPE_END, name)

/* Custom synchronization hooks (same entry points as upstream's). */
static inline void _coz_call_void(const char* symbol) {
  union { void* p; void (*f)(void); } u;
  u.p = _coz_lookup(symbol);
  if (u.f) u.f();
}
static inline void _coz_call_post_block(int woken) {
  union { void* p; void (*f)(int); } u;
  u.p = _coz_lookup("_coz_post_block");
  if (u.f) u.f(woken);
}
#define COZ_PRE_BLOCK() _coz_call_void("_coz_pre_block")
#define COZ_POST_BLOCK(woken) _coz_call_post_block(!!(woken))
#define COZ_WAKE() _coz_call_void("_coz_add_delays")

#if defined(__cplusplus)
}
#endif

#endif /* COZ_H */
