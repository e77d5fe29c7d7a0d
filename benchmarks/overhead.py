#!/usr/bin/env python3
"""Profiling overhead of ours and upstream COZ, in one invocation: slowdowns,
the lock counters' cost, the launcher's start and exit, start-up on large
debug info.

1. Slowdown: each benchmark (default arguments, or --short ones) is run
   plain, under our `coz run --sampling-only` (the conventional profile: no
   experiments, no delays), under our full causal profiling, and under
   upstream COZ (`/usr/bin/coz run` on the NAME_upstream binary, full causal
   profiling), and under `perf record` sampling the same clock at our
   period with callchains (the reference: what per-thread perf_event
   sampling costs on this machine; --no-perf leaves it out), interleaved.
   --also NAME=LIBCOZ adds `coz run --sampling-only` with another build's
   libcoz.so (mode NAME_sampling): before and after in one invocation; part
   3 runs it too (modes NAME_sampling and NAME_sampling_cold).
   --also-causal NAME=LIBCOZ adds full causal profiling with another
   build's libcoz.so (mode NAME_causal), interleaved with the others.
   Prints the median wall time of each mode, its
   slowdown (the median over rounds of its run's time over plain's run of
   the same round: paired, so that a phase of the host's speed cancels)
   and, for full causal profiling, ours' excess over upstream's:
   (ours - 1) / (upstream - 1). The in-program table pairs the same way.
   Each slowdown and excess also gets a 95% bootstrap interval over the
   rounds (INTERVAL_LEVEL, in the JSON summary), which decides the targets.
2. Lock counters: each lock-heavy program (benchmarks/locks_*.c) plain,
   under `coz run --locks-only`, and under `--locks-only --no-lock-counters`
   (the same run without the synchronization counters), --lock-reps rounds
   (default 9), the two profiled runs swapping places every other round. The
   counters' cost is the median over rounds of the locks-only run's wall time
   over the one without counters, minus 1 (paired: a round's runs are
   adjacent, so a phase of the host's speed cancels in the pair); the ratio
   of the two modes' medians is printed beside it.
3. Launcher: a tiny generated program whose main() prints the time it was
   entered and returns TINY_STAY_MS later, plain, under `coz run --sampling-only`, under full
   causal profiling and under upstream, --launch-reps times each
   (interleaved). Time to main (from the spawn) and total wall time;
   launcher cost = time to main minus plain's, exit cost = (total - time to
   main) minus plain's, from the medians. `--sampling-only` and upstream
   also start cold (modes *_cold: COLD_GAP_S without a perf event first,
   as a user's first run does); the targets read the worse of warm and
   cold. --launch-baseline DIR adds `coz run --sampling-only` with
   another checkout's cozprof package (modes baseline_sampling and
   baseline_sampling_cold), to compare two launchers in one run.
4. Start-up: a generated C program of about 200,000 lines (many small
   functions, built with -g, and -gdwarf-3 -gstrict-dwarf for upstream)
   whose main() prints the time it was entered and returns. Prints time to
   main and total wall time plain, under ours (full causal) and under
   upstream.

Then the issues' targets, each with its figure: sampling-only slowdown at
most x1.02 on the CPU-bound programs and ours' causal excess at most half of
upstream's on every program (issue 14), the lock counters at most 3% (issue
13), the launcher under 25 ms and the exit under 10 ms (issue 14). The
slowdowns' verdict is the intervals': missed when a program's lies wholly
above the target, met when all lie at or under it, else not resolved at
this many rounds.

The last line is a JSON summary: {"summary": "overhead", ...}. Every run
that failed (any mode of any part) is listed in its "failures"; with
--short (the smoke test) any failure makes the exit status 1.

Usage: overhead.py [--short] [--only NAME] [--ours-only | --upstream-only]
                   [--build DIR] [--reps N] [--lock-reps N] [--launch-reps N]
                   [--startup-lines N] [--no-slowdown] [--no-locks]
                   [--no-launch] [--no-startup] [--launch-baseline DIR]
                   [--also NAME=LIBCOZ] [--no-perf]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import BenchError  # noqa: E402

PROGRAMS = ["two_threads", "serial_chain", "prodcons", "pipeline", "spin_barrier",
            "hash_table", "latency", "io_sleep"]
NOT_CPU_BOUND = {"io_sleep"}  # sleeps most of its time: outside the sampling-only target
LOCK_PROGRAMS = ["locks_granularity", "locks_oversync", "locks_asymmetric", "locks_primitive",
                 "locks_rare", "locks_imbalance"]
LINES_PER_FUNCTION = 12
FILES = 8

# The issues' targets (13 and 14).
SAMPLING_SLOWDOWN_MAX = 1.02       # sampling-only, on every CPU-bound program
CAUSAL_EXCESS_VS_UPSTREAM_MAX = 0.5  # ours' (slowdown - 1) over upstream's, on every program
LOCK_COUNTERS_COST_MAX = 0.03      # locks-only beside locks-only without counters
LAUNCHER_MAX_S = 0.025             # time to main added by `coz run --sampling-only`
EXIT_MAX_S = 0.010                 # time after main added by it

# The reference beside sampling-only: Linux perf sampling the same clock at
# sampling-only's default period (10 ms of each thread's CPU time; 1 ms until
# 2026-11-26), user space only as ours, with frame-pointer callchains (-g:
# perf's cheapest way to keep stacks). It shows what perf_event sampling costs
# on the machine at hand, whoever reads the samples.
PERF_RECORD_PERIOD_NS = 10000000


def rounds_of(program, modes, reps, order=None):
    """Runs every mode `reps` times, in rounds of one run of each, so that load
    changes hit every mode alike; `order(i)` gives round i's order of the modes
    (default: as given). ([{mode: result}, ...] per round, notes, failures)."""
    rounds, notes, failures = [], [], []
    for i in range(reps):
        done = {}
        for m in (order(i) if order else list(modes)):
            try:
                done[m] = modes[m]()
            except BenchError as e:
                first = str(e).splitlines()[0]
                notes.append(f"{m} failed: {first}")
                failures.append({"program": program, "mode": m, "error": first})
        rounds.append(done)
    return rounds, sorted(set(notes)), failures


def by_mode(modes, rounds):
    """{mode: [result, ...]} of the rounds' successful runs."""
    return {m: [x[m] for x in rounds if m in x] for m in modes}


