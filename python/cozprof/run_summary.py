"""What `coz run` says after the program ends: each runtime warning once, then
one summary line of what this invocation wrote.

The launcher tells the runtime (COZ_WARN_STDERR=0) to write its warnings
only into the profile; with --follow-children every process would otherwise
print its own copy of the same sentences. After the program ends, this module
reads the part of each profile file that grew during the run (the file may
hold earlier runs: only what this invocation appended counts), prints each
distinct warning once, and ends with

    coz: note: 42 experiments, 30 usable (36.0 per minute), 5 lines with enough data, 12345 samples, 0 lost records; profile: /abs/profile.coz

(usable: the experiments that enter a causal curve; per minute of the
program's wall time under the profiler).

It never imports numpy, and imports the profile parser only once the
program has started (`prepare`): the launcher must stay light, and neither
the program's start nor the summary must wait for the parser's imports.
"""

import os
import stat
import sys

from .errors import CozError
from .stat import children_of

# The analysis' rule for a causal curve (analysis.DEFAULT_MIN_POINTS and
# FIXED_SPEEDUP_MIN_POINTS, which a test keeps equal to these: importing
# analysis would import numpy).
MIN_POINTS = 3
FIXED_SPEEDUP_MIN_POINTS = 2
MAX_WARNINGS_PER_CODE = 5  # distinct messages of one kind printed before "N more"

PREFIX = "coz: note: "


# ------------------------------------------------------------- which files

def expand_pid(pattern, pid):
    """`%p` becomes the pid, as the runtime does it (left to right, no escapes)."""
    return pattern.replace("%p", str(pid))


def child_name(output, pid):
    """Where a followed child writes without `%p`: `<stem>.<pid>.<ext>`, as the runtime names it."""
    if "%p" in output:
        return expand_pid(output, pid)
    slash, dot = output.rfind("/"), output.rfind(".")
    if dot != -1 and dot > slash:
        return f"{output[:dot]}.{pid}{output[dot:]}"
    return f"{output}.{pid}"


class Outputs:
    """The files one `coz run` may write, and how big they were before it started.

    `output` is the absolute COZ_OUTPUT given to the runtime (with `%p` kept).
    The root process writes `output` (`%p` expanded with its pid); with
    `follow_children`, every other process writes `child_name(output, pid)`.
    """

    def __init__(self, output, follow_children, before=None):
        self.output = output
        self.follow_children = follow_children
        self._pattern = output if "%p" in output else child_name(output, "%p")
        self.child_pattern = self._pattern.replace("%p", "<pid>")
        # `before`: taken when the program started, by whoever started it (the
        # native front hands over its output file's identity).
        self.before = before if before is not None else {path: _identity(path) for path in self._candidates()}
        # A pipe or a device (-o /dev/stdout): the summary cannot read it back.
        self.stream = "%p" not in output and is_stream(output)

    def _candidates(self):
        paths = set()
        if "%p" not in self.output:
            paths.add(self.output)
        if self.follow_children or "%p" in self.output:
            # Only here: glob (with fnmatch) and re took 1.4 ms and more of every `coz
            # run`'s way to the program's main.
            import glob
            import re

            pieces = self._pattern.split("%p")
            # Every %p is the same pid: the first is captured, the others must repeat it.
            regex = re.compile(re.escape(pieces[0]) + r"(?P<pid>[0-9]+)" + re.escape(pieces[1])
                               + "".join(r"(?P=pid)" + re.escape(p) for p in pieces[2:]))
            paths.update(p for p in glob.glob("*".join(glob.escape(piece) for piece in pieces))
                         if regex.fullmatch(p))
        return paths

    def main_path(self, root_pid):
        return expand_pid(self.output, root_pid)

    def written(self, root_pid):
        """[(path, offset)]: the files that grew during the run and where their new
        part starts, the root process's file first."""
        main = self.main_path(root_pid)
        found = self._candidates() if self.follow_children else {main}
        out = []
        for path in sorted(found, key=lambda p: (p != main, p)):
            now = _identity(path)
            if now is None:
                continue
            old = self.before.get(path)
            # The same file (device, inode) not shorter than before: only its tail is ours.
            offset = old[2] if old is not None and old[:2] == now[:2] and now[2] >= old[2] else 0
            if now[2] > offset:
                out.append((path, offset))
        return out


