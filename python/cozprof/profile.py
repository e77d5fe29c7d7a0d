"""The one profile parser: every other part of the package reads profiles here.

Reads three dialects, detected line by line:

* this project's JSON lines (`docs/profile-format.md`), `"type":"startup"`
  record with a `"version"` field;
* upstream COZ's legacy tab-separated `.coz` records
  (`experiment\\tselected=...\\tspeedup=...`, `throughput-point`,
  `progress-point`, `latency-point`, `begin-point`/`end-point`, `samples`,
  `runtime`, `startup`, `shutdown`);
* upstream COZ's JSON-lines variant, which carries the legacy records as JSON
  objects (`"type":"throughput_point"`, `"selected_samples"`, `"time"`, ...).

Upstream writes cumulative per-line sample counts and a progress point record
after each experiment; this project writes increments and puts the progress
inside the experiment record. Both end up in the same `Run` shape.

`load(paths)` merges every run of every file into one `Profile`.

A record that cannot be read (a short write at a full disk, a foreign line)
is skipped with a warning naming its file and line, and the rest is read;
records of a type this version does not know (written by a newer one) are
skipped with one warning per type. A file in which no record at all can be
read is not a profile: that is an error.
"""

import itertools
import os
import stat

from .errors import CozError
from .jsonline import raw_decode as _raw_decode

FORMAT_VERSION = 1
QUIET_MODES = ("locks-only", "sampling-only")  # runs without experiments, hence without delays
MAX_LINE_WARNINGS = 5      # malformed records listed one by one per file; the rest are counted

_SEQ = itertools.count()   # reading order of experiments across a whole load

# Progress entry kinds.
THROUGHPUT = "throughput"
LATENCY = "latency"

# Units of virtual speedup.
LINE = "line"
FUNCTION = "function"
CALLSITE = "callsite"
UNITS = (LINE, FUNCTION, CALLSITE)

# Wait categories of blocked samples, in the order reports show them.
WAIT_KINDS = ("io", "lock", "sleep", "sync", "sched", "other")


class Progress:
    """One progress point's measurement during one experiment."""

    __slots__ = ("name", "kind", "delta", "arrivals", "departures", "difference")

    def __init__(self, name, kind, delta=0, arrivals=0, departures=0, difference=None):
        self.name = name
        self.kind = kind
        self.delta = delta
        self.arrivals = arrivals
        self.departures = departures
        self.difference = difference  # None when the dialect has no in-flight count

    def __repr__(self):
        return f"Progress({self.name!r}, {self.kind}, delta={self.delta})"


class Experiment:
    """One experiment: a line virtually sped up for a while, and what progressed."""

    __slots__ = ("selected", "speedup", "duration_ns", "wall_ns", "delay_ns",
                 "selected_samples", "partial", "progress", "run", "seq", "unit",
                 "selected_blocked_ns", "stalled_ns")

    def __init__(self, selected, speedup, duration_ns, selected_samples=0, partial=False,
                 wall_ns=None, delay_ns=None, progress=None, run=None, unit=LINE,
                 selected_blocked_ns=0, stalled_ns=0):
        self.selected = selected
        self.unit = unit                              # "line", "function" or "callsite"
        self.selected_blocked_ns = selected_blocked_ns  # waits of the unit sped up in it
        self.speedup = speedup
        self.duration_ns = duration_ns
        self.wall_ns = wall_ns
        self.delay_ns = delay_ns
        self.selected_samples = selected_samples
        self.partial = partial
        self.stalled_ns = stalled_ns  # the whole process stood still this long in it: left out
        self.progress = progress if progress is not None else []
        self.run = run
        self.seq = next(_SEQ)  # experiments made later sort later (the timeline of drift)

    def __repr__(self):
        return (f"Experiment({self.selected!r}, speedup={self.speedup}, "
                f"duration_ns={self.duration_ns}, progress={self.progress!r})")


class PlainCounts:
    """A run's samples in its plain intervals (Run.plain), in the shape of the
    run's own: `samples`, `unit_samples`, `blocked`, and their length `ns`."""

    __slots__ = ("ns", "samples", "unit_samples", "blocked")

    def __init__(self):
        self.ns = 0
        self.samples = {}
        self.unit_samples = {}
        self.blocked = {}

    def add(self, counts, extra, blocked):
        _add_counts(self.samples, counts)
        for unit, c in extra:
            _add_counts(self.unit_samples.setdefault(unit, {}), c)
        for kind, c in blocked:
            _add_counts(self.blocked.setdefault(kind, {}), c)


class Location:
    """A code address of the conventional profile, with its source lines
    (innermost first: several when functions were inlined there)."""

    __slots__ = ("id", "address", "object", "object_offset", "build_id", "lines")

    def __init__(self, id, address, object, object_offset, build_id, lines):
        self.id = id
        self.address = address
        self.object = object
        self.object_offset = object_offset
        self.build_id = build_id
        self.lines = lines  # [(function or None, file or None, line)]


