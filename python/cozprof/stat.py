"""A `perf stat`-style summary of each run, from its `counters` record.

The runtime counts with software counters that work at
`perf_event_paranoid` 2 (task clock, user and system time, context switches,
page faults, migrations when the kernel tells) and adds hardware counters
when the machine allows them; when it does not, the record says why in one
sentence (`hardware_unavailable`), and so does this summary.
"""

from .errors import CozError

# Hardware counter names as the runtime writes them, in the order perf stat shows them.
HARDWARE_ORDER = ("cycles", "instructions", "branches", "branch-misses", "cache-references",
                  "cache-misses", "stalled-cycles-frontend", "stalled-cycles-backend")


def require_counters(profile):
    if not any(r.counters for r in profile.runs):
        raise CozError("the profile has no counters record",
                       hint="counters are written by this project's runtime when a run ends "
                            "normally (a run killed with SIGKILL has none); upstream COZ's "
                            "profiles have none")


def run_stat(run):
    """The figures of one run's counters record, as a JSON-ready dict (None
    when the run has no counters record): the record's fields, plus derived
    `cpus_utilized` (task clock / wall time) and per-second rates."""
    c = run.counters
    if not c:
        return None
    wall = _num(c.get("wall_ns"))
    task = _num(c.get("task_clock_ns"))
    cs = c.get("context_switches") or {}
    pf = c.get("page_faults") or {}
    vol, invol = _num(cs.get("voluntary")), _num(cs.get("involuntary"))
    minor, major = _num(pf.get("minor")), _num(pf.get("major"))
    hw = c.get("hardware") if isinstance(c.get("hardware"), dict) else None
    secs = task / 1e9 if task else 0.0
    out = {
        "pid": run.startup.get("pid"),
        "program": run.startup.get("argv0"),
        "wall_ns": wall,
        "task_clock_ns": task,
        "user_ns": _num(c.get("user_ns")),
        "system_ns": _num(c.get("system_ns")),
        "cpus_utilized": task / wall if wall else None,
        "context_switches": {"voluntary": vol, "involuntary": invol, "total": vol + invol},
        "page_faults": {"minor": minor, "major": major, "total": minor + major},
        "migrations": c.get("migrations") if isinstance(c.get("migrations"), int) else None,
        "children": children_of(c),
        "profiler_cpu_ns": _opt_int(c.get("profiler_cpu_ns")),
        "hardware": dict(hw) if hw else None,
        "hardware_unavailable": c.get("hardware_unavailable") if not hw else None,
        "per_second": {
            "context_switches": (vol + invol) / secs if secs else None,
            "page_faults": (minor + major) / secs if secs else None,
        },
    }
    if hw and hw.get("cycles") and "instructions" in hw:
        out["instructions_per_cycle"] = hw["instructions"] / hw["cycles"]
    return out


def children_of(counters):
    """A counters record's `children` (CPU time of the child processes waited
    for, and whether they were profiled), or None in profiles without it."""
    ch = counters.get("children")
    if not isinstance(ch, dict) or not isinstance(ch.get("cpu_ns"), int):
        return None
    return {"cpu_ns": ch["cpu_ns"], "profiled": ch.get("profiled") is True}


def _opt_int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _num(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else 0


def format_stat(profile):
    """The summary of every run that has a counters record, one block each."""
    blocks = []
    for run in profile.runs:
        s = run_stat(run)
        if s is None:
            continue
        blocks.append(_format_one(s))
    missing = sum(1 for r in profile.runs if not r.counters)
    text = "\n".join(blocks)
    if missing:
        text += (f"\n({missing} run{'s' if missing != 1 else ''} without a counters record: "
                 "killed, or written by another profiler)\n")
    return text


def _rate(v):
    if v is None:
        return ""
    if v >= 1e6:
        return f"{v / 1e6:.3f} M/sec"
    if v >= 1e3:
        return f"{v / 1e3:.3f} K/sec"
    return f"{v:.3f} /sec"


def _format_one(s):
    rows = []   # (value text, name, comment)

    def ms(ns):
        return f"{ns / 1e6:,.2f} msec"

    cpus = f"{s['cpus_utilized']:.3f} CPUs utilized" if s["cpus_utilized"] is not None else ""
    rows.append((ms(s["task_clock_ns"]), "task-clock", cpus))
    rows.append((ms(s["user_ns"]), "user", ""))
    rows.append((ms(s["system_ns"]), "sys", ""))
    own = s["profiler_cpu_ns"]
    if own is not None:
        share = f"{100 * own / s['task_clock_ns']:.2f}% of task-clock" if s["task_clock_ns"] else ""
        rows.append((ms(own), "profiler-thread", share))
    cs = s["context_switches"]
    rows.append((f"{cs['total']:,}", "context-switches", _rate(s["per_second"]["context_switches"])))
    rows.append((f"{cs['voluntary']:,}", "  voluntary", ""))
    rows.append((f"{cs['involuntary']:,}", "  involuntary", ""))
    if s["migrations"] is None:
        rows.append(("<not counted>", "cpu-migrations", "the kernel does not tell"))
    else:
        rows.append((f"{s['migrations']:,}", "cpu-migrations", ""))
    pf = s["page_faults"]
    rows.append((f"{pf['total']:,}", "page-faults", _rate(s["per_second"]["page_faults"])))
    children = s["children"]
    rows.append((f"{pf['minor']:,}", "  minor-faults", ""))
    rows.append((f"{pf['major']:,}", "  major-faults", ""))
    if children and children["cpu_ns"]:
        rows.append((ms(children["cpu_ns"]), "children task-clock",
                     "profiled, each in its own file" if children["profiled"]
                     else "not in this profile (--follow-children)"))
    hw = s["hardware"]
    if hw:
        names = [n for n in HARDWARE_ORDER if n in hw] + sorted(n for n in hw if n not in HARDWARE_ORDER)
        for name in names:
            comment = ""
            if name == "instructions" and "instructions_per_cycle" in s:
                comment = f"{s['instructions_per_cycle']:.2f} insn per cycle"
            rows.append((f"{hw[name]:,}", name, comment))
    width = max(len(v) for v, _, _ in rows)
    namew = max(len(n) for _, n, _ in rows)
    prog = s["program"] or "?"
    out = [f" Counters of '{prog}'" + (f" (pid {s['pid']})" if s["pid"] is not None else "") + ":", ""]
    for v, n, c in rows:
        line = f"  {v.rjust(width)}  {n.ljust(namew)}"
        if c:
            line += f"  #  {c}"
        out.append(line.rstrip())
    if not hw:
        why = s["hardware_unavailable"] or "the runtime did not say why"
        out.append(f"  {'<not counted>'.rjust(width)}  hardware counters (cycles, instructions, ...): "
                   f"{why}")
    out.append("")
    out.append(f"  {s['wall_ns'] / 1e9:.9f} seconds time elapsed")
    return "\n".join(out) + "\n"
