"""Units of virtual speedup as the analysis sees them: which samples of a run
count for a line, a function or a call site (on and off the CPU), which lines
lie in a function and which call sites call it.

Sources, all of one run (`docs/profile-format.md`):

* CPU samples: `samples` records, per line (`counts`), per function
  (`functions`) and per call site (`callsites`);
* blocked samples: `samples` records' `blocked`, per wait category and line
  (the wait's call site, its first in-scope frame);
* the conventional profile (`locations`, `stacks`, `stack_counts`): every
  frame of every distinct stack, inlined frames included. It tells which
  function a line lies in (the frame's function), which functions a call
  site calls (the function of the frame just inside it), and, for call
  sites, the blocked samples whose callchain passes through the line.

`docs/analysis.md` (sections 3 and 6) states the rules.
"""

from . import profile as profile_mod
from .conventional import RunStacks

LINE, FUNCTION, CALLSITE = profile_mod.LINE, profile_mod.FUNCTION, profile_mod.CALLSITE
WAIT_KINDS = profile_mod.WAIT_KINDS
CPU = "cpu"

# Letters of --blocked-scope (the startup record's `blocked_scope`).
SCOPE_LETTERS = {"i": "io", "l": "lock", "s": "sleep", "b": "sync", "y": "sync"}  # y: earlier spelling of b
DEFAULT_SAMPLE_PERIOD_NS = 1000000


def blocked_scope(run):
    """The wait categories the run's experiments could speed up (a set)."""
    letters = run.startup.get("blocked_scope")
    if not isinstance(letters, str):
        return frozenset()
    return frozenset(SCOPE_LETTERS[c] for c in letters if c in SCOPE_LETTERS)


def sample_period_ns(run):
    v = run.startup.get("sample_period_ns")
    return v if isinstance(v, int) and v > 0 else DEFAULT_SAMPLE_PERIOD_NS


def split_function_name(name):
    """'name [path]' -> ('name', 'path'); 'name' -> ('name', None)."""
    if name.endswith("]"):
        at = name.rfind(" [")
        if at > 0:
            return name[:at], name[at + 2:-1]
    return name, None


