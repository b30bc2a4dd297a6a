"""Progress on stderr: a bar on a terminal, one plain line per stage on a pipe or in CI, nothing with --no-progress."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest
from click.testing import CliRunner

from poslab.cli import main
from poslab.study.progress import Progress, default_style

ONE_RUN = """
name = "one"
n_positions = 96
dim = 8
seeds = [0]

[analysis]
n_resamples = 40

[[encodings]]
kind = "random"
"""

TWO_RUNS = ONE_RUN.replace("seeds = [0]", "seeds = [0, 1]")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _run(tmp_path, text, *args, env=None):
    (tmp_path / "s.toml").write_text(text)
    result = CliRunner().invoke(main, ["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "res"), *args],
                                env=env)
    assert result.exit_code == 0, result.output
    return result


def test_a_single_run_on_a_pipe_prints_one_plain_line_per_stage(tmp_path):
    """Stage by stage, with the steps inside and the bootstrap's count; then the tables and figures; no bar."""
    result = _run(tmp_path, ONE_RUN, "--executor", "serial")
    err = result.stderr
    assert "\r" not in err and "\x1b" not in err  # no bar, no cursor movement
    lines = err.splitlines()
    stages = [line for line in lines if line.startswith("random seed 0: ")]
    names = [line.split(": ", 1)[1].split(" ")[0] for line in stages]
    assert names[:3] == ["encoding", "heatmap", "properties"]
    assert len(names) == len(set(names))  # one line per stage
    assert {"profile", "decay", "bootstrap", "window_sensitivity"} <= set(names)
    profile = next(line for line in stages if line.split(": ", 1)[1].startswith("profile "))
    assert re.search(r"bootstrap \(40 resamples\) \d+\.\d s", profile), profile
    assert "fits " in profile
    properties = next(line for line in stages if line.split(": ", 1)[1].startswith("properties "))
    assert "anchor blocks " in properties  # the profile's mean is their sums: made where it is first asked for
    n_tables = len(list((tmp_path / "res").glob("*.csv")))
    assert any(re.fullmatch(rf"tables: {n_tables}/{n_tables} in \d+\.\d s", line) for line in lines), err
    n_figures = len(list((tmp_path / "res").glob("*.png")))  # drawn figures, not the figure functions tried
    assert any(re.fullmatch(rf"figures: {n_figures}/{n_figures} in \d+\.\d s", line) for line in lines), err
    assert any(line.startswith("comparison: ") for line in lines)
    # results and the console summary stay on stdout
    assert "random seed 0" not in result.stdout and "wrote " in result.stdout


def test_runs_on_a_pipe_give_one_line_for_all_runs(tmp_path):
    err = _run(tmp_path, TWO_RUNS, "--executor", "serial").stderr
    assert "\r" not in err
    assert re.search(r"^runs: 2/2 in \d+\.\d s$", err, re.M), err
    assert "heatmap" not in err  # several runs: no stage detail


def test_no_progress_prints_none(tmp_path):
    result = _run(tmp_path, ONE_RUN, "--executor", "serial", "--no-progress")
    assert result.stderr.splitlines() == [line for line in result.stderr.splitlines() if line.startswith("study one")]


