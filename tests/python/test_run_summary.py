"""What `coz run` prints when the program ends: each runtime warning once, and
one summary line of what this invocation wrote (issue 10, point 3)."""

import glob
import json
import os
import random
import re
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, REPO, UPSTREAM_PROFILES
from cozprof import analysis, profile, run_summary

PYTHON_PATH = os.path.join(REPO, "python")


# -- lines with enough data: the analysis' rule, without numpy ----------------------------

def analysed_lines(runs_or_profile):
    prof = runs_or_profile
    if not isinstance(prof, profile.Profile):
        prof = profile.Profile([])
        prof.runs = list(runs_or_profile)
    return len({ln["line"] for ln in analysis.analyze(prof, bootstrap=10)["lines"]})


def test_constants_are_the_analysis_ones():
    assert run_summary.MIN_POINTS == analysis.DEFAULT_MIN_POINTS
    assert run_summary.FIXED_SPEEDUP_MIN_POINTS == analysis.FIXED_SPEEDUP_MIN_POINTS


def _profiles():
    paths = sorted(glob.glob(os.path.join(FIXTURES, "*.coz")))
    paths += sorted(glob.glob(os.path.join(UPSTREAM_PROFILES, "*.coz")))
    return paths


@pytest.mark.parametrize("path", _profiles(), ids=os.path.basename)
def test_lines_with_enough_data_match_the_analysis_on_every_fixture(path):
    prof = profile.load(path)
    assert run_summary.lines_with_enough_data(prof.runs) == analysed_lines(prof)


@pytest.mark.parametrize("path", _profiles(), ids=os.path.basename)
def test_the_summary_reads_the_same_without_the_records_it_skips(path):
    whole = profile.load(path)
    fast = profile.load(path, skip=run_summary.UNREAD)
    assert run_summary.summarize(fast.runs) == run_summary.summarize(whole.runs)
    assert [r.warnings for r in fast.runs] == [r.warnings for r in whole.runs]
    # The skipped records are really passed over, and nothing else is.
    assert not any(r.stacks or r.locations or r.stack_counts or r.threads for r in fast.runs)
    assert [len(r.experiments) for r in fast.runs] == [len(r.experiments) for r in whole.runs]


def random_runs(rng):
    """Runs in every mode, with the cases the rule turns on: no baseline, no progress at
    some speedups, partial experiments, experiments across a stall of the
    process, latency points with and without in-flight counts."""
    runs = []
    for index in range(rng.randint(1, 3)):
        mode = rng.choice(["causal", "fixed-line", "end-to-end"])
        fixed = rng.choice([None, None, 0.25, 0.0])
        run = profile.Run("r.coz", index, "json", {"mode": mode, "fixed_speedup": fixed})
        for _ in range(rng.randint(0, 25)):
            speedup = fixed if fixed is not None and rng.random() < 0.9 else rng.choice([0.0, 0.0, 0.1, 0.5, 0.75, 1.0])
            progress = []
            if rng.random() < 0.9:
                progress.append(profile.Progress("tp", profile.THROUGHPUT, delta=rng.choice([0, 0, 5, 40])))
            if rng.random() < 0.5:
                progress.append(profile.Progress(
                    "lat", profile.LATENCY, arrivals=rng.choice([0, 3, 9]), departures=rng.choice([0, 3]),
                    difference=rng.choice([None, 0, 1, 2, 2, -1])))
            run.experiments.append(profile.Experiment(
                rng.choice(["/a.c:1", "/a.c:2", "/b.c:7"]), speedup, rng.choice([0, 10**8, 3 * 10**8]),
                partial=rng.random() < 0.1, progress=progress, run=run, selected_samples=rng.randint(0, 9),
                stalled_ns=rng.choice([0] * 9 + [2 * 10**8])))
        runs.append(run)
    return runs


def analysed_curves(runs_or_profile):
    """{(unit, line, point): experiments in the curve}, by the analysis."""
    prof = runs_or_profile
    if not isinstance(prof, profile.Profile):
        prof = profile.Profile([])
        prof.runs = list(runs_or_profile)
    return {(ln["unit"], ln["line"], ln["progress_point"]): ln["experiments"]
            for ln in analysis.analyze(prof)["lines"]}


