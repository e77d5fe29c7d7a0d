"""`coz view`: serve the browser viewer and one analysis on 127.0.0.1.

Every URL starts with a random token (`/<token>/...`, printed in the address,
as Jupyter does), so other users of the machine, who can reach 127.0.0.1 too,
get nothing. Under it only an explicit set of URLs is answered: the viewer's
own files (a fixed table, never a path joined from the request), the analysis
(analysis.json) and snippets of the source files that the analysis names
(source?line=path:line), when they are regular text files outside /proc, /sys
and /dev. Everything else is refused with a short 4xx answer, so a request
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

SNIPPET_CONTEXT_LINES = 3        # default lines served above and below a line
SNIPPET_CONTEXT_MAX = 20         # a client may ask for at most this many
SOURCE_MAX_BYTES = 16 * 1024 * 1024  # larger "source files" are not read
TOKEN_BYTES = 32                 # random bytes in the URL token (43 URL-safe characters)
MAX_QUERY_FIELDS = 16            # a query with more fields is refused
PSEUDO_FS = ("/proc", "/sys", "/dev")  # never served, whatever names them

# URL under the token -> (path under the viewer folder, content type). The
# page uses the same relative paths when opened from disk, so both ways find
# the same files, and its relative requests keep the token.
ASSETS = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/css/viewer.css": ("css/viewer.css", "text/css; charset=utf-8"),
    "/js/viewer.js": ("js/viewer.js", "text/javascript; charset=utf-8"),
    "/node_modules/uplot/dist/uPlot.iife.min.js":
        ("node_modules/uplot/dist/uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    "/node_modules/uplot/dist/uPlot.min.css":
        ("node_modules/uplot/dist/uPlot.min.css", "text/css; charset=utf-8"),
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
                raise CozError(f"the viewer's charting library is not installed ({folder / rel} is missing)",
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


class App:
    """What `coz view` serves: the viewer's files, one analysis and its sources,
    all under /<token>/."""

    def __init__(self, analysis, folder, sources, token=None):
        self.folder = folder
        self.analysis_body = analysis_json(analysis).encode("utf-8")
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
        if path == "/analysis.json":
            return Response(200, "application/json; charset=utf-8", self.analysis_body)
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
    parser.add_argument("--no-phase-correction", action="store_true",
                        help="do not apply the phase correction (eq. 8 of the COZ paper)")
    parser.add_argument("--port", type=int, default=0,
                        help="port on 127.0.0.1 (default: any free port)")
    parser.add_argument("--no-browser", action="store_true",
                        help="print the address but do not open a browser")


def _analyse(args):
    """(analysis, search folders) for the arguments of `coz view`."""
    if args.analysis:
        if args.profiles:
            raise CozError("give either profiles or --analysis, not both",
                           hint="coz view PROFILE ... analyses profiles; coz view --analysis FILE shows a ready analysis")
        analysis = load_analysis_file(args.analysis)
        extra = [Path(args.analysis).resolve().parent]
        profiles = [p for p in analysis.get("profiles") or [] if isinstance(p, str)]
        return analysis, search_dirs_for(profiles, extra)
    profiles = args.profiles or ["profile.coz"]
    for p in profiles:
        if not Path(p).is_file():
            hint = ("profile with 'coz run --- ./program args' first, or name the profile file"
                    if not args.profiles else "check the file name; coz view takes profile files written by coz run")
            raise CozError(f"{p}: no such profile file", hint=hint)
    try:
        from .analysis import analyze_files
    except ImportError as e:
        raise CozError(f"the analysis module is not available ({e})",
                       hint="reinstall cozprof, or run from a complete source tree") from None
    analysis = analyze_files(profiles, phase_correction=not args.no_phase_correction)
    return analysis, search_dirs_for(profiles)


def _has_display():
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def run(args):
    if not 0 <= args.port <= 65535:
        raise CozError(f"--port {args.port}: not a port number",
                       hint="give 0 to 65535; 0 picks a free port")
    folder = viewer_dir()
    check_assets(folder)
    analysis, dirs = _analyse(args)
    app = App(analysis, folder, Sources(analysis, dirs))
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
