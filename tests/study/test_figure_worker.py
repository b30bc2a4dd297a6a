"""The figure worker: a forked process drawing some of the study figures beside ``write_results`` (Linux).

A figure is drawn by one process or the other; whatever happens to the worker (it dies, a figure fails in it, this
process stops with an error or Ctrl-C) costs no table and no figure, leaves nothing half-written and no process.
"""

import json
import os
import signal
import sys
import time

import pytest

import poslab.study.results as res
from poslab.study import load_study, run_study, write_results

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the figure worker is forked (Linux)")

STUDY = """
name = "worker"
n_positions = 96
dim = 16

[[encodings]]
kind = "sinusoidal"

[[encodings]]
kind = "rotary"
rotary_dim = 16
"""


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    folder = tmp_path_factory.mktemp("worker")
    (folder / "worker.toml").write_text(STUDY)
    return run_study(load_study(folder / "worker.toml"), executor="serial", progress=False)


@pytest.fixture
def workers(monkeypatch):
    """The workers started (a worker is used whatever the CPUs: the test machine may have one)."""
    started = []
    real = res._FigureWorker.__init__

    def init(self, *args, **kwargs):
        real(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(res._FigureWorker, "usable", staticmethod(lambda tables: True))
    monkeypatch.setattr(res._FigureWorker, "__init__", init)
    return started


def _figures(monkeypatch, in_worker, here_first_sleep=0.5):
    """Every study figure wrapped: ``in_worker(draw, tables, title)`` draws it in the worker; this process sleeps
    before its first figure, so that the worker takes one meanwhile."""
    main, slept = os.getpid(), []

    def wrap(draw):
        def figure(tables, title):
            if os.getpid() != main:
                return in_worker(draw, tables, title)
            if not slept and draw(tables, title) is not None:
                slept.append(True)
                time.sleep(here_first_sleep)
            return draw(tables, title)
        return figure

    monkeypatch.setattr(res, "STUDY_FIGURES", {name: wrap(draw) for name, draw in res.STUDY_FIGURES.items()})


def _no_leftovers(folder):
    return [p.name for p in folder.rglob("*") if p.name.startswith(".")]


def test_the_worker_draws_some_figures_and_the_manifest_lists_them_in_order(result, tmp_path, monkeypatch, workers):
    mark = tmp_path / "drawn in the worker"
    _figures(monkeypatch, lambda draw, tables, title: mark.touch() or draw(tables, title))
    out = write_results(result, tmp_path / "res")
    assert len(workers) == 1 and workers[0].status == "exit status 0"
    meta = json.loads((out / "manifest.json").read_text())
    order = list(res.STUDY_FIGURES)
    assert meta["figures"] == sorted(meta["figures"], key=order.index)  # the figures' order, not the order drawn
    assert {"similarity_heatmaps.png", "decay_curves.png", "rope_geometry.png", "decay_lengths.png"} <= \
        set(meta["figures"]) and mark.exists()
    assert all((out / name).stat().st_size > 0 for name in meta["figures"])
    assert meta["failed_figures"] == {} and _no_leftovers(tmp_path) == []


def test_a_worker_that_dies_costs_no_figure(result, tmp_path, monkeypatch, workers):
    def die(draw, tables, title):
        os.kill(os.getpid(), signal.SIGKILL)

    _figures(monkeypatch, die)
    with pytest.warns(RuntimeWarning, match=r"figure worker process ended \(killed by SIGKILL\) before drawing .*"
                                            r"drawn in this process instead"):
        out = write_results(result, tmp_path / "res")
    meta = json.loads((out / "manifest.json").read_text())
    assert meta["failed_figures"] == {} and len(meta["figures"]) >= 4
    assert all((out / name).stat().st_size > 0 for name in meta["figures"])
    assert _no_leftovers(tmp_path) == []


def test_a_figure_failing_in_the_worker_is_recorded_and_warned(result, tmp_path, monkeypatch, workers):
    def fail(draw, tables, title):
        if draw(tables, title) is None:
            return None
        raise ValueError("broken in the worker")

    _figures(monkeypatch, fail)
    with pytest.warns(res.FigureFailedWarning, match="could not be drawn.*broken in the worker"):
        out = write_results(result, tmp_path / "res")
    meta = json.loads((out / "manifest.json").read_text())
    assert meta["failed_figures"] and all("broken in the worker" in m for m in meta["failed_figures"].values())
    assert meta["figures"] and not set(meta["figures"]) & set(meta["failed_figures"])  # drawn here: written
    assert not any((out / name).exists() for name in meta["failed_figures"])
    assert (out / "summary.csv").is_file() and (out / "profiles.csv").is_file()
    assert workers[0].status == "exit status 0"


@pytest.mark.parametrize("error", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_an_error_or_ctrl_c_here_kills_the_worker_at_once(result, tmp_path, monkeypatch, workers, error):
    def forever(draw, tables, title):
        time.sleep(120)

    _figures(monkeypatch, forever, here_first_sleep=0.0)
    real, calls = res.write_csv, []

    def write_csv(frame, path):
        calls.append(path)
        if len(calls) == 3:  # after the worker has started (summary.csv first)
            time.sleep(0.3)
            raise error
        real(frame, path)

    monkeypatch.setattr(res, "write_csv", write_csv)
    start = time.perf_counter()
    with pytest.raises(type(error)):
        write_results(result, tmp_path / "res")
    assert time.perf_counter() - start < 20
    (worker,) = workers
    assert worker.status == "killed by SIGKILL"
    with pytest.raises(ProcessLookupError):
        os.kill(worker.pid, 0)  # reaped: no process left
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_a_figure_abandoned_with_its_folder_is_not_warned_about(result, tmp_path):
    """After an error or Ctrl-C the drawing thread may finish a figure into the removed temporary folder: that
    failure is not warned about (it would surface in whatever code runs by then), unless the drawing goes on."""
    import warnings

    def fails(tables, title):
        raise FileNotFoundError("the temporary folder is gone")

    args = ("decay_curves.png", fails, result.frames, tmp_path, None, {}, {}, res.FigureSettings())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert res._draw_figure(*args, abandoned=lambda: True) == []
    assert not caught
    with pytest.warns(res.FigureFailedWarning, match="could not be drawn"):
        assert res._draw_figure(*args) == []


def test_a_hung_worker_is_killed_and_its_figures_drawn_here(result, tmp_path, monkeypatch, workers):
    """A worker that stops reporting (a lock held at the fork, say) is killed once this process has drawn its share
    and waited its patience; nothing is lost and the command does not hang."""
    import threading

    for thread in threading.enumerate():  # an earlier test's abandoned drawing thread: its catch_warnings exit
        if thread.name == "poslab-figures":  # would restore the filters from before pytest.warns below
            thread.join(60)

    def hang(draw, tables, title):
        time.sleep(600)

    _figures(monkeypatch, hang, here_first_sleep=0.2)
    monkeypatch.setattr(res, "WORKER_PATIENCE", (0.5, 1.0))
    start = time.monotonic()
    with pytest.warns(RuntimeWarning, match=r"figure worker process ended \(killed: no figure reported for \d+ s\) "
                                            r"before drawing .*drawn in this process instead"):
        out = write_results(result, tmp_path / "res")
    assert time.monotonic() - start < 60
    meta = json.loads((out / "manifest.json").read_text())
    assert meta["failed_figures"] == {} and len(meta["figures"]) >= 4
    assert all((out / name).stat().st_size > 0 for name in meta["figures"])
    assert workers[0].status.startswith("killed: no figure reported") and _no_leftovers(tmp_path) == []
    with pytest.raises(ChildProcessError):
        os.waitpid(workers[0].pid, os.WNOHANG)  # reaped: no zombie left
