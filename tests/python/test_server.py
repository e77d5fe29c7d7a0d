"""coz view: which URLs are answered, which are refused, and the CLI around it."""

import http.client
import json
import math
import socket
import threading
from pathlib import Path

import pytest

from cozprof import cli, server
from cozprof.errors import CozError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "viewer" / "tests" / "fixtures"


def analysis_for(files, tmp=None):
    lines = []
    for i, name in enumerate(files):
        lines.append({"line": f"{name}:{i + 2}", "file": name, "lineno": i + 2, "progress_point": "p",
                      "kind": "throughput", "points": [], "slope": float("nan")})
    return {"schema": 1, "lines": lines, "progress_points": [{"name": "p", "kind": "throughput"}]}


@pytest.fixture
def tree(tmp_path):
    """A source tree with one named file, one unnamed neighbour and a secret outside."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.c").write_text("".join(f"line {n}\n" for n in range(1, 31)))
    (tmp_path / "src" / "other.c").write_text("not named by the profile\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    return tmp_path


@pytest.fixture
def app(tree):
    analysis = analysis_for(["src/app.c", str(tree / "src" / "abs.c"), "src/../secret.txt"])
    (tree / "src" / "abs.c").write_text("absolute one\nabsolute two\n")
    return server.App(analysis, server.viewer_dir(), server.Sources(analysis, [tree]))


def get(app, target):
    r = app.route(target)
    return r.status, r.body.decode("utf-8", "replace")


def test_viewer_files_and_analysis_are_served(app):
    for url in server.ASSETS:
        status, body = get(app, url)
        assert status == 200, url
        assert body
    status, body = get(app, "/")
    assert '<script src="js/viewer.js">' in body
    status, body = get(app, "/analysis.json")
    assert status == 200
    data = json.loads(body)  # strict JSON: the NaN slope became null
    assert data["lines"][0]["slope"] is None
    assert "NaN" not in body


@pytest.mark.parametrize("target", [
    "/../../etc/passwd", "/..%2F..%2Fetc%2Fpasswd", "//etc/passwd", "/etc/passwd", "/%2e%2e/%2e%2e/etc/passwd",
    "/js/../../python/cozprof/server.py", "/css/../../pyproject.toml", "/viewer.js", "/package.json",
    "/node_modules/playwright-core/package.json", "/tests/fixtures/realistic.json", "/index.html/..",
    "/source", "/source?line=", "/source?line=/etc/passwd:1", "/source?line=../../../../etc/passwd:1",
    "/source?line=src/other.c:1", "/source?line=src/app.c", "/source?line=src/app.c:0",
    "/source?line=src/app.c:-1", "/source?line=src/app.c:31", "/source?line=src/app.c:x",
])
def test_everything_else_is_refused(app, target):
    status, body = get(app, target)
    assert status in (403, 404)
    assert "line 1" not in body and "root:" not in body and "secret" not in body


def test_snippet_of_a_named_line(app):
    status, body = get(app, "/source?line=src%2Fapp.c%3A10&context=2")
    assert status == 200
    snip = json.loads(body)
    assert (snip["file"], snip["lineno"], snip["first"]) == ("src/app.c", 10, 8)
    assert snip["lines"] == ["line 8", "line 9", "line 10", "line 11", "line 12"]


def test_snippet_context_is_clipped_at_file_edges_and_capped(app):
    snip = json.loads(get(app, "/source?line=src/app.c:2&context=1000")[1])
    assert snip["first"] == 1
    assert len(snip["lines"]) == 2 + server.SNIPPET_CONTEXT_MAX


def test_absolute_paths_named_by_the_profile_are_served(app, tree):
    status, body = get(app, f"/source?line={tree}/src/abs.c:2")
    assert status == 200
    assert json.loads(body)["lines"][-1] == "absolute two"


def test_a_name_is_served_only_as_the_analysis_spells_it(app):
    # The analysis names 'src/../secret.txt', so that exact string is served...
    status, body = get(app, "/source?line=src/../secret.txt:1")
    assert status == 200 and json.loads(body)["lines"] == ["secret"]
    # ...but no other spelling of a file reaches anything.
    for target in ["/source?line=secret.txt:1", "/source?line=./secret.txt:1", "/source?line=src/./app.c:2",
                   "/source?line=src//app.c:2"]:
        assert get(app, target)[0] == 404


def test_split_line():
    assert server.split_line("a/b.c:12") == ("a/b.c", 12)
    assert server.split_line("C:/x.c:3") == ("C:/x.c", 3)
    for bad in ["a.c", "a.c:", ":3", "a.c:0", "a.c:-2", "a.c:1e3"]:
        assert server.split_line(bad) is None


def test_missing_charting_library_is_a_clear_error(tmp_path):
    (tmp_path / "index.html").write_text("<html></html>")
    for rel in ["css/viewer.css", "js/viewer.js"]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    with pytest.raises(CozError) as e:
        server.check_assets(tmp_path)
    assert "charting library is not installed" in str(e.value)
    assert "npm ci --prefix viewer" in e.value.hint


def test_view_analyses_the_profiles_it_is_given(monkeypatch, tmp_path):
    prof = tmp_path / "run.coz"
    prof.write_text("{}\n")
    calls = []

    def fake(paths, phase_correction=True, progress_point=None):
        calls.append((list(paths), phase_correction, progress_point))
        return analysis_for([])

    monkeypatch.setattr("cozprof.analysis.analyze_files", fake)
    args = cli.parse_args(["view", "--no-phase-correction", "--no-browser", str(prof)])
    analysis, dirs = server._analyse(args)
    assert calls == [([str(prof)], False, None)]
    assert tmp_path.resolve() in dirs
    args = cli.parse_args(["view", str(prof)])
    server._analyse(args)
    assert calls[-1][1] is True


def test_view_without_a_profile_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CozError) as e:
        server._analyse(cli.parse_args(["view"]))
    assert "profile.coz: no such profile file" in str(e.value)
    assert "coz run" in e.value.hint


@pytest.mark.parametrize("content, message", [
    ("", "not valid JSON"), ("{\"schema\": 1", "not valid JSON"), ("[1]", "not an analysis"),
])
def test_bad_analysis_file_is_a_clear_error(tmp_path, content, message):
    p = tmp_path / "a.json"
    p.write_text(content)
    with pytest.raises(CozError, match=message):
        server.load_analysis_file(p)
    with pytest.raises(CozError, match="no such file"):
        server.load_analysis_file(tmp_path / "missing.json")


def test_port_in_use_is_a_clear_error(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        rc = cli.main(["view", "--no-browser", "--port", str(port), "--analysis", str(FIXTURES / "realistic.json")])
    err = capsys.readouterr().err
    assert rc == 2
    assert f"cannot listen on 127.0.0.1:{port}" in err
    assert "Traceback" not in err


def test_real_socket_refuses_raw_traversal_and_foreign_hosts(app):
    httpd = server.ThreadingHTTPServer(("127.0.0.1", 0), server.make_handler(app))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    port = httpd.server_address[1]
    try:
        def fetch(target, host=None):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.putrequest("GET", target, skip_host=host is not None)
            if host is not None:
                conn.putheader("Host", host)
            conn.endheaders()
            resp = conn.getresponse()
            body = resp.read()
            conn.close()
            return resp.status, resp.headers, body

        status, headers, body = fetch("/../../../../etc/passwd")
        assert status == 404 and b"root:" not in body
        status, headers, body = fetch("/analysis.json")
        assert status == 200
        assert headers["Content-Type"].startswith("application/json")
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert fetch("/analysis.json", host="attacker.example")[0] == 403
        assert fetch("/analysis.json", host=f"localhost:{port}")[0] == 200
        assert httpd.server_address[0] == "127.0.0.1"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_non_finite_numbers_become_null():
    text = server.analysis_json({"a": [math.inf, -math.inf, math.nan, 1.5], "b": {"c": math.nan}})
    assert json.loads(text) == {"a": [None, None, None, 1.5], "b": {"c": None}}
