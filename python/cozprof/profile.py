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
"""

import json
import os

from .errors import CozError

FORMAT_VERSION = 1

# Progress entry kinds.
THROUGHPUT = "throughput"
LATENCY = "latency"


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
                 "selected_samples", "partial", "progress", "run")

    def __init__(self, selected, speedup, duration_ns, selected_samples=0, partial=False,
                 wall_ns=None, delay_ns=None, progress=None, run=None):
        self.selected = selected
        self.speedup = speedup
        self.duration_ns = duration_ns
        self.wall_ns = wall_ns
        self.delay_ns = delay_ns
        self.selected_samples = selected_samples
        self.partial = partial
        self.progress = progress if progress is not None else []
        self.run = run

    def __repr__(self):
        return (f"Experiment({self.selected!r}, speedup={self.speedup}, "
                f"duration_ns={self.duration_ns}, progress={self.progress!r})")


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

    @property
    def mode(self):
        return self.startup.get("mode") or "causal"

    @property
    def fixed_speedup(self):
        return self.startup.get("fixed_speedup")

    @property
    def end_to_end(self):
        return self.mode == "end-to-end"

    def __repr__(self):
        return f"Run({self.path!r}#{self.index}, {self.dialect}, {len(self.experiments)} experiments)"


class Profile:
    """Every run of every file given to `load`, in order."""

    def __init__(self, paths):
        self.paths = list(paths)
        self.runs = []
        self.warnings = []            # parser warnings: plain sentences

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
        """Totals of the shutdown records (runs without one count as abrupt)."""
        stats = {"runs": len(self.runs), "abrupt_runs": 0, "samples": 0,
                 "lost_records": 0, "dropped_samples": 0, "experiments": 0}
        for r in self.runs:
            if r.shutdown is None:
                stats["abrupt_runs"] += 1
                continue
            for key in ("samples", "lost_records", "dropped_samples", "experiments"):
                v = r.shutdown.get(key)
                if isinstance(v, int):
                    stats[key] += v
        return stats

    def runtime_warnings(self):
        """Distinct warning messages written by the runtime, in order of appearance."""
        seen = []
        for r in self.runs:
            for _code, message in r.warnings:
                if message not in seen:
                    seen.append(message)
        return seen


class _Malformed(Exception):
    pass


def load(paths):
    """Parse one or more profile files (a path or a list of paths) into a Profile.

    Raises CozError for a missing/unreadable file or a malformed line (other than a
    cut-short last line, which is dropped with a warning).
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    profile = Profile([os.fspath(p) for p in paths])
    for path in profile.paths:
        _load_file(profile, path)
    return profile


def _load_file(profile, path):
    try:
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
    except UnicodeDecodeError as e:
        lineno = data.count(b"\n", 0, e.start) + 1
        last_start = data.rfind(b"\n") + 1
        if data.endswith(b"\n") or e.start < last_start:
            raise CozError(f"{path}:{lineno}: not UTF-8 text; is this a profile?",
                           hint="profiles are written by 'coz run'") from None
        # A cut inside a multibyte character of the last line.
        text = data[:last_start].decode("utf-8", errors="replace")
        profile.warnings.append(f"{path}:{lineno}: last line is cut short (ignored)")
    _Parser(profile, path).feed(text)


