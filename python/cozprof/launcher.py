"""`coz run [options] --- command args`: run a program with libcoz.so preloaded.

The launcher talks to the runtime only through the COZ_* environment variables
built by `build_env` (a fixed contract with libcoz/config). Parsing and checks are
pure functions; only `run` starts a process.
"""

import errno
import os
import stat
import sys
import time

try:
    # The signal module's functions without its enum wrappers: importing enum
    # cost 1-3 ms of every run's way to the program's main. Same calls, int values.
    import _signal as signal
except ImportError:  # an interpreter without CPython's module split
    import signal

from . import run_summary
from .library import find_library
from .errors import EXIT_CANNOT_EXECUTE, EXIT_NOT_FOUND, CozError

SEPARATOR = "---"
DEFAULT_OUTPUT = "profile.coz"
DEFAULT_SAMPLE_PERIOD_NS = 1_000_000          # 1 ms of CPU time between samples
# --sampling-only's default: 10 ms, pprof's 100 Hz. At 1 ms the sampling itself
# (perf record alone, same clock) cost 1.7% of in-program time on this project's
# 2-CPU VM, 3.2% at worst (docs/benchmarks.md): the 2% target needs fewer samples.
SAMPLING_ONLY_PERIOD_NS = 10_000_000
DEFAULT_EXPERIMENT_LENGTH_NS = 500_000_000    # 0.5 s
_UNITS_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}


# Every option of `coz run`: (flags, argparse keywords). add_arguments hands them
# to argparse; parse_fast reads the same rows, so the two cannot disagree.
RUN_OPTIONS = (
    (("-b", "--binary-scope"), dict(action="append", metavar="PATTERN",
         help="profile code in binaries matching PATTERN (%% is a wildcard; "
              "MAIN is the main executable; repeatable; default MAIN)")),
    (("-s", "--source-scope"), dict(action="append", metavar="PATTERN",
         help="profile source files matching PATTERN (%% wildcard; repeatable; "
              "default %%)")),
    (("-p", "--progress"), dict(action="append", metavar="FILE:LINE",
         help="count visits to FILE:LINE as a progress point (repeatable)")),
    (("-o", "--output"), dict(default=DEFAULT_OUTPUT, metavar="FILE",
         help="profile to append to (default profile.coz; %%p becomes the pid)")),
    (("--fixed-line",), dict(metavar="FILE:LINE",
         help="only ever speed up FILE:LINE")),
    (("--fixed-function",), dict(metavar="NAME",
         help="only ever speed up the function NAME (inlined copies included; C++: "
              "with or without namespace and parameters)")),
    (("--fixed-callsite",), dict(metavar="FILE:LINE",
         help="only ever speed up the calls on FILE:LINE (whatever they call, "
              "library code included)")),
    (("--unit",), dict(default="line", metavar="UNITS",
         help="what experiments speed up: line, function or callsite, or several "
              "separated by commas (e.g. line,callsite); default line")),
    (("--fixed-speedup",), dict(metavar="N",
         help="only ever use a speedup of N percent (0-100)")),
    (("--end-to-end",), dict(action="store_true",
         help="one experiment per run, measured from start to exit")),
    (("--blocked-scope",), dict(default="ils", metavar="LETTERS",
         help="waits experiments may speed up, as BCOZ names them: i (I/O), l (locks), "
              "s (sleeps), b (synchronization: waits for another thread's work); "
              "default ils; '' for none")),
    (("--locks-only",), dict(action="store_true",
         help="collect the synchronization counters (coz locks) and per-thread time only: "
              "no sampling, no experiments; for production runs")),
    (("--no-lock-counters",), dict(dest="lock_counters", action="store_false",
         help="keep no synchronization counters (coz locks has nothing to report): "
              "to measure what they cost beside a run that keeps them")),
    (("--sampling-only",), dict(action="store_true",
         help="record the conventional profile only (stacks, threads, counters): no "
              "experiments, no delays, no signal per sample; for long or production runs")),
    (("--sample-period",), dict(default=None, metavar="TIME",
         help="CPU time between samples (ns/us/ms/s suffix; bare number = ms; "
              "default 1ms, 10ms with --sampling-only)")),
    (("--experiment-length",), dict(default="0.5s", metavar="TIME",
         help="initial experiment length (ns/us/ms/s suffix; bare number = s; "
              "default 0.5s)")),
    (("--format",), dict(choices=("json", "legacy"), default="json",
         help="profile format: json (default) or upstream's legacy .coz")),
    (("--follow-children",), dict(action="store_true",
         help="also profile child processes the program starts")),
    (("-v", "--verbose"), dict(action="store_true",
         help="print what the launcher and the runtime do")),
)


