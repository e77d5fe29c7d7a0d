"""The conventional profile: where the time went, per function and per line.

Reads the `locations`, `stacks` and `stack_counts` records that the parser
(`profile.py`) gathers into each `Run`, and aggregates them the way pprof does:

* a sample's **frames** are its locations' source lines, innermost first; a
  location where functions were inlined gives one frame per inlined function
  (`Location.lines`, innermost first), so inlined functions count as callers
  and callees like any other;
* **flat** counts the samples whose innermost frame is in the function (or
  the line);
* **cum** counts the samples with the function (or the line) anywhere in the
  stack, once per sample even when recursion puts it there several times.

Each stack carries a `kind`: `"cpu"` for samples taken on the CPU, or the
wait category of a blocked sample (`io`, `lock`, `sleep`, `sync`, `sched`,
`other`). Views select kinds (`parse_kinds`); CPU alone by default.

A stack count has two values: samples, and the time they stand for (CPU time
for `cpu`, waiting time for the others). Views show either (`value`).

`flame_tree(profile)` builds the call tree a flame graph draws; its JSON shape
is documented on the function. `coz report --top/--list` (report.py) and
`coz export` (export.py) read everything through this module.
"""

import os
import re

from .errors import CozError
from .profile import KILLED, WAIT_KINDS

CPU = "cpu"
KINDS = (CPU,) + WAIT_KINDS
DEFAULT_KINDS = frozenset((CPU,))
VALUES = ("time", "samples")
BY = ("function", "line")

UNKNOWN = "[unknown]"   # a location id with no `locations` record (its record was lost)


def parse_kinds(text):
    """`--kind` text -> a frozenset of kinds: `cpu`, `off` (every wait kind),
    `all`, or a comma-separated list of kinds (`cpu,io,lock`)."""
    kinds = set()
    for word in (w.strip() for w in text.split(",")):
        if word == "all":
            kinds.update(KINDS)
        elif word in ("off", "off-cpu"):
            kinds.update(WAIT_KINDS)
        elif word in KINDS:
            kinds.add(word)
        else:
            raise CozError(f"unknown sample kind {word!r} in --kind {text!r}",
                           hint="kinds are cpu, io, lock, sleep, sync, sched, other, "
                                "'off' (every wait kind) and 'all', separated by commas")
    return frozenset(kinds)


def describe_kinds(kinds):
    if kinds == frozenset(KINDS):
        return "all"
    if kinds == frozenset(WAIT_KINDS):
        return "off-CPU"
    return ",".join(k for k in KINDS if k in kinds)


# -- frames -------------------------------------------------------------------

class Frame:
    """One frame of a stack: a function (or an inlined function) at a line.

    `function` is the function's key, `(name, file)`; `line` the line's key,
    `(file, line)`, or `(None, name)` where there is no line information."""

    __slots__ = ("name", "file", "line", "object", "inlined", "function", "line_key")

    def __init__(self, name, file, line, object, inlined):
        self.name = name          # function name (the symbol, or object+offset without one)
        self.file = file          # source file, or None
        self.line = line          # line number, 0 when unknown
        self.object = object      # path of the ELF object
        self.inlined = inlined    # True for a function inlined into the next frame
        self.function = (name, file)
        self.line_key = (file, line) if file is not None else (None, name)


def _location_frames(loc):
    """A Location's frames, innermost first."""
    if not loc.lines:
        return (Frame(_address_name(loc), None, 0, loc.object, False),)
    frames = []
    last = len(loc.lines) - 1
    for i, (function, file, line) in enumerate(loc.lines):
        name = function if function else _address_name(loc)
        frames.append(Frame(name, file, line, loc.object, i < last))
    return tuple(frames)


def _address_name(loc):
    """A frame without a symbol: object+offset, or the bare address when the
    address is in no known object."""
    if not loc.object:
        return f"0x{loc.address:x}"
    return f"{os.path.basename(loc.object) or loc.object}+0x{loc.object_offset:x}"


_UNKNOWN_FRAME = (Frame(UNKNOWN, None, 0, "", False),)