class _RunIndex:
    """What one run's stacks say about its lines, functions and call sites.

    Each part is computed on first use, from the location ids of the stacks
    (a profile of 100,000 stacks has a few thousand locations): asking which
    function a line lies in costs one pass over the stacks' ids."""

    def __init__(self, run):
        self.run = run
        self._line_functions = None
        self._callees = None
        self._blocked_stacks = None
        self._frames = RunStacks(run)

    def _weights(self):
        """Samples per stack id (0 for stacks without counts)."""
        return {sid: n for sid, (n, _ns) in self.run.stack_counts.items()}

    def _location_lines(self, lid):
        """("path:line" or None, (function, file)) of each frame of a location, innermost first."""
        out = []
        for fr in self._frames.location_frames(lid):
            key = f"{fr.file}:{fr.line}" if fr.file is not None and fr.line > 0 else None
            out.append((key, (fr.name, fr.file)))
        return out

    @property
    def line_functions(self):
        """"path:line" -> {(function, file): samples}: the functions a line lies in."""
        if self._line_functions is None:
            weights = self._weights()
            per_location = {}
            for sid, st in self.run.stacks.items():
                n = weights.get(sid, 0)
                for lid in st.locations:
                    per_location[lid] = per_location.get(lid, 0) + n
            out = {}
            for lid, n in per_location.items():
                for key, fn in self._location_lines(lid):
                    if key is not None:
                        _add(out.setdefault(key, {}), fn, n)
            self._line_functions = out
        return self._line_functions

    @property
    def callees(self):
        """call site "path:line" -> {(function, file): samples}: the function of
        the frame just inside the call site's frame, in every stack."""
        if self._callees is None:
            weights = self._weights()
            pairs = {}
            for sid, st in self.run.stacks.items():
                n = weights.get(sid, 0)
                ids = st.locations
                if profile_mod.kernel_call_kind(self.run, st):
                    ids = ids[1:]  # the kernel's work in a call: the call site calls no function of ours
                for k in range(len(ids)):
                    key = (ids[k - 1] if k else None, ids[k])
                    pairs[key] = pairs.get(key, 0) + n
            out = {}
            for (inner_lid, lid), n in pairs.items():
                frames = self._location_lines(lid)
                inner = self._location_lines(inner_lid)[-1][1] if inner_lid is not None else None
                for i, (key, fn) in enumerate(frames):
                    callee = frames[i - 1][1] if i else inner
                    if key is not None and callee is not None and (i or inner_lid is not None):
                        _add(out.setdefault(key, {}), callee, n)
            self._callees = out
        return self._callees

    @property
    def blocked_stacks(self):
        """[(kind, frozenset of the "path:line" of its frames, samples)] of the
        blocked stacks with samples. A wait's time on the CPU (the kernel's work
        for the call: a "cpu" stack under coz_kernel_in_io and the like) counts
        in its category, as the call's `blocked` counts per line do: a unit's
        waits are the time inside its calls."""
        if self._blocked_stacks is None:
            weights = self._weights()
            out = []
            for sid, st in self.run.stacks.items():
                n = weights.get(sid, 0)
                kind = profile_mod.kernel_call_kind(self.run, st) if st.kind == CPU else st.kind
                if kind is None or n <= 0:
                    continue
                keys = frozenset(key for lid in st.locations for key, _ in self._location_lines(lid)
                                 if key is not None)
                out.append((kind, keys, n))
            self._blocked_stacks = out
        return self._blocked_stacks

    def function_of(self, line):
        """(function, file) the line lies in, or None: the most sampled one."""
        fns = self.line_functions.get(line)
        if not fns:
            return None
        return max(fns.items(), key=lambda kv: (kv[1], kv[0][0], kv[0][1] or ""))[0]


def _blocked_total(per_kind, scope):
    return sum(sum(c.values()) for k, c in per_kind.items() if k in scope)


def _add(counter, key, n):
    counter[key] = counter.get(key, 0) + n


