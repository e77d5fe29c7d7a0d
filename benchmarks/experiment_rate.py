#!/usr/bin/env python3
"""Usable experiments per minute, ours against upstream COZ (issue 15, point 2).

For each CPU benchmark program (the programs of accuracy.py's `cpu` and
`over` groups), in natural mode (lines chosen by the profiler: no
--fixed-line, no --fixed-speedup):

  1. run it under our `coz run` and under upstream COZ (/usr/bin/coz, on the
     NAME_upstream binary), one after the other, the order alternating from
     program to program, each with far more work than it can finish, and stop
     each after the same wall time (--seconds) with SIGINT to its process
     group: both runtimes have written every finished experiment by then
     (ours writes its final records on SIGINT; upstream writes each
     experiment as it ends), and the experiment cut short is left out;
  2. read both profiles with the project's one parser and count the usable
     experiments: those that enter a causal curve, by the analysis' rule
     (`cozprof.run_summary.curves`, what `coz run` prints), of which sped
     up (speedup > 0), and their rate per minute of the run's wall time;
  3. analyse both with `cozprof.analysis.analyze` and report the median
     width of the slope's 95% interval over the top lines: the lines that
     have a curve in both profiles, the 3 with the most usable experiments
     (summed over both); without a common line, each profile's own 3 best
     by impact (noted "own").

Also printed per profiler: the median experiment length (wall time; for
upstream, whose records hold no wall time, the effective duration, a lower
bound) and the share of usable experiments at speedup 0.

With --reps N the whole series runs N times (rounds; the order of the
profilers alternating with the round too), and each program's figures are
the medians over its rounds: usable experiments per minute and median slope
interval width, ours over upstream's as ratios, each with a 95% bootstrap
interval over the rounds (benchlib.bootstrap; N >= 3). Issue 15's two
targets are decided by them: `rate` (at least as many usable experiments
per minute as upstream on every program) is missed when some program's
rate ratio interval lies wholly under 1, met when every one lies at or
above 1; `width` (intervals no wider) is missed when some program's width
ratio interval lies wholly above 1, met when every one lies at or under 1;
anything else is `not resolved`, naming the programs more rounds would
decide. One pair of runs moves a width by a third on these VMs: with one
round (the default) the points decide, and a different program read
"wider" in each invocation.

Prints a table (a row per run), then the ratios and the verdicts, then a
JSON summary line {"summary": "experiment_rate", ...} with the runs per
program and round, the medians, ratios and intervals, the targets, and the
programs where ours' medians had fewer usable experiments per minute or a
wider median interval than upstream's ("behind"). Exit status 1 when a
profiled run fails (no readable profile).

Usage: experiment_rate.py [--short] [--seconds S] [--reps N] [--only NAME[,NAME]]
                          [--ours-only | --upstream-only] [--build DIR]
                          [--keep-profiles DIR] [--also NAME=LIBCOZ]
                          [--args "NAME=VALUE ..."]

--also runs one more profiler, our `coz run` with another libcoz.so (e.g. a
build of an earlier commit), named NAME in the table, after ours: for
before/after comparisons in one invocation, interleaved. --args adds
arguments to every program (e.g. `--only serial_chain --args "a=49000000
b=24500000"`: iterations of ~0.15 s, rare progress as in issue 15's
compressor).
"""

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from accuracy import WORK  # noqa: E402
from benchlib import BenchError  # noqa: E402

PROGRAMS = ["two_threads", "serial_chain", "prodcons", "pipeline", "spin_barrier", "hash_table",
            "latency", "over_barrier", "over_pipeline", "over_pool"]
SHORT_PROGRAMS = ["serial_chain", "over_pool"]
SECONDS = 45.0          # the issue's profiles lasted 45 s
SHORT_SECONDS = 10.0
WORK_FACTOR = 200       # times the default work: more than any run finishes in SECONDS
TOP_LINES = 3
STOP_GRACE_S = 20.0     # after SIGINT, how long a run may take to write its last records


