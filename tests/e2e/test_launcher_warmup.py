"""coz-perf-warmup, the helper `coz run` starts before its program
(libcoz/perf_warmup.c): it holds one idle perf event of its own while the
command runs, holds nothing of the launcher's or the program's, gives the
program nothing, and ends with the command however the command ends. Its
purpose, a shorter wait before a cold run's main, is a speed goal: measured by
benchmarks/overhead.py (the `_cold` modes), not here."""

import os
import shutil
import signal
import subprocess
import sys
import time

from conftest import BUILD, coz_env, coz_run, ready_pid

HELPER = os.path.join(BUILD, "libcoz", "coz-perf-warmup")
FRONT = os.path.join(BUILD, "libcoz", "coz")  # the native front (libcoz/coz_front.c)

# Run as the profiled program: its launcher's other children (the helper) and
# their descriptors, then its own descriptors. It waits for the helper's event
# (the helper may not have run yet on a busy host).
SIBLINGS = r"""
for c in $(cat /proc/$PPID/task/*/children); do
  [ "$c" = "$$" ] && continue
  i=0
  while [ ! -e /proc/$c/fd/3 ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done
  echo "helper $c $(readlink /proc/$c/exe)"
  for f in /proc/$c/fd/*; do echo "hfd ${f##*/} $(readlink $f)"; done
done
for f in /proc/$$/fd/*; do echo "pfd ${f##*/} $(readlink $f)"; done
"""


def _gone(pid):
    """True once `pid` has ended (no process, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_the_helper_holds_one_idle_event_and_nothing_else_while_the_program_runs(libcoz, tmp_path):
    assert os.access(HELPER, os.X_OK), f"{HELPER} is missing: build the project first"
    # The command inherits a descriptor (a caller's 9>file): the helper must not keep it.
    with open(tmp_path / "inherited", "w") as extra:
        r = coz_run(["--sampling-only", "-o", str(tmp_path / "w.coz")], ["sh", "-c", SIBLINGS], cwd=tmp_path,
                    pass_fds=(extra.fileno(),))
    assert r.returncode == 0, r.stderr.decode()
    assert_one_idle_helper(r.stdout)


def assert_one_idle_helper(stdout):
    """What SIBLINGS printed, run as the program: one helper, HELPER, holding
    its pipe, /dev/null and its event and nothing else; the program without
    the pipe; the helper reaped by the launcher. Returns the helper's pid
    and the output's other lines, split."""
    rows = [line.split(" ", 2) for line in stdout.decode().splitlines()]
    helpers = [(int(row[1]), row[2]) for row in rows if row[0] == "helper"]
    assert [exe for _, exe in helpers] == [os.path.realpath(HELPER)], stdout
    held = {int(row[1]): row[2] for row in rows if row[0] == "hfd"}
    assert set(held) == {0, 1, 2, 3}, held
    assert held[0].startswith("pipe:[") and held[1] == held[2] == "/dev/null"
    assert held[3] == "anon_inode:[perf_event]"
    # The program has none of it: not the pipe whose end tells the helper to go.
    program_fds = {row[2] for row in rows if row[0] == "pfd"}
    assert held[0] not in program_fds, program_fds
    # The launcher ended it and reaped it before it exited.
    assert _gone(helpers[0][0])
    return helpers[0][0], [row for row in rows if row[0] not in ("helper", "hfd", "pfd")]