class Stack:
    """A distinct callchain (location ids, innermost first) of one thread, on
    the CPU (`kind` "cpu") or waiting (a wait kind)."""

    __slots__ = ("id", "locations", "kind", "tid", "thread", "group")

    def __init__(self, id, locations, kind, tid, thread, group):
        self.id = id
        self.locations = locations
        self.kind = kind
        self.tid = tid
        self.thread = thread
        self.group = group


# The runtime's frames for the kernel's CPU time inside an interposed call,
# innermost in "cpu" stacks, by the call's wait category (docs/runtime.md,
# "Blocked samples in the stacks").
KERNEL_IN_CALL = {"coz_kernel_in_io": "io", "coz_kernel_in_lock": "lock",
                  "coz_kernel_in_sleep": "sleep", "coz_kernel_in_sync": "sync"}


def kernel_call_kind(run, stack):
    """The wait category of a "cpu" stack that is the kernel's CPU time in one
    of the program's calls (its innermost frame one of KERNEL_IN_CALL), else None."""
    if stack.kind != "cpu" or not stack.locations:
        return None
    loc = run.locations.get(stack.locations[0])
    if loc is None or not loc.lines:
        return None
    return KERNEL_IN_CALL.get(loc.lines[0][0])


class Run:
    """Records from one `startup` record up to the next (one profiled process)."""

    def __init__(self, path, index, dialect, startup):
        self.path = path
        self.index = index            # position among the runs of its file
        self.dialect = dialect        # "json", "legacy" or "upstream-json"
        self.startup = startup        # the startup record, as a dict
        self.experiments = []
        self.samples = {}             # "path:line" -> total samples in the run
        self.out_of_scope = 0
        self.runtime_ns = 0           # total effective runtime of the run
        self.shutdown = None          # the shutdown record, or None (abrupt end)
        self.warnings = []            # runtime warning records: (code, message)
        self.unit_samples = {}        # "function"/"callsite" -> {name: samples}
        self.blocked = {}             # wait kind -> {"path:line": blocked samples}
        # The same counts over the run's plain intervals only, and their length:
        # the spans between `runtime` records in which every experiment ran at
        # 0%, where the program ran as it does unprofiled (the phase
        # correction's footing: docs/analysis.md, section 3).
        self.plain = PlainCounts()
        self._pending = []            # samples records since the last runtime record
        self._sped = False            # ... and whether a sped-up experiment ended among them
        self._sped_before = False     # ... or in the interval before (its cool-off is in this one)
        self.locations = {}           # id -> Location
        self.stacks = {}              # id -> Stack
        self.stack_counts = {}        # stack id -> [samples, time_ns]
        self.threads = []             # `thread` records, as dicts
        self.locks = None             # the last `locks` record, as a dict
        self.counters = None          # the `counters` record, as a dict
        self.totals = None            # the `totals` record of highest seq (sampling-only, locks-only)

    @property
    def mode(self):
        return self.startup.get("mode") or "causal"

    @property
    def abrupt(self):
        """Whether this runtime's run has no final records: it ended without
        them (SIGKILL, the OOM killer: every other end writes them), or it is
        still running (run_is_live)."""
        return self.dialect == "json" and self.shutdown is None

    @property
    def fixed_speedup(self):
        return self.startup.get("fixed_speedup")

    @property
    def end_to_end(self):
        return self.mode == "end-to-end"

    @property
    def quiet(self):
        """A run without experiments, hence without delays (--locks-only,
        --sampling-only)."""
        return self.mode in QUIET_MODES

    @property
    def build(self):
        """(argv0, build_id) of the profiled program; each None when the startup
        record lacks it (upstream's formats, older profiles, a lost startup)."""
        argv0 = self.startup.get("argv0")
        build_id = self.startup.get("build_id")
        return (argv0 if isinstance(argv0, str) and argv0 else None,
                build_id if isinstance(build_id, str) and build_id else None)

    def __repr__(self):
        return f"Run({self.path!r}#{self.index}, {self.dialect}, {len(self.experiments)} experiments)"


