"""Text views of the conventional profile, in the shape pprof users know:
`coz report --top` (flat, flat%, sum%, cum, cum% per function or line) and
`coz report --list REGEX` (a function's source with per-line flat and cum
counts, and the causal prediction of each line an experiment measured)."""

import os

from . import conventional as conv

SOURCE_CONTEXT = 3      # lines of source shown around the lines with samples
SOURCE_GAP = 2 * SOURCE_CONTEXT   # blocks closer than this are shown as one
DEFAULT_TOP = 30        # rows of --top when -n is not given


def header(profile, kinds, value):
    """One line: what is counted, and what else the profile holds."""
    totals = conv.kind_totals(profile)
    n = sum(totals[k][0] for k in totals if k in kinds)
    ns = sum(totals[k][1] for k in totals if k in kinds)
    runs = len(profile.runs)
    described = conv.describe_kinds(kinds)
    what = {"cpu": "on-CPU", "off-CPU": "off-CPU", "all": "of all kinds"}.get(
        described, f"of kinds {described}")
    line = (f"{n} samples ({conv.format_time(ns)}) {what} in {runs} run{'s' if runs != 1 else ''}")
    others = [k for k in conv.KINDS if k not in kinds and k in totals and totals[k][0]]
    if others:
        parts = ", ".join(f"{k} {conv.format_time(totals[k][1])}" for k in others)
        line += f"; not shown: {parts} (--kind all shows them)"
    # The runtime's word on threads too short for the sampling period
    # (libcoz: Profiler::warn_short_threads): their time is mostly in no sample.
    for r in profile.runs:
        for code, message in r.warnings:
            if code == "short-threads":
                line += "\nnote: " + message
    return line


def format_top(profile, table, limit=None, sort="flat", value="time"):
    """pprof's --text table: flat, flat%, sum%, cum, cum%, then the name."""
    out = [header(profile, table.kinds, value)]
    rows = table.sorted(sort, value)
    limit = DEFAULT_TOP if limit is None else limit
    shown = rows[:limit]
    total = table.total_ns if value == "time" else table.total
    if not rows:
        out.append("")
        out.append("no samples of the kinds asked")
        return "\n".join(out) + "\n"
    cells = []
    running = 0
    for r in shown:
        flat = r.value("flat", value)
        cum = r.value("cum", value)
        running += flat
        name = r.name
        if table.by == "line":
            name += f" ({r.function})" if r.file is not None else ""
        cells.append((conv.format_value(flat, value), f"{conv.pct(flat, total):.2f}%",
                      f"{conv.pct(running, total):.2f}%", conv.format_value(cum, value),
                      f"{conv.pct(cum, total):.2f}%", name))
    head = ("flat", "flat%", "sum%", "cum", "cum%", table.by)
    widths = [max(len(c[i]) for c in cells + [head]) for i in range(5)]
    out.append("")
    out.append("  ".join(h.rjust(w) for h, w in zip(head[:5], widths)) + "  " + head[5])
    for c in cells:
        out.append("  ".join(v.rjust(w) for v, w in zip(c[:5], widths)) + "  " + c[5])
    if len(shown) < len(rows):
        noun = "functions" if table.by == "function" else "lines"
        out.append(f"({len(rows) - len(shown)} more {noun}; -n N shows N)")
    return "\n".join(out) + "\n"


def causal_by_line(result):
    """{"path:line": (impact, progress point)} from an analysis result: the
    highest impact of the line over progress points."""
    out = {}
    for ln in result["lines"]:
        if ln["line"] not in out:    # lines are ranked by impact
            out[ln["line"]] = (ln["impact"], ln["progress_point"])
    return out


def format_list(profile, pattern, kinds, value="time", causal=None, read_source=None):
    """pprof's --list: each matching function with its source lines, per-line
    flat and cum, and the causal impact of lines an experiment measured."""
    found, total_n, total_ns = conv.routines(profile, pattern, kinds)
    total = total_ns if value == "time" else total_n
    causal = causal or {}
    read_source = read_source or _read_source
    out = [header(profile, kinds, value)]
    if not found:
        out.append("")
        out.append(f"no function matches {pattern!r} in the samples of the kinds asked")
        return "\n".join(out) + "\n"
    points = set()
    for r in found:
        flat = r.flat_ns if value == "time" else r.flat
        cum = r.cum_ns if value == "time" else r.cum
        out.append("")
        out.append(f"ROUTINE ======================== {r.name} in {r.file or '(no source file)'}")
        out.append(f"{conv.format_value(flat, value):>10} {conv.format_value(cum, value):>10} "
                   f"(flat, cum) {conv.pct(cum, total):.2f}% of total")
        source = read_source(r.file) if r.file else None
        rows = []
        numbers = sorted(n for n in r.lines if n > 0)
        shown = _shown_lines(numbers, len(source)) if source is not None else numbers
        for n in shown:
            if n is None:
                rows.append(("", "", "", "...", ""))
                continue
            c = r.lines.get(n)
            fl = cu = "."
            if c is not None:
                fl = _dot(c[0] if value == "samples" else c[1], value)
                cu = _dot(c[2] if value == "samples" else c[3], value)
            imp = causal.get(f"{r.file}:{n}")
            ctext = ""
            if imp is not None:
                ctext = f"{imp[0] * 100:+.1f}%"
                points.add(imp[1])
            text = source[n - 1] if source is not None and 0 < n <= len(source) else ""
            rows.append((fl, cu, ctext, str(n), text))
        if 0 in r.lines:
            c = r.lines[0]
            rows.append((_dot(c[0] if value == "samples" else c[1], value),
                         _dot(c[2] if value == "samples" else c[3], value),
                         "", "?", "(no line information)"))
        head = ("flat", "cum", "causal", "line", "")
        w = [max(len(x[i]) for x in rows + [head]) for i in range(4)]
        w = [max(w[0], 10), max(w[1], 10), w[2], w[3]]
        out.append("  ".join(h.rjust(x) for h, x in zip(head[:4], w)) + "  source"
                   + ("" if source is not None or not r.file else f" (not found: {r.file})"))
        for x in rows:
            out.append(("  ".join(v.rjust(k) for v, k in zip(x[:4], w)) + "  " + x[4]).rstrip())
    out.append("")
    note = ("causal: predicted program speedup averaged over line speedups 0-100% (the impact "
            "column of coz report); blank where no experiment measured the line")
    if len(points) > 1:
        note += f"; the best of progress points {', '.join(sorted(points))}"
    out.append(note)
    return "\n".join(out) + "\n"


def _dot(v, value):
    """pprof's list shows "." for nothing."""
    return conv.format_value(v, value) if v else "."


def _shown_lines(numbers, length):
    """Line numbers to print: each line with samples and SOURCE_CONTEXT lines
    around it, blocks closer than SOURCE_GAP merged, None between blocks."""
    if not numbers:
        return []
    blocks = []
    for n in numbers:
        lo = max(1, n - SOURCE_CONTEXT)
        hi = n + SOURCE_CONTEXT
        if length is not None:
            hi = min(hi, max(length, n))
        if blocks and lo <= blocks[-1][1] + SOURCE_GAP:
            blocks[-1][1] = max(blocks[-1][1], hi)
        else:
            blocks.append([lo, hi])
    out = []
    for i, (lo, hi) in enumerate(blocks):
        if i:
            out.append(None)
        out.extend(range(lo, hi + 1))
    return out


def _read_source(path):
    """The file's lines, or None when it cannot be read as text."""
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read().splitlines()
    except OSError:
        return None
