#!/usr/bin/env python3
"""A long sampling-only run stays small (issue 14, point 6).

Runs a multi-threaded benchmark (default `pipeline`: three stages of 1, 2 and
1 threads) under our `coz run --sampling-only` for about --seconds (default
600), sized from a plain run of its default arguments (work per second, then
enough work for the duration). While it runs, the profile's size is sampled
every --interval seconds (default 10). Then `coz report --top` is timed on
the profile, and the project's parser counts its distinct stacks and
locations: a profile that grows with the number of distinct stacks, not with
time, flattens once every stack has been seen.

Prints the sizes over time (the profile, and the checkpoint beside it that
holds the counts' totals while the run goes), the growth over the second half
of the run, the report's time, and a JSON summary line {"summary": "long_run", ...}. Exit
status 1 when the run or the report fails.

Usage: long_run.py [--seconds N] [--interval S] [--program NAME] [--build DIR]
                   [--keep-profile FILE]
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402
from benchlib import BenchError  # noqa: E402

# Multi-threaded programs and the argument that sizes their work (the "work"
# field of their result line counts it).
PROGRAMS = {"pipeline": "items", "prodcons": "items", "two_threads": "rounds",
            "locks_imbalance": "items"}


def size_for(binary, arg, seconds):
    """The value of `arg` that makes a plain run last about `seconds`, from one
    plain run with the default arguments; (value, work per second)."""
    res = benchlib.run_plain([binary])
    if res["elapsed_s"] <= 0 or res["work"] <= 0:
        raise BenchError(f"{binary}: a plain run did no measurable work: {res}")
    rate = res["work"] / res["elapsed_s"]
    return max(1, math.ceil(rate * seconds)), rate


def file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def on_disk(output):
    """(profile bytes, checkpoint bytes): a run without experiments keeps its
    counts' totals so far in `<profile>.checkpoint` (docs/profile-format.md)."""
    return file_size(output), file_size(output + ".checkpoint")


def profiled_run(binary, arg, value, libcoz, output, interval, workdir):
    """Runs the program under `coz run --sampling-only`, sampling the profile's
    and its checkpoint's sizes every `interval` s; returns
    ([(t_s, profile bytes, checkpoint bytes), ...], wall_s, result)."""
    if os.path.exists(output):
        os.unlink(output)
    cmd = [sys.executable, "-m", "cozprof", "run", "--sampling-only", "-o", output,
           "---", binary, f"{arg}={value}"]
    out_path, err_path = os.path.join(workdir, "stdout"), os.path.join(workdir, "stderr")
    sizes = []
    with open(out_path, "w") as out, open(err_path, "w") as err:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=benchlib.ours_env(libcoz), cwd=workdir, stdout=out, stderr=err)
        next_t = interval
        while p.poll() is None:
            time.sleep(max(0.0, min(next_t - (time.monotonic() - t0), 1.0)))
            now = time.monotonic() - t0
            if now >= next_t and p.poll() is None:
                sizes.append((round(now, 1), *on_disk(output)))
                next_t += interval
        wall = time.monotonic() - t0
    sizes.append((round(wall, 1), *on_disk(output)))
    with open(out_path) as f:
        stdout = f.read()
    with open(err_path) as f:
        stderr = f.read()
    if p.returncode != 0:
        raise BenchError(f"coz run --sampling-only failed (exit {p.returncode}): {' '.join(cmd)}\n"
                         f"{stderr[-3000:]}")
    res = benchlib.parse_result(stdout, "coz run --sampling-only")
    benchlib.check_profile(output, "coz run --sampling-only")
    return sizes, wall, res


def time_report(output, libcoz):
    """Seconds `coz report --top` takes on the profile."""
    cmd = [sys.executable, "-m", "cozprof", "report", "--top", output]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=benchlib.ours_env(libcoz), capture_output=True, text=True,
                       timeout=benchlib.RUN_TIMEOUT_S)
    took = time.monotonic() - t0
    if p.returncode != 0:
        raise BenchError(f"coz report --top failed (exit {p.returncode}): {p.stderr[-2000:]}")
    return took, p.stdout


def contents(output):
    """Distinct stacks, locations and samples of the profile, by the project's parser."""
    from cozprof import profile

    (run,) = profile.load([output]).runs
    return {"stacks": len(run.stacks), "locations": len(run.locations),
            "samples": sum(c[0] for c in run.stack_counts.values()), "threads": len(run.threads)}


