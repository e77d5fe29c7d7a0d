#include "stacks.h"

#include <algorithm>

namespace coz {

const char* stack_kind_name(StackKind k) {
  switch (k) {
    case StackKind::kCpu: return "cpu";
    case StackKind::kIo: return "io";
    case StackKind::kLock: return "lock";
    case StackKind::kSleep: return "sleep";
    case StackKind::kSync: return "sync";
    case StackKind::kSched: return "sched";
    case StackKind::kOther: return "other";
  }
  return "other";
}

size_t StackTable::KeyHash::operator()(const Key& k) const {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(k.tid) ^ (static_cast<uint64_t>(k.kind) << 40);
  for (uintptr_t pc : k.pcs) h = (h ^ pc) * 0x100000001b3ull;
  return static_cast<size_t>(h ^ (h >> 29));
}

void StackTable::add(pid_t tid, StackKind kind, const uintptr_t* pcs, uint32_t n, uint64_t ns, uint64_t samples) {
  // The outermost frame in the runtime or in its unwinder.
  for (uint32_t i = n; i-- > 0;) {
    if (pcs[i] >= runtime_start_ && pcs[i] < runtime_end_) {
      pcs += i;  // the runtime's: the frames inside it go
      n -= i;
      break;
    }
    if (unwinding_ && pcs[i] >= unwinder_start_ && pcs[i] < unwinder_end_) {
      pcs = &unwinding_;  // the unwinder's, outside every runtime frame: its callers are not known
      n = 1;
      break;
    }
  }
  Key key{tid, kind, std::vector<uintptr_t>(pcs, pcs + n)};
  auto it = stacks_.find(key);
  if (it == stacks_.end()) {
    Entry e;
    e.id = static_cast<uint32_t>(stacks_.size() + 1);
    it = stacks_.emplace(std::move(key), e).first;
    unwritten_.push_back(&it->first);
  }
  Entry& e = it->second;
  if (e.samples == 0 && e.ns == 0) touched_.push_back(&e);
  e.samples += samples;
  e.ns += ns;
}

uint64_t next_stack_flush_ns(uint64_t elapsed_ns) {
  const uint64_t second = 1000000000ull;
  uint64_t gap = std::max<uint64_t>(second, elapsed_ns / 10);
  return elapsed_ns + std::min<uint64_t>(gap, 600 * second);
}

}  // namespace coz