def test_lines_with_enough_data_match_the_analysis_on_random_profiles():
    rng = random.Random(20240610)
    counts = []
    for _ in range(300):
        runs = random_runs(rng)
        want = analysed_lines(runs)
        assert run_summary.lines_with_enough_data(runs) == want
        counts.append(want)
    assert {0, 1, 2, 3} <= set(counts)  # the cases cover no line, some lines and all lines


@pytest.mark.parametrize("path", _profiles(), ids=os.path.basename)
def test_usable_experiments_are_those_of_the_analysis_curves_on_every_fixture(path):
    prof = profile.load(path)
    found = run_summary.curves(prof.runs)
    assert {k: len(v) for k, v in found.items()} == analysed_curves(prof)


def test_usable_experiments_are_those_of_the_analysis_curves_on_random_profiles():
    """Per curve the same experiments as the analysis counts (speedups without
    progress left out), and each experiment counted once however many curves
    it enters."""
    rng = random.Random(20240611)
    usable = []
    for _ in range(300):
        runs = random_runs(rng)
        found = run_summary.curves(runs)
        assert {k: len(v) for k, v in found.items()} == analysed_curves(runs)
        n, sped_up = run_summary.usable_experiments(runs)
        every = {id(e): e for v in found.values() for e in v}
        assert n == len(every) <= sum(len(r.experiments) for r in runs)
        assert sped_up == sum(1 for e in every.values() if e.speedup > 0)
        usable.append((n, sum(len(v) for v in found.values())))
    assert any(0 < n < total for n, total in usable)  # experiments in two curves count once
    assert any(n == 0 for n, _ in usable)


# -- which files, and which part of them -------------------------------------------------

def append(path, text):
    with open(path, "a") as f:
        f.write(text)


def test_child_names_are_the_runtimes():
    assert run_summary.child_name("/d/profile.coz", 42) == "/d/profile.42.coz"
    assert run_summary.child_name("/d/profile", 42) == "/d/profile.42"
    assert run_summary.child_name("/d.x/profile", 42) == "/d.x/profile.42"
    assert run_summary.child_name("/d/run-%p.coz", 42) == "/d/run-42.coz"
    assert run_summary.expand_pid("/d/%p/p-%p.coz", 7) == "/d/7/p-7.coz"


def test_only_what_grew_during_the_run_is_read(tmp_path):
    main = tmp_path / "p.coz"
    main.write_text("old main\n")
    (tmp_path / "p.11.coz").write_text("old child, untouched\n")
    (tmp_path / "p.12.coz").write_text("old child, appended\n")
    (tmp_path / "p.old.coz").write_text("not a child's name\n")
    (tmp_path / "q.13.coz").write_text("another output\n")
    outputs = run_summary.Outputs(str(main), follow_children=True)
    append(main, "new main\n")
    append(tmp_path / "p.12.coz", "new child\n")
    (tmp_path / "p.14.coz").write_text("new child file\n")
    append(tmp_path / "p.old.coz", "grew, but not a profile of this run\n")
    assert outputs.written(root_pid=10) == [
        (str(main), len("old main\n")), (str(tmp_path / "p.12.coz"), len("old child, appended\n")),
        (str(tmp_path / "p.14.coz"), 0)]
    # Without --follow-children the children's files are not this run's.
    outputs = run_summary.Outputs(str(main), follow_children=False)
    (tmp_path / "p.15.coz").write_text("x\n")
    append(main, "more\n")
    assert [p for p, _ in outputs.written(root_pid=10)] == [str(main)]


def test_a_replaced_file_is_read_whole(tmp_path):
    main = tmp_path / "p.coz"
    main.write_text("an old profile, longer than the new one\n")
    outputs = run_summary.Outputs(str(main), follow_children=False)
    main.unlink()
    main.write_text("new\n")
    assert outputs.written(root_pid=1) == [(str(main), 0)]


