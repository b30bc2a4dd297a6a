"""Crossings within the noise: a level the truth never reaches is not reported as crossed by a noisy tail."""

import math

import numpy as np
import pandas as pd
import pytest

from poslab.analysis.summaries import CROSSING_Z, profile_summaries, summaries_many

N = 1024
K = np.arange(N)
PAIRS = N - K
SE = 0.2 / np.sqrt(PAIRS)  # standard errors of the mean: 0.006 at distance 0, 0.2 at the window's end


def _noise_tail(amplitude_se: float) -> np.ndarray:
    """0.9 exp(-k / 20), whose truth stays > 0 at every distance, plus a smooth noise of ``amplitude_se`` se."""
    return 0.9 * np.exp(-K / 20.0) + amplitude_se * SE * np.sin(K / 7.3)


def test_a_noise_tail_that_dips_below_a_level_the_truth_never_reaches_is_within_noise():
    y = _noise_tail(2.0)  # dips below 0 by up to 2 se, never by 3.5
    plain = profile_summaries(K, y, thresholds=[0.5, 0.0])
    assert plain["zero_crossing"] == plain["band_width_0"] < 200  # the plain first crossing: where the noise dips
    s = profile_summaries(K, y, thresholds=[0.5, 0.0], noise_se=SE, n_pairs=PAIRS)
    for name in ("zero_crossing", "band_width_0", "integral_scale"):
        assert s.status_of(name) == "within_noise" and math.isnan(s[name])
    j = s.names.index("zero_crossing")
    assert 1.0 < s.below_se[j] < CROSSING_Z
    assert "not significantly below" in s.reason[j] and "3.5 standard errors" in s.reason[j]
    assert "zero crossing, which is within the noise" in s.reason[s.names.index("integral_scale")]
    # the 0.5 crossing is real: reported at its first crossing, as without noise
    assert s.status_of("band_width_0p5") == "ok" and s["band_width_0p5"] == plain["band_width_0p5"]
    assert "zero_crossing: within_noise" in s.notes()


def test_the_rule_holds_for_every_level_not_only_zero():
    y = 0.2 + _noise_tail(2.0)  # the same tail around 0.2: a threshold of 0.2 is within the noise
    s = profile_summaries(K, y, thresholds=[0.2], noise_se=SE, n_pairs=PAIRS)
    assert s.status_of("band_width_0p2") == "within_noise"
    assert s.status_of("zero_crossing") == "not_reached"


def test_a_real_crossing_is_reported_at_its_first_crossing():
    rng = np.random.default_rng(3)
    truth = np.exp(-K / 200.0) * np.cos(2 * np.pi * K / 300)  # first zero at 75
    y = truth + SE * rng.normal(size=N)
    plain = profile_summaries(K, y, thresholds=[0.5])
    s = profile_summaries(K, y, thresholds=[0.5], noise_se=SE, n_pairs=PAIRS)
    assert s.status_of("zero_crossing") == "ok"
    assert s["zero_crossing"] == plain["zero_crossing"] == pytest.approx(75, abs=2)  # the first crossing, no later
    assert s["integral_scale"] == plain["integral_scale"]
    assert s.below_se[s.names.index("zero_crossing")] > 10


def test_distances_without_a_standard_error_are_no_evidence_of_a_crossing():
    """The window's last distances, where fewer than two anchor blocks hold a pair, have no standard error (NaN):
    a crossing seen only there rests on one block's few pairs (whisper-tiny's zero crossing at 447 of 447 was one
    pair, S = -0.03, per-pair spread ~0.1) and is within the noise, in both the vectorised and the row-by-row
    summaries; before, the last known variance was carried forward and divided by n_pairs = 1."""
    from poslab.analysis.summaries import summary_settings, summary_values_many

    n = 448
    k, pairs = np.arange(n), n - np.arange(n)
    y = 0.9 * np.exp(-k / 150.0)  # > 0.04 up to 440
    y[-3:] = [0.01, -0.01, -0.03]  # the last three distances (3, 2 and 1 pairs) dip below 0
    se = np.where(k <= 417, 0.3 / np.sqrt(pairs), np.nan)  # two or more blocks hold a pair up to distance 417
    se[400:418] = 1e-4  # a last known variance far below the rest: carried forward, it made S = -0.03 "significant"
    s = profile_summaries(k, y, thresholds=[0.5, 0.0], noise_se=se, n_pairs=pairs)
    for name in ("zero_crossing", "band_width_0", "integral_scale"):
        assert s.status_of(name) == "within_noise" and math.isnan(s[name])
    j = s.names.index("zero_crossing")
    assert math.isnan(s.below_se[j])  # no distance with a known se at or after 445
    assert "beyond distance 417" in s.reason[j] and "no evidence of a crossing" in s.reason[j]
    assert s.status_of("band_width_0p5") == "ok"  # a crossing inside the known distances is unaffected
    fast = summary_values_many(summary_settings(k, thresholds=[0.5, 0.0], noise_se=se, n_pairs=pairs), y)
    many = summaries_many(k, y, thresholds=[0.5, 0.0], noise_se=se, n_pairs=pairs)
    np.testing.assert_array_equal(fast[2], many.status)
    np.testing.assert_array_equal(fast[1], many.values)
    # the same dip inside the known distances, beyond z standard errors there, is a crossing
    y2 = y.copy()
    y2[390:] = -0.2
    s2 = profile_summaries(k, y2, thresholds=[0.0], noise_se=se, n_pairs=pairs)
    assert s2.status_of("zero_crossing") == "ok" and s2["zero_crossing"] == 390


