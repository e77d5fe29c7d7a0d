"""coz run: argument parsing, environment contract, program checks, and the
launcher's exit status / signal pass-through with a stand-in preload library."""

import os
import re
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys

import pytest

from conftest import REPO
from cozprof import cli, launcher, library
from cozprof.errors import CozError

PYTHON_PATH = os.path.join(REPO, "python")


def parse(*argv):
    return cli.parse_args(["run", *argv])


# -- argument parsing ----------------------------------------------------------

def test_defaults():
    a = parse("---", "./app", "x")
    assert a.command == ["./app", "x"]
    assert a.binary_scope == ["MAIN"] and a.source_scope == ["%"] and a.progress == []
    assert a.output == "profile.coz" and a.format == "json"
    assert a.fixed_line is None and a.fixed_speedup_pct is None
    assert a.end_to_end is False and a.verbose is False and a.follow_children is False
    assert a.sample_period_ns == 1_000_000 and a.experiment_length_ns == 500_000_000


def test_sampling_only_samples_at_pprofs_rate_unless_told():
    assert parse("--sampling-only", "---", "./app").sample_period_ns == 10_000_000
    assert parse("--sampling-only", "--sample-period", "1ms", "---", "./app").sample_period_ns == 1_000_000
    assert parse("--locks-only", "---", "./app").sample_period_ns == 1_000_000


def test_short_and_long_forms_are_equal():
    short = parse("-b", "lib%", "-b", "MAIN", "-s", "src/%", "-p", "a.c:3", "-o", "x.coz", "-v",
                  "---", "prog")
    long = parse("--binary-scope", "lib%", "--binary-scope=MAIN", "--source-scope", "src/%",
                 "--progress", "a.c:3", "--output", "x.coz", "--verbose", "---", "prog")
    assert vars(short) == vars(long)
    assert short.binary_scope == ["lib%", "MAIN"]


def test_everything_after_separator_is_untouched():
    a = parse("-v", "---", "prog", "-v", "---", "--help", "-o")
    assert a.command == ["prog", "-v", "---", "--help", "-o"]


@pytest.mark.parametrize("text, unit, ns", [
    ("1ms", "ms", 1_000_000), ("250us", "ms", 250_000), ("2", "ms", 2_000_000),
    ("500ns", "ms", 500), ("0.5", "s", 500_000_000), ("2s", "s", 2_000_000_000),
    ("1.5ms", "s", 1_500_000),
])
def test_parse_time(text, unit, ns):
    assert launcher.parse_time(text, unit, "x") == ns


@pytest.mark.parametrize("argv, message", [
    (["./app"], "missing '---'"),
    (["-o", "p.coz", "./app"], "missing '---'"),
    (["--", "./app"], "missing '---'"),
    (["---"], "missing command"),
    (["--sample-period", "fast", "---", "x"], "bad --sample-period"),
    (["--sample-period", "0", "---", "x"], "too short"),
    (["--experiment-length=-1s", "---", "x"], "bad --experiment-length"),
    (["--fixed-speedup", "150", "---", "x"], "bad --fixed-speedup"),
    (["--fixed-speedup", "ten", "---", "x"], "bad --fixed-speedup"),
    (["-o", "-", "---", "x"], "-o - would write the profile into the program's standard output"),
    (["--fixed-line", "app.c", "---", "x"], "bad --fixed-line"),
    (["--fixed-line", "app.c:0", "---", "x"], "bad --fixed-line"),
    (["-p", "nocolon", "---", "x"], "bad --progress"),
    (["--unit", "lines", "---", "x"], "bad --unit"),
    (["--unit", "line,line", "---", "x"], "bad --unit"),
    (["--unit", "", "---", "x"], "bad --unit"),
    (["--fixed-callsite", "app.c", "---", "x"], "bad --fixed-callsite"),
    (["--fixed-function", " ", "---", "x"], "bad --fixed-function"),
    (["--fixed-line", "a.c:1", "--fixed-function", "f", "---", "x"], "cannot go together"),
    (["--unit", "callsite", "--format", "legacy", "---", "x"], "legacy format names lines only"),
    (["--unit", "function", "--sampling-only", "---", "x"], "cannot go with --unit"),
    (["--format", "xml", "---", "x"], "invalid choice"),
    (["--bogus", "---", "x"], "unrecognized arguments"),
    (["./app", "---", "x"], "unrecognized arguments"),
])
def test_bad_arguments(argv, message):
    with pytest.raises(CozError) as ei:
        parse(*argv)
    assert message in str(ei.value)


def test_double_dash_hint_suggests_three():
    with pytest.raises(CozError) as ei:
        parse("--", "./app", "arg")
    assert "coz run [options] --- ./app arg" in ei.value.hint


@pytest.mark.parametrize("argv, hint", [
    (["/bin/true"], "write: coz run [options] --- /bin/true"),
    (["-o", "p.coz", "-v", "./app", "arg"], "write: coz run -o p.coz -v --- ./app arg"),
    (["--output=p.coz", "--end-to-end", "./app"], "write: coz run --output=p.coz --end-to-end --- ./app"),
    (["-v"], "write: coz run -v --- command args"),
    ([], "write: coz run [options] --- command args"),
    (["-o", "p.coz", "--", "./app"], "the separator is three dashes: coz run -o p.coz --- ./app"),
])
def test_missing_separator_hint_puts_the_options_before_it_and_the_command_after(argv, hint):
    with pytest.raises(CozError, match="missing '---'") as ei:
        parse(*argv)
    assert ei.value.hint == hint