def test_percent_p_files_are_found_by_pid(tmp_path):
    pattern = str(tmp_path / "run-%p.coz")
    (tmp_path / "run-5.coz").write_text("earlier run\n")
    outputs = run_summary.Outputs(pattern, follow_children=True)
    for pid in (20, 3):
        (tmp_path / f"run-{pid}.coz").write_text("x\n")
    (tmp_path / "run-x.coz").write_text("x\n")
    assert [p for p, _ in outputs.written(root_pid=20)] == [str(tmp_path / "run-20.coz"),
                                                            str(tmp_path / "run-3.coz")]
    assert outputs.child_pattern == str(tmp_path / "run-<pid>.coz")


# -- warnings and the line -------------------------------------------------------------------

def run_with(warnings, experiments=0, shutdown=None):
    r = profile.Run("x.coz", 0, "json", {"mode": "causal"})
    r.warnings = list(warnings)
    r.shutdown = shutdown
    r.experiments = [profile.Experiment("/a.c:1", 0.0, 10) for _ in range(experiments)]
    return r


def test_each_warning_once_with_the_number_of_processes():
    nodebug = [("no-debug-info", f"/usr/bin/tool{i} has no debug information") for i in range(8)]
    noprog = ("no-progress-point", "no progress point was reached")
    runs = [run_with([nodebug[i % 8], noprog, noprog]) for i in range(30)] + [run_with([])]
    lines = run_summary.warning_lines(runs)
    assert lines[:2] == ["coz: warning: /usr/bin/tool0 has no debug information (in 4 processes)",
                         "coz: warning: no progress point was reached (in 30 processes)"]
    assert len([ln for ln in lines if "has no debug information" in ln]) == run_summary.MAX_WARNINGS_PER_CODE
    assert lines[-1] == ("coz: warning: 3 more warnings of the same kind (no-debug-info); "
                         "'coz report' lists them all")
    assert len(lines) == run_summary.MAX_WARNINGS_PER_CODE + 2
    assert run_summary.warning_lines([run_with([noprog])]) == ["coz: warning: no progress point was reached"]
    # The images of one process (exec: a run each, one pid) are one process.
    images = [run_with([noprog]) for _ in range(3)]
    for r in images:
        r.startup["pid"] = 41
    assert run_summary.warning_lines(images) == ["coz: warning: no progress point was reached"]
    images[2].startup["pid"] = 42
    assert run_summary.warning_lines(images) == ["coz: warning: no progress point was reached (in 2 processes)"]


def test_warnings_of_processes_that_are_no_part_of_the_work_are_left_out():
    # `coz run --follow-children --- ./start.sh`: the shell reached no
    # progress point and has no debug information, and neither needs fixing.
    noprog = ("no-progress-point", "no progress point was reached")
    shell = run_with([("no-debug-info", "/usr/bin/dash has no debug information"), noprog], 0, {"samples": 3})
    work = run_with([("no-debug-info", "/usr/lib/libz.so has no debug information")], 2, {"samples": 400})
    work.experiments[0].progress = [profile.Progress("p", profile.THROUGHPUT, delta=5)]
    for r, pid in ((shell, 1), (work, 2)):
        r.startup["pid"] = pid
    assert run_summary.warning_lines([shell, work]) == ["coz: warning: /usr/lib/libz.so has no debug information"]
    # Alone, or beside a run that reached nothing or took as few samples, each is said.
    assert len(run_summary.warning_lines([shell])) == 2
    idle = run_with([], 1, {"samples": 3})
    idle.startup["pid"] = 3
    assert len(run_summary.warning_lines([shell, idle])) == 2
    # coz report reads the same rule.
    prof = profile.Profile([])
    prof.runs = [shell, work]
    assert prof.runtime_warnings() == ["/usr/lib/libz.so has no debug information"]


