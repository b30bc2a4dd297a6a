"""A profile of 10^5+ distances is drawn decimated: its first points, then the extremes of bins (the table keeps all)."""

import matplotlib.text
import numpy as np
import pandas as pd

from poslab.plots.core import DECIMATED_NOTE, MAX_DRAWN_POINTS, drawn_points, plot_decay_curves


def test_long_profiles_are_drawn_from_their_bin_extremes():
    d = np.arange(200_000)
    y = np.cos(d / 37.0) * np.exp(-d / 50_000.0)
    profiles = pd.DataFrame({"label": "long", "seed": pd.array([pd.NA] * d.size, dtype="Int64"), "distance": d,
                             "mean_similarity": y})
    fig = plot_decay_curves(profiles)
    for ax in fig.axes[:2]:
        (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "long"]
        x, shown = line.get_xdata(), line.get_ydata()
        assert len(x) <= MAX_DRAWN_POINTS + 1 and np.all(np.diff(x) > 0)
        assert shown.min() == y[int(x[0]):].min() and shown.max() == y[int(x[0]):].max()  # the envelope is kept
        start = int(x[0])
        assert np.array_equal(x[:MAX_DRAWN_POINTS // 4], d[start:start + MAX_DRAWN_POINTS // 4])  # the start: all
        assert x[-1] == d[-1]
    assert any(DECIMATED_NOTE in t.get_text() for t in fig.findobj(matplotlib.text.Text))  # the figure says so
    assert np.array_equal(drawn_points(np.arange(50.0), np.ones(50)), np.arange(50))  # short: every point


def test_decimation_keeps_every_bin_extreme_against_a_brute_force_loop():
    rng = np.random.default_rng(3)
    x = np.arange(1, 30_001, dtype=float)
    y = rng.standard_normal(x.size)
    y[rng.integers(0, x.size, 50)] = np.nan
    for log in (False, True):
        keep = drawn_points(x, y, log=log, limit=400)
        head, n_bins = 100, 150
        edges = np.geomspace(x[head], x[-1], n_bins + 1) if log else np.linspace(x[head], x[-1], n_bins + 1)
        expected = set(range(head)) | {x.size - 1}
        for b in range(n_bins):
            inside = [i for i in range(head, x.size) if (edges[b] <= x[i] < edges[b + 1] or (b == n_bins - 1 and x[i] == x[-1]))
                      and np.isfinite(y[i])]
            if inside:
                values = [y[i] for i in inside]
                expected |= {inside[int(np.argmin(values))], inside[int(np.argmax(values))]}
        assert set(keep.tolist()) == expected


def test_a_labels_rows_are_its_rows_whether_contiguous_or_not():
    from poslab.plots.core import _LabelRows

    frame = pd.DataFrame({"label": ["a", "a", "b", "b", "b", "c", "a", "c"], "x": range(8)})
    rows = _LabelRows(frame)
    assert rows.present == ["a", "b", "c"]
    for label in ("a", "b", "c"):
        pd.testing.assert_frame_equal(rows(label), frame[frame["label"] == label])
    assert len(rows("missing")) == 0 and list(rows("missing").columns) == ["label", "x"]
    assert rows("b").index.tolist() == [2, 3, 4]  # one block: a slice of the table


def test_a_decimated_profile_looks_like_every_point_drawn_at_print_resolution(monkeypatch):
    """Rendered at 300 dpi, the decimated curves (noisy: every ripple is a peak) cover the same pixels as the curves
    drawn through all their points, to the antialiased pixel: no peak, dip or ripple is lost or moved (the
    symmetric Hausdorff distance between the two sets of curve pixels is at most 1 px)."""
    import matplotlib
    from scipy.ndimage import distance_transform_edt

    import poslab.plots.core as core
    from poslab._figure_settings import FigureSettings

    rng = np.random.default_rng(5)
    d = np.arange(100_000)
    y = np.cos(d / 37.0) * np.exp(-d / 25_000.0) + 0.05 * rng.standard_normal(d.size)
    profiles = pd.DataFrame({"label": "long", "seed": pd.array([pd.NA] * d.size, dtype="Int64"), "distance": d,
                             "mean_similarity": y})
    settings = FigureSettings()

    def render():
        with matplotlib.rc_context({**settings.rc, "path.simplify": False}):  # every point of the path drawn
            fig = plot_decay_curves(profiles)
            fig.supxlabel("the same caption in both", fontsize=7)  # the same layout with and without the note
            core.print_figure(fig, settings)
            fig.set_dpi(core.PRINT_DPI)
            core._lay_out(fig, core.PRINT_DPI)
            fig.canvas.draw()
            image = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
        return np.abs(image - np.array([0x01, 0x73, 0xB2])).sum(-1) < 60  # the curve's colour

    decimated = render()
    monkeypatch.setattr(core, "drawn_points", lambda x, y, log=False: np.arange(len(x)))
    full = render()
    assert decimated.sum() > 10_000 and abs(int(decimated.sum()) - int(full.sum())) < 0.01 * full.sum()
    assert distance_transform_edt(~full)[decimated].max() <= 1.0
    assert distance_transform_edt(~decimated)[full].max() <= 1.0
