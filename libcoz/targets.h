// What experiments choose among (--unit: lines, functions, call sites), how
// a sample counts for each, and the code an experiment on one speeds up.
//
// One rule per unit, shared by the sample handler's hit test
// (chain_selected() in thread_state.h) and the attribution here:
//   - line: the sample's first in-scope frame lies in the line;
//   - function: its first in-scope frame lies in the function (inlined
//     copies included; recursion counts once, a frame is one address);
//   - call site L: any frame of its callchain lies in L's code (the line's
//     own code and the code inlined by calls on it): the call on L, or a
//     function L inlined, is under way, whatever the callee is.
//
// The profiler thread's; not thread safe.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "line_map.h"
#include "profile_writer.h"
#include "thread_state.h"
#include "units.h"

namespace coz {

struct Target {
  Unit unit = Unit::kLine;
  std::string name;             // as experiments name it
  const Line* line = nullptr;   // line: the line
  uint32_t function = 0;        // function: its id in the unit index
  std::string file;             // call site: its file and line
  uint32_t lineno = 0;
};

class Targets {
 public:
  // `units`: the names --unit gave (line, function, callsite).
  Targets(LineMap* lines, const std::vector<std::string>& units);
  ~Targets();
  Targets(const Targets&) = delete;
  Targets& operator=(const Targets&) = delete;

  bool has(Unit u) const { return enabled_[static_cast<int>(u)]; }
  // Whether any unit beyond lines is among the units.
  bool beyond_lines() const { return has(Unit::kFunction) || has(Unit::kCallsite); }

  // The line's target (interned: one per line).
  const Target* of_line(const Line* l);

  // A sample of the run, for the units beyond lines. With `count`, it is
  // counted once for each function and call site it counts for. Adds to
  // `candidates` one target per unit beyond lines (drawn among the
  // functions of its first in-scope frame, and among the innermost call
  // sites of its callchain), for experiments to choose among. `leaf_pc`:
  // frame 0 is where the thread was (a CPU sample), not a call, so its own
  // line is no call-site candidate.
  void sample(const Sample& smp, bool leaf_pc, bool count, std::mt19937* rng,
              std::vector<const Target*>* candidates);
  // Up to this many call sites, innermost first, are candidates per sample.
  static constexpr size_t kCallsiteCandidates = 8;

  // The code an experiment on `t` speeds up, sorted and merged.
  std::vector<AddrRange> ranges(const Target* t);

  // --fixed-function NAME and --fixed-callsite FILE:LINE: the target and its
  // code; null and an error sentence (and a hint) when it names nothing or
  // is ambiguous.
  const Target* fixed(Unit u, const std::string& spec, std::vector<AddrRange>* ranges, std::string* error,
                      std::string* hint);

  // The counts since the last call, into the samples record.
  void take_counts(SamplesRecord* rec);

  // The index of functions and call sites, brought up to date with the
  // objects of the line map (built on first use).
  UnitIndex& index();

 private:
  struct PcUnits {
    const Line* line = nullptr;                 // the line of the address (in scope), if any
    const Target* own = nullptr;                // the call-site target of that line
    std::vector<uint32_t> functions;            // innermost first
    std::vector<const Target*> inlined;         // call-site targets of the inlined calls, innermost first
  };
  const PcUnits& units_at(uintptr_t pc);
  const Target* of_function(uint32_t id);
  const Target* of_callsite(const std::string& file, uint32_t line);

  LineMap* lines_;
  bool enabled_[kUnits] = {false, false, false};
  std::unique_ptr<UnitIndex> index_;
  uint64_t objects_version_ = UINT64_MAX;
  std::unordered_map<const Line*, std::unique_ptr<Target>> line_targets_;
  std::unordered_map<uint32_t, std::unique_ptr<Target>> function_targets_;
  std::unordered_map<std::string, std::unique_ptr<Target>> callsite_targets_;
  std::vector<std::unique_ptr<Target>> fixed_targets_;
  std::unordered_map<uintptr_t, PcUnits> pc_units_;
  std::unordered_map<const Target*, uint64_t> function_counts_, callsite_counts_;
  std::vector<const Target*> scratch_;  // a sample's distinct call sites
};

}  // namespace coz
