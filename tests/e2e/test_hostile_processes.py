"""Processes under the profiler: fork, vfork, posix_spawn and exec behave as
without it; with --follow-children each child is profiled into its own file
(%p expands to the pid; without %p the child's file is <name>.<pid>.<ext>),
and the analysis merges the files."""

import glob
import json
import os
import subprocess
import sys

from conftest import REPO, build_program, coz_env, coz_run, records
from hostile_common import FAST, assert_same_behaviour, run_both

sys.path.insert(0, os.path.join(REPO, "python"))
from cozprof import profile as cozprofile  # noqa: E402


def procs(tmp_path):
    return build_program("hostile_procs", tmp_path)


def runs_of(path):
    """Startup records of a file, with the records of each run."""
    out = []
    for r in records(path):
        if r["type"] == "startup":
            out.append([r])
        else:
            out[-1].append(r)
    return out


def selected_lines(run):
    return {r["selected"].rsplit(":", 1)[1] for r in run if r["type"] == "experiment"}


def source_line(text):
    with open(os.path.join(os.path.dirname(__file__), "programs", "hostile_procs.c")) as f:
        for n, line in enumerate(f, 1):
            if text in line:
                return str(n)
    raise AssertionError(text)


def test_fork_without_follow_children(tmp_path):
    exe = procs(tmp_path)
    plain, profiled = run_both([exe, "fork"], profile=tmp_path / "p.coz")
    assert plain.stdout.startswith(b"child result") and b"child exited 5" in plain.stdout
    assert_same_behaviour(plain, profiled, sort_lines=True)
    assert glob.glob(str(tmp_path / "p.*.coz")) == []  # the child is not profiled
    (run,) = runs_of(tmp_path / "p.coz")
    assert run[-1]["type"] == "shutdown"
    # Nothing of the child's reaches the parent's profile: neither its
    # samples nor experiments on its line. (The parent's experiments may
    # select any line of its own with samples: the fork itself takes some
    # on a loaded machine.)
    child_line = source_line("child's hot line")
    assert child_line not in selected_lines(run)
    sampled = {k.rsplit(":", 1)[1] for r in run if r["type"] == "samples" for k in r["counts"]
               if "hostile_procs.c:" in k}
    assert source_line("parent's hot line") in sampled and child_line not in sampled, sampled
    # ... but its CPU time is counted, as not profiled.
    (counters,) = [r for r in run if r["type"] == "counters"]
    assert counters["children"]["profiled"] is False and counters["children"]["cpu_ns"] > 0


def test_a_daemon_s_parent_writes_its_final_records(tmp_path):
    # glibc's daemon() ends the parent with an _exit of its own, which no
    # interposition sees: the parent's profile still ends with its shutdown,
    # and the run says where the work went.
    exe = procs(tmp_path)
    plain, profiled = run_both([exe, "daemon"], profile=tmp_path / "p.coz")
    assert plain.returncode == 0 and plain.stdout.startswith(b"daemon result"), plain
    assert_same_behaviour(plain, profiled)
    assert glob.glob(str(tmp_path / "p.*.coz")) == []
    (run,) = runs_of(tmp_path / "p.coz")
    assert run[-1]["type"] == "shutdown" and run[-1]["reason"] == "daemon", run[-1]
    assert run[-1]["samples"] > 0
    sampled = {k.rsplit(":", 1)[1] for r in run if r["type"] == "samples" for k in r["counts"]}
    assert source_line("parent's hot line") in sampled, sampled
    assert [r["code"] for r in run if r["type"] == "warning"] == ["daemon"]
    err = profiled.stderr.decode()
    assert "coz: warning: the program became a daemon (daemon())" in err and "--follow-children" in err, err
    assert "no progress point" not in err, err


def test_a_daemon_is_profiled_under_follow_children(tmp_path):
    exe = procs(tmp_path)
    plain, profiled = run_both([exe, "daemon"], coz_args=["--follow-children"], profile=tmp_path / "p.coz")
    assert_same_behaviour(plain, profiled)
    (parent,) = runs_of(tmp_path / "p.coz")
    (child_file,) = glob.glob(str(tmp_path / "p.*.coz"))
    (child,) = runs_of(child_file)
    assert parent[-1]["reason"] == "daemon" and child[-1]["reason"] == "exit"
    assert not [r for r in parent if r["type"] == "warning"]
    assert source_line("child's hot line") in selected_lines(child), selected_lines(child)
    # The summary may come while the daemon runs on: it is not said to be cut.
    assert "ended without" not in profiled.stderr.decode(), profiled.stderr.decode()
    visits = {}
    for r in child:
        for p in r.get("progress", []) if r["type"] == "experiment" else []:
            visits[p["name"]] = visits.get(p["name"], 0) + p["delta"]
    # (The parent's point is known to the child, which inherited its counter.)
    assert visits.get("child-round", 0) > 0 and visits.get("parent-round", 0) == 0, visits


