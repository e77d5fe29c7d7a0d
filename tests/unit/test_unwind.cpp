// Unwinding from a copy of the registers and of the top of the stack, after
// the stack itself has moved on: what the sampling-only mode's profiler
// thread does with PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER records.
#include "unwind.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <ucontext.h>

#include <cstring>
#include <string>
#include <vector>

#include "symbolizer.h"

namespace {

uint8_t g_stack[4096];  // within the main thread's stack above the frames
coz::StackCopy g_copy;

// Reads the raw stack above itself, as the kernel's copy does: not for
// AddressSanitizer's eyes (its redzones sit between the frames).
__attribute__((noinline, no_sanitize_address)) void raw_copy(uint8_t* dst, const uint8_t* src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

__attribute__((noinline)) void capture_copy(size_t bytes) {
  ucontext_t uc;
  getcontext(&uc);
  const greg_t* g = uc.uc_mcontext.gregs;
  uint64_t* r = g_copy.regs;
  r[coz::kRegAx] = g[REG_RAX]; r[coz::kRegBx] = g[REG_RBX]; r[coz::kRegCx] = g[REG_RCX];
  r[coz::kRegDx] = g[REG_RDX]; r[coz::kRegSi] = g[REG_RSI]; r[coz::kRegDi] = g[REG_RDI];
  r[coz::kRegBp] = g[REG_RBP]; r[coz::kRegSp] = g[REG_RSP]; r[coz::kRegIp] = g[REG_RIP];
  r[coz::kRegR8] = g[REG_R8]; r[coz::kRegR9] = g[REG_R9]; r[coz::kRegR10] = g[REG_R10];
  r[coz::kRegR11] = g[REG_R11]; r[coz::kRegR12] = g[REG_R12]; r[coz::kRegR13] = g[REG_R13];
  r[coz::kRegR14] = g[REG_R14]; r[coz::kRegR15] = g[REG_R15];
  raw_copy(g_stack, reinterpret_cast<const uint8_t*>(g[REG_RSP]), bytes);
  g_copy.stack = g_stack;
  g_copy.size = bytes;
}

__attribute__((noinline)) int unwind_level2(int x, size_t bytes) {
  capture_copy(bytes);
  __asm__ volatile("" ::: "memory");
  return x + 1;
}

__attribute__((noinline)) int unwind_level1(int x, size_t bytes) {
  int y = unwind_level2(x, bytes);
  __asm__ volatile("" ::: "memory");
  return y * 2;
}

std::vector<std::string> names(const uintptr_t* pcs, size_t n) {
  coz::Symbolizer s;
  std::vector<std::string> out;
  for (size_t i = 0; i < n; i++) out.push_back(s.function_name(pcs[i]));
  return out;
}

}  // namespace

TEST(Unwind, CopyGivesTheCallersAfterTheStackMovedOn) {
  EXPECT_EQ(unwind_level1(1, sizeof g_stack), 4);
  // The frames captured are gone: scribble over where they were.
  volatile char scratch[8192];
  memset(const_cast<char*>(scratch), 0x5a, sizeof scratch);
  uintptr_t pcs[32];
  bool truncated = false;
  size_t n = coz::unwind_copy(g_copy, pcs, 32, &truncated);
  std::vector<std::string> f = names(pcs, n);
  ASSERT_GE(f.size(), 4u);
  auto has = [&](const std::string& what, size_t from) {
    for (size_t i = from; i < f.size(); i++)
      if (f[i].find(what) != std::string::npos) return i;
    return f.size();
  };
  size_t c = has("capture_copy", 0), l2 = has("unwind_level2", 0), l1 = has("unwind_level1", 0);
  EXPECT_LT(c, l2);
  EXPECT_LT(l2, l1);
  EXPECT_LT(l1, f.size()) << "the callers, in order, from the copy alone";
}

TEST(Unwind, ASmallCopyStopsCleanly) {
  EXPECT_EQ(unwind_level1(1, 64), 4);  // 64 bytes: not even capture_copy's frame
  uintptr_t pcs[32];
  bool truncated = false;
  size_t n = coz::unwind_copy(g_copy, pcs, 32, &truncated);
  EXPECT_GE(n, 1u);
  EXPECT_LT(n, 32u);
  EXPECT_FALSE(truncated);
}

TEST(Unwind, DepthIsCapped) {
  EXPECT_EQ(unwind_level1(1, sizeof g_stack), 4);
  uintptr_t pcs[2];
  bool truncated = false;
  EXPECT_EQ(coz::unwind_copy(g_copy, pcs, 2, &truncated), 2u);
  EXPECT_TRUE(truncated);
}

namespace {
TEST(Unwind, AChainIsKeptUpToItsFirstReturnAddressOutsideCode) {
  // libunwind guesses a caller from the frame pointer where it finds no
  // unwind information, and the kernel's chain reads any stack word in code
  // without frame pointers: a stack address then reads as a return address.
  int on_stack = 0;
  const auto code = reinterpret_cast<uintptr_t>(&unwind_level1);
  const auto stack = reinterpret_cast<uintptr_t>(&on_stack);
  const uintptr_t chain[] = {code, code + 4, stack, code + 8};
  EXPECT_EQ(coz::code_frames(chain, 4), 2u);
  const uintptr_t good[] = {stack, code + 4, code + 8};  // the sampled IP itself is not checked
  EXPECT_EQ(coz::code_frames(good, 3), 3u);
  EXPECT_EQ(coz::code_frames(good, 0), 0u);
}
}  // namespace
