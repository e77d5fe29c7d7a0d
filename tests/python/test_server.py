"""coz view: which URLs are answered, which are refused, and the CLI around it."""

import http.client
import json
import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from cozprof import cli, conventional, server
from cozprof.errors import CozError

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "viewer" / "tests" / "fixtures"
REAL = FIXTURES / "real"  # profiles written by the runtime (README.md there)
PROFILES = REPO / "tests" / "fixtures" / "profiles"


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
    return server.App(analysis, server.viewer_dir(), server.Sources(analysis, [tree]), token=TOKEN)


TOKEN = "t0ken-of-the-tests_43-characters-like-real1"


def get(app, target):
    """GET `target` under the app's token."""
    r = app.route(f"/{app.token}{target}")
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


def _viewer_without(tmp_path, missing):
    """A viewer folder with every file of server.ASSETS but those under `missing`."""
    for rel, _ in server.ASSETS.values():
        if not rel.startswith(missing):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text("")
    return tmp_path


def test_missing_charting_library_is_a_clear_error(tmp_path):
    with pytest.raises(CozError) as e:
        server.check_assets(_viewer_without(tmp_path, "node_modules/uplot/"))
    assert "charting library is not installed" in str(e.value)
    assert "npm ci --prefix viewer" in e.value.hint


@pytest.mark.parametrize("package", ["d3", "d3-flame-graph"])
def test_missing_flame_graph_library_is_a_clear_error(tmp_path, package):
    with pytest.raises(CozError) as e:
        server.check_assets(_viewer_without(tmp_path, f"node_modules/{package}/"))
    assert "flame-graph library is not installed" in str(e.value)
    assert f"node_modules/{package}/dist" in str(e.value)
    assert "npm ci --prefix viewer" in e.value.hint


def test_every_script_and_stylesheet_of_the_page_is_served():
    page = (server.viewer_dir() / "index.html").read_text()
    named = re.findall(r'<script src="([^"]+)">|<link rel="stylesheet" href="([^"]+)">', page)
    served = {rel for rel, _ in server.ASSETS.values()}
    for script, style in named:
        assert (script or style) in served


def test_view_analyses_the_profiles_it_is_given(tmp_path):
    prof = tmp_path / "run.coz"
    shutil.copy(PROFILES / "throughput.coz", prof)
    data = server.view_data(cli.parse_args(["view", "--no-phase-correction", "--no-browser", str(prof)]))
    assert data.analysis["phase_correction"] is False
    assert data.analysis["profiles"] == [str(prof)]
    assert tmp_path.resolve() in data.search_dirs
    assert server.view_data(cli.parse_args(["view", str(prof)])).analysis["phase_correction"] is True
    # A hand-made profile has neither stacks nor lock counters: both views say why.
    assert "no stacks" in data.flame["unavailable"]
    assert isinstance(data.locks["unavailable"], str) and data.locks["unavailable"]


def test_view_without_a_profile_says_what_to_do(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CozError) as e:
        server.view_data(cli.parse_args(["view"]))
    assert "profile.coz: no such profile file" in str(e.value)
    assert "coz run" in e.value.hint


def test_view_of_a_runtime_profile_has_its_locks_report_and_flame_tree():
    prof = REAL / "locks_granularity.coz"
    data = server.view_data(cli.parse_args(["view", str(prof)]))
    # The locks report is `coz locks --json`'s, joined to the same analysis.
    from cozprof import locks as locks_mod, locks_report
    want = locks_report.build_report([str(prof)], locks_mod.thresholds())
    assert data.locks["findings"] == want["findings"]
    assert data.locks["findings"][0]["category"] == "improper-granularity"
    assert data.locks["causal"] == want["causal"]
    # The flame tree: every sample kind, one node per thread under the root.
    flame = data.flame
    assert (flame["schema"], flame["value"], flame["by_thread"]) == (1, "time_ns", True)
    assert flame["kinds"] == list(conventional.KINDS)
    assert flame["pruned_nodes"] == 0
    threads = flame["tree"]["children"]
    assert threads and all(re.fullmatch(r"thread .* \(tid \d+, group .*\)", t["name"]) for t in threads)
    assert {t["name"].rsplit("group ", 1)[1][:-1] for t in threads} == {"main", "worker"}
    assert flame["tree"]["time_ns"] == sum(t["time_ns"] for t in threads)
    # The workers wait for the lock: a [wait: lock] leaf somewhere under them.
    assert "lock" in server._kind_totals(flame["tree"])


