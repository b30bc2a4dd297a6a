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
