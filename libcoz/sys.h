// System calls made by the runtime itself, straight to the kernel: never
// through libc's syscall(), which the runtime interposes (futex waits made
// with it are waits of the program), and safe in signal context. The one
// platform-specific file of the runtime: x86-64 Linux.
#pragma once

#include <cerrno>

namespace coz {

// Like syscall(2): returns -1 with errno set on failure.
inline long sys6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
  long ret;
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  if (ret < 0 && ret > -4096) {
    errno = static_cast<int>(-ret);
    return -1;
  }
  return ret;
}

template <typename... Args>
inline long sys(long n, Args... args) {
  static_assert(sizeof...(Args) <= 6, "at most six arguments");
  long a[6] = {(long)(args)...};
  return sys6(n, a[0], a[1], a[2], a[3], a[4], a[5]);
}

inline long sys(long n) { return sys6(n, 0, 0, 0, 0, 0, 0); }

}  // namespace coz