def test_runs_without_final_records_are_said_with_what_they_lack():
    # SIGKILL or the OOM killer: the profile lacks the thread table, the
    # counters and the last stacks, and nothing else said so.
    whole, cut = run_with([], 1, {"samples": 5}), run_with([], 1, None)
    for r, pid in ((whole, 7), (cut, 8)):
        r.startup["pid"] = pid
    assert run_summary.abrupt_lines([whole], 7, killed_by=9) == []
    [line] = run_summary.abrupt_lines([cut], 8, killed_by=9)
    assert line.startswith("coz: warning: the run ended without its final records (killed by SIGKILL): "
                           "its thread table and counters"), line
    # The signal is the program's: a child's cut run is not said to be killed by it.
    [line] = run_summary.abrupt_lines([whole, cut], 7, killed_by=9)
    assert line.startswith("coz: warning: 1 run of 2 ended without its final records (killed by SIGKILL "
                           "or the out-of-memory killer, or it made the exit system call itself, as Go "
                           "programs do)"), line
    # The program exited, with a status, and yet wrote no final records: it
    # did not pass through exit() or _exit() (a Go program).
    [line] = run_summary.abrupt_lines([cut], 8, exit_status=0)
    assert line.startswith("coz: warning: the run ended without its final records (it exited with status 0 "
                           "by the exit system call itself, not through exit() or _exit(), as Go programs "
                           "do): its thread table"), line
    [line] = run_summary.abrupt_lines([whole, cut], 7, exit_status=0)  # (a child's)
    assert "(killed by SIGKILL or the out-of-memory killer, or" in line, line
    # Upstream's formats have no shutdown record: nothing was cut.
    legacy = profile.Run("x.coz", 0, "legacy", {})
    assert run_summary.abrupt_lines([legacy], 0, killed_by=9) == []


def test_a_run_still_going_is_told_from_a_cut_one():
    # This very process stands for a run still going: its pid, its program,
    # started before the run's startup record.
    me = run_with([], 0, None)
    me.startup.update(pid=os.getpid(), argv0=os.readlink("/proc/self/exe"), time_ns=time.time_ns())
    assert profile.run_is_live(me)
    assert run_summary.abrupt_lines([me], 0) == [
        "coz: warning: the run is still going: its thread table and counters, and the stacks since the "
        "last write, come at the end; the profile holds what was written so far"]
    # Not this process: another program, or a run that started before this
    # process did (its pid was given to this process later), or no such pid.
    for change in ({"argv0": "/usr/bin/other"}, {"time_ns": time.time_ns() - 3600 * 10**9},
                   {"pid": 2**22 + 1}):
        other = run_with([], 0, None)
        other.startup.update(dict(me.startup, **change))
        assert not profile.run_is_live(other), change
        assert "ended without" in run_summary.abrupt_lines([other], 0)[0]


def test_summary_line_figures_and_plurals(tmp_path):
    outputs = run_summary.Outputs(str(tmp_path / "p.coz"), follow_children=True)
    runs = [run_with([], 2, {"samples": 700, "lost_records": 1, "dropped_samples": 0}),
            run_with([], 1, None)]  # ended abruptly: its samples come from the samples records
    runs[1].samples = {"/a.c:1": 30}
    runs[1].out_of_scope = 4
    figures = run_summary.summarize(runs)
    assert figures == {"processes": 2, "quiet": False, "experiments": 3, "usable": 0, "sped_up": 0, "per_minute": None,
                       "lines": 0, "samples": 734, "lost_records": 1, "dropped_samples": 0}
    line = run_summary.summary_line(figures, [str(tmp_path / "p.coz")], outputs)
    assert line == (f"coz: note: 3 experiments, 0 usable, 0 lines with enough data, 734 samples, 1 lost record; "
                    f"profile: {tmp_path}/p.coz")
    figures.update(experiments=1, usable=1, per_minute=2.0, lines=1, samples=1, dropped_samples=2)
    line = run_summary.summary_line(figures, [str(tmp_path / "p.coz"), str(tmp_path / "p.9.coz")], outputs)
    assert line == ("coz: note: 1 experiment, 1 usable (2.0 per minute), 1 line with enough data, 1 sample, "
                    f"1 lost record, 2 dropped samples; profiles: {tmp_path}/p.coz and 1 more ({tmp_path}/p.<pid>.coz)")