def add_arguments(p):
    for flags, keywords in RUN_OPTIONS:
        p.add_argument(*flags, **keywords)


class Namespace:
    """What argparse.Namespace is to the launcher (attributes, vars(), equality),
    without importing argparse."""

    def __init__(self, **values):
        self.__dict__.update(values)

    def __eq__(self, other):
        return vars(self) == vars(other)

    def __repr__(self):
        return "Namespace(" + ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items())) + ")"


def _option_table():
    """({flag: (dest, action, choices)}, {dest: default}) from RUN_OPTIONS, by argparse's
    rules: dest is the first long flag without its dashes, '-' made '_'."""
    flags_of, defaults = {}, {}
    for flags, kw in RUN_OPTIONS:
        dest = kw.get("dest") or next(f for f in flags if f.startswith("--"))[2:].replace("-", "_")
        action = kw.get("action", "store")
        defaults[dest] = kw.get("default", {"store_true": False, "store_false": True}.get(action))
        for flag in flags:
            flags_of[flag] = (dest, action, kw.get("choices"))
    return flags_of, defaults


def parse_fast(options):
    """The namespace argparse gives for `coz run`'s `options` (those before '---'),
    without importing argparse (with re, gettext and locale: 8-10 ms of every run's
    way to the program's main); None for anything beyond exact option names and
    their values: -h, an abbreviation, joined short options, a value that starts
    with '-' or is not among the choices, a stray word. argparse then parses
    them, so its help and its errors stay exactly its own."""
    flags_of, values = _option_table()
    i = 0
    while i < len(options):
        arg = options[i]
        i += 1
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name not in flags_of:
            return None
        dest, action, choices = flags_of[name]
        if action in ("store_true", "store_false"):
            if eq:
                return None  # argparse: "ignored explicit argument"
            values[dest] = action == "store_true"
            continue
        if not eq:
            if i == len(options):
                return None  # argparse: "expected one argument"
            value = options[i]
            i += 1
        if value.startswith("-") or (choices and value not in choices):
            return None
        if action == "append":
            values[dest] = (values[dest] or []) + [value]
        else:
            values[dest] = value
    return Namespace(command="run", _module=sys.modules[__name__], **values)


def parse_run_args(make_parser, argv):
    """Parse `['run', options..., '---', command...]`; raise CozError on bad input.
    `make_parser()` returns the argparse parser of `coz run`, built only for what
    parse_fast leaves to it.

    Returns the namespace with `command` (list) and validated values:
    `sample_period_ns`, `experiment_length_ns`, `fixed_speedup_pct` (int or None).
    """
    assert argv and argv[0] == "run"
    rest = argv[1:]
    if SEPARATOR in rest:
        cut = rest.index(SEPARATOR)
        options, command = rest[:cut], rest[cut + 1:]
    else:
        options, command = rest, None
        if not any(a in ("-h", "--help") for a in options):
            if "--" in options:
                cut = options.index("--")
                before, after = options[:cut], options[cut + 1:]
                lead = "the separator is three dashes: "
            else:
                before, after = _split_at_command(options)
                lead = "write: "
            hint = (f"{lead}coz run {' '.join(before) or '[options]'} --- "
                    f"{' '.join(after) or 'command args'}")
            raise CozError("missing '---' before the command to profile", hint=hint)
    args = parse_fast(options) if command is not None else None
    if args is None:
        args = make_parser().parse_args(["run"] + options)
    if not command:
        raise CozError("missing command after '---'",
                       hint="write: coz run [options] --- ./program args")
    args.command = command
    validate(args)
    return args


def _split_at_command(words):
    """(options, command): `coz run`'s words given without '---', cut where the
    command seems to start: at the first word that is neither an option nor the
    value of one (RUN_OPTIONS says which options take a value). For the hint
    only: the options before '---', the command after it."""
    flags_of, _ = _option_table()
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        name, eq, _ = words[i].partition("=")
        i += 1
        if name in flags_of and not eq and flags_of[name][1] not in ("store_true", "store_false"):
            i += 1  # its value
    return words[:i], words[i:]


def parse_time(text, default_unit, what):
    """'10ms' -> 10_000_000; a bare number is in `default_unit`. Positive only."""
    known = _DEFAULT_TIMES.get((text, default_unit))
    if known is not None:
        return known  # the defaults: re is imported only for a time given on the command line
    import re

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(ns|us|ms|s)?\s*", text)
    if not m:
        raise CozError(f"bad {what} {text!r}",
                       hint="give a number with an optional unit: ns, us, ms or s (e.g. 2ms)")
    ns = float(m.group(1)) * _UNITS_NS[m.group(2) or default_unit]
    if not ns >= 1:
        raise CozError(f"{what} {text!r} is too short", hint="it must be at least 1ns")
    if ns > 3600 * 1e9:
        raise CozError(f"{what} {text!r} is too long", hint="it must be at most an hour")
    return int(round(ns))


