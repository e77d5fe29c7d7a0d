"""Off-CPU time in the causal analysis, on real runs: the phase correction's
inputs for a wait, and the predictions for the waits of the known-answer
programs of benchmarks/, against answers measured by the run itself (never
assumed)."""

import json
import os
import subprocess

import pytest

from conftest import PROGRAMS, build_program, coz_run, judged_if_precise
from conftest import source_marker as marker

from cozprof import analysis, profile, units



def test_phase_inputs_of_a_wait_agree_with_its_blocked_samples(tmp_path):
    # A fixed line is measured all run long, so its share of the samples while
    # measured (s_obs / t_obs, with its sped-up waits in periods) must equal its
    # share of the whole run (s / T, with its blocked samples): eq. 8's factor is
    # then 1. Counting CPU samples only, the sleep line has almost none in s_obs.
    # Measured on the 2-core host (offcpu serial, 2 s, 50 ms experiments): ratio
    # 0.988 to 1.005 in 12 runs; under /work/shared/tools/under-load 0.864 to
    # 1.032 in 11 runs. Bounds: 0.8 to 1.15.
    exe = build_program("offcpu", tmp_path)
    out = tmp_path / "phase.coz"
    line = marker("offcpu", "LINE_SLEEP")
    r = coz_run(["--fixed-line", line, "--experiment-length", "50ms", "-o", str(out)], [exe, "serial", "2"])
    assert r.returncode == 0, r.stderr.decode()
    prof = profile.load([str(out)])
    usable = [e for e in prof.experiments if not e.partial]
    assert len({e.selected for e in usable}) == 1 and usable[0].selected.endswith("/" + line)
    key = ("line", usable[0].selected)
    t_obs, s_obs, s, T = analysis.phase_inputs(prof, units.UnitIndex(prof), key, usable)
    cpu_obs = sum(e.selected_samples for e in usable)
    assert s_obs > 20 * max(cpu_obs, 1), (s_obs, cpu_obs)  # the waits carry the line
    ratio = (s_obs / t_obs) / (s / T)
    assert 0.8 < ratio < 1.15, (t_obs, s_obs, s, T)


# -- the known-answer programs of benchmarks/ (docs/benchmarks.md) -------------------
#
# A wait on the critical path of the program, sped up by s, shortens the run by
# s times the wait's share of it, so its causal slope is that share, measured
# here from the run's own blocked samples (period x blocked samples of the line /
# the waiting thread's wall time); a wait off the critical path gives 0.
# benchmarks/accuracy.py checks the same programs against really shortened
# waits.

BENCH = os.path.normpath(os.path.join(PROGRAMS, "..", "..", "..", "benchmarks"))

# Virtual speedup assumes the program's threads run whenever they can: with
# other work holding the CPUs, a paused thread also waits for a CPU when its
# pause ends, and predictions stray (docs/analysis.md, "Two threads"). Each
# test measures how long the program's threads waited for a CPU per unit of
# their CPU time (their `sched` time over their CPU clock) and compares only
# below QUIET; above it, the test is skipped, saying what it found.
QUIET = 0.2
# Measured on the 2-core host, 10 to 13 runs of each test at load averages of
# 2 to 9 (other work on the machine), 50 ms experiments. With the threads'
# CPU wait below QUIET, slope - share of the waits on the critical path:
# sleep -0.018 to +0.007, pipe -0.027 to +0.018, fsync -0.181 to +0.121 (the
# disk's latency drifts too), lock wait +0.049 (one run that quiet); the
# sleep off the critical path, slope -0.007 to +0.132. Above it, up to -0.36
# (sleep), +0.57 (pipe), -0.40 (fsync), -5.8 (lock wait: the holder pays
# delays inside its critical section, which lengthens the sped-up wait;
# docs/analysis.md, section 6) and +0.75 (side sleep). Each tolerance is
# about three times the largest error measured quiet: the sleep's and the
# pipe's 0.08; the disk's, and the lock wait's (one quiet run), 0.2.
TOL_TIMED_WAIT = 0.08
TOL_ON_PATH = 0.2
TOL_OFF_PATH = 0.2


def bench_program(name, tmp_path):
    return build_program(name, tmp_path, flags=("-g", "-O2", "-I", BENCH),
                         sources=[os.path.join(BENCH, name + ".c")])


def bench_marker(name, key):
    with open(os.path.join(BENCH, name + ".c")) as f:
        for n, line in enumerate(f, 1):
            if f"/* KEY:{key} */" in line:
                return f"{name}.c:{n}"
    raise AssertionError(key)