def test_summary_line_of_runs_without_experiments_leaves_them_out(tmp_path):
    # --sampling-only and --locks-only run no experiment by design: "0
    # experiments, 0 usable, 0 lines with enough data" would read as a failure.
    outputs = run_summary.Outputs(str(tmp_path / "p.coz"), follow_children=False)
    runs = [run_with([], 0, {"samples": 90, "lost_records": 0, "dropped_samples": 0}) for _ in range(2)]
    runs[0].startup["mode"] = "sampling-only"
    runs[1].startup["mode"] = "locks-only"
    figures = run_summary.summarize(runs)
    assert figures["quiet"]
    assert run_summary.summary_line(figures, [str(tmp_path / "p.coz")], outputs) == \
        f"coz: note: 180 samples, 0 lost records; profile: {tmp_path}/p.coz"
    # One causal run among them (a child run without the option): the whole line.
    runs[1].startup["mode"] = "causal"
    assert run_summary.summary_line(run_summary.summarize(runs), [str(tmp_path / "p.coz")], outputs) == \
        f"coz: note: 0 experiments, 0 usable, 0 lines with enough data, 180 samples, 0 lost records; profile: {tmp_path}/p.coz"


def test_usable_experiments_per_minute_of_wall_time():
    run = profile.Run("r.coz", 0, "json", {"mode": "causal"})
    for s in (0.0, 0.0, 0.5, 1.0, 0.5):
        run.experiments.append(profile.Experiment("/a.c:1", s, 10**8, run=run,
                                                  progress=[profile.Progress("p", profile.THROUGHPUT, delta=3)]))
    run.experiments.append(profile.Experiment("/a.c:1", 0.25, 10**8, run=run, partial=True,
                                              progress=[profile.Progress("p", profile.THROUGHPUT, delta=3)]))
    figures = run_summary.summarize([run], wall_s=30.0)
    assert (figures["experiments"], figures["usable"], figures["sped_up"]) == (6, 5, 3)
    assert figures["per_minute"] == pytest.approx(10.0)


def test_children_that_did_the_work_unprofiled_are_noted():
    def run_with(children, own=10_000_000, pid=7):
        r = profile.Run("r.coz", 0, "json", {"mode": "sampling-only", "pid": pid})
        r.counters = {"task_clock_ns": own, "children": children}
        return r

    (note,) = run_summary.children_notes([run_with({"cpu_ns": 370_000_000, "profiled": False})])
    assert note == ("coz: note: child processes used 0.37 s of CPU time, the program itself 0.01 s, and "
                    "are not in the profile: --follow-children profiles each in its own file")
    # Profiled children, children that did less than the program, a shell's `ls`,
    # and profiles without the field say nothing.
    assert run_summary.children_notes([run_with({"cpu_ns": 370_000_000, "profiled": True})]) == []
    assert run_summary.children_notes([run_with({"cpu_ns": 370_000_000, "profiled": False},
                                                own=400_000_000)]) == []
    assert run_summary.children_notes([run_with({"cpu_ns": 40_000_000, "profiled": False}, own=0)]) == []
    assert run_summary.children_notes([run_with(None)]) == []
    # A process that execs (env, then a shell, then the program) writes a run
    # per image, its counters running on: only the last image's count.
    images = [run_with({"cpu_ns": 190_000_000, "profiled": False}, own=68_000_000),
              run_with({"cpu_ns": 190_000_000, "profiled": False}, own=234_000_000)]
    assert run_summary.children_notes(images) == []
    assert len(run_summary.children_notes(images[:1] + [run_with({"cpu_ns": 90_000_000, "profiled": False},
                                                                 own=10_000_000, pid=8)])) == 2


