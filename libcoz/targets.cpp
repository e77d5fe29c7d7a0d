#include "targets.h"

#include <algorithm>
#include <cstdlib>

namespace coz {

namespace {

void merge(std::vector<AddrRange>* v) {
  std::sort(v->begin(), v->end(), [](const AddrRange& a, const AddrRange& b) { return a.start < b.start; });
  size_t w = 0;
  for (size_t i = 0; i < v->size(); i++) {
    if (w && (*v)[i].start <= (*v)[w - 1].end) {
      (*v)[w - 1].end = std::max((*v)[w - 1].end, (*v)[i].end);
    } else {
      (*v)[w++] = (*v)[i];
    }
  }
  v->resize(w);
}

constexpr size_t kMaxCachedPcs = 1u << 20;

}  // namespace

Targets::Targets(LineMap* lines, const std::vector<std::string>& units) : lines_(lines) {
  for (const std::string& name : units) {
    Unit u;
    if (parse_unit(name, &u)) enabled_[static_cast<int>(u)] = true;
  }
  if (!beyond_lines()) enabled_[static_cast<int>(Unit::kLine)] = true;
}

Targets::~Targets() = default;

UnitIndex& Targets::index() {
  if (!index_) {
    LineMap* lines = lines_;
    index_.reset(new UnitIndex([lines](const std::string& f) { return lines->in_source_scope(f); },
                               lines_->debuginfo_path()));
  }
  // New objects (dlopen) since the last look.
  uint64_t v = lines_->attributable_version();
  if (v != objects_version_) {
    objects_version_ = v;
    for (const auto& o : lines_->objects()) index_->add_object(o.first, o.second);
  }
  return *index_;
}

const Target* Targets::of_line(const Line* l) {
  auto& slot = line_targets_[l];
  if (!slot) {
    slot.reset(new Target);
    slot->unit = Unit::kLine;
    slot->name = l->name();
    slot->line = l;
  }
  return slot.get();
}

const Target* Targets::of_function(uint32_t id) {
  auto& slot = function_targets_[id];
  if (!slot) {
    slot.reset(new Target);
    slot->unit = Unit::kFunction;
    slot->name = index().function_name(id);
    slot->function = id;
  }
  return slot.get();
}

const Target* Targets::of_callsite(const std::string& file, uint32_t line) {
  std::string name = file + ":" + std::to_string(line);
  auto& slot = callsite_targets_[name];
  if (!slot) {
    slot.reset(new Target);
    slot->unit = Unit::kCallsite;
    slot->name = name;
    slot->file = file;
    slot->lineno = line;
  }
  return slot.get();
}

const Targets::PcUnits& Targets::units_at(uintptr_t pc) {
  auto it = pc_units_.find(pc);
  if (it != pc_units_.end()) return it->second;
  if (pc_units_.size() > kMaxCachedPcs) pc_units_.clear();
  PcUnits u;
  u.line = lines_->lookup(pc);
  UnitIndex::At at;
  index().at(pc, &at);
  if (has(Unit::kFunction)) u.functions = at.functions;
  if (has(Unit::kCallsite)) {
    if (u.line) u.own = of_callsite(u.line->file, u.line->line);
    for (const UnitIndex::CallSite* c : at.callsites) u.inlined.push_back(of_callsite(c->file, c->line));
  }
  return pc_units_.emplace(pc, std::move(u)).first->second;
}

void Targets::sample(const Sample& smp, bool leaf_pc, bool count, std::mt19937* rng,
                     std::vector<const Target*>* candidates) {
  if (!beyond_lines()) return;
  // Functions: those of the first in-scope frame.
  if (has(Unit::kFunction)) {
    for (uint32_t i = 0; i < smp.n; i++) {
      const PcUnits& u = units_at(smp.pcs[i]);
      if (!u.line) continue;
      if (!u.functions.empty()) {
        if (count)
          for (uint32_t f : u.functions) function_counts_[of_function(f)]++;
        candidates->push_back(of_function(u.functions[(*rng)() % u.functions.size()]));
      }
      break;
    }
  }
  if (!has(Unit::kCallsite)) return;
  // Call sites: every frame's, once each (recursion passes a call site
  // many times); the innermost few are candidates.
  scratch_.clear();
  size_t eligible = 0;
  auto note = [&](const Target* t, bool candidate) {
    if (std::find(scratch_.begin(), scratch_.end(), t) != scratch_.end()) return;
    if (candidate && eligible < kCallsiteCandidates) {
      // Keep the candidates first, in order.
      scratch_.insert(scratch_.begin() + static_cast<std::ptrdiff_t>(eligible), t);
      eligible++;
    } else {
      scratch_.push_back(t);
    }
  };
  for (uint32_t i = 0; i < smp.n; i++) {
    const PcUnits& u = units_at(smp.pcs[i]);
    if (u.own) note(u.own, !(i == 0 && leaf_pc));
    for (const Target* t : u.inlined) note(t, true);
  }
  if (count)
    for (const Target* t : scratch_) callsite_counts_[t]++;
  if (eligible) candidates->push_back(scratch_[(*rng)() % eligible]);
}

std::vector<AddrRange> Targets::ranges(const Target* t) {
  std::vector<AddrRange> out;
  switch (t->unit) {
    case Unit::kLine:
      out = lines_->ranges_of(t->line);
      break;
    case Unit::kFunction:
      out = index().function_ranges(t->function);
      break;
    case Unit::kCallsite: {
      // The file is absolute: find() takes it as that very file.
      const std::string spec = t->name;
      for (const Line* l : lines_->find(spec)) {
        std::vector<AddrRange> r = lines_->ranges_of(l);
        out.insert(out.end(), r.begin(), r.end());
      }
      for (const UnitIndex::CallSite* c : index().find_callsites(t->file, t->lineno))
        out.insert(out.end(), c->ranges.begin(), c->ranges.end());
      break;
    }
  }
  merge(&out);
  return out;
}

const Target* Targets::fixed(Unit u, const std::string& spec, std::vector<AddrRange>* ranges, std::string* error,
                             std::string* hint) {
  ranges->clear();
  std::unique_ptr<Target> t(new Target);
  t->unit = u;
  if (u == Unit::kFunction) {
    UnitIndex& idx = index();
    std::vector<uint32_t> ids = idx.find_functions(spec);
    std::vector<uint32_t> exact;
    for (uint32_t id : ids)
      if (idx.function_name(id) == spec) exact.push_back(id);
    if (!exact.empty()) ids = exact;
    if (ids.empty()) {
      *error = "--fixed-function " + spec + " matches no function with code in the binary and source scopes";
      *hint = "check the name (C++: with or without its namespace and parameters), or widen --binary-scope "
              "and --source-scope";
      return nullptr;
    }
    if (ids.size() > 1) {
      std::string names;
      for (size_t i = 0; i < ids.size() && i < 5; i++) names += (i ? "; " : "") + idx.function_name(ids[i]);
      *error = "--fixed-function " + spec + " is ambiguous: " + std::to_string(ids.size()) + " functions match (" +
               names + (ids.size() > 5 ? "; ..." : "") + ")";
      *hint = "give the function's whole name as the profile names it";
      return nullptr;
    }
    t->name = idx.function_name(ids[0]);
    t->function = ids[0];
    *ranges = idx.function_ranges(ids[0]);
  } else if (u == Unit::kCallsite) {
    size_t colon = spec.rfind(':');
    std::string file = colon == std::string::npos ? spec : spec.substr(0, colon);
    uint32_t line = colon == std::string::npos ? 0 : static_cast<uint32_t>(std::strtoul(spec.c_str() + colon + 1, nullptr, 10));
    for (const Line* l : lines_->find(spec)) {
      if (t->name.empty()) {
        t->name = l->name();
        t->file = l->file;
      }
      std::vector<AddrRange> r = lines_->ranges_of(l);
      ranges->insert(ranges->end(), r.begin(), r.end());
    }
    for (const UnitIndex::CallSite* c : index().find_callsites(file, line)) {
      if (t->name.empty()) {
        t->name = c->file + ":" + std::to_string(c->line);
        t->file = c->file;
      }
      ranges->insert(ranges->end(), c->ranges.begin(), c->ranges.end());
    }
    if (ranges->empty()) {
      *error = "--fixed-callsite " + spec + " matches no line with code, or inlined calls, in the binary scope";
      *hint = "check the file name and line number, or widen --binary-scope";
      return nullptr;
    }
    t->lineno = line;
    merge(ranges);
  } else {
    *error = "a fixed line is resolved by the line map";
    return nullptr;
  }
  fixed_targets_.push_back(std::move(t));
  return fixed_targets_.back().get();
}

void Targets::take_counts(SamplesRecord* rec) {
  rec->with_functions = has(Unit::kFunction);
  rec->with_callsites = has(Unit::kCallsite);
  for (auto& kv : function_counts_) rec->functions.emplace_back(kv.first->name, kv.second);
  for (auto& kv : callsite_counts_) rec->callsites.emplace_back(kv.first->name, kv.second);
  std::sort(rec->functions.begin(), rec->functions.end());
  std::sort(rec->callsites.begin(), rec->callsites.end());
  function_counts_.clear();
  callsite_counts_.clear();
}

}  // namespace coz