class RunStacks:
    """The stacks of one run with their frames (innermost first) and counts."""

    def __init__(self, run):
        self.run = run
        self._frames = {}

    def location_frames(self, lid):
        f = self._frames.get(lid)
        if f is None:
            loc = self.run.locations.get(lid)
            f = _location_frames(loc) if loc is not None else _UNKNOWN_FRAME
            self._frames[lid] = f
        return f

    def frames(self, stack):
        """Every frame of `stack`, innermost first."""
        out = []
        for lid in stack.locations:
            out.extend(self.location_frames(lid))
        return out

    def counted(self, kinds):
        """(stack, samples, time_ns) of every counted stack of the kinds asked."""
        stacks = self.run.stacks
        for sid, (n, ns) in self.run.stack_counts.items():
            st = stacks.get(sid)
            if st is None or st.kind not in kinds or (n == 0 and ns == 0):
                continue
            yield st, n, ns


def has_stacks(profile):
    return any(r.stack_counts for r in profile.runs)


def require_stacks(profile):
    """Raise the error the conventional views give for a profile without stacks."""
    if not has_stacks(profile):
        if profile.runs and all(r.mode == "locks-only" for r in profile.runs):
            raise CozError("the profile has no stacks: --locks-only runs take no samples",
                           hint="run with --sampling-only (or without either) for the "
                                "conventional profile; 'coz locks' reads this one")
        if profile.runs and all(r.dialect == "json" and not r.samples and not r.blocked for r in profile.runs):
            daemon = any((r.shutdown or {}).get("reason") == "daemon" for r in profile.runs)
            raise CozError("the profile has no stacks: its runs took no sample",
                           hint="the program became a daemon before working: --follow-children "
                                "profiles the daemon in its own file" if daemon else
                                "the program ended before its first sample, or its work ran in "
                                "child processes (--follow-children profiles each in its own file)")
        if profile.lacks_final_records():
            raise CozError("the profile has no stacks: its runs wrote none yet",
                           hint="a run writes its stacks about a second after its start, then "
                                "every tenth of its time, and at its end: this one still runs, or "
                                f"ended without its final records ({KILLED})")
        raise CozError("the profile has no stacks: it holds no conventional profile",
                       hint="stacks are written by this project's runtime since format 1 "
                            "(coz run); upstream COZ's profiles and older ones have only "
                            "per-line samples (coz report shows their causal results)")


def kind_totals(profile):
    """{kind: [samples, time_ns]} over every run, for the header of the views."""
    totals = {}
    for r in profile.runs:
        for sid, (n, ns) in r.stack_counts.items():
            st = r.stacks.get(sid)
            if st is None:
                continue
            t = totals.setdefault(st.kind, [0, 0])
            t[0] += n
            t[1] += ns
    return totals


# -- flat and cumulative --------------------------------------------------------

class Row:
    """One function or line of a flat/cum table."""

    __slots__ = ("key", "name", "file", "line", "function", "flat", "flat_ns", "cum", "cum_ns")

    def __init__(self, key, name, file, line, function):
        self.key = key
        self.name = name          # what the table shows
        self.file = file
        self.line = line          # line number (line rows), None for function rows
        self.function = function  # the function's name (line rows: of the innermost frame there)
        self.flat = self.flat_ns = self.cum = self.cum_ns = 0

    def value(self, which, value):
        if value == "samples":
            return self.flat if which == "flat" else self.cum
        return self.flat_ns if which == "flat" else self.cum_ns

    def as_dict(self):
        return {"name": self.name, "function": self.function, "file": self.file,
                "line": self.line, "flat": self.flat, "flat_ns": self.flat_ns,
                "cum": self.cum, "cum_ns": self.cum_ns}


class Table:
    """Flat and cumulative counts per function or per line."""

    def __init__(self, by, kinds):
        self.by = by
        self.kinds = kinds
        self.rows = {}
        self.total = 0           # samples of the kinds selected
        self.total_ns = 0

    def sorted(self, sort="flat", value="time"):
        """Rows by decreasing flat (or cum) value, then by the other, then name."""
        other = "cum" if sort == "flat" else "flat"
        return sorted(self.rows.values(),
                      key=lambda r: (-r.value(sort, value), -r.value(other, value), r.name))


