"""Figures a journal accepts (issue 16): laid out at a print width, fonts >= 7 pt there, no text outside the figure,
marks visible on their curves, legend entries only for what is drawn, PDF / SVG beside PNG chosen in the study file,
redrawn identically by ``poslab plot`` from the tables alone."""

import json
import struct

import matplotlib
import matplotlib.colors as mcolors
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import Collection
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.text import Text

from poslab.cli import main
from poslab.plots import STUDY_FIGURES, save_figure
from poslab.plots.core import MIN_FONT_POINTS, PRINT_DPI, WIDTHS, FigureSettings, print_figure, short_labels
from poslab.plots.core import _lay_out as _layout_once
from poslab.plots.training import plot_band_emergence
from poslab.study import load_study, read_results, run_study, write_results
from poslab.study.spec import StudyError, parse_study

STUDY = """
name = "print"
n_positions = 96
dim = 32
seeds = [0, 1]

[analysis]
n_resamples = 0
heatmap_bins = 12

[figures]
formats = ["png", "svg"]
width = "page"

[[encodings]]
kind = "sinusoidal"
layout = ["interleaved", "concatenated"]

[[encodings]]
kind = "random"

[[encodings]]
kind = "rotary"
rotary_dim = 32
rope_theta = 10000

[[encodings]]
kind = "rotary"
rotary_dim = 32
rope_theta = 10000
rope_type = "linear"
factor = 2
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    folder = tmp_path_factory.mktemp("print")
    (folder / "s.toml").write_text(STUDY)
    result = run_study(load_study(folder / "s.toml"), progress=False, executor="serial")
    return write_results(result, folder / "out")


def _lay_out(fig, settings):
    """Print layout as ``poslab run`` saves the figure (laid out once at print size), then drawn."""
    print_figure(fig, settings)
    _layout_once(fig, PRINT_DPI)
    FigureCanvasAgg(fig).draw()
    return fig


def _draw_all(tables, width):
    settings = FigureSettings(width=width)
    out = {}
    for name, draw in STUDY_FIGURES.items():
        with matplotlib.rc_context(settings.rc):
            fig = draw(tables, "print: a title as long as the study's own, with its window and distances")
        if fig is not None:
            out[name] = _lay_out(fig, settings)
    return out


@pytest.fixture(scope="module")
def drawn(results):
    """width -> every study figure of ``results`` drawn at that print width (drawn once, read by every test)."""
    tables, cache = read_results(results), {}

    def at(width):
        if width not in cache:
            cache[width] = _draw_all(tables, width)
        return cache[width]

    return at


def _texts(fig):
    """The texts a figure draws: every text artist but the tick labels outside the view (never drawn)."""
    ticks = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
             for tick in axis.get_major_ticks() + axis.get_minor_ticks() for t in (tick.label1, tick.label2)}
    drawn = [t for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) for tick in axis._update_ticks()
             for t in (tick.label1, tick.label2) if tick.get_visible() and axis.get_visible() and ax.get_visible()]
    return [t for t in fig.findobj(Text) + drawn if (id(t) not in ticks or t in drawn) and t.get_visible()
            and t.get_text().strip()]


def _emergence_summary():
    rows = [{"label": f"learned(source=run, step={s})", "status": "ok", "step": float(s), "source": "run",
             "decay_length": v, "band_width_0p5": w, "summary_notes": notes, "window_dependent": moved}
            for s, v, w, notes, moved in [(0, np.nan, np.nan, "every summary: flat (no decay)", ""),
                                          (100, 3.0, 2.0, "", ""), (1500, 40.0, 30.0, "", "decay_length")]]
    rows.append({"label": "sinusoidal", "status": "ok", "step": np.nan, "decay_length": 20.0, "band_width_0p5": 9.0,
                 "summary_notes": "", "window_dependent": ""})
    return pd.DataFrame(rows)


@pytest.mark.parametrize("width", list(WIDTHS))
def test_every_text_inside_the_figure_at_7_points_or_more(drawn, width, tmp_path):
    figures = dict(drawn(width))
    with matplotlib.rc_context(FigureSettings(width=width).rc):
        figures["band_emergence.png"] = _lay_out(plot_band_emergence(_emergence_summary(), title="emergence"),
                                                 FigureSettings(width=width))
    assert {"similarity_heatmaps.png", "decay_curves.png", "decay_lengths.png", "rope_geometry.png"} <= set(figures)
    for name, fig in figures.items():
        assert fig.get_figwidth() == pytest.approx(WIDTHS[width]), name
        box = fig.bbox.padded(1.0)  # a pixel of rounding
        renderer = fig.canvas.get_renderer()
        for text in _texts(fig):
            assert text.get_fontsize() >= MIN_FONT_POINTS, (name, text.get_text(), text.get_fontsize())
            extent = text.get_window_extent(renderer)
            assert box.contains(extent.x0, extent.y0) and box.contains(extent.x1, extent.y1), \
                (name, width, text.get_text()[:60], extent, fig.bbox)
    save_figure(figures["band_emergence.png"], tmp_path / "emergence.png", dpi=PRINT_DPI)
    assert _png_size(tmp_path / "emergence.png")[0] == round(WIDTHS[width] * PRINT_DPI)  # the file: the width, exactly


def _png_size(path):
    """(width, height) in pixels from a PNG's header."""
    head = path.read_bytes()[:24]
    return struct.unpack(">II", head[16:24])


