"""End-to-end runs of small programs under the real runtime (`coz run` with
build/libcoz/libcoz.so): known-answer predictions, the profile's records,
modes, options and errors as a user meets them.

Known-answer programs (programs/serial_ab.c, programs/two_threads.c) spend
their CPU time in one kernel, the same on every line (programs/spin.h: a
dependent multiply chain in a register), and run for a given wall time, so
a slower machine runs fewer rounds rather than longer. No expected value
comes from a step count: the known answer is what the same run measured
(the time of each line, timed by the program) or a real speedup, measured
by running the program with less work. Each tolerance states the
distribution it was taken from."""

import os
import re
import statistics
import subprocess
import time

import pytest

from conftest import PROGRAMS, count_records, coz_run, judged_if_precise, line_result, records

from cozprof.profile import load

SAMPLE_PERIOD_NS = 1000000  # the runtime's default sample period (1 ms)


def marker_line(program, marker):
    """Line number of the line carrying /* MARKER */ in programs/<program>.c."""
    with open(os.path.join(PROGRAMS, program + ".c")) as f:
        for n, text in enumerate(f, 1):
            if "/* " + marker + " */" in text:
                return n
    raise AssertionError(f"no {marker} in {program}.c")


def printed(stdout, prefix):
    """The `PREFIX key=value ...` lines a test program printed, as dicts of ints."""
    found = []
    for text in stdout.decode().splitlines():
        if text.startswith(prefix + " "):
            found.append({k: int(float(v)) for k, v in (f.split("=", 1) for f in text.split()[1:])})
    assert found, f"no '{prefix}' line in the program's output: {stdout!r}"
    return found


def median(values):
    values = list(values)
    assert values, "no points"
    return statistics.median(values)


class FixedLineRun:
    """One `coz run --fixed-line LINE` of a program: the line's analysis, the
    raw records and what the program printed. Speedups are chosen per
    experiment (half of them 0%), so that baseline and sped-up experiments
    interleave under the same machine conditions."""

    def __init__(self, tmp_path, exe, args, line, length):
        out = tmp_path / "fixed.coz"
        if out.exists():
            out.unlink()  # coz run appends: keep this run alone in the file
        r = coz_run(["--fixed-line", line, "--experiment-length", length, "-o", str(out)], [exe, *args])
        assert r.returncode == 0, r.stderr.decode()
        self.stdout = r.stdout
        self.records = records(out)
        # The line is the only one ever selected: no phase to correct.
        self.result = line_result([out], line)
        self.points = self.result["points"]


# ---- predictions with known answers ----
#
# Virtual machines like CI's change speed by a factor of two for seconds at a
# time, and shared machines run other work beside the tests: the analysis
# corrects slow drift with local baselines, but a few experiments per run can
# still be disturbed. So the measured points are checked with medians, which
# a few outliers cannot move.

SERIAL_MS = "5000"          # wall time of a known-answer run of serial_ab
SERIAL_EXPERIMENT = "50ms"  # about 90 experiments in a run
SERIAL_TOL = 0.12           # the gain's tolerance, and the precision a run must have to be judged


def serial_chain_check(run, which):
    """(measured gain per unit of speedup, expected, predicted at 50% - expected / 2)."""
    timed = printed(run.stdout, "serial_ab")[0]
    # Speeding line X by s saves s times X's time from every round: the
    # program speedup is s times X's share of the rounds' wall time, as this
    # very run timed it (2/3 for A and 1/3 for B, whatever the machine; a
    # share of the wall time, so that time the thread waited for a CPU
    # counts for the line it interrupted).
    expected = timed[f"{which.lower()}_wall_ns"] / timed["loop_wall_ns"]
    # The gain is the analysis' slope (least squares over the experiments),
    # not the median over the speedups of each one's program speedup / s:
    # on a 2-CPU Intel Xeon VM whose speed dips for tens of milliseconds
    # (serial_ab's baseline experiments: 32 to 116 rounds in 50 ms, standard
    # deviation 20%, on its CPU all along), dividing by s made the few
    # experiments at s = 0.2-0.3 weigh most, and that median read B's gain
    # 0.034 below to 0.148 above its share over 14 quiet runs (mean +0.05;
    # once +0.207), where the slope read 0.091 below to 0.089 above (mean
    # +0.007).
    gain = run.result["slope"]
    return gain, expected, run.result["predicted"]["0.5"] - expected / 2


