"""coz report and coz plot through the command line entry point."""

import json
import os
import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO
from cozprof import cli, plot


def fx(name):
    return os.path.join(FIXTURES, name)


def test_report_table(capsys):
    assert cli.main(["report", "--no-phase-correction", fx("throughput.coz")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].startswith("1 run, 7 experiments (1 partial)")
    assert "phase correction off" in lines[0]
    assert "warning: /lib/libfoo.so has no debug information" in out
    header = next(ln for ln in lines if ln.startswith("#"))
    for column in ("line", "impact", "slope [95% CI]", "@25%", "@50%", "@100%", "exps"):
        assert column in header
    row = lines[lines.index(header) + 1]
    # impact 5/21, slope 1/2, predictions 19/168, 5/21, 41/84 (fit weighted by visits; the
    # interval of a speedup measured once comes from the prior noise: tests/fixtures/profiles/README.md)
    assert row.split() == ["1", "/src/a.c:10", "+23.8%", "+0.500", "[+0.444,", "+0.556]",
                           "+11.3%", "+23.8%", "+48.8%", "4"]
    assert "1 line/progress-point pairs left out: 1 too-few-speedups" in out


def test_report_shows_the_phase_factor_where_it_scaled_a_curve(capsys, tmp_path):
    # The hand-made phased profile of test_analysis (A alone in its phase,
    # 5 of 9 plain intervals): A's row says x0.56; the column is absent when
    # every factor is about 1 (the phase-free profile) or the correction is off.
    from test_analysis import _serial_profile
    phased = _serial_profile(tmp_path / "p.coz", phase_a=range(12))
    assert cli.main(["report", *phased]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(ln for ln in lines if ln.startswith("#"))
    assert header.split()[-2:] == ["phase", "exps"]
    row_a = next(ln for ln in lines if "/src/s.c:1" in ln)
    assert row_a.split()[-2] == "x0.56"
    for args in (_serial_profile(tmp_path / "s.coz"), ["--no-phase-correction", *phased]):
        assert cli.main(["report", *args]) == 0
        header = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("#"))
        assert "phase" not in header.split()


def test_report_json_stdout_and_file(capsys, tmp_path):
    assert cli.main(["report", "--json", "-", fx("throughput.coz")]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["lines"][0]["line"] == "/src/a.c:10"
    assert data["profiles"] == [fx("throughput.coz")]
    out = tmp_path / "a.json"
    assert cli.main(["report", "--json", str(out), fx("throughput.coz")]) == 0
    assert json.loads(out.read_text()) == data


def test_report_lines_limit_and_diagnosis(capsys):
    assert cli.main(["report", "-n", "1", "--min-points", "2", fx("throughput.coz")]) == 0
    out = capsys.readouterr().out
    assert "(1 more line; use -n to show more)" in out
    assert cli.main(["report", fx("no_progress.coz")]) == 0
    assert "nothing to report: No progress point was reached" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["report", "/nonexistent/p.coz"], "no such profile"),
    (["report", "-n", "0", "x.coz"], "expected a positive whole number"),
    (["report", "--progress-point", "nope", fx("throughput.coz")], "no progress point named"),
    (["plot", fx("throughput.coz")], "nothing to write"),
    (["plot", "-o", "out.gif", fx("throughput.coz")], "cannot tell the image format"),
    (["plot", "-o", "x.png", "--line", "zzz.c:1", fx("throughput.coz")], "no causal curve"),
    (["plot", "-o", "x.png", fx("no_progress.coz")], "no line has a causal curve"),
    # Options that were ignored: the JSON holds every line, the page every plot.
    (["report", "--json", "-", "-n", "1", fx("throughput.coz")], "-n applies to the table, not to --json"),
    (["plot", "--html", "-", "-n", "1", fx("throughput.coz")], "-n applies to -o (the image), not to --html"),
    (["plot", "--html", "-", "--line", "a.c:10", fx("throughput.coz")], "--line applies to -o"),
])
def test_user_errors_are_one_line(capsys, argv, message):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("coz: error: ") and message in err[0]


