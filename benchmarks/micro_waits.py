#!/usr/bin/env python3
"""What the runtime adds to calls that no experiment selects: an uncontended
mutex lock/unlock pair (issue 13's target: under 60 ns) and a blocking call
that does not block, read(2) of one byte from /dev/zero (issue 11's: under
150 ns). Runs build/benchmarks/micro_waits plainly and under `coz run`
(causal, and --locks-only), interleaved, and prints the medians and the
differences in nanoseconds, then one JSON summary line.

Usage: micro_waits.py [--build DIR] [--reps N]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if r.returncode != 0:
        sys.exit(f"micro_waits.py: {' '.join(cmd)} failed: {r.stderr.strip()[-400:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    exe = os.path.join(a.build, "benchmarks", "micro_waits")
    env = dict(os.environ, COZ_LIBRARY=os.path.join(a.build, "libcoz", "libcoz.so"),
               PYTHONPATH=os.path.join(REPO, "python"))
    modes = {"plain": [], "causal": ["--experiment-length", "50ms"], "locks-only": ["--locks-only"]}
    results = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(a.reps):
            for mode, opts in modes.items():
                if mode == "plain":
                    results[mode].append(run([exe]))
                else:
                    out = os.path.join(tmp, "p.coz")
                    results[mode].append(run([sys.executable, "-m", "cozprof", "run", "-o", out, *opts, "---", exe],
                                             env=env))
    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("lock_unlock_ns", "read_ns")}
           for m, rs in results.items()}
    print(f"{'mode':12} {'lock+unlock ns':>15} {'read ns':>10}")
    for m in modes:
        print(f"{m:12} {med[m]['lock_unlock_ns']:15.1f} {med[m]['read_ns']:10.1f}")
    added = {m: {k: med[m][k] - med["plain"][k] for k in med[m]} for m in modes if m != "plain"}
    for m, d in added.items():
        print(f"added under {m}: lock+unlock {d['lock_unlock_ns']:+.1f} ns (target < 60), "
              f"read {d['read_ns']:+.1f} ns (target < 150)")
    print(json.dumps({"summary": "micro_waits", "medians": med, "added": added, "reps": a.reps}))


if __name__ == "__main__":
    main()