@pytest.mark.parametrize("text", ["²", "٥٠", "50%%", "%", "5 0", "+5", "-1", "101"])
def test_fixed_speedup_takes_ascii_digits_and_at_most_one_percent_sign(text):
    # '²'.isdigit() is true and int('²') raises; int('٥٠') is 50: only 0-9 are taken.
    with pytest.raises(CozError, match="bad --fixed-speedup"):
        parse("--fixed-speedup", text, "---", "x")


@pytest.mark.parametrize("text, pct", [("50%", 50), (" 40 ", 40), ("0", 0), ("100", 100), ("007%", 7)])
def test_fixed_speedup_good_values(text, pct):
    assert parse("--fixed-speedup", text, "---", "x").fixed_speedup_pct == pct


def _argparse_run(options):
    return cli.build_parser(only="run").parse_args(["run", *options])


@pytest.mark.parametrize("options", [
    [],
    ["--sampling-only"],
    ["-b", "lib%", "-b", "MAIN", "-s", "src/%", "-p", "a.c:3", "-p", "b.c:4", "-o", "x.coz", "-v"],
    ["--binary-scope=lib%", "--source-scope", "src/%", "--progress=a.c:3", "--output=", "--verbose"],
    ["--fixed-line", "a.c:1", "--fixed-speedup", "40", "--end-to-end", "--follow-children",
     "--sample-period", "2ms", "--experiment-length=1s", "--format", "legacy"],
    ["--fixed-function", "f", "--unit=function,line", "--blocked-scope", "", "--no-lock-counters"],
    ["--fixed-callsite", "a.c:9", "--locks-only", "--format=json", "-o", "a=b", "-o", "last.coz"],
])
def test_fast_parser_gives_argparse_namespace(options):
    # `coz run` parses well-formed options without argparse; the namespace must be
    # the one argparse builds from the same table, option for option.
    fast = launcher.parse_fast(options)
    assert fast is not None
    assert vars(fast) == vars(_argparse_run(options))


@pytest.mark.parametrize("options", [
    ["-h"], ["--help"], ["--samp", "2ms"], ["--sampling"], ["-vo", "x"], ["-ox.coz"], ["-o=x.coz"],
    ["--verbose=1"], ["-o"], ["-o", "-v"], ["--output", "--verbose"], ["--format", "xml"],
    ["--format=xml"], ["./app"], ["--"], ["-b", "-1"],
])
def test_fast_parser_leaves_the_rest_to_argparse(options):
    # Help, abbreviations, joined short options, values that look like options,
    # bad choices, stray words: argparse parses them, with its own messages.
    assert launcher.parse_fast(options) is None


def test_default_times_are_what_parse_time_reads(monkeypatch):
    table = dict(launcher._DEFAULT_TIMES)
    monkeypatch.setattr(launcher, "_DEFAULT_TIMES", {})
    for (text, unit), ns in table.items():
        assert launcher.parse_time(text, unit, "x") == ns


def test_run_starts_the_program_without_argparse_re_or_enum(stub_library, tmp_path):
    # What `coz run` imports before it starts the program is on every run's way
    # to main: argparse (with re, gettext, locale) and enum (signal's) cost 5-15 ms.
    # (Those the interpreter's start already imported, e.g. through a .pth file, do not count.)
    code = ("import sys\nbefore = set(sys.modules)\nfrom cozprof import cli, launcher\n"
            "def spawn(*a, **k):\n"
            "    print(sorted(m for m in ('argparse', 're', 'enum', 'gettext', 'locale', 'signal', "
            "'cozprof.profile') if m in sys.modules and m not in before))\n"
            "    return 0, 1\n"
            "launcher.spawn_and_wait = spawn\n"
            "cli.main(['run', '--sampling-only', '-o', 'x.coz', '---', 'true'])\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=PYTHON_PATH, COZ_LIBRARY=stub_library),
                       timeout=30)
    assert r.stdout.splitlines()[0] == "[]", r.stderr


def test_the_installed_command_imports_neither_re_nor_enum_before_the_program(stub_library, tmp_path):
    # python/bin/coz is the `coz` pip installs (pyproject's script-files). The
    # wrapper pip writes for a console script imported re (with enum: 5-7 ms)
    # before anything else. What the command imports before it starts the program
    # is what -X importtime prints before --verbose's "running" line.
    script = os.path.join(PYTHON_PATH, "bin", "coz")
    r = subprocess.run([sys.executable, "-X", "importtime", script, "run", "--verbose", "-o", "x.coz",
                        "---", "true"], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, PYTHONPATH=PYTHON_PATH, COZ_LIBRARY=stub_library))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("coz: running"))
    before = {line.rsplit("|", 1)[1].strip() for line in lines[:start] if line.startswith("import time:")}
    assert "cozprof.launcher" in before
    assert not before & {"re", "enum", "json", "argparse", "cozprof.profile"}