def test_ci_behaves_as_a_pipe(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    assert default_style(_Terminal()) == "bar"
    assert default_style(io.StringIO()) == "lines"
    for value in ("true", "1", "yes"):
        monkeypatch.setenv("CI", value)
        assert default_style(_Terminal()) == "lines"
    monkeypatch.setenv("CI", "false")
    assert default_style(_Terminal()) == "bar"
    monkeypatch.setenv("CI", "true")
    out = _Terminal()
    with Progress(file=out).task("figures", total=2) as task:
        task.advance(2)
    assert "\r" not in out.getvalue() and out.getvalue().startswith("figures: 2/2 in ")


def test_a_terminal_gets_a_bar_cleared_at_the_end(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    out = _Terminal()
    progress = Progress(file=out)
    assert progress.style == "bar"
    with progress.task("one", total=2, unit="stages", each=True) as task:
        for stage in ("profile", "fits"):
            with task.item(stage), progress.step("bootstrap", 3, "resamples") as step:
                step("refits", 3)
    text = out.getvalue()
    assert "\r" in text and "one: 0/2 stages" in text and "\n" not in text  # drawn in place, no lines left


def test_lines_say_steps_with_their_own_time_and_counts_only_when_reported():
    out = io.StringIO()
    progress = Progress(file=out)
    with progress.task("run", total=1, each=True) as task, task.item("profile"):
        with progress.step("bootstrap", 10, "resamples") as step:
            with progress.step("fits"):
                pass
            step("summaries", 10)
        with progress.step("window 24 positions", 10, "resamples"):
            pass  # exact: no resamples drawn, no count claimed
        with progress.step("kernel") as step:
            step.cancel()
    (line,) = out.getvalue().splitlines()
    assert re.fullmatch(r"run: profile \d\.\d s \(fits \d\.\d s; bootstrap \(10 resamples\) \d\.\d s; "
                        r"window 24 positions \d\.\d s\)", line), line


def test_a_task_left_by_an_error_prints_no_line():
    out = io.StringIO()
    with pytest.raises(KeyboardInterrupt):
        with Progress(file=out).task("figures", total=3) as task:
            task.advance()
            raise KeyboardInterrupt
    assert out.getvalue() == ""


def test_off_prints_nothing():
    out = io.StringIO()
    progress = Progress(False, file=out)
    for value in progress.iterate("tables", [1, 2]):
        pass
    assert out.getvalue() == "" and progress.style == "off"


def test_the_bootstrap_callback_changes_nothing():
    from poslab.analysis import fit_decay
    from poslab.analysis.bootstrap import bootstrap_units

    rng = np.random.default_rng(0)
    distance = np.arange(200.0)
    counts = np.full((16, distance.size), 10.0)
    sums = (np.exp(-distance / 30.0) + 0.05 * rng.standard_normal((16, distance.size))) * counts
    profile = sums.sum(axis=0) / counts.sum(axis=0)
    fits = fit_decay(distance[1:], profile[1:], models=("exponential",))
    summarise = lambda d, profiles: {"mean": profiles.mean(axis=1)}  # noqa: E731
    calls = []
    kwargs = dict(fits=fits, thresholds=(0.5,), summarise=summarise)
    plain = bootstrap_units(distance, sums, counts, 30, np.random.default_rng(1), **kwargs)
    told = bootstrap_units(distance, sums, counts, 30, np.random.default_rng(1), **kwargs,
                           progress=lambda *a: calls.append(a))
    assert np.array_equal(plain.decay_lengths, told.decay_lengths, equal_nan=True)
    assert np.array_equal(plain.summaries["mean"], told.summaries["mean"])
    parts = [what for what, *_ in calls]
    assert parts == sorted(parts, key=["distances", "refits", "summaries"].index)
    assert calls[-1] == ("summaries", 30, 30) and ("refits", 30, 30) in calls and ("distances", 200, 200) in calls


def test_the_figure_count_counts_drawn_figures(tmp_path, monkeypatch):
    """figures: drawn / drawable (QA: "figures 10/10" counted the figure functions, 5 of which drew nothing); a
    failed figure is not counted."""
    import matplotlib.pyplot as plt
    import pandas as pd

    from poslab.plots import STUDY_FIGURES
    from poslab.study.results import drawable, write_figures

    tables = {"summary": pd.DataFrame({"label": ["a"]}), "profiles": pd.DataFrame()}
    calls = []

    def draws(tables, title):
        calls.append("ok")
        return plt.figure()

    def fails(tables, title):
        raise RuntimeError("broken")

    names = list(STUDY_FIGURES)
    figures = {names[0]: draws, names[1]: fails, **{n: (lambda t, title: None) for n in names[2:]}}
    monkeypatch.setattr("poslab.study.results.STUDY_FIGURES", figures)
    monkeypatch.setattr("poslab.study.results.drawable", lambda tables: names[:2])
    out = io.StringIO()
    with pytest.warns(UserWarning, match="could not be drawn"):
        written = write_figures(tables, tmp_path, progress=Progress(file=out))
    assert [p.name for p in written] == [names[0]] and calls == ["ok"]
    assert re.fullmatch(r"figures: 1/2 in \d+\.\d s\n", out.getvalue()), out.getvalue()
    assert drawable({}) == []