class _Parser:
    def __init__(self, profile, path):
        self.profile = profile
        self.path = path
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

    # -- lines -----------------------------------------------------------

    def feed(self, text):
        lines = text.split("\n")
        last = len(lines) - 1
        cut = bool(lines[last])  # no final newline: the last line may be cut short
        jloads = json.loads
        on_json = self._json_record
        on_tsv = self._legacy_record
        for i, line in enumerate(lines):
            if not line or line.isspace():
                continue
            try:
                if line[0] == "{":
                    try:
                        rec = jloads(line)
                    except ValueError:
                        raise _Malformed("not valid JSON") from None
                    if type(rec) is not dict:
                        raise _Malformed("a record must be a JSON object")
                    on_json(rec)
                else:
                    on_tsv(line)
            except _Malformed as e:
                if i == last and cut:
                    self.profile.warnings.append(
                        f"{self.path}:{i + 1}: last line is cut short (ignored)")
                    continue
                raise CozError(f"{self.path}:{i + 1}: malformed record: {e}",
                               hint="profiles are written by 'coz run'; was this file edited or "
                                    "written by something else?") from None
            except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as e:
                if i == last and cut:
                    self.profile.warnings.append(
                        f"{self.path}:{i + 1}: last line is cut short (ignored)")
                    continue
                detail = f"missing field {e}" if isinstance(e, KeyError) else "bad field value"
                raise CozError(f"{self.path}:{i + 1}: malformed record: {detail}",
                               hint="profiles are written by 'coz run'; was this file edited or "
                                    "written by something else?") from None
        self._finish_run()
        if self.nruns == 0:
            self.profile.warnings.append(f"{self.path}: empty profile (no runs)")

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
                run = self._current("json")
                samples = run.samples
                for line, n in rec["counts"].items():
                    if type(n) is not int:
                        raise _Malformed("sample counts must be integers")
                    samples[line] = samples.get(line, 0) + n
                oos = rec.get("out_of_scope", 0)
                run.out_of_scope += _int(oos)
            else:
                self._cumulative_samples(rec["location"], _int(rec["count"]))
        elif t == "runtime":
            run = self._current("json")
            v = rec["time_ns"] if "time_ns" in rec else rec["time"]
            v = _int(v)
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
        elif t == "warning":
            self._current("json").warnings.append((str(rec.get("code", "")),
                                                   _str(rec["message"])))
        elif isinstance(t, str):
            raise _Malformed(f"unknown record type {t!r}")
        else:
            raise _Malformed("no \"type\" field")

    def _json_experiment(self, rec):
        run = self._current("json")
        progress = []
        for p in rec["progress"]:
            kind = p["kind"]
            if kind == THROUGHPUT:
                progress.append(Progress(_str(p["name"]), THROUGHPUT, delta=_int(p["delta"])))
            elif kind == LATENCY:
                progress.append(Progress(_str(p["name"]), LATENCY, arrivals=_int(p["arrivals"]),
                                         departures=_int(p["departures"]),
                                         difference=_int(p["difference"])))
            else:
                raise _Malformed(f"unknown progress kind {kind!r}")
        e = Experiment(_str(rec["selected"]), _speedup(rec["speedup"]), _int(rec["duration_ns"]),
                       selected_samples=_int(rec.get("selected_samples", 0)),
                       partial=bool(rec.get("partial", False)),
                       wall_ns=rec.get("wall_ns"), delay_ns=rec.get("delay_ns"),
                       progress=progress, run=run)
        run.experiments.append(e)
        self.last_experiment = None

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
                raise _Malformed(f"field without '=' in {t!r} record")
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
        else:
            shown = t if len(t) <= 40 else t[:40] + "..."
            raise _Malformed(f"unknown record type {shown!r}")


def _upstream_duration(v):
    """Upstream computes `wall - delay` in unsigned arithmetic: a delay longer than the
    experiment wraps around to nearly 2**64. Give such values back their sign; the
    analysis leaves experiments without a positive duration out."""
    return v - (1 << 64) if v >= (1 << 63) else v


def _int(v):
    if type(v) is not int or v < 0:
        raise _Malformed("expected a non-negative integer")
    return v


def _str(v):
    if type(v) is not str:
        raise _Malformed("expected a string")
    return v


def _speedup(v):
    if type(v) not in (int, float) or not (0.0 <= v <= 1.0):
        raise _Malformed("speedup must be a number from 0 to 1")
    # Written with two decimals; round so 0.15 from two writers compares equal.
    return round(float(v), 2)