def test_missing_and_unreadable_profiles_are_one_line(tmp_path):
    main = tmp_path / "p.coz"
    outputs = run_summary.Outputs(str(main), follow_children=False)
    assert run_summary.report(outputs, 1) == [
        f"coz: note: no profile was written to {main} (the program ended before the profiler started, "
        "or never loaded it)"]
    # (a malformed record among readable ones is skipped with a warning: issue 9; a file
    # in which nothing can be read is not a profile)
    main.write_text('not a record\n\nnot one either\n')
    (line,) = run_summary.report(outputs, 1)
    assert line.startswith(f"coz: note: cannot read the profile this run wrote: {main}: not a profile")
    # The error names the file, also when only its tail was read.
    main.write_text('{"type":"startup","version":1}\n')
    outputs = run_summary.Outputs(str(main), follow_children=False)
    append(main, 'not a record\n{"type":"experiment"\n')
    (line,) = run_summary.report(outputs, 1)
    assert line.startswith(f"coz: note: cannot read the profile this run wrote: {main}: not a profile")


# -- coz run end to end, with a stand-in runtime ----------------------------------------------

# The stand-in runtime: a Python program that writes what libcoz.so would (with
# COZ_WARN_STDERR=0: warnings only as records), in the root process and, with
# --follow-children, in children named as the runtime names them.
FAKE = r'''
import json, os, subprocess, sys

def write(path, records):
    with open(path, "a") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")

def process(pid, line, speedups, warnings, samples, lost):
    recs = [{"type": "startup", "version": 1, "pid": pid, "mode": "causal"}]
    for s in speedups:
        recs.append({"type": "experiment", "selected": line, "speedup": s, "duration_ns": 10**8,
                     "wall_ns": 10**8, "delay_ns": 0, "selected_samples": 3, "partial": False,
                     "progress": [{"name": "p", "kind": "throughput", "delta": 10 + int(10 * s)}]})
    recs += [{"type": "warning", "code": c, "message": m} for c, m in warnings]
    recs.append({"type": "shutdown", "reason": "exit", "samples": samples, "lost_records": lost,
                 "dropped_samples": 0, "experiments": len(speedups)})
    return recs

out = os.environ["COZ_OUTPUT"]
assert os.environ.get("COZ_WARN_STDERR") == "0", "the launcher must ask for warnings in the profile only"
role = sys.argv[1]
refused = ("perf-event-refused", "perf_event_open was refused")
if role == "root":
    write(out.replace("%p", str(os.getpid())),
          process(os.getpid(), "/src/a.c:1", [0.0, 0.0, 0.5, 1.0], [("no-debug-info", "/bin/sh has no debug information")], 100, 2))
    for i in range(int(sys.argv[2])):
        subprocess.run([sys.executable, __file__, "child", str(i)], check=True)
    sys.exit(int(sys.argv[3]))
else:
    i = int(sys.argv[2])
    pid = os.getpid()
    name = out.replace("%p", str(pid)) if "%p" in out else out[:-len(".coz")] + f".{pid}.coz"
    write(name, process(pid, f"/src/c{i}.c:5", [0.0, 0.25] if i % 2 else [0.0], [refused, ("no-debug-info", "/usr/bin/cc has no debug information")], 10, 0))
'''


@pytest.fixture(scope="module")
def stub_library(tmp_path_factory):
    d = tmp_path_factory.mktemp("stub")
    (d / "stub.c").write_text("void coz_stub_loaded(void) {}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(d / "libstub.so"), str(d / "stub.c")], check=True)
    return str(d / "libstub.so")


def coz_run(tmp_path, stub_library, options, fake_args):
    (tmp_path / "fake_runtime.py").write_text(FAKE)
    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH)
    return subprocess.run([sys.executable, "-m", "cozprof", "run", *options, "---", sys.executable,
                           str(tmp_path / "fake_runtime.py"), *fake_args],
                          env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)


def records(paths):
    out = []
    for p in paths:
        with open(p) as f:
            out += [json.loads(line) for line in f if line.strip()]
    return out