def _rgba(colour):
    return tuple(np.round(mcolors.to_rgba(colour), 3))


def test_marks_differ_from_their_curves_and_legends_show_only_what_is_drawn(drawn):
    for name, fig in drawn("page").items():
        for ax in fig.axes:
            curves = {_rgba(ln.get_color()) for ln in ax.get_lines() if ln.get_linestyle() not in ("None", "")}
            for mark in ax.get_lines():
                if mark.get_linestyle() in ("None", "") and mark.get_marker() not in ("None", None, ""):
                    face, edge = _rgba(mark.get_markerfacecolor()), _rgba(mark.get_markeredgecolor())
                    assert not (face == edge and face in curves), (name, "a mark coloured like a curve under it")
                    assert not (face == edge == _rgba(ax.get_facecolor())), (name, "a mark like the background")
        drawn_lines = [ln for ax in fig.axes for ln in ax.get_lines()]
        drawn_patches = [c for ax in fig.axes for c in ax.collections if isinstance(c, Collection)]
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
        for legend in legends:
            for handle, text in zip(legend.legend_handles, legend.get_texts()):
                if isinstance(handle, Patch):
                    assert any(np.isclose(c.get_alpha() or 1.0, handle.get_alpha() or 1.0) for c in drawn_patches), \
                        (name, text.get_text())
                elif isinstance(handle, Line2D) and handle.get_marker() not in ("None", None, ""):
                    assert any(ln.get_marker() == handle.get_marker() for ln in drawn_lines), (name, text.get_text())
                elif isinstance(handle, Line2D):
                    assert any(ln.get_linestyle() == handle.get_linestyle() for ln in drawn_lines), \
                        (name, text.get_text())


def test_heatmaps_say_their_block_size_and_what_the_diagonal_is(drawn):
    fig = drawn("page")["similarity_heatmaps.png"]
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert panels and all(ax.get_title().endswith("8 × 8 block means") for ax in panels)  # 96 positions / 12 bins
    assert any("off-diagonal pairs" in t.get_text() for t in _texts(fig))


def test_identical_curves_are_named_and_shared_parameters_factored_out(drawn):
    figures = drawn("page")
    texts = [t.get_text() for t in _texts(figures["decay_curves.png"])]
    assert any("lies under" in t and "their profiles are identical" in t for t in texts)  # the two layouts
    rope = [t.get_text() for t in _texts(figures["rope_geometry.png"])]
    assert any("all runs: rotary" in t and "rope_theta=10000" in t for t in rope)
    assert not any("rope_theta=10000" in t for t in rope if "all runs" not in t)


