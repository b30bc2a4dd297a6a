"""A profile of 10^5+ distances is drawn from the extremes of at most MAX_DRAWN_POINTS bins (the table keeps all)."""

import numpy as np
import pandas as pd

from poslab.plots.core import MAX_DRAWN_POINTS, _drawn_points, plot_decay_curves


def test_long_profiles_are_drawn_from_their_bin_extremes():
    d = np.arange(200_000)
    y = np.cos(d / 37.0) * np.exp(-d / 50_000.0)
    profiles = pd.DataFrame({"label": "long", "seed": pd.array([pd.NA] * d.size, dtype="Int64"), "distance": d,
                             "mean_similarity": y})
    fig = plot_decay_curves(profiles)
    for ax in fig.axes[:2]:
        (line,) = [ln for ln in ax.get_lines() if ln.get_label() == "long"]
        x, shown = line.get_xdata(), line.get_ydata()
        assert len(x) <= MAX_DRAWN_POINTS + 2 and np.all(np.diff(x) > 0)
        assert shown.min() == y[int(x[0]):].min() and shown.max() == y[int(x[0]):].max()  # the envelope is kept
    assert np.array_equal(_drawn_points(np.arange(50.0), np.ones(50)), np.arange(50))  # short: every point
