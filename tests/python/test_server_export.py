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