def test_an_exact_profile_keeps_the_plain_first_crossing():
    y = np.cos(np.pi * K / 400)  # crosses 0 just after 200, by less than any noise there
    plain = profile_summaries(K[:400], y[:400], thresholds=[0.5])
    for noise in (None, np.zeros(400)):
        s = profile_summaries(K[:400], y[:400], thresholds=[0.5], noise_se=noise, n_pairs=PAIRS[:400])
        assert s["zero_crossing"] == plain["zero_crossing"] == 201 and s.status_of("zero_crossing") == "ok"
        assert s.crossing_z is None


def test_replicates_of_a_noise_tail_are_beyond_the_window_so_the_interval_is_open_above():
    from poslab.analysis.bootstrap import percentile_interval

    rng = np.random.default_rng(0)
    rows = _noise_tail(2.0)[None, :] + 0.5 * SE * rng.normal(size=(200, N))  # resamples around the estimate
    reps = summaries_many(K, rows, thresholds=[0.0], noise_se=SE, n_pairs=PAIRS)
    j = reps.names.index("zero_crossing")
    within = reps.status[:, j] == 3
    assert within.mean() > 0.5
    values = np.where(within, np.inf, reps.values[:, j])
    low, high = percentile_interval(values, 0.95, integer=True)
    assert math.isnan(high)  # open above: the data do not exclude "never crosses"


def test_the_run_pipeline_on_the_null_model_reports_within_noise_and_an_open_interval():
    from poslab.analysis.bootstrap import percentile_interval
    from poslab.encodings import make_encoding
    from poslab.stages import AnalysisOptions, RunContext

    table = make_encoding("smoothed_random", length_scale=8.0).generate(512, 64, rng=np.random.default_rng(0))
    ctx = RunContext(None, n_positions=512, max_distance=511, dim=64, seed=0, table=table,
                     options=AnalysisOptions(n_resamples=60, thresholds=(0.5, 0.0)))
    s = ctx.summaries
    assert s.status_of("zero_crossing") == s.status_of("band_width_0") == "within_noise"
    assert s.status_of("band_width_0p5") == "ok"
    boot = ctx.bootstrap
    assert math.isnan(boot.summaries_ci["zero_crossing"][1]) and math.isnan(boot.band_widths_ci[0.0][1])
    # replicates: the same rule with the same se; many are within the noise (+inf), so the upper quantile is open
    assert np.isposinf(boot.summaries["zero_crossing"]).mean() > 0.2
    assert math.isnan(percentile_interval(boot.summaries["zero_crossing"], 0.95, integer=True)[1])
    assert np.isfinite(boot.band_widths_ci[0.5][1])


def test_bad_noise_arguments_are_refused():
    with pytest.raises(ValueError, match="n_pairs"):
        summaries_many(K, _noise_tail(0.0), noise_se=SE)
    with pytest.raises(ValueError, match="crossing_z"):
        summaries_many(K, _noise_tail(0.0), noise_se=SE, n_pairs=PAIRS, crossing_z=-1)
    with pytest.raises(ValueError, match="shape"):
        summaries_many(K, _noise_tail(0.0), noise_se=SE[:10], n_pairs=PAIRS[:10])


def test_the_console_shows_noise_with_a_note():
    from poslab.cli import _summary_text

    summary = pd.DataFrame([{
        "label": "null", "seed": np.nan, "n_positions": 1024, "max_distance": 1023, "status": "ok",
        "ci_method": "anchor_block", "zero_crossing": np.nan, "band_width_0p5": 27.0,
        "band_width_0p5_ci_low": 26.0, "band_width_0p5_ci_high": 28.0,
        "summary_notes": "zero_crossing: within_noise (S first falls below 0 at 80.0 but ...)"}])
    text = _summary_text(summary)
    assert "noise" in text.splitlines()[1] and "within_noise" in text and "> 1023" not in text
