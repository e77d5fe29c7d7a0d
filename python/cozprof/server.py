"""`coz view`: serve the browser viewer and one analysis on 127.0.0.1.

Every URL starts with a random token (`/<token>/...`, printed in the address,
as Jupyter does), so other users of the machine, who can reach 127.0.0.1 too,
get nothing. Under it only an explicit set of URLs is answered: the viewer's
own files (a fixed table, never a path joined from the request), the analysis
(analysis.json), the locks report (locks.json) and the flame-graph tree
(flame.json) of the same profiles, and snippets of the source files that the
analysis names (source?line=path:line), when they are regular text files
outside /proc, /sys and /dev. Everything else is refused with a short 4xx answer, so a request
cannot reach any other file, whatever it contains ('..', absolute paths,
escapes), and no request makes the server fail.

The routing is a pure function (`App.route`) so tests check it without a
socket; `make_handler` only wires it to http.server.
"""

import hmac
import json
import math
import os
import re
import secrets
import stat
import sys
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from .errors import CozError

FLAME_MAX_NODES = 20000         # a larger flame tree loses its smallest frames (summed per kind)
SNIPPET_CONTEXT_LINES = 3        # default lines served above and below a line
SNIPPET_CONTEXT_MAX = 20         # a client may ask for at most this many
SOURCE_MAX_BYTES = 16 * 1024 * 1024  # larger "source files" are not read
TOKEN_BYTES = 32                 # random bytes in the URL token (43 URL-safe characters)
MAX_QUERY_FIELDS = 16            # a query with more fields is refused
PSEUDO_FS = ("/proc", "/sys", "/dev")  # never served, whatever names them

# URL under the token -> (path under the viewer folder, content type). The
# page uses the same relative paths when opened from disk, so both ways find
# the same files, and its relative requests keep the token.
_JS = "text/javascript; charset=utf-8"
_CSS = "text/css; charset=utf-8"
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/css/viewer.css": ("css/viewer.css", _CSS),
    "/js/common.js": ("js/common.js", _JS),
    "/js/units.js": ("js/units.js", _JS),
    "/js/threads.js": ("js/threads.js", _JS),
    "/js/locks.js": ("js/locks.js", _JS),
    "/js/flame.js": ("js/flame.js", _JS),
    "/js/viewer.js": ("js/viewer.js", _JS),
    "/node_modules/uplot/dist/uPlot.iife.min.js": ("node_modules/uplot/dist/uPlot.iife.min.js", _JS),
    "/node_modules/uplot/dist/uPlot.min.css": ("node_modules/uplot/dist/uPlot.min.css", _CSS),
    "/node_modules/d3/dist/d3.min.js": ("node_modules/d3/dist/d3.min.js", _JS),
    "/node_modules/d3-flame-graph/dist/d3-flamegraph.umd.min.js":
        ("node_modules/d3-flame-graph/dist/d3-flamegraph.umd.min.js", _JS),
    "/node_modules/d3-flame-graph/dist/d3-flamegraph.css":
        ("node_modules/d3-flame-graph/dist/d3-flamegraph.css", _CSS),
}

_DECIMAL = re.compile(r"[0-9]{1,9}")  # ASCII digits only ('²'.isdigit() is True)

SETUP_HINT = "run 'npm ci --prefix viewer' in the project folder (the setup script does this)"

# The page loads nothing but its own files; styles may be set from script.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'")


# ------------------------------------------------------------------ assets

def viewer_dir():
    """The viewer folder: beside the package when installed, else the repo's top."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "viewer", here.parent.parent / "viewer"):
        if (candidate / "index.html").is_file():
            return candidate
    raise CozError("the viewer's files are missing (no viewer/index.html next to the cozprof package)",
                   hint="run coz from the project's source tree, or reinstall it")


def check_assets(folder):
    """Raise CozError naming the first viewer file that is missing."""
    for rel, _ in ASSETS.values():
        if not (folder / rel).is_file():
            if rel.startswith("node_modules/"):
                what = "flame-graph library" if "d3" in rel else "charting library"
                raise CozError(f"the viewer's {what} is not installed ({folder / rel} is missing)",
                               hint=SETUP_HINT)
            raise CozError(f"the viewer file {folder / rel} is missing", hint="reinstall coz")


# ------------------------------------------------------------------- data

def _finite(value):
    """Replace NaN and infinities (not JSON) with None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def analysis_json(analysis):
    """The analysis as strict JSON text (what the browser's JSON.parse accepts)."""
    return json.dumps(_finite(analysis), allow_nan=False, separators=(",", ":"))


