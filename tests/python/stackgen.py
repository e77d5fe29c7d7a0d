"""Writes profiles of the conventional-profile records (docs/profile-format.md)
for tests and benchmarks: `locations`, `stacks`, `stack_counts`, `counters`.

A stack is given root first as a list of frames; a frame is a function name,
or a tuple `(function, file, line)`, or a list of such tuples for a location
where functions were inlined (innermost first, as the runtime writes them).
"""

import json
import random


class ProfileWriter:
    def __init__(self, argv0="/bin/app", pid=7, build_id="ab12", sample_period_ns=1_000_000,
                 mode="sampling-only"):
        self.records = [{"type": "startup", "version": 1, "time_ns": 1_763_900_000_000_000_000,
                         "pid": pid, "argv0": argv0, "build_id": build_id, "mode": mode,
                         "sample_period_ns": sample_period_ns,
                         "experiment_length_ns": 500_000_000, "sampler": "perf_event",
                         "binary_scope": ["MAIN"], "source_scope": ["%"], "fixed_line": None,
                         "fixed_speedup": None}]
        self.locations = {}    # key -> id
        self.loc_records = []
        self.stacks = {}       # key -> id
        self.stack_records = []
        self.counts = {}       # stack id -> [samples, ns]
        self.object = argv0
        self.next_address = 0x401000

    def location(self, frame, object=None):
        if isinstance(frame, str):
            lines = [(frame, None, 0)]
        elif isinstance(frame, tuple):
            lines = [frame]
        else:
            lines = list(frame)
        obj = self.object if object is None else object
        key = (tuple(lines), obj)
        lid = self.locations.get(key)
        if lid is None:
            lid = self.locations[key] = len(self.locations) + 1
            address = self.next_address
            self.next_address += 0x10
            self.loc_records.append({
                "id": lid, "address": address, "object": obj,
                "object_offset": address - 0x400000, "build_id": "ab12",
                "lines": [{"function": f, "file": fl, "line": ln} for f, fl, ln in lines]})
        return lid

    def add(self, frames_root_first, samples, time_ns=None, kind="cpu", tid=7, thread="app",
            group="main", object=None):
        """Count `samples` (standing for `time_ns`, default 1 ms each) of a stack."""
        locs = [self.location(f, object) for f in reversed(frames_root_first)]
        key = (tuple(locs), kind, tid, thread, group)
        sid = self.stacks.get(key)
        if sid is None:
            sid = self.stacks[key] = len(self.stacks) + 1
            self.stack_records.append({"id": sid, "locations": locs, "kind": kind, "tid": tid,
                                       "thread": thread, "group": group})
        c = self.counts.setdefault(sid, [0, 0])
        c[0] += samples
        c[1] += samples * 1_000_000 if time_ns is None else time_ns
        return sid

    def counters(self, **fields):
        rec = {"type": "counters", "task_clock_ns": 2_000_000_000, "user_ns": 1_500_000_000,
               "system_ns": 500_000_000,
               "context_switches": {"voluntary": 30, "involuntary": 10},
               "page_faults": {"minor": 1000, "major": 2}, "migrations": None,
               "hardware": None, "hardware_unavailable": "no PMU in this virtual machine",
               "wall_ns": 4_000_000_000}
        rec.update(fields)
        self.records.append(rec)

    def lines(self, split_counts=2):
        """The run's records as JSON lines; counts are split over `split_counts`
        stack_counts records (increments, as the runtime flushes them)."""
        out = [json.dumps(r) for r in self.records[:1]]
        out.append(json.dumps({"type": "locations", "locations": self.loc_records}))
        out.append(json.dumps({"type": "stacks", "stacks": self.stack_records}))
        parts = [[] for _ in range(split_counts)]
        for sid, (n, ns) in sorted(self.counts.items()):
            first_n, first_ns = n // 2, ns // 2
            if split_counts > 1 and first_n:
                parts[0].append([sid, first_n, first_ns])
                parts[1].append([sid, n - first_n, ns - first_ns])
            else:
                parts[0].append([sid, n, ns])
        for p in parts:
            if p:
                out.append(json.dumps({"type": "stack_counts", "counts": p}))
        out.extend(json.dumps(r) for r in self.records[1:])
        total = sum(n for n, _ in self.counts.values())
        out.append(json.dumps({"type": "shutdown", "time_ns": 1_763_900_004_000_000_000,
                               "reason": "exit", "samples": total, "lost_records": 0,
                               "dropped_samples": 0, "skipped_records": 0,
                               "truncated_stacks": 0, "experiments": 0}))
        return out

    def write(self, path, extra_lines=()):
        with open(path, "w") as f:
            for line in self.lines():
                f.write(line + "\n")
            for line in extra_lines:
                f.write(line + "\n")
        return path


def random_profile(seed, stacks=200, functions=12, depth=8, kinds=("cpu", "cpu", "io", "lock")):
    """A seeded profile of random stacks with recursion and inlining; returns
    (ProfileWriter, [(frames root first, samples, ns, kind, tid)])."""
    rng = random.Random(seed)
    names = [f"fn{i:02d}" for i in range(functions)]
    w = ProfileWriter()
    added = []
    for _ in range(stacks):
        frames = []
        for _ in range(rng.randint(1, depth)):
            name = rng.choice(names)
            line = rng.randint(1, 5)
            if rng.random() < 0.2:
                inner = rng.choice(names)
                frames.append([(inner, f"/src/{inner}.c", rng.randint(1, 5)),
                               (name, f"/src/{name}.c", line)])
            else:
                frames.append((name, f"/src/{name}.c", line))
        n = rng.randint(1, 50)
        ns = n * rng.randint(500_000, 1_500_000)
        kind = rng.choice(kinds)
        tid = rng.choice((7, 8, 9))
        w.add(frames, n, ns, kind=kind, tid=tid, thread=f"t{tid}", group="main" if tid == 7 else "worker")
        added.append((frames, n, ns, kind, tid))
    return w, added
