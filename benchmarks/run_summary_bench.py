#!/usr/bin/env python3
"""Time `coz run` spends after the program ends: reading what the run wrote,
printing each warning once and the summary line (python/cozprof/run_summary.py).

Usage: python3 benchmarks/run_summary_bench.py [--repeat 20]
Prints the median time of each case, and of importing the summary's code in a
fresh interpreter (done after the program ends, so it counts too).
Goal: under 10 ms for a typical profile (a few minutes of causal profiling).

Cases:
  real        tests/fixtures/profiles/real_pipeline.coz (benchmarks/pipeline under libcoz.so)
  typical     one run, 300 experiments of 0.5 s (2.5 min), samples records after each
  appended    the same appended to a file that already holds 20 such runs (only the tail is read)
  children    a root and 30 followed children (the make -j2 case), 20 experiments each
  large       one run, 20,000 experiments (hours of profiling, or a very short --experiment-length)
"""

import argparse
import io
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

from cozprof import run_summary  # noqa: E402

LINES = [f"/home/user/app/src/file{f}.c:{ln}" for f in range(8) for ln in range(40, 60)]


def run_records(rng, pid, experiments, warnings=()):
    recs = [{"type": "startup", "version": 1, "time_ns": 1763900000000000000, "pid": pid,
             "argv0": "/home/user/app/app", "mode": "causal", "sample_period_ns": 1000000,
             "experiment_length_ns": 500000000, "sampler": "perf_event", "binary_scope": ["MAIN"],
             "source_scope": ["%"], "fixed_line": None, "fixed_speedup": None}]
    recs += [{"type": "warning", "code": c, "message": m} for c, m in warnings]
    for _ in range(experiments):
        s = 0.0 if rng.random() < 0.4 else rng.randint(1, 20) * 0.05
        line = LINES[int(rng.paretovariate(1.2)) % len(LINES)]
        recs.append({"type": "experiment", "selected": line, "speedup": s, "duration_ns": 500000000,
                     "wall_ns": 510000000, "delay_ns": 10000000, "selected_samples": rng.randint(0, 300),
                     "partial": False, "progress": [{"name": "requests", "kind": "throughput",
                                                     "delta": rng.randint(900, 1100)}]})
        recs.append({"type": "samples", "counts": {ln: rng.randint(1, 200) for ln in rng.sample(LINES, 12)},
                     "out_of_scope": rng.randint(0, 20)})
        recs.append({"type": "runtime", "time_ns": 1})
    recs.append({"type": "shutdown", "time_ns": 1, "reason": "exit", "samples": 500 * experiments,
                 "lost_records": 0, "dropped_samples": 0, "experiments": experiments})
    return "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in recs)


def write(path, text, mode="w"):
    with open(path, mode) as f:
        f.write(text)


def prepare(root, case, rng):
    """(Outputs snapshot taken 'before the run', root pid) with the run's files written."""
    d = os.path.join(root, case)
    os.makedirs(d)
    main = os.path.join(d, "profile.coz")
    nodebug = [("no-debug-info", "/usr/bin/make has no debug information: rebuild it with -g")]
    if case == "real":
        outputs = run_summary.Outputs(main, follow_children=False)
        shutil.copy(os.path.join(HERE, "..", "tests", "fixtures", "profiles", "real_pipeline.coz"), main)
    elif case == "typical":
        outputs = run_summary.Outputs(main, follow_children=False)
        write(main, run_records(rng, 100, 300, nodebug))
    elif case == "appended":
        write(main, "".join(run_records(rng, 100 + i, 300) for i in range(20)))
        outputs = run_summary.Outputs(main, follow_children=False)
        write(main, run_records(rng, 200, 300, nodebug), "a")
    elif case == "children":
        outputs = run_summary.Outputs(main, follow_children=True)
        write(main, run_records(rng, 100, 20, nodebug))
        for i in range(30):
            warn = [("no-progress-point", "no progress point was reached"),
                    ("no-debug-info", f"/usr/lib/gcc/cc1 has no debug information ({i % 4})")]
            write(run_summary.child_name(main, 1000 + i), run_records(rng, 1000 + i, 20, warn))
    elif case == "large":
        outputs = run_summary.Outputs(main, follow_children=False)
        write(main, run_records(rng, 100, 20000, nodebug))
    written = sum(os.path.getsize(p) - offset for p, offset in outputs.written(100))
    return outputs, 100, written


def time_report(outputs, pid, repeat):
    """Median time of the whole report, and of the parser's part of it."""
    total, parse = [], []
    for _ in range(repeat):
        sink = io.StringIO()
        t0 = time.perf_counter()
        run_summary.print_report(outputs, pid, file=sink)
        total.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for path, offset in outputs.written(pid):
            run_summary.load_tail(path, offset)
        parse.append(time.perf_counter() - t0)
    return statistics.median(total), statistics.median(parse), sink.getvalue().splitlines()[-1]


def import_time(repeat, pycache):
    """Median time to import the parser in fresh interpreters: the launcher imported
    cozprof.run_summary (light) before the program; the parser (and json) is what
    the summary imports once the program has ended. `pycache`: a folder for the
    compiled .pyc files (None: compile every time, as with PYTHONDONTWRITEBYTECODE)."""
    env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "python"))
    if pycache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = pycache
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    code = ("import time, sys; from cozprof import run_summary; t = time.perf_counter(); "
            "from cozprof import profile; print(time.perf_counter() - t)")
    samples = [float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                    check=True).stdout) for _ in range(repeat + 1)]
    return statistics.median(samples[1:])  # the first run writes the .pyc files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(11)
    root = tempfile.mkdtemp(prefix="coz-summary-bench-")
    try:
        print("import of the profile parser after the program: "
              f"{import_time(args.repeat, os.path.join(root, 'pycache')) * 1e3:.1f} ms with .pyc files, "
              f"{import_time(args.repeat, None) * 1e3:.1f} ms compiling them")
        print(f"{'case':9s} {'written':>10s} {'report':>9s} {'parser':>9s}   last line")
        for case in ("real", "typical", "appended", "children", "large"):
            outputs, pid, size = prepare(root, case, rng)
            median, parse, last = time_report(outputs, pid, args.repeat)
            print(f"{case:9s} {size / 1e6:7.2f} MB {median * 1e3:6.1f} ms {parse * 1e3:6.1f} ms   {last[:80]}")
    finally:
        shutil.rmtree(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