def load_analysis_file(path):
    """Read an analysis JSON file (`coz report --json` output) for --analysis."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CozError(f"{path}: no such file",
                       hint="make it with 'coz report profile.coz --json analysis.json'") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CozError(f"{path}: cannot read it ({e})",
                       hint="check the file's permissions, or write it again with coz report --json") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise CozError(f"{path}: not valid JSON ({e})",
                       hint="make it with 'coz report profile.coz --json analysis.json'") from None
    if not isinstance(data, dict) or not isinstance(data.get("lines"), list):
        raise CozError(f"{path}: not an analysis (no \"lines\" list)",
                       hint="make it with 'coz report profile.coz --json analysis.json'")
    return data


def unavailable(reason, hint=None):
    """What locks.json or flame.json answers when there is no such data: the
    page shows the reason (and the hint) in place of the view."""
    return {"unavailable": reason, "hint": hint}


def load_locks_file(path):
    """Read a locks report (`coz locks --json` output) for --locks."""
    hint = "make it with 'coz locks profile.coz --json locks.json'"
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CozError(f"{path}: no such file", hint=hint) from None
    except (OSError, UnicodeDecodeError) as e:
        raise CozError(f"{path}: cannot read it ({e})", hint=hint) from None
    except ValueError as e:
        raise CozError(f"{path}: not valid JSON ({e})", hint=hint) from None
    if not isinstance(data, dict) or not isinstance(data.get("findings"), list) \
            or not isinstance(data.get("locks"), list):
        raise CozError(f"{path}: not a locks report (no \"findings\" and \"locks\" lists)", hint=hint)
    return data


def locks_report(profile, analysis):
    """`coz locks --json` of the profile (default thresholds), joined to the
    causal analysis already made; unavailable(...) when it has no counters."""
    from . import locks
    if profile.experiments:
        causal, note = analysis, None
    else:
        causal, note = None, "the profile has no experiments: no causal predictions"
    try:
        result = locks.analyze_locks(profile, th=locks.thresholds(), causal=causal, causal_note=note)
    except CozError as e:
        return unavailable(str(e), e.hint)
    if getattr(profile, "build_note", None):
        result["warnings"].insert(0, profile.build_note)
    return result


_WAIT_NODE = re.compile(r"\[wait: ([a-z]+)\]")


def _kind_totals(node):
    """{kind: [samples, time_ns]} of a flame subtree: its wait leaves by their
    kind, every other frame's own samples as cpu, and what it already pruned."""
    out = {}

    def add(kind, n, ns):
        t = out.setdefault(kind, [0, 0])
        t[0] += n
        t[1] += ns

    todo = [node]
    while todo:
        n = todo.pop()
        m = _WAIT_NODE.fullmatch(n["name"]) if n.get("file") is None else None
        if m:
            add(m.group(1), n["samples"], n["time_ns"])
            continue
        add("cpu", n["self_samples"], n["self_time_ns"])
        for kind, (k_n, k_ns) in (n.get("pruned") or {}).items():
            add(kind, k_n, k_ns)
        todo.extend(n["children"])
    return out


def prune_flame(tree, max_nodes=FLAME_MAX_NODES):
    """Keep the `max_nodes` widest frames of a flame tree (by time_ns). A frame's
    removed callees are summed per kind into its `pruned` field, so that the
    page can still tell CPU time from each wait kind. Returns how many frames
    were removed. A callee is never wider than its caller, so the frames kept
    form a tree."""
    widths = []
    todo = [tree]
    while todo:
        n = todo.pop()
        widths.append(n["time_ns"])
        todo.extend(n["children"])
    if len(widths) <= max_nodes:
        return 0
    widths.sort(reverse=True)
    cut = widths[max_nodes]
    removed = 0
    todo = [tree]
    while todo:
        n = todo.pop()
        keep, gone = [], []
        for c in n["children"]:
            (keep if c["time_ns"] > cut else gone).append(c)
        if gone:
            pruned = n.setdefault("pruned", {})
            for c in gone:
                for kind, (k_n, k_ns) in _kind_totals(c).items():
                    t = pruned.setdefault(kind, [0, 0])
                    t[0] += k_n
                    t[1] += k_ns
                sub = [c]
                while sub:
                    x = sub.pop()
                    removed += 1
                    sub.extend(x["children"])
            n["children"] = keep
        todo.extend(keep)
    return removed