def test_the_helper_ends_when_the_launcher_is_killed(libcoz, tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "cozprof", "run", "--sampling-only", "-o",
                          str(tmp_path / "k.coz"), "---", "sh", "-c", "echo ready $$; exec sleep 60"],
                         env=coz_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    program = None
    try:
        program = ready_pid(p)
        with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
            helpers = [int(c) for c in f.read().split() if int(c) != program]
        assert len(helpers) == 1 and os.readlink(f"/proc/{helpers[0]}/exe") == os.path.realpath(HELPER)
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        deadline = time.monotonic() + 30
        while not _gone(helpers[0]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _gone(helpers[0]), "the helper outlived its launcher"
    finally:
        if p.poll() is None:
            p.kill()
        if program is not None:
            try:
                os.kill(program, signal.SIGKILL)
            except ProcessLookupError:
                pass
        p.stdout.close()
        p.stderr.close()


def test_a_runtime_without_the_helper_beside_it_runs_as_before(libcoz, tmp_path):
    # A libcoz.so copied elsewhere ($COZ_LIBRARY): no helper to start, nothing said.
    alone = tmp_path / "lib" / "libcoz.so"
    alone.parent.mkdir()
    shutil.copy(libcoz, alone)
    r = coz_run(["--sampling-only", "-o", str(tmp_path / "a.coz")], ["sh", "-c", SIBLINGS], cwd=tmp_path,
                env={"COZ_LIBRARY": str(alone)})
    assert r.returncode == 0, r.stderr.decode()
    assert not [line for line in r.stdout.decode().splitlines() if line.startswith("helper ")], r.stdout
    assert b"coz-perf-warmup" not in r.stderr and b"Traceback" not in r.stderr


def test_the_native_front_starts_the_helper_and_the_launcher_adopts_it(libcoz, tmp_path):
    # The front starts the helper before the interpreter and hands it over in
    # COZ_PERF_WARMUP: one helper, the front's (named in the launcher's
    # environment as exec'd), holding what it held before; the program sees
    # neither the variable nor the pipe.
    assert os.access(FRONT, os.X_OK), f"{FRONT} is missing: build the project first"
    # The front starts the program before it becomes the interpreter
    # (front_run.c): the launcher's environment is read once it is one.
    script = f"while [ \"$(readlink /proc/$PPID/exe)\" = {FRONT} ]; do sleep 0.01; done\n" + SIBLINGS + r"""
echo "handed $(tr '\0' '\n' < /proc/$PPID/environ | sed -n 's/^COZ_PERF_WARMUP=//p')"
echo "seen ${COZ_PERF_WARMUP-none}"
"""
    r = subprocess.run([FRONT, "run", "--sampling-only", "-o", str(tmp_path / "f.coz"), "---", "sh", "-c", script],
                       env=coz_env({"COZ_PYTHON": sys.executable}), cwd=tmp_path, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    helper, rows = assert_one_idle_helper(r.stdout)
    handed = [row[1] for row in rows if row[0] == "handed"]
    assert handed and handed[0].split(":")[0] == str(helper), (handed, helper)
    assert [row[1] for row in rows if row[0] == "seen"] == ["none"], r.stdout


def test_the_native_front_says_plainly_when_it_cannot_start_python(tmp_path):
    # No interpreter there, and one without the cozprof package (isolated: no
    # site-packages, no PYTHONPATH): an error in the command's words and its
    # status for its own errors, no traceback.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -I -S "$@"\n')
    bare.chmod(0o755)
    for python, said in ((tmp_path / "no-python", "cannot run the Python interpreter"),
                         (bare, "cannot import the cozprof package")):
        for argv, status in ((["run", "---", "true"], 125), (["report"], 2)):
            r = subprocess.run([FRONT, *argv], env=coz_env({"COZ_PYTHON": str(python)}),
                               cwd=tmp_path, capture_output=True, text=True, timeout=60)
            assert r.returncode == status, (python, argv, r)
            assert r.stderr.startswith("coz: error: ") and said in r.stderr, r.stderr
            assert "Traceback" not in r.stderr


def test_the_native_front_does_not_import_from_the_current_folder(tmp_path):
    # `python -c` puts the current folder first on sys.path: a user's cozprof/
    # or signal.py must not stand in for the package or the standard library.
    (tmp_path / "cozprof").mkdir()
    (tmp_path / "cozprof" / "__init__.py").write_text("raise SystemExit('the folder was imported')\n")
    (tmp_path / "signal.py").write_text("raise SystemExit('the folder was imported')\n")
    r = subprocess.run([FRONT, "--version"], env=coz_env({"COZ_PYTHON": sys.executable}), cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("coz "), r
