#!/usr/bin/env python3
"""Speed of the conventional views and exports on a large synthetic profile.

Usage: python3 benchmarks/conventional_bench.py [--stacks 100000] [--keep DIR]

Writes a profile of N distinct stacks (100,000 by default: about 18 MB, more
than a long run of a program with many code paths writes), then times, each as wall-clock
and CPU time of a fresh `coz` process (Python start-up included):
`coz report --top`, `--top --by line`, `--list`, and each `coz export`.
Target (issue 14): `coz report --top` in a few seconds at most on a 2-core
machine. Prints one line per command.
"""

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
PYTHON = os.path.join(ROOT, "python")


def generate(path, nstacks, seed=3):
    """Stacks of 3-10 locations over 4,000 locations of 1,500 functions in 60
    files (a fifth with an inlined function), counts split over 4 flushes."""
    rng = random.Random(seed)
    nfuncs, nlocs = 1500, 4000
    funcs = [(f"ns::component{i % 40}::function_{i}", f"/home/user/project/src/file{i % 60}.cc")
             for i in range(nfuncs)]
    locations = []
    for lid in range(1, nlocs + 1):
        fn, file = funcs[rng.randrange(nfuncs)]
        lines = [{"function": fn, "file": file, "line": rng.randint(10, 900)}]
        if rng.random() < 0.2:
            ifn, ifile = funcs[rng.randrange(nfuncs)]
            lines.insert(0, {"function": ifn, "file": ifile, "line": rng.randint(10, 900)})
        address = 0x400000 + 16 * lid
        locations.append({"id": lid, "address": address, "object": "/home/user/project/app",
                          "object_offset": address - 0x400000, "build_id": "0123abcd",
                          "lines": lines})
    stacks, seen = [], set()
    while len(stacks) < nstacks:
        locs = tuple(rng.randint(1, nlocs) for _ in range(rng.randint(3, 10)))
        kind = "cpu" if rng.random() < 0.8 else rng.choice(("io", "lock", "sleep", "sync"))
        tid = 1000 + rng.randrange(16)
        if (locs, kind, tid) in seen:
            continue
        seen.add((locs, kind, tid))
        stacks.append({"id": len(stacks) + 1, "locations": list(locs), "kind": kind, "tid": tid,
                       "thread": f"worker-{tid}", "group": "main" if tid == 1000 else "worker"})
    with open(path, "w") as f:
        f.write(json.dumps({"type": "startup", "version": 1, "time_ns": 1763900000000000000,
                            "pid": 1000, "argv0": "/home/user/project/app", "build_id": "0123abcd",
                            "mode": "sampling-only", "sample_period_ns": 1000000,
                            "experiment_length_ns": 500000000, "sampler": "perf_event",
                            "binary_scope": ["MAIN"], "source_scope": ["%"], "fixed_line": None,
                            "fixed_speedup": None}) + "\n")
        f.write(json.dumps({"type": "locations", "locations": locations}) + "\n")
        for i in range(0, len(stacks), 10000):      # definitions arrive in batches
            f.write(json.dumps({"type": "stacks", "stacks": stacks[i:i + 10000]}) + "\n")
        for _ in range(4):
            counts = [[s["id"], n, n * 1000000] for s in stacks
                      if rng.random() < 0.3 for n in (rng.randint(1, 20),)]
            f.write(json.dumps({"type": "stack_counts", "counts": counts}) + "\n")
        f.write(json.dumps({"type": "shutdown", "time_ns": 1763900100000000000, "reason": "exit",
                            "samples": 0, "lost_records": 0, "dropped_samples": 0,
                            "experiments": 0}) + "\n")


def timed(argv):
    env = dict(os.environ, PYTHONPATH=PYTHON + os.pathsep + os.environ.get("PYTHONPATH", ""))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "cozprof", *argv], env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        sys.exit(f"coz {' '.join(argv)} failed: {r.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stacks", type=int, default=100000)
    ap.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    args = ap.parse_args()
    d = args.keep or tempfile.mkdtemp(prefix="coz-conv-bench-")
    os.makedirs(d, exist_ok=True)
    prof = os.path.join(d, "big.coz")
    generate(prof, args.stacks)
    print(f"profile: {args.stacks} distinct stacks, {os.path.getsize(prof) / 1e6:.1f} MB")
    commands = [
        ("report --top", ["report", "--top", prof]),
        ("report --top --by line --kind all", ["report", "--top", "--by", "line", "--kind", "all", prof]),
        ("report --list component3::", ["report", "--list", "component3::", prof]),
        ("export --pprof", ["export", prof, "--pprof", os.path.join(d, "big.pb.gz")]),
        ("export --folded", ["export", prof, "--folded", os.path.join(d, "big.folded")]),
        ("export --speedscope", ["export", prof, "--speedscope", os.path.join(d, "big.json")]),
    ]
    for label, argv in commands:
        wall, cpu = timed(argv)
        print(f"coz {label:38s} {wall:6.2f} s wall  {cpu:6.2f} s CPU")
    if args.keep:
        print(f"files kept in {d}")
    else:
        for name in os.listdir(d):
            os.unlink(os.path.join(d, name))
        os.rmdir(d)


if __name__ == "__main__":
    main()
