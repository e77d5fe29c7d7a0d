"""Threads under the profiler: thousands alive at once (without taking the
program's file descriptors), threads made by constructors before main, a
main that ends with pthread_exit, exit() from a worker, and C++ threads
cancelled or ended by pthread_exit inside the runtime's wrappers."""

import resource

import pytest

from conftest import PROGRAMS, build_program, records
from hostile_common import assert_same_behaviour, run_both


def low_fd_limit():
    """The default soft limit of many systems: 1,024 open files."""
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))


def test_two_thousand_live_threads_leave_the_program_its_files(tmp_path):
    exe = build_program("hostile_threads", tmp_path)
    plain, profiled = run_both([exe, "many", "2000"], profile=tmp_path / "p.coz", preexec_fn=low_fd_limit)
    assert plain.stdout == b"threads 2000 open failures 0 main failures 0\n"
    assert_same_behaviour(plain, profiled)
    # The runtime says once that it stopped opening perf descriptors.
    assert profiled.stderr.count(b"open-file limit") == 1
    recs = records(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown" and recs[-1]["samples"] > 0


def test_threads_created_by_a_constructor(tmp_path):
    exe = build_program("hostile_threads", tmp_path)
    plain, profiled = run_both([exe, "ctor"], env={"HOSTILE_CTOR": "1"}, profile=tmp_path / "p.coz")
    assert plain.stdout.startswith(b"ctor results ")
    assert_same_behaviour(plain, profiled)
    recs = records(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown"
    # the constructor's threads were sampled: their spin loop shows in the samples
    counts = {}
    for r in recs:
        if r["type"] == "samples":
            for k, v in r["counts"].items():
                counts[k] = counts.get(k, 0) + v
    assert sum(v for k, v in counts.items() if "hostile_threads.c:" in k) >= 10


def test_main_ending_with_pthread_exit(tmp_path):
    exe = build_program("hostile_threads", tmp_path)
    plain, profiled = run_both([exe, "pthread_exit"], profile=tmp_path / "p.coz", timeout=30)
    assert b"main leaves" in plain.stdout and plain.returncode == 0
    assert_same_behaviour(plain, profiled, sort_lines=True)
    recs = records(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit"


def test_exit_from_a_worker_while_others_run(tmp_path):
    exe = build_program("hostile_threads", tmp_path)
    plain, profiled = run_both([exe, "thread_exit"], profile=tmp_path / "p.coz", timeout=30)
    assert plain.returncode == 7
    assert_same_behaviour(plain, profiled)
    recs = records(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit"


@pytest.mark.parametrize("mode", [[], ["--sampling-only"]], ids=["causal", "sampling-only"])
def test_cancelled_and_exiting_cxx_threads_unwind_through_the_wrappers(tmp_path, mode):
    # Forced unwinds (pthread_cancel of a thread blocked in read or in
    # pthread_cond_wait, pthread_exit from deep frames) cross the wrappers of
    # those calls and the runtime's thread start; C++ exceptions stay in the
    # program's frames. The program's cleanup handlers and destructors run as
    # without coz.
    exe = build_program("hostile_unwind", tmp_path, sources=[f"{PROGRAMS}/hostile_unwind.cpp"],
                        libs=("-lstdc++", "-lpthread"))
    plain, profiled = run_both([exe], coz_args=mode, profile=tmp_path / "p.coz", timeout=30)
    assert plain.returncode == 0, plain.stderr
    for line in (b"cleanup handler: reader\n", b"destructor: reader\n", b"reader: cancelled\n",
                 b"cleanup handler: waiter unlocks\n", b"mutex free after cancel: yes\n",
                 b"destructor: deepest frame\n", b"exiting thread: returned 42\n",
                 b"caught: not a number: x17\n", b"rethrown in main: not a number: twelve\n"):
        assert line in plain.stdout
    assert_same_behaviour(plain, profiled)
    recs = records(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit"
    # A wait its thread was cancelled in still ends (UnwoundWait): the reader's
    # time blocked in read is io, the waiter's in pthread_cond_wait sync, not
    # `other` (each blocks for the 20 ms main sleeps before cancelling it).
    pid = next(r["pid"] for r in recs if r["type"] == "startup")
    cancelled = [r for r in recs if r["type"] == "thread" and r["tid"] != pid and r["end_ns"] - r["start_ns"] >= 10e6]
    assert cancelled, [r for r in recs if r["type"] == "thread"]
    for r in cancelled:
        lifetime, waits = r["end_ns"] - r["start_ns"], r["wait_ns"]
        assert waits["io"] + waits["sync"] >= 0.5 * lifetime and waits["other"] < 0.5 * lifetime, r