def test_view_of_an_analysis_has_no_stacks_and_no_locks_unless_given(tmp_path):
    analysis = tmp_path / "a.json"
    analysis.write_text(json.dumps(analysis_for([])))
    data = server.view_data(cli.parse_args(["view", "--analysis", str(analysis)]))
    assert "unless --locks names one" in data.locks["unavailable"]
    assert "coz locks PROFILE --json" in data.locks["hint"]
    assert "no stacks" in data.flame["unavailable"]
    report = tmp_path / "locks.json"
    report.write_text(json.dumps({"schema": 1, "findings": [], "locks": []}))
    data = server.view_data(cli.parse_args(["view", "--analysis", str(analysis), "--locks", str(report)]))
    assert data.locks == {"schema": 1, "findings": [], "locks": []}
    # --locks also replaces the profile's own report.
    prof = REAL / "locks_granularity.coz"
    data = server.view_data(cli.parse_args(["view", "--locks", str(report), str(prof)]))
    assert data.locks["findings"] == []


def test_view_of_an_analysis_refuses_no_phase_correction(tmp_path):
    # The analysis is already made: the option was ignored.
    analysis = tmp_path / "a.json"
    analysis.write_text(json.dumps(analysis_for([])))
    with pytest.raises(CozError, match="--no-phase-correction applies to profiles, not to --analysis") as e:
        server.view_data(cli.parse_args(["view", "--analysis", str(analysis), "--no-phase-correction"]))
    assert "coz report --no-phase-correction --json" in e.value.hint


@pytest.mark.parametrize("content, message", [
    (None, "no such file"), ("", "not valid JSON"), ("[]", "not a locks report"),
    ('{"schema": 1, "lines": []}', "not a locks report"), (b"\xff\xfe", "cannot read it"),
])
def test_bad_locks_file_is_a_clear_error(tmp_path, content, message):
    p = tmp_path / "locks.json"
    if isinstance(content, bytes):
        p.write_bytes(content)
    elif content is not None:
        p.write_text(content)
    with pytest.raises(CozError, match=message) as e:
        server.view_data(cli.parse_args(["view", "--locks", str(p), str(REAL / "locks_granularity.coz")]))
    assert "coz locks profile.coz --json locks.json" in e.value.hint


def test_locks_report_and_flame_tree_are_served_under_the_token(tree):
    analysis = analysis_for([])
    locks = {"schema": 1, "findings": [], "locks": [], "note": "</script>"}
    flame = {"schema": 1, "value": "time_ns", "tree": {"name": "all", "children": []}}
    app = server.App(analysis, server.viewer_dir(), server.Sources(analysis, [tree]), token=TOKEN,
                     locks=locks, flame=flame)
    assert json.loads(get(app, "/locks.json")[1]) == locks
    assert json.loads(get(app, "/flame.json")[1]) == flame
    assert app.route("/locks.json").status in (403, 404)
    assert app.route(f"/{TOKEN}x/flame.json").status in (403, 404)
    # Not made (an App without them): the page is told so, not given a 404.
    bare = server.App(analysis, server.viewer_dir(), server.Sources(analysis, [tree]), token=TOKEN)
    for url in ("/locks.json", "/flame.json"):
        status, body = get(bare, url)
        assert status == 200 and json.loads(body) == server.NOT_MADE


def _tree(name, ns, children=(), file="f.c"):
    """A flame node whose own CPU time is what its children leave of `ns`."""
    children = list(children)
    own = ns - sum(c["time_ns"] for c in children)
    return {"name": name, "file": file, "samples": ns, "time_ns": ns, "self_samples": own,
            "self_time_ns": own, "children": children}


def _wait(kind, ns):
    return {"name": f"[wait: {kind}]", "file": None, "samples": ns, "time_ns": ns, "self_samples": ns,
            "self_time_ns": ns, "children": []}


def _count(node):
    return 1 + sum(_count(c) for c in node["children"])


def test_prune_flame_keeps_the_widest_frames_and_their_time_per_kind():
    tree = _tree("all", 1000, [
        _tree("main", 700, [_tree("hot", 500), _tree("warm", 150, [_wait("io", 40), _tree("leaf", 10)]),
                            _wait("sleep", 30), _tree("cold", 20)]),
        _tree("side", 300, [_wait("lock", 200), _tree("tiny", 5)]),
    ], file=None)
    before = server._kind_totals(tree)
    assert server.prune_flame(tree, max_nodes=100) == 0  # small enough: untouched
    n = _count(tree)
    removed = server.prune_flame(tree, max_nodes=6)
    assert removed == n - _count(tree) and _count(tree) <= 6
    # Kept: the widest; every kind's time is still under the root.
    names = set()
    todo = [tree]
    while todo:
        x = todo.pop()
        names.add(x["name"])
        todo.extend(x["children"])
    assert names == {"all", "main", "hot", "warm", "side", "[wait: lock]"}
    assert server._kind_totals(tree) == before
    warm = tree["children"][0]["children"][1]
    assert warm["pruned"] == {"io": [40, 40], "cpu": [10, 10]}
    assert tree["children"][0]["pruned"] == {"sleep": [30, 30], "cpu": [20, 20]}
    assert tree["children"][1]["pruned"] == {"cpu": [5, 5]}


