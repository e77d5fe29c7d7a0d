// Unwinding a sample from a copy of its registers and of the top of its
// user stack (PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER), with the
// DWARF call frame information (libunwind), away from the sampled thread:
// the sampling-only mode's profiler thread does it, so that no signal
// interrupts the program at each sample.
//
// Not for signal context (libunwind's caches take locks here).
#pragma once

#include <cstddef>
#include <cstdint>

namespace coz {

// The user registers a sample records, in perf's order (the bits of
// kSampleRegsMask, lowest first).
enum CopiedReg { kRegAx, kRegBx, kRegCx, kRegDx, kRegSi, kRegDi, kRegBp, kRegSp, kRegIp,
                 kRegR8, kRegR9, kRegR10, kRegR11, kRegR12, kRegR13, kRegR14, kRegR15, kCopiedRegs };
// perf_event_attr.sample_regs_user for them (x86-64: AX..DI, BP, SP, IP, R8..R15).
constexpr uint64_t kSampleRegsMask = 0xff01ffull;
// Bytes of stack copied per sample: enough for the frames near the leaf
// that frame pointers miss; deeper frames come from the stack itself only as
// far as the copy reaches.
constexpr uint32_t kSampleStackBytes = 2048;

struct StackCopy {
  uint64_t regs[kCopiedRegs];
  const uint8_t* stack = nullptr;  // the copy, starting at regs[kRegSp]
  size_t size = 0;
};

// Whether `pc` is in the executable code of a loaded object, or of one the
// program has unloaded since (a sanity check of callchains: the kernel's,
// built from frame pointers, reads any stack word as a return address in
// code without them, and libunwind, where it finds no unwind information,
// guesses from the frame pointer too). The profiler thread's.
bool code_address(uintptr_t pc);

// How many of a callchain's frames (innermost first, the sampled IP then
// return addresses moved back into their call) to keep: up to the first
// return address outside code, the rest being read from a bad frame.
uint32_t code_frames(const uintptr_t* pcs, uint32_t n);

// Innermost first: the sampled IP, then return addresses moved back into
// their call instruction. Returns how many; *truncated when `max` cut it.
size_t unwind_copy(const StackCopy& copy, uintptr_t* pcs, size_t max, bool* truncated);

}  // namespace coz
