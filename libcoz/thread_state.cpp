#include "thread_state.h"

#include <algorithm>

#include "kept.h"

namespace coz {

Shared g_shared;

const RangeSet* make_range_set(std::vector<AddrRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const AddrRange& a, const AddrRange& b) { return a.start < b.start; });
  std::vector<AddrRange> merged;
  for (const AddrRange& r : ranges) {
    if (r.end <= r.start) continue;
    if (!merged.empty() && r.start <= merged.back().end)
      merged.back().end = std::max(merged.back().end, r.end);
    else
      merged.push_back(r);
  }
  AddrRange* copy = new AddrRange[merged.size() ? merged.size() : 1];
  std::copy(merged.begin(), merged.end(), copy);
  const RangeSet* set = new RangeSet{merged.size(), copy};
  kept_for_readers(set);  // (and its ranges, which only it points to)
  return set;
}

}  // namespace coz
