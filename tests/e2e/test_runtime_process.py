"""The runtime inside the process it enters: what it says, how it names the
build it profiles, and the resources it takes from the program."""

import json
import shlex
import subprocess
import sys

import pytest

from conftest import coz_env, coz_run, measured_experiments, records
from conftest import source_marker as marker
from hostile_common import preloaded_env


def build_id_of(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if "Build ID:" in line:
            return line.split("Build ID:")[1].strip()
    return None


def test_startup_record_names_the_build(build, tmp_path):
    exe = build("serial_ab")
    out = tmp_path / "p.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "50ms"], [exe, "50"])
    assert r.returncode == 0, r.stderr.decode()
    startup = records(out)[0]
    assert startup["argv0"] == exe
    want = build_id_of(exe)
    assert want and startup["build_id"] == want


def test_warnings_go_to_the_profile_and_to_stderr_unless_the_launcher_collects_them(build, tmp_path):
    exe = build("serial_ab", flags=("-O1", "-g0"))
    for to_stderr in ("1", "0"):
        out = tmp_path / f"w{to_stderr}.coz"
        r = subprocess.run([exe, "50"], capture_output=True, timeout=60,
                           env=preloaded_env({"COZ_OUTPUT": str(out), "COZ_WARN_STDERR": to_stderr,
                                              "COZ_EXPERIMENT_LENGTH": "50000000"}))
        assert r.returncode == 0
        said = r.stderr.decode().count("coz: warning: ")
        assert said == (1 if to_stderr == "1" else 0), r.stderr
        warnings = [x for x in records(out) if x["type"] == "warning" and x["code"] == "no-debug-info"]
        assert len(warnings) == 1 and exe in warnings[0]["message"]



def test_a_point_not_reached_does_not_lengthen_experiments(build, tmp_path):
    # FINAL is a registered --progress point that the loop never reaches; the
    # frequent "round" point is what experiments adapt to.
    exe = build("rare_point")
    out = tmp_path / "r.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "50ms", "-p", marker("rare_point", "FINAL")], [exe, "2"])
    assert r.returncode == 0, r.stderr.decode()
    walls = [x["wall_ns"] for x in measured_experiments(out)]
    assert len(walls) >= 8, walls
    # Doubling from 50 ms would reach 400 ms by the fourth experiment.
    assert max(walls) < 150e6, walls


@pytest.mark.parametrize("how", [[], ["close_range"], ["closefrom"], ["close_loop"]])
def test_program_that_takes_over_low_descriptors_keeps_its_profile(build, tmp_path, how):
    # dup2 onto 3..63 then close them all: the profiler's descriptors live
    # higher, so the profile and the samplers survive. close_range(3, ~0U)
    # and closefrom(3) close every number: they are interposed to spare the
    # runtime's (the profile held its startup record only), and still close
    # the program's own, one at 4000 included. So does a loop of close()
    # over every number up to the limit (a daemon's): the runtime's fail
    # with EBADF, as numbers the program never opened do (the profile held
    # no sample), and the program sees as many closes succeed as without
    # the profiler.
    exe = build("hostile_fds")
    out = tmp_path / "f.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "50ms"], [exe, "1", *how])
    assert r.returncode == 0 and r.stdout.startswith(b"hostile_fds cpu_ms="), r.stderr.decode()
    fields = dict(kv.split("=") for kv in r.stdout.decode().split()[1:])
    cpu_ms = int(fields["cpu_ms"])
    assert fields["high_closed"] == ("1" if how else "-1")
    if how == ["close_loop"]:
        plain = subprocess.run([exe, "0.1", *how], capture_output=True, timeout=60, check=True)
        plain_fields = dict(kv.split("=") for kv in plain.stdout.decode().split()[1:])
        assert (fields["closed"], fields["errors"]) == (plain_fields["closed"], plain_fields["errors"]) == ("62", "0")
    recs = records(out)
    assert recs[-1]["type"] == "shutdown"
    exps = [x for x in recs if x["type"] == "experiment"]
    assert len(exps) >= 8 and sum(p["delta"] for x in exps for p in x["progress"]) > 0
    # One sample per millisecond of CPU time: sampling went on after the takeover.
    assert recs[-1]["samples"] > 0.8 * cpu_ms, (recs[-1]["samples"], cpu_ms)


def test_a_program_that_moves_its_stderr_gets_none_of_coz_s_lines(build, tmp_path):
    # A daemon puts its log file on descriptor 2 (an inetd service, its
    # client's socket): coz's own lines, here --verbose's line per
    # experiment, stay on the standard error coz run was given.
    exe = build("hostile_fds")
    log = tmp_path / "program.log"
    r = coz_run(["-v", "-o", str(tmp_path / "s.coz"), "--experiment-length", "50ms"], [exe, "0.5"],
                env={"HOSTILE_FDS_STDERR": str(log)})
    assert r.returncode == 0, r.stderr.decode()
    assert log.read_text() == "hostile_fds: its own line\n"
    assert "coz: experiment 3: " in r.stderr.decode(), r.stderr.decode()


def test_deep_stacks_are_sampled_and_their_cut_is_counted(build, tmp_path):
    # 300 frames make perf records of about 2.4 KiB: each is still a sample
    # (its innermost 64 frames), and the cut is counted.
    exe = build("deep", flags=("-g", "-O1", "-fno-omit-frame-pointer"))
    out = tmp_path / "d.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "50ms", "--end-to-end"], [exe, "1", "300"])
    assert r.returncode == 0, r.stderr.decode()
    cpu_ms = int(r.stdout.split(b"cpu_ms=")[1])
    shutdown = records(out)[-1]
    assert shutdown["samples"] > 0.8 * cpu_ms, (shutdown, cpu_ms)
    assert shutdown["truncated_stacks"] > 0.8 * shutdown["samples"], shutdown
    assert shutdown["skipped_records"] == 0
    counts = {}
    for x in records(out):
        if x["type"] == "samples":
            for k, n in x["counts"].items():
                counts[k] = counts.get(k, 0) + n
    bottom = sum(n for k, n in counts.items() if k.endswith("/" + marker("deep", "BOTTOM")))
    assert bottom > 0.8 * shutdown["samples"], counts


def _low_fds(argv, close_stdout):
    """What low_fds reports of its low descriptors, run from a shell with its
    standard output closed or not."""
    cmd = " ".join(shlex.quote(a) for a in argv) + (" >&-" if close_stdout else " >/dev/null")
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, timeout=120, env=coz_env())
    assert r.returncode == 0, r.stderr.decode()
    (line,) = [x for x in r.stderr.decode().splitlines() if x.startswith("low_fds open:")]
    return line