def test_fork_with_follow_children_names_the_childs_file_by_pid(tmp_path):
    exe = procs(tmp_path)
    plain, profiled = run_both([exe, "fork"], coz_args=["--follow-children"], profile=tmp_path / "p.coz")
    assert_same_behaviour(plain, profiled, sort_lines=True)
    (parent,) = runs_of(tmp_path / "p.coz")
    (child_file,) = glob.glob(str(tmp_path / "p.*.coz"))
    (child,) = runs_of(child_file)
    assert child_file == str(tmp_path / f"p.{child[0]['pid']}.coz")
    assert child[0]["pid"] != parent[0]["pid"]
    assert parent[-1]["type"] == "shutdown" and child[-1]["type"] == "shutdown"
    # Each process ran its own experiments on its own hot line, and none on
    # the other's. (A process may also select another line of its own: on a
    # loaded machine the fork itself takes samples, and an experiment starts
    # from any sampled line.)
    parent_hot, child_hot = source_line("parent's hot line"), source_line("child's hot line")
    assert parent_hot in selected_lines(parent) and child_hot not in selected_lines(parent), selected_lines(parent)
    assert child_hot in selected_lines(child) and parent_hot not in selected_lines(child), selected_lines(child)
    # The parent counts the child's CPU time, as profiled: at least what the
    # child's own counters read before its exit, and little more (its exit).
    (counters,) = [r for r in parent if r["type"] == "counters"]
    (child_counters,) = [r for r in child if r["type"] == "counters"]
    assert counters["children"]["profiled"] is True
    assert child_counters["task_clock_ns"] <= counters["children"]["cpu_ns"] <= \
        child_counters["task_clock_ns"] + 50_000_000, (counters, child_counters)
    # the analysis merges both files
    prof = cozprofile.load([str(tmp_path / "p.coz"), child_file])
    assert len(prof.runs) == 2
    names = {p.name for e in prof.experiments for p in e.progress}
    assert names == {"parent-round", "child-round"}
    report = subprocess_report([str(tmp_path / "p.coz"), child_file, "--json", "-"])
    assert report.returncode == 0, report.stderr
    summary = json.loads(report.stdout)["summary"]
    assert summary["runs"] == 2
    assert summary["experiments"] == len(prof.experiments)


def test_a_shell_that_runs_the_program_is_told_apart_from_an_idle_program(tmp_path):
    # `coz run --- sh -c PROGRAM`: the shell is profiled, the program (its
    # child) is not; the summary says where the CPU time went instead of
    # leaving an empty profile unexplained.
    exe = procs(tmp_path)
    plain, profiled = run_both(["sh", "-c", f"{exe} leaf; echo status $?"], profile=tmp_path / "p.coz")
    assert_same_behaviour(plain, profiled)
    notes = [ln for ln in profiled.stderr.decode().splitlines() if "child processes used" in ln]
    assert len(notes) == 1 and notes[0].endswith("--follow-children profiles each in its own file"), \
        profiled.stderr.decode()
    # With --follow-children the program is profiled, and nothing is said.
    plain, profiled = run_both(["sh", "-c", f"{exe} leaf; echo status $?"], coz_args=["--follow-children"],
                               profile=tmp_path / "f.coz")
    assert_same_behaviour(plain, profiled)
    assert "child processes used" not in profiled.stderr.decode()
    assert len(glob.glob(str(tmp_path / "f.*.coz"))) == 1
    # Nor is the shell told to add a progress point or debug information:
    # the program reached its points, and the shell took a few samples of
    # hundreds.
    stderr = profiled.stderr.decode()
    assert "no progress point" not in stderr and "has no debug information" not in stderr, stderr


def test_fork_tree_without_exec_under_follow_children(tmp_path):
    # A parent forks a worker that forks a helper, and nobody execs: each
    # followed child set the runtime up again, and its own fork must not find
    # any runtime lock taken twice or inherited locked.
    exe = procs(tmp_path)
    plain, profiled = run_both([exe, "forktree"], coz_args=["--follow-children"],
                               profile=tmp_path / "t.coz", timeout=60)
    assert b"helper exited 2\n" in plain.stdout and b"worker exited 1\n" in plain.stdout
    assert_same_behaviour(plain, profiled, sort_lines=True)
    files = [str(tmp_path / "t.coz")] + sorted(glob.glob(str(tmp_path / "t.*.coz")))
    assert len(files) == 3, files
    pids = set()
    for f in files:
        (run,) = runs_of(f)
        assert run[-1]["type"] == "shutdown", f
        pids.add(run[0]["pid"])
    assert len(pids) == 3