def interleaved(program, modes, reps):
    """Runs every mode `reps` times, interleaved so that load changes hit every
    mode alike: ({mode: [result, ...]}, notes, failures)."""
    rounds, notes, failures = rounds_of(program, modes, reps)
    return by_mode(modes, rounds), notes, failures


def medians(results, key="wall_s"):
    return {m: benchlib.median([r[key] for r in rs]) for m, rs in results.items()}


def ratios(med):
    base = med.get("plain")
    return {m: (v / base if v is not None and base else None) for m, v in med.items()}


# The intervals beside the slowdowns: a percentile bootstrap over the rounds
# (each round resampled whole, so a pair stays a pair), seeded so that the
# same runs give the same figures (benchlib.bootstrap_rounds). A target is
# decided by them (benchlib.judge): one program's interval wholly above it is a miss, every interval
# at or under it a pass, anything else not resolved at this many rounds.
# With five rounds one paired ratio moves 2-3% on a VM whose speed flips
# (the standard deviation measured on 2026-12-02), as much as the 2% target
# itself: the worst of eight point figures read "missed" or "met" with the
# draws.
INTERVAL_LEVEL = benchlib.INTERVAL_LEVEL


def paired_ratio_intervals(rounds, modes, key="wall_s"):
    """{mode: bootstrap interval of paired_ratios' figure for it}."""
    return {m: benchlib.bootstrap_rounds(rounds, lambda rs, m=m: paired_ratios(rs, [m], key)[m]) for m in modes
            if m != "plain"}


def excess_interval(rounds):
    """Bootstrap interval of the causal excess over upstream's, each resample
    taking both profilers' paired ratios from the same rounds."""
    def stat(rs):
        r = paired_ratios(rs, ["ours_causal", "upstream_causal"])
        return excess_ratio(r["ours_causal"], r["upstream_causal"])
    return benchlib.bootstrap_rounds([x for x in rounds if x.get("ours_causal") and x.get("upstream_causal")], stat)


def paired_ratios(rounds, modes, key="wall_s"):
    """{mode: median over rounds of (mode's run / plain's run of the same
    round)}: a phase of the host's speed (it can halve for seconds) lands on
    both runs of a round and cancels in their ratio, where a ratio of two
    medians compares runs minutes apart. None for a mode without a round
    beside plain."""
    out = {}
    for m in modes:
        r = [x[m][key] / x["plain"][key] for x in rounds
             if x.get(m) and x.get("plain") and x["plain"][key] and x[m][key] is not None]
        out[m] = benchlib.median(r) if r else None
    return out


MAIN = r"""#include <stdio.h>
#include <stdlib.h>
#include <time.h>
/* Generated by benchmarks/overhead.py: prints when main was entered, stays
 * in main argv[1] milliseconds when given, then returns. */
int main(int argc, char **argv) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  printf("{\"bench\":\"@NAME@\",\"elapsed_s\":0,\"work\":0,\"checksum\":0,"
         "\"main_entered_ns\":%lld}\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  fflush(stdout);
  if (argc > 1) {
    long ms = atol(argv[1]);
    struct timespec stay = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&stay, NULL);
  }
  return 0;
}
"""

# The tiny program stays this long in main: longer than the interpreter's
# start, which the native front overlaps with the program's run
# (libcoz/front_run.c). The exit cost is then what `coz run` adds after the
# program ends, not the rest of the interpreter's start.
TINY_STAY_MS = 50


def main_source(name):
    """A C program that prints when its main() was entered, then returns
    (argv[1] milliseconds later, when given)."""
    return MAIN.replace("@NAME@", name)


# ---------------------------------------------------------------- slowdown

def excess_ratio(ours, upstream):
    """(ours - 1) / (upstream - 1): ours' extra time as a share of upstream's;
    None when upstream measured no slowdown (the ratio would mean nothing)."""
    if ours is None or upstream is None or upstream <= 1.0:
        return None
    return (ours - 1.0) / (upstream - 1.0)