# parse_time of the options' string defaults (a test checks them against its
# regex). --sample-period has none: its default depends on --sampling-only.
_DEFAULT_TIMES = {("0.5s", "s"): DEFAULT_EXPERIMENT_LENGTH_NS}


def _is_line(text):
    """True for FILE:LINE with a line number from 1 (re imported only when an
    option names a line: it costs 1-3 ms of the way to the program's main)."""
    import re

    return re.match(r"^.+:[1-9][0-9]*$", text) is not None


def validate(args):
    """Check option values and add the derived fields; raises CozError."""
    experiment_options = [name for name, given in (("--fixed-line", args.fixed_line is not None),
                                                   ("--fixed-function", args.fixed_function is not None),
                                                   ("--fixed-callsite", args.fixed_callsite is not None),
                                                   ("--unit", args.unit != "line"),
                                                   ("--fixed-speedup", args.fixed_speedup is not None),
                                                   ("--end-to-end", args.end_to_end)) if given]
    for flag, given in (("--sampling-only", args.sampling_only), ("--locks-only", args.locks_only)):
        if given and experiment_options:
            raise CozError(f"{flag} runs no experiments: it cannot go with {', '.join(experiment_options)}",
                           hint=f"drop {flag} for a causal profile, or the experiment options")
    if args.sampling_only and args.locks_only:
        raise CozError("--sampling-only and --locks-only cannot go together",
                       hint="--locks-only takes no samples; drop one of them")
    # y: this option's earlier letter for synchronization, still taken.
    letters = args.blocked_scope.replace("y", "b")
    if any(c not in "ilsb" for c in letters) or len(set(letters)) != len(letters):
        raise CozError(f"bad --blocked-scope {args.blocked_scope!r}",
                       hint="give letters among i (I/O), l (locks), s (sleeps), b (synchronization), "
                            "each once, e.g. --blocked-scope ils")
    args.blocked_scope = letters
    args.binary_scope = args.binary_scope or ["MAIN"]
    args.source_scope = args.source_scope or ["%"]
    args.progress = args.progress or []
    for what, patterns in (("--binary-scope", args.binary_scope),
                           ("--source-scope", args.source_scope)):
        for pat in patterns:
            if not pat or "\t" in pat:
                raise CozError(f"bad {what} pattern {pat!r}",
                               hint="patterns are non-empty and contain no tab")
    for spec in args.progress:
        if not _is_line(spec) or "\t" in spec:
            raise CozError(f"bad --progress {spec!r}",
                           hint="name a source line as FILE:LINE, e.g. --progress app.c:42")
    fixed = [f for f, v in (("--fixed-line", args.fixed_line), ("--fixed-function", args.fixed_function),
                            ("--fixed-callsite", args.fixed_callsite)) if v is not None]
    if len(fixed) > 1:
        raise CozError(f"{' and '.join(fixed)} cannot go together: an experiment speeds up one thing",
                       hint="keep one of them")
    units = args.unit.split(",")
    if not all(u in ("line", "function", "callsite") for u in units) or len(set(units)) != len(units):
        raise CozError(f"bad --unit {args.unit!r}",
                       hint="give line, function or callsite, or several separated by commas, "
                            "each once, e.g. --unit line,callsite")
    args.units = units
    if args.format == "legacy" and (units != ["line"] or args.fixed_function is not None
                                    or args.fixed_callsite is not None):
        raise CozError("the legacy format names lines only",
                       hint="drop --format legacy to profile functions or call sites")
    if args.fixed_function is not None and (not args.fixed_function.strip() or "\t" in args.fixed_function):
        raise CozError(f"bad --fixed-function {args.fixed_function!r}",
                       hint="name a function, e.g. --fixed-function parse_header")
    if args.fixed_callsite is not None and not _is_line(args.fixed_callsite):
        raise CozError(f"bad --fixed-callsite {args.fixed_callsite!r}",
                       hint="name a call's line as FILE:LINE, e.g. --fixed-callsite app.c:42")
    if args.fixed_line is not None and not _is_line(args.fixed_line):
        raise CozError(f"bad --fixed-line {args.fixed_line!r}",
                       hint="name a source line as FILE:LINE, e.g. --fixed-line app.c:42")
    args.fixed_speedup_pct = None
    if args.fixed_speedup is not None:
        text = args.fixed_speedup.strip()
        text = text[:-1] if text.endswith("%") else text  # one sign: '50%%' is a typo
        # ASCII digits only: isdigit() is also true of '²' and '٥', which int() refuses or reads.
        if not (text.isascii() and text.isdigit()) or not 0 <= int(text) <= 100:
            raise CozError(f"bad --fixed-speedup {args.fixed_speedup!r}",
                           hint="give a whole percentage from 0 to 100")
        args.fixed_speedup_pct = int(text)
    if not args.output:
        raise CozError("empty --output", hint="name the profile file, e.g. -o profile.coz")
    if args.output == "-":
        # '-' is standard input or output for coz's other commands; here it
        # would be a file named '-', or the program's own output mixed in.
        raise CozError("-o - would write the profile into the program's standard output",
                       hint="name the profile file, e.g. -o profile.coz ('coz report -' reads one "
                            "from standard input)")
    if args.sample_period is None:
        args.sample_period_ns = SAMPLING_ONLY_PERIOD_NS if args.sampling_only else DEFAULT_SAMPLE_PERIOD_NS
    else:
        args.sample_period_ns = parse_time(args.sample_period, "ms", "--sample-period")
    args.experiment_length_ns = parse_time(args.experiment_length, "s", "--experiment-length")
    return args