def aggregate(profile, by="function", kinds=DEFAULT_KINDS):
    """Flat and cum counts per function (`by="function"`) or per source line
    (`by="line"`), over the stacks of the `kinds` asked, in every run."""
    if by not in BY:
        raise ValueError(by)
    table = Table(by, kinds)
    rows = table.rows
    line_view = by == "line"
    for run in profile.runs:
        rs = RunStacks(run)
        for st, n, ns in rs.counted(kinds):
            table.total += n
            table.total_ns += ns
            seen = set()
            first = True
            for lid in st.locations:
                for fr in rs.location_frames(lid):
                    key = fr.line_key if line_view else fr.function
                    if first:
                        row = rows.get(key)
                        if row is None:
                            row = rows[key] = _new_row(key, fr, line_view)
                        row.flat += n
                        row.flat_ns += ns
                        first = False
                    if key in seen:
                        continue
                    seen.add(key)
                    row = rows.get(key)
                    if row is None:
                        row = rows[key] = _new_row(key, fr, line_view)
                    row.cum += n
                    row.cum_ns += ns
    _disambiguate(table)
    return table


def _new_row(key, fr, line_view):
    if line_view:
        name = f"{fr.file}:{fr.line}" if fr.file is not None else fr.name
        return Row(key, name, fr.file, fr.line if fr.file is not None else None, fr.name)
    return Row(key, fr.name, fr.file, None, fr.name)


def _disambiguate(table):
    """Functions of the same name in different files: `name [file]`, as the
    runtime names function units."""
    if table.by != "function":
        return
    count = {}
    for row in table.rows.values():
        count[row.name] = count.get(row.name, 0) + 1
    for row in table.rows.values():
        if count[row.name] > 1 and row.file is not None:
            row.name = f"{row.name} [{row.file}]"


# -- per-line counts inside functions (coz report --list) -----------------------------

class Routine:
    """A function's lines with flat and cum counts, for `--list`."""

    def __init__(self, name, file):
        self.name = name
        self.file = file
        self.lines = {}          # line number -> [flat, flat_ns, cum, cum_ns]
        self.flat = self.flat_ns = self.cum = self.cum_ns = 0


def routines(profile, pattern, kinds=DEFAULT_KINDS):
    """Functions whose name matches the regular expression `pattern` (searched
    anywhere in the name), each with per-line flat and cum counts: a line's
    flat counts the samples whose innermost frame is that line of that
    function; its cum the samples with a frame of the function at that line
    anywhere in the stack (once per sample). Returns (routines ordered by
    decreasing cum, total samples, total time_ns) of the kinds asked."""
    try:
        rx = re.compile(pattern)
    except re.error as e:
        raise CozError(f"--list {pattern!r} is not a regular expression: {e}",
                       hint="quote the pattern in the shell, e.g. --list 'work|main'") from None
    found = {}
    match = {}
    total = total_ns = 0
    for run in profile.runs:
        rs = RunStacks(run)
        for st, n, ns in rs.counted(kinds):
            total += n
            total_ns += ns
            seen_lines = set()
            seen_funcs = set()
            first = True
            for lid in st.locations:
                for fr in rs.location_frames(lid):
                    fkey = fr.function
                    ok = match.get(fkey)
                    if ok is None:
                        ok = match[fkey] = rx.search(fr.name) is not None
                    if not ok:
                        first = False
                        continue
                    r = found.get(fkey)
                    if r is None:
                        r = found[fkey] = Routine(fr.name, fr.file)
                    c = r.lines.get(fr.line)
                    if c is None:
                        c = r.lines[fr.line] = [0, 0, 0, 0]
                    if first:
                        c[0] += n
                        c[1] += ns
                        r.flat += n
                        r.flat_ns += ns
                        first = False
                    if (fkey, fr.line) not in seen_lines:
                        seen_lines.add((fkey, fr.line))
                        c[2] += n
                        c[3] += ns
                    if fkey not in seen_funcs:
                        seen_funcs.add(fkey)
                        r.cum += n
                        r.cum_ns += ns
    out = sorted(found.values(), key=lambda r: (-r.cum_ns, -r.cum, r.name, r.file or ""))
    return out, total, total_ns


