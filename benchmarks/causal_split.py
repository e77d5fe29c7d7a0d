#!/usr/bin/env python3
"""Where a program's causal slowdown goes: the delays of virtual speedup, or
the runtime's own cost. Runs a benchmark plainly and under `coz run`
(causal, defaults), interleaved, and for each pair prints the slowdown, the
global delay the experiments inserted (the sum of the experiment records'
`delay_ns`) as a share of the plain run, and the rest: the slowdown less that
share. Then the medians, and one JSON summary line.

The global delay is what virtual speedup adds by design (the paused threads'
time); it follows the speedups the experiments drew, so it varies from run to
run. The rest is the sampler's, the hooks' and the thread starts' cost, and
the part of the delay that did not lengthen the run (a thread paused while it
was not on the critical path).

Usage: causal_split.py [--build DIR] [--reps N] [PROGRAM [ARGS...]]
(default program: two_threads, from DIR/benchmarks or DIR; default DIR: build)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import benchlib  # noqa: E402


def timed(cmd, env=None):
    t0 = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if r.returncode != 0:
        sys.exit(f"causal_split.py: {' '.join(cmd)} failed: {r.stderr.strip()[-400:]}")
    return time.monotonic() - t0


def global_delay_s(path):
    total = 0
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if rec.get("type") == "experiment":
                total += rec.get("delay_ns", 0)
    return total / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("program", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    program = a.program or ["two_threads"]
    try:
        exe = benchlib.find_program([a.build], program[0])
    except benchlib.BenchError as e:
        sys.exit(f"causal_split.py: {e}")
    libcoz = benchlib.find_libcoz([a.build, *benchlib.default_build_dirs()])
    if not libcoz:
        sys.exit("causal_split.py: libcoz.so is not built: scripts/bootstrap.sh build")
    cmd = [exe, *program[1:]]
    env = benchlib.ours_env(libcoz)
    rows = []
    print(f"{'plain s':>8} {'causal s':>9} {'slowdown':>9} {'delay':>7} {'rest':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.coz")
        for _ in range(a.reps):
            plain = timed(cmd)
            if os.path.exists(out):
                os.remove(out)
            causal = timed([*benchlib.coz_command(), "run", "-o", out, "---", *cmd], env=env)
            delay = global_delay_s(out) / plain
            row = {"plain_s": plain, "causal_s": causal, "slowdown": causal / plain, "delay_share": delay,
                   "rest": causal / plain - 1 - delay}
            rows.append(row)
            print(f"{plain:8.2f} {causal:9.2f} {row['slowdown']:9.3f} {delay:7.1%} {row['rest']:+7.1%}")
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"medians: slowdown x{med['slowdown']:.3f}, delay {med['delay_share']:.1%} of the plain run, "
          f"rest {med['rest']:+.1%}")
    print(json.dumps({"summary": "causal_split", "program": program, "reps": a.reps, "medians": med,
                      "runs": rows}))


if __name__ == "__main__":
    main()