def flame_data(profile, max_nodes=FLAME_MAX_NODES):
    """The flame graph's data for the page: the call tree of every sample kind
    per thread (conventional.flame_tree), widest frames only; unavailable(...)
    when the profile has no stacks."""
    from . import conventional
    if not conventional.has_stacks(profile):
        return unavailable("the profile has no stacks, so there is no flame graph",
                           "stacks are written by this project's runtime (coz run); upstream COZ's "
                           "profiles and older ones have none")
    tree = conventional.flame_tree(profile, kinds=frozenset(conventional.KINDS), by_thread=True)
    removed = prune_flame(tree, max_nodes)
    return {"schema": 1, "value": "time_ns", "by_thread": True, "kinds": list(conventional.KINDS),
            "pruned_nodes": removed, "tree": tree}


def profile_views(profile, analysis):
    """(locks report, flame data) of a profile (its runs as analysed)."""
    return locks_report(profile, analysis), flame_data(profile)


def split_line(spec):
    """'path:123' -> ('path', 123); None when it is not of that form."""
    path, sep, num = spec.rpartition(":")
    if not sep or not path or not _DECIMAL.fullmatch(num) or int(num) < 1:
        return None
    return path, int(num)


def _pseudo_fs_devices():
    devices = set()
    for root in PSEUDO_FS:
        try:
            devices.add(os.stat(root).st_dev)
        except OSError:
            pass
    return devices


