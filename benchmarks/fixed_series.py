#!/usr/bin/env python3
"""A fixed-speedup series of one line, with where each thread's time went.

The measurement behind most of docs/analysis.md's "More threads than cores":
for each speedup s, the program really changed (its parameter PARAM lowered
by s) and the program profiled with `coz run --fixed-line LINE
--fixed-speedup s`, all interleaved, REPS rounds. It prints

- the real program speedup at each s, 1 - T(s) / T(0), T the median of the
  program's own elapsed_s;
- each build's prediction at each s, one per profiled run: 1 - r0 / eff,
  r0 the 0% runs' median progress per second of wall time, eff a run's
  progress per second of wall time less the delay inserted (its whole
  experiments pooled: no curve, no phase correction);
- per build, each thread group's time at the highest s (the last round's
  run) and at 0%: the program's CPU time, waiting for a CPU, blocked, the
  profiler's pauses (of it, the CPU time held) and the delay credited for
  sitting preempted, in seconds.

The last line is a JSON summary.

Usage: fixed_series.py [--build DIR] [--speedups 0,25,50,75] [--reps 2]
                       [--also NAME=LIBCOZ] [--point NAME]
                       PROGRAM KEY PARAM=VALUE [ARG...]
  e.g. fixed_series.py over_pipeline STAGE3 s3=200000 items=8000
PROGRAM: a benchmark of benchmarks/; KEY: its line marked KEY:<KEY>; ARG:
the program's other arguments, in every run.
"""

import argparse
import json
import os
import sys

import benchlib

EXPERIMENT_LENGTH = "100ms"


def rates(path, point):
    """(progress per second of wall time, per second of wall time less delay,
    delay over wall time, [(thread record, its breakdown)]) of a profile of
    one run, its whole experiments pooled."""
    from cozprof import analysis, profile

    prof = profile.load([path])
    run = prof.runs[-1]
    exps = [e for e in run.experiments if not e.partial]
    if point is None:
        point = next((p.name for e in exps for p in e.progress if p.kind == "throughput"), None)
    progress = sum(p.delta for e in exps for p in e.progress if p.name == point)
    wall = sum(e.wall_ns for e in exps)
    delay = sum(e.delay_ns for e in exps)
    if not wall or wall <= delay:
        raise benchlib.BenchError(f"{path}: no usable experiment (wall {wall} ns, delay {delay} ns)")
    # thread_breakdown reads every run of the profile, in order: this one only.
    threads = list(zip(run.threads, analysis.thread_breakdown(prof)))
    return progress / wall * 1e9, progress / (wall - delay) * 1e9, delay / wall, threads


