"""Runs without experiments (`--sampling-only`, `--locks-only`) may last for
days: their counts are kept as totals, so that the profile grows with the
stacks, lines and locks seen and not with time, and a checkpoint beside the
profile keeps what a SIGKILL would otherwise lose (issue 14, point 6;
docs/profile-format.md, "totals"). The program spins in two threads until
it is stopped (tests/e2e/programs/hostile_crash.c, mode "wait")."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import build_program, coz_env, ready_pid, records

from cozprof import profile

COUNTS = ("samples", "stack_counts", "locks", "runtime")


def _start(exe, out, mode_flag, group=False):
    cmd = [sys.executable, "-m", "cozprof", "run", mode_flag, "-o", str(out), "---", exe, "wait"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=coz_env(),
                            start_new_session=group)


def _checkpoint_seq(path):
    try:
        with open(path) as f:
            return json.loads(f.read())["seq"]
    except (OSError, ValueError, KeyError):
        return 0


def _wait_for_checkpoints(out, n, timeout=60):
    """Waits until the run has written its n-th checkpoint (the first flush is
    1 s after the start, the next ones a tenth of the elapsed time later)."""
    deadline = time.monotonic() + timeout
    while _checkpoint_seq(str(out) + ".checkpoint") < n:
        assert time.monotonic() < deadline, f"no checkpoint {n} within {timeout} s"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def spin(tmp_path_factory):
    return build_program("hostile_crash", tmp_path_factory.mktemp("long"))


@pytest.mark.parametrize("mode_flag", ["--sampling-only", "--locks-only"])
def test_counts_are_totals_never_appended_while_the_run_goes(tmp_path, spin, mode_flag):
    out = tmp_path / "p.coz"
    proc = _start(spin, out, mode_flag)
    pid = ready_pid(proc)
    _wait_for_checkpoints(out, 3)
    # Three flushes in: the profile holds definitions only, the counts are
    # in the checkpoint beside it.
    running = [r["type"] for r in records(out)]
    assert not set(running) & set(COUNTS), running
    assert "totals" not in running
    os.kill(pid, signal.SIGTERM)
    proc.communicate(timeout=30)
    recs = records(out)
    totals = [r for r in recs if r["type"] == "totals"]
    assert [r["type"] for r in recs if r["type"] in COUNTS] == []
    assert len(totals) == 1 and totals[0]["final"] is True and totals[0]["seq"] >= 4
    assert recs[-1]["type"] == "shutdown" and recs[-2]["type"] == "totals"
    assert not os.path.exists(str(out) + ".checkpoint")
    run = profile.load(str(out)).runs[0]
    assert run.runtime_ns > 0
    if mode_flag == "--sampling-only":
        assert sum(n for n, _ in run.stack_counts.values()) > 100
        assert sum(run.samples.values()) > 100


def test_sigkill_keeps_the_last_checkpoint(tmp_path, spin):
    out = tmp_path / "p.coz"
    proc = _start(spin, out, "--sampling-only")
    pid = ready_pid(proc)
    _wait_for_checkpoints(out, 2)
    with open(str(out) + ".checkpoint") as f:
        last = json.loads(f.read())
    os.kill(pid, signal.SIGKILL)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # `coz run` put the checkpoint in the profile and said so.
    assert b"ended before writing its final totals" in err, err
    assert not os.path.exists(str(out) + ".checkpoint")
    totals = [r for r in records(out) if r["type"] == "totals"]
    assert len(totals) == 1 and totals[0]["final"] is False and totals[0]["seq"] >= last["seq"]
    run = profile.load(str(out)).runs[0]
    assert run.shutdown is None
    assert sum(n for n, _ in run.stack_counts.values()) > 100


def test_a_checkpoint_left_by_a_killed_launcher_belongs_to_its_run(tmp_path, spin):
    out = tmp_path / "p.coz"
    proc = _start(spin, out, "--sampling-only", group=True)
    ready_pid(proc)
    _wait_for_checkpoints(out, 2)
    os.killpg(proc.pid, signal.SIGKILL)  # the launcher too: nobody appends it
    proc.communicate(timeout=30)
    ckpt = str(out) + ".checkpoint"
    assert os.path.exists(ckpt)
    # The reader takes it as it is.
    first = profile.load(str(out)).runs[0]
    assert sum(n for n, _ in first.stack_counts.values()) > 100
    # The next run writing the same profile appends it before its own startup.
    proc = _start(spin, out, "--sampling-only")
    os.kill(ready_pid(proc), signal.SIGTERM)
    proc.communicate(timeout=30)
    assert not os.path.exists(ckpt)
    types = [r["type"] for r in records(out)]
    assert types.index("totals") < types.index("startup", 1)
    prof = profile.load(str(out))
    assert prof.warnings == []
    assert len(prof.runs) == 2
    assert prof.runs[0].stack_counts == first.stack_counts
    assert prof.runs[0].totals["final"] is False and prof.runs[1].totals["final"] is True