def is_stream(path):
    """True when `path` is a pipe, a socket or a character device (a terminal,
    /dev/null): what is written there cannot be read back, and its size says
    nothing of what was written."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode) or stat.S_ISSOCK(mode)


def _identity(path):
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, st.st_size)


# --------------------------------------------------------------- reading

def prepare():
    """Import what reading the profile needs (the parser, json, re: 5-9 ms) while
    the program runs, called by the launcher once the program has started: on
    the way to its main it would delay the program, after its end it would
    delay the summary. It costs the program a little CPU only when every CPU
    is busy at its start. Never raises: the summary says what went wrong."""
    try:
        from . import profile  # noqa: F401
    except Exception:  # noqa: BLE001 - load_tail imports it again and reports
        pass


# Records the summary does not read: most of a profile's bytes. On a 525 KB
# file of seven sampling-only runs of benchmarks' pipeline, the parse took
# 11.0 ms with them and 2.2 ms without (time after the program's exit).
UNREAD = ("stacks", "locations", "stack_counts", "thread")


def load_tail(path, offset):
    """The runs in `path` from byte `offset` on, parsed by the one profile
    parser, without the records the summary does not read (UNREAD)."""
    from . import profile as profile_mod

    if offset == 0:
        return profile_mod.load(path, skip=UNREAD).runs
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read()
    # The parser reads paths: hand it the new part as an anonymous in-memory file.
    fd = os.memfd_create("coz-run-summary", os.MFD_CLOEXEC)
    try:
        _write_all(fd, data)
        try:
            return profile_mod.load(f"/proc/self/fd/{fd}", skip=UNREAD).runs
        except CozError as e:
            raise CozError(str(e).replace(f"/proc/self/fd/{fd}", path), hint=e.hint) from None
    finally:
        os.close(fd)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ------------------------------------------------------------- counting

def lines_with_enough_data(runs):
    """Distinct lines that get a causal curve for at least one progress point
    (see `curves`)."""
    return len({line for (_, line, _) in curves(runs)})


def usable_experiments(runs):
    """(usable, sped up): the experiments that enter at least one causal curve
    (see `curves`), each counted once, and those of them at a speedup above 0."""
    return usable_experiments_of(curves(runs))


def usable_experiments_of(found):
    """`usable_experiments` of the result of `curves`."""
    usable = {}
    for exps in found.values():
        for e in exps:
            usable[id(e)] = e
    return len(usable), sum(1 for e in usable.values() if e.speedup > 0)


def curves(runs):
    """{(unit, line, point): [experiment]}: the curves the analysis draws and the
    experiments that enter each, by its rule: usable experiments (positive
    duration; no stall; not cut short by the program's end, unless the run is
    end-to-end), a 0% baseline whose progress advanced, enough distinct
    speedups with progress (MIN_POINTS, or FIXED_SPEEDUP_MIN_POINTS when every
    experiment comes from --fixed-speedup runs), and only the experiments at
    speedups with progress. Mirrors analysis.analyze without numpy; a test
    compares the two."""
    from .profile import LATENCY

    kinds = {}
    groups = {}  # (unit, line, point) -> {speedup: [experiment]}
    for run in runs:
        e2e = run.end_to_end
        for e in run.experiments:
            if e.duration_ns <= 0 or e.stalled_ns or (e.partial and not e2e):
                continue
            seen = set()
            for p in e.progress:
                if p.name in seen:
                    continue  # an experiment is measured by its first entry for a point
                seen.add(p.name)
                kinds.setdefault(p.name, p.kind)
                groups.setdefault((e.unit, e.selected, p.name), {}).setdefault(e.speedup, []).append(e)
    out = {}
    for key, by_speedup in groups.items():
        if 0.0 not in by_speedup:
            continue
        latency = kinds[key[2]] == LATENCY
        sums = {s: _sums(exps, key[2]) for s, exps in by_speedup.items()}
        if latency and any(q_negative for *_, q_negative in sums.values()):
            continue  # no in-flight count
        with_progress = [s for s, sm in sums.items() if _has_period(sm, latency)]
        if 0.0 not in with_progress:
            continue
        fixed = all(e.run is not None and e.run.fixed_speedup is not None
                    for exps in by_speedup.values() for e in exps)
        needed = min(MIN_POINTS, FIXED_SPEEDUP_MIN_POINTS) if fixed else MIN_POINTS
        if len(with_progress) >= needed:
            out[key] = [e for s in with_progress for e in by_speedup[s]]
    return out


def _sums(exps, point):
    """(duration, count, arrivals+departures, in-flight x duration, any missing in-flight)
    summed over the experiments, each measured by its first entry for `point`."""
    d = k = a = q = 0
    missing = False
    for e in exps:
        for p in e.progress:
            if p.name == point:
                d += e.duration_ns
                k += p.delta
                a += p.arrivals + p.departures
                if p.difference is None or p.difference < 0:
                    missing = True  # the analysis' -1 marker, or a negative product
                else:
                    q += p.difference * e.duration_ns
                break
    return d, k, a, q, missing


def _has_period(sums, latency):
    d, k, a, q, _ = sums
    if latency:
        return a > 0 and q > 0 and d > 0
    return k > 0 and d > 0


def summarize(runs, wall_s=None):
    """The figures of the summary line for these runs; `wall_s`: the wall time
    of the invocation, for the usable experiments per minute (None: unknown)."""
    samples = lost = dropped = 0
    for r in runs:
        sd = r.shutdown or {}
        n = sd.get("samples")
        samples += n if isinstance(n, int) else sum(r.samples.values()) + r.out_of_scope
        lost += sd.get("lost_records") if isinstance(sd.get("lost_records"), int) else 0
        dropped += sd.get("dropped_samples") if isinstance(sd.get("dropped_samples"), int) else 0
    found = curves(runs)
    usable, sped_up = usable_experiments_of(found)
    return {"processes": len(runs),
            # Runs without experiments by design: their line leaves them out.
            "quiet": bool(runs) and all(r.quiet for r in runs),
            "experiments": sum(len(r.experiments) for r in runs),
            "usable": usable, "sped_up": sped_up,
            "per_minute": 60.0 * usable / wall_s if wall_s else None,
            "lines": len({line for (_, line, _) in found}),
            "samples": samples, "lost_records": lost, "dropped_samples": dropped}


def _n(count, word, plural=None):
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def _process(run):
    """The process a run's image belongs to: its pid (a process that execs
    writes a run per image, one pid), or the run itself in a profile without one."""
    return run.startup.get("pid", id(run))


def warning_lines(runs):
    """'coz: warning: ...' lines: each distinct runtime warning once, with the
    number of processes (runs) it came from when more than one; at most
    MAX_WARNINGS_PER_CODE distinct messages of one code, then how many more."""
    from . import profile as profile_mod

    seen = {}  # message -> [code, pids]
    for r, code, message in profile_mod.shown_warnings(runs):
        # A process counts once per message, however many images it exec'd.
        seen.setdefault(message, [code, set()])[1].add(_process(r))
    shown, more = [], {}
    per_code = {}
    for message, (code, pids) in seen.items():
        count = len(pids)
        per_code[code] = per_code.get(code, 0) + 1
        if per_code[code] > MAX_WARNINGS_PER_CODE:
            more[code] = more.get(code, 0) + 1
            continue
        shown.append(f"coz: warning: {message}" + (f" (in {count} processes)" if count > 1 else ""))
    for code, count in more.items():
        shown.append(f"coz: warning: {_n(count, 'more warning')} of the same kind ({code}); "
                     "'coz report' lists them all")
    return shown


# Children's CPU time below this is not worth a note (a shell's `ls`).
CHILDREN_NOTE_MIN_NS = 50_000_000


def children_notes(runs):
    """A note per run whose unprofiled child processes used more CPU time
    than the program itself (`coz run --- sh -c ./app`, a server that forks
    its workers): the profile would otherwise pass for an idle program's."""
    notes = []
    # A process's counters (getrusage) run on across exec: of the runs of one
    # pid, the last image's are the whole process's.
    last = {}
    for r in runs:
        last[_process(r)] = r
    for r in last.values():
        c = r.counters or {}
        ch, own = children_of(c), c.get("task_clock_ns")
        if ch is None or ch["profiled"] or not isinstance(own, int):
            continue
        cpu = ch["cpu_ns"]
        if cpu >= CHILDREN_NOTE_MIN_NS and cpu > own:
            notes.append(PREFIX + f"child processes used {cpu / 1e9:.2f} s of CPU time, the program "
                                  f"itself {own / 1e9:.2f} s, and are not in the profile: "
                                  "--follow-children profiles each in its own file")
    return notes


