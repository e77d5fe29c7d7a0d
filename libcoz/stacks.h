// The conventional profile: samples counted per distinct stack, as DCPI's
// collector counts them (a hash table of stacks, flushed as counts, never as
// samples), with each code address symbolized once.
//
// The profiler thread's: not thread safe, never in signal context.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "profile_writer.h"
#include "symbolizer.h"

namespace coz {

// What a stack's samples stand for: CPU time, or a wait of one category.
enum class StackKind : uint8_t { kCpu, kIo, kLock, kSleep, kSync, kSched, kOther };
const char* stack_kind_name(StackKind k);

class StackTable {
 public:
  // Counts one sample of `ns` (CPU or waiting time) for the stack `pcs`
  // (innermost first; return addresses already moved into their call) of
  // thread `tid`.
  //
  // A stack with frames in the runtime's own code (set_runtime_code) keeps
  // the outermost of them as its innermost frame: what the program called
  // (an interposed function, the sample handler), under the program's own
  // frames; the frames inside it (the runtime's, and the libraries it
  // calls: libunwind) are dropped. Their variety (every instruction of
  // libunwind a sample can hit, each with a chain cut where libunwind's
  // own frames end) made 83% of a ten-minute run's distinct stacks and kept
  // the profile growing, for 0.4% of its CPU time.
  void add(pid_t tid, StackKind kind, const uintptr_t* pcs, uint32_t n, uint64_t ns, uint64_t samples = 1);
  //
  // A stack whose outermost frame of the two is in the unwinder the runtime
  // uses (libunwind), not in the runtime: a sample taken while the sample
  // handler unwound, whose callers the kernel could not follow (libunwind
  // has no frame pointers: the chain beyond it is noise), becomes the one
  // frame `unwinding`. (A program that calls libunwind itself has those
  // samples counted so too.)
  void set_runtime_code(uintptr_t start, uintptr_t end, uintptr_t unwinder_start = 0, uintptr_t unwinder_end = 0,
                        uintptr_t unwinding = 0) {
    runtime_start_ = start;
    runtime_end_ = end;
    unwinder_start_ = unwinder_start;
    unwinder_end_ = unwinder_end;
    unwinding_ = unwinding;
  }

  // What a flush writes: the locations and stacks not written yet, and the
  // counts since the previous flush. `thread_of` gives a thread's name and
  // group. Empty when nothing happened.
  struct Flush {
    std::vector<LocationRecord> locations;
    std::vector<StackRecord> stacks;
    std::vector<StackCount> counts;
  };
  // `keep_up` is called after each new location is symbolized (reading an
  // object's debug information can take a few hundred milliseconds, while
  // the threads' rings fill): it takes their samples meanwhile.
  template <typename ThreadOf, typename KeepUp>
  Flush flush(Symbolizer* symbolizer, ThreadOf thread_of, KeepUp keep_up);
  template <typename ThreadOf>
  Flush flush(Symbolizer* symbolizer, ThreadOf thread_of) {
    return flush(symbolizer, thread_of, [] {});
  }

  size_t distinct_stacks() const { return stacks_.size(); }

 private:
  struct Key {
    pid_t tid;
    StackKind kind;
    std::vector<uintptr_t> pcs;
    bool operator==(const Key& o) const { return tid == o.tid && kind == o.kind && pcs == o.pcs; }
  };
  struct KeyHash {
    size_t operator()(const Key& k) const;
  };
  struct Entry {
    uint32_t id;
    uint64_t samples = 0;  // since the last flush
    uint64_t ns = 0;
    bool written = false;  // its definition
  };
  uintptr_t runtime_start_ = 0, runtime_end_ = 0, unwinder_start_ = 0, unwinder_end_ = 0, unwinding_ = 0;
  std::unordered_map<Key, Entry, KeyHash> stacks_;
  std::unordered_map<uintptr_t, uint32_t> location_ids_;  // written locations, by their address
  std::unordered_map<uintptr_t, uintptr_t> canonical_pc_;  // a frame's address -> its location's
  std::unordered_map<Key, uint32_t, KeyHash> written_ids_;  // written stacks, by their locations' addresses
  std::vector<const Key*> unwritten_;  // stacks defined since the last flush
  std::vector<Entry*> touched_;        // entries with counts since the last flush
};

template <typename ThreadOf, typename KeepUp>
StackTable::Flush StackTable::flush(Symbolizer* symbolizer, ThreadOf thread_of, KeepUp keep_up) {
  Flush f;
  // A frame's location: its address, or, where it is named from the symbol
  // table alone (libc, any object outside the binary scope), the start of
  // its symbol, so that every address of such a function is one location.
  auto location_of = [&](uintptr_t pc) -> std::pair<uintptr_t, uint32_t> {
    auto c = canonical_pc_.find(pc);
    uintptr_t at = c != canonical_pc_.end() ? c->second : 0;
    if (c == canonical_pc_.end()) {
      Symbolized sym = symbolizer->symbolize(pc);
      at = sym.symbol_start ? sym.symbol_start : pc;
      canonical_pc_.emplace(pc, at);
      if (!location_ids_.count(at)) {
        if (at != pc) sym = symbolizer->symbolize(at);
        uint32_t id = static_cast<uint32_t>(location_ids_.size() + 1);
        location_ids_.emplace(at, id);
        LocationRecord l;
        l.id = id;
        l.address = at;
        l.object = sym.object;
        l.object_address = sym.object_address;
        l.build_id = sym.build_id;
        for (SourceFrame& fr : sym.frames) l.lines.push_back({fr.function, fr.file, fr.line});
        f.locations.push_back(std::move(l));
        keep_up();
      }
    }
    return {at, location_ids_.at(at)};
  };
  for (const Key* k : unwritten_) {
    Entry& e = stacks_.find(*k)->second;
    e.written = true;
    Key canon{k->tid, k->kind, {}};
    std::vector<uint32_t> ids;
    for (uintptr_t pc : k->pcs) {
      auto loc = location_of(pc);
      canon.pcs.push_back(loc.first);
      ids.push_back(loc.second);
    }
    // Stacks that differ only inside such functions are one stack.
    auto known = written_ids_.emplace(std::move(canon), e.id);
    if (!known.second) {
      e.id = known.first->second;
      continue;
    }
    StackRecord s;
    s.id = e.id;
    s.kind = stack_kind_name(k->kind);
    s.tid = k->tid;
    thread_of(k->tid, &s.thread, &s.group);
    s.locations = std::move(ids);
    f.stacks.push_back(std::move(s));
  }
  unwritten_.clear();
  std::unordered_map<uint32_t, size_t> at;  // one count per written stack
  for (Entry* e : touched_) {
    auto i = at.emplace(e->id, f.counts.size());
    if (i.second) {
      f.counts.push_back({e->id, e->samples, e->ns});
    } else {
      f.counts[i.first->second].samples += e->samples;
      f.counts[i.first->second].ns += e->ns;
    }
    e->samples = 0;
    e->ns = 0;
  }
  touched_.clear();
  return f;
}

// When the stacks are flushed: 1 s after the start, then a tenth of the
// elapsed time later, at most ten minutes apart; so a run writes 52
// flushes in ten minutes, 71 in an hour, 127 in ten hours and 211 in a day
// (with a minute apart at most it wrote 1482 a day: long_run.py measured
// 24 KB a minute of counts for pipeline's 2,700 stacks), and a crash or
// SIGKILL loses at most a tenth of what was sampled, or ten minutes of it.
uint64_t next_stack_flush_ns(uint64_t elapsed_ns);

}  // namespace coz
