"""The runtime inside the process it enters: what it says, how it names the
build it profiles, and the resources it takes from the program."""

import subprocess

from conftest import coz_run, records
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