def test_short_labels():
    names, shared = short_labels(["rotary(factor=4, rope_type=linear, rotary_dim=128)",
                                  "rotary(mrope_section=[24, 20, 20], rotary_dim=128)"])
    assert shared == "all runs: rotary, rotary_dim=128"
    assert list(names.values()) == ["factor=4, rope_type=linear", "mrope_section=[24, 20, 20]"]
    names, _ = short_labels(["rotary(config=src/poslab/data/configs/llama-3.1-8b.json)", "rotary(config=a/b/qwen.json)"])
    assert list(names.values()) == ["llama-3.1-8b", "qwen"]  # one kind: in the title
    names, shared = short_labels(["mrope(mrope_section=24,20,20, rope_theta=5)", "mrope(mrope_section=16,20,20, rope_theta=5)"])
    assert shared == "all runs: mrope, rope_theta=5" and list(names.values()) == ["mrope_section=24,20,20",
                                                                                  "mrope_section=16,20,20"]
    names, shared = short_labels(["sinusoidal", "learned(source=gpt2)"])
    assert shared == "" and names == {"sinusoidal": "sinusoidal", "learned(source=gpt2)": "learned(source=gpt2)"}


def test_window_dependent_and_missing_summaries_are_shown_as_such():
    fig = plot_band_emergence(_emergence_summary())
    texts = [t.get_text() for t in _texts(fig)]
    assert "flat" in texts  # step 0: why there is no decay length, never a number
    assert any("moves by more than 5 %" in t for t in texts)
    ax = fig.axes[0]
    assert any(ln.get_markerfacecolor() == "white" for ln in ax.get_lines())  # the window-dependent value


def test_formats_width_in_the_manifest_and_plot_redraws_identically(results):
    meta = json.loads((results / "manifest.json").read_text())
    assert meta["figure_settings"] == {"formats": ["png", "svg"], "width": "page", "width_inches": 7.0}
    for stem in ("decay_curves", "similarity_heatmaps"):
        for fmt in ("png", "svg"):
            assert (results / f"{stem}.{fmt}").stat().st_size > 0
        assert f"{stem}.svg" in meta["figures"] and not (results / f"{stem}.pdf").exists()
    for png in results.glob("*.png"):  # every figure the study's width exactly, at 300 dpi (README)
        assert _png_size(png)[0] == round(WIDTHS["page"] * PRINT_DPI), png.name
    before = {p.name: p.read_bytes() for p in results.glob("*.png")}
    outcome = CliRunner().invoke(main, ["plot", str(results)])
    assert outcome.exit_code == 0, outcome.output
    assert {p.name: p.read_bytes() for p in results.glob("*.png")} == before
    assert json.loads((results / "manifest.json").read_text())["figure_settings"] == meta["figure_settings"]


@pytest.mark.parametrize("figures, message", [
    ({"formats": ["png", "tiff"]}, r"formats must be a non-empty list of distinct values, each one of 'png', 'pdf', "
                                   r"'svg', got \['png', 'tiff'\]"),
    ({"width": "double"}, r"width must be one of 'column', 'page', got 'double'"),
    ({"dpi": 300}, r"unknown key\(s\) dpi; valid keys: formats, width"),
    ("png", r"\[figures\] must be a table"),
])
def test_the_figures_table_is_validated(figures, message):
    study = {"name": "s", "n_positions": 16, "dim": 8, "encodings": [{"kind": "sinusoidal"}], "figures": figures}
    with pytest.raises(StudyError, match=message):
        parse_study(study, source="s.toml")
    assert parse_study({**study, "figures": {"width": "column"}}).figures == FigureSettings(width="column")
