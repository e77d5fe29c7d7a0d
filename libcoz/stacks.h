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
  void set_runtime_code(uintptr_t start, uintptr_t end) {
    runtime_start_ = start;
    runtime_end_ = end;
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
  uintptr_t runtime_start_ = 0, runtime_end_ = 0;
  std::unordered_map<Key, Entry, KeyHash> stacks_;
  std::unordered_map<uintptr_t, uint32_t> location_ids_;  // written locations
  std::vector<const Key*> unwritten_;  // stacks defined since the last flush
  std::vector<Entry*> touched_;        // entries with counts since the last flush
};

template <typename ThreadOf, typename KeepUp>
StackTable::Flush StackTable::flush(Symbolizer* symbolizer, ThreadOf thread_of, KeepUp keep_up) {
  Flush f;
  for (const Key* k : unwritten_) {
    Entry& e = stacks_.find(*k)->second;
    StackRecord s;
    s.id = e.id;
    s.kind = stack_kind_name(k->kind);
    s.tid = k->tid;
    thread_of(k->tid, &s.thread, &s.group);
    for (uintptr_t pc : k->pcs) {
      auto it = location_ids_.find(pc);
      if (it == location_ids_.end()) {
        uint32_t id = static_cast<uint32_t>(location_ids_.size() + 1);
        it = location_ids_.emplace(pc, id).first;
        LocationRecord l;
        l.id = id;
        l.address = pc;
        Symbolized sym = symbolizer->symbolize(pc);
        l.object = sym.object;
        l.object_address = sym.object_address;
        l.build_id = sym.build_id;
        for (SourceFrame& fr : sym.frames) l.lines.push_back({fr.function, fr.file, fr.line});
        f.locations.push_back(std::move(l));
        keep_up();
      }
      s.locations.push_back(it->second);
    }
    e.written = true;
    f.stacks.push_back(std::move(s));
  }
  unwritten_.clear();
  for (Entry* e : touched_) {
    f.counts.push_back({e->id, e->samples, e->ns});
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