# -- stacks for the exporters and the flame graph -----------------------------------

def folded_stacks(profile, kinds=DEFAULT_KINDS):
    """Distinct stacks by function, root first, merged over runs: yields
    (names root first, stack, run, samples, time_ns) for every counted stack.
    Two stacks of different threads stay apart (the caller merges what it wants)."""
    for run in profile.runs:
        rs = RunStacks(run)
        for st, n, ns in rs.counted(kinds):
            names = [fr.name for fr in reversed(rs.frames(st))]
            yield names, st, run, n, ns


def flame_tree(profile, kinds=DEFAULT_KINDS, by_thread=False):
    """The call tree a flame graph draws, as plain JSON-ready dicts.

    Shape (every node):

        {"name": str,          # function name; the root is "all", thread nodes
                               # "thread NAME (tid N, group G)", wait nodes "[wait: KIND]"
         "file": str or null,  # source file of the function, when known
         "samples": int,       # samples of this node and everything above it
         "time_ns": int,       # the time those samples stand for
         "self_samples": int,  # samples whose innermost frame is this node
         "self_time_ns": int,
         "children": [node, ...]}   # callees, by decreasing time_ns then name

    Frames go from the root (the outermost caller) to the leaf; inlined
    functions are frames of their own. With `by_thread`, the root's children
    are one node per thread (file null). When `kinds` holds wait kinds, a
    blocked sample ends in a `[wait: KIND]` leaf, so that waiting time stands
    apart from the calls that waited."""
    root = _node("all", None)
    with_waits = any(k != CPU for k in kinds)
    for run in profile.runs:
        rs = RunStacks(run)
        for st, n, ns in rs.counted(kinds):
            node = root
            node["samples"] += n
            node["time_ns"] += ns
            path = [(fr.name, fr.file) for fr in reversed(rs.frames(st))]
            if with_waits and st.kind != CPU:
                path.append((f"[wait: {st.kind}]", None))
            if by_thread:
                path.insert(0, (f"thread {st.thread} (tid {st.tid}, group {st.group})", None))
            for name, file in path:
                kids = node["_index"]
                child = kids.get((name, file))
                if child is None:
                    child = kids[(name, file)] = _node(name, file)
                    node["children"].append(child)
                node = child
                node["samples"] += n
                node["time_ns"] += ns
            node["self_samples"] += n
            node["self_time_ns"] += ns
    _finish(root)
    return root


def _node(name, file):
    return {"name": name, "file": file, "samples": 0, "time_ns": 0, "self_samples": 0,
            "self_time_ns": 0, "children": [], "_index": {}}


def _finish(root):
    todo = [root]
    while todo:
        node = todo.pop()
        del node["_index"]
        node["children"].sort(key=lambda c: (-c["time_ns"], -c["samples"], c["name"]))
        todo.extend(node["children"])


# -- formatting ---------------------------------------------------------------------

def format_time(ns):
    """pprof-like: 0, 850us, 12.5ms, 1.25s."""
    if ns == 0:
        return "0"
    if ns >= 1_000_000_000:
        return _trim(ns / 1e9, "s")
    if ns >= 1_000_000:
        return _trim(ns / 1e6, "ms")
    if ns >= 1_000:
        return _trim(ns / 1e3, "us")
    return f"{ns}ns"


def _trim(v, unit):
    text = f"{v:.3g}" if v < 100 else f"{v:.0f}"
    if "e" in text:
        text = f"{v:.0f}"
    return text + unit


def format_value(v, value):
    return format_time(v) if value == "time" else str(v)


def pct(part, whole):
    return 100.0 * part / whole if whole else 0.0
