"""window_dependent: a summary moves with the window only beyond 5 %, one position and, when sampled, its noise."""

import math

import numpy as np
import pandas as pd

from poslab.stages.window import window_dependent

NAN = math.nan


def _rows(name, values, lows=None, highs=None, statuses=None):
    n = len(values)
    return pd.DataFrame({"summary": name, "window": [63, 127, 255][:n], "value": values,
                         "value_ci_low": lows if lows is not None else [NAN] * n,
                         "value_ci_high": highs if highs is not None else [NAN] * n,
                         "status": statuses or ["ok"] * n})


def test_a_move_within_the_intervals_is_noise_not_window_dependence():
    # the null model's 1/e distance at a quarter, half and all of 1024 positions (QA: flagged "*" by 5 % alone)
    frame = _rows("e_folding_distance", [32, 33, 34], [26, 29, 30], [40, 39, 38])
    assert window_dependent(frame) == []


def test_a_move_beyond_an_interval_is_window_dependent():
    # GPT-2's 0.5 band width grows with the window: 97 lies outside the half window's [72, 96]
    frame = _rows("band_width_0p5", [70, 86, 97], [58, 72, 86], [80, 96, 104])
    assert window_dependent(frame) == ["band_width_0p5"]
    # an interval open above contains everything above its low end
    assert window_dependent(_rows("zero_crossing", [150, 170], [120, 150], [NAN, NAN])) == []
    assert window_dependent(_rows("zero_crossing", [100, 170], [80, 150], [NAN, NAN])) == ["zero_crossing"]


def test_an_exact_run_moves_by_the_tolerances_alone():
    assert window_dependent(_rows("band_width_0p5", [100, 110, 120])) == ["band_width_0p5"]
    assert window_dependent(_rows("band_width_0p5", [100, 101, 102])) == []  # within 5 %
    assert window_dependent(_rows("band_width_0p9", [3, 4, 4])) == []  # one position


def test_a_number_that_disappears_at_a_larger_window_is_window_dependent():
    frame = _rows("zero_crossing", [60, NAN, NAN], [50, NAN, NAN], [70, NAN, NAN], ["ok", "within_noise", "not_reached"])
    assert window_dependent(frame) == ["zero_crossing"]
    reached_later = _rows("zero_crossing", [NAN, NAN, 200], statuses=["not_reached", "not_reached", "ok"])
    assert window_dependent(reached_later) == []


def test_a_number_whose_own_interval_is_open_above_may_disappear():
    # the null model (smoothed_random, sigma 16, 1024 positions, seed 6): a noise dip at a quarter of the window,
    # 62 [48, >], within the noise at half and all of it; its own resamples do not all reach it: no contradiction
    frame = _rows("zero_crossing", [62, NAN, NAN], [48, NAN, NAN], [NAN, NAN, NAN],
                  ["ok", "within_noise", "within_noise"])
    assert window_dependent(frame) == []
    # seed 0: 57 [48, 102] at a quarter, a number its resamples all reach, then within the noise: flagged
    frame = _rows("zero_crossing", [57, NAN, NAN], [48, 59, NAN], [102, NAN, NAN],
                  ["ok", "within_noise", "within_noise"])
    assert window_dependent(frame) == ["zero_crossing"]


def test_the_brute_force_rule_on_random_rows():
    """Against the rule written out for every pair of windows, on random values and intervals."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        n = 3
        values = rng.integers(1, 60, n).astype(float)
        sampled = rng.random() < 0.7
        lows = values - rng.integers(0, 15, n) if sampled else np.full(n, NAN)
        highs = np.where(rng.random(n) < 0.2, NAN, values + rng.integers(0, 15, n)) if sampled else np.full(n, NAN)
        statuses = list(np.where(rng.random(n) < 0.15, "within_noise", "ok"))
        values = np.where(np.array(statuses) == "ok", values, NAN)
        expected = False
        for a in range(n):
            for b in range(a + 1, n):
                if statuses[a] == "ok" and statuses[b] != "ok":
                    expected |= not (sampled and np.isnan(highs[a]))  # unless its own interval is open above
                elif statuses[a] == statuses[b] == "ok":
                    diff = abs(values[b] - values[a])
                    big = diff > 1 and diff > 0.05 * max(values[a], values[b])
                    out_b = values[b] < lows[a] or values[b] > highs[a]  # NaN compares False: open above
                    out_a = values[a] < lows[b] or values[a] > highs[b]
                    expected |= big and (not sampled or out_a or out_b)
        got = window_dependent(_rows("s", list(values), list(lows), list(highs), statuses)) == ["s"]
        assert got == expected, (values, lows, highs, statuses)
