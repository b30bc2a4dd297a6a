"""summary_values_many (the bootstrap replicates' summaries) equals summaries_many's values and statuses, entry for
entry, on profiles of every kind: decays, noise, flat, oscillating, rising, ties at the median, NaN gaps and tails."""

import numpy as np
import pytest

from poslab.analysis.summaries import STATUSES, summaries_many, summary_settings, summary_values_many


def _profiles(rng, n: int, rows: int) -> np.ndarray:
    k = np.arange(n)
    out = []
    for r in range(rows):
        kind = r % 8
        length = rng.uniform(2, max(3, n))
        if kind == 0:  # a noisy decay
            y = np.exp(-k / length) + rng.normal(0, 0.02, n)
        elif kind == 1:  # a random table: 1 at distance 0, noise beyond (flat)
            y = rng.normal(0, 0.01, n)
            y[0] = 1
        elif kind == 2:  # a damped oscillation
            y = np.cos(2 * np.pi * k / rng.uniform(1.5, max(2, n / 2))) * np.exp(-k / (5 * length))
            y += rng.normal(0, 0.01, n)
        elif kind == 3:  # an undamped cosine (no_decay)
            y = np.cos(2 * np.pi * k / rng.uniform(1.5, max(2, n / 3)))
        elif kind == 4:  # a decay to a floor above 0 (within the noise at 0.3)
            y = 0.3 + 0.7 * np.exp(-k / length) + rng.normal(0, 0.05, n)
        elif kind == 5:  # rising
            y = k / n + rng.normal(0, 0.01, n)
        elif kind == 6:
            y = np.exp(-k / length) * (1 - 2 * (rng.random() < 0.3)) + rng.normal(0, 0.1, n)
        else:  # coarse values: ties at the median and at the flat test's margin
            y = np.round(rng.normal(0, 0.05, n), 1)
            y[1] = 0.05 * rng.integers(-2, 3)
        if rng.random() < 0.4:  # a resample without pairs at the window's end
            y[rng.integers(1, n):] = np.nan
        if rng.random() < 0.3:
            y[rng.random(n) < 0.2] = np.nan
        if rng.random() < 0.05:  # too few points
            y[2:] = np.nan
        out.append(np.clip(y, -1, 1))
    return np.array(out)


@pytest.mark.parametrize("n", [3, 4, 7, 50, 301, 3000])
def test_values_and_statuses_equal_summaries_many(n):
    rng = np.random.default_rng(n)
    d, pairs = np.arange(n), n - np.arange(n)
    seen = set()
    for _ in range(12):
        y = _profiles(rng, n, 16)
        se = None if rng.random() < 0.3 else rng.uniform(0.001, 0.05) / np.sqrt(pairs) * rng.uniform(0.5, 2, n)
        noise = None if rng.random() < 0.3 else rng.uniform(0.0005, 0.05) / np.sqrt(pairs) * rng.uniform(0.5, 2, n)
        if noise is not None and rng.random() < 0.3:
            noise[-rng.integers(1, n):] = np.nan  # unknown near the window's end
        kw = dict(thresholds=[0.9, 0.5, 0.0, -0.3][:rng.integers(1, 5)], se=se, noise_se=noise, n_pairs=pairs,
                  min_rise=float(rng.choice([0.05, 0.01, 0.2])), min_rise_se=float(rng.choice([25.0, 2.0, 0.0])),
                  crossing_z=float(rng.choice([3.5, 0.0, 1.0])))
        full = summaries_many(d, y, **kw)
        names, values, status = summary_values_many(summary_settings(d, **kw), y)
        assert names == full.names
        np.testing.assert_array_equal(status, full.status)
        np.testing.assert_array_equal(values, full.values)  # NaN where NaN, else bit for bit
        seen |= set(full.status.ravel().tolist())
    if n >= 50:  # most statuses were exercised
        assert {"ok", "not_reached", "flat", "rising", "no_decay", "too_few_points"} <= {STATUSES[c] for c in seen}


def test_a_long_scan_crosses_chunks_and_the_flat_test_counts_exactly():
    n = 200_000  # several scan chunks: a minimum, crossings and a noise test far from distance 0
    k = np.arange(n)
    rng = np.random.default_rng(0)
    y = np.vstack([np.exp(-k / 60_000.0) * np.cos(k / 30_000.0) + rng.normal(0, 1e-3, n),
                   np.where(k == 0, 1.0, rng.normal(0, 1e-3, n)),  # flat: median near S(1)
                   np.where(k == 0, 1.0, 0.05 + np.zeros(n))])  # S(1) - median exactly min_rise: the exact median
    pairs = n - k
    kw = dict(thresholds=[0.5, 0.0], se=1e-3 / np.sqrt(pairs) * 30, noise_se=1e-3 * np.ones(n), n_pairs=pairs)
    full = summaries_many(k, y, **kw)
    names, values, status = summary_values_many(summary_settings(k, **kw), y)
    np.testing.assert_array_equal(status, full.status)
    np.testing.assert_array_equal(values, full.values)
    assert STATUSES[status[1, 0]] == "flat" and STATUSES[status[0, 0]] == "ok"


def test_rows_whose_sum_overflows_are_still_all_finite():
    """Finite rows are recognised by their sum; a finite row whose sum overflows is checked value by value (the
    same summaries as summaries_many), and a row with NaN only at its end takes the same values as any other."""
    k = np.arange(400)
    y = np.vstack([1e308 * np.exp(-k / 50.0), np.where(k < 3, 1e308, 1e305 * np.cos(k)),
                   np.exp(-k / 50.0), np.where(k == 0, 1.0, 1e-3 * np.cos(k))])
    y[2:, 300:] = np.nan
    with np.errstate(over="ignore", invalid="ignore"):  # the huge rows' means overflow (both functions)
        assert not np.isfinite(y[:2].sum(axis=1)).any()
        full = summaries_many(k, y, thresholds=[0.5])
        names, values, status = summary_values_many(summary_settings(k, thresholds=[0.5]), y)
    np.testing.assert_array_equal(status, full.status)
    np.testing.assert_array_equal(values, full.values)
    assert STATUSES[status[3, 0]] == "flat" and STATUSES[status[2, 0]] == "ok"