# The variables libcoz.so reads (libcoz/config.cpp's option table; a test
# checks the two agree). Only these are removed from the inherited
# environment: a program's own COZ_* variables (a benchmark's knobs, a
# prefix it happens to share) reach it unchanged.
RUNTIME_VARIABLES = (
    "COZ_OUTPUT", "COZ_FORMAT", "COZ_BINARY_SCOPE", "COZ_SOURCE_SCOPE", "COZ_PROGRESS_POINTS",
    "COZ_FIXED_LINE", "COZ_FIXED_FUNCTION", "COZ_FIXED_CALLSITE", "COZ_UNITS", "COZ_FIXED_SPEEDUP",
    "COZ_END_TO_END", "COZ_SAMPLE_PERIOD", "COZ_EXPERIMENT_LENGTH", "COZ_VERBOSE",
    "COZ_FOLLOW_CHILDREN", "COZ_BLOCKED_SCOPE", "COZ_LOCKS_ONLY", "COZ_LOCK_COUNTERS",
    "COZ_SAMPLING_ONLY", "COZ_WARN_STDERR", "COZ_LAUNCHER_PID",
)


def build_env(args, library, base_env=None, launcher_pid=None):
    """The environment the profiled program gets: `base_env` plus the COZ_* contract."""
    env = dict(os.environ if base_env is None else base_env)
    for key in RUNTIME_VARIABLES:
        env.pop(key, None)  # stale settings from an outer environment must not leak in
    preload = env.get("LD_PRELOAD", "")
    env["LD_PRELOAD"] = library + (":" + preload if preload else "")
    env["COZ_OUTPUT"] = os.path.abspath(args.output)
    env["COZ_FORMAT"] = args.format
    env["COZ_BINARY_SCOPE"] = "\t".join(args.binary_scope)
    env["COZ_SOURCE_SCOPE"] = "\t".join(args.source_scope)
    env["COZ_PROGRESS_POINTS"] = "\t".join(args.progress)
    if args.fixed_line is not None:
        env["COZ_FIXED_LINE"] = args.fixed_line
    if args.fixed_function is not None:
        env["COZ_FIXED_FUNCTION"] = args.fixed_function
    if args.fixed_callsite is not None:
        env["COZ_FIXED_CALLSITE"] = args.fixed_callsite
    if args.units != ["line"]:
        env["COZ_UNITS"] = ",".join(args.units)
    if args.fixed_speedup_pct is not None:
        env["COZ_FIXED_SPEEDUP"] = str(args.fixed_speedup_pct)
    if args.end_to_end:
        env["COZ_END_TO_END"] = "1"
    if args.sampling_only:
        env["COZ_SAMPLING_ONLY"] = "1"
    if args.locks_only:
        env["COZ_LOCKS_ONLY"] = "1"
    if not args.lock_counters:
        env["COZ_LOCK_COUNTERS"] = "0"
    env["COZ_BLOCKED_SCOPE"] = args.blocked_scope
    env["COZ_SAMPLE_PERIOD"] = str(args.sample_period_ns)
    env["COZ_EXPERIMENT_LENGTH"] = str(args.experiment_length_ns)
    env["COZ_VERBOSE"] = "1" if args.verbose else "0"
    env["COZ_FOLLOW_CHILDREN"] = "1" if args.follow_children else "0"
    env["COZ_LAUNCHER_PID"] = str(os.getpid() if launcher_pid is None else launcher_pid)
    if args.format == "json":
        # Warnings go into the profile only; the launcher prints each once when the
        # program ends. Upstream's legacy format has no warning record: there the
        # runtime keeps printing them.
        env["COZ_WARN_STDERR"] = "0"
    return env


