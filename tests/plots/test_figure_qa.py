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


def _texts_apart_and_inside(fig, renderer, texts):
    """Every text's box inside the figure, and no two boxes overlapping (1 px of slack)."""
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text().strip()]
    width, height = fig.bbox.width, fig.bbox.height
    for text, box in boxes:
        assert box.x0 >= -1 and box.y0 >= -1 and box.x1 <= width + 1 and box.y1 <= height + 1, (text, box, width)
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1:]:
            overlap = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0), min(box_a.y1, box_b.y1) - max(box_a.y0,
                                                                                                         box_b.y0)
            assert min(overlap) <= 1, (a, b)


@pytest.fixture(scope="module")
def comparison():
    return pd.DataFrame({
        "label": ["learned(source=gpt2)", "random", "rotary(rope_theta=500000, rotary_dim=128)", "sinusoidal",
                  "learned(source=trained-char-lm)"],
        "summary": "decay_length", "max_distance": [1023, 1023, 1023, 1023, 255], "kernel": "cosine",
        "ci_method": ["anchor_block", "seed", "exact", "exact", "anchor_block"], "ci_level": 0.95,
        "selected_model": ["gaussian", "none", "log_law", "log_law", "power_law"],
        "fit_se": [12.3, np.nan, np.nan, np.nan, 0.5], "value": [137.6, np.nan, np.nan, np.nan, 1.8],
        "value_ci_low": [108.0, np.nan, np.nan, np.nan, 1.29], "value_ci_high": [166.3, np.nan, np.nan, np.nan, np.nan],
        "status": ["ok", "none", "none", "none", "ok"]})


@pytest.mark.parametrize("width", ["page", "column"])
def test_forest_plot_texts_marks_and_caption(comparison, width, tmp_path):
    fig = _draw("decay_lengths.png", {"comparison": comparison}, width)
    renderer = _saved(fig, tmp_path)
    ax = fig.axes[0]
    _texts_apart_and_inside(fig, renderer, [*ax.get_yticklabels(), *[t for t in ax.texts if t.get_text()],
                                            fig._suptitle, fig._supxlabel, ax.xaxis.label])
    notes = [t.get_text().replace("\n", " ") for t in ax.texts if t.get_text()]
    assert notes.count("log law (scale-free): no decay length") == 2  # never "no selected model" for a log law
    assert notes.count("no decay length: no selected model") == 1
    # the trained table's interval is open above: a bar from its low end to the axes' edge, with an arrow
    (arrow,) = [t for t in ax.texts if getattr(t, "arrow_patch", None) is not None]
    assert arrow.xy[0] == 1.0 and arrow.xyann[0] == pytest.approx(1.29)
    caption = fig._supxlabel.get_text().replace("\n", " ")
    assert "open above" in caption and "thick bar" in caption and "fit (Wald) interval" in caption
    assert "open dot" not in caption  # no seed-bootstrap decay length is drawn
    # the fit interval is visible: under its dot, not hidden beneath the bootstrap bar
    grey = [ln for ln in ax.get_lines() if matplotlib.colors.to_hex(ln.get_color()) == "#808080"]
    assert len(grey) == 2 and all(np.ptp(ln.get_ydata()) == 0 and ln.get_ydata()[0] % 1 != 0 for ln in grey)


@pytest.mark.parametrize("width", ["page", "column"])
def test_heatmaps_titles_ticks_and_seeds(width, tmp_path):
    edges = np.linspace(0, 1024, 5).astype(int)
    rows = []
    for label, seeds in (("learned(source=gpt2)", [pd.NA]), ("random", [0, 1, 2]), ("sinusoidal", [pd.NA]),
                         ("rotary(rope_theta=500000, rotary_dim=128)", [pd.NA]),
                         ("learned(source=trained-char-lm)", [pd.NA])):
        for seed in seeds:
            for i in range(4):
                for j in range(4):
                    rows.append({"label": label, "seed": seed, "row_start": edges[i], "row_stop": edges[i + 1],
                                 "col_start": edges[j], "col_stop": edges[j + 1],
                                 "mean_similarity": 1.0 - abs(i - j) / 3})
    heatmaps = pd.DataFrame(rows)
    heatmaps["seed"] = heatmaps["seed"].astype("Int64")
    fig = _draw("similarity_heatmaps.png", {"heatmaps": heatmaps}, width)
    renderer = _saved(fig, tmp_path)
    panels = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    colorbar = next(ax for ax in fig.axes if ax.get_subplotspec() is None)
    assert len({ax.get_subplotspec().colspan.start for ax in panels}) == (3 if width == "page" else 2)
    for ax in panels:
        assert list(ax.get_xticks()) == [0, 512, 1024] and list(ax.get_yticks()) == [0, 512, 1024]
    cbar_ticks = colorbar.get_xticklabels() if width == "column" else colorbar.get_yticklabels()
    _texts_apart_and_inside(fig, renderer, [*(ax.title for ax in panels), *cbar_ticks, fig._supxlabel])
    for ax in panels:
        _texts_apart_and_inside(fig, renderer, [*ax.get_xticklabels()])
    assert "random: seeds 1, 2 not shown" in fig._supxlabel.get_text().replace("\n", " ")


