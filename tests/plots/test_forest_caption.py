"""decay_lengths.png's caption names only the marks drawn: no bootstrap interval when none is drawn."""

import numpy as np
import pandas as pd
import pytest

from poslab.plots import plot_decay_length_forest


def _comparison(ci_method, low, high, n_runs=(1, 1)):
    """comparison.csv's decay_length rows of two labels (as a study writes them)."""
    return pd.DataFrame({"label": ["learned(source=gpt2)", "smoothed_random(length_scale=8)"],
                         "summary": "decay_length", "max_distance": 255, "kernel": "cosine",
                         "ci_method": ci_method, "ci_level": 0.95, "n_resamples": 0, "n_runs": list(n_runs),
                         "selected_model": ["damped_cosine", "gaussian"], "fit_se": [2.9, 0.2],
                         "value": [56.6, 14.9], "value_ci_low": low, "value_ci_high": high, "status": "ok"})


def _caption(comparison):
    fig = plot_decay_length_forest(comparison)
    return fig, fig._supxlabel.get_text().replace("\n", " ")


def test_no_bootstrap_interval_is_named_when_n_resamples_is_0():
    """n_resamples = 0 (ci_method none, as poslab run writes it): the fit's Wald interval is drawn (±1.96 fit_se,
    the thin grey bars) and named; no thick bar, and the caption says there is no bootstrap interval and why."""
    fig, caption = _caption(_comparison("none", [np.nan] * 2, [np.nan] * 2, n_runs=(1, 3)))
    assert "anchor-block" not in caption and "thick bar: 95%" not in caption and "resampled seeds" not in caption
    assert caption.count("bootstrap interval") == 1  # "no bootstrap interval"
    assert "filled dot: decay length;" in caption.lower() and "open dot: decay length of the pooled seeds;" in caption
    assert "95% fit (Wald) interval, ±1.96 delta-method standard errors" in caption
    assert "a dot without a thick bar: no bootstrap interval (n_resamples = 0)" in caption
    ax = fig.axes[0]
    grey = sorted(tuple(ln.get_xdata()) for ln in ax.get_lines() if ln.get_marker() != "o")
    assert grey == [pytest.approx((14.9 - 1.96 * 0.2, 14.9 + 1.96 * 0.2), abs=1e-3),
                    pytest.approx((56.6 - 1.96 * 2.9, 56.6 + 1.96 * 2.9), abs=1e-3)]  # the fit's bars only


def test_the_bootstrap_is_named_where_its_interval_is_drawn():
    _, caption = _caption(_comparison(["anchor_block", "seed"], [50.0, 14.0], [62.0, 16.0], n_runs=(1, 5)))
    assert "filled dot: decay length (anchor-block bootstrap interval)" in caption.lower()
    assert "open dot: decay length of the pooled seeds (interval from resampled seeds)" in caption
    assert "thick bar: 95% bootstrap interval" in caption and "without a thick bar" not in caption
    # one bootstrapped, one exact: the bar is named, and why the other has none
    _, caption = _caption(_comparison(["anchor_block", "exact"], [50.0, np.nan], [62.0, np.nan]))
    assert "filled dot: decay length (anchor-block bootstrap interval)" in caption.lower()
    assert "no bootstrap interval (exact profile, no sampling variability)" in caption