def timed_run(cmd, env, cwd, seconds):
    """Run `cmd` in its own process group; SIGINT the group after `seconds`.
    Returns the wall time until it ended."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        _, err = p.communicate(timeout=seconds)
        ended = "by itself"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGINT)
        try:
            _, err = p.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
            raise BenchError(f"{' '.join(cmd[:6])}...: did not end {STOP_GRACE_S} s after SIGINT")
        ended = "stopped"
    return time.monotonic() - t0, ended, err


def figures(path, wall_s):
    from cozprof import analysis, profile, run_summary

    prof = profile.load([path])
    found = run_summary.curves(prof.runs)
    usable, sped_up = run_summary.usable_experiments_of(found)
    exps = [e for r in prof.runs for e in r.experiments]
    lengths = [(e.wall_ns if e.wall_ns is not None else e.duration_ns) / 1e9 for e in exps if not e.partial]
    per_line = {key: len(v) for key, v in found.items()}
    lines = {(ln["unit"], ln["line"], ln["progress_point"]): ln for ln in analysis.analyze(prof)["lines"]}
    return {"wall_s": wall_s, "experiments": len(exps), "usable": usable, "sped_up": sped_up,
            "per_minute": 60.0 * usable / wall_s, "sped_up_per_minute": 60.0 * sped_up / wall_s,
            "median_length_s": statistics.median(lengths) if lengths else None,
            "length_is_wall": all(e.wall_ns is not None for e in exps),
            "zero_share": (usable - sped_up) / usable if usable else None,
            "_curves": per_line, "_lines": lines}


def slope_widths(ours, upstream):
    """{who: (median slope interval width over the top lines, how many of them were
    drift-corrected, how many)}, and how the lines were chosen."""
    have = {who: f for who, f in (("ours", ours), ("upstream", upstream)) if f is not None}
    common = set.intersection(*(set(f["_lines"]) for f in have.values())) if have else set()
    if common and len(have) == 2:
        top = sorted(common, key=lambda k: -sum(f["_curves"].get(k, 0) for f in have.values()))[:TOP_LINES]
        return {who: _median_width([f["_lines"][k] for k in top]) for who, f in have.items()}, "common"
    return {who: _median_width(sorted(f["_lines"].values(), key=lambda ln: -ln["impact"])[:TOP_LINES])
            for who, f in have.items()}, "own"


def _median_width(lines):
    if not lines:
        return None, 0, 0
    return statistics.median(_width(ln) for ln in lines), sum(ln["drift_corrected"] for ln in lines), len(lines)


def _width(line):
    lo, hi = line["slope_ci"]
    return hi - lo


def median_of(rounds, who, key):
    """Median over rounds of who's figure `key` (rounds: [{who: figures}]);
    None where no round has it."""
    return benchlib.median([r[who][key] for r in rounds if r.get(who) and r[who].get(key) is not None])


def ratio(rounds, key):
    """Ours' median of `key` over upstream's, over the same rounds."""
    o, u = median_of(rounds, "ours", key), median_of(rounds, "upstream", key)
    return o / u if o is not None and u else None


def ratio_interval(rounds, key):
    """95% bootstrap interval of ratio(rounds, key), the rounds resampled
    whole (a round's two runs stay together); None under 3 rounds."""
    return benchlib.bootstrap_rounds(rounds, lambda rs: ratio(rs, key))


def decide(per_program, want_above):
    """A target over programs' ratios ({program: {"ratio", "interval"}}):
    want_above (rate: ours' ratio >= 1) or not (width: <= 1). Missed when
    some interval lies wholly on the wrong side of 1, met when every one
    lies on the right side, else not resolved; a program without an interval
    decides by its point, one without a ratio (a profiler without figures
    there) leaves the target not resolved."""
    wrong, across, verdict = benchlib.judge(
        [(p, f["ratio"], f.get("interval")) for p, f in per_program.items() if f.get("ratio") is not None],
        1.0, upper=not want_above)
    across += [p for p, f in per_program.items() if f.get("ratio") is None]
    if across and verdict == "met":
        verdict = "not resolved"
    return {"verdict": verdict, "wrong_side": wrong, "across": across}


def profile_one(program, who, build_dirs, libcoz, seconds, workdir, others, extra, tag=""):
    name, normal, _ = WORK[program]
    args = [f"{name}={normal * WORK_FACTOR}", *extra]
    output = os.path.join(workdir, f"{program}.{who}{tag}.coz")
    if os.path.exists(output):
        os.unlink(output)
    if who != "upstream":
        binary = benchlib.find_program(build_dirs, program)
        cmd = [sys.executable, "-m", "cozprof", "run", "-o", output, "---", binary, *args]
        env = benchlib.ours_env(others.get(who, libcoz))
    else:
        binary = benchlib.find_program(build_dirs, program + "_upstream")
        cmd = [benchlib.UPSTREAM_COZ, "run", "-o", output, "---", binary, *args]
        env = None
    wall, ended, err = timed_run(cmd, env, workdir, seconds)
    benchlib.check_profile(output, f"{who} on {program}", complete=(who != "upstream"))
    f = figures(output, wall)
    f["ended"] = ended
    if who != "upstream":
        note = [ln for ln in err.splitlines() if ln.startswith("coz: note: ")]
        f["note"] = note[-1] if note else None
    return f


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main():
    # Started with SIGINT ignored (a background job of a script), the runs
    # would inherit that, and upstream's would not stop at the SIGINT that
    # ends them (ours neither: the program keeps the disposition it had).
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--short", action="store_true",
                    help=f"{', '.join(SHORT_PROGRAMS)} for {SHORT_SECONDS:g} s each (smoke test)")
    ap.add_argument("--seconds", type=float, help=f"wall time of each profiled run (default {SECONDS:g})")
    ap.add_argument("--reps", type=int, default=1,
                    help="rounds of the whole series; 3 or more give each ratio an interval (default 1)")
    ap.add_argument("--only", help="comma-separated program names")
    who = ap.add_mutually_exclusive_group()
    who.add_argument("--ours-only", action="store_true")
    who.add_argument("--upstream-only", action="store_true")
    ap.add_argument("--build", action="append", help="build directory (repeatable)")
    ap.add_argument("--keep-profiles", help="directory to keep the profiles in")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=LIBCOZ",
                    help="also run our coz run with this libcoz.so, named NAME (repeatable)")
    ap.add_argument("--args", default="", help="arguments added to every program's command line")
    opts = ap.parse_args()
    others = benchlib.parse_also(ap, opts.also)

    build_dirs = opts.build or benchlib.default_build_dirs()
    seconds = opts.seconds or (SHORT_SECONDS if opts.short else SECONDS)
    programs = SHORT_PROGRAMS if opts.short else PROGRAMS
    if opts.only:
        programs = [p.strip() for p in opts.only.split(",") if p.strip()]
        unknown = [p for p in programs if p not in WORK]
        if unknown:
            ap.error(f"unknown program(s) {', '.join(unknown)}; known: {', '.join(PROGRAMS)}")
    libcoz, use_ours, use_upstream, skipped = benchlib.profilers(
        build_dirs, not opts.upstream_only, not opts.ours_only, "experiment_rate.py")
    workdir = opts.keep_profiles or benchlib.tempdir("coz-rate-")
    os.makedirs(workdir, exist_ok=True)

    print(f"# machine: {benchlib.machine_description()}; load average at start {benchlib.load_average()}")
    print(f"# each run: {seconds:g} s of wall time, natural mode (no --fixed-line), stopped with SIGINT; "
          f"work x{WORK_FACTOR}" + (f"; arguments added: {opts.args}" if opts.args else ""))
    print("# usable: experiments in a causal curve (the analysis' rule); width: median 95% slope "
          f"interval over the top {TOP_LINES} lines (common to both, or each profile's own)")
    print(f"{'program':<14} {'who':<9} {'round':>5} {'exps':>5} {'usable':>6} {'sped':>5} {'/min':>6} "
          f"{'sped/min':>8} {'0% share':>8} {'len s':>6} {'width':>6} {'drift':>5}  lines")
    runs = {program: [] for program in programs}  # per program, a {who: figures} per round
    failures = []
    for k in range(opts.reps):
        for i, program in enumerate(programs):
            ours_side = ["ours", *others] if use_ours else list(others)
            order = ours_side + ["upstream"] if (i + k) % 2 == 0 else ["upstream"] + ours_side
            got = {}
            for w in order:
                if w == "upstream" and not use_upstream:
                    continue
                try:
                    got[w] = profile_one(program, w, build_dirs, libcoz, seconds, workdir, others,
                                         opts.args.split(), f".r{k + 1}" if opts.reps > 1 else "")
                except (BenchError, OSError) as e:
                    failures.append(f"{w} on {program}: {e}")
                    print(f"# {w} on {program} failed: {e}", file=sys.stderr)
            widths, chosen = slope_widths(got.get("ours"), got.get("upstream"))
            chosen = {"ours": chosen, "upstream": chosen}
            for name in others:
                if name in got:  # its top lines: those it shares with upstream
                    w, chosen[name] = slope_widths(got[name], got.get("upstream"))
                    widths[name] = w.get("ours", (None, 0, 0))
            kept = {}
            for w in ("ours", *others, "upstream"):
                f = got.get(w)
                if f is None:
                    continue
                f["width"], f["drift_corrected"], f["top_lines"] = widths.get(w, (None, 0, 0))
                f["width_lines"] = chosen[w]
                length = fmt(f["median_length_s"], ".2f") + ("" if f["length_is_wall"] else "*")
                print(f"{program:<14} {w:<9} {k + 1:>5} {f['experiments']:>5} {f['usable']:>6} {f['sped_up']:>5} "
                      f"{f['per_minute']:>6.1f} {f['sped_up_per_minute']:>8.1f} {fmt(f['zero_share'], '.2f'):>8} "
                      f"{length:>6} {fmt(f['width'], '.3f'):>6} {f['drift_corrected']:>3}/{f['top_lines']}  "
                      f"{len(f['_lines'])} {chosen[w]}")
                kept[w] = {k2: v for k2, v in f.items() if not k2.startswith("_")}
            runs[program].append(kept)
            sys.stdout.flush()
    print("# len s: median experiment length, wall time (* upstream: effective duration, its records "
          "hold no wall time); drift: top lines whose baselines showed drift (local baselines: wider, "
          "honest intervals); lines: curves, and which top lines")

    results, behind = {}, []
    rate, width = {}, {}
    for program, rounds in runs.items():
        results[program] = {"runs": rounds, "median": {
            w: {"per_minute": median_of(rounds, w, "per_minute"), "width": median_of(rounds, w, "width")}
            for w in ("ours", *others, "upstream") if any(r.get(w) for r in rounds)}}
        if not use_ours or not use_upstream:
            continue
        rate[program] = {"ratio": ratio(rounds, "per_minute"), "interval": ratio_interval(rounds, "per_minute")}
        width[program] = {"ratio": ratio(rounds, "width"), "interval": ratio_interval(rounds, "width")}
        results[program].update({"rate_ratio": rate[program]["ratio"], "rate_interval": rate[program]["interval"],
                                 "width_ratio": width[program]["ratio"],
                                 "width_interval": width[program]["interval"]})
        r, w = rate[program]["ratio"], width[program]["ratio"]
        slower, wider = r is not None and r < 1.0, w is not None and w > 1.0
        if slower or wider:
            behind.append(program + (" (rate)" if slower else "") + (" (width)" if wider else ""))
    targets = {}
    if rate:
        def iv(x):
            return "" if x is None else f" ({benchlib.INTERVAL_LEVEL:.0%} interval {x[0]:.2f} to {x[1]:.2f})"
        print(f"# ours / upstream over {opts.reps} round(s), medians:")
        for program in rate:
            print(f"#   {program:<14} usable/min x{fmt(rate[program]['ratio'], '.2f')}"
                  f"{iv(rate[program]['interval'])}; width x{fmt(width[program]['ratio'], '.2f')}"
                  f"{iv(width[program]['interval'])}")
        targets = {"rate": decide(rate, True), "width": decide(width, False)}
        for name, what in (("rate", "usable experiments per minute >= upstream's"),
                           ("width", "median slope interval width <= upstream's")):
            t = targets[name]
            detail = "; ".join(x for x in (
                ("wrong side: " + ", ".join(t["wrong_side"])) if t["wrong_side"] else "",
                ("intervals across 1: " + ", ".join(t["across"])) if t["across"] else "") if x)
            by = "" if opts.reps >= 3 else " (by the points: --reps 3 or more give intervals)"
            print(f"# target {what} on every program: {t['verdict']}{by}" + (f" ({detail})" if detail else ""))
    print(f"# load average at end {benchlib.load_average()}")
    if behind:
        print(f"# ours behind upstream on (medians): {', '.join(behind)}")
    print(json.dumps({"summary": "experiment_rate", "seconds": seconds, "reps": opts.reps,
                      "interval_level": benchlib.INTERVAL_LEVEL, "programs": results, "targets": targets,
                      "behind": behind, "failures": failures, "skipped": skipped}))
    if not opts.keep_profiles:
        benchlib.cleanup(workdir)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