@pytest.mark.parametrize("which", ["A", "B"])
def test_serial_chain_line_predicts_its_share_of_the_round(build, tmp_path, which):
    exe = build("serial_ab")
    line = f"serial_ab.c:{marker_line('serial_ab', 'LINE_' + which)}"

    def measured(factor):
        run = FixedLineRun(tmp_path, exe, [str(factor * int(SERIAL_MS))], line, SERIAL_EXPERIMENT)
        gain, expected, pred_error = serial_chain_check(run, which)
        lo, hi = run.result["slope_ci"]
        found = f"gain {gain:+.3f} [{lo:+.3f}, {hi:+.3f}] against {expected:.3f}"
        # The known answer holds when the thread ran whenever it could. When
        # it waited for a CPU, its lines' shares of the wall time are what
        # bursts of other work made them (B's 0.41 of the wall time for 1/3
        # of the CPU time beside two helpers' builds at a load average of
        # 30), and virtual speedup, which delays by CPU time, cannot see them
        # (docs/analysis.md, "Oversubscribed CPUs"; issue 15): the test is
        # skipped, saying what was found.
        timed = printed(run.stdout, "serial_ab")[0]
        waited = timed["loop_wall_ns"] / timed["loop_cpu_ns"] - 1
        if waited >= QUIET_WAIT:
            pytest.skip(f"serial chain {which}: the thread waited for a CPU {waited:.0%} of its CPU time (other "
                        f"work on the machine), so the prediction is not compared with the known answer: {found}")
        return (lo, hi), found, (run, gain, expected, pred_error)

    # A run whose slope is known to less than the tolerance (its 95%
    # interval's half-width wider) cannot tell a right answer from a wrong
    # one (where the host's speed dips for tens of milliseconds, a 2-CPU
    # Intel Xeon VM, 2026-11-28: half-widths 0.07 to 0.14 on B): it is made
    # again three times as long (conftest.judged_if_precise).
    (run, gain, expected, pred_error), found = judged_if_precise(measured, 2 * SERIAL_TOL, f"serial chain {which}")
    # Measured on a 2-vCPU AMD EPYC VM shared with other work (runtime
    # 7028355), the median of the points' gains - expected over 20 runs per
    # line: A -0.083 to +0.027, B -0.087 to +0.041 (10 of them beside one
    # busy loop); predicted at 50% - expected / 2: -0.048 to +0.028. The
    # slope on a 2-CPU Intel Xeon VM (2026-11-28, quiet, one 5 s run each):
    # A -0.052 to +0.054 over 8 runs, B -0.113 to +0.089 over 22.
    assert gain == pytest.approx(expected, abs=SERIAL_TOL), (found, run.points)
    assert abs(pred_error) < 0.08, (found, run.result)


# CPU microseconds of LONG and SHORT per round (about 7 ms rounds, 35 per
# experiment). Not whole milliseconds: with a fixed 1 ms sampling period, a
# thread living a whole number of milliseconds would get one sample more or
# less at random.
TWO_THREADS_US = (6500, 3250)
TWO_THREADS_MS = "12000"       # wall time of a profiled run: about 45 experiments
TWO_THREADS_REAL_MS = "3000"   # wall time of each of the three runs measuring the real speedups
TWO_THREADS_EXPERIMENT = "250ms"


