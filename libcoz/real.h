// The original libc/pthread functions behind our interposed symbols.
//
// Resolved lazily with dlsym/dlvsym(RTLD_NEXT) into plain atomic slots (no
// static-guard locks, so a wrapper entered while resolving cannot deadlock).
// A symbol that cannot be found is reported on stderr before aborting: a
// wrapper without its original cannot do its job.
#pragma once

#include <atomic>

namespace coz {

void* resolve_real(std::atomic<void*>& slot, const char* name, const char* version);

}  // namespace coz

// Declares `real_<name>()` returning the original `name` with its own type.
// VERSION is the symbol version to bind (needed where libc keeps an old
// ABI, e.g. pthread_cond_*), or nullptr for the default one.
#define COZ_REAL_FN(name, version)                                           \
  static inline decltype(&::name) real_##name() {                            \
    static std::atomic<void*> slot{nullptr};                                  \
    void* p = slot.load(std::memory_order_acquire);                           \
    if (__builtin_expect(p == nullptr, 0)) p = coz::resolve_real(slot, #name, version); \
    return reinterpret_cast<decltype(&::name)>(p);                            \
  }
