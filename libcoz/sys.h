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

// Calls fn(arg) with the stack pointer at `top` (16-byte aligned, the high
// end of a stack the caller owns), and returns on the caller's stack.
inline void call_on_stack(void (*fn)(void*), void* arg, void* top) {
  __asm__ volatile(
      "mov %%rsp, %%rbx\n\t"
      "mov %[top], %%rsp\n\t"
      "call *%[fn]\n\t"
      "mov %%rbx, %%rsp"
      : [fn] "+a"(fn), "+D"(arg), [top] "+S"(top)
      :
      : "rbx", "rcx", "rdx", "r8", "r9", "r10", "r11", "memory", "cc", "xmm0", "xmm1", "xmm2", "xmm3",
        "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14",
        "xmm15", "st", "st(1)", "st(2)", "st(3)", "st(4)", "st(5)", "st(6)", "st(7)");
}

}  // namespace coz