def thread_rows(threads):
    """Per thread group: the program's CPU, sched, blocked, paused, held CPU and
    credited, in seconds (docs/profile-format.md, `thread`), from rates()'
    (record, breakdown) pairs."""
    rows = {}
    for t, b in threads:
        g = rows.setdefault(b["group"] or "?", [0.0] * 6)
        waits = b["wait_ns"]
        blocked = sum(v for k, v in waits.items() if k != "sched")
        for i, v in enumerate((b["cpu_ns"], waits["sched"], blocked, b["paused_ns"],
                               t.get("paused_cpu_ns", 0), t.get("preempt_credited_ns", 0))):
            g[i] += v / 1e9
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", action="append", default=None,
                    help="build directory with libcoz/libcoz.so and the benchmarks (default: the usual ones)")
    ap.add_argument("--speedups", default="0,25,50,75", help="percentages, 0 included (default 0,25,50,75)")
    ap.add_argument("--reps", type=int, default=2, help="rounds (default 2)")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=LIBCOZ",
                    help="also profile with this libcoz.so, named NAME (repeatable)")
    ap.add_argument("--point", default=None, help="throughput progress point (default: the first in the profile)")
    ap.add_argument("program")
    ap.add_argument("key")
    ap.add_argument("param", metavar="PARAM=VALUE")
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    try:
        speedups = sorted({int(x) for x in a.speedups.split(",")})
    except ValueError:
        ap.error(f"--speedups {a.speedups!r}: comma-separated whole percentages")
    if speedups[0] != 0 or speedups[-1] > 100 or len(speedups) < 2:
        ap.error("--speedups: 0 and at least one more, none above 100")
    if a.reps < 1:
        ap.error("--reps: at least 1")
    name, _, value = a.param.partition("=")
    if not name or not value.isdigit():
        ap.error(f"{a.param!r}: PARAM=VALUE, VALUE a whole number")
    builds = a.build or benchlib.default_build_dirs()
    try:
        exe = benchlib.find_program(builds, a.program)
        line = benchlib.key_line(a.program, a.key)
    except benchlib.BenchError as e:
        ap.error(str(e))
    libs = {"ours": benchlib.find_libcoz(builds)}
    if not libs["ours"]:
        ap.error("libcoz.so is not built (scripts/bootstrap.sh build)")
    libs.update(benchlib.parse_also(ap, a.also))
    point = a.point  # None: each profile's first throughput point

    work = benchlib.tempdir("coz-fixed-series-")
    real = {s: [] for s in speedups}
    runs = {(b, s): [] for b in libs for s in speedups}
    print(f"# machine: {benchlib.machine_description()}; load average at start {benchlib.load_average()}")
    print(f"# {a.program} {' '.join(a.args)}: line {line}, {name}={value} lowered by s for the real runs; "
          f"coz run --fixed-line --fixed-speedup s --experiment-length {EXPERIMENT_LENGTH}; "
          f"{a.reps} round(s), interleaved; progress point {point or 'the first'}")
    try:
        for _ in range(a.reps):
            for s in speedups:
                lowered = int(int(value) * (100 - s) / 100)
                real[s].append(benchlib.run_plain([exe, f"{name}={lowered}", *a.args])["elapsed_s"])
                for b, lib in libs.items():
                    out = os.path.join(work, f"{b}.{s}.coz")
                    benchlib.run_ours([exe, f"{name}={value}", *a.args], lib, out, fixed_line=line,
                                      fixed_speedup=s, extra=["--experiment-length", EXPERIMENT_LENGTH])
                    runs[(b, s)].append(rates(out, point))
    except benchlib.BenchError as e:
        print(f"fixed_series.py: {e}", file=sys.stderr)
        benchlib.cleanup(work)
        return 1
    benchlib.cleanup(work)

    t0 = benchlib.median(real[0])
    summary = {"summary": "fixed_series", "program": a.program, "line": line, "speedups": speedups,
               "real": {}, "predicted": {b: {} for b in libs}}
    print(f"{'s%':>4} {'real%':>7}  " + "  ".join(f"{b + ' predicted%':>22}" for b in libs))
    for s in speedups:
        summary["real"][s] = 1 - benchlib.median(real[s]) / t0
        cells = []
        for b in libs:
            r0 = benchlib.median([r[0] for r in runs[(b, 0)]])
            pred = [1 - r0 / r[1] for r in runs[(b, s)]]
            summary["predicted"][b][s] = pred
            cells.append(", ".join(f"{p * 100:.1f}" for p in pred).rjust(22))
        print(f"{s:>4} {summary['real'][s] * 100:>7.1f}  " + "  ".join(cells))
    top = speedups[-1]
    for b in libs:
        for s in (0, top):
            print(f"# {b} at {s}%: delay / wall {runs[(b, s)][-1][2]:.3f}; seconds per thread group:")
            print(f"#   {'group':<16} {'cpu':>6} {'sched':>6} {'blocked':>7} {'paused':>6} {'held':>6} {'credit':>6}")
            for g, v in thread_rows(runs[(b, s)][-1][3]).items():
                print(f"#   {g:<16} " + " ".join(f"{x:>{w}.2f}" for x, w in zip(v, (6, 6, 7, 6, 6, 6))))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