def resolve_program(name, env=None):
    """Find the program like execvp does (PATH search unless the name has a '/')."""
    env = os.environ if env is None else env
    if "/" in name:
        candidates = [name]
    else:
        path = env.get("PATH")
        if path is None:
            path = "/bin:/usr/bin"
        candidates = [os.path.join(d or ".", name) for d in path.split(":")]
    found_not_exec = None
    for c in candidates:
        if os.path.isfile(c):
            if os.access(c, os.X_OK):
                return c
            found_not_exec = found_not_exec or c
    if found_not_exec:
        raise CozError(f"{found_not_exec} is not executable",
                       hint=f"make it executable: chmod +x {found_not_exec}",
                       status=EXIT_CANNOT_EXECUTE)
    if "/" in name:
        if os.path.isdir(name):
            raise CozError(f"{name} is a directory, not a program",
                           hint="name the program to run after '---'", status=EXIT_CANNOT_EXECUTE)
        raise CozError(f"no such program: {name}", hint="check the path after '---'",
                       status=EXIT_NOT_FOUND)
    raise CozError(f"program not found: {name}",
                   hint="it is not in PATH; give its path, e.g. ./" + name, status=EXIT_NOT_FOUND)


def check_preloadable(path):
    """Raise CozError when LD_PRELOAD cannot reach the program at `path`.
    Returns the first 64 bytes it read of it (check_library compares them)."""
    st = os.stat(path)
    if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
        raise CozError(f"{path} is setuid or setgid: preloading cannot work with it",
                       hint="the dynamic loader ignores LD_PRELOAD for such programs; "
                            "profile a copy without the setuid/setgid bit",
                       status=EXIT_CANNOT_EXECUTE)
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:2] == b"#!":
                return head  # a script: its interpreter is what gets preloaded
            if head[:4] != b"\x7fELF":
                return head  # let the kernel decide (binfmt_misc and the like)
            if _elf_has_interp(f, head):
                return head
    except OSError as e:
        raise CozError(f"cannot read {path}: {e.strerror}",
                       hint="the launcher reads the program's ELF header; check its permissions",
                       status=EXIT_CANNOT_EXECUTE) from None
    raise CozError(f"{path} is statically linked: preloading cannot work",
                   hint="libcoz.so needs the dynamic loader; link the program dynamically "
                        "(drop -static; a Go program: build it with cgo, CGO_ENABLED=1)",
                   status=EXIT_CANNOT_EXECUTE)


def check_library(path, program=None, program_head=None):
    """Raise CozError when the dynamic loader would refuse to preload the library
    at `path`: ld.so then prints its own message, ignores it, and the program runs
    unprofiled with its own status, as if all were well. Its rules: an ELF
    shared object (ET_DYN) of the class, byte order and machine of `program`
    (this interpreter's when `program` is a script or None), not a
    position-independent executable (ET_DYN too: its dynamic section's
    DF_1_PIE tells). The header, the program headers and the dynamic section
    are read: a few hundred bytes, about 50 us. `program_head`: the program's
    first bytes when already read (check_preloadable returns them)."""
    hint = ("point COZ_LIBRARY at a libcoz.so built for this machine "
            "(cmake --build build makes build/libcoz/libcoz.so), or unset it")
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            ident = _elf_ident(head)
            pie = ident is not None and ident[2] == _ET_DYN and _elf_is_pie(f, head)
    except OSError as e:
        raise CozError(f"cannot read {path}: {e.strerror}", hint=hint) from None
    if ident is None:
        raise CozError(f"{path} is not an ELF shared library: the dynamic loader cannot preload it",
                       hint=hint)
    if ident[2] != _ET_DYN or pie:
        what = "an executable" if pie else _ELF_TYPES.get(ident[2], f"an ELF file of type {ident[2]}")
        raise CozError(f"{path} is {what}, not a shared library: the dynamic loader cannot preload it",
                       hint=hint)
    if program and program_head is None:
        program_head = _elf_head(program)
    reference, other = _elf_ident(program_head) if program else None, program
    if reference is None:
        reference, other = _elf_ident(_elf_head(sys.executable)), "this machine"
    if reference is not None and _elf_platform(ident) != _elf_platform(reference):
        raise CozError(f"{path} is built for {_elf_platform(ident)}, {other} for "
                       f"{_elf_platform(reference)}: the dynamic loader cannot preload it", hint=hint)