def test_the_summarys_reading_imports_neither_json_re_nor_enum(tmp_path):
    # After the program's end the summary reads the profile. json (with re and
    # enum) took 11 ms of a fresh interpreter, longer than a short program runs:
    # the launcher's import of them, started with the program, ended after it.
    prof = tmp_path / "p.coz"
    prof.write_text('{"type":"startup","version":1,"pid":1,"mode":"sampling-only"}\n'
                    '{"type":"shutdown","time_ns":2,"samples":1,"lost_records":0,"reason":"exit"}\n')
    code = ("import sys\nbefore = set(sys.modules)\nfrom cozprof import run_summary\n"
            "run_summary.prepare()\n"
            f"runs = run_summary.load_tail({str(prof)!r}, 0)\n"
            "assert len(runs) == 1 and runs[0].shutdown['samples'] == 1, runs\n"
            "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules and m not in before))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, PYTHONPATH=PYTHON_PATH))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "[]", r.stdout


def test_the_summarys_imports_are_done_while_the_program_runs(monkeypatch):
    # run_summary.prepare: the profile parser is imported after the program has
    # started and before the launcher waits for it, so neither its start nor the
    # summary after its end waits for those imports.
    seen = []

    def while_running():
        seen.append(os.waitpid(pid_box[0], os.WNOHANG) if pid_box else None)

    pid_box = []
    real_spawn = launcher._spawn

    def spawn(*a):
        pid_box.append(real_spawn(*a))
        return pid_box[0]

    monkeypatch.setattr(launcher, "_spawn", spawn)
    status, pid = launcher.spawn_and_wait(["sleep", "0.3"], shutil.which("sleep"), dict(os.environ),
                                          while_running=while_running)
    assert status == 0 and pid == pid_box[0]
    assert seen == [(0, 0)]  # called once, the program still running


def test_fixed_speedup_and_times():
    a = parse("--fixed-speedup", "40", "--fixed-line", "src/a.c:12", "--sample-period", "2ms",
              "--experiment-length", "100ms", "--end-to-end", "--follow-children",
              "--format", "legacy", "---", "x")
    assert a.fixed_speedup_pct == 40 and a.fixed_line == "src/a.c:12"
    assert a.sample_period_ns == 2_000_000 and a.experiment_length_ns == 100_000_000


# -- environment contract ------------------------------------------------------------

def test_build_env_contract():
    a = parse("-b", "MAIN", "-b", "libfoo%", "-s", "%/src/%", "-p", "a.c:1", "-p", "b.c:2",
              "-o", "out-%p.coz", "--fixed-line", "a.c:7", "--fixed-speedup", "25",
              "--end-to-end", "--sample-period", "500us", "--experiment-length", "2",
              "--format", "legacy", "-v", "--follow-children", "--blocked-scope", "lb", "---", "x")
    base = {"PATH": "/bin", "LD_PRELOAD": "/opt/other.so", "COZ_FIXED_LINE": "stale:1",
            "COZ_FIXED_FUNCTION": "stale", "COZ_LIBRARY": "/keep.so", "COZ_APP_KNOB": "7"}
    env = launcher.build_env(a, "/lib/libcoz.so", base_env=base, launcher_pid=4242)
    coz = {k: v for k, v in env.items() if k.startswith("COZ_")}
    assert coz == {
        "COZ_LIBRARY": "/keep.so",
        "COZ_APP_KNOB": "7",  # the program's own variable: kept
        "COZ_OUTPUT": os.path.join(os.getcwd(), "out-%p.coz"),
        "COZ_FORMAT": "legacy",
        "COZ_BINARY_SCOPE": "MAIN\tlibfoo%",
        "COZ_SOURCE_SCOPE": "%/src/%",
        "COZ_PROGRESS_POINTS": "a.c:1\tb.c:2",
        "COZ_FIXED_LINE": "a.c:7",
        "COZ_FIXED_SPEEDUP": "25",
        "COZ_END_TO_END": "1",
        "COZ_SAMPLE_PERIOD": "500000",
        "COZ_EXPERIMENT_LENGTH": "2000000000",
        "COZ_VERBOSE": "1",
        "COZ_FOLLOW_CHILDREN": "1",
        "COZ_LAUNCHER_PID": "4242",
        "COZ_BLOCKED_SCOPE": "lb",
    }
    assert env["LD_PRELOAD"] == "/lib/libcoz.so:/opt/other.so"
    assert env["PATH"] == "/bin"


def test_launcher_removes_exactly_the_runtimes_variables():
    # The launcher's list and the runtime's option table name the same variables:
    # a runtime option missing from the list would leak in from an outer environment.
    with open(os.path.join(REPO, "libcoz", "config.cpp")) as f:
        table = set(re.findall(r'^\s*\{"(COZ_[A-Z_]+)",', f.read(), re.M))
    assert len(table) >= 20
    assert set(launcher.RUNTIME_VARIABLES) == table


def _front_source():
    with open(os.path.join(REPO, "libcoz", "front_run.c")) as f:
        return f.read()


def test_front_removes_the_launchers_variables_and_its_own_hand_overs():
    # front_run.c keeps its own copy of RUNTIME_VARIABLES (a C front cannot read
    # the Python table); the copy must name the same variables, plus the
    # hand-overs only the launcher may receive and the preload it sets.
    block = re.search(r"kRuntimeVariables\[\] = \{(.*?)\};", _front_source(), re.S).group(1)
    names = re.findall(r'"([A-Z_]+)"', block)
    assert len(names) == len(set(names))
    assert set(names) == set(launcher.RUNTIME_VARIABLES) | {"COZ_PERF_WARMUP", "COZ_SPAWNED", "LD_PRELOAD"}


def test_front_options_are_the_launchers():
    # Every flag the front takes is a `coz run` option of the same kind
    # (one that takes a value, or a switch), and takes the short and long
    # forms together.
    block = re.search(r"kOptions\[\] = \{(.*?)\};", _front_source(), re.S).group(1)
    rows = re.findall(r'\{"(-[-a-z]+)", k[A-Za-z]+, ([01])\}', block)
    assert len(rows) >= 15
    kinds = {}
    for flags, kw in launcher.RUN_OPTIONS:
        for flag in flags:
            kinds[flag] = (kw.get("action", "store") not in ("store_true", "store_false"), flags)
    taken = {flag for flag, _ in rows}
    for flag, takes_value in rows:
        assert flag in kinds, f"{flag}: not a coz run option"
        assert kinds[flag][0] == (takes_value == "1"), f"{flag}: takes a value in one table only"
        assert set(kinds[flag][1]) <= taken, f"{flag}: its other forms {kinds[flag][1]} are not taken"


def test_build_env_defaults_leave_optional_variables_unset():
    env = launcher.build_env(parse("---", "x"), "/l.so", base_env={}, launcher_pid=1)
    assert env["LD_PRELOAD"] == "/l.so"
    for key in ("COZ_FIXED_LINE", "COZ_FIXED_SPEEDUP", "COZ_END_TO_END", "COZ_UNITS", "COZ_FIXED_FUNCTION",
                "COZ_FIXED_CALLSITE"):
        assert key not in env
    assert env["COZ_PROGRESS_POINTS"] == "" and env["COZ_VERBOSE"] == "0"
    assert env["COZ_FOLLOW_CHILDREN"] == "0" and env["COZ_FORMAT"] == "json"
    assert env["COZ_WARN_STDERR"] == "0"  # warnings into the profile; the launcher prints them once


def test_build_env_units():
    env = launcher.build_env(parse("--unit", "function,callsite", "--fixed-function", "ns::parse", "---", "x"),
                             "/l.so", base_env={}, launcher_pid=1)
    assert env["COZ_UNITS"] == "function,callsite" and env["COZ_FIXED_FUNCTION"] == "ns::parse"
    env = launcher.build_env(parse("--fixed-callsite", "src/a.c:9", "---", "x"), "/l.so", base_env={},
                             launcher_pid=1)
    assert env["COZ_FIXED_CALLSITE"] == "src/a.c:9" and "COZ_UNITS" not in env


# -- library and program checks -------------------------------------------------------

@pytest.fixture(scope="module")
def stub_library(tmp_path_factory):
    """A trivial preload library: its constructor writes $STUB_MARKER, proving it loaded."""
    d = tmp_path_factory.mktemp("stub")
    src = d / "stub.c"
    src.write_text(
        '#include <stdio.h>\n#include <stdlib.h>\n'
        '__attribute__((constructor)) static void stub_init(void) {\n'
        '  const char *m = getenv("STUB_MARKER");\n'
        '  if (m) { FILE *f = fopen(m, "a"); if (f) { fputs("loaded\\n", f); fclose(f); } }\n'
        '}\n')
    lib = d / "libstub.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


def test_find_library_from_env(stub_library):
    assert launcher.find_library({"COZ_LIBRARY": stub_library}) == stub_library
    with pytest.raises(CozError, match="not a file"):
        launcher.find_library({"COZ_LIBRARY": "/nonexistent/libcoz.so"})


@pytest.fixture(scope="module")
def elf_files(tmp_path_factory, stub_library):
    """Files ld.so refuses to preload, each for its own reason (its message in the comment)."""
    d = tmp_path_factory.mktemp("elf")
    src = d / "m.c"
    src.write_text("int main(void) { return 0; }\n")
    (d / "text.so").write_text("not a library\n")                           # file too short / invalid ELF header
    (d / "short.so").write_bytes(b"\x7fELF\x02\x01\x01")                    # (a header cut short)
    subprocess.run(["gcc", "-pie", "-fPIE", "-o", str(d / "pie"), str(src)], check=True)  # cannot dynamically load PIE
    subprocess.run(["gcc", "-no-pie", "-o", str(d / "exec"), str(src)], check=True)       # cannot dynamically load executable
    subprocess.run(["gcc", "-c", "-o", str(d / "object.o"), str(src)], check=True)       # only ET_DYN and ET_EXEC may be loaded
    with open(stub_library, "rb") as f:
        lib = f.read()
    other_class = bytearray(lib)
    other_class[4] = 1 if lib[4] == 2 else 2                                  # wrong ELF class
    (d / "class.so").write_bytes(other_class)
    other_machine = bytearray(lib)
    order = "little" if lib[5] == 1 else "big"
    machine = int.from_bytes(lib[18:20], order)
    other_machine[18:20] = (183 if machine != 183 else 62).to_bytes(2, order)  # cannot open shared object file
    (d / "machine.so").write_bytes(other_machine)
    return d


@pytest.mark.parametrize("name, message", [
    ("text.so", "is not an ELF shared library"),
    ("short.so", "is not an ELF shared library"),
    ("pie", "is an executable, not a shared library"),
    ("exec", "is an executable, not a shared library"),
    ("object.o", "is an object file, not a shared library"),
    ("class.so", "is built for 32-bit"),
    ("machine.so", "is built for 64-bit"),
])
def test_check_library_refuses_what_the_dynamic_loader_would(elf_files, name, message):
    path = str(elf_files / name)
    with pytest.raises(CozError, match=message) as ei:
        launcher.check_library(path, "/bin/sh")
    assert ei.value.status is None and "COZ_LIBRARY" in ei.value.hint  # coz's own error: 125
    # The loader's own verdict is the reference: it ignores the library, with a message.
    r = subprocess.run(["/bin/sh", "-c", "true"], env=dict(os.environ, LD_PRELOAD=path),
                       capture_output=True, text=True, timeout=30)
    assert "cannot be preloaded" in r.stderr


def test_check_library_takes_shared_libraries(stub_library, tmp_path):
    launcher.check_library(stub_library, "/bin/sh")
    launcher.check_library(stub_library)               # this interpreter's platform
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\n")
    launcher.check_library(stub_library, str(script))  # a script: this interpreter's platform too
    libc = subprocess.run(["sh", "-c", "ldd /bin/sh | awk '/libc.so/ {print $3}'"], capture_output=True,
                          text=True).stdout.strip()
    if libc:
        launcher.check_library(libc, "/bin/sh")         # ET_DYN with a PT_INTERP, but no DF_1_PIE


def test_a_library_the_loader_would_refuse_exits_125_before_the_program(elf_files, tmp_path):
    # Without the check, ld.so printed its message, the program ran unprofiled, and coz exited 0.
    env = dict(os.environ, COZ_LIBRARY=str(elf_files / "text.so"), PYTHONPATH=PYTHON_PATH)
    r = subprocess.run([sys.executable, "-m", "cozprof", "run", "---", "sh", "-c", "echo ran"], env=env,
                       cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode == 125 and r.stdout == ""
    assert r.stderr.splitlines()[0] == f"coz: error: {elf_files / 'text.so'} is not an ELF shared library: " \
                                       "the dynamic loader cannot preload it"


def test_find_library_not_found(monkeypatch, tmp_path):
    monkeypatch.setattr(library, "__file__", str(tmp_path / "a" / "b" / "library.py"))
    with pytest.raises(CozError) as ei:
        launcher.find_library({})
    assert "cannot find libcoz.so" in str(ei.value) and "cmake" in ei.value.hint


def test_resolve_program(tmp_path):
    exe = tmp_path / "tool"
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(0o755)
    plain = tmp_path / "plain"
    plain.write_text("x")
    env = {"PATH": f"/nonexistent:{tmp_path}"}
    assert launcher.resolve_program("tool", env) == str(exe)
    assert launcher.resolve_program(str(exe), env) == str(exe)
    with pytest.raises(CozError, match="program not found: nothere"):
        launcher.resolve_program("nothere", env)
    with pytest.raises(CozError, match="not executable"):
        launcher.resolve_program(str(plain), env)
    with pytest.raises(CozError, match="no such program"):
        launcher.resolve_program("./missing-program", env)
    with pytest.raises(CozError, match="is a directory"):
        launcher.resolve_program(str(tmp_path) + "/", env)


def test_check_preloadable(tmp_path):
    src = tmp_path / "m.c"
    src.write_text("int main(void) { return 0; }\n")
    dyn, static = tmp_path / "dyn", tmp_path / "static"
    subprocess.run(["gcc", "-o", str(dyn), str(src)], check=True)
    subprocess.run(["gcc", "-static", "-o", str(static), str(src)], check=True)
    launcher.check_preloadable(str(dyn))
    launcher.check_preloadable("/bin/sh")
    script = tmp_path / "s.sh"
    script.write_text("#!/bin/sh\n")
    launcher.check_preloadable(str(script))
    with pytest.raises(CozError, match="statically linked: preloading cannot work"):
        launcher.check_preloadable(str(static))
    suid = tmp_path / "suid"
    shutil.copy(dyn, suid)
    suid.chmod(0o755 | stat.S_ISUID)
    with pytest.raises(CozError, match="setuid or setgid: preloading cannot work"):
        launcher.check_preloadable(str(suid))
    sgid = tmp_path / "sgid"
    shutil.copy(dyn, sgid)
    sgid.chmod(0o755 | stat.S_ISGID)
    with pytest.raises(CozError, match="setuid or setgid"):
        launcher.check_preloadable(str(sgid))


# -- the launcher as a process ------------------------------------------------------

def coz(args, stub_library, tmp_path, **kw):
    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH,
               STUB_MARKER=str(tmp_path / "marker"))
    return subprocess.Popen([sys.executable, "-m", "cozprof", "run", *args], env=env,
                            cwd=tmp_path, **kw)


def test_exit_code_env_and_stdio_pass_through(stub_library, tmp_path):
    script = ('read line; echo "out:$line"; echo "err:$line" >&2; '
              'echo "$COZ_LAUNCHER_PID $PPID $LD_PRELOAD $COZ_OUTPUT"; exit 7')
    p = coz(["-o", "x.coz", "---", "sh", "-c", script], stub_library, tmp_path,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate(b"hello\n", timeout=30)
    assert p.returncode == 7
    lines = out.decode().splitlines()
    assert lines[0] == "out:hello"
    # The program's standard error, then the launcher's one line after it ended.
    assert err.decode() == f"err:hello\ncoz: note: no profile was written to {tmp_path / 'x.coz'} " \
                           "(the program ended before the profiler started, or never loaded it)\n"
    pid, ppid, preload, output = lines[1].split(" ")
    assert pid == ppid == str(p.pid)          # the launcher is the profiled program's parent
    assert preload == stub_library
    assert output == str(tmp_path / "x.coz")
    assert (tmp_path / "marker").read_text().startswith("loaded")


@pytest.mark.parametrize("closed", ["stdout", "stdout and stderr"])
def test_closed_standard_streams_pass_through(stub_library, tmp_path, closed):
    # The program runs as it would with the same descriptors closed, and the
    # launcher neither crashes nor reopens them.
    redirect = ">&-" if closed == "stdout" else ">&- 2>&-"
    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH,
               STUB_MARKER=str(tmp_path / "marker"))
    program = "import os, sys\ntry:\n    os.fstat(1)\nexcept OSError:\n    sys.exit(5)"
    cmd = (f"{shlex.quote(sys.executable)} -m cozprof run -o x.coz --- {shlex.quote(sys.executable)} "
           f"-c {shlex.quote(program)} {redirect}")
    r = subprocess.run(["sh", "-c", cmd], env=env, cwd=tmp_path, capture_output=True, timeout=30)
    assert r.returncode == 5, r.stderr.decode()
    assert b"Traceback" not in r.stderr


def test_program_gets_no_inherited_descriptor_and_default_signals(stub_library, tmp_path):
    # As subprocess starts it: descriptors above 2 that the launcher inherited are
    # closed, and SIGPIPE, which Python ignores, is at its default again.
    script = 'ls /proc/$$/fd; grep "^SigIgn:" /proc/$$/status'
    cmd = (f"{shlex.quote(sys.executable)} -m cozprof run -o x.coz --- sh -c {shlex.quote(script)} "
           "8</dev/null 9>extra")
    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH,
               STUB_MARKER=str(tmp_path / "marker"))
    r = subprocess.run(["sh", "-c", cmd], env=env, cwd=tmp_path, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    fds = {int(fd) for fd in r.stdout.split("SigIgn:")[0].split()}
    assert {0, 1, 2} <= fds and not {8, 9} & fds, r.stdout
    assert not int(r.stdout.split()[-1], 16) & (1 << (signal.SIGPIPE - 1)), r.stdout


def test_inherited_descriptor_above_a_lowered_open_file_limit(stub_library, tmp_path):
    # A shell may hold a descriptor numbered above the limit it later lowers
    # (`ulimit -n 64` beside an inherited 251): the program runs without coz,
    # so it runs with coz too, without that descriptor. posix_spawn's close
    # actions refuse such a number (EBADF), which read "cannot run".
    high = os.open(os.devnull, os.O_RDONLY)
    os.dup2(high, 200)  # inheritable
    os.close(high)

    def lower_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    env = dict(os.environ, COZ_LIBRARY=stub_library, PYTHONPATH=PYTHON_PATH,
               STUB_MARKER=str(tmp_path / "marker"))
    try:
        r = subprocess.run([sys.executable, "-m", "cozprof", "run", "-o", "x.coz", "---", "ls", "/proc/self/fd"],
                           env=env, cwd=tmp_path, capture_output=True, text=True, timeout=30,
                           pass_fds=(200,), preexec_fn=lower_limit)
    finally:
        os.close(200)
    assert r.returncode == 0, r.stderr
    fds = {int(fd) for fd in r.stdout.split()}
    assert {0, 1, 2} <= fds and 200 not in fds, r.stdout


def test_death_by_signal_is_passed_through(stub_library, tmp_path):
    p = coz(["---", "sh", "-c", "kill -TERM $$"], stub_library, tmp_path)
    assert p.wait(timeout=30) == -signal.SIGTERM
    p = coz(["---", "sh", "-c", "kill -USR1 $$"], stub_library, tmp_path)
    assert p.wait(timeout=30) == -signal.SIGUSR1


def _wait_ready(p):
    assert p.stdout.readline() == b"ready\n"


def test_sigterm_is_forwarded(stub_library, tmp_path):
    script = 'trap "echo got-term; exit 3" TERM; echo ready; while :; do sleep 0.05; done'
    p = coz(["---", "sh", "-c", script], stub_library, tmp_path, stdout=subprocess.PIPE)
    _wait_ready(p)
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 3
    assert p.stdout.read() == b"got-term\n"


def test_sigint_is_ignored_by_the_launcher(stub_library, tmp_path):
    script = 'echo ready; sleep 0.5; exit 5'
    p = coz(["---", "sh", "-c", script], stub_library, tmp_path, stdout=subprocess.PIPE)
    _wait_ready(p)
    p.send_signal(signal.SIGINT)   # to the launcher only: the child is not interrupted
    assert p.wait(timeout=30) == 5


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ignored_at_start_stays_ignored_in_the_program(stub_library, tmp_path, signum):
    # Started with the signal ignored (a script's background job ignores SIGINT
    # and SIGQUIT, nohup SIGHUP), the program ignores it without coz, and so
    # under it: the signal, sent to the whole group, interrupts nobody.
    script = 'echo ready; sleep 0.5; echo done; exit 5'

    def start_ignoring():
        signal.signal(signum, signal.SIG_IGN)

    plain = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, preexec_fn=start_ignoring,
                             start_new_session=True)
    p = coz(["---", "sh", "-c", script], stub_library, tmp_path, stdout=subprocess.PIPE,
            preexec_fn=start_ignoring, start_new_session=True)
    for proc in (plain, p):
        _wait_ready(proc)
        os.killpg(proc.pid, signum)
    assert plain.wait(timeout=30) == 5 and plain.stdout.read() == b"done\n"
    assert p.wait(timeout=30) == 5
    assert p.stdout.read() == b"done\n"