def test_follow_children_says_each_warning_once_then_one_summary(tmp_path, stub_library):
    # An earlier run in the same file must not count.
    earlier = [{"type": "startup", "version": 1, "pid": 1, "mode": "causal"},
               {"type": "experiment", "selected": "/old.c:1", "speedup": 0.0, "duration_ns": 5, "progress": []},
               {"type": "warning", "code": "old", "message": "an old warning"},
               {"type": "shutdown", "samples": 99999, "lost_records": 77}]
    (tmp_path / "profile.coz").write_text("".join(json.dumps(r) + "\n" for r in earlier))
    r = coz_run(tmp_path, stub_library, ["--follow-children"], ["root", "4", "7"])
    assert r.returncode == 7, r.stderr
    lines = r.stderr.splitlines()
    assert lines[:3] == ["coz: warning: /bin/sh has no debug information",
                         "coz: warning: perf_event_open was refused (in 4 processes)",
                         "coz: warning: /usr/bin/cc has no debug information (in 4 processes)"]
    children = sorted(glob.glob(str(tmp_path / "profile.*.coz")))
    assert len(children) == 4
    # The figures, from the records this run wrote (the main file's earlier run left out).
    recs = records(children) + records([tmp_path / "profile.coz"])[len(earlier):]
    experiments = sum(1 for x in recs if x["type"] == "experiment")
    samples = sum(x["samples"] for x in recs if x["type"] == "shutdown")
    lost = sum(x["lost_records"] for x in recs if x["type"] == "shutdown")
    ours = profile.load([str(tmp_path / "profile.coz"), *children])
    ours.runs = ours.runs[1:]
    assert (experiments, samples, lost) == (10, 140, 2)
    usable = sum(analysed_curves(ours).values())
    assert len(lines) == 4
    assert re.fullmatch(
        re.escape(f"coz: note: {experiments} experiments, {usable} usable (") + r"[0-9]+\.[0-9] per minute\)"
        + re.escape(f", {analysed_lines(ours)} line with enough data, {samples} samples, {lost} lost records; "
                    f"profiles: {tmp_path}/profile.coz and 4 more ({tmp_path}/profile.<pid>.coz)"), lines[3])


def test_summary_with_percent_p_and_without_children(tmp_path, stub_library):
    r = coz_run(tmp_path, stub_library, ["-o", "run-%p.coz"], ["root", "0", "0"])
    assert r.returncode == 0, r.stderr
    (path,) = glob.glob(str(tmp_path / "run-*.coz"))
    assert analysed_lines(profile.load(path)) == 1  # speedups 0, 0.5 and 1
    warning, note = r.stderr.splitlines()
    assert warning == "coz: warning: /bin/sh has no debug information"
    assert re.fullmatch(r"coz: note: 4 experiments, 4 usable \([0-9]+\.[0-9] per minute\), 1 line with enough "
                        + re.escape(f"data, 100 samples, 2 lost records; profile: {path}"), note)


def test_no_profile_is_one_line_and_the_status_is_the_programs(tmp_path, stub_library):
    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH)
    r = subprocess.run([sys.executable, "-m", "cozprof", "run", "---", "sh", "-c", "echo err >&2; exit 9"],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 9
    assert r.stderr.splitlines() == [
        "err", f"coz: note: no profile was written to {tmp_path}/profile.coz (the program ended before the "
               "profiler started, or never loaded it)"]


def test_a_pipe_or_a_device_is_not_said_to_hold_no_profile(tmp_path):
    # Their size says nothing of what was written (-o /dev/stdout wrote the
    # records to standard output), and they cannot be read back.
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), os.devnull):
        outputs = run_summary.Outputs(path, follow_children=False)
        assert outputs.stream
        assert run_summary.report(outputs, 1, exit_status=0) == [
            f"coz: note: no summary: {path} is not a regular file, so what this run wrote there "
            "cannot be read back"]
        assert run_summary.report(outputs, 1, exit_status=run_summary.START_FAILED_STATUS) == []
    assert not run_summary.Outputs(str(tmp_path / "p.coz"), follow_children=False).stream
    assert not run_summary.is_stream(str(tmp_path))  # a directory: nothing written, as before