def perf_record_cmd(cmd, output):
    return ["perf", "record", "-q", "-e", "task-clock:u", "-c", str(PERF_RECORD_PERIOD_NS), "-g",
            "-o", output, "--", *cmd]


def perf_record_available(workdir):
    """None when `perf record` works here, else why not (one line)."""
    if not shutil.which("perf"):
        return "perf is not installed (Debian: linux-perf)"
    out = os.path.join(workdir, "probe.perf")
    try:
        p = subprocess.run(perf_record_cmd(["true"], out), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"perf record cannot run: {e}"
    if p.returncode != 0:
        return "perf record fails: " + (p.stdout.strip().splitlines() or ["exit %d" % p.returncode])[-1]
    return None


def run_perf_record(cmd, output):
    res = benchlib.run_plain(perf_record_cmd(cmd, output))
    os.unlink(output)
    return res


def slowdowns(programs, build_dirs, libcoz, use_ours, use_upstream, reps, short, workdir, use_perf=False,
              others=None, others_causal=None):
    rows = []
    for prog in programs:
        binary = benchlib.find_program(build_dirs, prog)
        args = ["--short"] if short else []
        modes = {"plain": lambda: benchlib.run_plain([binary, *args])}
        out = os.path.join(workdir, prog + ".coz")
        if use_ours:
            modes["ours_sampling"] = lambda: benchlib.run_ours([binary, *args], libcoz, out,
                                                                extra=["--sampling-only"])
            modes["ours_causal"] = lambda: benchlib.run_ours([binary, *args], libcoz, out)
        for name, lib in (others or {}).items():  # another build's sampling-only, same launcher
            modes[f"{name}_sampling"] = lambda lib=lib: benchlib.run_ours([binary, *args], lib, out,
                                                                          extra=["--sampling-only"])
        for name, lib in (others_causal or {}).items():  # another build's full causal profiling
            modes[f"{name}_causal"] = lambda lib=lib: benchlib.run_ours([binary, *args], lib, out)
        if use_upstream:
            up = benchlib.find_program(build_dirs, prog + "_upstream")
            modes["upstream_causal"] = lambda: benchlib.run_upstream([up, *args], out)
        if use_perf:
            modes["perf_record"] = lambda: run_perf_record([binary, *args], os.path.join(workdir, "perf.data"))
        rounds, notes, failures = rounds_of(prog, modes, reps)
        results = by_mode(modes, rounds)
        # perf record by in-program time only (its exit waits out a 1 s poll)
        wall = {m: v for m, v in medians(results).items() if m != "perf_record"}
        ratio = paired_ratios(rounds, wall)
        excess = excess_ratio(ratio.get("ours_causal"), ratio.get("upstream_causal"))
        if use_ours and use_upstream and excess is None and ratio.get("upstream_causal") is not None:
            notes.append("upstream measured no slowdown: no excess ratio")
        inside = medians(results, "elapsed_s")
        own = {m: benchlib.median([x["profiler_cpu_s"] for x in rs if x.get("profiler_cpu_s") is not None])
               for m, rs in results.items() if m != "plain" and m != "perf_record"}
        rows.append({"program": prog, "cpu_bound": prog not in NOT_CPU_BOUND, "wall_s": wall,
                     "ratio": ratio, "ratio_interval": paired_ratio_intervals(rounds, wall),
                     "causal_excess_interval": excess_interval(rounds) if excess is not None else None,
                     "ratio_of_medians": ratios(wall), "in_program_s": inside,
                     "in_program_ratio": paired_ratios(rounds, inside, "elapsed_s"),
                     "in_program_ratio_of_medians": ratios(inside), "rounds": len(rounds),
                     "profiler_cpu_s": {m: v for m, v in own.items() if v is not None},
                     "causal_excess_vs_upstream": excess, "notes": notes,
                     "failures": failures})
    return rows


# ---------------------------------------------------------------- lock counters

def cost_of(med):
    """What the counters add: the locks-only run over the one without them, minus 1."""
    with_c, without = med.get("ours_locks"), med.get("ours_locks_no_counters")
    return with_c / without - 1.0 if with_c is not None and without else None


def paired_cost(rounds, key="wall_s"):
    """The median over rounds of (with counters / without) - 1: each round's two
    runs are adjacent in time, so a phase of the host's speed (it can halve for
    seconds) cancels within the pair instead of landing in one mode's median."""
    r = [x["ours_locks"][key] / x["ours_locks_no_counters"][key] - 1.0 for x in rounds
         if x.get("ours_locks") and x.get("ours_locks_no_counters") and x["ours_locks_no_counters"][key]]
    return benchlib.median(r) if r else None


def lock_counters(programs, build_dirs, libcoz, reps, short, workdir):
    rows = []
    for prog in programs:
        binary = benchlib.find_program(build_dirs, prog)
        cmd = [binary, *(["--short"] if short else [])]
        out = os.path.join(workdir, prog + ".coz")
        modes = {"plain": lambda: benchlib.run_plain(cmd),
                 "ours_locks": lambda: benchlib.run_ours(cmd, libcoz, out, extra=["--locks-only"]),
                 "ours_locks_no_counters": lambda: benchlib.run_ours(
                     cmd, libcoz, out, extra=["--locks-only", "--no-lock-counters"])}
        # The two profiled runs swap places every other round, so that
        # neither always runs first.
        rounds, notes, failures = rounds_of(
            prog, modes, reps,
            lambda i: ["plain", *(["ours_locks_no_counters", "ours_locks"] if i % 2 else
                                  ["ours_locks", "ours_locks_no_counters"])])
        results = by_mode(modes, rounds)
        med, cpu = medians(results), medians(results, "cpu_s")
        rows.append({"program": prog, "wall_s": med, "ratio": ratios(med), "cpu_s": cpu,
                     "counters_cost": paired_cost(rounds), "counters_cpu_cost": paired_cost(rounds, "cpu_s"),
                     "counters_cost_of_medians": cost_of(med), "rounds": len(rounds),
                     "notes": notes, "failures": failures})
    return rows


# ---------------------------------------------------------------- launcher


def build_tiny(cache):
    """The tiny program, -O2 -g, and its upstream flavour; {flavour: path}."""
    d = os.path.join(cache, "tiny")
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "tiny.c")
    text = main_source("tiny")
    if not os.path.exists(src) or open(src).read() != text:
        with open(src + ".tmp", "w") as out:
            out.write(text)
        os.rename(src + ".tmp", src)
    bins = {}
    for flavour, flags in (("normal", ["-g"]), ("upstream", ["-gdwarf-3", "-gstrict-dwarf"])):
        exe = os.path.join(d, "tiny" + ("" if flavour == "normal" else "_upstream"))
        bins[flavour] = exe
        if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
            subprocess.run(["cc", "-O2", *flags, src, "-o", exe + ".tmp"], check=True)
            os.rename(exe + ".tmp", exe)
    return bins