def test_flame_data_of_a_large_tree_is_pruned_and_says_so(monkeypatch):
    from cozprof import profile as profile_mod
    prof = profile_mod.load([str(REAL / "units_sites.coz")])
    whole = server.flame_data(prof)
    small = server.flame_data(prof, max_nodes=4)
    assert whole["pruned_nodes"] == 0
    assert small["pruned_nodes"] == _count(whole["tree"]) - _count(small["tree"]) > 0
    assert _count(small["tree"]) <= 4
    assert server._kind_totals(small["tree"]) == server._kind_totals(whole["tree"])


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


class Served:
    """`app` behind a real socket, with a raw client that sends targets as given."""

    def __init__(self, app):
        self.httpd = server.ThreadingHTTPServer(("127.0.0.1", 0), server.make_handler(app))
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def fetch(self, target, host=None, method="GET"):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        conn.putrequest(method, target, skip_host=host is not None, skip_accept_encoding=True)
        if host is not None:
            conn.putheader("Host", host)
        conn.endheaders()
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        return resp.status, resp.headers, body

    def raw(self, request_bytes, until_close=False):
        """Sends bytes as they are; returns the status line (b'' if the connection dropped),
        or with `until_close` all that came back."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            s.sendall(request_bytes)
            data = b""
            while until_close or b"\r\n" not in data:
                chunk = s.recv(4096)
                if not chunk:
                    break
                data += chunk
        return data if until_close else data.split(b"\r\n", 1)[0]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def served(app):
    s = Served(app)
    yield s
    s.close()


def test_real_socket_refuses_raw_traversal_and_foreign_hosts(served, app):
    fetch, port = served.fetch, served.port
    status, headers, body = fetch(f"/{TOKEN}/../../../../etc/passwd")
    assert status == 404 and b"root:" not in body
    status, headers, body = fetch(f"/{TOKEN}/analysis.json")
    assert status == 200
    assert headers["Content-Type"].startswith("application/json")
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["Referrer-Policy"] == "no-referrer"
    assert fetch(f"/{TOKEN}/analysis.json", host="attacker.example")[0] == 403
    assert fetch(f"/{TOKEN}/analysis.json", host=f"localhost:{port}")[0] == 200
    assert served.httpd.server_address[0] == "127.0.0.1"


# -- the token ------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/", "/index.html", "/analysis.json", "/source?line=src/app.c:2",
                                  "/js/viewer.js", "/css/viewer.css"])
def test_nothing_is_served_without_the_token(app, path):
    good = app.route(f"/{TOKEN}{path}")
    assert good.status == 200
    for target in [path, f"/{TOKEN[:-1]}{path}", f"/{TOKEN}x{path}", f"/x{TOKEN}{path}",
                   f"/{TOKEN.upper()}{path}", f"//{TOKEN}{path}", f"/%2F{TOKEN}{path}",
                   f"/{TOKEN[:-1]}%{ord(TOKEN[-1]):02X}{path}", f"{path}?token={TOKEN}"]:
        r = app.route(target)
        assert r.status == 403, target
        assert r.body.decode() == server.NEEDS_TOKEN
        assert good.body not in r.body


def test_the_token_alone_redirects_to_the_page(app):
    r = app.route(f"/{TOKEN}")
    assert r.status == 308 and r.location == f"/{TOKEN}/"
    assert app.route(f"/{TOKEN}?x=1").location == f"/{TOKEN}/"


def test_every_app_gets_its_own_long_random_token(tree):
    analysis = analysis_for([])
    tokens = {server.App(analysis, server.viewer_dir(), server.Sources(analysis, [tree])).token
              for _ in range(20)}
    assert len(tokens) == 20
    assert all(len(t) >= 43 and all(c.isalnum() or c in "-_" for c in t) for t in tokens)


def test_coz_view_prints_the_url_with_its_token():
    env = dict(os.environ, PYTHONPATH=str(REPO / "python"))
    env.pop("DISPLAY", None)
    env.pop("WAYLAND_DISPLAY", None)
    proc = subprocess.Popen([sys.executable, "-m", "cozprof", "view", "--no-browser", "--port", "0",
                             "--analysis", str(FIXTURES / "realistic.json")],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        url = line.split("serving ", 1)[1].split(" ", 1)[0]
        host_port, _, token_path = url[len("http://"):].partition("/")
        token = token_path.rstrip("/")
        assert host_port.startswith("127.0.0.1:") and len(token) >= 43 and token_path == token + "/"
        port = int(host_port.split(":")[1])

        def status(path):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", path)
            code = conn.getresponse().status
            conn.close()
            return code

        assert status(f"/{token}/") == status(f"/{token}/analysis.json") == 200
        assert status("/") == status("/analysis.json") == 403
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in err


# -- what reaches the files -------------------------------------------------------------

@pytest.fixture
def odd_files(tmp_path):
    """An analysis naming things that are not regular source files, and one that is."""
    d = tmp_path
    (d / "real.c").write_text("int a;\nint b;\n")
    (d / "link-to-real.c").symlink_to(d / "real.c")
    (d / "link-to-proc.c").symlink_to("/proc/self/environ")
    (d / "link-to-dev.c").symlink_to("/dev/zero")
    (d / "binary.c").write_bytes(b"\x7fELF\x00\x01\ninside\n")
    (d / "empty.c").write_text("")
    (d / "folder.c").mkdir()
    os.mkfifo(d / "fifo.c")
    names = ["real.c", "link-to-real.c", "link-to-proc.c", "link-to-dev.c", "binary.c", "empty.c",
             "folder.c", "fifo.c", "/proc/self/environ", "/proc/self/status", "/proc/self/cmdline",
             "/sys/kernel/mm/transparent_hugepage/enabled", "/dev/zero", "/dev/null", "/dev/stdin",
             "/proc/self/cwd/real.c", "nul\x00byte.c"]
    analysis = analysis_for(names)
    return server.App(analysis, server.viewer_dir(), server.Sources(analysis, [d]), token=TOKEN), names


def test_only_regular_text_files_outside_proc_sys_dev_are_served(odd_files):
    app, names = odd_files
    served = {}
    for i, name in enumerate(names):
        # analysis_for puts name number i at line i + 2; ask for line 1, which any file has.
        status, body = get(app, "/source?line=" + quote(name) + ":1")
        assert status in (200, 404), name
        served[name] = status == 200
    assert {n for n, ok in served.items() if ok} == {"real.c", "link-to-real.c"}


def quote(text):
    from urllib.parse import quote as q
    return q(text, safe="")


@pytest.mark.parametrize("query", [
    "line=src/app.c:%C2%B2", "line=src/app.c:²", "line=a.c:²", "line=src/app.c:2&context=%C2%B2",
    "line=src/app.c:2&context=²", "line=src/app.c:٣", "line=src/app.c:2&context=" + "9" * 5000,
    "line=src/app.c:" + "9" * 5000, "line=%zz%C3%28%ff:2", "line=src/app.c%3A2%", "line=%00:1",
    "line=src/app.c:2&" * 40, "line=src/app.c:2&context=-3", "context=1", "=&&=&", "line=" + "a" * 60000 + ":1",
])
def test_odd_queries_get_a_short_answer(app, query):
    status, body = get(app, "/source?" + query)
    assert status in (200, 400, 404)
    assert "Traceback" not in body and len(body) < 2000


def test_odd_requests_on_the_socket_are_answered_not_dropped(served):
    for query, want in [("line=a.c:%C2%B2", 404), ("line=src/app.c:%C2%B2", 404), ("line=%zz", 404),
                        ("line=src/app.c:2&" * 40, 400), ("line=src/app.c:2&context=%C2%B2", 200)]:
        status, _, body = served.fetch(f"/{TOKEN}/source?{query}")
        assert status == want, query
    # Bytes no client library would send: non-ASCII in the request line, a huge target.
    assert served.raw(f"GET /{TOKEN}/source?line=a.c:\xc2\xb2 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                      .encode("latin-1")).split(b" ")[1] == b"404"
    assert served.raw(b"GET /" + b"a" * 70000 + b" HTTP/1.1\r\n\r\n").split(b" ")[1] == b"414"
    assert served.raw(b"POST /" + TOKEN.encode() + b"/ HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").split(b" ")[1] == b"501"
    # Not HTTP at all (a TLS hello): http.server answers the old way, with no status line.
    assert b"Error code: 400" in served.raw(b"\x16\x03\x01 garbage\r\n\r\n", until_close=True)


def test_a_failure_inside_costs_one_request_not_the_connection(app, monkeypatch, capsys):
    def broken(target):
        raise RuntimeError("boom")

    s = Served(app)
    try:
        monkeypatch.setattr(app, "route", broken)
        status, _, body = s.fetch(f"/{TOKEN}/analysis.json")
        assert status == 500 and body == b"internal error\n"
    finally:
        s.close()
    assert "RuntimeError: boom" in capsys.readouterr().err


def test_non_finite_numbers_become_null():
    text = server.analysis_json({"a": [math.inf, -math.inf, math.nan, 1.5], "b": {"c": math.nan}})
    assert json.loads(text) == {"a": [None, None, None, 1.5], "b": {"c": None}}
