#!/usr/bin/env python3
"""Parse + analysis speed on a large synthetic profile (~100 MB by default).

Usage: python3 benchmarks/parse_bench.py [--mb 100] [--keep DIR]
Prints the file size, the parse time and the analysis time, each as wall-clock
time and as the process's CPU time (on a busy machine the wall-clock figure
grows, the CPU figure does not). Target: under 10 s together on a 2-core
machine for 100 MB.
"""

import argparse
import json
import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from cozprof import analysis, profile  # noqa: E402

LINES = [f"/home/user/project/src/module{m}/file{f}.c:{ln}"
         for m in range(5) for f in range(10) for ln in range(100, 120)]   # 1000 lines
POINTS = ["requests", "/home/user/project/src/server.c:88"]


def generate(path, target_bytes, seed=7):
    rng = random.Random(seed)
    written = 0
    run = 0
    with open(path, "w") as f:
        while written < target_bytes:
            run += 1
            recs = [{"type": "startup", "version": 1, "time_ns": 1763900000000000000 + run,
                     "pid": 1000 + run, "argv0": "/home/user/project/app", "mode": "causal",
                     "sample_period_ns": 1000000, "experiment_length_ns": 500000000,
                     "sampler": "perf_event", "binary_scope": ["MAIN"], "source_scope": ["%"],
                     "fixed_line": None, "fixed_speedup": None}]
            for i in range(2000):
                line = LINES[int(rng.paretovariate(1.2)) % len(LINES)]
                s = 0.0 if rng.random() < 0.4 else rng.randint(1, 20) * 0.05
                d = rng.randint(450_000_000, 520_000_000)
                k = max(1, int(rng.gauss(1000 * (1 + 0.3 * s), 40)))
                recs.append({"type": "experiment", "selected": line, "speedup": round(s, 2),
                             "duration_ns": d, "wall_ns": d + 1000, "delay_ns": 1000,
                             "selected_samples": rng.randint(0, 300), "partial": False,
                             "progress": [{"name": POINTS[0], "kind": "throughput", "delta": k},
                                          {"name": POINTS[1], "kind": "latency",
                                           "arrivals": k, "departures": k,
                                           "difference": rng.randint(1, 9)}]})
                if i % 10 == 0:
                    recs.append({"type": "samples",
                                 "counts": {ln: rng.randint(1, 500) for ln in
                                            rng.sample(LINES, 40)},
                                 "out_of_scope": rng.randint(0, 50)})
                    recs.append({"type": "runtime", "time_ns": (i + 1) * 500_000_000})
            recs.append({"type": "shutdown", "time_ns": 1, "reason": "exit", "samples": 1,
                         "lost_records": 0, "dropped_samples": 0, "experiments": 2000})
            chunk = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs)
            f.write(chunk)
            written += len(chunk)
    return written


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--keep", metavar="DIR", help="write the profile here and keep it")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(args.keep or tmp, "bench.coz")
        t0 = time.perf_counter()
        size = generate(path, int(args.mb * 1e6))
        t1, c1 = time.perf_counter(), time.process_time()
        prof = profile.load(path)
        t2, c2 = time.perf_counter(), time.process_time()
        result = analysis.analyze(prof)
        t3, c3 = time.perf_counter(), time.process_time()
    print(f"profile: {size / 1e6:.1f} MB, {len(prof.runs)} runs, "
          f"{len(prof.experiments)} experiments (generated in {t1 - t0:.1f} s)")
    print(f"parse:    {t2 - t1:.2f} s ({c2 - c1:.2f} s CPU)")
    print(f"analysis: {t3 - t2:.2f} s ({c3 - c2:.2f} s CPU; {len(result['lines'])} curves, "
          f"{len(result['omitted'])} left out, "
          f"{sum(ln['drift_corrected'] for ln in result['lines'])} drift-corrected)")
    print(f"total:    {t3 - t1:.2f} s ({c3 - c1:.2f} s CPU)")


if __name__ == "__main__":
    main()
