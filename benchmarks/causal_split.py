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
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import benchlib  # noqa: E402
from cozprof import profile  # noqa: E402  (benchlib puts the checkout's package on the path)


def global_delay_s(path):
    """The delay the experiments of the profile at `path` inserted, in seconds."""
    return sum(e.delay_ns or 0 for e in profile.load([path]).experiments) / 1e9


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
    rows = []
    print(f"{'plain s':>8} {'causal s':>9} {'slowdown':>9} {'delay':>7} {'rest':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "p.coz")
        for _ in range(a.reps):
            try:
                plain = benchlib.run_plain(cmd)["wall_s"]
                causal = benchlib.run_ours(cmd, libcoz, out)["wall_s"]
            except benchlib.BenchError as e:
                sys.exit(f"causal_split.py: {e}")
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