@pytest.mark.parametrize("args, message", [
    (["--", "true"], "missing '---'"),
    (["---", "no-such-program-xyz"], "program not found"),
])
def test_launcher_errors_are_one_line(stub_library, tmp_path, args, message):
    p = coz(args, stub_library, tmp_path, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=30)
    assert p.returncode in (125, 127)
    lines = err.decode().splitlines()
    assert lines[0].startswith("coz: error: ") and message in lines[0]
    assert len(lines) == 2 and lines[1].startswith("coz: ")
    assert "Traceback" not in err.decode()


# -- exit statuses: those of env and timeout -------------------------------------------

@pytest.fixture
def odd_programs(tmp_path):
    """Files that exist but cannot run, each in its own way."""
    (tmp_path / "plain").write_text("not a program\n")              # no execute permission
    (tmp_path / "folder").mkdir()
    garbage = tmp_path / "garbage"                                   # executable, no format known
    garbage.write_bytes(b"\x01\x02 neither ELF nor script\n")
    garbage.chmod(0o755)
    orphan = tmp_path / "orphan.sh"                                  # its interpreter is missing
    orphan.write_text("#!/nonexistent/interpreter\necho hi\n")
    orphan.chmod(0o755)
    return tmp_path


@pytest.mark.parametrize("command, status", [
    (["./no-such-program"], 127),
    (["no-such-program-in-path-xyz"], 127),
    (["./orphan.sh"], 127),
    (["./plain"], 126),
    (["./folder"], 126),
    (["./garbage"], 126),
])
def test_program_failures_use_the_statuses_of_env(stub_library, odd_programs, command, status):
    if command != ["./garbage"]:  # env hands a file of no known format to /bin/sh (execvp)
        # env's own verdict on the same command is the reference.
        plain = subprocess.run(["env", *command], cwd=odd_programs, capture_output=True, timeout=30)
        assert plain.returncode == status
    p = coz(["---", *command], stub_library, odd_programs, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=30)
    assert p.returncode == status, err.decode()
    assert err.decode().startswith("coz: error: ") and "Traceback" not in err.decode()