def timed_to_main(fn):
    """Runs `fn` (a run of a program printing main_entered_ns); adds the time from
    the spawn to main and the time after it."""
    spawned = time.time_ns()
    res = fn()
    res["to_main_s"] = (res["main_entered_ns"] - spawned) / 1e9
    res["after_main_s"] = res["wall_s"] - res["to_main_s"]
    return res


# Linux turns on its scheduler hooks for perf events when the first event
# bound to a task opens on a machine that has none, and waits an RCU grace
# period before that open returns (kernel/events/core.c, account_event); it
# turns them off again 1 s after the last such event closes. A profiler
# started on a quiet machine pays that wait on its way to main (16 ms here
# for ours and for perf stat, on 2026-11-28), one started less than a second
# after another perf user does not: each `_cold` mode sleeps this long
# before its run.
COLD_GAP_S = 1.3


def cold(fn):
    """`fn`, run after COLD_GAP_S with no perf event opened by the benchmark."""
    def run():
        time.sleep(COLD_GAP_S)
        return fn()
    return run


def launch_cost(libcoz, use_ours, use_upstream, reps, cache, workdir, baseline_python=None,
                others=None):
    bins = build_tiny(cache)
    out = os.path.join(workdir, "tiny.coz")
    tiny = [bins["normal"], str(TINY_STAY_MS)]
    modes = {"plain": lambda: timed_to_main(lambda: benchlib.run_plain(tiny))}

    def sampling_only(name, lib, python_dir=None):
        """Modes NAME_sampling and NAME_sampling_cold: `coz run --sampling-only`
        with the runtime `lib` and the cozprof package of `python_dir`."""
        modes[f"{name}_sampling"] = lambda: timed_to_main(
            lambda: benchlib.run_ours(tiny, lib, out, extra=["--sampling-only"],
                                      python_dir=python_dir))
        modes[f"{name}_sampling_cold"] = cold(modes[f"{name}_sampling"])

    if use_ours:
        sampling_only("ours", libcoz)
        modes["ours_causal"] = lambda: timed_to_main(
            lambda: benchlib.run_ours(tiny, libcoz, out))
        if baseline_python:
            sampling_only("baseline", libcoz, baseline_python)
        for name, other in (others or {}).items():  # another build's runtime, same launcher
            sampling_only(name, other)
    if use_upstream:
        modes["upstream_causal"] = lambda: timed_to_main(
            lambda: benchlib.run_upstream([bins["upstream"], str(TINY_STAY_MS)], out))
        modes["upstream_causal_cold"] = cold(modes["upstream_causal"])
    results, notes, failures = interleaved("tiny", modes, reps)
    to_main, total, after = medians(results, "to_main_s"), medians(results), medians(results, "after_main_s")

    def added(med):
        base = med.get("plain")
        return {m: (v - base if v is not None and base is not None else None)
                for m, v in med.items() if m != "plain"}

    return {"reps": reps, "time_to_main_s": to_main, "total_s": total, "after_main_s": after,
            "launcher_s": added(to_main), "exit_s": added(after), "notes": notes,
            "failures": failures}


# ---------------------------------------------------------------- start-up