def measure_two_threads_real(exe, out):
    """Real program speedups of two_threads: {"long_25", "long_75", "long_90",
    "short_50", "period_ms"}.

    A run takes five settings in turn, round by round: as profiled, LONG
    with 3/4 of its work (sped up by 25%), LONG with 1/4 (by 75%: shorter
    than SHORT, where the gain stops when the CPUs are free), LONG with 1/10
    (by 90%: beside other work, LONG's time on a CPU still slows SHORT, and
    the gain goes on rising), SHORT with half of its work. The run
    is under `coz run --fixed-speedup 0` (sampling and experiments, no
    delay), so that rounds pay what starting two sampled threads costs, as
    they do in the profiled runs: that cost dilutes the gain."""
    long_us, short_us = TWO_THREADS_US
    settings = [(long_us, short_us), (long_us * 3 // 4, short_us), (long_us // 4, short_us),
                (long_us // 10, short_us), (long_us, short_us // 2)]
    # Median rounds: a round stalled for long (the machine busy elsewhere, the
    # profiler reading debug information at start) does not move them. And
    # each gain the median of three runs' (each run's settings met the same
    # conditions): one run of the suite under load (2026-11-30) read rounds
    # of 19 ms for the program as profiled against 7.2 ms with SHORT halved,
    # where runs beside a busy loop read 10.3-10.7 and 8.6-9.0 ms (6 runs):
    # SHORT at 50% "really" gained 62%, and both tests of the module compared
    # their predictions with that.
    runs = []
    for _ in range(3):
        r = coz_run(["--fixed-speedup", "0", "-o", str(out)],
                    [exe, TWO_THREADS_REAL_MS, *[str(v) for s in settings for v in s]])
        assert r.returncode == 0, r.stderr.decode()
        period = [s["median_round_ns"] for s in printed(r.stdout, "setting")]
        assert len(period) == 5, r.stdout
        runs.append({"long_25": 1 - period[1] / period[0], "long_75": 1 - period[2] / period[0],
                     "long_90": 1 - period[3] / period[0], "short_50": 1 - period[4] / period[0],
                     "period_ms": period[0] / 1e6})
    return {key: median(run[key] for run in runs) for key in runs[0]}


@pytest.fixture(scope="module")
def two_threads_real(build, tmp_path_factory):
    return measure_two_threads_real(build("two_threads"), tmp_path_factory.mktemp("two_threads_real") / "real.coz")


def two_threads_run(build, tmp_path, marker):
    exe = build("two_threads")
    line = f"two_threads.c:{marker_line('two_threads', marker)}"
    return FixedLineRun(tmp_path, exe, [TWO_THREADS_MS, *[str(v) for v in TWO_THREADS_US]], line,
                        TWO_THREADS_EXPERIMENT)


# Below this much waiting for a CPU per unit of CPU time (LONG and SHORT
# together), the threads ran whenever they could: the condition under which
# virtual speedup predicts real speedups (docs/analysis.md measures how far
# it strays when the CPUs are oversubscribed). Measured: 0.01 to 0.10 with
# nothing else running; 0.25 to 0.8 beside other work, 0.6 to 2.8 beside
# one busy loop more.
QUIET_WAIT = 0.15


def paused_shares(run):
    """(LONG's paused time, SHORT's paused time), each per unit of the delay
    the profiler inserted over the run (every experiment's delay_ns), with
    the delay each was credited for sitting preempted (`preempt_credited_ns`:
    a thread that waited for a CPU while the line ran had waited that long
    already, and did not pause for it; beside a busy loop LONG paused 0.26
    of SHORT's delay once that credit existed).

    The program times the rest of each thread's wall time on its line, beyond
    its CPU time and its waits for a CPU: a sleep's pause, measured apart
    from the runtime. A thread that waits for a CPU pays its debts by holding
    its CPU instead (docs/runtime.md, "Virtual speedup"), which the program
    sees as CPU time and waiting: when any of LONG's or SHORT's threads did,
    the figures are the runtime's own, the `paused_ns` of the records of the
    threads started with run_long and run_short (sleeps and held pauses)."""
    timed = printed(run.stdout, "setting")[0]
    inserted = sum(e["delay_ns"] for e in run.records if e["type"] == "experiment")
    assert inserted > 0, "no delay was inserted"
    threads = {side: [t for t in run.records if t["type"] == "thread" and t["group"] == "run_" + side]
               for side in ("long", "short")}
    credited = {side: sum(t.get("preempt_credited_ns", 0) for t in threads[side]) for side in threads}
    if any(t.get("paused_cpu_ns") for side in threads.values() for t in side):
        paid = {side: sum(t["paused_ns"] for t in threads[side]) for side in threads}
    else:
        paid = {side: timed[side + "_paused_ns"] for side in threads}
    return tuple((paid[side] + credited[side]) / inserted for side in ("long", "short"))


def waited_for_cpu(run):
    """Time LONG and SHORT spent runnable but waiting for a CPU, per unit of
    their CPU time on their lines, in the profiled run (about 0.03 when
    nothing else competes for the CPUs)."""
    timed = printed(run.stdout, "setting")[0]
    return timed["wait_ns"] / (timed["long_cpu_ns"] + timed["short_cpu_ns"])


def real_curve(real, s):
    """The real program speedup of two_threads when LONG is faster by s: through
    the measured points (0, 0), (25%, long_25), (75%, long_75), (90%,
    long_90), level beyond. With the CPUs free it is level from 75% (LONG is
    then shorter than SHORT: the round waits for SHORT; long_90 - long_75
    +0.000 to +0.007 over 6 runs); beside a busy loop it still rises
    (+0.087 to +0.104 over 6 runs), which a curve level from 75% read as
    the profile's error (measured - real from 60%: -0.034 to +0.105 over 10
    runs; -0.029 to +0.032 over 6 with the point at 90%)."""
    knots = [(0.0, 0.0), (0.25, real["long_25"]), (0.75, real["long_75"]), (0.9, real["long_90"])]
    for (s0, v0), (s1, v1) in zip(knots, knots[1:]):
        if s <= s1:
            return v0 + (v1 - v0) * (s - s0) / (s1 - s0)
    return knots[-1][1]


def shorter_line_check(run):
    """(median program speedup of the points at 20% and more, predicted at 50%)."""
    return (median(p["program_speedup"] for p in run.points if p["speedup"] >= 0.2),
            run.result["predicted"]["0.5"])


def described(check, *args):
    """check(*args), or the reason it has no value (too few points when other
    work slowed the run down), for a warning."""
    try:
        return ", ".join(f"{v:+.3f}" for v in check(*args))
    except AssertionError as e:
        return str(e).splitlines()[0]


def longer_line_check(run, real):
    """(median of measured - real over the points at 5-45%, the same at 60% and more)."""
    lo = median(p["program_speedup"] - real_curve(real, p["speedup"])
                for p in run.points if p["speedup"] <= 0.45)
    hi = median(p["program_speedup"] - real_curve(real, p["speedup"])
                for p in run.points if p["speedup"] >= 0.6)
    return lo, hi


# Beyond this much waiting for a CPU per unit of CPU time, the two-thread
# predictions are not compared with the real speedups: beside one busy loop
# (0.66 to 0.75) they match them (docs/analysis.md, "Two threads"), beside
# two (1.08 to 1.22) they do not yet (SHORT at 50% read 0.06 to 0.10 below
# its real +0.14 to +0.18; LONG's rise 0.12 to 0.16 below; issue 15).
CROWDED_WAIT = 0.9


def skip_if_crowded(run, what, found):
    """When other work held the CPUs more than CROWDED_WAIT during the run,
    skips the rest of the test, saying what was found (listed in the summary
    with the reason). Returns the wait (waited_for_cpu) otherwise."""
    waited = waited_for_cpu(run)
    if waited >= CROWDED_WAIT:
        pytest.skip(f"{what}: LONG and SHORT waited for a CPU {waited:.0%} of their CPU time (other work "
                    f"on the machine), beyond the {CROWDED_WAIT:.0%} where predictions were measured to "
                    f"hold, so the prediction is not compared with the real speedup: {found}")
    return waited


def test_two_threads_shorter_line_predicts_its_real_gain(build, tmp_path, two_threads_real):
    # Each round waits for the longer thread: with the CPUs free, speeding the
    # shorter one gains nothing; beside other work, it gives LONG more CPU.
    run = two_threads_run(build, tmp_path, "LINE_SHORT")
    long_paused, short_paused = paused_shares(run)
    why = (f"LONG paused {long_paused:.2f} and SHORT {short_paused:.2f} of the delay inserted; "
           f"real run {two_threads_real}; points {run.points}")
    # The delay SHORT earns is paid by LONG, the thread the round waits for,
    # while it runs, never by SHORT itself. Measured over 50 runs: LONG 0.98
    # to 1.03 of the delay when the CPUs were free, down to 0.47 beside busy
    # processes (waiting for a CPU after a pause counts as waiting, not as
    # paused); SHORT at most 0.014. The runtimes of aa7479c to 3cfbaf8 paused
    # neither thread (LONG 0.000 to 0.005).
    assert long_paused > 0.3, why
    assert short_paused < 0.05, why
    waited = skip_if_crowded(run, "shorter line", f"median, predicted at 50%: {described(shorter_line_check, run)}; "
                                                  f"real {two_threads_real['short_50']:+.3f} at 50%")
    level, predicted = shorter_line_check(run)
    # With the CPUs free the real curve is level at 0 (real at 50%: -0.011
    # to +0.001 over 6 runs). Measured, 26 runs: median -0.044 to +0.027,
    # predicted at 50% -0.063 to +0.020. Beside a busy loop, SHORT competes
    # with LONG for a CPU and really finishing it sooner gains (+0.153 to
    # +0.170 at 50%), so the curve rises: predicted at 50% - real -0.037 to
    # -0.007 over 14 runs; -0.016 to +0.001 over 6 with the CPUs free.
    if waited < QUIET_WAIT:
        assert abs(level) < 0.1, why
    assert abs(predicted - two_threads_real["short_50"]) < 0.08, why


def test_two_threads_longer_line_gains_then_saturates(build, tmp_path, two_threads_real):
    # Speeding LONG by s shortens every round by s times LONG's time until
    # LONG is as short as SHORT: the real curve rises (a little slower than
    # s: starting and joining the threads costs time too), then levels off.
    run = two_threads_run(build, tmp_path, "LINE_LONG")
    long_paused, short_paused = paused_shares(run)
    why = (f"LONG paused {long_paused:.2f} and SHORT {short_paused:.2f} of the delay inserted; "
           f"real run {two_threads_real}; points {run.points}")
    # LONG earns the delay and never pays it; SHORT pays it while it runs
    # (what LONG earns after SHORT has ended is paid by nobody: the main
    # thread, woken by LONG, is credited with it). Measured over 50 runs:
    # LONG at most 0.006; SHORT 0.46 to 0.69 in 40 runs with the CPUs mostly
    # free, down to 0.22 beside a busy loop (10 runs).
    assert long_paused < 0.05, why
    assert short_paused > 0.15, why
    skip_if_crowded(run, "longer line", f"measured - real while rising, from 60%: "
                                        f"{described(longer_line_check, run, two_threads_real)}")
    lo, hi = longer_line_check(run, two_threads_real)
    # It rises as the real program does (slope about 0.95: real long_25 / 0.25)
    # and levels off where it does (about 0.48; a profiler that ignored the
    # other thread would go on rising, to about 0.75 at 80%). Measured when
    # the CPUs were free, 25 runs of 10 s (runtimes d64dcd1 and 7028355):
    # rising -0.084 to +0.022, level -0.014 to +0.068; 6 runs (bc6f643):
    # -0.000 to +0.025, -0.004 to +0.053. Beside a busy loop (bc6f643), 6
    # runs: rising +0.009 to +0.058, from 60% -0.029 to +0.032.
    assert abs(lo) < 0.12, why
    assert abs(hi) < 0.12, why


# ---- the profile as written ----

def sample_ratio_check(stdout, recs):
    """(samples of line A / samples of line B, A's CPU time / B's as the program timed them)."""
    a, b = marker_line("serial_ab", "LINE_A"), marker_line("serial_ab", "LINE_B")
    samples = {}
    for x in recs:
        if x["type"] == "samples":
            for k, v in x["counts"].items():
                samples[k] = samples.get(k, 0) + v
    timed = printed(stdout, "serial_ab")[0]
    return (samples[f"{PROGRAMS}/serial_ab.c:{a}"] / samples[f"{PROGRAMS}/serial_ab.c:{b}"],
            timed["a_cpu_ns"] / timed["b_cpu_ns"], samples)


@pytest.mark.parametrize("mode", [[], ["--sampling-only", "--sample-period", "1ms"]], ids=["causal", "sampling-only"])
def test_random_periods_do_not_alias_with_a_periodic_program(build, tmp_path, mode):
    # Each round of aliasing.c is 1 ms of its thread's CPU time, half on A
    # and half on B, by its own CPU clock: a fixed 1 ms period samples every
    # round at the same phase. Randomized periods must split the samples as
    # the lines split the time. Measured with the period fixed at its mean
    # (draw_period patched): every sample on A in 2 runs on a quiet machine
    # (and most samples lost, landing in the clock's system call); beside
    # other work, preemptions restart the period and break the lockstep
    # (A's share 0.26 to 0.55). Randomized: 0.49 to 0.55 (8 runs at load
    # averages of 2 to 7; about 1,000 samples, binomial spread 0.016).
    exe = build("aliasing")
    out = tmp_path / "alias.coz"
    r = coz_run(["-o", str(out), *mode], [exe, "1000"])
    assert r.returncode == 0, r.stderr.decode()
    counts = {}
    for x in count_records(out):
        if x["type"] == "samples":
            for k, v in x["counts"].items():
                counts[k] = counts.get(k, 0) + v
    a = counts.get(f"{PROGRAMS}/aliasing.c:{marker_line('aliasing', 'LINE_A')}", 0)
    b = counts.get(f"{PROGRAMS}/aliasing.c:{marker_line('aliasing', 'LINE_B')}", 0)
    assert a + b > 500, counts
    assert 0.4 < a / (a + b) < 0.6, counts


def test_profile_records_are_whole_and_ordered(build, tmp_path):
    exe = build("serial_ab")
    out = tmp_path / "p.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms"], [exe, "1500"])
    assert r.returncode == 0, r.stderr.decode()
    recs = records(out)
    assert recs[0]["type"] == "startup" and recs[0]["version"] == 1
    assert recs[0]["mode"] == "causal" and recs[0]["sampler"] == "perf_event"
    assert recs[0]["sample_period_ns"] == 1000000 and recs[0]["experiment_length_ns"] == 100000000
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit"
    exps = [x for x in recs if x["type"] == "experiment"]
    assert len(exps) >= 3
    a, b = marker_line("serial_ab", "LINE_A"), marker_line("serial_ab", "LINE_B")
    chosen = [e["selected"] for e in exps]
    # Lines are chosen in proportion to their samples: A or B almost always,
    # but a rare sample elsewhere in the loop may be chosen too: its
    # COZ_PROGRESS line, or the clock reads spin.h inlines into it (6 of
    # 6,000 samples in 4 runs; chosen in 2 runs of about 40, 2026-11-26).
    program_lines = (f"{PROGRAMS}/serial_ab.c:", f"{PROGRAMS}/spin.h:")
    assert all(c.startswith(program_lines) for c in chosen), [c for c in chosen if not c.startswith(program_lines)]
    main_lines = {f"{PROGRAMS}/serial_ab.c:{a}", f"{PROGRAMS}/serial_ab.c:{b}"}
    assert sum(c in main_lines for c in chosen) >= len(chosen) - 1, chosen
    for e in exps:
        assert e["duration_ns"] + e["delay_ns"] == e["wall_ns"]
        assert [p["name"] for p in e["progress"]] == ["round"]
    # A sample of the selected line earns speedup x the time it stands for
    # (`selected_ns`): its sampling period, drawn in [0.5, 1.5) ms, plus the
    # time the thread waited for a CPU since the previous sample. With one
    # program thread, the global delay is what that thread earned: exactly,
    # but for truncation to the ns at each hit, and a hit that may straddle an
    # experiment's end (counted after its delay was read).
    exact = [e for e in exps
             if abs(e["delay_ns"] - e["speedup"] * e["selected_ns"]) <= e["selected_samples"] + 1]
    assert len(exact) >= len(exps) - 2, [(e["delay_ns"], e["speedup"], e["selected_ns"]) for e in exps]
    # What a sample stands for: about 1 ms (the mean of the drawn periods; sd
    # of the run's mean 0.03 over its ~90 draws, measured 0.985 to 1.03 in 8
    # quiet runs), more when the loop waited for a CPU. A thread cannot earn
    # more than speedup x the time that went by (plus one sample straddling
    # the start).
    loop = printed(r.stdout, "serial_ab")[0]
    waited = (loop["loop_wall_ns"] - loop["loop_cpu_ns"]) / loop["loop_cpu_ns"]
    per_sample = sum(e["selected_ns"] for e in exps) / sum(e["selected_samples"] for e in exps)
    assert 0.85 * SAMPLE_PERIOD_NS <= per_sample, (per_sample, waited)
    inserted = sum(e["delay_ns"] for e in exps)
    assert inserted <= sum(e["speedup"] * (e["wall_ns"] + 2 * SAMPLE_PERIOD_NS) for e in exps), inserted
    # Samples split between the lines as their CPU time does, as the program
    # timed it with CLOCK_THREAD_CPUTIME_ID (about 2 : 1 on any CPU, with one
    # kernel on both lines).
    ratio, timed, samples = sample_ratio_check(r.stdout, recs)
    # Measured (50 runs, 10 beside a busy loop): -12% to +16% off the CPU ratio.
    assert ratio == pytest.approx(timed, rel=0.25), (timed, samples)
    assert recs[-1]["samples"] >= sum(samples.values())


def test_stdio_and_exit_status_pass_through(build, tmp_path):
    exe = build("echo_exit")
    data = b"causal\x00profiling\n" * 1000
    plain = subprocess.run([exe], input=data, capture_output=True)
    profiled = coz_run(["-o", str(tmp_path / "e.coz")], [exe], input=data)
    assert plain.returncode == profiled.returncode == 7
    assert profiled.stdout == plain.stdout == data
    # The program's standard error, then only coz's own lines after it
    # exited: its summary (docs/commands.md).
    assert profiled.stderr.startswith(plain.stderr), profiled.stderr
    added = profiled.stderr[len(plain.stderr):].decode().splitlines()
    assert added and all(x.startswith("coz: ") for x in added), added
    assert added[-1].startswith("coz: note: "), added


def test_fixed_line_matching_no_line_is_a_one_line_error(build, tmp_path):
    exe = build("serial_ab")
    r = coz_run(["--fixed-line", "serial_ab.c:1", "-o", str(tmp_path / "x.coz")], [exe, "10"])
    assert r.returncode == 125  # coz's own error, as env(1) does (docs/commands.md)
    err = r.stderr.decode()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert lines[0].startswith("coz: error: --fixed-line serial_ab.c:1 matches no line"), err
    assert len(lines) == 2 and lines[1].startswith("coz: ") and "coz: coz:" not in err, err
    assert r.stdout == b"", "the program must not run"
    assert not (tmp_path / "x.coz").exists(), "no empty profile is left behind"


def test_upstream_header_builds_are_counted(build, tmp_path):
    # A program compiled against Debian's /usr/include/coz.h (upstream's).
    assert os.path.exists("/usr/include/coz.h"), "coz-profiler (upstream) is installed by the bootstrap script"
    exe = tmp_path / "serial_upstream_h"
    subprocess.run(["cc", "-g", "-O1", "-I/usr/include", "-include", "/usr/include/coz.h",
                    os.path.join(PROGRAMS, "serial_ab.c"), "-o", str(exe)], check=True)
    # -include makes sure upstream's header is the one that defines COZ_H first.
    out = tmp_path / "u.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms"], [str(exe), "600"])
    assert r.returncode == 0, r.stderr.decode()
    deltas = [p["delta"] for x in records(out) if x["type"] == "experiment" for p in x["progress"]]
    assert sum(deltas) > 100