def test_with_a_stream_output_the_runtime_prints_its_warnings(tmp_path, stub_library):
    # The summary cannot read the warnings back from /dev/stdout: COZ_WARN_STDERR is left unset.
    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH)
    r = subprocess.run([sys.executable, "-m", "cozprof", "run", "-o", "/dev/stdout", "---", "sh", "-c",
                        "echo ${COZ_WARN_STDERR-unset} $COZ_OUTPUT"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "unset /dev/stdout\n"
    assert r.stderr.splitlines() == ["coz: note: no summary: /dev/stdout is not a regular file, so what "
                                     "this run wrote there cannot be read back"]


def test_the_summary_comes_before_the_launcher_dies_by_the_programs_signal(tmp_path, stub_library):
    (tmp_path / "fake_runtime.py").write_text(FAKE)
    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH)
    script = f"{sys.executable} fake_runtime.py root 0 0; kill -TERM $$"
    r = subprocess.run([sys.executable, "-m", "cozprof", "run", "---", "sh", "-c", script],
                       env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == -15
    assert r.stderr.splitlines()[-1].startswith("coz: note: 4 experiments, ")


def test_coz_run_imports_neither_numpy_nor_matplotlib(tmp_path, stub_library):
    (tmp_path / "fake_runtime.py").write_text(FAKE)
    code = ("import sys\nfrom cozprof import cli\n"
            f"rc = cli.main(['run', '---', sys.executable, 'fake_runtime.py', 'root', '1', '0'])\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'matplotlib'))\n"
            "print('heavy', heavy, 'rc', rc)\n")
    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH)
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.splitlines()[-1] == "heavy [] rc 0", r.stderr
    assert "coz: note: 4 experiments" in r.stderr  # the child is not followed


def test_legacy_format_keeps_the_runtimes_own_warnings():
    from cozprof import cli, launcher

    json_env = launcher.build_env(cli.parse_args(["run", "---", "x"]), "/l.so", base_env={}, launcher_pid=1)
    legacy_env = launcher.build_env(cli.parse_args(["run", "--format", "legacy", "---", "x"]), "/l.so",
                                    base_env={"COZ_WARN_STDERR": "0"}, launcher_pid=1)
    assert json_env["COZ_WARN_STDERR"] == "0"
    assert "COZ_WARN_STDERR" not in legacy_env  # upstream's format has no warning record


def test_a_killed_runs_checkpoint_is_appended_to_its_profile(tmp_path):
    path = tmp_path / "p.coz"
    path.write_text('{"type":"startup","version":1,"time_ns":1,"pid":5}\n')
    ckpt = tmp_path / "p.coz.checkpoint"
    ckpt.write_text('{"type":"totals","seq":2,"pid":5,"final":false,"records":[]}\n')
    assert run_summary.take_checkpoint(str(path)) is True
    assert not ckpt.exists()
    assert path.read_text().endswith('"final":false,"records":[]}\n')
    assert run_summary.take_checkpoint(str(path)) is False
    # Cut short (no newline) or not a totals record: left alone.
    ckpt.write_text('{"type":"totals","seq":3')
    assert run_summary.take_checkpoint(str(path)) is False and ckpt.exists()


def test_a_checkpoint_the_file_size_limit_would_cut_is_left_alone(tmp_path):
    # Under `ulimit -f` the runtime writes whole records only; appending the
    # checkpoint part-way would leave the profile a cut line.
    path = tmp_path / "p.coz"
    path.write_text('{"type":"startup","version":1,"time_ns":1,"pid":5}\n')
    ckpt = tmp_path / "p.coz.checkpoint"
    ckpt.write_text('{"type":"totals","seq":2,"pid":5,"final":false,"records":[]}\n')
    before = path.read_bytes()
    code = ("import resource, sys\n"
            "from cozprof import run_summary\n"
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({len(before) + 10}, resource.RLIM_INFINITY))\n"
            f"print(run_summary.take_checkpoint({str(path)!r}))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == b"False\n", r.stderr.decode()
    assert path.read_bytes() == before and ckpt.exists()
