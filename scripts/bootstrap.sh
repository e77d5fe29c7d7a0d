#!/usr/bin/env bash
# One entry point for a fresh Debian 12 machine (run as root, or with sudo
# available): installs what is missing, builds, then does what it is asked.
#
#   scripts/bootstrap.sh example   install, build, profile the bundled example
#   scripts/bootstrap.sh test      install, build, run every test
#   scripts/bootstrap.sh build     install and build only
#   scripts/bootstrap.sh tools     only the tools the export tests run (pprof, inferno, speedscope)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD=${COZ_BUILD_DIR:-$ROOT/build}
VENV=${COZ_VENV:-$ROOT/.venv}

# Debian packages: build tools and libraries, the upstream peer (coz-profiler),
# the browser for viewer tests, the programs the hostile-world tests run,
# strace (a test that the runtime opens no /proc file it need not), and
# Linux perf (benchmarks/overhead.py's reference for the cost of sampling).
APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libdw-dev libelf-dev libunwind-dev libgtest-dev elfutils dwz
  python3 python3-venv python3-pip nodejs npm chromium
  coz-profiler libjemalloc2 libtcmalloc-minimal4 default-jdk-headless perl strace
  linux-perf
)

log() { printf '==> %s\n' "$*" >&2; }

install_apt() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  # A Rust compiler for the Rust program of the end-to-end tests: rustup's
  # when there is one, else Debian's.
  if ! command -v rustc >/dev/null && [ ! -x "$HOME/.cargo/bin/rustc" ]; then missing+=(rustc); fi
  # node and python may come from elsewhere (nvm, pyenv): do not fight them.
  if command -v node >/dev/null && command -v npm >/dev/null; then
    missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
  fi
  if command -v python3 >/dev/null && python3 -c 'import venv, ensurepip' 2>/dev/null; then
    missing=("${missing[@]/python3-venv}"); missing=("${missing[@]/python3-pip}"); missing=("${missing[@]/python3}")
  fi
  local want=()
  for p in "${missing[@]}"; do [ -n "$p" ] && want+=("$p"); done
  [ ${#want[@]} -eq 0 ] && return 0
  log "installing Debian packages: ${want[*]}"
  local SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
}

install_python() {
  if [ ! -x "$VENV/bin/python" ]; then
    log "creating the Python environment in $VENV"
    python3 -m venv "$VENV"
  fi
  # (Also when the installed `coz` is an older python/bin/coz: pip copies that
  # file at install time, only its first line changed. Once built, the native
  # front stands in its place: install_front.)
  if ! "$VENV/bin/python" -c 'import cozprof, matplotlib, numpy, pytest, jsonschema' 2>/dev/null ||
     { [ "$(head -c 4 "$VENV/bin/coz" 2>/dev/null)" != $'\x7fELF' ] &&
       ! cmp -s <(tail -n +2 "$VENV/bin/coz" 2>/dev/null) <(tail -n +2 "$ROOT/python/bin/coz"); }; then
    log "installing the coz Python package and its dependencies"
    "$VENV/bin/pip" install -q --disable-pip-version-check -e "$ROOT[test]"
  fi
  # The package's compiled bytecode: an editable install leaves it to the
  # first import, which PYTHONDONTWRITEBYTECODE (set on some hosts) forbids,
  # and every `coz run` then compiled the launcher and the profile parser
  # again (tens of milliseconds at each launch and exit).
  "$VENV/bin/python" -m compileall -q "$ROOT/python/cozprof" >/dev/null
}

# The viewer's packages (uplot, d3, d3-flame-graph, playwright-core): every one
# that viewer/package.json names must be installed at the version it pins, so
# that a package added to it later is installed too on the next run.
install_node() {
  local stale
  stale=$(cd "$ROOT/viewer" && node -e '
    const fs = require("fs"), p = require("./package.json");
    const want = Object.assign({}, p.dependencies, p.devDependencies);
    for (const [name, version] of Object.entries(want)) {
      let got = null;
      try { got = JSON.parse(fs.readFileSync("node_modules/" + name + "/package.json", "utf8")).version; } catch (e) {}
      if (got !== version) console.log(name + " " + (got || "missing") + " (wants " + version + ")");
    }') || stale="(node failed to read viewer/package.json)"
  if [ -n "$stale" ]; then
    log "installing the viewer's npm packages: $(echo "$stale" | paste -sd, -)"
    (cd "$ROOT/viewer" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

# Tools the export tests run on coz's output (docs/conventional.md): pprof built
# from its Go module when Go is present, inferno (FlameGraph's Rust port) when
# cargo is, and speedscope's npm package for its file-format schema. They go to
# $BUILD/tools; a tool that cannot be had is said, and its tests say why they skip.
PPROF_VERSION=v0.0.0-20261016150608-1facf8f91b50
INFERNO_VERSION=0.12.8
TOOLS=$BUILD/tools

install_tools() {
  local go cargo
  go=$(command -v go || true)
  [ -n "$go" ] || [ ! -x /usr/local/go/bin/go ] || go=/usr/local/go/bin/go
  cargo=$(command -v cargo || true)
  [ -n "$cargo" ] || [ ! -x "$HOME/.cargo/bin/cargo" ] || cargo=$HOME/.cargo/bin/cargo
  if [ ! -x "$TOOLS/bin/pprof" ]; then
    if [ -n "$go" ]; then
      log "building pprof $PPROF_VERSION from its Go module (about a minute)"
      GOBIN="$TOOLS/bin" GOFLAGS=-mod=mod "$go" install "github.com/google/pprof@$PPROF_VERSION" \
        || log "pprof could not be built: the pprof export tests will fail"
    else
      log "no Go toolchain: pprof is not built and the pprof export tests skip"
    fi
  fi
  if [ ! -x "$TOOLS/bin/inferno-flamegraph" ]; then
    if [ -n "$cargo" ]; then
      log "building inferno $INFERNO_VERSION (FlameGraph in Rust; about a minute)"
      "$cargo" install -q inferno --version "$INFERNO_VERSION" --locked --no-default-features \
        --features cli --root "$TOOLS" || log "inferno could not be built: the folded-stack tests will fail"
    else
      log "no cargo: inferno is not built and the FlameGraph tests skip"
    fi
  fi
  if [ ! -f "$ROOT/tests/tools/node_modules/speedscope/dist/release/file-format-schema.json" ]; then
    log "installing speedscope's npm package (its file-format schema)"
    (cd "$ROOT/tests/tools" && npm ci --no-audit --no-fund --loglevel=error)
  fi
}

build() {
  log "building in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCOZ_PYTHON="$VENV/bin/python3" >/dev/null
  cmake --build "$BUILD"
}

# The environment's `coz` becomes the native front (libcoz/coz_front.c), which
# starts coz-perf-warmup before the interpreter: a cold `coz run` reached main
# about 5 ms sooner. A copy, not a link: pip writes python/bin/coz at that
# path when it installs the package again, and must not write into the build.
install_front() {
  if ! cmp -s "$BUILD/libcoz/coz" "$VENV/bin/coz"; then
    install -m 755 "$BUILD/libcoz/coz" "$VENV/bin/coz.new" && mv -f "$VENV/bin/coz.new" "$VENV/bin/coz"
  fi
}

setup() {
  install_apt
  install_python
  install_node
  build
  install_front
  install_tools
}

run_example() {
  # benchmarks/serial_chain.c: line A takes 2/3 of each iteration, line B 1/3.
  local out="$ROOT/profile.coz"
  rm -f "$out"
  log "profiling benchmarks/serial_chain (about 10 seconds)"
  "$VENV/bin/coz" run -o "$out" --- "$BUILD/benchmarks/serial_chain" iters=4000
  "$VENV/bin/coz" report "$out"
  echo
  echo "The profile is $out"
  echo "  $VENV/bin/coz report $out                  # this table again"
  echo "  $VENV/bin/coz plot -o profile.png $out     # causal plots (matplotlib)"
  echo "  $VENV/bin/coz view $out                    # every plot in the browser"
}

run_tests() {
  local failed=0
  log "unit tests (GoogleTest, via ctest)"
  ctest --test-dir "$BUILD" --output-on-failure -j2 || failed=1
  log "Python and end-to-end tests (pytest)"
  COZ_BUILD_DIR="$BUILD" PATH="$VENV/bin:$PATH" "$VENV/bin/python" -m pytest -q -rs -p no:cacheprovider "$ROOT/tests" || failed=1
  log "viewer tests (node --test, Playwright with Debian's Chromium)"
  (cd "$ROOT/viewer" && COZ_PYTHON="$VENV/bin/python" node --test tests/) || failed=1
  return $failed
}

case "${1:-}" in
  example) setup; run_example ;;
  test) setup; run_tests ;;
  build) setup ;;
  tools) install_tools ;;
  *) echo "usage: scripts/bootstrap.sh example|test|build|tools" >&2; exit 2 ;;
esac
