#include "unwind.h"

#include <link.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "loaded_objects.h"

#if COZ_HAVE_LIBUNWIND
// Not UNW_LOCAL_ONLY: the local-only library refuses address spaces of
// one's own (unw_create_addr_space returns null there).
#include <libunwind.h>
#endif

namespace coz {

#if COZ_HAVE_LIBUNWIND

namespace {

// Loaded objects' segments: the only memory outside the stack copy that
// the unwinder may read in place (their .eh_frame and .eh_frame_hdr). Any
// other address (a garbage value taken for a pointer) is refused instead of
// read, so a bad unwind stops rather than faults.
struct Segments {
  int flag;                                             // PF_R: readable, PF_X: code
  bool with_unloaded;                                   // and the code of objects since unloaded (never read)
  std::vector<std::pair<uintptr_t, uintptr_t>> ranges;  // sorted [start, end)
  unsigned long long seen_changes = 0;                  // loader_changes() at the last refresh
  uint64_t seen_unloaded = 0;                           // unloaded_objects_version() at the last refresh

  void add(const LoadedObject& o) {
    for (const ElfW(Phdr)& ph : o.phdrs)
      if (ph.p_type == PT_LOAD && ph.p_memsz && (ph.p_flags & flag))
        ranges.emplace_back(o.bias + ph.p_vaddr, o.bias + ph.p_vaddr + ph.p_filesz);
  }

  void refresh() {
    ranges.clear();
    for (const LoadedObject& o : loaded_objects()) add(o);
    // A stack sampled before a dlclose is read after it: its frames in the
    // unloaded library are code all the same.
    if (with_unloaded)
      for (const LoadedObject& o : unloaded_objects()) add(o);
    std::sort(ranges.begin(), ranges.end());
  }

  bool contains(uintptr_t a, size_t len) const {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), std::make_pair(a, UINTPTR_MAX));
    if (it == ranges.begin()) return false;
    --it;
    return a >= it->first && a + len <= it->second;
  }

  bool readable(uintptr_t a, size_t len) {
    if (contains(a, len)) return true;
    // A library loaded (or unloaded) since: looked up again only then, so
    // that addresses in no object (code the program generated, a garbage
    // frame) do not each copy the loader's list. Without the loader's
    // counters, always. (The first look always reads it: the counters,
    // where kept, count the main program's load, and start above 0.)
    const unsigned long long changes = loader_changes();
    const uint64_t unloaded = with_unloaded ? unloaded_objects_version() : 0;
    if (changes && changes == seen_changes && unloaded == seen_unloaded) return false;
    seen_changes = changes;
    seen_unloaded = unloaded;
    refresh();
    return contains(a, len);
  }
};

Segments& segments() {
  static Segments* s = new Segments{PF_R, false, {}};  // the profiler thread's only
  return *s;
}

Segments& code_segments() {
  static Segments* s = new Segments{PF_X, true, {}};
  return *s;
}

// libunwind's numbering of the registers it asks for.
int copied_reg(unw_regnum_t r) {
  switch (r) {
    case UNW_X86_64_RAX: return kRegAx;
    case UNW_X86_64_RDX: return kRegDx;
    case UNW_X86_64_RCX: return kRegCx;
    case UNW_X86_64_RBX: return kRegBx;
    case UNW_X86_64_RSI: return kRegSi;
    case UNW_X86_64_RDI: return kRegDi;
    case UNW_X86_64_RBP: return kRegBp;
    case UNW_X86_64_RSP: return kRegSp;
    case UNW_X86_64_R8: return kRegR8;
    case UNW_X86_64_R9: return kRegR9;
    case UNW_X86_64_R10: return kRegR10;
    case UNW_X86_64_R11: return kRegR11;
    case UNW_X86_64_R12: return kRegR12;
    case UNW_X86_64_R13: return kRegR13;
    case UNW_X86_64_R14: return kRegR14;
    case UNW_X86_64_R15: return kRegR15;
    case UNW_X86_64_RIP: return kRegIp;
    default: return -1;
  }
}

int access_mem(unw_addr_space_t, unw_word_t addr, unw_word_t* val, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  const StackCopy* c = static_cast<const StackCopy*>(arg);
  const uintptr_t sp = c->regs[kRegSp];
  if (addr >= sp && addr + sizeof *val <= sp + c->size) {
    memcpy(val, c->stack + (addr - sp), sizeof *val);
    return 0;
  }
  if (addr >= sp && addr < sp + (1u << 20)) return -UNW_EINVAL;  // stack beyond the copy: gone by now
  if (!segments().readable(addr, sizeof *val)) return -UNW_EINVAL;
  memcpy(val, reinterpret_cast<const void*>(addr), sizeof *val);
  return 0;
}

int access_reg(unw_addr_space_t, unw_regnum_t reg, unw_word_t* val, int write, void* arg) {
  if (write) return -UNW_EINVAL;
  int i = copied_reg(reg);
  if (i < 0) return -UNW_EBADREG;
  *val = static_cast<const StackCopy*>(arg)->regs[i];
  return 0;
}

int access_fpreg(unw_addr_space_t, unw_regnum_t, unw_fpreg_t*, int, void*) { return -UNW_EBADREG; }

int resume(unw_addr_space_t, unw_cursor_t*, void*) { return -UNW_EINVAL; }

unw_addr_space_t copy_space() {
  static unw_addr_space_t as = [] {
    // The local address space's own ways of finding unwind information,
    // with memory and registers taken from the copy.
    unw_accessors_t acc = *unw_get_accessors(unw_local_addr_space);
    acc.access_mem = access_mem;
    acc.access_reg = access_reg;
    acc.access_fpreg = access_fpreg;
    acc.resume = resume;
    unw_addr_space_t space = unw_create_addr_space(&acc, 0);
    unw_set_caching_policy(space, UNW_CACHE_GLOBAL);
    return space;
  }();
  return as;
}

}  // namespace

bool code_address(uintptr_t pc) { return code_segments().readable(pc, 1); }

uint32_t code_frames(const uintptr_t* pcs, uint32_t n) {
  for (uint32_t i = 1; i < n; i++)
    if (!code_address(pcs[i] + 1)) return i;  // pcs[i] is a return address moved back one byte
  return n;
}

size_t unwind_copy(const StackCopy& copy, uintptr_t* pcs, size_t max, bool* truncated) {
  *truncated = false;
  size_t n = 0;
  if (max == 0) return 0;
  pcs[n++] = copy.regs[kRegIp];
  unw_cursor_t cursor;
  if (unw_init_remote(&cursor, copy_space(), const_cast<StackCopy*>(&copy)) != 0) return n;
  while (unw_step(&cursor) > 0) {
    unw_word_t ip;
    if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 || ip == 0) break;
    if (n == max) {
      *truncated = true;
      break;
    }
    pcs[n++] = ip - 1;  // a return address: look up the call instruction
  }
  return n;
}

#else

bool code_address(uintptr_t) { return true; }

uint32_t code_frames(const uintptr_t*, uint32_t n) { return n; }

size_t unwind_copy(const StackCopy& copy, uintptr_t* pcs, size_t max, bool* truncated) {
  *truncated = false;
  if (max == 0) return 0;
  pcs[0] = copy.regs[kRegIp];
  return 1;
}

#endif

}  // namespace coz
