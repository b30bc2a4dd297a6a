"""Tests for poslab.plots: figures are checked by what they draw, not only that they draw."""

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from poslab.plots import plot_decay_curves, plot_similarity_heatmaps, save_figure

N, BINS = 64, 8
EDGES = np.linspace(0, N, BINS + 1).astype(int)


def _analytic(scale, seed=0):
    centres = (EDGES[:-1] + EDGES[1:]) / 2
    m = np.exp(-np.abs(centres[:, None] - centres[None, :]) / scale)
    return m - 0.01 * seed  # seeds differ, so the chosen one is identifiable


def _blocks(label, seed, matrix, edges=EDGES):
    rows = [dict(label=label, kind=label.split("(")[0], seed=seed, row_start=edges[a], row_stop=edges[a + 1],
                 col_start=edges[b], col_stop=edges[b + 1], mean_similarity=matrix[a, b])
            for a in range(len(edges) - 1) for b in range(len(edges) - 1)]
    return pd.DataFrame(rows)


@pytest.fixture
def heatmaps():
    parts = [_blocks("sinusoidal", pd.NA, _analytic(10.0)),
             _blocks("random", 7, _analytic(3.0, seed=7)),
             _blocks("random", 2, _analytic(3.0, seed=2))]
    df = pd.concat(parts, ignore_index=True)
    df["seed"] = df["seed"].astype("Int64")
    return df


DIST = np.arange(0, 33)
LEARNED_SEEDS = {0: np.exp(-DIST / 5.0), 1: np.exp(-DIST / 6.0), 2: np.exp(-DIST / 8.0)}


@pytest.fixture
def profiles():
    def rows(label, seed, y, fit):
        fit = np.where(DIST == 0, np.nan, fit)
        return pd.DataFrame(dict(study="t", label=label, kind=label, seed=seed, distance=DIST, mean_similarity=y,
                                 std_similarity=0.1, n_pairs=100 - DIST, fitted_similarity=fit))
    parts = [rows("sinusoidal", pd.NA, np.cos(DIST / 10.0), np.exp(-DIST / 12.0))]
    parts += [rows("learned", s, y, np.exp(-DIST / (5.0 + s))) for s, y in LEARNED_SEEDS.items()]
    parts += [rows("random", 0, 0.01 * np.sin(DIST), np.full(DIST.size, np.nan))]
    df = pd.concat(parts, ignore_index=True)
    df["seed"] = df["seed"].astype("Int64")
    return df


def test_heatmaps_one_image_per_label_with_exact_values(heatmaps):
    fig = plot_similarity_heatmaps(heatmaps)
    assert isinstance(fig, Figure)
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == 2
    expected = {"sinusoidal": _analytic(10.0), "random": _analytic(3.0, seed=2)}  # "first" = smallest seed
    for ax, label in zip(panels, ["sinusoidal", "random"]):
        image = ax.get_images()[0]
        assert label in ax.get_title()
        np.testing.assert_allclose(np.asarray(image.get_array()), expected[label], rtol=0, atol=1e-12)
        assert tuple(image.get_extent()) == (0, N, N, 0)
        assert image.get_clim() == (-1.0, 1.0)
        assert ax.get_xlabel() in ("position j", "")
    assert "seed 2" in panels[1].get_title() and "seed" not in panels[0].get_title()
    assert panels[0].get_ylabel() == "position i"
    colorbars = [ax for ax in fig.axes if ax.get_ylabel() == "cosine similarity"]
    assert len(colorbars) == 1


def test_heatmaps_explicit_seed_labels_order_and_wrapping(heatmaps):
    long = "rotary(rope_theta=500000, rotary_dim=128, scaling=yarn, factor=4)"
    df = pd.concat([heatmaps, _blocks(long, pd.NA, _analytic(4.0)).astype({"seed": "Int64"})], ignore_index=True)
    fig = plot_similarity_heatmaps(df, labels=[long, "random"], seed=7)
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == 2
    assert "\n" in panels[0].get_title() and panels[0].get_title().replace("\n", " ") == long + " 8 × 8 block means"
    assert "seed 7" in panels[1].get_title()
    np.testing.assert_allclose(panels[1].get_images()[0].get_array(), _analytic(3.0, seed=7), atol=1e-12)
    with pytest.raises(ValueError, match="seed must be"):
        plot_similarity_heatmaps(heatmaps, seed=99)
    with pytest.raises(ValueError, match="not in heatmaps"):
        plot_similarity_heatmaps(heatmaps, labels=["alibi"])


def test_heatmaps_wrap_and_different_sizes(heatmaps):
    edges = np.linspace(0, 100, 9).astype(int)  # a run with 100 positions, non-uniform widths
    parts = [heatmaps] + [_blocks(f"lab{k}", pd.NA, _analytic(2.0), edges) for k in range(4)]
    df = pd.concat(parts, ignore_index=True).astype({"seed": "Int64"})
    fig = plot_similarity_heatmaps(df)
    panels = [ax for ax in fig.axes if ax.get_images()]
    assert len(panels) == 6
    rows = {round(ax.get_position().y0, 3) for ax in panels}
    assert len(rows) == 2  # more than 4 panels wrap into 2 rows
    assert tuple(panels[-1].get_images()[0].get_extent()) == (0, 100, 100, 0)
    fig = plot_similarity_heatmaps(df, ncols=3)
    assert len({round(ax.get_position().y0, 3) for ax in fig.axes if ax.get_images()}) == 2