def test_plot_png_has_one_panel_per_line(tmp_path):
    out = tmp_path / "p.png"
    files = [fx("throughput.coz"), fx("latency.legacy.coz"), fx("contention.coz")]
    assert cli.main(["plot", "-o", str(out), *files]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from cozprof import analysis
    result = analysis.analyze_files(files)
    lines = plot.select_lines(result)
    assert len(lines) == 4
    fig = plot.make_figure(lines)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert len(panels) == 4
    titles = sorted(ax.get_title() for ax in panels)
    assert titles == sorted(["a.c:10", "c.c:5", "c.c:5", "b.c:20 (contention)"])
    ax = next(ax for ax in panels if ax.get_title() == "a.c:10")
    assert ax.get_xlim() == (0, 100)
    # measured points are drawn in percent
    xs, ys = ax.lines[0].get_data()
    assert list(xs) == [0, 50, 100]
    assert list(ys) == pytest.approx([0, 16, 40])


def test_plot_line_filter_and_limit(tmp_path):
    from cozprof import analysis
    result = analysis.analyze_files([fx("throughput.coz"), fx("contention.coz")])
    assert [ln["line"] for ln in plot.select_lines(result, ["b.c:20"])] == ["/src/b.c:20"]
    assert len(plot.select_lines(result, limit=1)) == 1
    for ext in ("svg", "pdf"):
        out = tmp_path / f"p.{ext}"
        assert cli.main(["plot", "-o", str(out), "--line", "a.c:10", fx("throughput.coz")]) == 0
        assert out.stat().st_size > 1000


def test_plot_html_calls_html_export(monkeypatch, tmp_path):
    import types
    calls = []
    fake = types.ModuleType("cozprof.html_export")
    fake.write = lambda analysis, path: calls.append((analysis["lines"][0]["line"], path))
    monkeypatch.setitem(sys.modules, "cozprof.html_export", fake)
    import cozprof
    monkeypatch.setattr(cozprof, "html_export", fake, raising=False)
    out = str(tmp_path / "p.html")
    assert cli.main(["plot", "--html", out, fx("throughput.coz")]) == 0
    assert calls == [("/src/a.c:10", out)]


def test_console_entry_point_runs():
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    p = subprocess.run([sys.executable, "-m", "cozprof", "report", fx("throughput.coz")],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "/src/a.c:10" in p.stdout


def test_json_target_that_is_a_profile_is_refused(tmp_path, capsys):
    import shutil

    from cozprof import cli

    prof = tmp_path / "other.coz"
    shutil.copy(os.path.join(FIXTURES, "throughput.coz"), prof)
    before = prof.read_bytes()
    assert cli.main(["report", "--json", str(prof)]) == 2
    err = capsys.readouterr().err
    assert "would overwrite what looks like a profile" in err
    assert prof.read_bytes() == before


def _without(modules, argv):
    """Runs `coz ARGV` in a Python where importing any of `modules` fails."""
    code = ("import sys\n"
            f"for m in {modules!r}:\n    sys.modules[m] = None\n"
            "from cozprof.cli import main\n"
            f"sys.exit(main({argv!r}))\n")
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)


def test_plot_without_matplotlib_is_a_one_line_error_with_the_fix(tmp_path):
    out = tmp_path / "p.png"
    r = _without(["matplotlib"], ["plot", "-o", str(out), fx("throughput.coz")])
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("coz: error: coz plot needs matplotlib")
    assert lines[1].startswith("coz: install it: ") and "-m pip install matplotlib" in lines[1]
    assert not out.exists()


def test_plot_html_needs_no_matplotlib(tmp_path):
    out = tmp_path / "p.html"
    r = _without(["matplotlib"], ["plot", "--html", str(out), fx("throughput.coz")])
    assert r.returncode == 0, r.stderr
    assert "/src/a.c:10" in out.read_text()


def test_plot_html_to_standard_output(tmp_path):
    # '-' is standard output, as for report --json and export --folded (it wrote a file named '-').
    r = _without(["matplotlib"], ["plot", "--html", "-", fx("throughput.coz")])
    assert r.returncode == 0, r.stderr
    assert r.stdout.lstrip().lower().startswith("<!doctype html") and "/src/a.c:10" in r.stdout
    assert "wrote" not in r.stderr


def test_a_missing_third_party_module_names_the_install_command():
    r = _without(["numpy"], ["report", fx("throughput.coz")])
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("coz: error: 'coz report' is not available")
    assert "-m pip install numpy" in lines[1]


@pytest.mark.parametrize("argv, profile", [(["report", "--json"], "throughput.coz"),
                                           (["export", "--folded"], "units.coz")])
def test_an_output_that_is_a_pipe_is_written_not_read(tmp_path, argv, profile):
    # Whether the output is a profile is asked of regular files only: reading a
    # FIFO (or /dev/stdout on a pipe) to find out waited forever.
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
    with open(tmp_path / "got", "w") as got:
        reader = subprocess.Popen(["cat", str(fifo)], stdout=got)
        p = subprocess.Popen([sys.executable, "-m", "cozprof", *argv, str(fifo), fx(profile)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, err = p.communicate(timeout=60)
            assert p.returncode == 0, err
            assert reader.wait(timeout=10) == 0
        finally:
            p.kill()
            reader.kill()
    assert (tmp_path / "got").read_text().strip()