_ET_DYN = 3
_ELF_TYPES = {1: "an object file", 2: "an executable", 4: "a core file"}
_ELF_MACHINES = {3: "i386", 8: "MIPS", 20: "PowerPC", 21: "PowerPC64", 22: "S/390", 40: "ARM",
                 62: "x86-64", 183: "AArch64", 243: "RISC-V", 258: "LoongArch"}


def _elf_head(path):
    """The first 64 bytes of `path` (an ELF header's size), b'' when unreadable."""
    try:
        with open(path, "rb") as f:
            return f.read(64)
    except (OSError, TypeError):
        return b""


def _elf_ident(head):
    """(class, byte order, e_type, e_machine) of the ELF header `head` (its
    EI_CLASS and EI_DATA bytes: 1 or 2), or None when `head` is not a whole one."""
    if head[:4] != b"\x7fELF" or head[4:5] not in (b"\x01", b"\x02") or head[5:6] not in (b"\x01", b"\x02"):
        return None
    if len(head) < (64 if head[4] == 2 else 52):
        return None
    return head[4], head[5], _field(head, 16, 2, head), _field(head, 18, 2, head)


def _elf_platform(ident):
    """'64-bit x86-64': the class, machine and byte order ld.so requires to match."""
    bits, order, _, machine = ident
    return (f"{32 * bits}-bit {_ELF_MACHINES.get(machine, f'ELF machine {machine}')}"
            + (", big-endian" if order == 2 else ""))


def _field(data, at, size, head):
    """The integer at `at` in `data`, in the byte order of the ELF header `head`
    (not struct: its import cost 0.3 ms of every run)."""
    return int.from_bytes(data[at:at + size], "little" if head[5] == 1 else "big")