@pytest.mark.parametrize("args", [
    ["--bogus", "---", "true"], ["--fixed-speedup", "ten", "---", "true"], ["--", "true"], ["---"],
    ["--fixed-speedup", "²", "---", "true"],
])
def test_launcher_own_errors_exit_125_like_env(stub_library, tmp_path, args):
    assert subprocess.run(["env", "--bogus-option"], capture_output=True).returncode == 125
    p = coz(args, stub_library, tmp_path, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 125, err.decode()
    assert err.decode().startswith("coz: error: ") and "Traceback" not in err.decode()


def test_missing_runtime_library_exits_125(tmp_path):
    env = dict(os.environ, COZ_LIBRARY=str(tmp_path / "missing" / "libcoz.so"), PYTHONPATH=PYTHON_PATH)
    r = subprocess.run([sys.executable, "-m", "cozprof", "run", "---", "true"], env=env, cwd=tmp_path,
                       capture_output=True, timeout=30)
    assert r.returncode == 125
    assert b"COZ_LIBRARY names" in r.stderr


def test_programs_preloading_cannot_reach_exit_126(stub_library, tmp_path):
    src = tmp_path / "m.c"
    src.write_text("int main(void) { return 0; }\n")
    subprocess.run(["gcc", "-static", "-o", str(tmp_path / "static"), str(src)], check=True)
    p = coz(["---", "./static"], stub_library, tmp_path, stderr=subprocess.PIPE)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 126 and b"statically linked" in err


def test_the_programs_own_statuses_are_passed_even_when_they_look_like_ours(stub_library, tmp_path):
    for code in (2, 125, 126, 127):
        p = coz(["---", "sh", "-c", f"exit {code}"], stub_library, tmp_path, stderr=subprocess.PIPE)
        p.communicate(timeout=30)
        assert p.returncode == code


def test_other_commands_keep_status_2(capsys):
    assert cli.main(["report", "--bogus"]) == 2
    assert "coz: error:" in capsys.readouterr().err


# -- coz --version -----------------------------------------------------------------

def test_version_is_printed_and_matches_the_project(capsys):
    import re

    import cozprof

    with pytest.raises(SystemExit) as ei:
        cli.main(["--version"])
    assert ei.value.code == 0
    assert capsys.readouterr().out == f"coz {cozprof.__version__}\n"
    with open(os.path.join(REPO, "pyproject.toml")) as f:
        declared = re.search(r'^version = "([^"]+)"', f.read(), re.M).group(1)
    assert cozprof.__version__ == declared


def test_version_imports_no_subcommand():
    code = ("import sys\nfrom cozprof import cli\n"
            "try:\n    cli.main(['--version'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith(('cozprof.', 'numpy', 'matplotlib'))))")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=PYTHON_PATH),
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.splitlines()[-1] == "['cozprof.cli', 'cozprof.errors']"


