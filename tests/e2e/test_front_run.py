"""`coz run` through the native front, which starts the program itself before
the interpreter for the command lines it takes (libcoz/front_run.c) and hands
it to the launcher (cozprof.launcher.adopt_spawned).

What must hold: for every command line the front takes, the program gets the
environment the launcher's build_env gives, and the same descriptors,
dispositions and signal mask; a command line it does not take, every error
among them, goes to the launcher unchanged; the launcher waits for the
program, forwards signals to it, passes its status and summarizes the run as
for a program it started. How much sooner the program starts is a speed goal,
measured by benchmarks/overhead.py (the launcher part), not here."""

import os
import signal
import subprocess
import sys

import pytest

from conftest import BUILD, LIBCOZ, REPO, coz_env, ready_pid
from cozprof import launcher

FRONT = os.path.join(BUILD, "libcoz", "coz")
MARK = "(started by the native front)"
SOURCE = os.path.join(REPO, "tests", "e2e", "programs", "front_probe.c")


def code_line():
    """A line of front_probe.c with code (for --progress and --fixed-line)."""
    with open(SOURCE) as f:
        return next(i for i, text in enumerate(f, 1) if "return atoi(argv[2]);" in text)


def front_env(extra=None, library=True):
    env = coz_env({"COZ_PYTHON": sys.executable, **(extra or {})})
    if library:
        env["COZ_LIBRARY"] = os.path.normpath(os.path.abspath(LIBCOZ))
    else:
        env.pop("COZ_LIBRARY", None)
    return env


def run_front(options, command, cwd, env=None, **kw):
    """(CompletedProcess with text output, the coz process's pid)."""
    with subprocess.Popen([FRONT, "run", *options, "---", *command], cwd=cwd, env=env or front_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw) as p:
        out, err = p.communicate(timeout=120)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err), p.pid


def inherited_dispositions():
    """What the program should see: the dispositions this test process passes
    on through exec (an ignored signal stays ignored, as under nohup; a handler
    becomes the default), SIGPIPE made default by subprocess's restore_signals."""
    def seen(name):
        if name == "PIPE":
            return "default"
        return "ignored" if signal.getsignal(getattr(signal, "SIG" + name)) == signal.SIG_IGN else "default"
    return [f"{name} {seen(name)}" for name in ("INT", "QUIT", "PIPE", "TERM", "HUP")]


def program_saw(stdout, kind):
    return [line.split(" ", 1)[1] for line in stdout.splitlines() if line.startswith(kind + " ")]


def expected_env(options, command, base_env, library, launcher_pid):
    """The COZ_* variables and LD_PRELOAD the launcher would give the program
    (the current folder is the run's)."""
    args = launcher.parse_run_args(None, ["run", *options, "---", *command])
    base = {k: v for k, v in base_env.items() if k not in ("COZ_SPAWNED", "COZ_PERF_WARMUP")}
    env = launcher.build_env(args, library, base_env=base, launcher_pid=launcher_pid)
    return sorted(f"{k}={v}" for k, v in env.items() if k.startswith("COZ_") or k == "LD_PRELOAD")


@pytest.fixture(scope="module")
def probe(build):
    assert os.access(FRONT, os.X_OK), f"{FRONT} is missing: build the project first"
    return build("front_probe")


TAKEN = [
    [],
    ["--sampling-only"],
    ["--sampling-only", "-o", "other.coz"],
    ["--output=sub/p.coz", "--sampling-only"],
    ["-b", "MAIN", "--binary-scope=%libm%", "--sampling-only"],
    ["-s", "%front_probe.c", "--sampling-only"],
    ["-p", "front_probe.c:LINE", "--progress=front_probe.c:LINE"],
    ["--fixed-line", "front_probe.c:LINE"],
    ["--format", "legacy", "--sampling-only"],
    ["--sampling-only", "--sample-period", "2ms"],
    ["--sample-period=500us", "--experiment-length", "2"],
    ["--locks-only"],
    ["--locks-only", "--no-lock-counters"],
    ["--end-to-end"],
]


@pytest.mark.parametrize("options", TAKEN, ids=lambda o: " ".join(o) or "no options")
def test_the_program_the_front_starts_gets_the_launchers_environment(probe, tmp_path, monkeypatch, options):
    options = [o.replace("LINE", str(code_line())) for o in options] + ["-v"]
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    # Stale settings of an outer run, and hand-overs not the front's own: none reaches the program.
    stale = {name: "stale" for name in launcher.RUNTIME_VARIABLES}
    stale.update(COZ_SPAWNED="1:2:-:-:-:/x", COZ_PERF_WARMUP="1:5", COZ_KNOB="the program's own")
    env = front_env(stale)
    with open(tmp_path / "inherited", "w") as extra:
        r, pid = run_front(options, [probe, "env", "3"], tmp_path, env=env, pass_fds=(extra.fileno(),))
    assert r.returncode == 3, r.stderr
    assert MARK in r.stderr, r.stderr
    assert "coz: error" not in r.stderr and "internal error" not in r.stderr, r.stderr
    assert "the native front preloaded" not in r.stderr, r.stderr
    got = sorted(program_saw(r.stdout, "env"))
    assert got == expected_env(options, [probe, "env", "3"], env, env["COZ_LIBRARY"], pid)
    assert "COZ_KNOB=the program's own" in got
    # Read, the runtime's variables leave the program's environment (no
    # option here follows children): it sees its own, and LD_PRELOAD as it
    # was before coz run (the runtime's entry out).
    hidden = set(launcher.RUNTIME_VARIABLES) | {"LD_PRELOAD"}
    own = [e for e in got if e.split("=", 1)[0] not in hidden]
    own += [f"LD_PRELOAD={env['LD_PRELOAD']}"] if env.get("LD_PRELOAD") else []
    assert sorted(program_saw(r.stdout, "sees")) == sorted(own)
    # Neither the inherited file nor the helper's pipe (the runtime's own sit high: libcoz/fds.h).
    assert sorted(fd for fd in program_saw(r.stdout, "fd") if int(fd) < 1024) == ["0", "1", "2"], r.stdout
    assert program_saw(r.stdout, "sig") == inherited_dispositions()


