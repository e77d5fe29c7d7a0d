"""Signals under the profiler: the program's handlers (SIGSEGV, SIGBUS,
SIGABRT, SIGPROF, SIGALRM, real-time signals including the runtime's own
sample signal SIGRTMAX-3) keep working, sigaction returns the true previous
action, masks read back as the program set them; crashes and kills leave a
readable profile; SIGINT/SIGTERM end with the final records and the
program's own exit status. Also where perf_event is refused (seccomp)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import REPO, build_program, coz_env, ready_pid, records
from hostile_common import FAST, assert_same_behaviour, run_both

sys.path.insert(0, os.path.join(REPO, "python"))
from cozprof import profile as cozprofile  # noqa: E402


# hostile_crash.c's loop, found by its comment rather than by number.
with open(os.path.join(REPO, "tests", "e2e", "programs", "hostile_crash.c")) as _f:
    HOT_LINE = next(i for i, text in enumerate(_f, 1) if "/* hot line */" in text)


def no_core():
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def check_all_ok(result):
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 33, lines
    assert all(l.endswith(": ok") for l in lines), [l for l in lines if not l.endswith(": ok")]


def test_program_signal_handlers_and_masks(tmp_path):
    exe = build_program("hostile_signals", tmp_path)
    plain, profiled = run_both([exe], profile=tmp_path / "p.coz")
    check_all_ok(plain)
    assert_same_behaviour(plain, profiled)
    recs = records(tmp_path / "p.coz")
    assert recs[0]["sampler"] == "perf_event"
    assert recs[-1]["type"] == "shutdown" and recs[-1]["samples"] > 0


def test_perf_event_refused_by_seccomp_falls_back_to_timers(tmp_path):
    noperf = build_program("hostile_noperf", tmp_path)
    exe = build_program("hostile_signals", tmp_path)
    # Signals keep working with the runtime's own timers on SIGRTMAX-3 too.
    plain = subprocess.run([noperf, exe], capture_output=True, timeout=60)
    profiled = subprocess.run([noperf, sys.executable, "-m", "cozprof", "run", *FAST, "-o",
                               str(tmp_path / "p.coz"), "---", exe], capture_output=True, env=coz_env(), timeout=60)
    check_all_ok(plain)
    assert_same_behaviour(plain, profiled)
    assert profiled.stderr.count(b"perf_event_open refused: Permission denied") == 1
    # A longer CPU-bound program: experiments with samples of its hot line.
    spin = build_program("hostile_crash", tmp_path)
    out = tmp_path / "t.coz"
    proc = subprocess.Popen([noperf, sys.executable, "-m", "cozprof", "run", *FAST, "-o", str(out), "---",
                             spin, "wait"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=coz_env())
    line = proc.stdout.readline()
    assert line.startswith(b"ready")
    os.kill(int(line.split()[1]), signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGTERM
    recs = records(out)
    assert recs[0]["type"] == "startup" and recs[0]["sampler"] == "timer"
    warnings = [r for r in recs if r["type"] == "warning" and r["code"] == "perf-event-refused"]
    assert len(warnings) == 1
    experiments = [r for r in recs if r["type"] == "experiment"]
    assert len(experiments) >= 2
    assert sum(r["counts"][k] for r in recs if r["type"] == "samples" for k in r["counts"]
               if f"hostile_crash.c:{HOT_LINE}" in k) > 50
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "SIGTERM"


def test_the_timer_sampler_counts_each_threads_wait_for_a_cpu(tmp_path):
    # Without switch records the wait comes from schedstat, read in the
    # sample signal only after the thread was switched (getrusage's counts).
    # Twice as many never-blocking workers as CPUs: each waits for a CPU the
    # part of its life it did not run, which its own record measures.
    noperf = build_program("hostile_noperf", tmp_path)
    crowd = build_program("crowd", tmp_path)
    workers = 2 * len(os.sched_getaffinity(0))
    out = tmp_path / "c.coz"
    r = subprocess.run([noperf, sys.executable, "-m", "cozprof", "run", "--sampling-only", "-o", str(out),
                        "---", crowd, str(workers), "1500", "20000", "20000"],
                       capture_output=True, env=coz_env(), timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    recs = records(out)
    assert recs[0]["sampler"] == "timer"
    threads = [t for t in recs if t["type"] == "thread" and t["group"] == "work"]
    assert len(threads) == workers, threads
    for t in threads:
        life = t["end_ns"] - t["start_ns"]
        idle = life - t["cpu_clock_ns"]
        assert idle > 0.2 * life, t  # (they did wait)
        assert abs(t["wait_ns"]["sched"] - idle) < 0.1 * life, t
        assert "off_cpu_ns" not in t, t  # no switch records: not known


@pytest.mark.parametrize("sampler", ["perf_event", "timer"])
def test_the_sample_signal_takes_little_of_an_alternate_stack_and_none_of_a_small_one(tmp_path, sampler):
    # Two threads run their work on 2 KiB stacks with an unmapped page below,
    # as Go runs goroutines, and have 64 KiB alternate signal stacks. The
    # sample signal must run on the alternate stack (SA_ONSTACK; on the
    # small one its frame overflowed, and a Go program crashed), and take
    # little of it: Rust's threads have 8 KiB there, and unwinding a sample
    # takes about 6 KiB, so that work moves to the runtime's own stack.
    exe = build_program("small_stacks", tmp_path)
    # (The seccomp filter that refuses perf_event_open wraps the launcher.)
    wrap = [build_program("hostile_noperf", tmp_path)] if sampler == "timer" else []
    out = tmp_path / "s.coz"
    r = subprocess.run([*wrap, sys.executable, "-m", "cozprof", "run", *FAST, "-o", str(out), "---", exe, "1500"],
                       capture_output=True, env=coz_env(), timeout=60)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    fields = dict(kv.split("=") for kv in r.stdout.decode().split()[1:])
    used, frame = int(fields["altstack_used"]), int(fields["frame"])
    # frame: what a signal to an empty handler takes, measured by the program.
    assert frame < used <= frame + 1024, fields
    recs = records(out)
    assert recs[0]["sampler"] == sampler
    assert recs[-1]["type"] == "shutdown" and recs[-1]["samples"] > 100
    assert len([x for x in recs if x["type"] == "experiment"]) >= 5


def _start(command, profiled, out=None, group=False):
    cmd = command
    if profiled:
        cmd = [sys.executable, "-m", "cozprof", "run", *FAST, "-o", str(out), "---", *command]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=coz_env(),
                            preexec_fn=no_core, start_new_session=group)


def _assert_whole_and_readable(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n"), "the last record was cut"
    recs = records(path)
    assert recs[0]["type"] == "startup"
    assert any(r["type"] == "experiment" for r in recs)
    prof = cozprofile.load([str(path)])
    assert prof.warnings == []
    assert len(prof.runs) == 1 and len(prof.experiments) >= 1
    return recs


@pytest.mark.parametrize("mode, sig", [("segv", signal.SIGSEGV), ("abort", signal.SIGABRT),
                                       ("kill_segv", signal.SIGSEGV), ("pipe", signal.SIGPIPE),
                                       ("alarm", signal.SIGALRM), ("xcpu", signal.SIGXCPU),
                                       ("quit", signal.SIGQUIT), ("overflow", signal.SIGSEGV),
                                       ("thread_overflow", signal.SIGSEGV)])
def test_a_crash_writes_the_final_records_and_dies_of_its_signal(tmp_path, mode, sig):
    # The fault, abort(), or the signal sent by kill: the program dies of the
    # same signal as without the profiler, after the final records (stacks,
    # threads, shutdown) that a crash used to lose with the counts since the
    # last flush. The same for the other signals that end a process by
    # default: a write to a pipe nobody reads (`coz run --- prog | head`), a
    # timer without a handler, the CPU time limit, Ctrl-\. A stack overflow,
    # in the main thread or another, leaves no room on the stack for a
    # handler: the runtime's alternate stack holds it (the final records were
    # lost before).
    exe = build_program("hostile_crash", tmp_path)
    plain, profiled = run_both([exe, mode], profile=tmp_path / "p.coz", preexec_fn=no_core)
    assert plain.returncode == -sig
    assert_same_behaviour(plain, profiled)
    recs = _assert_whole_and_readable(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == signal.Signals(sig).name, recs[-1]
    assert any(r["type"] == "stack_counts" for r in recs)
    assert any(r["type"] == "thread" for r in recs)


@pytest.mark.parametrize("mode, status", [("quick_exit", 6), ("_Exit", 7), ("exit_group", 8)])
def test_an_exit_without_atexit_handlers_writes_the_final_records(tmp_path, mode, status):
    # quick_exit (its own at_quick_exit handlers run, then an _exit inside
    # libc), _Exit and a raw exit_group through syscall(): the profile held
    # its startup record only, every sample lost.
    exe = build_program("hostile_crash", tmp_path)
    plain, profiled = run_both([exe, mode], profile=tmp_path / "p.coz")
    assert plain.returncode == status
    assert plain.stdout == (b"quick handler\n" if mode == "quick_exit" else b"")
    assert_same_behaviour(plain, profiled)
    recs = _assert_whole_and_readable(tmp_path / "p.coz")
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit", recs[-1]
    assert recs[-1]["samples"] > 300, recs[-1]  # 0.6 s of CPU time, sampled every millisecond
    assert any(r["type"] == "thread" for r in recs)


def test_sigaltstack_reads_back_as_the_program_set_it(tmp_path):
    # The runtime gives every thread without an alternate signal stack one of
    # its own (for the crash handler): the program still reads none, its own
    # replaces it and reads back, and disabling it reads back as disabled. A
    # forked child (dormant) starts without the parent thread's.
    exe = build_program("hostile_crash", tmp_path)
    plain, profiled = run_both([exe, "altstack"], profile=tmp_path / "p.coz")
    assert plain.returncode == 0
    assert plain.stdout.decode().splitlines() == [
        "main: none", "thread: none", "child: none", "old when set: none", "own: 65536 bytes, flags 0",
        "old when disabled: own", "after: none"]
    assert_same_behaviour(plain, profiled)


def test_an_alternate_stack_too_small_for_the_sample_signal_is_the_programs_only_in_its_view(tmp_path):
    # The main thread sets a 2 KiB alternate stack (MINSIGSTKSZ) above an
    # unmapped page and works 0.6 s of CPU time. On a CPU whose signal frame
    # alone is larger (AVX-512: AT_MINSIGSTKSZ 3,376 bytes) the first sample
    # signal killed it (SIGSEGV) before 2026-12-02; now the runtime's stack
    # stays the thread's and the program reads its own back. (Where the
    # frame is smaller, the stack was too small for the handler's work, and
    # the runtime's stays the thread's all the same.)
    exe = build_program("hostile_crash", tmp_path)
    out = tmp_path / "p.coz"
    plain, profiled = run_both([exe, "tiny_altstack"], profile=out)
    assert plain.returncode == 0, plain.stderr.decode()
    assert plain.stdout.decode().splitlines() == [
        "tiny: 2048 bytes, flags 0, own", "old when disabled: own", "after: none"]
    assert_same_behaviour(plain, profiled)
    recs = records(out)
    assert recs[-1]["type"] == "shutdown" and recs[-1]["samples"] > 50, recs[-1]


def test_a_thread_that_blocks_signals_by_the_system_call_queues_few_of_ours(tmp_path):
    # raw_sigblock blocks every signal with the rt_sigprocmask system call
    # itself, out of the interposed calls' sight, for 3 s of its CPU time.
    # Each sample's wakeup queued one more real-time signal: 3,800 in those
    # 3 s before 2026-12-02, against the user's limit (RLIMIT_SIGPENDING),
    # past which the kernel sends SIGIO instead, to this process and to any
    # other of the user's. The runtime now stops the thread's signals once
    # its ring is an eighth full with one waiting, and the thread is sampled
    # again once it unblocks: its last 1.5 s of CPU time are in its samples.
    exe = build_program("raw_sigblock", tmp_path)
    out = tmp_path / "p.coz"
    r = subprocess.run([sys.executable, "-m", "cozprof", "run", *FAST, "-o", str(out), "---", exe],
                       capture_output=True, env=coz_env(), timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    got = json.loads(r.stdout.decode().strip().splitlines()[-1])
    assert 0 <= got["queued"] < 1000, got
    src = os.path.join(REPO, "tests", "e2e", "programs", "raw_sigblock.c")
    with open(src) as f:
        after = next(n for n, text in enumerate(f, 1) if "PHASE_AFTER" in text)
    samples = sum(x["counts"].get(f"{src}:{after}", 0) for x in records(out) if x["type"] == "samples")
    # At the 1 ms period, about one sample per ms of CPU time; a thread whose
    # signals stayed off would keep only what its ring holds (about 300).
    assert samples > 0.5 * got["after_cpu_ms"], (samples, got)


def test_a_programs_own_sigsegv_handler_runs_and_reads_back(tmp_path):
    exe = build_program("hostile_crash", tmp_path)
    plain, profiled = run_both([exe, "own_segv"], profile=tmp_path / "p.coz", preexec_fn=no_core)
    assert plain.returncode == 4
    assert plain.stdout.decode().splitlines()[0] == "default before: 1, own after: 1"
    assert_same_behaviour(plain, profiled)


def _killed(tmp_path, profiled):
    exe = build_program("hostile_crash", tmp_path)
    out = tmp_path / "p.coz"
    proc = _start([exe, "wait"], profiled, out)
    os.kill(ready_pid(proc), signal.SIGKILL)
    _, stderr = proc.communicate(timeout=30)
    return proc.returncode, out, stderr.decode()


def _report(path):
    r = subprocess.run([sys.executable, "-m", "cozprof", "report", str(path)], capture_output=True,
                       text=True, timeout=120, env=coz_env())
    assert r.returncode == 0, r.stderr
    return r.stdout + r.stderr


def test_a_profile_read_while_its_program_runs_is_not_called_cut(tmp_path):
    # No shutdown record yet, and none missing: `coz report` on the profile
    # of a run still going says so, and says "ended" once it is killed.
    exe = build_program("hostile_crash", tmp_path)
    out = tmp_path / "p.coz"
    proc = _start([exe, "wait"], True, out)
    try:
        pid = ready_pid(proc)
        text = _report(out)
        assert "warning: the run is still going: its thread table" in text, text
        assert "ended without" not in text, text
    finally:
        os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=30)
    text = _report(out)
    assert "the run ended without its final records" in text and "still going" not in text, text


def test_sigkill_leaves_a_readable_profile(tmp_path):
    _, out, stderr = _killed(tmp_path, True)
    recs = _assert_whole_and_readable(out)
    assert recs[-1]["type"] != "shutdown"
    # `coz run` and `coz report` say what the cut took away
    assert "coz: warning: the run ended without its final records (killed by SIGKILL): its thread table" in stderr, stderr
    assert "the run ended without its final records (killed by SIGKILL" in _report(out)


def test_sigkill_status_passes_through_the_launcher(tmp_path):
    assert _killed(tmp_path, False)[0] == -signal.SIGKILL
    assert _killed(tmp_path, True)[0] == -signal.SIGKILL


def _end_by(sig, mode, tmp_path, group):
    exe = build_program("hostile_crash", tmp_path)
    out = tmp_path / "p.coz"
    statuses = []
    for profiled in (False, True):
        proc = _start([exe, mode], profiled, out, group=group)
        pid = None
        try:
            pid = ready_pid(proc)
            if group:
                os.killpg(proc.pid, sig)  # as a terminal's ^C reaches the whole foreground group
            else:
                os.kill(proc.pid, sig)  # the launcher passes it on
            stdout, stderr = proc.communicate(timeout=30)
        finally:
            # A program that outlived the test (the signal ignored) would spin
            # on, a busy loop beside every later test.
            if proc.returncode is None:
                for p in (pid, proc.pid):
                    try:
                        if p is not None:
                            os.kill(p, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                proc.communicate()
        statuses.append((proc.returncode, stdout))
    assert statuses[0] == statuses[1]
    return statuses[0][0], records(out)


def test_sigint_writes_final_records_and_dies_by_sigint(tmp_path):
    status, recs = _end_by(signal.SIGINT, "wait", tmp_path, group=True)
    assert status == -signal.SIGINT
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "SIGINT"
    assert any(r["type"] == "experiment" for r in recs)


def test_sigterm_writes_final_records_and_dies_by_sigterm(tmp_path):
    status, recs = _end_by(signal.SIGTERM, "wait", tmp_path, group=False)
    assert status == -signal.SIGTERM
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "SIGTERM"


def test_a_second_sigterm_waits_for_the_final_records(tmp_path):
    # `timeout`, a hangup or systemd signal the whole group: the program gets
    # SIGTERM from there and again from the launcher passing it on. The second
    # reaches another thread while the first writes the final records; it must
    # wait for them, not end the process at once (4 to 6 profiles in 20 lost
    # their threads, stacks and shutdown so).
    exe = build_program("hostile_crash", tmp_path)
    for i in range(4):
        out = tmp_path / f"p{i}.coz"
        proc = _start([exe, "wait"], True, out)
        try:
            pid = ready_pid(proc)
            os.kill(pid, signal.SIGTERM)
            time.sleep(0.001 * i)
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass  # already ended: its records were written quicker than the gap
            proc.communicate(timeout=30)
        finally:
            if proc.returncode is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == -signal.SIGTERM
        recs = records(out)
        assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "SIGTERM", (i, recs[-1])
        assert any(r["type"] == "thread" for r in recs)


def test_a_sigterm_handler_reset_by_sa_resethand_reads_back_and_ends_the_profile(tmp_path):
    # The program's handler ran once and the kernel's reset is seen: sigaction
    # reads SIG_DFL back, and the next SIGTERM writes the final records (the
    # runtime's books kept the handler, and its catcher was not put back).
    status, recs = _end_by(signal.SIGTERM, "resethand", tmp_path, group=False)
    assert status == -signal.SIGTERM
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "SIGTERM"


def test_sigterm_with_the_programs_own_handler_keeps_its_status(tmp_path):
    status, recs = _end_by(signal.SIGTERM, "term_handler", tmp_path, group=False)
    assert status == 3
    assert recs[-1]["type"] == "shutdown" and recs[-1]["reason"] == "exit"


@pytest.mark.parametrize("flags", [("-g", "-O1"), ("-g", "-O2", "-D_FORTIFY_SOURCE=2")], ids=["plain", "fortified"])
def test_a_wait_left_by_siglongjmp_from_a_handler_ends_there(tmp_path, flags):
    # A SIGALRM handler jumps out of a read three times (20 ms each), then the
    # thread sleeps 200 ms. The jump ends the read's wait (hook_jump): its
    # time is io, and the sleeps after it are sleeps. Before, the read never
    # ended, every later wait nested in it, and all 260 ms read as `other`.
    # The fortified build jumps through __longjmp_chk.
    exe = build_program("longjmp_timeout", tmp_path, flags=flags)
    plain, profiled = run_both([exe], coz_args=["--sampling-only"], profile=tmp_path / "p.coz", timeout=60)
    assert plain.stdout == b"timeouts 3\n", plain
    assert_same_behaviour(plain, profiled)
    [thread] = [r for r in records(tmp_path / "p.coz") if r["type"] == "thread"]
    waits = thread["wait_ns"]
    # At least what the program asked for; `other` a small rest, not the waits.
    assert waits["io"] >= 3 * 20e6 * 0.9 and waits["sleep"] >= 10 * 20e6, waits
    assert waits["other"] < 0.1 * (waits["io"] + waits["sleep"]), waits