def test_sampling_only_is_passed_to_the_runtime_and_refuses_experiment_options():
    env = launcher.build_env(parse("--sampling-only", "---", "prog"), "/l.so", base_env={}, launcher_pid=1)
    assert env["COZ_SAMPLING_ONLY"] == "1"
    assert "COZ_SAMPLING_ONLY" not in launcher.build_env(parse("---", "prog"), "/l.so", base_env={}, launcher_pid=1)
    for extra in (["--fixed-line", "a.c:3"], ["--end-to-end"], ["--fixed-speedup", "20"]):
        with pytest.raises(CozError, match="--sampling-only runs no experiments"):
            parse("--sampling-only", *extra, "---", "prog")
        with pytest.raises(CozError, match="--locks-only runs no experiments"):
            parse("--locks-only", *extra, "---", "prog")
    env = launcher.build_env(parse("--locks-only", "---", "prog"), "/l.so", base_env={}, launcher_pid=1)
    assert env["COZ_LOCKS_ONLY"] == "1"
    with pytest.raises(CozError, match="cannot go together"):
        parse("--locks-only", "--sampling-only", "---", "prog")


def test_no_lock_counters_is_passed_to_the_runtime_only_when_given():
    env = launcher.build_env(parse("--locks-only", "--no-lock-counters", "---", "prog"), "/l.so",
                             base_env={}, launcher_pid=1)
    assert env["COZ_LOCK_COUNTERS"] == "0" and env["COZ_LOCKS_ONLY"] == "1"
    assert "COZ_LOCK_COUNTERS" not in launcher.build_env(parse("---", "prog"), "/l.so", base_env={},
                                                         launcher_pid=1)