def read_source_file(path, pseudo_devices=None):
    """The text of `path` when it is a regular, non-empty text file of at most
    SOURCE_MAX_BYTES outside /proc, /sys and /dev (a symbolic link is followed
    and its target judged); None otherwise."""
    try:
        real = os.path.realpath(path)
        if any(real == root or real.startswith(root + "/") for root in PSEUDO_FS):
            return None
        # O_NONBLOCK: opening a FIFO must not hang the server; it is refused below.
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return None
    try:
        st = os.fstat(fd)
        devices = _pseudo_fs_devices() if pseudo_devices is None else pseudo_devices
        if not stat.S_ISREG(st.st_mode) or st.st_dev in devices:
            return None
        if not 0 < st.st_size <= SOURCE_MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = None
            data = f.read(SOURCE_MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        if fd is not None:
            os.close(fd)
    if len(data) > SOURCE_MAX_BYTES or b"\0" in data:
        return None  # grew past the limit, or not text
    return data.decode("utf-8", errors="replace")


class Sources:
    """Snippets of the source files named by an analysis, and of no other file.

    A request names a file by the very string the analysis uses; only those
    strings are looked up. Relative names are tried against `search_dirs`
    (the current folder, the profiles' folders) in order.
    """

    def __init__(self, analysis, search_dirs):
        self.allowed = set()
        for rec in analysis.get("lines") or []:
            if isinstance(rec, dict):
                name = rec.get("file")
                if not isinstance(name, str) and isinstance(rec.get("line"), str):
                    parts = split_line(rec["line"])
                    name = parts[0] if parts else None
                if isinstance(name, str) and name:
                    self.allowed.add(name)
        self.search_dirs = [Path(d) for d in search_dirs]
        self._cache = {}
        self._lock = threading.Lock()

    def _read(self, name):
        """Lines of the first candidate for `name` that is a servable source file."""
        p = Path(name)
        candidates = [p] if p.is_absolute() else [d / p for d in self.search_dirs]
        devices = _pseudo_fs_devices()
        for c in candidates:
            text = read_source_file(c, devices)
            if text is not None:
                return text.splitlines()
        return None

    def _lines(self, name):
        with self._lock:
            if name not in self._cache:
                self._cache[name] = self._read(name)
            return self._cache[name]

    def snippet(self, spec, context=SNIPPET_CONTEXT_LINES):
        """{'line', 'file', 'lineno', 'first', 'lines'} or None if not allowed or not found."""
        parts = split_line(spec)
        if parts is None or parts[0] not in self.allowed:
            return None
        name, lineno = parts
        lines = self._lines(name)
        if lines is None or lineno > len(lines):
            return None
        context = max(0, min(context, SNIPPET_CONTEXT_MAX))
        first = max(1, lineno - context)
        last = min(len(lines), lineno + context)
        return {"line": spec, "file": name, "lineno": lineno, "first": first,
                "lines": lines[first - 1:last]}


def search_dirs_for(profiles=(), extra=()):
    """Folders where relative source names are looked up, in order, without repeats."""
    dirs = [Path.cwd(), *extra, *(Path(p).resolve().parent for p in profiles)]
    out = []
    for d in dirs:
        d = Path(d).resolve()
        if d not in out:
            out.append(d)
    return out


# ---------------------------------------------------------------- routing

class Response:
    def __init__(self, status, content_type="text/plain; charset=utf-8", body=b"", location=None):
        self.status = status
        self.content_type = content_type
        self.body = body if isinstance(body, bytes) else body.encode("utf-8")
        self.location = location


def _json_response(obj):
    return Response(200, "application/json; charset=utf-8", json.dumps(obj))


NEEDS_TOKEN = ("this address needs the token of coz view: open the full URL that "
               "'coz view' printed (http://127.0.0.1:PORT/TOKEN/)\n")


def new_token():
    return secrets.token_urlsafe(TOKEN_BYTES)


NOT_MADE = unavailable("coz view was not given the profiles this needs")


class App:
    """What `coz view` serves: the viewer's files, one analysis, the locks report
    and flame tree of the same profiles, and its sources, all under /<token>/."""

    def __init__(self, analysis, folder, sources, token=None, locks=None, flame=None):
        self.folder = folder
        self.analysis_body = analysis_json(analysis).encode("utf-8")
        self.data = {"/analysis.json": self.analysis_body,
                     "/locks.json": analysis_json(locks or NOT_MADE).encode("utf-8"),
                     "/flame.json": analysis_json(flame or NOT_MADE).encode("utf-8")}
        self.sources = sources
        self.token = token or new_token()
        self._token_bytes = self.token.encode("ascii")

    @property
    def root(self):
        """The path of the page: what the printed URL ends with."""
        return f"/{self.token}/"

    def _has_token(self, segment):
        return hmac.compare_digest(segment.encode("utf-8", "surrogateescape"), self._token_bytes)

    def route(self, target):
        """Answer a GET for the request target (path and query) as a Response."""
        try:
            parts = urlsplit(target)
        except ValueError:
            return Response(400, body="bad request\n")
        _, slash, rest = parts.path.partition("/")
        segment, slash2, rest = rest.partition("/")
        if not slash or not self._has_token(segment):
            return Response(403, body=NEEDS_TOKEN)
        if not slash2:  # /<token> alone: the page's relative URLs need the slash
            return Response(308, body="see " + self.root + "\n", location=self.root)
        return self._route_inside("/" + rest, parts.query)

    def _route_inside(self, path, query_text):
        if path in ASSETS:
            rel, ctype = ASSETS[path]
            try:
                return Response(200, ctype, (self.folder / rel).read_bytes())
            except OSError:
                return Response(404, body="not found\n")
        if path in self.data:
            return Response(200, "application/json; charset=utf-8", self.data[path])
        if path == "/source":
            try:
                query = parse_qs(query_text, max_num_fields=MAX_QUERY_FIELDS)
            except ValueError:
                return Response(400, body="too many query fields\n")
            spec = (query.get("line") or [""])[0]
            ctx = (query.get("context") or [""])[0]
            context = int(ctx) if _DECIMAL.fullmatch(ctx) else SNIPPET_CONTEXT_LINES
            snip = self.sources.snippet(spec, context)
            if snip is None:
                return Response(404, body="no such source line in this profile\n")
            return _json_response(snip)
        return Response(404, body="not found\n")


def _allowed_host(host, port):
    """Guard against DNS rebinding: only local names may address the server."""
    if not host:
        return True
    return host in (f"127.0.0.1:{port}", f"localhost:{port}", "127.0.0.1", "localhost")


def make_handler(app):
    class Handler(BaseHTTPRequestHandler):
        server_version = "coz-view"
        sys_version = ""

        def _answer(self):
            if not _allowed_host(self.headers.get("Host"), self.server.server_address[1]):
                return Response(403, body="forbidden host\n")
            try:
                return app.route(self.path)
            except Exception as e:  # a bug must cost one request, not the connection
                print(f"coz view: error answering a request: {type(e).__name__}: {e}", file=sys.stderr)
                return Response(500, body="internal error\n")

        def _send(self, head_only):
            resp = self._answer()
            self.send_response(resp.status)
            self.send_header("Content-Type", resp.content_type)
            self.send_header("Content-Length", str(len(resp.body)))
            if resp.location:
                self.send_header("Location", resp.location)
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Content-Security-Policy", CSP)
            self.send_header("Referrer-Policy", "no-referrer")  # the token stays in this page
            self.end_headers()
            if not head_only:
                self.wfile.write(resp.body)

        def do_GET(self):
            self._send(False)

        def do_HEAD(self):
            self._send(True)

        def log_message(self, fmt, *args):
            pass  # quiet: the terminal shows the address and errors only

    return Handler


# -------------------------------------------------------------------- CLI

def add_arguments(parser):
    parser.add_argument("profiles", nargs="*", metavar="PROFILE",
                        help="profile files to analyse (default: profile.coz)")
    parser.add_argument("--analysis", metavar="FILE",
                        help="show an analysis JSON (coz report --json) instead of profiles")
    parser.add_argument("--locks", metavar="FILE",
                        help="show this locks report (coz locks --json) in the locks view "
                             "instead of the profiles' own")
    parser.add_argument("--no-phase-correction", action="store_true",
                        help="do not apply the phase correction (eq. 8 of the COZ paper)")
    parser.add_argument("--port", type=int, default=0,
                        help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--no-browser", action="store_true",
                        help="print the address but do not open a browser")


class ViewData:
    """Everything one `coz view` serves: the analysis, the locks report and the
    flame tree (each possibly unavailable(...)), and where sources are looked up."""

    def __init__(self, analysis, locks, flame, search_dirs):
        self.analysis = analysis
        self.locks = locks
        self.flame = flame
        self.search_dirs = search_dirs


def view_data(args):
    """The ViewData for the arguments of `coz view`."""
    locks_file = load_locks_file(args.locks) if getattr(args, "locks", None) else None
    if args.analysis:
        if args.profiles:
            raise CozError("give either profiles or --analysis, not both",
                           hint="coz view PROFILE ... analyses profiles; coz view --analysis FILE shows a ready analysis")
        if args.no_phase_correction:
            raise CozError("--no-phase-correction applies to profiles, not to --analysis (already made)",
                           hint="make it without: coz report --no-phase-correction --json FILE PROFILE, "
                                "or coz view --no-phase-correction PROFILE")
        analysis = load_analysis_file(args.analysis)
        extra = [Path(args.analysis).resolve().parent]
        profiles = [p for p in analysis.get("profiles") or [] if isinstance(p, str)]
        locks = locks_file or unavailable(
            "coz view --analysis shows no locks report unless --locks names one",
            "coz view --analysis analysis.json --locks locks.json (made by coz locks PROFILE --json locks.json), "
            "or coz view PROFILE")
        flame = unavailable("coz view --analysis has no stacks for a flame graph",
                            "run coz view PROFILE: the flame graph is made from the profile's stacks")
        return ViewData(analysis, locks, flame, search_dirs_for(profiles, extra))
    profiles = args.profiles or ["profile.coz"]
    for p in profiles:
        if not Path(p).is_file():
            hint = ("profile with 'coz run --- ./program args' first, or name the profile file"
                    if not args.profiles else "check the file name; coz view takes profile files written by coz run")
            raise CozError(f"{p}: no such profile file", hint=hint)
    try:
        from . import analysis as analysis_mod
    except ImportError as e:
        raise CozError(f"the analysis module is not available ({e})",
                       hint="reinstall cozprof, or run from a complete source tree") from None
    from . import profile as profile_mod
    # As analysis.analyze_files does (the latest build of each file), with the
    # parsed profile kept for the locks report and the flame graph.
    selected = profile_mod.load(profiles).latest_builds()
    analysis = analysis_mod.analyze(selected, phase_correction=not args.no_phase_correction)
    locks, flame = profile_views(selected, analysis)
    return ViewData(analysis, locks_file or locks, flame, search_dirs_for(profiles))


def _has_display():
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def run(args):
    if not 0 <= args.port <= 65535:
        raise CozError(f"--port {args.port}: not a port number",
                       hint="give 0 to 65535; 0 picks a free port")
    folder = viewer_dir()
    check_assets(folder)
    data = view_data(args)
    analysis = data.analysis
    app = App(analysis, folder, Sources(analysis, data.search_dirs), locks=data.locks, flame=data.flame)
    try:
        server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(app))
    except OSError as e:
        raise CozError(f"cannot listen on 127.0.0.1:{args.port} ({e.strerror or e})",
                       hint="choose another port with --port, or --port 0 for any free one") from None
    server.daemon_threads = True
    url = f"http://127.0.0.1:{server.server_address[1]}{app.root}"
    if analysis.get("diagnosis"):
        print(f"coz view: {analysis['diagnosis']}", file=sys.stderr)
    try:
        print(f"coz view: serving {url} (Ctrl-C to stop)", flush=True)
        if not args.no_browser and _has_display():
            threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
        server.serve_forever()
    except KeyboardInterrupt:
        print("coz view: stopped", flush=True)
    finally:
        server.server_close()
    return 0