def test_a_legend_under_the_panels_and_the_caption_do_not_overlap(tables, tmp_path):
    fig = _draw("decay_curves.png", tables, "column")  # the legend goes under the panels; the caption under it
    renderer = _saved(fig, tmp_path)
    (legend,) = fig.legends
    caption = fig._supxlabel
    text = caption.get_text()
    box = caption.get_window_extent(renderer)
    visible = len(text.strip("\n").split("\n")) / (text.count("\n") + 1)  # its blank lines make room for the legend
    legend_box = legend.get_window_extent(renderer)
    assert legend_box.y0 >= box.y0 + box.height * visible - 1
    panels = [ax.get_tightbbox(renderer) for ax in fig.axes]
    assert legend_box.y1 <= min(p.y0 for p in panels) + 1 and legend_box.y0 >= 0


def test_the_figure_title_names_the_windows_of_the_runs_it_draws():
    """A run that failed draws no curve: the title does not name its window among the shorter ones."""
    import pandas as pd

    from poslab.study.results import figure_title

    summary = pd.DataFrame({"study": "s", "n_positions": [1024, 256], "max_distance": [1023, 255],
                            "status": ["ok", "failed"]})
    assert figure_title(summary) == "s: 1024 positions, distances up to 1023"
    summary["status"] = "ok"
    assert figure_title(summary) == "s: up to 1024 positions, distances up to 1023 (shorter windows: 256)"
    summary["status"] = "failed"  # none drawn: the study's windows, as before
    assert figure_title(summary) == "s: up to 1024 positions, distances up to 1023 (shorter windows: 256)"


@pytest.mark.parametrize("minimum, zoomed", [(30, True), (3000, False)])
def test_first_minimum_figure_shows_the_minima_not_the_whole_window(minimum, zoomed):
    """A first minimum at 30 in a 10^4-distance window would sit on the y axis: the figure shows distances up to
    FIRST_MINIMUM_ZOOM times the farthest minimum and says so; a minimum far into the window keeps the whole."""
    from poslab.plots.core import FIRST_MINIMUM_ZOOM

    d = np.arange(0, 10001)
    curve = np.cos(np.pi * d / minimum) * np.exp(-d / 5000)
    profiles = pd.DataFrame({"label": "wave", "seed": pd.array([pd.NA] * d.size, dtype="Int64"), "distance": d,
                             "mean_similarity": curve, "fitted_similarity": np.nan})
    summary = pd.DataFrame({"label": ["wave"], "seed": pd.array([pd.NA], dtype="Int64"), "status": "ok",
                            "kernel": "cosine", "first_minimum": [float(minimum)],
                            "first_minimum_similarity": [curve[minimum]]})
    with matplotlib.rc_context(FigureSettings().rc):
        fig = STUDY_FIGURES["first_minimum.png"]({"profiles": profiles, "summary": summary}, "t")
    curve_line = max(fig.axes[0].get_lines(), key=lambda line: len(line.get_xdata()))
    caption = fig._supxlabel.get_text() if fig._supxlabel is not None else ""
    if zoomed:
        assert np.max(curve_line.get_xdata()) == FIRST_MINIMUM_ZOOM * minimum
        assert f"Distances up to {FIRST_MINIMUM_ZOOM * minimum:.0f} shown" in caption and "go on to 10000 " in caption
    else:
        assert np.max(curve_line.get_xdata()) == 10000 and "shown (" not in caption