FUNCTION = """struct rec_{i} {{ int a; long b; double c; const char *name; }};
int gen_fn_{i}(int x) {{
  struct rec_{i} v = {{ x, (long)x * {k}L, x / 3.0, "fn{i}" }};
  int acc = 0;
  for (int j = 0; j < x; j++) {{
    acc += v.a * j + (int)v.b;
    if (acc > {k}) acc ^= j;
  }}
  if (v.name[0] == 'q') acc++;
  return acc + (int)v.c;
}}

"""


def build_bigdebug(cache, lines):
    """Generate and build (once per size) the large program; returns {flavour: path}."""
    per_file = max(1, -(-lines // (LINES_PER_FUNCTION * FILES)))
    d = os.path.join(cache, f"bigdebug-{per_file * LINES_PER_FUNCTION * FILES}")
    os.makedirs(d, exist_ok=True)
    srcs = []
    for f in range(FILES):
        path = os.path.join(d, f"gen{f}.c")
        srcs.append(path)
        if not os.path.exists(path):
            with open(path + ".tmp", "w") as out:
                for n in range(per_file):
                    i = f * per_file + n
                    out.write(FUNCTION.format(i=i, k=7919 + i))
            os.rename(path + ".tmp", path)
    main_c = os.path.join(d, "main.c")
    with open(main_c, "w") as out:
        out.write(main_source("bigdebug"))
    bins = {}
    for flavour, flags in (("normal", ["-g"]), ("upstream", ["-gdwarf-3", "-gstrict-dwarf"])):
        exe = os.path.join(d, "bigdebug" + ("" if flavour == "normal" else "_upstream"))
        bins[flavour] = exe
        if os.path.exists(exe):
            continue
        objs, procs = [], []
        for src in srcs + [main_c]:
            obj = src[:-2] + f".{flavour}.o"
            objs.append(obj)
            procs.append(subprocess.Popen(["cc", "-O0", *flags, "-c", src, "-o", obj]))
            if len(procs) >= (os.cpu_count() or 2):
                if procs.pop(0).wait() != 0:
                    raise BenchError(f"compiling the generated program in {d} failed")
        for p in procs:
            if p.wait() != 0:
                raise BenchError(f"compiling the generated program in {d} failed")
        subprocess.run(["cc", *flags, *objs, "-o", exe + ".tmp"], check=True)
        os.rename(exe + ".tmp", exe)
    total = sum(1 for s in srcs for _ in open(s))
    return bins, total


def startup(build_dirs, libcoz, use_ours, use_upstream, reps, lines, cache, workdir):
    t0 = time.monotonic()
    bins, total_lines = build_bigdebug(cache, lines)
    build_s = time.monotonic() - t0
    out = os.path.join(workdir, "bigdebug.coz")
    modes = {"plain": lambda: benchlib.run_plain([bins["normal"]])}
    if use_ours:
        modes["ours"] = lambda: benchlib.run_ours([bins["normal"]], libcoz, out)
    if use_upstream:
        modes["upstream"] = lambda: benchlib.run_upstream([bins["upstream"]], out)
    results, notes, failures = interleaved(
        "bigdebug", {m: (lambda fn=fn: timed_to_main(fn)) for m, fn in modes.items()}, reps)
    return {"source_lines": total_lines, "debug_info_bytes": debug_size(bins["normal"]),
            "build_s": round(build_s, 1),
            "time_to_main_s": medians(results, "to_main_s"), "total_s": medians(results),
            "notes": notes, "failures": failures}


def debug_size(exe):
    """Total size of the .debug_* sections, from `readelf -S` (None if unavailable)."""
    try:
        text = subprocess.run(["readelf", "-SW", exe], capture_output=True, text=True).stdout
    except OSError:
        return None
    size = 0
    for line in text.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 5 and parts[1].startswith(".debug_"):
            size += int(parts[5], 16)
    return size


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def geomean(rows, mode, key="ratio"):
    vals = [r[key].get(mode) for r in rows if r[key].get(mode)]
    if not vals:
        return None
    prod = 1.0
    for v in vals:
        prod *= v
    return prod ** (1 / len(vals))


def worst(rows, value, target, keep=lambda r: True, interval=lambda r: None):
    """The largest figure of `rows` against its target: {"target", "worst",
    "program", "met", "interval", "above", "across", "verdict"}. "met" is the
    worst point figure's (None when no row has the figure); "interval" the
    worst program's bootstrap interval; "above" and "across" the programs
    whose interval lies wholly above the target or holds it; "verdict" is
    "met", "missed" or "not resolved" by the intervals (by the points where
    a program has none)."""
    found = [(value(r), r["program"], interval(r)) for r in rows if keep(r) and value(r) is not None]
    if not found:
        return {"target": target, "worst": None, "program": None, "met": None, "interval": None,
                "above": [], "across": [], "verdict": None}
    v, prog, iv = max(found, key=lambda f: f[0])
    above, across, verdict = benchlib.judge([(p, x, i) for x, p, i in found], target)
    return {"target": target, "worst": v, "program": prog, "met": v <= target, "interval": iv,
            "above": above, "across": across, "verdict": verdict}


def targets(rows, lock_rows, launch):
    t = {"sampling_slowdown": worst(rows, lambda r: r["ratio"].get("ours_sampling"),
                                    SAMPLING_SLOWDOWN_MAX, lambda r: r["cpu_bound"],
                                    lambda r: (r.get("ratio_interval") or {}).get("ours_sampling")),
         "causal_excess_vs_upstream": worst(rows, lambda r: r["causal_excess_vs_upstream"],
                                            CAUSAL_EXCESS_VS_UPSTREAM_MAX,
                                            interval=lambda r: r.get("causal_excess_interval")),
         "lock_counters_cost": worst(lock_rows, lambda r: r["counters_cost"], LOCK_COUNTERS_COST_MAX)}
    # The worse of a warm and a cold start (COLD_GAP_S): a user's first run of
    # the day starts cold.
    for key, target in (("launcher_s", LAUNCHER_MAX_S), ("exit_s", EXIT_MAX_S)):
        found = [((launch or {}).get(key, {}).get(m), m) for m in ("ours_sampling", "ours_sampling_cold")]
        found = [(v, m) for v, m in found if v is not None]
        v, m = max(found) if found else (None, None)
        t[key] = {"target": target, "worst": v, "program": None if v is None else
                  ("tiny, cold" if m.endswith("_cold") else "tiny"),
                  "met": None if v is None else v <= target}
    return t


TARGET_TEXT = {
    "sampling_slowdown": ("sampling-only slowdown on CPU-bound programs", "x{:.3f}", "x{:.2f}"),
    "causal_excess_vs_upstream": ("full causal excess over upstream's", "{:.2f}", "{:.2f}"),
    "lock_counters_cost": ("lock counters' cost beside the run without them", "{:.1%}", "{:.0%}"),
    "launcher_s": ("time to main added by coz run --sampling-only", "{:.1f} ms", "{:.0f} ms"),
    "exit_s": ("time after main added by coz run --sampling-only", "{:.1f} ms", "{:.0f} ms"),
}


def print_targets(t):
    for key, (what, vfmt, tfmt) in TARGET_TEXT.items():
        x = t[key]
        scale = 1000 if key.endswith("_s") else 1
        target = tfmt.format(x["target"] * scale)
        if x["worst"] is None:
            print(f"# target {what} <= {target}: not measured")
            continue
        iv = x.get("interval")
        about = [x["program"]] if x["program"] else []
        if iv:
            about.append(f"{INTERVAL_LEVEL:.0%} interval {vfmt.format(iv[0] * scale)} to {vfmt.format(iv[1] * scale)}")
        where = f" ({'; '.join(about)})" if about else ""
        verdict = x.get("verdict") or ("met" if x["met"] else "missed")
        detail = ""
        if x.get("above"):
            detail = "; wholly above it: " + ", ".join(x["above"])
        elif x.get("across"):
            detail = "; intervals across it: " + ", ".join(x["across"])
        print(f"# target {what} <= {target}: worst {vfmt.format(x['worst'] * scale)}{where}: {verdict}{detail}")


def print_program_table(rows, modes, cell, header_tail="", tail=lambda r: ""):
    """A row per program, a column per mode (cell(row, mode) gives its text),
    and `tail(row)` after the columns ("header_tail" over it)."""
    print(f"{'program':<14} " + " ".join(f"{m:>16}" for m in modes) + header_tail)
    for r in rows:
        print(f"{r['program']:<14} " + " ".join(f"{cell(r, m):>16}" for m in modes) + tail(r))


def print_slowdowns(rows, others=(), others_causal=()):
    modes = ["plain", "ours_sampling", *[f"{n}_sampling" for n in others], "ours_causal",
             *[f"{n}_causal" for n in others_causal], "upstream_causal"]
    def cell(r, m):
        w, q = r["wall_s"].get(m), r["ratio"].get(m)
        return f"{fmt(w, '.2f')}s x{fmt(q, '.3f')}" if w is not None else "n/a"
    print_program_table(rows, modes, cell, f" {'excess/up':>9}",
                        lambda r: f" {fmt(r['causal_excess_vs_upstream'], '.2f'):>9}"
                        + ("  " + "; ".join(r["notes"]) if r["notes"] else ""))
    print("# geomean slowdown: " + ", ".join(f"{m} x{fmt(geomean(rows, m), '.3f')}" for m in modes[1:]))


def print_in_program(rows, others=()):
    """Sampling-only beside perf record, by the program's own time (its
    result line's elapsed_s, from the start of its work to its end): the
    cost of sampling while it runs, without either tool's start and exit
    (perf record's exit alone waits out a 1 s poll on this machine's perf)."""
    modes = ["plain", "ours_sampling", *[f"{n}_sampling" for n in others], "perf_record"]
    if not any(r["in_program_s"].get("perf_record") for r in rows) and not others:
        return
    print("# in-program time (the program's own elapsed_s), sampling-only beside perf record")
    def cell(r, m):
        v, q = r["in_program_s"].get(m), r["in_program_ratio"].get(m)
        return f"{v:.2f}s x{fmt(q, '.3f')}" if v is not None else "n/a"
    print_program_table(rows, modes, cell)
    print("# geomean in-program slowdown: " + ", ".join(
        f"{m} x{fmt(geomean(rows, m, 'in_program_ratio'), '.3f')}" for m in modes[1:]))


def print_profiler_cpu(rows):
    """Our profiler thread's own CPU time in each of our modes (the counters'
    profiler_cpu_ns, medians), and its share of the plain run's wall time:
    where the program's threads want every core, about what it takes from
    them."""
    modes = sorted({m for r in rows for m in r.get("profiler_cpu_s", {})})
    if not modes:
        return
    print("# our profiler thread's CPU time (median), and its share of the plain run's wall time")
    def cell(r, m):
        v, plain = r["profiler_cpu_s"].get(m), r["wall_s"].get("plain")
        return f"{v * 1e3:.1f}ms {v / plain:.2%}" if v is not None and plain else "n/a"
    print_program_table(rows, modes, cell)


def print_locks(rows):
    modes = ["plain", "ours_locks", "ours_locks_no_counters"]
    print(f"{'lock program':<18} " + " ".join(f"{m:>22}" for m in modes)
          + f" {'counters':>9} {'(cpu)':>7} {'(medians)':>9}")
    for r in rows:
        cells = []
        for m in modes:
            w, q = r["wall_s"].get(m), r["ratio"].get(m)
            cells.append(f"{fmt(w, '.2f')}s x{fmt(q, '.3f')}" if w is not None else "n/a")
        cost = "n/a" if r["counters_cost"] is None else f"{r['counters_cost']:+.1%}"
        cpu = "n/a" if r["counters_cpu_cost"] is None else f"{r['counters_cpu_cost']:+.1%}"
        of_med = "n/a" if r["counters_cost_of_medians"] is None else f"{r['counters_cost_of_medians']:+.1%}"
        print(f"{r['program']:<18} " + " ".join(f"{c:>22}" for c in cells) + f" {cost:>9} {cpu:>7} {of_med:>9}"
              + ("  " + "; ".join(r["notes"]) if r["notes"] else ""))


def print_launch(launch):
    print(f"# launcher: tiny program, median of {launch['reps']} run(s); added = minus plain's")
    for m in launch["total_s"]:
        line = (f"launch {m:<20} time to main {fmt(launch['time_to_main_s'][m], '.4f')} s, "
                f"after main {fmt(launch['after_main_s'][m], '.4f')} s, "
                f"total {fmt(launch['total_s'][m], '.4f')} s")
        if m != "plain":
            ms = lambda v: "n/a" if v is None else f"{v * 1000:+.1f} ms"  # noqa: E731
            line += f"; launcher {ms(launch['launcher_s'][m])}, exit {ms(launch['exit_s'][m])}"
        print(line)
    for n in launch["notes"]:
        print("# " + n)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--short", action="store_true",
                    help="smoke mode: --short programs, one run each (3 for the launcher), a "
                         "20,000-line start-up program; a failed run in any mode is an error")
    ap.add_argument("--only", action="append", metavar="NAME",
                    help="only these programs (slowdown and lock programs alike; repeatable)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--ours-only", action="store_true")
    g.add_argument("--upstream-only", action="store_true")
    ap.add_argument("--build", action="append", metavar="DIR",
                    help="build directory with libcoz/libcoz.so and the benchmarks (repeatable)")
    ap.add_argument("--reps", type=int, default=None, help="runs per mode (default 3; 1 with --short)")
    ap.add_argument("--lock-reps", type=int, default=None,
                    help="rounds of the lock counters' part (default 9; 1 with --short)")
    ap.add_argument("--launch-reps", type=int, default=None,
                    help="runs per mode of the tiny program (default 15; 3 with --short)")
    ap.add_argument("--startup-lines", type=int, default=None,
                    help="size of the generated start-up program (default 200000; 20000 with --short)")
    ap.add_argument("--no-slowdown", action="store_true", help="skip the slowdown programs")
    ap.add_argument("--no-locks", action="store_true", help="skip the lock counters' cost")
    ap.add_argument("--no-launch", action="store_true", help="skip the launcher's start and exit cost")
    ap.add_argument("--no-startup", action="store_true", help="skip the start-up measurement")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=LIBCOZ",
                    help="parts 1 and 3 also run coz run --sampling-only with another build's "
                         "libcoz.so (an earlier commit's), interleaved: mode NAME_sampling, and "
                         "NAME_sampling_cold in part 3 (repeatable)")
    ap.add_argument("--also-causal", action="append", default=[], metavar="NAME=LIBCOZ",
                    help="part 1 also runs full causal profiling with another build's libcoz.so, "
                         "interleaved: mode NAME_causal (repeatable)")
    ap.add_argument("--no-perf", action="store_true",
                    help="part 1 without the perf_record reference (perf record at our sampling period)")
    ap.add_argument("--launch-baseline", metavar="DIR",
                    help="part 3 also runs coz run --sampling-only with the cozprof package of DIR "
                         "(another checkout's python/ folder), interleaved: modes baseline_sampling[_cold]")
    ap.add_argument("--cache", default=None,
                    help="where the generated programs are kept (default <first build dir>/bigdebug)")
    args = ap.parse_args(argv)

    others = benchlib.parse_also(ap, args.also)
    others_causal = benchlib.parse_also(ap, args.also_causal)
    build_dirs = args.build or benchlib.default_build_dirs()
    reps = args.reps or (1 if args.short else 3)
    lock_reps = args.lock_reps or (1 if args.short else 9)
    launch_reps = args.launch_reps or (3 if args.short else 15)
    lines = args.startup_lines or (20000 if args.short else 200000)
    programs = [p for p in PROGRAMS if not args.only or p in args.only] if not args.no_slowdown else []
    lock_programs = [p for p in LOCK_PROGRAMS if not args.only or p in args.only] \
        if not args.no_locks else []
    unknown = sorted(set(args.only or []) - set(PROGRAMS) - set(LOCK_PROGRAMS))
    if unknown:
        ap.error(f"unknown program(s) {', '.join(unknown)}; known: {', '.join(PROGRAMS + LOCK_PROGRAMS)}")
    use_ours, use_upstream = not args.upstream_only, not args.ours_only
    libcoz, use_ours, use_upstream, skipped = benchlib.profilers(build_dirs, use_ours, use_upstream, "overhead")
    # Absolute: the profiled runs start in their output's folder.
    cache = os.path.abspath(args.cache or os.path.join(
        next((d for d in build_dirs if os.path.isdir(d)), benchlib.tempdir("coz-bench-")),
        "bigdebug"))

    workdir = benchlib.tempdir("coz-overhead-")
    use_perf = False
    if programs and not args.no_perf:
        why = perf_record_available(workdir)
        use_perf = why is None
        if why:
            skipped["perf_record"] = why
            print(f"overhead: skipping perf_record: {why}", file=sys.stderr)
    errors = []
    rows, lock_rows, launch, start = [], [], None, None
    load_start = benchlib.load_average()
    t_begin = time.monotonic()
    print(f"# machine: {benchlib.machine_description()}; load average at start "
          f"{load_start}; median of {reps} run(s)")
    try:
        if programs:
            try:
                rows = slowdowns(programs, build_dirs, libcoz, use_ours, use_upstream, reps,
                                 args.short, workdir, use_perf, others, others_causal)
            except BenchError as e:
                errors.append(str(e))
            print_slowdowns(rows, others, others_causal)
            print_in_program(rows, others)
            print_profiler_cpu(rows)
        if lock_programs and use_ours:
            try:
                lock_rows = lock_counters(lock_programs, build_dirs, libcoz, lock_reps, args.short, workdir)
            except BenchError as e:
                errors.append(f"lock counters: {e}")
            print_locks(lock_rows)
        if not args.no_launch:
            try:
                launch = launch_cost(libcoz, use_ours, use_upstream, launch_reps, cache, workdir,
                                     args.launch_baseline, others)
                print_launch(launch)
            except (BenchError, subprocess.CalledProcessError) as e:
                errors.append(f"launcher: {e}")
        if not args.no_startup:
            try:
                start = startup(build_dirs, libcoz, use_ours, use_upstream, reps, lines, cache,
                                workdir)
                print(f"# start-up: {start['source_lines']} generated lines, "
                      f"{fmt(start['debug_info_bytes'], ',')} bytes of debug info")
                for m in start["time_to_main_s"]:
                    print(f"start-up {m:<10} time to main {fmt(start['time_to_main_s'][m], '.3f')} s"
                          f", total {fmt(start['total_s'][m], '.3f')} s")
                for n in start["notes"]:
                    print("# " + n)
            except (BenchError, subprocess.CalledProcessError) as e:
                errors.append(f"start-up: {e}")
    finally:
        benchlib.cleanup(workdir)

    goals = targets(rows, lock_rows, launch)
    if args.short:
        print("# --short: a smoke run; its figures are not measurements")
    print_targets(goals)
    summary = {"summary": "overhead", "short": args.short, "reps": reps, "lock_reps": lock_reps,
               "launch_reps": launch_reps,
               "machine": benchlib.machine_description(),
               "load_average_start": load_start, "load_average_end": benchlib.load_average(),
               "duration_s": round(time.monotonic() - t_begin, 1),
               "geomean_ratio": {m: geomean(rows, m) for m in
                                 ("ours_sampling", "ours_causal", "upstream_causal")},
               "geomean_in_program_ratio": {m: geomean(rows, m, "in_program_ratio") for m in
                                            ("ours_sampling", *[f"{n}_sampling" for n in others],
                                             "perf_record")},
               "also": others, "also_causal": others_causal,
               "targets": goals, "programs": rows, "locks": lock_rows, "launch": launch,
               "startup": start, "skipped": skipped, "errors": errors}
    summary["failures"] = [f for r in rows + lock_rows for f in r["failures"]] + \
        [f for part in (launch, start) if part for f in part["failures"]]
    for e in errors:
        print("# error: " + e.splitlines()[0])
    for f in summary["failures"]:
        print(f"# failure: {f['program']}: {f['mode']}: {f['error']}")
    print(json.dumps(summary))
    # A smoke run must show every mode working: there a failed run is an error.
    return 1 if errors or (args.short and summary["failures"]) else 0


if __name__ == "__main__":
    sys.exit(main())
