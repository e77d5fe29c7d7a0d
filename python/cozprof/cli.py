"""Entry point of the `coz` command: dispatches to one module per subcommand.

Each subcommand module exposes `add_arguments(parser)` and `run(args) -> int`.
Argument parsing is pure (see `parse_args`); only `main` prints and exits.
"""

import sys

from .errors import EXIT_LAUNCHER_ERROR, EXIT_USER_ERROR, CozError

SUBCOMMANDS = {
    "run": ("launcher", "profile a program: coz run [options] --- command args"),
    "report": ("report", "print a ranked table of lines from profiles"),
    "plot": ("plot", "draw causal plots with matplotlib (or --html for one page)"),
    "view": ("server", "serve the browser viewer on 127.0.0.1"),
    "locks": ("locks_report", "SyncPerf's report of locks and thread groups, joined to the causal profile"),
    "export": ("export", "write the conventional profile for pprof, FlameGraph or speedscope"),
}


def _terminal_columns():
    """shutil.get_terminal_size().columns without importing shutil (with zlib, bz2
    and lzma), which argparse does for every argument it adds: $COLUMNS, else the
    terminal of standard output, else 80."""
    import os

    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _parser_class():
    """The ArgumentParser of every subcommand: errors as CozError, help as wide
    as the terminal. argparse is imported here, not with this module: `coz run`
    parses its options without it (launcher.parse_fast)."""
    import argparse

    class Formatter(argparse.HelpFormatter):
        def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
            super().__init__(prog, indent_increment, max_help_position,
                             _terminal_columns() - 2 if width is None else width)

    class Parser(argparse.ArgumentParser):
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("formatter_class", Formatter)
            super().__init__(*args, **kwargs)

        def error(self, message):
            raise CozError(message, hint=f"see '{self.prog} --help'")

    return Parser


class _Unavailable:
    """Stands in for a subcommand module that cannot be imported."""

    def __init__(self, name, error):
        self.name = name
        self.error = error

    def add_arguments(self, parser):
        parser.add_argument("rest", nargs="*", help="(unavailable)")

    def run(self, args):
        missing = getattr(self.error, "name", None)
        if isinstance(self.error, ModuleNotFoundError) and missing and not missing.startswith("cozprof"):
            # A third-party module (numpy, matplotlib): say how to install it.
            import shlex

            top = missing.split(".")[0]
            hint = f"install it: {shlex.quote(sys.executable)} -m pip install {top}"
        else:
            hint = "reinstall cozprof, or run from a complete source tree"
        raise CozError(f"'coz {self.name}' is not available: {self.error}", hint=hint)


def version():
    """The version of the code that runs (`cozprof.__version__`, which the tests
    keep equal to pyproject.toml's); read here rather than from the installed
    metadata, which may belong to another copy than the one on sys.path."""
    from . import __version__
    return __version__


NO_SUBCOMMAND = ""  # `only` value that imports no subcommand module (coz --version, --help)


def build_parser(only=None):
    """The whole parser, or with `only` the options of that subcommand alone:
    its module is the only one imported (`coz run` then starts without numpy
    and matplotlib, which the program's start-up would otherwise wait for).
    With `only=NO_SUBCOMMAND` no module is imported at all."""
    import importlib

    parser_class = _parser_class()
    parser = parser_class(prog="coz", description="Causal profiler for native code on Linux.")
    parser.add_argument("--version", action="version", version=f"coz {version()}",
                        help="print the version of coz and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=parser_class)
    sub.required = True
    for name, (module, help_text) in SUBCOMMANDS.items():
        if only and name != only:
            continue  # not built: a parser costs ~1 ms (gettext looks for catalogs), and `coz run` waits for it
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is not None and name != only:
            continue  # NO_SUBCOMMAND: listed by `coz --help`, not imported
        try:
            mod = importlib.import_module(f".{module}", __package__)
        except ImportError as e:
            # One broken or missing part must not take the other subcommands down.
            mod = _Unavailable(name, e)
        mod.add_arguments(p)
        p.set_defaults(_module=mod)
    return parser


def parse_args(argv):
    """Parse `argv` (without the program name). Raises CozError on bad input."""
    if argv and argv[0] == "run":
        # Everything after '---' belongs to the profiled command, untouched.
        from . import launcher

        return launcher.parse_run_args(lambda: build_parser(only="run"), argv)
    only = argv[0] if argv and argv[0] in SUBCOMMANDS else NO_SUBCOMMAND
    return build_parser(only=only).parse_args(argv)


def main(argv=None):
    if argv is not None:
        return _main(argv)
    running = sys.argv[1:2] == ["run"]
    warmup = spawned = None
    if running:
        from . import library

        warmup = library.adopt_perf_warmup() or library.start_perf_warmup()
        from . import launcher

        spawned = launcher.adopt_spawned()  # the native front's started program
    # The command's own streams: no traceback for a character the locale's
    # encoding lacks, file names' bytes as typed (output.py).
    from . import output

    output.install()
    try:
        status = _main(sys.argv[1:], spawned)
    finally:
        if warmup is not None:
            library.stop_perf_warmup(warmup)
    if running:
        _end_now(status)
    return status


def _end_now(status):
    """End the `coz` command with `status` now, its output flushed, without the
    interpreter's finalization: freeing every module and object took 3-5 ms
    after the profiled program had ended, which `coz run` adds to its run. Left
    to the normal exit when a flush fails, which reports it as it does."""
    import os

    if not isinstance(status, int) or not 0 <= status <= 255:
        return
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        return
    os._exit(status)


def _main(argv, spawned=None):
    """`spawned`: the program the native front started for `coz run`
    (launcher.Spawned), which run() waits for."""
    try:
        try:
            args = parse_args(argv)
        except (CozError, SystemExit) as e:
            if spawned is not None:  # the front takes only what the launcher takes: a bug
                from . import launcher

                launcher.abandon(spawned, str(e) if isinstance(e, CozError) else "its parser exited")
            raise
        if spawned is not None:
            args.spawned = spawned
        return args._module.run(args)
    except CozError as e:
        print(f"coz: error: {e}", file=sys.stderr)
        if e.hint:
            print(f"coz: {e.hint}", file=sys.stderr)
        if e.status is not None:
            return e.status
        # `coz run` exits with the program's status: its own errors use 125, as `env` does.
        return EXIT_LAUNCHER_ERROR if argv and argv[0] == "run" else EXIT_USER_ERROR
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