class Profile:
    """Every run of every file given to `load`, in order."""

    def __init__(self, paths):
        self.paths = list(paths)
        self.runs = []
        self.warnings = []            # parser warnings: plain sentences
        self.left_out = []            # runs of older builds that latest_builds() set aside
        self.build_note = None        # the sentence that says so, or None

    @property
    def experiments(self):
        return [e for r in self.runs for e in r.experiments]

    @property
    def samples(self):
        """Samples per line, summed over runs."""
        total = {}
        for r in self.runs:
            for line, n in r.samples.items():
                total[line] = total.get(line, 0) + n
        return total

    @property
    def runtime_ns(self):
        return sum(r.runtime_ns for r in self.runs)

    def shutdown_stats(self):
        """Totals of the shutdown records. Runs of this runtime without one
        count as abrupt, or as live while their process runs (upstream's
        formats have no such record)."""
        cut, live = cut_runs(self.runs)
        stats = {"runs": len(self.runs), "abrupt_runs": len(cut), "live_runs": len(live), "samples": 0,
                 "lost_records": 0, "dropped_samples": 0, "experiments": 0}
        for r in self.runs:
            if r.shutdown is None:
                continue
            for key in ("samples", "lost_records", "dropped_samples", "experiments"):
                v = r.shutdown.get(key)
                if isinstance(v, int):
                    stats[key] += v
        return stats

    def lacks_final_records(self):
        """Whether every run lacks its final records (Run.abrupt): cut short,
        or still going."""
        return bool(self.runs) and all(r.abrupt for r in self.runs)

    def latest_builds(self):
        """This profile with, from each file, only the runs of its latest build.

        A build is (argv0, build_id), or argv0 alone when either run lacks the
        build-id. The latest builds of a file are those of its last process: its
        last run, and the runs just before it with the same pid (the programs
        that process ran with exec, written to the same file). Runs whose build
        is unknown (upstream's formats, a lost startup record) are kept. Files
        are taken one by one: naming several files merges them as asked (with
        --follow-children each child process writes its own file). The result's
        `left_out` lists the runs set aside and `build_note` says so in one
        sentence."""
        kept, left, parts = [], [], []
        by_file = {}
        for r in self.runs:
            by_file.setdefault(r.path, []).append(r)
        for path, runs in by_file.items():
            known = [r for r in runs if r.build[0] is not None]
            if not known:
                kept.extend(runs)
                continue
            latest = [known[-1].build]
            pid = known[-1].startup.get("pid")
            for r in reversed(known[:-1]):
                if pid is None or r.startup.get("pid") != pid:
                    break
                latest.append(r.build)
            mine = []
            for r in runs:
                if r.build[0] is None or any(_same_build(r.build, b) for b in latest):
                    kept.append(r)
                else:
                    mine.append(r)
            if mine:
                left.extend(mine)
                builds = []
                for r in mine:
                    if r.build not in builds:
                        builds.append(r.build)
                shown = ", ".join(_describe_build(b) for b in builds[:2])
                if len(builds) > 2:
                    shown += f" and {len(builds) - 2} more"
                parts.append(f"{path}: {len(mine)} of {len(runs)} runs ({shown})")
        out = Profile(self.paths)
        out.runs = kept
        out.warnings = list(self.warnings)
        out.left_out = left
        if parts:
            out.build_note = ("only the latest build of each profile is analysed; left out runs of "
                              "other builds: " + "; ".join(parts) +
                              " (--all-runs analyses every run)")
        return out

    def runtime_warnings(self):
        """Distinct warning messages written by the runtime, in order of appearance
        (but those that other runs make moot: shown_warnings)."""
        seen = []
        for _run, _code, message in shown_warnings(self.runs):
            if message not in seen:
                seen.append(message)
        return seen


def reached_progress(runs):
    """Whether a progress point moved in any experiment of these runs."""
    return any(p.delta or p.arrivals for r in runs for e in r.experiments for p in e.progress)


def run_samples(run):
    """The samples a run took: its shutdown record's count, else those it wrote."""
    n = (run.shutdown or {}).get("samples")
    return n if isinstance(n, int) else sum(run.samples.values()) + run.out_of_scope


# A process under this share of the samples of several is no part of the work
# to profile (a shell that started it, a parent that waits).
MOOT_DEBUG_INFO_SHARE = 0.01


def shown_warnings(runs):
    """(run, code, message) of the runtime warnings of these runs worth showing:
    with several processes (--follow-children, files merged), those of the
    processes that are no part of the work are left out: "no-progress-point"
    when another run reached one, "no-debug-info" of a run with under 1% of
    the samples (`coz run --follow-children --- ./start.sh`: the shell)."""
    reached = reached_progress(runs)
    counts = [run_samples(r) for r in runs]
    total = sum(counts)
    shown = []
    for r, n in zip(runs, counts):
        for code, message in r.warnings:
            if code == "no-progress-point" and reached:
                continue
            if code == "no-debug-info" and len(runs) > 1 and n < MOOT_DEBUG_INFO_SHARE * total:
                continue
            shown.append((r, code, message))
    return shown


