"""A figure of a large study stays readable and bounded: at most MAX_* labels, the first in study order, and it
says what it left out and where the rest is (issue 12 QA: a 200-run grid study drew a 2080 x 24055 px heatmap
figure and a 200-entry legend)."""

import json
import re
import struct
import warnings

import matplotlib.text
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from poslab.cli import main
from poslab.plots import STUDY_FIGURES, save_figure
from poslab.plots import core
from poslab.plots.core import MAX_CURVES, MAX_PANELS, FigureLimitWarning
from poslab.study import parse_study, run_study

N_COPIES = 200
MAX_PIXELS = 3000  # per side, at save_figure's 150 dpi


def _png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module")
def big_tables():
    """Every study table with 200 copies of each label (figures are drawn from the tables alone)."""
    spec = parse_study({"name": "big", "n_positions": 32, "dim": 8, "seeds": [0],
                        "analysis": {"heatmap_bins": 4, "n_resamples": 0},
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "rotary", "rope_theta": 100.0}]})
    tables = run_study(spec, progress=False, executor="serial").tables()
    rng = np.random.default_rng(0)
    grid = pd.DataFrame([{"label": "vit", "metric": m, "distance": d, "mean_similarity": np.exp(-d / 3)}
                         for m in ("euclidean", "along_row") for d in range(6)])
    maps = pd.DataFrame([{"label": "vit", "row": r, "col": c, "reference_row": 2, "reference_col": 2,
                          "similarity": rng.uniform(-1, 1)} for r in range(5) for c in range(5)])
    tables |= {"grid_profiles": grid, "grid_maps": maps}
    rotary = tables["summary"]["kind"] == "rotary"  # as if read from a model's config (rope_models.png)
    tables["summary"]["config"] = tables["summary"]["config"].astype(object).where(~rotary, "models/m/config.json")
    tables["nope_temperature"] = pd.DataFrame({"label": tables["inv_freq"]["label"].iloc[0],
                                               "layer_group": "full_attention", "position": [0, 8191, 16383],
                                               "query_scale": [1.0, 1.0693, 1.1099]})
    summary = tables["summary"]
    steps = pd.concat([summary.iloc[:1].assign(label=f"learned(step={s})", step=s, source="run") for s in (0, 10)])
    tables["summary"] = pd.concat([summary.assign(step=pd.NA, source=pd.NA), steps], ignore_index=True)
    big = {}
    for name, frame in tables.items():
        if "label" not in frame or not len(frame):
            big[name] = frame
            continue
        copies = []
        for k in range(N_COPIES):
            copy = frame.assign(label=frame["label"] + f", variant {k:03d} of a long parameter grid")
            if "source" in copy:
                copy["source"] = copy["source"].where(copy["source"].isna(), f"runs/char-{k:03d}")
            if "other_label" in copy:
                continue  # pairs: no figure
            copies.append(copy)
        big[name] = pd.concat(copies, ignore_index=True) if copies else frame
    return big


@pytest.mark.parametrize("filename", list(STUDY_FIGURES))
def test_every_figure_of_a_large_study_is_bounded_and_says_what_it_left_out(big_tables, filename, tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fig = STUDY_FIGURES[filename](big_tables, "big: 200 copies of every label")
    assert fig is not None
    notes = [str(w.message) for w in caught if issubclass(w.category, FigureLimitWarning)]
    assert len(notes) == 1 and "draws the first" in notes[0] and ".csv" in notes[0], notes
    assert any(t.get_text().startswith("This figure draws the first") for t in fig.findobj(matplotlib.text.Text))
    with warnings.catch_warnings():  # e.g. a legend taller than the panels: "axes sizes collapsed to zero"
        warnings.simplefilter("error", UserWarning)
        save_figure(fig, tmp_path / filename)
    width, height = _png_size(tmp_path / filename)
    assert width <= MAX_PIXELS and height <= MAX_PIXELS, (width, height)


def test_the_first_labels_in_study_order_are_drawn(big_tables):
    with pytest.warns(FigureLimitWarning, match=f"first {MAX_PANELS} of {2 * N_COPIES} labels' heatmaps"):
        fig = core.plot_similarity_heatmaps(big_tables["heatmaps"])
    titles = [re.sub(r"\s", "", ax.get_title().rpartition("\n")[0]) for ax in fig.axes if ax.get_title()]
    assert titles == [re.sub(r"\s", "", label) for label in pd.unique(big_tables["heatmaps"]["label"])][:MAX_PANELS]
    with pytest.warns(FigureLimitWarning, match=f"the other {2 * N_COPIES - MAX_CURVES} are in profiles.csv"):
        fig = core.plot_decay_curves(big_tables["profiles"])
    assert len(fig.axes[0].get_lines()) <= 3 * MAX_CURVES + 1  # profile, fit, mark per label; the zero line


def test_a_small_study_draws_everything_without_a_note():
    frame = pd.DataFrame({"label": ["a"] * 4, "seed": pd.array([pd.NA] * 4, dtype="Int64"), "row_start": [0, 0, 2, 2],
                          "row_stop": [2, 2, 4, 4], "col_start": [0, 2, 0, 2], "col_stop": [2, 4, 2, 4],
                          "mean_similarity": [1.0, 0.5, 0.5, 1.0]})
    with warnings.catch_warnings():
        warnings.simplefilter("error", FigureLimitWarning)
        fig = core.plot_similarity_heatmaps(frame)
    assert not [t for t in fig.findobj(matplotlib.text.Text) if "This figure" in t.get_text()]  # only the caption of what a cell is


def test_run_and_plot_name_the_figure_in_the_console_and_the_manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(core, "MAX_PANELS", 4)
    (tmp_path / "s.toml").write_text('name = "many"\nn_positions = 32\ndim = 8\n[analysis]\nheatmap_bins = 4\n'
                                     'n_resamples = 0\n[[encodings]]\nkind = "sinusoidal"\n'
                                     'base = [10.0, 20.0, 40.0, 80.0, 160.0, 320.0]\n')
    out = tmp_path / "res"
    result = CliRunner().invoke(main, ["run", str(tmp_path / "s.toml"), "--out", str(out), "--no-progress",
                                       "--executor", "serial"])
    assert result.exit_code == 0, result.output
    line = "warning: similarity_heatmaps.png draws the first 4 of 6 labels' heatmaps (study order); the other 2 " \
           "are in heatmaps.csv"
    assert line in result.output
    left_out = json.loads((out / "manifest.json").read_text())["figures_left_out"]
    assert left_out == {"similarity_heatmaps.png": line.removeprefix("warning: similarity_heatmaps.png ")}
    replot = CliRunner().invoke(main, ["plot", str(out)])
    assert replot.exit_code == 0 and line in replot.output
    assert json.loads((out / "manifest.json").read_text())["figures_left_out"] == left_out