def _elf_segments(f, head):
    """[(p_type, p_offset, p_filesz)]: the program headers of the ELF file `f`
    whose first bytes are `head` (at least 52)."""
    if head[4] == 2:  # 64-bit
        phoff, phentsize, phnum = _field(head, 32, 8, head), _field(head, 54, 2, head), _field(head, 56, 2, head)
        at_offset, at_size, width = 8, 32, 8
    else:
        phoff, phentsize, phnum = _field(head, 28, 4, head), _field(head, 42, 2, head), _field(head, 44, 2, head)
        at_offset, at_size, width = 4, 16, 4
    if phnum == 0 or phentsize < at_size + width:
        return []
    table = _read_at(f, phoff, phentsize * phnum)
    return [(_field(table, at, 4, head), _field(table, at + at_offset, width, head),
             _field(table, at + at_size, width, head))
            for at in range(0, len(table) // phentsize * phentsize, phentsize)]


def _read_at(f, offset, size):
    """`size` bytes of `f` from `offset`, fewer at its end; b'' for an offset
    past any file (a corrupt header's: seek would raise OverflowError)."""
    if offset >= 1 << 62:
        return b""
    f.seek(offset)
    return f.read(size)


def _elf_has_interp(f, head):
    """True when the ELF file has a PT_INTERP program header (it uses ld.so)."""
    if len(head) < 52:
        return True  # too short to judge: let the kernel complain
    return any(p_type == 3 for p_type, _, _ in _elf_segments(f, head))  # PT_INTERP


def _elf_is_pie(f, head):
    """True when the ELF file's dynamic section sets DF_1_PIE: a position-independent
    executable, ET_DYN like a library, which ld.so refuses to preload ("cannot
    dynamically load position-independent executable")."""
    width = 8 if head[4] == 2 else 4
    for p_type, offset, size in _elf_segments(f, head):
        if p_type != 2:  # PT_DYNAMIC
            continue
        dynamic = _read_at(f, offset, min(size, 1 << 16))
        for at in range(0, len(dynamic) // (2 * width) * (2 * width), 2 * width):
            tag = _field(dynamic, at, width, head)
            if tag == 0:  # DT_NULL: the end
                break
            if tag == 0x6FFFFFFB:  # DT_FLAGS_1
                return bool(_field(dynamic, at + width, width, head) & 0x08000000)  # DF_1_PIE
    return False


class Spawned:
    """The program the native front started before the interpreter
    (libcoz/front_run.c): its pid, when it started (time.monotonic), the
    output file's identity before it (run_summary._identity's, or None) and
    the libcoz.so it preloads."""

    def __init__(self, pid, started, before, library):
        self.pid, self.started, self.before, self.library = pid, started, before, library


def adopt_spawned(env=None):
    """The front's started program, from its hand-over COZ_SPAWNED
    ("PID:START_NS:DEV:INO:SIZE:LIBRARY"), which leaves the environment; None
    when there is none, or when PID is not a child of this process (a value
    from elsewhere: the launcher then starts the program itself)."""
    env = os.environ if env is None else env
    given = env.pop("COZ_SPAWNED", None)
    if not given:
        return None
    try:
        pid, start_ns, dev, ino, size, library = given.split(":", 5)
        pid = int(pid)
        # Not reaped here (WNOWAIT): the wait in run() takes its status.
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        before = None if dev == "-" else (int(dev), int(ino), int(size))
        return Spawned(pid, int(start_ns) / 1e9, before, library)
    except (ValueError, OSError):  # ChildProcessError: not a child of this process
        return None


def abandon(spawned, why):
    """The launcher refused a command line the front had taken, its program
    already started: a bug of the front's (front_run.c takes only what the
    launcher takes). The program is stopped, and the command says so."""
    print(f"coz: internal error: the native front started the program (pid {spawned.pid}) "
          f"for a command line the launcher refuses ({why}); it was stopped", file=sys.stderr)
    try:
        os.kill(spawned.pid, signal.SIGKILL)
        os.waitpid(spawned.pid, 0)
    except OSError:
        pass


def run(args):
    spawned = getattr(args, "spawned", None)
    if spawned is None:
        library = find_library()
        program = resolve_program(args.command[0])
        check_library(library, program, check_preloadable(program))
    else:
        library = spawned.library
        program = _front_checks(args, spawned)
    env = build_env(args, library)
    outputs = run_summary.Outputs(env["COZ_OUTPUT"], args.follow_children,
                                  before=None if spawned is None else {env["COZ_OUTPUT"]: spawned.before})
    if outputs.stream:
        # The summary cannot read the warnings back from a pipe or a device: the runtime prints them.
        env.pop("COZ_WARN_STDERR", None)
    if args.verbose:
        for key in sorted(k for k in env if k.startswith("COZ_") or k == "LD_PRELOAD"):
            print(f"coz: {key}={env[key]!r}", file=sys.stderr)
        print(f"coz: running {program}" + (" (started by the native front)" if spawned else ""),
              file=sys.stderr)
    flush_std()
    if spawned is None:
        started = time.monotonic()
        status, pid = spawn_and_wait(args.command, program, env, while_running=run_summary.prepare)
    else:
        started = spawned.started
        status, pid = wait_spawned(spawned.pid, while_running=run_summary.prepare)
    wall_s = time.monotonic() - started
    # Whatever way the program ended: its warnings once, and one summary line.
    run_summary.print_report(outputs, pid, exit_status=status if status >= 0 else None, wall_s=wall_s,
                             killed_by=-status if status < 0 else None)
    return pass_status(status)


def _front_checks(args, spawned):
    """The program's path for -v (the front found it as resolve_program does;
    searched again only for -v), and a warning when the front preloaded
    another libcoz.so than this package would: a front installed from another
    build."""
    program = args.command[0]
    if args.verbose:
        try:
            program = resolve_program(program)
        except CozError:  # gone since it started
            pass
    try:
        mine = find_library()
    except CozError:
        mine = None
    if mine is not None and mine != spawned.library:
        print(f"coz: warning: the native front preloaded {spawned.library}; this cozprof package "
              f"would use {mine}", file=sys.stderr)
        print("coz: set COZ_LIBRARY to choose one, or install the front of this build "
              "(scripts/bootstrap.sh build)", file=sys.stderr)
    return program


def spawn_and_wait(argv, program, env, while_running=None):
    """Run the program; forward SIGTERM/SIGHUP to it; return (status, pid) when it ends.
    `while_running()`, when given, is called once the program has started, before
    the wait: work the launcher needs after the program ends, done while it runs.

    SIGINT and SIGQUIT come from the terminal to the whole process group, so the child
    already has them: the launcher ignores them and waits for the child's verdict.
    The handlers are installed before the child starts, so no signal falls into a gap;
    they are Python handlers rather than SIG_IGN because exec resets caught signals to
    their default in the child, whereas ignored ones would stay ignored there. A
    signal the launcher itself was started with ignored (a script's background job
    ignores SIGINT and SIGQUIT, nohup SIGHUP) stays ignored, and the program inherits
    that, as it would without coz: a handler here would have given it the default
    back, and a SIGINT to the group killed a program that ignores it plainly.
    `status` is as subprocess.Popen gives it: the exit code, or minus the signal.
    """
    children = []
    pending = []
    forward = _forwarder(children, pending)

    def ignore(_signum, _frame):
        pass

    _install(((signal.SIGINT, ignore), (signal.SIGQUIT, ignore),
              (signal.SIGTERM, forward), (signal.SIGHUP, forward)))
    try:
        children.append(_spawn(argv, program, env))
    except OSError as e:
        # ENOENT here is a missing #! interpreter: "not found", as env reports it.
        raise CozError(f"cannot run {program}: {e.strerror}",
                       hint="check the program's #! line and that it runs without coz",
                       status=EXIT_NOT_FOUND if e.errno == errno.ENOENT else EXIT_CANNOT_EXECUTE) from None
    for signum in pending:
        os.kill(children[0], signum)
    return _wait(children[0], while_running)


def wait_spawned(pid, while_running=None):
    """spawn_and_wait for the program the native front started (front_run.c).
    The front set SIGINT and SIGQUIT ignored and blocked SIGTERM and SIGHUP
    before it started the program: from here on they are forwarded, one that
    came meanwhile as soon as they are unblocked."""
    forward = _forwarder([pid], [])
    _install(((signal.SIGTERM, forward), (signal.SIGHUP, forward)))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGHUP])
    return _wait(pid, while_running)


def _forwarder(children, pending):
    """A handler that sends its signal to the program (children[0]), or keeps
    it in `pending` while the program is not started yet."""
    def forward(signum, _frame):
        if not children:
            pending.append(signum)
            return
        try:
            os.kill(children[0], signum)
        except ProcessLookupError:
            pass
    return forward


def _install(handlers):
    for signum, handler in handlers:
        # (Python leaves an inherited SIG_IGN in place, SIGINT's included.)
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, handler)


