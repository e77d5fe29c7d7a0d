"""coz plot --html: one self-contained page with the analysis and snippets embedded."""

import json
import re
import shutil
from pathlib import Path

import pytest

from cozprof import html_export, server
from cozprof.errors import CozError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "viewer" / "tests" / "fixtures"


def embedded(html, ident):
    m = re.search(rf'<script id="{ident}" type="application/json">(.*?)</script>', html, re.S)
    assert m, ident
    return json.loads(m.group(1))


def test_page_is_self_contained_with_data_and_snippets(tmp_path):
    analysis = server.load_analysis_file(FIXTURES / "realistic.json")
    out = html_export.write(analysis, tmp_path / "p.html", server.search_dirs_for([], [FIXTURES]))
    html = out.read_text()
    assert not re.search(r'<script src=|<link rel="stylesheet"|(src|href)="https?:', html)
    assert "uPlot" in html and "function drawPlot" in html and ".card.contention" in html
    assert embedded(html, "coz-analysis") == analysis
    sources = embedded(html, "coz-sources")
    assert set(sources) == {rec["line"] for rec in analysis["lines"]}
    snip = sources["src/hash.c:22"]
    assert snip["lines"][22 - snip["first"]].strip() == "slot = (slot + 1) & (TABLE_SIZE - 1);"
    assert out.stat().st_mode & 0o044  # readable like any file the user writes


def test_data_cannot_close_its_script_tag(tmp_path):
    evil = "</script><script>alert(1)</script>.c"
    analysis = {"schema": 1, "lines": [{"line": f"{evil}:1", "file": evil, "lineno": 1,
                                        "progress_point": "p", "points": []}]}
    html = html_export.render(analysis, {})
    data_tag = re.search(r'<script id="coz-analysis" type="application/json">(.*?)</script>', html, re.S)
    assert "<" not in data_tag.group(1)
    assert embedded(html, "coz-analysis") == analysis


def test_lines_without_readable_sources_are_left_out(tmp_path):
    analysis = {"schema": 1, "profiles": [], "lines": [
        {"line": "nowhere/gone.c:3", "file": "nowhere/gone.c", "lineno": 3, "progress_point": "p", "points": []}]}
    assert html_export.snippets(analysis, [tmp_path]) == {}


def test_missing_charting_library_is_a_clear_error(tmp_path, monkeypatch):
    copy = tmp_path / "viewer"
    shutil.copytree(server.viewer_dir(), copy, ignore=shutil.ignore_patterns("node_modules", "tests"))
    monkeypatch.setattr(server, "viewer_dir", lambda: copy)
    with pytest.raises(CozError) as e:
        html_export.write({"schema": 1, "lines": []}, tmp_path / "p.html")
    assert "npm ci --prefix viewer" in e.value.hint
    assert not (tmp_path / "p.html").exists()


def test_unwritable_destination_is_a_clear_error(tmp_path):
    with pytest.raises(CozError, match="cannot write"):
        html_export.write({"schema": 1, "lines": []}, tmp_path / "no-such-dir" / "p.html")


REAL = FIXTURES / "real"  # profiles written by the runtime (README.md there)
PROFILES = REPO / "tests" / "fixtures" / "profiles"


def test_page_embeds_the_locks_report_and_flame_tree_of_its_profiles(tmp_path):
    from cozprof import analysis as analysis_mod, cli
    prof = str(REAL / "locks_granularity.coz")
    analysis = analysis_mod.analyze_files([prof])
    html = html_export.write(analysis, tmp_path / "p.html").read_text()
    # What coz view serves for the same profile.
    want = server.view_data(cli.parse_args(["view", prof]))
    assert embedded(html, "coz-locks") == json.loads(server.analysis_json(want.locks))
    assert embedded(html, "coz-flame") == json.loads(server.analysis_json(want.flame))
    assert embedded(html, "coz-locks")["findings"][0]["category"] == "improper-granularity"
    # The flame-graph library and the views' scripts are inlined, nothing linked.
    assert not re.search(r'<script src=|<link rel="stylesheet"', html)
    for marker in ("Coz.views.units", "Coz.views.threads", "Coz.views.locks", "Coz.views.flame",
                   "d3-flame-graph-label", ".d3-flame-graph"):
        assert marker in html, marker


def test_a_function_shows_the_source_of_its_first_line(tmp_path):
    src = tmp_path / "f.c"
    src.write_text("".join(f"line {n}\n" for n in range(1, 21)))
    fn = {"line": "work", "unit": "function", "file": str(src), "lineno": 7, "progress_point": "p", "points": []}
    no_file = {"line": "lost", "unit": "function", "file": "", "lineno": 0, "progress_point": "p", "points": []}
    site = {"line": f"{src}:9", "unit": "callsite", "file": str(src), "lineno": 9, "progress_point": "p", "points": []}
    assert html_export.snippet_spec(fn) == f"{src}:7"
    assert html_export.snippet_spec(no_file) is None
    assert html_export.snippet_spec(site) == f"{src}:9"
    analysis = {"schema": 1, "profiles": [], "lines": [fn, no_file, site]}
    snips = html_export.snippets(analysis, [tmp_path])
    assert set(snips) == {f"{src}:7", f"{src}:9"}
    assert snips[f"{src}:7"]["lines"][7 - snips[f"{src}:7"]["first"]] == "line 7"


def test_views_say_why_when_the_profiles_cannot_be_read(tmp_path):
    locks, flame = html_export.profile_views({"schema": 1, "lines": [], "profiles": []})
    assert locks == flame and "names no profile" in locks["unavailable"]
    gone = str(tmp_path / "gone.coz")
    locks, flame = html_export.profile_views({"schema": 1, "lines": [], "profiles": [gone]})
    assert locks["unavailable"] == f"the profile {gone} is not here"
    assert "coz plot --html OUT.html PROFILE" in locks["hint"]
    bad = tmp_path / "bad.coz"
    bad.write_text("not a profile\n")
    locks, flame = html_export.profile_views({"schema": 1, "lines": [], "profiles": [str(bad)]})
    assert isinstance(locks["unavailable"], str) and locks == flame


def test_views_take_the_runs_the_analysis_took(monkeypatch):
    from cozprof import analysis as analysis_mod
    taken = []
    monkeypatch.setattr(server, "profile_views", lambda prof, analysis: taken.append(len(prof.runs)) or (None, None))
    prof = str(PROFILES / "two_builds.coz")
    latest = analysis_mod.analyze_files([prof])
    every = analysis_mod.analyze_files([prof], all_runs=True)
    assert latest["summary"]["runs"] < every["summary"]["runs"]
    html_export.profile_views(latest)
    html_export.profile_views(every)
    assert taken == [latest["summary"]["runs"], every["summary"]["runs"]]
