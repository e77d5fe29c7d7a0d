"""Off-CPU time: interposed waits give blocked samples (per category, on the
call's stack) and experiments speed waits up (BCOZ's virtual speedup of
off-CPU time, in user space). Known answers from the run's own records."""

import json
import os
import subprocess
import sys

import pytest

from conftest import PROGRAMS, build_program, coz_env, coz_run, line_result, precise_slope, records

from cozprof.profile import kernel_call_kind, load


def marker(text):
    with open(os.path.join(PROGRAMS, "offcpu.c")) as f:
        for n, line in enumerate(f, 1):
            if f"/* {text} */" in line:
                return f"offcpu.c:{n}"
    raise AssertionError(text)


def test_a_sleep_on_the_critical_path_is_blocked_samples_and_speeds_up(tmp_path):
    exe = build_program("offcpu", tmp_path)
    out = tmp_path / "s.coz"
    line = marker("LINE_SLEEP")
    r = coz_run(["--fixed-line", line, "--experiment-length", "50ms", "-o", str(out)], [exe, "serial", "3"])
    assert r.returncode == 0, r.stderr.decode()
    (run,) = load([str(out)]).runs
    # Blocked samples of kind sleep, on the call's line, one per period of sleeping.
    sleeps = run.blocked["sleep"]
    assert list(sleeps) == [f"{PROGRAMS}/{line.split(':')[0]}:{line.split(':')[1]}"]
    (thread,) = run.threads
    slept = thread["wait_ns"]["sleep"]
    assert abs(sum(sleeps.values()) * run.startup["sample_period_ns"] / slept - 1) < 0.05
    # Speeding the sleep up by s shortens each round by s x the sleep: the
    # slope is the sleep's share of the thread's time (its own record).
    share = slept / (thread["end_ns"] - thread["start_ns"])
    result = line_result([out], line)
    assert 0.15 < share < 0.85, thread
    assert abs(result["slope"] - share) < 0.15, (result["slope"], share, result["points"])
    assert any(x["selected_blocked_ns"] > 0 for x in records(out) if x["type"] == "experiment")


def test_a_sleep_off_the_critical_path_predicts_nothing(tmp_path):
    # The side thread sleeps 4 ms while the main thread computes for about
    # twice as long: a profiler blind to the critical path would give the
    # sleep its share of the time (0.4). Measured on the 2-core host at a
    # load average of 2.6 to 6: slopes -0.15 to +0.06 over 12 runs.
    exe = build_program("offcpu", tmp_path)
    line = marker("LINE_SIDE_SLEEP")

    def profile(i):
        out = tmp_path / f"p{i}.coz"
        r = coz_run(["--fixed-line", line, "--experiment-length", "100ms", "-o", str(out)],
                    [exe, "parallel", "5", "8000000", "4000"])
        assert r.returncode == 0, r.stderr.decode()
        return out

    result, paths = precise_slope(profile, line)
    for run in load(paths).runs:
        assert sum(run.blocked["sleep"].values()) > 500
        side = sum(t["wait_ns"]["sleep"] for t in run.threads)
        (main,) = [t for t in run.threads if t["group"] == "main"]
        # The naive answer is far from 0: the side thread sleeps about half
        # as long as the main thread computes (against the main thread's CPU
        # time, not its wall time, which other work on the machine stretches).
        assert side / main["cpu_ns"] > 0.25, (side, main)
    # When other work stretches the main thread's computing, it sometimes
    # reaches the join before the side thread's sped-up sleep has ended; its
    # wait must then absorb no more delay than its own length (it took all
    # of the sleep's: slopes 0.05-0.13 beside one busy loop, 0.23-0.44 on a
    # busier host).
    assert abs(result["slope"]) < 0.2, (len(paths), result["slope_ci"], result["points"])


def test_blocked_scope_without_sleeps_leaves_them_alone(tmp_path):
    exe = build_program("offcpu", tmp_path)
    out = tmp_path / "n.coz"
    r = coz_run(["--fixed-line", marker("LINE_SLEEP"), "--blocked-scope", "il", "--experiment-length", "50ms",
                 "-o", str(out)], [exe, "serial", "1"])
    assert r.returncode == 0, r.stderr.decode()
    exps = [x for x in records(out) if x["type"] == "experiment"]
    # (A CPU sample may still land on the call's own instructions and earn
    # delay as such: only the sleeping is left alone.)
    assert exps and all(x.get("selected_blocked_ns", 0) == 0 for x in exps)
    assert records(out)[0]["blocked_scope"] == "il"