def test_end_to_end_mode_runs_one_experiment(build, tmp_path):
    exe = build("serial_ab")
    out = tmp_path / "e2e.coz"
    line = f"serial_ab.c:{marker_line('serial_ab', 'LINE_A')}"
    r = coz_run(["--end-to-end", "--fixed-line", line, "--fixed-speedup", "40", "-o", str(out)], [exe, "300"])
    assert r.returncode == 0, r.stderr.decode()
    recs = records(out)
    assert recs[0]["mode"] == "end-to-end"
    exps = [x for x in recs if x["type"] == "experiment"]
    assert len(exps) == 1
    assert exps[0]["speedup"] == 0.4
    assert {"name": "end-to-end", "kind": "throughput", "delta": 1} in exps[0]["progress"]
    assert exps[0]["selected_samples"] > 0


def test_end_to_end_mode_does_not_ask_for_a_progress_point(tmp_path):
    # A program without progress points or debug information: --end-to-end's
    # progress is the run's end, so the warning that suggests it is not given
    # (it once was). The missing debug information is still said.
    out = tmp_path / "e2e.coz"
    r = coz_run(["--end-to-end", "-o", str(out)], ["/bin/sleep", "0.05"])
    assert r.returncode == 0, r.stderr.decode()
    err = r.stderr.decode()
    assert "no debug information" in err and "no progress point" not in err, err
    assert "no-progress-point" not in [w["code"] for w in records(out) if w["type"] == "warning"]


