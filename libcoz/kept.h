// Objects published to lock-free readers and never freed.
#pragma once

namespace coz {

// An object the runtime publishes to lock-free readers and never frees (a
// new one replaces it, and a signal handler may still be reading the old
// one). In a program built with AddressSanitizer (profiled with
// ASAN_OPTIONS=verify_asan_link_order=0), LeakSanitizer reported the
// replaced ones at exit, and the program's exit status changed with its
// report: they are marked as meant to live (nothing without LeakSanitizer).
extern "C" void __lsan_ignore_object(const void* p) __attribute__((weak));
inline void kept_for_readers(const void* p) {
  if (&__lsan_ignore_object) __lsan_ignore_object(p);
}

}  // namespace coz