def test_without_coz_library_the_front_preloads_the_runtime_of_its_build(probe, tmp_path):
    r, pid = run_front(["-v", "--sampling-only"], [probe, "env", "0"], tmp_path, env=front_env(library=False))
    assert r.returncode == 0 and MARK in r.stderr, r.stderr
    assert f"LD_PRELOAD={os.path.realpath(LIBCOZ)}" in program_saw(r.stdout, "env")
    assert "the native front preloaded" not in r.stderr, r.stderr  # the package would take the same one


DECLINED = [
    ["--follow-children", "--sampling-only"],   # an option the front does not take
    ["--sampling-only", "--sample-period", "1.5ms"],  # a value it would have to interpret
    ["--sampling-only", "-o", "run-%p.coz"],
    ["--sampling-only", "-o", "./p.coz"],
    ["--unit", "function"],
]


@pytest.mark.parametrize("options", DECLINED, ids=" ".join)
def test_a_command_line_the_front_does_not_take_goes_to_the_launcher(probe, tmp_path, monkeypatch, options):
    monkeypatch.chdir(tmp_path)
    env = front_env()
    r, pid = run_front(options + ["-v"], [probe, "env", "0"], tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "coz: running " in r.stderr and MARK not in r.stderr, r.stderr
    assert sorted(program_saw(r.stdout, "env")) == expected_env(options + ["-v"], [probe, "env", "0"], env,
                                                                env["COZ_LIBRARY"], pid)


def test_a_script_goes_to_the_launcher(tmp_path):
    script = tmp_path / "script"
    script.write_text("#!/bin/sh\nexit 4\n")
    script.chmod(0o755)
    r, _ = run_front(["-v", "--sampling-only"], [str(script)], tmp_path)
    assert r.returncode == 4 and "coz: running " in r.stderr and MARK not in r.stderr, r.stderr


@pytest.mark.parametrize("options,command", [
    (["--sampling-only", "--end-to-end"], None),
    (["--sampling-only", "--locks-only"], None),
    (["--bogus"], None),
    (["-p", "no-line"], None),
    (["--format", "xml"], None),
    (["--sample-period", "0"], None),
    (["--sample-period", "3601s"], None),
    (["--experiment-length", "99999999999999"], None),
    (["-o", ""], None),
    (["-o", "-"], None),
    ([], ["./missing"]),
    ([], ["./not-executable"]),
    ([], ["no-such-program-in-path"]),
], ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_errors_are_the_launchers_own(probe, tmp_path, options, command):
    (tmp_path / "not-executable").write_text("data\n")
    command = command or [probe, "env", "0"]
    r, _ = run_front(options, command, tmp_path)
    plain = subprocess.run([sys.executable, "-m", "cozprof", "run", *options, "---", *command], cwd=tmp_path,
                           env=front_env(), capture_output=True, text=True, timeout=120)
    assert plain.returncode != 0 and plain.stderr.startswith("coz: error: "), plain
    assert (r.returncode, r.stderr) == (plain.returncode, plain.stderr)
    assert r.stdout == "" and "internal error" not in r.stderr
    assert not (tmp_path / "-").exists()


def test_signals_reach_the_program_the_front_started(probe, tmp_path):
    # SIGTERM from the moment the program runs (the interpreter may still be
    # starting: the front holds it blocked until the launcher forwards it);
    # SIGINT sent to `coz` alone is ignored, as the terminal sends it to the
    # program too.
    with subprocess.Popen([FRONT, "run", "--sampling-only", "---", probe, "term"], cwd=tmp_path,
                          env=front_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE) as p:
        ready_pid(p)
        os.kill(p.pid, signal.SIGINT)
        os.kill(p.pid, signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    assert p.returncode == 7, err.decode()
    assert b"coz: note: " in err, err


def test_status_and_death_pass_through(tmp_path):
    r, _ = run_front(["--sampling-only"], ["sh", "-c", "exit 5"], tmp_path)
    assert r.returncode == 5
    r, _ = run_front(["--sampling-only"], ["sh", "-c", "kill -ABRT $$"], tmp_path)
    assert r.returncode == -signal.SIGABRT, r.stderr


def test_the_summary_reads_only_what_this_run_appended(probe, tmp_path):
    # The front takes the output file's size before the program starts: the
    # second run's summary gives its own warning once, not the first run's too.
    for _ in range(2):
        r, _ = run_front(["--sampling-only", "-b", "no-such-object"], [probe, "env", "0"], tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stderr.count("matches no loaded object") == 1, r.stderr


def test_without_an_interpreter_the_front_stops_the_program_it_started(probe, tmp_path):
    r, _ = run_front(["--sampling-only"], ["sleep", "30"], tmp_path,
                     env=front_env({"COZ_PYTHON": str(tmp_path / "no-python")}))
    assert r.returncode == 125, r
    assert "cannot run the Python interpreter" in r.stderr and "was stopped" in r.stderr, r.stderr