def profiled(tmp_path, name, key, args, length="50ms", stdout=None):
    """(the curve of KEY, the run, the line's full name) from one fixed-line run;
    the program's standard output lines go to the list `stdout` when given."""
    exe = bench_program(name, tmp_path)
    out = tmp_path / f"{name}.{key}.coz"
    if out.exists():
        out.unlink()  # coz run appends
    line = bench_marker(name, key)
    r = coz_run(["--fixed-line", line, "--experiment-length", length, "-o", str(out)], [exe, *args],
                timeout=300)
    assert r.returncode == 0, r.stderr.decode()
    if stdout is not None:
        stdout.extend(r.stdout.decode().splitlines())
    prof = profile.load([str(out)])
    (run,) = prof.runs
    result = analysis.analyze(prof, phase_correction=False)
    (curve,) = [c for c in result["lines"] if c["line"].endswith("/" + line)]
    return curve, run, curve["line"]


def wait_share(run, line, kind, group="main"):
    """The line's blocked samples of `kind`, in time, over the wall time of the
    threads of `group` (the thread that waits there)."""
    period = run.startup["sample_period_ns"]
    wall = sum(t["end_ns"] - t["start_ns"] for t in run.threads if t["group"] == group)
    return run.blocked.get(kind, {}).get(line, 0) * period / wall


def waited_for_cpu(run):
    """The program's threads' time runnable but not running, per unit of their CPU time."""
    cpu = sum(t.get("cpu_clock_ns", t["cpu_ns"]) for t in run.threads)
    return sum(t["wait_ns"]["sched"] for t in run.threads) / cpu


def helpers_waited_for_cpu(stdout):
    """The same for the program's helper processes that reported their own
    scheduler counts ({"schedstat": ...} lines: offcpu_pipe's writer), whose
    pace the known answer rests on; 0 without any."""
    run_ns = wait_ns = 0
    for line in stdout or ():
        if line.startswith("{") and '"schedstat"' in line:
            rec = json.loads(line)
            run_ns += rec["run_ns"]
            wait_ns += rec["wait_ns"]
    return wait_ns / run_ns if run_ns else 0.0


def skip_if_contended(run, what, found, stdout=None):
    """When other work held the CPUs, skips the rest of the test, saying what
    was found: virtual speedup does not yet predict a program whose threads
    wait for a CPU (docs/analysis.md; issue 15), and a known answer that
    rests on a helper process's pace does not hold when it waited for one."""
    waited = waited_for_cpu(run)
    if waited >= QUIET:
        pytest.skip(f"{what}: the program's threads waited for a CPU {waited:.0%} of their CPU time "
                    f"(other work on the machine), so the prediction is not checked: {found}")
    helpers = helpers_waited_for_cpu(stdout)
    if helpers >= QUIET:
        pytest.skip(f"{what}: its helper process waited for a CPU {helpers:.0%} of its CPU time "
                    f"(other work on the machine), so its pace, the known answer's basis, varied: {found}")


def longer(args, factor=3):
    """The program's arguments with its count (`name=N`) multiplied."""
    return [f"{a.split('=')[0]}={int(a.split('=')[1]) * factor}" if "=" in a else a for a in args]


def on_path(program, key, args, kind, tmp_path, low=0.2, high=0.9, tol=TOL_ON_PATH, contended_ok=False):
    """`contended_ok`: the prediction is checked when other work held the
    CPUs too (the case's answer does not rest on having them).

    A profile whose slope is known to less than the tolerance (its 95%
    interval wider than `tol`) says little either way: beside two busy
    loops `offcpu_lock`'s LOCK_WAIT read -0.17 [-0.35, +0.01] and -0.10
    [-0.28, +0.08] against shares of 0.17 and 0.25, where the runs with
    narrower intervals read within 0.15 of theirs. Such a run is made
    again, three times as long, and the longer one is judged, or the test
    is skipped, saying so, when that one too is known less well than the
    tolerance (a run the contention rule skips is skipped at once)."""

    def measured(factor):
        stdout = []
        curve, run, line = profiled(tmp_path, program, key, longer(args, factor), stdout=stdout)
        share = wait_share(run, line, kind)
        assert low < share < high, share
        assert curve["category"] == kind, (curve["category"], curve["off_cpu"])
        found = (f"slope {curve['slope']:+.3f} [{curve['slope_ci'][0]:+.3f}, {curve['slope_ci'][1]:+.3f}], "
                 f"share {share:.3f}, waited for a CPU {waited_for_cpu(run):.0%}")
        if not contended_ok:
            skip_if_contended(run, f"{program} {key}", found, stdout)
        return curve["slope_ci"], found, (curve, share)

    # Seen skipped once, on a host halving its speed beside a busy loop, the
    # threads waiting for a CPU 81% of their CPU time: -0.06 [-0.20, +0.09]
    # against a share of 0.23.
    (curve, share), found = judged_if_precise(measured, tol, f"{program} {key}")
    assert abs(curve["slope"] - share) < tol, (found, curve["points"])