def test_latency_points_count_arrivals_and_departures(build, tmp_path):
    exe = build("requests")
    out = tmp_path / "lat.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms"], [exe, "1.5"])
    assert r.returncode == 0, r.stderr.decode()
    lat = [p for x in records(out) if x["type"] == "experiment" for p in x["progress"] if p["kind"] == "latency"]
    assert lat and all(p["name"] == "request" for p in lat)
    assert sum(p["arrivals"] for p in lat) > 50
    for p in lat:
        assert abs(p["arrivals"] - p["departures"]) <= 2
        assert 0 <= p["difference"] <= 2  # two workers: at most two requests in flight


def test_progress_point_from_the_command_line(build, tmp_path):
    exe = build("no_coz_loop")
    out = tmp_path / "bp.coz"
    line = f"no_coz_loop.c:{marker_line('no_coz_loop', 'LINE_ITEM_DONE')}"
    r = coz_run(["-p", line, "-o", str(out), "--experiment-length", "100ms"], [exe, "20000"])
    assert r.returncode == 0, r.stderr.decode()
    exps = [x for x in records(out) if x["type"] == "experiment"]
    assert exps
    counted = sum(p["delta"] for x in exps for p in x["progress"] if p["name"] == line)
    # Every item passes the breakpoint once; experiments cover most of the run.
    assert 5000 < counted <= 20000, counted