def test_blocked_scope_takes_bcoz_letters_once_each():
    env = launcher.build_env(parse("---", "x"), "/l.so", base_env={}, launcher_pid=1)
    assert env["COZ_BLOCKED_SCOPE"] == "ils"
    assert launcher.build_env(parse("--blocked-scope", "", "---", "x"), "/l.so", base_env={},
                              launcher_pid=1)["COZ_BLOCKED_SCOPE"] == ""
    # b: synchronization; y, its earlier letter, is taken and written as b.
    for letters, written in (("ilsb", "ilsb"), ("ly", "lb")):
        assert launcher.build_env(parse("--blocked-scope", letters, "---", "x"), "/l.so", base_env={},
                                  launcher_pid=1)["COZ_BLOCKED_SCOPE"] == written
    for bad in ("q", "ii", "IL", "by"):
        with pytest.raises(CozError, match="bad --blocked-scope"):
            parse("--blocked-scope", bad, "---", "x")


def test_the_launcher_adopts_the_native_fronts_helper_and_nothing_else():
    # libcoz/coz_front.c starts coz-perf-warmup and hands over "PID:FD": a
    # child of the launcher and the write end of the pipe it reads.
    read_end, write_end = os.pipe()
    child = subprocess.Popen(["sleep", "30"])
    stdin_inheritable = os.get_inheritable(0)
    try:
        os.set_inheritable(write_end, True)
        env = {"COZ_PERF_WARMUP": f"{child.pid}:{write_end}", "OTHER": "x"}
        assert library.adopt_perf_warmup(env) == (child.pid, write_end)
        assert env == {"OTHER": "x"}  # the program does not see it
        assert not os.get_inheritable(write_end)  # nor inherits the descriptor
        # Anything else is no hand-over, and takes nothing: not a standard
        # stream, not a file, not a process that is not this one's child.
        with open(os.devnull) as other_file:
            os.set_inheritable(other_file.fileno(), True)
            for value in ("", "4242", "a:b", f"{child.pid}:1:2", f"{child.pid}:999999", f"{child.pid}:0",
                          f"{child.pid}:{other_file.fileno()}", f"1:{write_end}", f"{os.getpid()}:{write_end}"):
                os.set_inheritable(write_end, True)
                env = {"COZ_PERF_WARMUP": value}
                assert library.adopt_perf_warmup(env) is None, value
                assert env == {}, value
                assert os.get_inheritable(write_end) and os.get_inheritable(other_file.fileno()), value
        assert os.get_inheritable(0) == stdin_inheritable  # "PID:0" above left standard input alone
        assert library.adopt_perf_warmup({}) is None
        # A helper that died before the hand-over was read: its pipe is the
        # front's, closed, so that the program does not inherit it.
        child.kill()
        child.wait()
        dead_child = subprocess.Popen(["true"])
        os.waitid(os.P_PID, dead_child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
        dead_read, dead_write = os.pipe()
        os.set_inheritable(dead_write, True)
        env = {"COZ_PERF_WARMUP": f"{dead_child.pid}:{dead_write}"}
        assert library.adopt_perf_warmup(env) is None
        assert env == {}
        with pytest.raises(OSError):
            os.fstat(dead_write)  # closed
        os.close(dead_read)
    finally:
        child.kill()
        child.wait()
        os.close(read_end)
        os.close(write_end)


# ---------------------------------------------------------------- the front's started program


def test_adopt_spawned_takes_the_fronts_child_without_reaping_it():
    child = subprocess.Popen(["sleep", "30"])
    try:
        env = {"COZ_SPAWNED": f"{child.pid}:5000000000:2049:77:1234:/lib/libcoz.so", "OTHER": "x"}
        s = launcher.adopt_spawned(env)
        assert env == {"OTHER": "x"}  # the hand-over leaves the environment
        assert (s.pid, s.started, s.before, s.library) == (child.pid, 5.0, (2049, 77, 1234), "/lib/libcoz.so")
        child.kill()
        assert launcher._wait(child.pid, None) == (-signal.SIGKILL, child.pid)  # its status was kept for the wait
        child.returncode = -signal.SIGKILL  # reaped above: Popen must not wait again
    finally:
        if child.returncode is None:
            child.kill()
            child.wait()


def test_adopt_spawned_takes_no_output_file_and_a_library_path_with_colons():
    child = subprocess.Popen(["sleep", "30"])
    try:
        s = launcher.adopt_spawned({"COZ_SPAWNED": f"{child.pid}:1:-:-:-:/a:b/libcoz.so"})
        assert (s.before, s.library) == (None, "/a:b/libcoz.so")
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("value", ["", "garbage", "1:2:3", f"{os.getpid()}:1:-:-:-:/x", "1:1:-:-:-:/x"])
def test_adopt_spawned_refuses_what_is_not_a_child_of_this_process(value):
    # Not a hand-over, or a pid that is not this process's child (itself, init):
    # the launcher then starts the program itself.
    env = {"COZ_SPAWNED": value}
    assert launcher.adopt_spawned(env) is None
    assert env == {}


def test_a_command_line_the_launcher_refuses_stops_the_program_the_front_started(capsys):
    child = subprocess.Popen(["sleep", "30"])
    spawned = launcher.Spawned(child.pid, 0.0, None, "/lib/libcoz.so")
    status = cli._main(["run", "--no-such-option", "---", "sleep", "30"], spawned)
    assert status == 125
    err = capsys.readouterr().err
    assert "internal error: the native front started the program" in err and "it was stopped" in err
    with pytest.raises(ChildProcessError):  # killed and reaped by the launcher: no child of that pid is left
        os.waitpid(child.pid, os.WNOHANG)
    child.returncode = -signal.SIGKILL  # reaped above: Popen must not wait again
