"""The `coz` command's standard output and error (python/cozprof/output.py):
text its encoding cannot hold is escaped rather than a traceback, and file
names that are not valid UTF-8 are written back byte for byte."""

import os
import subprocess
import sys

import pytest

from conftest import REPO
from cozprof import output
from stackgen import ProfileWriter

SOURCE = "int main() {\n  // h\u00e9llo \u2603 7919\n  w\u00f6rk();\n}\n"


def coz(*argv, cwd, **env):
    """`coz ARGV` as the installed command runs it (cli.main() without arguments)."""
    environ = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"), **env)
    return subprocess.run([sys.executable, "-m", "cozprof", *argv], cwd=cwd, env=environ,
                          capture_output=True, timeout=60)


@pytest.fixture
def unicode_profile(tmp_path):
    """A profile of w\u00f6rk in a source file with non-ASCII text."""
    src = tmp_path / "src.c"
    src.write_text(SOURCE, encoding="utf-8")
    w = ProfileWriter()
    w.add([("main", str(src), 3), ("w\u00f6rk", str(src), 2)], 5)
    return w.write(tmp_path / "p.coz")


@pytest.mark.parametrize("view", [["--list", "."], ["--top"]])
def test_text_views_on_an_ascii_stdout_escape_what_it_cannot_encode(unicode_profile, tmp_path, view):
    r = coz("report", str(unicode_profile), *view, cwd=tmp_path, PYTHONIOENCODING="ascii")
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert b"Traceback" not in r.stderr
    assert b"w\\xf6rk" in r.stdout
    if view[0] == "--list":
        assert b"// h\\xe9llo \\u2603 7919" in r.stdout


def test_folded_stacks_on_an_ascii_stdout_stay_utf8(unicode_profile, tmp_path):
    # Data for flamegraph.pl, not text for people: written as it is, in UTF-8.
    r = coz("export", str(unicode_profile), "--folded", "-", cwd=tmp_path, PYTHONIOENCODING="ascii")
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert r.stdout == "main;w\u00f6rk 5\n".encode("utf-8")


def test_folded_file_is_utf8_whatever_the_locale(unicode_profile, tmp_path):
    out = tmp_path / "out.folded"
    r = coz("export", str(unicode_profile), "--folded", str(out), cwd=tmp_path,
            PYTHONIOENCODING="ascii", LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    assert r.returncode == 0, r.stderr.decode("utf-8", "replace")
    assert out.read_bytes() == "main;w\u00f6rk 5\n".encode("utf-8")


NAME = b"q\xff"  # not UTF-8: Python decodes the byte as the surrogate U+DCFF


@pytest.mark.parametrize("argv, expected", [
    ([b"report", b"nope\xff.coz"], b"coz: error: no such profile: nope\xff.coz\n"),
    ([b"locks", b"nope\xff.coz"], b"coz: error: no such profile: nope\xff.coz\n"),
    ([b"view", b"--no-browser", b"nope\xff.coz"], b"coz: error: nope\xff.coz: no such profile file\n"),
    ([b"plot", b"PROFILE", b"-o", b"x\xff.jpg"], b"coz: error: cannot tell the image format of 'x\xff.jpg'\n"),
    ([b"export", b"PROFILE", b"--pprof", b"/nonexistent/x\xff.pb.gz"],
     b"coz: error: cannot write /nonexistent/x\xff.pb.gz: No such file or directory\n"),
])
def test_file_names_in_errors_are_written_as_typed(unicode_profile, tmp_path, argv, expected):
    argv = [os.fsencode(unicode_profile) if a == b"PROFILE" else a for a in argv]
    r = coz(*argv, cwd=tmp_path, LC_ALL="C.UTF-8")
    assert r.returncode == 2
    assert r.stderr.startswith(expected), r.stderr
    assert b"\\udc" not in r.stderr


def test_file_names_in_wrote_messages_are_written_as_typed(unicode_profile, tmp_path):
    odd = tmp_path / os.fsdecode(NAME + b".coz")
    odd.write_bytes(unicode_profile.read_bytes())
    r = coz(b"export", os.fsencode(odd.name),
            b"--folded", NAME + b".folded", b"--pprof", NAME + b".pb.gz", cwd=tmp_path, LC_ALL="C.UTF-8")
    assert r.returncode == 0, r.stderr
    assert r.stderr == b"coz: wrote " + NAME + b".pb.gz\ncoz: wrote " + NAME + b".folded\n"
    assert os.path.exists(tmp_path / os.fsdecode(NAME + b".folded"))


def test_escape_handler_writes_surrogates_as_bytes_and_escapes_the_rest():
    assert output.utf8("a\udcffb\u00e9") == b"a\xffb\xc3\xa9"
    assert ("x\udcfe\u00e9\u2603\U0001f600\udc41".encode("ascii", output.ESCAPE)
            == b"x\xfe\\xe9\\u2603\\U0001f600\\udc41")