def run_is_live(run):
    """Whether the process that writes this run still runs it, on this
    machine: a process of its pid runs its program (`argv0`) and started no
    later than the run did (not a later process given the same pid). A
    profile read while its program runs has no final records yet."""
    pid, argv0, t = (run.startup.get(k) for k in ("pid", "argv0", "time_ns"))
    if not (isinstance(pid, int) and pid > 0 and isinstance(argv0, str) and isinstance(t, int)):
        return False
    try:
        if os.readlink(f"/proc/{pid}/exe") != argv0:
            return False
        with open(f"/proc/{pid}/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22, starttime
        with open("/proc/stat") as f:
            boot_s = next(int(ln.split()[1]) for ln in f if ln.startswith("btime "))
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    started_ns = (boot_s + start_ticks / os.sysconf("SC_CLK_TCK")) * 1e9
    return started_ns <= t + 2e9  # (btime is in whole seconds)


def live_warning(n, runs):
    """What a profile read while `n` of its `runs` still run lacks."""
    who = "the run is" if n == runs == 1 else f"{n} run{'s' if n != 1 else ''} of {runs} {'are' if n != 1 else 'is'}"
    return (f"{who} still going: {'its' if n == 1 else 'their'} thread table and counters, and the stacks "
            "since the last write, come at the end; the profile holds what was written so far")


def cut_runs(runs):
    """The runs without final records, split: (cut short, still going)."""
    abrupt = [r for r in runs if r.abrupt]
    live = [r for r in abrupt if run_is_live(r)]
    return [r for r in abrupt if r not in live], live


# How a run ends without its final records, when nothing says which.
KILLED = ("killed by SIGKILL or the out-of-memory killer, or it made the exit system call itself, "
          "as Go programs do")


def abrupt_warning(n, runs, cause=KILLED):
    """What `n` runs of `runs` ended without their final records lost."""
    if n == 1 and runs == 1:
        who, their = "the run", "its"
    elif n == 1:
        who, their = f"1 run of {runs}", "its"
    else:
        who, their = f"{n} runs of {runs}", "their"
    return (f"{who} ended without {their} final records ({cause}): {their} thread table and "
            f"counters, and the stacks of {their} last second (or last tenth of {their} time), are "
            "missing; every record written before is kept")


def _same_build(a, b):
    if a[0] != b[0]:
        return False
    return a[1] is None or b[1] is None or a[1] == b[1]


def _describe_build(b):
    return b[0] + (f" build-id {b[1][:12]}" if b[1] else "")


class _Malformed(Exception):
    pass


class _Unknown(Exception):
    """A well-formed record of a type this version does not know."""


def load(paths, skip=()):
    """Parse one or more profile files (a path or a list of paths) into a Profile.

    `skip`: JSON record types not to read (their lines are passed over before
    JSON decoding), for a reader that needs only some of a profile: `coz run`'s
    summary reads no stacks, locations or thread records.

    Raises CozError for a missing or unreadable file, a file in which no record
    can be read, or a format version newer than this parser. Malformed records
    (and a cut-short last line) are skipped with a warning naming file and line;
    records of unknown types are skipped with one warning per type.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    paths, repeated = _distinct_files([os.fspath(p) for p in paths])
    profile = Profile(paths)
    for again, first in repeated:
        profile.warnings.append(f"{again} is {first}, named before: read once")
    unknown = {}  # (what, name) -> [first path, first line, count]
    prefixes = tuple(f'{{"type":"{t}"' for t in skip)
    for path in profile.paths:
        _load_file(profile, path, unknown, prefixes)
    for (what, name), (path, lineno, count) in unknown.items():
        noun, plural, field = _UNKNOWN_WORDS[what]
        profile.warnings.append(f"{path}:{lineno}: {count} {noun if count == 1 else plural} of "
                                f"unknown {field} {name!r} skipped (written by a newer coz?)")
    return profile


def _distinct_files(paths):
    """`paths` without a second name of a file named before (the same name, or
    another path to it): its runs would be merged twice, each experiment counted
    twice and the intervals narrowed as if measured twice. Also (repeat, first)
    pairs. A path that cannot be looked at is kept, for the reader to say why."""
    kept, repeated, seen = [], [], {}
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            kept.append(p)
            continue
        first = seen.setdefault((st.st_dev, st.st_ino), p)
        if first is p:
            kept.append(p)
        else:
            repeated.append((p, first))
    return kept, repeated


def _load_file(profile, path, unknown, skip_prefixes=()):
    try:
        if stat.S_ISCHR(os.stat(path).st_mode):
            # /dev/zero or /dev/urandom would be read without end (a pipe,
            # /dev/stdin from a file or a command, is read as a profile).
            raise CozError(f"{path} is a device, not a profile",
                           hint="name the profile file, or pipe it: coz report /dev/stdin < profile.coz")
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise CozError(f"no such profile: {path}",
                       hint="run 'coz run --- ./program' first, or name the profile file") from None
    except IsADirectoryError:
        raise CozError(f"{path} is a directory, not a profile",
                       hint="name the profile file inside it, e.g. profile.coz") from None
    except OSError as e:
        raise CozError(f"cannot read {path}: {e.strerror}",
                       hint="check the file's permissions") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        # Paths are written byte for byte, and a write cut short at a full disk can
        # split a character: replace what is not UTF-8 and say so, unless only the
        # cut last line is affected (it is dropped anyway).
        text = data.decode("utf-8", errors="replace")
        last_start = data.rfind(b"\n") + 1
        body = data if data.endswith(b"\n") else data[:last_start]
        try:
            body.decode("utf-8")
        except UnicodeDecodeError as e:
            lineno = data.count(b"\n", 0, e.start) + 1
            profile.warnings.append(f"{path}:{lineno}: bytes that are not UTF-8 text were "
                                    "replaced (from this line on)")
    parser = _Parser(profile, path, unknown)
    parser.feed(text, skip_prefixes)
    parser.read_checkpoint(path + ".checkpoint")
    parser.apply_totals()


_LEGACY_TYPES = ("startup", "experiment", "throughput-point", "progress-point", "latency-point",
                 "samples", "runtime", "shutdown")


def _starts_like_a_record(line):
    """Whether a line cut short by the end of the file may be a record's beginning:
    the one line of a file without a newline is otherwise not a profile (a text
    file, a binary), not an empty one."""
    if line.startswith("{"):
        return True
    word = line.split("\t", 1)[0]
    return any(t.startswith(word) for t in _LEGACY_TYPES)
_UNKNOWN_WORDS = {"record": ("record", "records", "type"),
                  "progress": ("progress entry", "progress entries", "kind")}
_SKIPPED = object()  # legacy: the point records that follow a skipped experiment record


class _Parser:
    def __init__(self, profile, path, unknown):
        self.profile = profile
        self.path = path
        self.unknown = unknown
        self.lineno = 0
        self.run = None
        self.nruns = 0
        self.last_experiment = None   # legacy: point records follow their experiment
        self.legacy_samples = None    # legacy: cumulative counts, last value wins

    # -- run bookkeeping -------------------------------------------------

    def _start_run(self, dialect, startup):
        self._finish_run()
        self.run = Run(self.path, self.nruns, dialect, startup)
        self.nruns += 1
        self.profile.runs.append(self.run)
        self.last_experiment = None
        self.legacy_samples = {} if dialect != "json" else None

    def _finish_run(self):
        if self.run is not None and self.legacy_samples is not None:
            self.run.samples = self.legacy_samples
        self.run = None

    def _current(self, dialect):
        # Records before any startup (a file whose head was lost) get a run of their own.
        if self.run is None:
            self._start_run(dialect, {})
            self.profile.warnings.append(f"{self.path}: records before the first startup record")
        return self.run

    def _unknown(self, what, name):
        entry = self.unknown.get((what, name))
        if entry is None:
            self.unknown[(what, name)] = [self.path, self.lineno, 1]
        else:
            entry[2] += 1

    # -- lines -----------------------------------------------------------

    def feed(self, text, skip_prefixes=()):
        lines = text.split("\n")
        last = len(lines) - 1
        cut = bool(lines[last])  # no final newline: the last line may be cut short
        raw_decode = _raw_decode
        on_json = self._json_record
        on_tsv = self._legacy_record
        read = 0       # records read
        bad = []       # (line number, reason) of malformed records
        first_bad = None
        for i, line in enumerate(lines):
            if not line or line.isspace():
                continue
            self.lineno = i + 1
            if skip_prefixes and line.startswith(skip_prefixes):
                read += 1
                continue
            try:
                if line[0] == "{":
                    try:
                        rec, end = raw_decode(line)
                    except ValueError:
                        raise _Malformed("not valid JSON") from None
                    if end != len(line) and not line[end:].isspace():
                        raise _Malformed("not valid JSON")
                    if type(rec) is not dict:
                        raise _Malformed("a record must be a JSON object")
                    on_json(rec)
                else:
                    on_tsv(line)
                read += 1
                continue
            except _Unknown:
                if first_bad is None:
                    first_bad = (i + 1, "a record of unknown type")
                continue
            except _Malformed as e:
                reason = str(e)
            except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
                reason = f"missing field {e}" if isinstance(e, KeyError) else "bad field value"
            if i == last and cut and (read or first_bad or _starts_like_a_record(line)):
                self.profile.warnings.append(
                    f"{self.path}:{i + 1}: last line is cut short (ignored)")
                continue
            if first_bad is None:
                first_bad = (i + 1, reason)
            if self._salvage(line):
                read += 1
                reason = "cut short, and the record written after it on the same line was read"
            else:
                self._skip(line)
            bad.append((i + 1, reason))
        self._finish_run()
        if read == 0 and first_bad is not None:
            raise CozError(f"{self.path}: not a profile (line {first_bad[0]}: {first_bad[1]})",
                           hint="profiles are written by 'coz run'; name the profile file "
                                "(default profile.coz)")
        for lineno, reason in bad[:MAX_LINE_WARNINGS]:
            self.profile.warnings.append(f"{self.path}:{lineno}: malformed record skipped: {reason}")
        if len(bad) > MAX_LINE_WARNINGS:
            rest = bad[MAX_LINE_WARNINGS:]
            self.profile.warnings.append(
                f"{self.path}: {len(rest)} more malformed records skipped (lines {rest[0][0]} "
                f"to {rest[-1][0]})")
        if self.nruns == 0:
            self.profile.warnings.append(f"{self.path}: empty profile (no runs)")

    # -- totals (runs without experiments: docs/profile-format.md) -----------

    _TOTALED = ("samples", "stack_counts", "locks", "runtime")

    def _totals(self, rec):
        """Keeps, for the run of its pid, the `totals` record of highest seq."""
        seq, pid = _int(rec["seq"]), _int(rec["pid"])
        for r in _list(rec["records"]):
            if type(r) is not dict or r.get("type") not in self._TOTALED:
                raise _Malformed("totals hold samples, stack_counts, locks and runtime records only")
        runs = [r for r in self.profile.runs if r.path == self.path and r.dialect == "json"]
        run = next((r for r in reversed(runs) if r.startup.get("pid") == pid), None)
        if run is None:
            raise _Malformed(f"totals of process {pid}, whose run is not in this file")
        if run.totals is None or seq > run.totals["seq"]:
            run.totals = {"seq": seq, "final": rec.get("final") is True, "records": rec["records"]}

    def read_checkpoint(self, path):
        """The checkpoint beside the profile: the totals so far of a run still
        going, or of one killed before `coz run` could append them."""
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            return
        import json  # only here and in _salvage: the summary's reading avoids it (jsonline.py)

        for line in text.splitlines():
            try:
                rec = json.loads(line)
                if type(rec) is not dict or rec.get("type") != "totals":
                    raise _Malformed("not a totals record")
                self._totals(rec)
            except (_Malformed, KeyError, TypeError, ValueError) as e:
                self.profile.warnings.append(f"{path}: checkpoint skipped: {e}")

    def apply_totals(self):
        for run in self.profile.runs:
            if run.path != self.path or run.totals is None:
                continue
            self.run = run
            try:
                for rec in run.totals["records"]:
                    self._json_record(rec)
            except (_Malformed, KeyError, TypeError, ValueError) as e:
                self.profile.warnings.append(f"{self.path}: the totals of run {run.index + 1} "
                                             f"are malformed and were skipped: {e}")
            finally:
                self.run = None

    def _salvage(self, line):
        """A record cut short (a short write at a full disk) has the next record
        written right after it, on the same line: read that one."""
        if line[0] != "{":
            return False
        import json

        at = line.find('{"type":', 1)
        while at != -1:
            try:
                rec = json.loads(line[at:])
            except ValueError:
                at = line.find('{"type":', at + 1)
                continue
            self._skip(line[:at])
            if type(rec) is not dict:
                return False
            try:
                self._json_record(rec)
            except _Unknown:
                return True
            except (_Malformed, KeyError, TypeError, ValueError, AttributeError, RecursionError):
                return False
            return True
        return False

    def _skip(self, line):
        """What a skipped record leaves behind: a broken startup still begins a new
        run (of an unknown program), and the point records of a skipped legacy
        experiment are dropped with it."""
        if line.startswith(('{"type":"startup"', "startup\t")):
            self._start_run("json" if line[0] == "{" else "legacy", {})
        elif line.startswith(('{"type":"experiment"', "experiment\t")) and \
                (self.run is None or self.run.dialect != "json"):
            self.last_experiment = _SKIPPED

    # -- this project's JSON and upstream's JSON variant -------------------

    def _json_record(self, rec):
        t = rec.get("type")
        if t == "experiment":
            if "progress" in rec or "duration_ns" in rec:
                self._json_experiment(rec)
            else:
                self._upstream_experiment(rec)
        elif t == "samples":
            if "counts" in rec:
                counts = rec["counts"]
                if type(counts) is not dict or any(type(n) is not int for n in counts.values()):
                    raise _Malformed("sample counts must be integers")
                oos = _int(rec.get("out_of_scope", 0))
                extra = [(unit, _counts(rec[unit])) for unit in (FUNCTION + "s", CALLSITE + "s") if unit in rec]
                blocked = rec.get("blocked")
                if blocked is not None:
                    if type(blocked) is not dict:
                        raise _Malformed("blocked samples must be an object")
                    blocked = [(_str(kind), _counts(c)) for kind, c in blocked.items()]
                run = self._current("json")
                samples = run.samples
                for line, n in counts.items():
                    samples[line] = samples.get(line, 0) + n
                run.out_of_scope += oos
                extra = [(unit[:-1], c) for unit, c in extra]
                for unit, c in extra:
                    _add_counts(run.unit_samples.setdefault(unit, {}), c)
                for kind, c in blocked or ():
                    _add_counts(run.blocked.setdefault(kind, {}), c)
                run._pending.append((counts, extra, blocked or ()))
            else:
                self._cumulative_samples(rec["location"], _int(rec["count"]))
        elif t == "runtime":
            run = self._current("json")
            v = rec["time_ns"] if "time_ns" in rec else rec["time"]
            v = _int(v)
            if run.dialect == "json":
                # The interval since the last runtime record ends: plain unless an
                # experiment in it inserted delays (its runtime is wall time then).
                if not run._sped and not run._sped_before and v > run.runtime_ns:
                    run.plain.ns += v - run.runtime_ns
                    for counts, extra, blocked in run._pending:
                        run.plain.add(counts, extra, blocked)
                run._pending, run._sped, run._sped_before = [], False, run._sped
            if v > run.runtime_ns:
                run.runtime_ns = v
        elif t == "startup":
            if "version" in rec:
                v = rec["version"]
                if type(v) is not int or v < 1:
                    raise _Malformed("bad format version")
                if v > FORMAT_VERSION:
                    raise CozError(f"{self.path}: profile format version {v} is newer than this "
                                   f"coz understands ({FORMAT_VERSION})",
                                   hint="update coz to read this profile")
                self._start_run("json", rec)
            else:
                self._start_run("upstream-json", {"time_ns": _int(rec.get("time", 0))})
        elif t == "throughput_point" or t == "throughput-point" or t == "progress-point":
            self._point(Progress(_str(rec["name"]), THROUGHPUT, delta=_int(rec["delta"])))
        elif t == "latency_point" or t == "latency-point":
            self._point(Progress(_str(rec["name"]), LATENCY, arrivals=_int(rec["arrivals"]),
                                 departures=_int(rec["departures"]),
                                 difference=_int(rec["difference"])))
        elif t == "shutdown":
            self._current("json").shutdown = rec
        elif t == "locations":
            run = self._current("json")
            for loc in _list(rec["locations"]):
                lines = [(_opt_str(ln.get("function")), _opt_str(ln.get("file")), _int(ln.get("line", 0)))
                         for ln in _list(loc["lines"])]
                lid = _int(loc["id"])
                run.locations[lid] = Location(lid, _int(loc["address"]), _str(loc["object"]),
                                              _int(loc.get("object_offset", 0)), _opt_str(loc.get("build_id")),
                                              lines)
        elif t == "stacks":
            run = self._current("json")
            for st in _list(rec["stacks"]):
                sid = _int(st["id"])
                run.stacks[sid] = Stack(sid, [_int(i) for i in _list(st["locations"])], _str(st["kind"]),
                                        _int(st.get("tid", 0)), _str(st.get("thread", "")),
                                        _str(st.get("group", "")))
        elif t == "stack_counts":
            counts = self._current("json").stack_counts
            for entry in _list(rec["counts"]):
                if type(entry) is not list or len(entry) != 3:
                    raise _Malformed("a stack count is [id, samples, time_ns]")
                sid, n, ns = (_int(v) for v in entry)
                c = counts.get(sid)
                if c is None:
                    counts[sid] = [n, ns]
                else:
                    c[0] += n
                    c[1] += ns
        elif t == "thread":
            _int(rec["tid"])
            self._current("json").threads.append(rec)
        elif t == "locks":
            _list(rec["locks"])
            self._current("json").locks = rec
        elif t == "counters":
            self._current("json").counters = rec
        elif t == "totals":
            self._totals(rec)
        elif t == "warning":
            self._current("json").warnings.append((str(rec.get("code", "")),
                                                   _str(rec["message"])))
        elif isinstance(t, str):
            self._unknown("record", t[:40])
            raise _Unknown()
        else:
            raise _Malformed("no \"type\" field")

    def _json_experiment(self, rec):
        progress = []
        unknown = None
        for p in rec["progress"]:
            kind = p["kind"]
            if kind == THROUGHPUT:
                delta = p["delta"]
                if type(delta) is not int or delta < 0:
                    raise _Malformed("expected a non-negative integer")
                progress.append(Progress(_str(p["name"]), THROUGHPUT, delta))
            elif kind == LATENCY:
                progress.append(Progress(_str(p["name"]), LATENCY, 0, _int(p["arrivals"]),
                                         _int(p["departures"]), _int(p["difference"])))
            elif isinstance(kind, str):
                unknown = (unknown or []) + [kind[:40]]
            else:
                raise _Malformed("progress entry without a kind")
        duration = rec["duration_ns"]
        if type(duration) is not int or duration < 0:
            raise _Malformed("expected a non-negative integer")
        unit = rec.get("unit", LINE)
        if unit not in UNITS:
            raise _Malformed(f"unknown unit {str(unit)[:40]!r}")
        e = Experiment(_str(rec["selected"]), _speedup(rec["speedup"]), duration,
                       _int(rec.get("selected_samples", 0)), bool(rec.get("partial", False)),
                       rec.get("wall_ns"), rec.get("delay_ns"), progress, self._current("json"),
                       unit, _int(rec.get("selected_blocked_ns", 0)), _int(rec.get("stalled_ns", 0)))
        e.run.experiments.append(e)
        if e.speedup > 0:
            e.run._sped = True
        self.last_experiment = None
        for kind in unknown or ():
            self._unknown("progress", kind)

    def _upstream_experiment(self, rec):
        run = self._current("upstream-json")
        e = Experiment(_str(rec["selected"]), _speedup(rec["speedup"]),
                       _upstream_duration(_int(rec["duration"])),
                       selected_samples=_int(rec.get("selected_samples",
                                                     rec.get("selected-samples", 0))),
                       run=run)
        run.experiments.append(e)
        self.last_experiment = e

    def _point(self, progress):
        e = self.last_experiment
        if e is None:
            raise _Malformed("progress point record without an experiment before it")
        if e is not _SKIPPED:
            e.progress.append(progress)

    def _cumulative_samples(self, location, count):
        self._current("legacy")
        if self.legacy_samples is None:
            raise _Malformed("upstream samples record in a run of this project's format")
        self.legacy_samples[location] = count

    # -- upstream's tab-separated records ----------------------------------

    def _legacy_record(self, line):
        parts = line.split("\t")
        t = parts[0]
        fields = {}
        for p in parts[1:]:
            k, sep, v = p.partition("=")
            if not sep:
                raise _Malformed(f"field without '=' in {_shown(t)!r} record")
            fields[k] = v
        if t == "experiment":
            run = self._current("legacy")
            e = Experiment(fields["selected"], _speedup(float(fields["speedup"])),
                           _upstream_duration(int(fields["duration"])),
                           selected_samples=int(fields.get("selected-samples", 0)), run=run)
            run.experiments.append(e)
            self.last_experiment = e
        elif t == "throughput-point" or t == "progress-point":
            # Old upstream versions called throughput points "progress-point ... type=source".
            self._point(Progress(fields["name"], THROUGHPUT, delta=int(fields["delta"])))
        elif t == "latency-point":
            self._point(Progress(fields["name"], LATENCY, arrivals=int(fields["arrivals"]),
                                 departures=int(fields["departures"]),
                                 difference=int(fields["difference"])))
        elif t == "begin-point" or t == "end-point":
            # Old upstream latency pairs: counts only, no in-flight figure.
            e = self.last_experiment
            if e is None:
                raise _Malformed("progress point record without an experiment before it")
            name = fields["name"]
            delta = int(fields["delta"])
            if e is _SKIPPED:
                return
            for p in e.progress:
                if p.kind == LATENCY and p.name == name:
                    break
            else:
                p = Progress(name, LATENCY)
                e.progress.append(p)
            if t == "begin-point":
                p.arrivals += delta
            else:
                p.departures += delta
        elif t == "samples":
            self._cumulative_samples(fields["location"], int(fields["count"]))
        elif t == "runtime":
            run = self._current("legacy")
            v = int(fields["time"])
            if v > run.runtime_ns:
                run.runtime_ns = v
        elif t == "startup":
            self._start_run("legacy", {"time_ns": int(fields.get("time", 0))})
        elif t == "shutdown":
            rec = {"time_ns": int(fields["time"])} if "time" in fields else {}
            if "samples" in fields:
                rec["samples"] = int(fields["samples"])
            self._current("legacy").shutdown = rec
        elif _legacy_name(t) and len(parts) > 1:
            self._unknown("record", t[:40])
            raise _Unknown()
        else:
            raise _Malformed(f"not a record: {_shown(t)!r}")


def _shown(text):
    """A record's first word as a message quotes it: at most 40 characters."""
    return text if len(text) <= 40 else text[:40] + "..."


_LEGACY_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")


def _legacy_name(word):
    """Whether `word` is a name as upstream's records spell them: [a-z][a-z0-9_-]*
    (without re: see jsonline.py)."""
    return bool(word) and "a" <= word[0] <= "z" and all(c in _LEGACY_NAME_CHARS for c in word)


def _upstream_duration(v):
    """Upstream computes `wall - delay` in unsigned arithmetic: a delay longer than the
    experiment wraps around to nearly 2**64. Give such values back their sign; the
    analysis leaves experiments without a positive duration out."""
    return v - (1 << 64) if v >= (1 << 63) else v


def _int(v):
    if type(v) is not int or v < 0:
        raise _Malformed("expected a non-negative integer")
    return v


def _list(v):
    if type(v) is not list:
        raise _Malformed("expected a list")
    return v


def _opt_str(v):
    return None if v is None else _str(v)


def _counts(v):
    """A {name: count} object of a samples record."""
    if type(v) is not dict or any(type(n) is not int or n < 0 for n in v.values()):
        raise _Malformed("sample counts must be non-negative integers")
    return v


def _add_counts(into, counts):
    for k, n in counts.items():
        into[k] = into.get(k, 0) + n


def _str(v):
    if type(v) is not str:
        raise _Malformed("expected a string")
    return v


def _speedup(v):
    if type(v) not in (int, float) or not (0.0 <= v <= 1.0):
        raise _Malformed("speedup must be a number from 0 to 1")
    # Written with two decimals; round so 0.15 from two writers compares equal.
    return round(float(v), 2)