class UnitIndex:
    """Samples per unit over the runs of a profile, and the nesting of units.

    Built lazily: a profile without stacks or units costs nothing more than
    before."""

    def __init__(self, profile):
        self.profile = profile
        self._runs = {}
        self._function_names = None

    def _run(self, run):
        idx = self._runs.get(id(run))
        if idx is None:
            idx = self._runs[id(run)] = _RunIndex(run)
        return idx

    # -- samples of a unit ---------------------------------------------------

    def cpu_samples(self, run, unit, name):
        """CPU samples of the unit in the run (its `samples` records); `run` may
        also be a run's `plain` counts, which have the same shape."""
        if unit == LINE:
            return run.samples.get(name, 0)
        return run.unit_samples.get(unit, {}).get(name, 0)

    def blocked_samples(self, run, unit, name, per_kind=None):
        """{wait kind: blocked samples} of the unit in the run.

        line: the `blocked` counts of the line (the wait's call site);
        function: those of the lines that lie in the function;
        call site: blocked samples whose callchain has a frame in the line
        (from the stacks; each sample once). `per_kind`: the `blocked` counts
        to read instead of the run's (lines and functions; its plain ones)."""
        out = {}
        blocked = run.blocked if per_kind is None else per_kind
        if unit == LINE:
            for kind, per_line in blocked.items():
                n = per_line.get(name, 0)
                if n:
                    out[kind] = n
        elif unit == FUNCTION:
            if not blocked:
                return out
            idx = self._run(run)
            for kind, per_line in blocked.items():
                for line, n in per_line.items():
                    fn = idx.function_of(line)
                    if fn is not None and n and self.matches(name, fn):
                        out[kind] = out.get(kind, 0) + n
        elif unit == CALLSITE:
            for kind, keys, n in self._run(run).blocked_stacks:
                if name in keys:
                    out[kind] = out.get(kind, 0) + n
        return out

    def phase_samples(self, run, unit, name, plain=False):
        """s of the phase correction: CPU samples plus the blocked samples of the
        categories the run's experiments speed up (`blocked_scope`). `plain`:
        over the run's plain intervals only (Run.plain). A call site's blocked
        samples come from the stacks, which carry no time: there the plain
        intervals' share of the run's blocked samples in scope stands for
        theirs."""
        counts = run.plain if plain else run
        n = self.cpu_samples(counts, unit, name)
        scope = blocked_scope(run)
        if not scope:
            return n
        if plain and unit == CALLSITE:
            whole = sum(c for k, c in self.blocked_samples(run, unit, name).items() if k in scope)
            if whole:
                n += whole * _blocked_total(run.plain.blocked, scope) / max(_blocked_total(run.blocked, scope), 1)
            return n
        blocked = self.blocked_samples(run, unit, name, counts.blocked)
        return n + sum(c for k, c in blocked.items() if k in scope)

    def mix(self, unit, name):
        """(CPU samples, {wait kind: blocked samples}) of the unit over every run."""
        cpu, off = 0, {}
        for run in self.profile.runs:
            cpu += self.cpu_samples(run, unit, name)
            for k, n in self.blocked_samples(run, unit, name).items():
                off[k] = off.get(k, 0) + n
        return cpu, off

    # -- nesting ---------------------------------------------------------------

    def function_names(self):
        """Names of function units anywhere in the profile (samples or experiments)."""
        if self._function_names is None:
            names = set()
            for run in self.profile.runs:
                names.update(run.unit_samples.get(FUNCTION, {}))
                names.update(e.selected for e in run.experiments if e.unit == FUNCTION)
            self._function_names = names
        return self._function_names

    @staticmethod
    def matches(unit_name, fn):
        """Does the function unit `unit_name` ('name' or 'name [path]') name the
        frame function `fn` = (function, file)?"""
        base, path = split_function_name(unit_name)
        if fn[0] != base:
            return False
        return path is None or fn[1] == path

    def unit_name(self, fn):
        """The function unit's name for frame function `fn`: the name experiments
        give it (`name [path]` when ambiguous), else its bare name."""
        name, file = fn
        if name in self.function_names():
            return name
        qualified = f"{name} [{file}]"
        if file is not None and qualified in self.function_names():
            return qualified
        return name

    def function_of(self, line):
        """The function (unit name) the line lies in, from the stacks of the runs
        that sampled it; None when no stack shows it."""
        best, weight = None, -1
        for run in self.profile.runs:
            fns = self._run(run).line_functions.get(line)
            for fn, w in (fns or {}).items():
                if w > weight:
                    best, weight = fn, w
        return None if best is None else self.unit_name(best)

    def callees(self, callsite):
        """Functions (unit names) the call site calls, most sampled first."""
        total = {}
        for run in self.profile.runs:
            for fn, w in self._run(run).callees.get(callsite, {}).items():
                name = self.unit_name(fn)
                total[name] = total.get(name, 0) + w
        return [n for n, _ in sorted(total.items(), key=lambda kv: (-kv[1], kv[0]))]

    def function_lines(self, name):
        """(file, lowest line) of the lines the stacks place in function `name`,
        the file with most samples; (None, 0) when none."""
        per_file = {}
        for run in self.profile.runs:
            for line, fns in self._run(run).line_functions.items():
                for fn, w in fns.items():
                    if self.matches(name, fn):
                        path, _, n = line.rpartition(":")
                        entry = per_file.setdefault(path, [0, None])
                        entry[0] += w
                        if n.isdigit() and (entry[1] is None or int(n) < entry[1]):
                            entry[1] = int(n)
        if not per_file:
            return None, 0
        path, (_, low) = max(per_file.items(), key=lambda kv: (kv[1][0], kv[0]))
        return path, low or 0