def test_legacy_format_on_request(build, tmp_path):
    exe = build("serial_ab")
    out = tmp_path / "legacy.coz"
    r = coz_run(["--format", "legacy", "-o", str(out), "--experiment-length", "100ms"], [exe, "600"])
    assert r.returncode == 0, r.stderr.decode()
    text = out.read_text()
    assert text.startswith("startup\ttime=")
    assert re.search(r"^experiment\tselected=\S+:\d+\tspeedup=\d\.\d\d\tduration=\d+\tselected-samples=\d+$", text, re.M)
    assert re.search(r"^throughput-point\tname=round\tdelta=\d+$", text, re.M)
    prof = load([str(out)])
    assert len(prof.experiments) >= 3
    # A line's samples records are running counts (a reader keeps the last):
    # their last values add up to about every sample the run took.
    last = dict(re.findall(r"^samples\tlocation=(\S+)\tcount=(\d+)$", text, re.M))
    taken = int(re.findall(r"^shutdown\ttime=\d+\tsamples=(\d+)$", text, re.M)[-1])
    assert 0.8 * taken <= sum(map(int, last.values())) <= taken, (last, taken)


def test_no_debug_information_is_named_with_the_fix(build, tmp_path):
    exe = build("serial_ab", flags=("-O1", "-g0"))
    out = tmp_path / "nodebug.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "50ms"], [exe, "500"])
    assert r.returncode == 0
    err = r.stderr.decode()
    assert f"coz: warning: {exe} has no debug information: rebuild it with -g" in err, err
    warnings = [x for x in records(out) if x["type"] == "warning"]
    assert any(w["code"] == "no-debug-info" and exe in w["message"] for w in warnings)