def summary_line(figures, files, outputs):
    usable = f"{figures['usable']} usable"
    if figures.get("per_minute") is not None:
        usable += f" ({figures['per_minute']:.1f} per minute)"
    parts = [] if figures.get("quiet") else [_n(figures["experiments"], "experiment"), usable,
                                             f"{_n(figures['lines'], 'line')} with enough data"]
    parts += [_n(figures["samples"], "sample"), _n(figures["lost_records"], "lost record")]
    if figures["dropped_samples"]:
        parts.append(_n(figures["dropped_samples"], "dropped sample"))
    if len(files) == 1:
        where = f"profile: {files[0]}"
    else:
        where = f"profiles: {files[0]} and {len(files) - 1} more ({outputs.child_pattern})"
    return PREFIX + ", ".join(parts) + "; " + where


# The status the runtime exits with when it refuses to start (libcoz/runtime.cpp),
# after printing its own error: no profile, and nothing more to say.
START_FAILED_STATUS = 125


def abrupt_lines(runs, root_pid, killed_by=None, exit_status=None):
    """A warning when runs ended without their final records (SIGKILL, the
    OOM killer, a raw exit system call): what the profile lacks. `killed_by`:
    the signal that ended the program, when the launcher saw one;
    `exit_status`: its status, when it exited."""
    from . import profile as profile_mod

    abrupt, live = profile_mod.cut_runs(runs)  # (live: a child that outlives the program)
    lines = ["coz: warning: " + profile_mod.live_warning(len(live), len(runs))] if live else []
    if not abrupt:
        return lines
    cause = profile_mod.KILLED
    the_program = len(abrupt) == 1 and abrupt[0].startup.get("pid") == root_pid
    if the_program and not killed_by and exit_status is not None:
        # exit() and _exit() write them: it left by the system call itself.
        cause = (f"it exited with status {exit_status} by the exit system call itself, not through "
                 "exit() or _exit(), as Go programs do")
    if killed_by and the_program:
        import signal  # (with enum: not before the program, whose start it would delay)

        try:
            cause = f"killed by {signal.Signals(killed_by).name}"
        except ValueError:
            cause = f"killed by signal {killed_by}"
    return ["coz: warning: " + profile_mod.abrupt_warning(len(abrupt), len(runs), cause)] + lines