def test_heatmaps_validation(heatmaps):
    with pytest.raises(ValueError, match=r"mean_similarity.*row_stop|row_stop.*mean_similarity"):
        plot_similarity_heatmaps(heatmaps.drop(columns=["row_stop", "mean_similarity"]))
    with pytest.raises(ValueError, match="empty"):
        plot_similarity_heatmaps(heatmaps.iloc[:0])
    with pytest.raises(ValueError, match="several rows for the same block"):
        plot_similarity_heatmaps(pd.concat([heatmaps, heatmaps.iloc[:1]]))


def _lines(ax, label, ls):
    return [ln for ln in ax.get_lines() if ln.get_label() in (label, f"{label} (selected fit)") and ln.get_linestyle() == ls]


def test_decay_curves_axes_means_and_fits(profiles):
    fig = plot_decay_curves(profiles, title="profiles")
    assert isinstance(fig, Figure)
    ax_lin, ax_log = fig.axes
    assert ax_lin.get_xscale() == "linear" and ax_log.get_xscale() == "log"
    assert ax_lin.get_shared_y_axes().joined(ax_lin, ax_log)
    assert ax_lin.get_ylabel() == "mean cosine similarity"
    assert ax_lin.get_xlabel() == ax_log.get_xlabel() == "distance (positions)"
    expected = np.mean(list(LEARNED_SEEDS.values()), axis=0)
    for ax in (ax_lin, ax_log):
        (solid,) = _lines(ax, "learned", "-")
        np.testing.assert_array_equal(solid.get_xdata(), DIST[1:])
        np.testing.assert_allclose(solid.get_ydata(), expected[1:], rtol=1e-12)
        (fit,) = _lines(ax, "learned", "--")
        np.testing.assert_allclose(fit.get_ydata(), np.mean([np.exp(-DIST / (5.0 + s)) for s in range(3)], 0)[1:])
        assert fit.get_color() == solid.get_color()
        assert len(_lines(ax, "sinusoidal", "--")) == 1
        assert _lines(ax, "random", "--") == []  # no selected fit -> no dashed line
        assert len(ax.collections) == 1  # sd band only for the multi-seed label
        band = ax.collections[0].get_paths()[0].vertices[:, 1]
        sd = np.std(list(LEARNED_SEEDS.values()), axis=0, ddof=1)[1:]
        assert np.isclose(band.max(), (expected[1:] + sd).max()) and np.isclose(band.min(), (expected[1:] - sd).min())
        assert any(np.allclose(ln.get_ydata(), 0) and ln.get_linestyle() == "-" for ln in ax.get_lines()
                   if ln.get_label().startswith("_"))  # zero reference line
    (legend,) = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]  # beside the right panel
    texts = [t.get_text() for t in legend.get_texts()]
    assert texts[:3] == ["sinusoidal", "learned", "random"] and any("dashed" in t for t in texts)
    colours = [h.get_color() for h in legend.legend_handles[:3]]
    assert len({tuple(matplotlib.colors.to_rgba(c)) for c in colours}) == 3


def test_decay_curves_min_distance_labels_and_validation(profiles):
    fig = plot_decay_curves(profiles, labels=["random"], min_distance=0)
    ax_lin, ax_log = fig.axes
    assert _lines(ax_lin, "random", "-")[0].get_xdata()[0] == 0
    assert _lines(ax_log, "random", "-")[0].get_xdata()[0] == 1  # no distance 0 on a log axis
    assert _lines(ax_lin, "learned", "-") == []
    assert not any("dashed" in t.get_text() for t in fig.axes[-1].get_legend().get_texts())
    with pytest.raises(ValueError, match="distance"):
        plot_decay_curves(profiles.drop(columns=["distance"]))
    with pytest.raises(ValueError, match="several rows"):
        plot_decay_curves(pd.concat([profiles, profiles.assign(study="other")]))
    no_fit = plot_decay_curves(profiles.drop(columns=["fitted_similarity"]))
    assert all(ln.get_linestyle() != "--" for ax in no_fit.axes for ln in ax.get_lines())


@pytest.mark.parametrize("name", ["fig.png", "fig.svg", "nested/dir/fig"])
def test_save_figure_writes_file(tmp_path, heatmaps, name):
    path = tmp_path / name
    save_figure(plot_similarity_heatmaps(heatmaps), path, dpi=50)
    data = path.read_bytes()
    assert len(data) > 1000
    if path.suffix == ".svg":
        assert b"<svg" in data[:500]
    else:
        assert data[:8] == b"\x89PNG\r\n\x1a\n"


def test_save_figure_closes_pyplot_figures(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    fig = plt.figure()
    fig.add_subplot().plot([0, 1], [1, 0])
    save_figure(fig, tmp_path / "p.png")
    assert fig.number not in plt.get_fignums()
    assert (tmp_path / "p.png").stat().st_size > 0
