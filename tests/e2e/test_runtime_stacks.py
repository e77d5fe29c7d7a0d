"""The conventional profile the runtime writes: every sample counted per
distinct stack (whole callchains, symbolized with inlined functions and the
symbol table of libraries), per-thread time, and perf stat-style counters."""

import os
import re
import resource
import shutil
import subprocess
import sys

import pytest

from conftest import PROGRAMS, build_program, chain_times, coz_env, coz_run, records, share_bound

from cozprof.profile import kernel_call_kind, load

CHAIN_SOURCES = [os.path.join(PROGRAMS, "chain.c"), os.path.join(PROGRAMS, "chain_work.c")]


def marker_line(program, text):
    with open(os.path.join(PROGRAMS, program)) as f:
        for n, line in enumerate(f, 1):
            if f"/* {text} */" in line:
                return n
    raise AssertionError(text)


@pytest.mark.parametrize("mode", ["causal", "sampling-only"])
def test_stacks_count_every_sample_with_its_callers(tmp_path, mode):
    # -O2 without frame pointers: the callers come from the CFI (unwound in
    # the sampled thread's signal handler, or, sampling only, from a copy of
    # its registers and stack in the profiler thread).
    exe = build_program("chain", tmp_path, flags=("-g", "-O2"), sources=CHAIN_SOURCES)
    out = tmp_path / "s.coz"
    # 1 ms in both modes (sampling-only's default is 10 ms): the split below
    # needs its ~1,000 samples (97 at 10 ms read 58:39 under load).
    options = (["--sampling-only", "--sample-period", "1ms"] if mode == "sampling-only"
               else ["--experiment-length", "50ms"])
    r = coz_run(["-o", str(out), *options], [exe, "1"])
    assert r.returncode == 0, r.stderr.decode()
    (run,) = load([str(out)]).runs
    assert run.mode == mode
    assert (len(run.experiments) == 0) == (mode == "sampling-only")
    shutdown = run.shutdown
    # Sampling-only on per-CPU rings: each CPU's two events took turns about
    # every 10 periods (docs/runtime.md, "Periods"), where the open-file
    # limit's upper half has room for them; the samples' time below still
    # adds up to the thread's CPU time.
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    room = soft == resource.RLIM_INFINITY or soft - min(soft // 2, 4096) >= 4 * os.sysconf("SC_NPROCESSORS_ONLN") + 64
    if run.startup["sampler"] == "perf_event_cpu" and room:
        assert shutdown["period_turns"] >= 10, shutdown
    else:
        assert shutdown["period_turns"] == 0, shutdown
    # (Not the kernel's CPU time in the program's calls, measured, not sampled.)
    cpu = {sid: c for sid, c in run.stack_counts.items()
           if run.stacks[sid].kind == "cpu" and not kernel_call_kind(run, run.stacks[sid])}
    assert sum(c[0] for c in cpu.values()) == shutdown["samples"]
    # The time the samples stand for is the thread's CPU time (the program
    # measures its own): random periods, each sample weighing its own.
    # Records the kernel lost (a ring full while the profiler thread waited
    # for a CPU, sampling only) are counted: each stands for a period.
    # Measured at a load average of 4 on 2 cores: 0.987-0.992 (causal),
    # 0.964-0.981 (sampling only).
    cpu_ms, a_share = chain_times(r.stdout)
    sampled_ms = (sum(c[1] for c in cpu.values()) + shutdown["lost_records"] * run.startup["sample_period_ns"]) / 1e6
    assert abs(sampled_ms / cpu_ms - 1) < 0.1, (sampled_ms, cpu_ms, shutdown)
    # Almost every sample is in chain_work, called from one of main's two lines.
    in_work = {"CALL_A": 0, "CALL_B": 0, None: 0}
    work_ns = {"CALL_A": 0, "CALL_B": 0, None: 0}
    call_lines = {marker_line("chain.c", k): k for k in in_work if k}
    for sid, (n, ns) in cpu.items():
        frames = [ln for lid in run.stacks[sid].locations for ln in run.locations[lid].lines]
        if not frames or frames[0][0] != "chain_work":
            continue
        callers = [f for f in frames[1:] if f[0] == "main" and f[1].endswith("/chain.c")]
        caller = call_lines[callers[0][2]] if callers else None
        in_work[caller] += n
        work_ns[caller] += ns
    assert sum(in_work.values()) > 0.9 * shutdown["samples"], in_work
    # A sample whose signal found the thread elsewhere (taken in the runtime's
    # own handler, or left for the end) keeps the kernel's frame-pointer
    # callchain, which loses the caller of a frameless function: rare.
    assert in_work[None] < 0.01 * sum(in_work.values()), in_work
    # The two calls split the samples' time as the program measured their
    # CPU time. (A program whose rounds all last the same fell in step with
    # sampling-only's per-CPU periods once in about nine runs, 415:338 where
    # its steps were 2:1, before each CPU's two events took turns; turns
    # leave such a split unbiased but more spread. chain.c varies its
    # rounds: docs/runtime.md, "Periods".)
    n = in_work["CALL_A"] + in_work["CALL_B"]
    sampled = work_ns["CALL_A"] / (work_ns["CALL_A"] + work_ns["CALL_B"])
    assert abs(sampled - a_share) < share_bound(a_share, n), (sampled, a_share, in_work)
    # libc is outside the binary scope: its frames are named from its symbol
    # table alone (no file, no line, no inlined frames), even where its
    # debug information is installed.
    libc = [loc for loc in run.locations.values() if "/libc.so" in loc.object]
    assert libc
    assert all(len(loc.lines) == 1 and loc.lines[0][1:] == (None, 0) for loc in libc), \
        [(hex(loc.object_offset), loc.lines) for loc in libc]
    assert any(loc.lines[0][0] for loc in libc)
    # One thread, its time, and the counters.
    (thread,) = run.threads
    # Its CPU time is what the program measured itself (the process's
    # counters also hold the profiler thread's own, which is no fixed share).
    # Its samples' time, with the records the kernel lost (all of them its
    # own: the program's only thread), as above: beside a busy loop,
    # sampling only lost 7% of a run's records once.
    assert thread["group"] == "main"
    thread_ms = (thread["cpu_ns"] + shutdown["lost_records"] * run.startup["sample_period_ns"]) / 1e6
    assert abs(thread_ms - cpu_ms) <= 0.05 * cpu_ms + 5, (thread["cpu_ns"], cpu_ms, shutdown)
    assert thread["cpu_ns"] <= run.counters["task_clock_ns"]
    assert run.counters["task_clock_ns"] == run.counters["user_ns"] + run.counters["system_ns"]
    assert run.counters["hardware"] or run.counters["hardware_unavailable"]


def test_threads_are_named_and_grouped_by_their_start_routine(tmp_path):
    exe = build_program("pingpong", tmp_path)
    out = tmp_path / "t.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "50ms"], [exe, "pipe", "1"])
    assert r.returncode == 0, r.stderr.decode()
    (run,) = load([str(out)]).runs
    groups = sorted(t["group"] for t in run.threads)
    assert groups == ["main", "pthread_a", "pthread_b"]
    a = next(t for t in run.threads if t["group"] == "pthread_a")
    b = next(t for t in run.threads if t["group"] == "pthread_b")
    assert a["cpu_ns"] > b["cpu_ns"] > 0  # A spins twice B's steps
    assert {s.group for s in run.stacks.values()} >= {"pthread_a", "pthread_b"}
    # Nothing is lost between the stacks and the threads' own totals.
    for t in (a, b):
        ns = sum(run.stack_counts[s.id][1] for s in run.stacks.values() if s.tid == t["tid"] and s.kind == "cpu")
        assert ns == t["cpu_ns"] + t["call_cpu_ns"], t


@pytest.mark.parametrize("mode", ["causal", "sampling-only"])
def test_renamed_threads_are_named_without_reading_proc(tmp_path, mode):
    # Threads renamed by pthread_setname_np (by themselves, and by another
    # thread) and by prctl(PR_SET_NAME). The runtime keeps their names: its
    # profiler thread opened /proc/self/task/N/comm for each live thread,
    # and each such open took the program's lowest free descriptor for that
    # moment. strace shows every open of the process's threads (the program's
    # own pthread_setname_np of another thread opens that file to write it).
    assert shutil.which("strace"), "strace is installed by scripts/bootstrap.sh"
    exe = build_program("thread_names", tmp_path)
    out, trace = tmp_path / "n.coz", tmp_path / "open.trace"
    options = ["--sampling-only"] if mode == "sampling-only" else ["--experiment-length", "50ms"]
    cmd = ["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(trace),
           sys.executable, "-m", "cozprof", "run", "-o", str(out), *options, "---", exe, "1.5"]
    r = subprocess.run(cmd, env=coz_env(), capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    reads = [line for line in trace.read_text().splitlines()
             if re.search(r'"/proc/(self|thread-self)/task/\d+/comm", O_RDONLY', line)]
    assert reads == []
    (run,) = load([str(out)]).runs
    names = {t["group"]: t["thread"] for t in run.threads}
    assert names == {"main": "thread_names", "self_named": "by-setname",
                     "prctl_named": "by-prctl-and-cu", "other_named": "by-main"}
    # The stacks, flushed while the threads ran, carry the new names.
    by_tid = {t["tid"]: t["thread"] for t in run.threads}
    labels = {(s.tid, s.thread) for s in run.stacks.values() if s.kind == "cpu"}
    workers = {t["tid"] for t in run.threads if t["group"] != "main"}
    assert workers <= {tid for tid, _ in labels} <= set(by_tid)
    assert all(by_tid[tid] == name for tid, name in labels), labels


@pytest.mark.parametrize("mode", ["causal", "sampling-only"])
def test_the_runtimes_own_frames_end_at_what_the_program_called(tmp_path, mode):
    # Two threads hand a token back and forth with C11 mutexes and condition
    # variables: many waits, each timed and its call stack taken by the
    # runtime (libunwind). A sample there keeps the interposed function as
    # its innermost frame, under the program's frames; nothing inside it
    # (libunwind, the runtime's helpers) makes stacks of its own.
    exe = build_program("pingpong", tmp_path)
    out = tmp_path / "p.coz"
    options = ["--sampling-only"] if mode == "sampling-only" else ["--experiment-length", "50ms"]
    r = coz_run(["-o", str(out), *options], [exe, "c11", "2"])
    assert r.returncode == 0, r.stderr.decode()
    (run,) = load([str(out)]).runs

    def obj(lid):
        return os.path.basename(run.locations[lid].object)

    assert run.stacks
    inner = [s for s in run.stacks.values() if any("libcoz" in obj(lid) for lid in s.locations[1:])]
    unwinder = [s for s in run.stacks.values() if any("libunwind" in obj(lid) for lid in s.locations)]
    def frames(s):
        return [(run.locations[lid].lines[0][0] if run.locations[lid].lines else "?") + "@" + obj(lid)
                for lid in s.locations]

    assert inner == [] and unwinder == [], ([frames(s) for s in inner[:3]], [frames(s) for s in unwinder[:3]])