def report(outputs, root_pid, exit_status=None, wall_s=None, killed_by=None):
    """The lines `coz run` prints after the program: warnings, then one summary
    line (or one line saying why there is none). Never raises. `wall_s`: how
    long the program ran (seconds), for the rate of usable experiments;
    `killed_by`: the signal that ended it, if one did."""
    try:
        main = outputs.main_path(root_pid)
        if is_stream(main):
            if exit_status == START_FAILED_STATUS:
                return []  # the runtime refused to start and said why
            return [PREFIX + f"no summary: {main} is not a regular file, so what this run wrote "
                             "there cannot be read back"]
        written = outputs.written(root_pid)
        if not written and exit_status == START_FAILED_STATUS:
            return []  # the runtime refused to start and said why
        if not written:
            room = room_under_size_limit(main)
            if room is not None:
                return [PREFIX + f"no profile was written to {main}: the file size limit (ulimit -f) "
                                 f"leaves it room for {room} more bytes"]
            return [PREFIX + f"no profile was written to {main} "
                             "(the program ended before the profiler started, or never loaded it)"]
        recovered = [path for path, _ in written if take_checkpoint(path)]
        runs = []
        for path, offset in written:
            runs.extend(load_tail(path, offset))
    except CozError as e:
        return [PREFIX + f"cannot read the profile this run wrote: {e}"]
    except OSError as e:
        return [PREFIX + f"cannot read the profile this run wrote: {e.filename}: {e.strerror}"]
    notes = [PREFIX + f"the run ended before writing its final totals; {path} has those of "
                      "its last checkpoint" for path in recovered]
    notes += children_notes(runs)
    return (warning_lines(runs) + abrupt_lines(runs, root_pid, killed_by, exit_status) + notes
            + [summary_line(summarize(runs, wall_s), [p for p, _ in written], outputs)])


def room_under_size_limit(path):
    """How many bytes the file size limit this process runs under (`ulimit -f`,
    which the program inherited) lets the file `path` grow by; None without a
    limit. The runtime writes no record that does not fit whole."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return None
    try:
        return max(0, limit - os.stat(path).st_size)
    except OSError:
        return limit


def take_checkpoint(path):
    """Appends to the profile `path` the checkpoint a killed run left beside it
    (`<path>.checkpoint`: one `totals` record, docs/profile-format.md), then
    removes it. True when there was one."""
    ckpt = path + ".checkpoint"
    try:
        with open(ckpt, "rb") as f:
            data = f.read()
    except OSError:
        return False
    if not data.endswith(b"\n") or not data.startswith(b'{"type":"totals"'):
        return False  # not one of ours, or cut short: left alone
    room = room_under_size_limit(path)
    if room is not None and room < len(data):
        return False  # it would be cut at the file size limit, as the runtime's records never are: left alone
    with open(path, "ab") as f:
        f.write(data)
    os.unlink(ckpt)
    return True


def print_report(outputs, root_pid, file=None, exit_status=None, wall_s=None, killed_by=None):
    """Print `report` to standard error. Nothing here may change the exit status
    of `coz run`: an unexpected failure costs the summary, one line says so."""
    file = sys.stderr if file is None else file
    if file is None:
        return  # started with standard error closed: nowhere to say it
    try:
        lines = report(outputs, root_pid, exit_status, wall_s, killed_by)
    except Exception as e:  # noqa: BLE001 - a bug must not take the program's status
        lines = [PREFIX + f"cannot summarize this run ({type(e).__name__}: {e})"]
    try:
        for line in lines:
            print(line, file=file)
        file.flush()
    except (OSError, ValueError):
        pass  # standard error is closed or a broken pipe: nothing to tell
