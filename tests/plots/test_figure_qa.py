"""QA of the study figures at print size (a new user's run at page and column width): fits drawn over their fitted
range only, one colour per run in every figure, legends that cover no data, texts inside the figure and apart."""

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.text import Text

from poslab.plots import STUDY_FIGURES
from poslab.plots.core import FigureSettings, print_figure, save_figure, study_colours

D = np.arange(0, 101)


def _profile(label, seed, curve, fit):
    return pd.DataFrame({"label": label, "seed": seed, "distance": D, "mean_similarity": curve,
                         "fitted_similarity": np.where(D >= 1, fit, np.nan)})


@pytest.fixture(scope="module")
def tables():
    """Three runs: a decaying one (fitted up to 30), a wave with a first minimum (fitted up to 60, interval open
    above), a stochastic one with two seeds; labels in study order a, b, c."""
    wave = np.cos(D / 20) * np.exp(-D / 200)
    profiles = pd.concat([
        _profile("gauss(a=1)", pd.NA, np.exp(-(D / 20.0) ** 2), np.exp(-(D / 21.0) ** 2)),
        _profile("wave(b=2)", pd.NA, wave, 0.9 * np.exp(-D / 40)),
        _profile("noise(c=3)", 0, 0.01 * np.sin(D), np.zeros(D.size)),
        _profile("noise(c=3)", 1, 0.01 * np.cos(D), np.zeros(D.size)),
    ], ignore_index=True)
    profiles["seed"] = profiles["seed"].astype("Int64")
    summary = pd.DataFrame({
        "label": ["gauss(a=1)", "wave(b=2)", "noise(c=3)", "noise(c=3)"], "seed": pd.array([pd.NA, pd.NA, 0, 1],
                                                                                             dtype="Int64"),
        "status": "ok", "kernel": "cosine", "fit_max_distance": [30, 60, 2, 5],
        "selected_model": ["gaussian", "exponential", None, None],
        "decay_length": [20.0, 40.0, np.nan, np.nan], "decay_length_ci_low": [18.0, 30.0, np.nan, np.nan],
        "decay_length_ci_high": [22.0, np.nan, np.nan, np.nan], "ci_level": 0.95,
        "first_minimum": [np.nan, 63.0, np.nan, 4.0], "first_minimum_similarity": [np.nan, wave[63], np.nan, -0.01]})
    return {"profiles": profiles, "summary": summary}


def _draw(name, tables, width):
    settings = FigureSettings(width=width)
    with matplotlib.rc_context(settings.rc):
        fig = STUDY_FIGURES[name](tables, "study: 101 positions, distances up to 100")
    print_figure(fig, settings)
    return fig


def _saved(fig, tmp_path, name="f.png"):
    with matplotlib.rc_context(FigureSettings().rc):
        save_figure(fig, tmp_path / name, dpi=100, close=False)
    return fig.canvas.get_renderer()


@pytest.mark.parametrize("width", ["page", "column"])
def test_fits_are_drawn_over_their_fitted_distances_only(tables, width):
    fig = _draw("decay_curves.png", tables, width)
    colours = study_colours(tables)
    ends = {}
    for ax in fig.axes:
        for line in ax.get_lines():
            if line.get_linestyle() == "--" and len(line.get_xdata()):
                x = np.asarray(line.get_xdata(), dtype=float)
                ends.setdefault(matplotlib.colors.to_hex(line.get_color()), set()).add(x[np.isfinite(
                    np.asarray(line.get_ydata(), dtype=float))].max())
    assert ends[matplotlib.colors.to_hex(colours["gauss(a=1)"])] == {30.0}  # the table's fit runs to 100
    assert ends[matplotlib.colors.to_hex(colours["wave(b=2)"])] == {60.0}
    # two seeds fitted up to 2 and 5: their mean fit is drawn where both were fitted
    assert ends[matplotlib.colors.to_hex(colours["noise(c=3)"])] == {2.0}


def test_an_interval_open_above_is_drawn_to_the_edge_with_an_arrow(tables):
    fig = _draw("decay_curves.png", tables, "page")
    arrows = [child for ax in fig.axes for child in ax.texts if getattr(child, "arrow_patch", None) is not None]
    assert len(arrows) == 2  # wave(b=2)'s interval [30, >], on both panels
    assert all(a.xy[0] == 1.0 and a.xyann[0] == 30.0 for a in arrows)
    assert any("open above" in line for line in fig._supxlabel.get_text().splitlines())


def test_a_run_keeps_its_colour_in_every_figure(tables):
    colours = study_colours(tables)
    assert list(colours) == ["gauss(a=1)", "wave(b=2)", "noise(c=3)"]
    for name in ("decay_curves.png", "first_minimum.png"):
        fig = _draw(name, tables, "page")
        legend = next(lg for ax in fig.axes for lg in [ax.get_legend(), *fig.legends] if lg is not None)
        drawn = {t.get_text().replace("\n", " "): matplotlib.colors.to_hex(h.get_color())
                 for t, h in zip(legend.get_texts(), legend.legend_handles) if h.get_linestyle() == "-"}
        shown = [label for label in colours if label in drawn]
        assert len(shown) == (3 if name == "decay_curves.png" else 2)
        for label in shown:
            assert drawn[label] == matplotlib.colors.to_hex(colours[label]), (name, label)
    first = _draw("first_minimum.png", tables, "page")
    # only wave(b=2) and noise(c=3) have a first minimum: still the study's 2nd and 3rd colours, not the 1st and 2nd
    triangles = [matplotlib.colors.to_hex(ln.get_markeredgecolor()) for ln in first.axes[0].get_lines()
                 if ln.get_marker() == "v"]
    assert triangles == [matplotlib.colors.to_hex(colours["wave(b=2)"]),
                         matplotlib.colors.to_hex(colours["noise(c=3)"])]


@pytest.mark.parametrize("width", ["page", "column"])
def test_first_minimum_legend_covers_no_triangle(tables, width, tmp_path):
    fig = _draw("first_minimum.png", tables, width)
    renderer = _saved(fig, tmp_path)
    ax = fig.axes[0]
    legends = [lg for lg in (ax.get_legend(), *fig.legends) if lg is not None]
    assert legends
    for line in ax.get_lines():
        if line.get_marker() != "v":
            continue
        x, y = ax.transData.transform((line.get_xdata()[0], line.get_ydata()[0]))
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert not (box.x0 - 5 <= x <= box.x1 + 5 and box.y0 - 5 <= y <= box.y1 + 5)
    # the seed shown is said: noise(c=3) has two seeds, one drawn
    assert "noise(c=3): seed 1 shown, seed 0 not shown" in fig._supxlabel.get_text().replace("\n", " ")