def test_exit_does_not_wait_for_the_running_experiment(build, tmp_path):
    # A 10 s experiment must not hold a short program's exit (upstream waits it out).
    exe = build("serial_ab")
    start = time.monotonic()
    r = coz_run(["-o", str(tmp_path / "x.coz"), "--experiment-length", "10s"], [exe, "300"])
    elapsed = time.monotonic() - start
    assert r.returncode == 0
    assert elapsed < 5, elapsed
    recs = records(tmp_path / "x.coz")
    assert recs[-1]["type"] == "shutdown"
    assert any(x["type"] == "experiment" and x["partial"] for x in recs)


@pytest.mark.parametrize("mode,counted", [([], True), (["--sampling-only"], False), (["--locks-only"], False)],
                         ids=["causal", "sampling-only", "locks-only"])
def test_progress_points_are_counted_only_where_experiments_read_them(build, tmp_path, mode, counted):
    # Without experiments no count is read: the runtime gives the program no
    # counter, and its progress points stay no-ops, as without the profiler
    # (a hot point shared by threads otherwise passes a cache line between
    # CPUs at every increment: x1.9 on locks_primitive under --locks-only).
    exe = build("progress_counter")
    r = coz_run(["-o", str(tmp_path / "p.coz"), "--experiment-length", "50ms", *mode], [exe])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == ("counter given" if counted else "counter none")
    plain = subprocess.run([exe], capture_output=True, timeout=60)
    assert plain.stdout.decode().strip() == "counter none"