def subprocess_report(paths):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "python") + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "cozprof", "report", *paths], capture_output=True, env=env,
                          timeout=60)


def test_percent_p_names_every_process_file_by_its_pid(tmp_path):
    exe = procs(tmp_path)
    r = coz_run([*FAST, "--follow-children", "-o", str(tmp_path / "run-%p.coz")], [exe, "spawn"])
    assert r.returncode == 0, r.stderr
    files = sorted(glob.glob(str(tmp_path / "run-*.coz")))
    assert len(files) == 2
    pids = set()
    for f in files:
        (run,) = runs_of(f)
        assert f == str(tmp_path / f"run-{run[0]['pid']}.coz")
        assert run[-1]["type"] == "shutdown"
        pids.add(run[0]["pid"])
    assert len(pids) == 2


def test_vfork_and_exec(tmp_path):
    exe = procs(tmp_path)
    plain, profiled = run_both([exe, "vfork"], profile=tmp_path / "v.coz")
    assert b"vfork child exited 11" in plain.stdout
    assert_same_behaviour(plain, profiled)
    (run,) = runs_of(tmp_path / "v.coz")  # the vfork child is not followed
    assert run[-1]["type"] == "shutdown"
    plain, profiled = run_both([exe, "vfork"], coz_args=["--follow-children"], profile=tmp_path / "vf.coz")
    assert_same_behaviour(plain, profiled)
    (child_file,) = glob.glob(str(tmp_path / "vf.*.coz"))
    (child,) = runs_of(child_file)
    assert child[-1]["type"] == "shutdown"
    assert selected_lines(child) == {source_line("child's hot line")}
    # exec: the same process goes on as a new run of the same file
    plain, profiled = run_both([exe, "exec"], profile=tmp_path / "e.coz")
    assert plain.returncode == 11 and plain.stdout == b"before exec\nleaf result 21481\n"
    assert_same_behaviour(plain, profiled)
    before, after = runs_of(tmp_path / "e.coz")
    assert before[0]["pid"] == after[0]["pid"]
    assert after[-1]["type"] == "shutdown"
    # The image that exec'd reached no progress point, and needs none: the
    # process's work, and its points, are the next image's.
    assert before[-1]["type"] == "shutdown" and before[-1]["reason"] == "exec"
    assert not [x for x in before if x["type"] == "warning" and x["code"] == "no-progress-point"], before
    assert "no progress point" not in profiled.stderr.decode()


def test_posix_spawn(tmp_path):
    exe = procs(tmp_path)
    plain, profiled = run_both([exe, "spawn"], profile=tmp_path / "s.coz")
    assert b"spawned child exited 11" in plain.stdout
    assert_same_behaviour(plain, profiled, sort_lines=True)
    assert glob.glob(str(tmp_path / "s.*.coz")) == []


def test_the_program_and_its_children_get_the_environment_they_get_without_coz(tmp_path):
    # Once read, the runtime's variables leave the environment: the program
    # reads what it reads without the profiler, and the processes it starts
    # load no runtime. An AddressSanitizer build among them refused to start
    # ("ASan runtime does not come first in initial library list"), and the
    # test's shell, which runs it, was not even profiled by that run.
    asan = build_program("echo_exit", tmp_path, flags=("-g", "-O1", "-fsanitize=address"))
    script = f"echo in | {asan}; echo status $?; env | LC_ALL=C sort"
    plain, profiled = run_both(["sh", "-c", script], env=coz_env(), profile=tmp_path / "e.coz")
    assert b"in\nstatus 7\n" in plain.stdout, plain.stdout
    assert_same_behaviour(plain, profiled)
    # An exec of the profiled process is profiled, and its image gets the
    # environment the exec passed too (the wrapper script's `exec app`).
    plain, profiled = run_both(["sh", "-c", "export KNOB=1; exec env"], env=coz_env(), profile=tmp_path / "x.coz")
    assert b"KNOB=1\n" in plain.stdout
    assert_same_behaviour(plain, profiled, sort_lines=True)
    shell, program = runs_of(tmp_path / "x.coz")
    assert shell[-1]["reason"] == "exec" and program[-1]["type"] == "shutdown"
    assert os.path.basename(program[0]["argv0"]) == "env"
    # With --follow-children the children need the variables, and keep them.
    r = coz_run(["--follow-children", *FAST, "-o", str(tmp_path / "f.coz")], ["sh", "-c", "env"])
    assert "COZ_FOLLOW_CHILDREN=1" in r.stdout.decode() and "LD_PRELOAD=" in r.stdout.decode()