def _wait(child, while_running):
    if while_running is not None:
        while_running()
    _, wait_status = os.waitpid(child, 0)  # retried after each handler (PEP 475)
    return os.waitstatus_to_exitcode(wait_status), child


# Signals Python sets to SIG_IGN at start; the program gets them at their default, as
# subprocess's restore_signals does.
_RESTORED_SIGNALS = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, n))


def _spawn(argv, program, env):
    """Start `program` as subprocess.Popen(argv, executable=program, env=env) does
    (descriptors above 2 closed, the signals Python ignores restored to their
    default); returns the pid, or raises the OSError of a failed exec.

    posix_spawn, not subprocess (importing it, with threading, selectors and
    locale, took 5-8 ms before the program's main) nor fork (glibc's posix_spawn
    shares the launcher's memory until the exec instead of copying its page
    tables, and runs no Python in the child: ~1 ms less CPU per run). Its
    errors are the exec's own (glibc reports them since 2.24).

    The inherited descriptors are marked close-on-exec here rather than closed
    by spawn actions: an action refuses a descriptor numbered at or above the
    open-file limit (EBADF), which a shell that lowered its limit may still
    hold, and the launcher needs none of them itself."""
    for fd in _inherited_descriptors():
        try:
            os.set_inheritable(fd, False)
        except OSError:
            pass  # closed since the listing
    return os.posix_spawn(program, argv, env, setsigdef=_RESTORED_SIGNALS)


def _inherited_descriptors():
    """The launcher's descriptors above 2 that an exec would keep open (those it
    inherited without close-on-exec: a shell's 3>file, a jobserver's pipe)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: the usual range
        fds = range(3, min(os.sysconf("SC_OPEN_MAX"), 4096))
    out = []
    for fd in fds:
        if fd > 2:
            try:
                if os.get_inheritable(fd):
                    out.append(fd)
            except OSError:
                pass  # not open (the listing's own descriptor, closed since)
    return out


def flush_std():
    """Flush the launcher's own standard output and error, those that are open
    (a program may be started with either closed: `coz run --- prog >&-`, where
    Python sets sys.stdout to None)."""
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()


def pass_status(status):
    """Exit as the program did: return its exit code, or die by the signal that
    killed it (`status` is Popen's: negative for a signal)."""
    if status >= 0:
        return status
    import resource  # only here: not on the way to the program's main

    sig = -status
    flush_std()
    # Die by the same signal so the shell sees the same status; the child already
    # dumped core if it was going to, so the launcher must not add one of its own.
    try:
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    except (ValueError, OSError):
        pass
    if sig not in (signal.SIGKILL, signal.SIGSTOP):  # their disposition cannot be changed
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
    os.kill(os.getpid(), sig)
    return 128 + sig  # a signal whose default action is not to terminate