def test_the_runtime_has_no_dynamic_static_initializers(libcoz):
    # The runtime starts its profiler thread from its constructor, which the
    # loader may run before other files' static initializers: a global
    # whose constructor ran then was built over the one the profiler thread
    # already used (a crash in about one run in five of a program starting
    # 3,000 threads). So every global of libcoz is constant-initialized, or
    # made on first use; the library has no initializer but its constructor.
    nm = subprocess.run(["nm", libcoz], capture_output=True, text=True, timeout=60)
    assert nm.returncode == 0, nm.stderr
    initializers = [ln.split()[-1] for ln in nm.stdout.splitlines() if "_GLOBAL__sub_I" in ln]
    assert initializers == []


@pytest.mark.parametrize("work_ms, stop_ms", [(800, 500), (10, 400)], ids=["in-experiments", "before-the-first"])
def test_an_experiment_across_a_stop_of_the_process_is_left_out(build, tmp_path, work_ms, stop_ms):
    # Ctrl-Z, SIGSTOP, a debugger or a frozen container stop every thread:
    # the experiment in progress measured wall time without progress, and
    # read as a slowdown of 668% for a line (found by hand). The runtime ends
    # it at the stop and marks it; the analysis leaves it out and says so.
    # After 10 ms of work no experiment has started yet (the first waits for
    # 16 samples): the stop falls between experiments, which no experiment
    # reads, but which is no usable time either.
    exe = build("stop_cont")
    out = tmp_path / "s.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms"], [exe, str(work_ms), str(stop_ms)])
    assert r.returncode == 0, r.stderr.decode()
    stopped_ns = int(r.stdout.split(b"stopped_ns=")[1].split()[0])
    assert stopped_ns >= stop_ms * 1_000_000
    exps = [x for x in records(out) if x["type"] == "experiment"]
    walls = [(x["wall_ns"], x.get("stalled_ns")) for x in exps]
    # The one across the stop is marked: the profiler thread's sleep overran
    # by the stop, less its own wait for a CPU (its run delay, which other
    # work or a container's spent quota makes, and which no stop explains).
    # No other is: measured beside four busy loops, none marked in 194
    # experiments; throttled to 0.2 CPU by a cgroup quota, none in 40. (The
    # stop may also fall between two experiments: then none is marked, and
    # none lasted it.)
    stalled = [x for x in exps if "stalled_ns" in x]
    assert len(stalled) <= 1 and all(w < stopped_ns for w, s in walls if s is None), walls
    for x in stalled:
        assert stopped_ns / 2 <= x["stalled_ns"] <= stopped_ns + 100_000_000, (walls, stopped_ns)
        assert x["wall_ns"] >= x["stalled_ns"]
    # The run time of the phase correction (T) leaves the stop out, as it
    # leaves the delays out, wherever the stop fell: main's wall time less
    # both, give or take the runtime's start before main and the exit after
    # it.
    wall_ns = int(r.stdout.split(b"wall_ns=")[1])
    runtime_ns = [x for x in records(out) if x["type"] == "runtime"][-1]["time_ns"]
    usable_ns = wall_ns - sum(x["delay_ns"] for x in exps) - stopped_ns
    assert usable_ns - 200_000_000 <= runtime_ns <= usable_ns + 150_000_000, (runtime_ns, usable_ns, walls)
    from cozprof import analysis
    result = analysis.analyze(load([str(out)]))
    assert result["summary"]["stalled_experiments"] == len(stalled)
    assert result["summary"]["experiments"] == len(exps)
    if stalled:
        assert any("1 experiment was left out: the whole process stood still" in w for w in result["warnings"])
    if work_ms < 16:
        assert not stalled, walls


def test_an_end_to_end_run_across_a_stop_is_marked_and_profiled_to_its_end(build, tmp_path):
    # The one experiment of an end-to-end run is not ended at the stall (the
    # profiler would have written its final records with the program still
    # running): it goes on to the end, marked, and the analysis leaves it out.
    exe = build("stop_cont")
    out = tmp_path / "e.coz"
    r = coz_run(["-o", str(out), "--end-to-end"], [exe, "300", "400"])
    assert r.returncode == 0, r.stderr.decode()
    cpu_ms = int(r.stdout.split(b"cpu_ms=")[1].split()[0])
    recs = records(out)
    exps = [x for x in recs if x["type"] == "experiment"]
    assert len(exps) == 1 and exps[0]["stalled_ns"] >= 200_000_000, exps
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit"
    assert [x["type"] for x in recs].count("shutdown") == 1
    # One sample per millisecond of CPU time, the work after the stop included.
    assert recs[-1]["samples"] > 0.8 * cpu_ms, (recs[-1], cpu_ms)