@pytest.mark.parametrize("mode", [[], ["--sampling-only"]], ids=["causal", "sampling-only"])
def test_a_call_that_keeps_the_cpu_is_not_time_off_it(tmp_path, mode):
    # The writer's pwrite calls copy 1 MiB each in the kernel and never block:
    # their time is the io category's (time inside the calls) but not time off
    # the CPU, which the switch records give (off_cpu_ns). The sleeper's
    # nanosleep calls are both, and so is the idler's wait, still under way
    # when the program exits.
    exe = build_program("calls_on_cpu", tmp_path)
    out = tmp_path / "c.coz"
    r = coz_run([*mode, "-o", str(out)], [exe, "1.5"])
    assert r.returncode == 0, r.stderr.decode()
    threads = {t["group"]: t for t in records(out) if t["type"] == "thread"}
    writer, sleeper, idler = threads["writer"], threads["sleeper"], threads["idler"]

    def own(t):
        # its life less the runtime's pauses: in causal mode each of the writer
        # and the sleeper pays the delays of experiments on the other's calls
        return t["end_ns"] - t["start_ns"] - t["paused_ns"]
    assert writer["wait_ns"]["io"] > 0.5 * own(writer), json.dumps(writer)
    assert writer["off_cpu_ns"] < 0.05 * own(writer), json.dumps(writer)
    slept = sleeper["wait_ns"]["sleep"]
    assert slept > 0.5 * own(sleeper), json.dumps(sleeper)
    assert 0.8 * slept < sleeper["off_cpu_ns"] < slept + 0.05 * own(sleeper), json.dumps(sleeper)
    # A wait under way at the end counts, in its kind and off the CPU.
    assert idler["wait_ns"]["sync"] > 0.9 * own(idler) and idler["off_cpu_ns"] > 0.9 * own(idler), \
        json.dumps(idler)
    # The stacks: a blocked sample stands for its call's time off the CPU, and
    # the call's time on it is CPU time under coz_kernel_in_io. The
    # writer's io is (nearly) all the latter, the sleeper's sleep the former.
    run = load([str(out)]).runs[0]
    period = run.startup["sample_period_ns"]
    by = {}
    for s in run.stacks.values():
        key = (s.group, "kernel" if kernel_call_kind(run, s) else s.kind)
        by[key] = by.get(key, 0) + run.stack_counts[s.id][1]
    assert by.get(("writer", "io"), 0) < 0.05 * own(writer) + period, (by, writer)
    assert writer["call_cpu_ns"] == by.get(("writer", "kernel"), 0) > 0.5 * writer["wait_ns"]["io"], (by, writer)
    assert 0.8 * slept - 2 * period < by.get(("sleeper", "sleep"), 0) <= slept, (by, sleeper)
    assert by.get(("sleeper", "kernel"), 0) < 0.05 * own(sleeper) + period, (by, sleeper)
    # The runtime's own CPU time in the threads counts under the call it
    # served (its frames collapse into the interposed function): a CPU stack
    # rooted in libcoz.so is the sample handler's unwinding alone. Built
    # without frame pointers, the runtime's samples read outside the signal
    # were rooted in coz::settle_wait, coz::drain_perf and the like.
    def root(s):
        loc = run.locations[s.locations[-1]]
        return loc.lines[0][0] if loc.lines and loc.lines[0][0] else hex(loc.object_offset)
    rooted = {root(s): run.stack_counts[s.id][0] for s in run.stacks.values()
              if s.kind == "cpu" and s.locations and "libcoz" in run.locations[s.locations[-1]].object
              and root(s) != "coz_runtime_unwinding"}
    assert sum(rooted.values()) <= 1, rooted
    # The report's table names the writer's group, not the sleeper's nor the idler's.
    rep = subprocess.run([sys.executable, "-m", "cozprof", "report", str(out)], capture_output=True,
                         env=coz_env(), timeout=60)
    assert rep.returncode == 0, rep.stderr.decode()
    text = rep.stdout.decode()
    assert "the time inside those calls" in text and "in writer (calls" in text, text
    assert "sleeper (calls" not in text and "idler (calls" not in text, text