def growth(sizes, column=1):
    """Bytes per minute of one column of `sizes` over the second half of the run
    (None if too short)."""
    if len(sizes) < 3:
        return None
    end = sizes[-1]
    mid = min(sizes, key=lambda s: abs(s[0] - end[0] / 2))
    if end[0] - mid[0] <= 0:
        return None
    return (end[column] - mid[column]) / (end[0] - mid[0]) * 60


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=600.0,
                    help="how long the profiled run should last (default 600)")
    ap.add_argument("--interval", type=float, default=10.0,
                    help="seconds between two samples of the profile's size (default 10)")
    ap.add_argument("--program", choices=sorted(PROGRAMS), default="pipeline",
                    help="the multi-threaded benchmark to run (default pipeline)")
    ap.add_argument("--build", action="append", metavar="DIR",
                    help="build directory with libcoz/libcoz.so and the benchmarks (repeatable)")
    ap.add_argument("--keep-profile", metavar="FILE", help="copy the profile there")
    args = ap.parse_args(argv)
    if args.seconds <= 0 or args.interval <= 0:
        ap.error("--seconds and --interval must be positive")

    build_dirs = args.build or benchlib.default_build_dirs()
    libcoz = benchlib.find_libcoz(build_dirs)
    summary = {"summary": "long_run", "program": args.program, "seconds_asked": args.seconds,
               "interval_s": args.interval, "machine": benchlib.machine_description(),
               "load_average_start": benchlib.load_average(), "errors": []}
    workdir = benchlib.tempdir("coz-long-run-")
    try:
        if not libcoz:
            raise BenchError("libcoz.so is not built (looked in <build>/libcoz/ of "
                             + ", ".join(build_dirs) + ")")
        binary = benchlib.find_program(build_dirs, args.program)
        arg = PROGRAMS[args.program]
        value, rate = size_for(binary, arg, args.seconds)
        summary.update({"argument": f"{arg}={value}", "plain_work_per_s": rate})
        print(f"# machine: {summary['machine']}; load average at start {summary['load_average_start']}")
        print(f"# {args.program} {arg}={value} ({rate:.1f} per s plain) under coz run --sampling-only, "
              f"{args.seconds:g} s asked; profile size every {args.interval:g} s")
        output = os.path.join(workdir, "long.coz")
        sizes, wall, res = profiled_run(binary, arg, value, libcoz, output, args.interval, workdir)
        print(f"{'t_s':>8} {'profile':>12} {'checkpoint':>12}")
        for t, b, c in sizes:
            print(f"{t:>8.1f} {b:>12,} {c:>12,}")
        per_min = growth(sizes)
        # Both files: what the run keeps on disk while it goes (the last row,
        # after the end, has no checkpoint: its totals are in the profile).
        both = [(t, b + c) for t, b, c in sizes[:-1]]
        per_min_both = growth(both)
        report_s, _ = time_report(output, libcoz)
        inside = contents(output)
        summary.update({"wall_s": wall, "elapsed_s": res["elapsed_s"], "sizes": sizes,
                        "final_bytes": sizes[-1][1], "growth_second_half_bytes_per_min": per_min,
                        "growth_second_half_with_checkpoint_bytes_per_min": per_min_both,
                        "report_top_s": report_s, "profile": inside})
        print(f"# run: {wall:.1f} s wall ({res['elapsed_s']:.1f} s in the program); profile "
              f"{sizes[-1][1]:,} bytes: {inside['stacks']:,} distinct stacks, "
              f"{inside['locations']:,} locations, {inside['samples']:,} samples on and off the CPU, "
              f"{inside['threads']} threads")
        print("# growth over the second half: "
              + ("n/a (too few size samples)" if per_min is None else f"{per_min:,.0f} bytes per minute")
              + "; profile and checkpoint together, while the run went: "
              + ("n/a" if per_min_both is None else f"{per_min_both:,.0f} bytes per minute"))
        print(f"# coz report --top: {report_s:.2f} s")
        if args.keep_profile:
            shutil.copyfile(output, args.keep_profile)
    except (BenchError, subprocess.TimeoutExpired) as e:
        summary["errors"].append(str(e))
        print("# error: " + str(e).splitlines()[0])
    finally:
        benchlib.cleanup(workdir)
    summary["load_average_end"] = benchlib.load_average()
    print(json.dumps(summary))
    return 1 if summary["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