def test_sleep_after_compute_predicts_its_share(tmp_path):
    on_path("offcpu_sleep", "SLEEP", ["iters=1200"], "sleep", tmp_path, tol=TOL_TIMED_WAIT)


def iters_for(exe, seconds, trial=200, floor=1500, arg="iters"):
    """How many iterations of a benchmark take about `seconds` here: timed
    from a short plain run of its own (an fsync costs what this disk makes
    it cost, from 0.1 ms to several; a spin step what this CPU makes it)."""
    r = subprocess.run([exe, f"{arg}={trial}"], capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    elapsed = json.loads(r.stdout.decode().splitlines()[-1])["elapsed_s"]
    return max(floor, int(trial * seconds / max(elapsed, 1e-3)))


def test_pipe_reader_predicts_its_share_of_waiting_for_the_writer(tmp_path):
    # The writer is another process, whose pace sets the known answer: it
    # reports its own wait for a CPU (skip_if_contended). Under a busy loop it
    # once read slope +0.47 against a share of 0.59, the reader's threads
    # quiet enough. Sized by time: 1,200 items made about a second here.
    items = iters_for(bench_program("offcpu_pipe", tmp_path), 3.0, trial=150, floor=1200, arg="items")
    on_path("offcpu_pipe", "READ", [f"items={items}"], "io", tmp_path, tol=TOL_TIMED_WAIT)


def test_fsync_predicts_its_share(tmp_path):
    # Sized by time, not by a count: on a disk whose fsync took 0.7 ms, 1500
    # iterations made a 1.6 s run with 6 sped-up experiments, whose slope
    # (+0.22 against a share of 0.67) said more about chance than the fsync.
    iters = iters_for(bench_program("offcpu_fsync", tmp_path), 6.0)  # in the directory the profiled run uses
    on_path("offcpu_fsync", "FSYNC", [f"iters={iters}"], "io", tmp_path, low=0.1, high=0.97)


def test_lock_wait_for_a_long_critical_section_predicts_its_share(tmp_path):
    # Checked beside other work too. There the lock's holder is often
    # preempted by the thread its release wakes, which then ends its sped-up
    # wait and inserts its delay while the holder sits preempted: the holder
    # is credited for that at its next wake's look, before it pays at its
    # next wrapper call (before, only at its next sample, after it had paid:
    # slopes +0.01 to +0.04 against a share of 0.24 beside one busy loop,
    # and the test skipped there). The program's two threads fit its two
    # CPUs, which is when that credit is settled early.
    on_path("offcpu_lock", "LOCK_WAIT", ["rounds=1000"], "lock", tmp_path, low=0.1, contended_ok=True)


def test_a_sleep_off_the_critical_path_predicts_about_nothing(tmp_path):
    def measured(factor):
        curve, run, line = profiled(tmp_path, "offcpu_mix", "SIDE_SLEEP", [f"rounds={1200 * factor}"])
        share = wait_share(run, line, "sleep", group="side")
        assert share > 0.3, share  # what a profiler blind to the critical path would give it
        assert curve["category"] == "sleep"
        lo, hi = curve["slope_ci"]
        found = (f"slope {curve['slope']:+.3f} [{lo:+.3f}, {hi:+.3f}] (its thread's share {share:.3f}), "
                 f"waited for a CPU {waited_for_cpu(run):.0%}")
        skip_if_contended(run, "offcpu_mix SIDE_SLEEP", found)
        return (lo, hi), found, curve

    # Judged, as the waits on the path are, only from a run whose interval
    # is no wider than the tolerance. Beside one busy loop the slope leans
    # up as the threads wait for a CPU (2-vCPU AMD EPYC, 2026-11-28: +0.00
    # to +0.10, mean +0.05, over 10 runs at 10-21%, intervals 0.09 to 0.15
    # wide; quiet, -0.03 to +0.02 over 6 runs at 1-4%, 0.08 to 0.11 wide),
    # and on a noisier 2-CPU Intel Xeon VM a run of the whole suite beside a
    # busy loop once read +0.215 below the contention rule's 20%. The real
    # answer stays 0 there, and why the prediction leans is not established
    # (docs/analysis.md, "A sleep off the critical path beside other work":
    # three changes tried, none moved it; issue 15).
    curve, found = judged_if_precise(measured, TOL_OFF_PATH, "offcpu_mix SIDE_SLEEP")
    assert abs(curve["slope"]) < TOL_OFF_PATH, (found, curve["points"])
