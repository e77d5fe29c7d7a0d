"""`coz plot --html`: the viewer as ONE self-contained HTML file.

The page's CSS and JavaScript (uPlot, d3 and d3-flame-graph included) are
inlined; the analysis, the source snippets it names, and the locks report and
flame tree of the same profiles are embedded as JSON; a Content-Security-
Policy forbids every network request, so the file opens anywhere offline.
"""

import os
import re
import tempfile
from pathlib import Path

from . import output, server
from .errors import CozError

# Only the page's own tags are inlined; anything else is left as is and then
# refused by the policy, which makes a stray reference visible in testing.
_STYLESHEET = re.compile(r'<link rel="stylesheet" href="([^"]+)">')
_SCRIPT = re.compile(r'<script src="([^"]+)"></script>')

EXPORT_CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
              "img-src data:; base-uri 'none'; form-action 'none'")


def _asset_text(folder, rel):
    known = {r for r, _ in server.ASSETS.values()}
    if rel not in known:
        raise CozError(f"the viewer page refers to {rel}, which is not one of its known files",
                       hint="the viewer folder looks modified; reinstall coz")
    return (folder / rel).read_text(encoding="utf-8")


def _script_json(obj):
    """JSON safe inside <script type="application/json">: no '<' at all."""
    return server.analysis_json(obj).replace("<", "\\u003c")


def snippet_spec(rec):
    """The 'path:line' whose source the page shows for a unit: the line or call
    site itself, a function's first line (None when unknown)."""
    if not isinstance(rec, dict):
        return None
    if rec.get("unit") == "function":
        file, lineno = rec.get("file"), rec.get("lineno")
        return f"{file}:{lineno}" if isinstance(file, str) and file and isinstance(lineno, int) and lineno > 0 else None
    return rec.get("line")


def snippets(analysis, search_dirs=None):
    """{'path:line': snippet} for every unit of the analysis whose source can be read."""
    if search_dirs is None:
        profiles = [p for p in analysis.get("profiles") or [] if isinstance(p, str)]
        search_dirs = server.search_dirs_for(profiles)
    sources = server.Sources(analysis, search_dirs)
    out = {}
    for rec in analysis.get("lines") or []:
        spec = snippet_spec(rec)
        if isinstance(spec, str) and spec not in out:
            snip = sources.snippet(spec)
            if snip is not None:
                out[spec] = snip
    return out


def profile_views(analysis):
    """(locks report, flame data) of the profiles the analysis names, each
    server.unavailable(...) when they cannot be read or hold no such data.
    Like the analysis, they take the latest build of each file (every run
    when the analysis counted every run: coz plot --all-runs)."""
    paths = [p for p in analysis.get("profiles") or [] if isinstance(p, str)]
    missing = [p for p in paths if not Path(p).is_file()]
    if not paths or missing:
        why = server.unavailable(f"the profile {missing[0]} is not here" if missing else
                                 "the analysis names no profile",
                                 "write the page where the profiles are: coz plot --html OUT.html PROFILE")
        return why, why
    from . import profile as profile_mod
    try:
        prof = profile_mod.load(paths)
    except CozError as e:
        why = server.unavailable(str(e), e.hint)
        return why, why
    selected = prof.latest_builds()
    runs = (analysis.get("summary") or {}).get("runs")
    if runs == len(prof.runs) != len(selected.runs):
        selected = prof  # the analysis was made with --all-runs: the views take its runs
    return server.profile_views(selected, analysis)


def render(analysis, sources=None, locks=None, flame=None):
    """The self-contained page as a string."""
    folder = server.viewer_dir()
    server.check_assets(folder)
    page = (folder / "index.html").read_text(encoding="utf-8")

    def style(m):
        css = _asset_text(folder, m.group(1))
        if "</style" in css.lower():
            raise CozError(f"cannot inline {m.group(1)}: it contains '</style'",
                           hint="the viewer folder looks modified; reinstall coz")
        return f"<style>\n{css}\n</style>"

    def script(m):
        js = _asset_text(folder, m.group(1))
        js = re.sub(r"</(script)", r"<\\/\1", js, flags=re.IGNORECASE)
        return f"<script>\n{js}\n</script>"

    page, n_css = _STYLESHEET.subn(style, page)
    page, n_js = _SCRIPT.subn(script, page)
    if n_css == 0 or n_js == 0:
        raise CozError("the viewer page has no stylesheet or script to inline",
                       hint="the viewer folder looks modified; reinstall coz")

    data = (f'<script id="coz-analysis" type="application/json">{_script_json(analysis)}</script>\n'
            f'<script id="coz-sources" type="application/json">{_script_json(sources or {})}</script>\n'
            f'<script id="coz-locks" type="application/json">{_script_json(locks or server.NOT_MADE)}</script>\n'
            f'<script id="coz-flame" type="application/json">{_script_json(flame or server.NOT_MADE)}</script>\n')
    body_scripts = page.find("<script>")
    page = page[:body_scripts] + data + page[body_scripts:]
    meta = f'<meta http-equiv="Content-Security-Policy" content="{EXPORT_CSP}">'
    page = page.replace('<meta charset="utf-8">', '<meta charset="utf-8">\n' + meta, 1)
    return page


def write(analysis, path, search_dirs=None, views=None):
    """Write the analysis as one self-contained HTML page to `path`.

    Source snippets are embedded for the lines whose files are found (relative
    names are looked up in the current folder, then beside the profiles, or
    in `search_dirs` when given). `views` is (locks report, flame data); by
    default they are made from the profiles the analysis names.
    """
    locks, flame = views if views is not None else profile_views(analysis)
    page = render(analysis, snippets(analysis, search_dirs), locks, flame)
    if os.fspath(path) == "-":  # standard output, as for the other commands' '-'
        output.write_data(page)  # UTF-8, as the page's charset says
        return path
    path = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=".coz-html-", dir=path.resolve().parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(page)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except OSError as e:
        raise CozError(f"cannot write {path}: {e.strerror or e}",
                       hint="choose a file in a folder that exists and that you can write") from None
    return path


def _main():  # pragma: no cover - a convenience for tests and hand checks
    import sys

    analysis = server.load_analysis_file(sys.argv[1])
    extra = [Path(sys.argv[1]).resolve().parent]
    profiles = [p for p in analysis.get("profiles") or [] if isinstance(p, str)]
    write(analysis, sys.argv[2], server.search_dirs_for(profiles, extra))
    return 0


if __name__ == "__main__":
    raise SystemExit(_main())
