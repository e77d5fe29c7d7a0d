"""`coz run --follow-children` on a build (issue 10, point 3): each warning of
the runtime is said once, however many processes wrote it, and the run ends
with one summary line. Needs the runtime's side of the contract: with
COZ_WARN_STDERR=0 (set by the launcher) it writes warnings only into the
profile."""

import glob
import re

from conftest import coz_run
from hostile_common import FAST, run_plain

SOURCES = {f"part{i}.c": f"int part{i}(int x) {{ return x * {i + 3}; }}\n" for i in range(4)}
MAKEFILE = "all: " + " ".join(f"part{i}.o" for i in range(4)) + "\n%.o: %.c\n\tcc -c -o $@ $<\n"


def tree(d):
    d.mkdir()
    for name, text in SOURCES.items():
        (d / name).write_text(text)
    (d / "Makefile").write_text(MAKEFILE)
    return d


def test_make_j2_says_each_warning_once_and_ends_with_the_summary(tmp_path):
    plain = run_plain(["make", "-j2"], cwd=tree(tmp_path / "plain"))
    profiled = coz_run([*FAST, "--follow-children"], ["make", "-j2"], cwd=tree(tmp_path / "profiled"))
    assert profiled.returncode == plain.returncode == 0, profiled.stderr.decode()
    assert sorted(p.name for p in (tmp_path / "profiled").glob("*.o")) == [f"part{i}.o" for i in range(4)]
    err = profiled.stderr.decode().splitlines()
    files = [tmp_path / "profiled" / "profile.coz"] + sorted(glob.glob(str(tmp_path / "profiled" / "profile.*.coz")))
    assert len(files) > 8  # make, the shells, cc and its programs: one profile per process
    warnings = [ln for ln in err if ln.startswith("coz: warning: ")]
    assert warnings, err
    assert len(warnings) == len(set(warnings)), "\n".join(err)  # each said once
    assert len(warnings) < len(files)
    assert any(re.search(r"no progress point was reached.* \(in \d+ processes\)$", w) for w in warnings), err
    # Nothing but the warnings and one summary line, the last.
    assert [ln for ln in err if not ln.startswith("coz: warning: ")] == [err[-1]]
    assert re.fullmatch(r"coz: note: \d+ experiments?, \d+ usable \(\d+\.\d per minute\), \d+ lines? with enough data, \d+ samples?, "
                        r"\d+ lost records?; profiles: " + re.escape(str(files[0])) + rf" and {len(files) - 1} more "
                        + re.escape(f"({tmp_path}/profiled/profile.<pid>.coz)"), err[-1]), err[-1]