@pytest.mark.parametrize("close_stdout", [False, True], ids=["stdout open", "stdout closed"])
def test_the_programs_low_descriptors_are_as_without_the_profiler(build, tmp_path, close_stdout):
    # The runtime's own descriptors (profile, perf events, the ELF and debug
    # files it reads, libunwind's pipe) live high: the program's low numbers,
    # its first open() and a closed standard output are what they are
    # without the profiler (libunwind's pipe once took a closed stdout).
    exe = build("low_fds")
    plain = _low_fds([exe, "0.5"], close_stdout)
    env_cmd = [sys.executable, "-m", "cozprof", "run", "-o", str(tmp_path / "l.coz"),
               "--experiment-length", "50ms", "---", exe, "0.5"]
    profiled = _low_fds(env_cmd, close_stdout)
    assert profiled == plain, (profiled, plain)
    assert ("Bad file descriptor" in plain) == close_stdout
    assert records(tmp_path / "l.coz")[-1]["type"] == "shutdown"


def baseline_rate_errors(out, true_rate):
    exps = measured_experiments(out)
    errors = [abs(x["progress"][0]["delta"] / (x["duration_ns"] / 1e9) / true_rate - 1) for x in exps]
    return exps, sorted(errors)


def test_a_rare_point_is_measured_between_its_visits(build, tmp_path):
    # A point visited every 7 ms, 14.3 visits per 100 ms experiment: counted
    # over fixed windows, a baseline reads 14 or 15 visits, 2% or 5% off its
    # true rate. Windows that start and end at a visit read the rate itself,
    # less the polling's lag (a sixteenth of the period) and late wake-ups.
    exe = build("paced_point")
    out = tmp_path / "p.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "100ms", "--fixed-line", marker("paced_point", "HOT"),
                 "--fixed-speedup", "0"], [exe, "4", "7000"])
    assert r.returncode == 0, r.stderr.decode()
    exps, errors = baseline_rate_errors(out, 1e6 / 7000)
    aligned = [x for x in exps if x.get("aligned") == "tick"]
    assert len(exps) >= 15 and len(aligned) >= len(exps) - 2, [x.get("aligned") for x in exps]
    assert errors[len(errors) // 2] < 0.01, errors


@pytest.mark.parametrize("how", ["execl", "execvp", "execve"])
def test_an_exec_writes_the_final_records_of_the_image_it_replaces(build, tmp_path, how):
    # The new image keeps nothing of the old one: its threads, stacks and
    # shutdown are written before the exec (they were lost: 3 images made 3
    # startups and no shutdown), and the new image's runtime starts a new run
    # in the same file. An exec that fails (no such file) stops nothing.
    exe = build("exec_self")
    out = tmp_path / "x.coz"
    r = coz_run(["-o", str(out), "--experiment-length", "50ms"], [exe, "0.4", how])
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().split("\n")[:2] == ["generation 0", "generation 1"]
    recs = records(out)
    starts = [i for i, x in enumerate(recs) if x["type"] == "startup"]
    shutdowns = [x for x in recs if x["type"] == "shutdown"]
    assert len(starts) == 2 and [x["reason"] for x in shutdowns] == ["exec", "exit"], shutdowns
    first = recs[starts[0]:starts[1]]
    assert first[-1]["type"] == "shutdown" and any(x["type"] == "thread" for x in first)
    # Each image sampled its own work: the first about twice the second's (0.8 s of CPU against 0.4).
    assert shutdowns[0]["samples"] > 1.3 * shutdowns[1]["samples"] > 0, shutdowns


def _file_size_limit(limit):
    def set_limit():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    return set_limit


def test_a_file_size_limit_stops_the_profile_not_the_program(build, tmp_path):
    # Under `ulimit -f`, a runtime write past the limit drew SIGXFSZ, whose
    # default action killed the program: at start, on its main thread, when
    # the profile was already at the limit (a second run appending to it).
    # The profile now ends at the last whole record under the limit, coz
    # says so once, and the program runs as it does without the profiler.
    # The summary then read a line cut inside a string, which cost it the
    # run's summary (a SystemError).
    exe = build("hostile_fds")
    out = tmp_path / "f.coz"
    # "fresh": 4096 bytes, less than a 0.3 s profile. "at the limit": the
    # limit is the size the first run left (whole records stop short of
    # 4096 by up to a record's length, room a second run's first records
    # may take), so not even the startup record fits.
    limit = 4096
    for attempt in ("fresh", "at the limit"):
        if attempt == "at the limit":
            limit = out.stat().st_size
        plain = subprocess.run([exe, "0.3"], capture_output=True, timeout=60, preexec_fn=_file_size_limit(limit))
        r = coz_run(["-o", str(out), "--experiment-length", "50ms"], [exe, "0.3"],
                    preexec_fn=_file_size_limit(limit))
        err = r.stderr.decode()
        assert plain.returncode == r.returncode == 0, (attempt, err)
        assert r.stdout.startswith(b"hostile_fds cpu_ms="), (attempt, r.stdout)
        assert err.count(f"coz: error: writing the profile {out} failed (File too large)") == 1, (attempt, err)
        assert "cannot summarize" not in err and "Traceback" not in err, (attempt, err)
        # Whole records only: the file ends at a record's end, under the limit.
        data = out.read_bytes()
        assert 0 < len(data) <= limit and data.endswith(b"\n"), (attempt, len(data))
        assert all(json.loads(line) for line in data.splitlines()), attempt
        if attempt == "at the limit":  # not "the program ended before the profiler started"
            assert len(data) == limit, "nothing written"
            assert (f"coz: note: no profile was written to {out}: the file size limit (ulimit -f) leaves it "
                    "room for 0 more bytes") in err, err
