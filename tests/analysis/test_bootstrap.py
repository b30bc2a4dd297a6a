"""Tests for poslab.analysis.bootstrap: block sums against brute force, coverage at the nominal rate."""

import contextlib
import math

import numpy as np
import pytest

from poslab import _threads
from poslab.analysis import bootstrap, fit_decay, similarity_profile, unit_rows
from poslab.analysis.bands import first_crossings
from poslab.analysis.bootstrap import (anchor_block_sums, bootstrap_anchor_blocks, bootstrap_units,
                                       percentile_interval, resample_units)
from poslab.encodings import make_encoding


def _one_blas_thread():
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional: only speed depends on it
        return contextlib.nullcontext()
    return threadpool_limits(1, user_api="blas")


def test_block_sums_are_the_brute_force_diagonal_sums(gpt2_table):
    table = gpt2_table[:200, :64].copy()
    table[17] = 0.0  # an excluded position: its pairs count nowhere
    with pytest.warns(UserWarning, match="zero or non-finite"):
        units = unit_rows(table)
    blocks = anchor_block_sums(units, 150, block_length=30)
    s = units.vectors @ units.vectors.T
    np.fill_diagonal(s, 1.0)
    s[~units.valid] = np.nan
    s[:, ~units.valid] = np.nan
    for b in range(blocks.sums.shape[0]):
        for k in (0, 1, 7, 150):
            values = [s[i, i + k] for i in range(30 * b, min(200, 30 * b + 30)) if i + k < 200]
            values = [v for v in values if np.isfinite(v)]
            assert blocks.counts[b, k] == len(values)
            assert blocks.sums[b, k] == pytest.approx(sum(values), abs=1e-12)
    with pytest.warns(UserWarning, match="zero or non-finite"):
        profile = similarity_profile(table, max_distance=150)
    np.testing.assert_allclose(blocks.profile, profile.mean_similarity, atol=1e-13)
    np.testing.assert_array_equal(blocks.counts.sum(axis=0), profile.n_pairs)


@pytest.mark.parametrize("n, max_distance, block_length", [
    (1, 0, 1), (97, 96, 10), (97, 3, 10), (97, 40, 1), (97, 96, 97), (300, 299, None), (256, 33, 16)])
def test_fft_block_sums_equal_brute_force_for_any_blocking(n, max_distance, block_length):
    """Block sums by FFT (blocks not dividing n, distances shorter or longer than a block, one block,
    blocks of one position) equal the sums of the diagonals of S."""
    table = np.random.default_rng(n + max_distance).standard_normal((n, 24)).cumsum(axis=0)
    units = unit_rows(table)
    blocks = anchor_block_sums(units, max_distance, block_length=block_length)
    length = blocks.block_length
    s = units.vectors @ units.vectors.T
    np.fill_diagonal(s, 1.0)
    expected = np.zeros_like(blocks.sums)
    expected_counts = np.zeros_like(blocks.counts)
    for i in range(n):
        for k in range(min(max_distance, n - 1 - i) + 1):
            expected[i // length, k] += s[i, i + k]
            expected_counts[i // length, k] += 1
    assert blocks.sums.shape == (math.ceil(n / length), max_distance + 1)
    np.testing.assert_array_equal(blocks.counts, expected_counts)
    np.testing.assert_allclose(blocks.sums, expected, rtol=0, atol=1e-12)


def test_resampling_is_seeded_and_pools_whole_units():
    sums = np.array([[2.0, 1.0], [4.0, 0.0], [9.0, 3.0]])
    counts = np.array([[2.0, 1.0], [2.0, 1.0], [3.0, 1.0]])
    a, ca = resample_units(sums, counts, 50, np.random.default_rng(5))
    b, cb = resample_units(sums, counts, 50, np.random.default_rng(5))
    np.testing.assert_array_equal(a, b)
    # every resample is a ratio of sums over a multiset of 3 units
    assert set(np.round(ca[:, 0]).astype(int)) <= {6, 7, 8, 9}
    assert np.all((a[:, 0] >= 1.0) & (a[:, 0] <= 3.0))


def test_percentile_interval_and_first_crossings():
    assert percentile_interval(np.arange(101.0), 0.9) == pytest.approx((5.0, 95.0))
    assert all(math.isnan(v) for v in percentile_interval([np.nan, np.nan], 0.9))
    low, high = percentile_interval([1, 2, 3] + [np.inf] * 17, 0.9, integer=True)
    assert low == 1 and math.isnan(high)  # the upper bound lies beyond the window
    # fewer than 2 / (1 - level) replicates: an end would be the most extreme one, no interval at that level
    assert all(math.isnan(v) for v in percentile_interval(np.arange(19.0), 0.9))
    assert all(math.isnan(v) for v in percentile_interval(np.arange(5.0), 0.95))
    widths = first_crossings(np.arange(5), np.array([[1, 0.95, 0.6, 0.4, 0.2], [1, 0.99, 0.98, 0.97, 0.96]]),
                             [0.9, 0.5])
    np.testing.assert_array_equal(widths, [[2, 3], [np.inf, np.inf]])


def test_translation_invariant_table_has_zero_width_intervals():
    table = make_encoding("sinusoidal").generate(256, 64)
    units = unit_rows(table)
    blocks = anchor_block_sums(units, 255)
    profile = similarity_profile(table)
    fits = fit_decay(profile.distance[1:], profile.mean_similarity[1:], n_pairs=profile.n_pairs[1:],
                     std=profile.std_similarity[1:])
    result = bootstrap_anchor_blocks(profile.distance, blocks, 40, np.random.default_rng(0), fits=fits,
                                     thresholds=(0.5,))
    assert result.decay_length_ci == (fits.selected.decay_length, fits.selected.decay_length)
    assert result.band_widths_ci[0.5][0] == result.band_widths_ci[0.5][1]
    assert result.n_failed == 0 and result.method == "anchor_block"


def test_anchor_block_interval_covers_the_truth_at_its_nominal_rate():
    """90 % percentile intervals of the profile at distance k = σ of smoothed_random tables
    (truth: ρ(1 − (1 − ρ²) / (2 dim)), ρ = exp(−1/4)) cover it in 80–97 % of 200 tables."""
    sigma, n, dim = 4.0, 512, 128
    enc = make_encoding("smoothed_random", length_scale=sigma)
    rho = math.exp(-1 / 4)
    truth = rho * (1 - (1 - rho**2) / (2 * dim))
    covered = 0
    with _one_blas_thread():  # many small matrix products: threads only add overhead on a busy machine
        for rep in range(200):
            units = unit_rows(enc.generate(n, dim, rng=np.random.default_rng(rep)))
            blocks = anchor_block_sums(units, int(sigma))
            means, _ = resample_units(blocks.sums, blocks.counts, 200, np.random.default_rng(10_000 + rep))
            low, high = percentile_interval(means[:, int(sigma)], 0.9)
            covered += low <= truth <= high
    assert 0.80 <= covered / 200 <= 0.97, covered


def test_refits_follow_the_data(gpt2_table):
    table = gpt2_table[:512]
    units = unit_rows(table)
    profile = similarity_profile(table)
    fits = fit_decay(profile.distance[1:], profile.mean_similarity[1:], n_pairs=profile.n_pairs[1:],
                     std=profile.std_similarity[1:])
    blocks = anchor_block_sums(units, 511)
    result = bootstrap_anchor_blocks(profile.distance, blocks, 40, np.random.default_rng(1), fits=fits,
                                     thresholds=(0.9, 0.5), level=0.9)
    reps = result.decay_lengths
    assert np.isfinite(reps).all() and reps.std() > 0
    low, high = result.decay_length_ci
    assert low < fits.selected.decay_length < high
    assert result.band_widths.shape == (40, 2) and result.n_resamples == 40
    assert result.block_length == blocks.block_length


def test_binned_refits_bin_each_resample_like_the_fit():
    """A long profile is fitted on bins; resamples of units whose profiles are the profile, or the profile
    scaled towards its asymptote, refit to its decay length (an exponential's length is scale-free)."""
    d = np.arange(0, 20001, dtype=float)
    counts = np.tile(20001 - d, (3, 1))
    profile = 0.7 * np.exp(-d / 3000) + 0.2
    fits = fit_decay(d[1:], profile[1:], n_pairs=counts[0, 1:], models=["exponential"])
    length = fits.selected.decay_length
    assert fits.bins is not None and length == pytest.approx(3000, rel=1e-6)  # bin averages of a curve: ~3e-7
    profiles = np.stack([profile, profile, 0.5 * (profile - 0.2) + 0.2])
    result = bootstrap_units(d, profiles * counts, counts, 20, np.random.default_rng(3), fits=fits, thresholds=(0.5,))
    np.testing.assert_allclose(result.decay_lengths, length, rtol=1e-7)
    assert result.n_failed == 0


def test_zero_resamples_give_no_interval_and_the_pipeline_skips_the_bootstrap():
    from poslab.study.runner import analyse_table
    from poslab.study.spec import AnalysisOptions

    table = make_encoding("smoothed_random", length_scale=4.0).generate(256, 32, rng=np.random.default_rng(0))
    profile = similarity_profile(table)
    fits = fit_decay(profile.distance[1:], profile.mean_similarity[1:], n_pairs=profile.n_pairs[1:],
                     std=profile.std_similarity[1:])
    blocks = anchor_block_sums(unit_rows(table), 255)
    result = bootstrap_anchor_blocks(profile.distance, blocks, 0, np.random.default_rng(0), fits=fits,
                                     thresholds=(0.5,))
    assert len(result.decay_lengths) == 0 and result.n_resamples == 0
    assert all(math.isnan(v) for v in (*result.decay_length_ci, *result.band_widths_ci[0.5]))
    assert np.isnan(result.profile_ci[0]).all() and np.isnan(result.profile_ci[1]).all()
    run = analyse_table(table, max_distance=255, options=AnalysisOptions(n_resamples=0))
    assert run.bootstrap is None and run.fits.selected is not None  # the fits still get their noise model
    assert run.fits.gate == "noise" and run.fits.range_rule == "first_zero_crossing"


@pytest.mark.parametrize("n", [512, 4200])  # 4200: a binned fit (more than 4096 distances)
def test_bootstrap_in_chunks_of_distances_equals_resampling_the_whole_profiles(n, monkeypatch):
    from poslab.analysis import bootstrap

    table = make_encoding("smoothed_random", length_scale=6.0).generate(n, 16, rng=np.random.default_rng(n))
    units = unit_rows(table)
    profile = similarity_profile(table)
    fits = fit_decay(profile.distance[1:], profile.mean_similarity[1:], n_pairs=profile.n_pairs[1:],
                     std=profile.std_similarity[1:])
    assert (fits.bins is not None) == (n > 4097) and fits.selected is not None
    blocks = anchor_block_sums(units, n - 1)
    whole = bootstrap_anchor_blocks(profile.distance, blocks, 25, np.random.default_rng(7), fits=fits,
                                    thresholds=(0.9, 0.5, 0.0), level=0.9)
    monkeypatch.setattr(bootstrap, "_CHUNK_ENTRIES", 25 * 97)  # chunks of 97 distances: widths found in later chunks
    chunked = bootstrap_anchor_blocks(profile.distance, blocks, 25, np.random.default_rng(7), fits=fits,
                                      thresholds=(0.9, 0.5, 0.0), level=0.9)
    np.testing.assert_array_equal(chunked.band_widths, whole.band_widths)
    np.testing.assert_allclose(chunked.decay_lengths, whole.decay_lengths, rtol=1e-7)
    np.testing.assert_allclose(chunked.profile_ci, whole.profile_ci, rtol=0, atol=1e-15)  # matmul rounding
    assert chunked.band_widths_ci == whole.band_widths_ci and chunked.n_failed == whole.n_failed
    # the same draws as resampling whole profiles: its pointwise band is theirs
    means, _ = resample_units(blocks.sums, blocks.counts, 25, np.random.default_rng(7))
    np.testing.assert_allclose(whole.profile_ci, np.nanquantile(means, [0.05, 0.95], axis=0), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(whole.band_widths, first_crossings(profile.distance, means, (0.9, 0.5, 0.0)))


def test_translation_invariant_band_crossing_late_has_zero_width_interval():
    """A resample without anchors far enough back has no pairs at the crossing: undefined, not 'beyond'."""
    from poslab.study.runner import analyse_table
    from poslab.study.spec import AnalysisOptions

    omega = np.pi / (2 * 245.5)  # one phase pair: the profile is exactly cos(omega k), below 0 from k = 246
    m = np.arange(256)
    table = np.stack([np.cos(omega * m), np.sin(omega * m)], axis=1)
    result = analyse_table(table, max_distance=255, options=AnalysisOptions(thresholds=(0.0,), n_resamples=200))
    np.testing.assert_allclose(result.profile.mean_similarity, np.cos(omega * m), atol=1e-12)
    assert result.bands.to_frame()["width"].tolist() == [246]
    (low, high), = result.bootstrap.band_widths_ci.values()
    assert low == high == 246  # 32 blocks of 8 anchors: only blocks 0-1 reach distance 246


# ---------------------------------------------------------------- issue 13: intervals that cover
def test_politis_white_block_length_of_an_ar1_series_is_near_its_closed_form():
    """AR(1) with φ: G / g(0) = Σ|k|ρ(k) / Σρ(k) = 2φ / (1 − φ²) · (1 − φ)/(1 + φ) ... closed form below."""
    from scipy import signal

    from poslab.analysis.bootstrap import politis_white

    phi, n = 0.8, 100_000
    x = signal.lfilter([1.0], [1.0, -phi], np.random.default_rng(0).standard_normal(n))
    g_big = 2 * phi / (1 - phi) ** 2  # Σ_k |k| φ^|k| (autocovariances / γ(0))
    g0 = (1 + phi) / (1 - phi)  # Σ_k φ^|k|
    block, corr = politis_white(x)
    assert block == pytest.approx((g_big**2 / g0**2) ** (1 / 3) * n ** (1 / 3), rel=0.25)
    assert corr == pytest.approx(g_big / g0, rel=0.25)
    assert politis_white(np.ones(100)) == (1.0, 0.0)


def _politis_white_loop(x):
    """politis_white with every autocovariance a direct sum and m̂ searched lag by lag (the oracle)."""
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    if n < 8:
        return 1.0, 0.0
    z = x - x.mean()
    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    m_max = math.ceil(math.sqrt(n)) + k_n
    acov = np.array([math.fsum(z[:n - k] * z[k:]) / n for k in range(min(n, m_max + k_n + 1))])
    if not acov[0] > 1e-300:
        return 1.0, 0.0
    small = np.abs(acov[1:] / acov[0]) < 2 * math.sqrt(math.log10(n) / n)
    m_hat = next((m for m in range(m_max + 1) if small[m:m + k_n].size == k_n and small[m:m + k_n].all()), m_max)
    big_m = min(2 * max(m_hat, 1), m_max, n - 1)
    g_big = g0 = 0.0
    for k in range(-big_m, big_m + 1):
        lam = min(max(2 * (1 - abs(k) / big_m), 0.0), 1.0)
        g_big += lam * abs(k) * acov[abs(k)]
        g0 += lam * acov[abs(k)]
    if not g0 > 0:
        return 1.0, 0.0
    b = (2 * g_big**2 / (2 * g0**2)) ** (1 / 3) * n ** (1 / 3)
    return min(max(b, 1.0), 3 * math.sqrt(n), n / 3), max(g_big / g0, 0.0)


@pytest.mark.parametrize("n", [8, 13, 40, 1000, 5001])
@pytest.mark.parametrize("phi", [0.0, 0.5, 0.95, -0.6])
def test_politis_white_equals_the_loop_over_lags(n, phi):
    """The autocovariances from one FFT of about n + sqrt(n) points (no wrap-around at the lags read) and the
    vectorised search for m̂ give the direct sums' block and correlation lengths to 1e-12."""
    from scipy import signal

    from poslab.analysis.bootstrap import politis_white

    x = signal.lfilter([1.0], [1.0, -phi], np.random.default_rng(n).standard_normal(n)) + 3.0
    x[n // 3] = np.nan  # dropped, as the loop drops it
    got, want = politis_white(x), _politis_white_loop(x)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-300)


def test_block_length_from_the_data_grows_with_the_correlation_and_stays_in_bounds():
    from poslab.analysis.bootstrap import MIN_BLOCKS, choose_block_length

    lengths = []
    for sigma in (2.0, 32.0):
        table = make_encoding("smoothed_random", length_scale=sigma).generate(1024, 64, rng=np.random.default_rng(0))
        block, corr = choose_block_length(unit_rows(table), 1023)
        assert math.ceil(1024 / 32) <= block <= 1024 // MIN_BLOCKS and corr >= 0
        lengths.append((block, corr))
    assert lengths[1][0] > lengths[0][0] and lengths[1][1] > lengths[0][1]


def test_nested_windows_share_one_pass_of_lag_products_with_the_same_block_lengths(monkeypatch):
    from poslab.analysis.bootstrap import _block_lengths, choose_block_length
    from poslab.analysis.similarity import UnitRows

    table = make_encoding("smoothed_random", length_scale=8.0).generate(3000, 16, rng=np.random.default_rng(1))
    table[[5, 1400]] = 0.0
    with pytest.warns(UserWarning, match="zero"):
        units = unit_rows(table)
    windows = [(750, 749), (1500, 1499), (3000, 2999), (3000, 40), (1001, 3)]
    shared = _block_lengths(units, windows)
    for (n, d), got in zip(windows, shared):
        assert got == choose_block_length(UnitRows(units.vectors[:n], units.valid[:n], units.center), d)
    monkeypatch.setattr(bootstrap, "_LAG_ROWS", 97)  # 31 chunks of anchors, split between 1 or 3 threads
    for threads in (1, 3):
        monkeypatch.setattr(_threads, "_limit", threads)
        assert _block_lengths(units, windows) == shared  # correlation lengths too: every product's bits


def test_interval_widening_and_widened_percentile_intervals():
    from scipy import stats

    from poslab.analysis.bootstrap import interval_widening

    t, z = stats.t.ppf(0.975, 7), stats.norm.ppf(0.975)
    assert interval_widening(8, 0.95) == pytest.approx(math.sqrt(8 / 7) * t / z)  # Hesterberg's expanded percentile
    assert interval_widening(8, 0.95, 10.0, 40.0) == pytest.approx(math.sqrt(8 / 7) * t / z / math.sqrt(0.75))
    assert interval_widening(1, 0.95) == 1.0
    values = np.arange(101.0)
    assert percentile_interval(values, 0.9, widen=2.0) == pytest.approx((-40.0, 140.0))  # about the median 50
    low, high = percentile_interval(values, 0.9, integer=True, widen=1.05)
    assert low == math.floor(low) and high == math.ceil(high) and low < 5 and high > 95
    low, high = percentile_interval([1.0] * 10 + [np.inf] * 40, 0.9, widen=1.5)
    assert low == 1.0 and math.isnan(high)  # open above: beyond the window


def test_a_widened_interval_never_leaves_the_summarys_range():
    """QA of stop 24: a 1/e distance printed 41 [-10, 68] (learned_tables, GPT-1), a width 2 [0, 2]. Widening about
    the median can reach below the smallest value a summary takes (a distance >= 1, a length or integral >= 0); the
    low end is then that value, the high end and an interval that stays inside are unchanged."""
    from poslab.analysis.bootstrap import summary_floor

    distances = np.array([3.0] * 30 + [41.0] * 40 + [59.0] * 30)  # whole numbers: a crossing's replicates
    assert summary_floor(distances) == 1.0 and summary_floor(distances + 0.5) == 0.0
    wide = percentile_interval(distances, 0.95, integer=True, widen=2.0)
    assert wide[0] < 1  # what it was
    assert percentile_interval(distances, 0.95, integer=True, widen=2.0, minimum=1.0) == (1.0, wide[1])
    inside = np.array([30.0] * 30 + [41.0] * 40 + [59.0] * 30)
    assert percentile_interval(inside, 0.95, integer=True, widen=1.1, minimum=1.0) == \
        percentile_interval(inside, 0.95, integer=True, widen=1.1) == (28.0, 61.0)  # inside: untouched
    lengths = np.linspace(0.5, 10.0, 200)
    assert percentile_interval(lengths, 0.95, widen=3.0, minimum=0.0)[0] == 0.0


def test_block_noise_is_the_cluster_standard_error_and_zero_for_an_exact_table():
    from poslab.analysis.bootstrap import block_noise, block_standard_errors

    table = make_encoding("smoothed_random", length_scale=4.0).generate(256, 16, rng=np.random.default_rng(0))
    blocks = anchor_block_sums(unit_rows(table), 255, block_length=32)
    factor = block_noise(blocks)
    k = 5
    means = blocks.sums[:, k] / blocks.counts[:, k]
    total = blocks.counts[:, k].sum()
    ybar = blocks.sums[:, k].sum() / total
    expected = math.sqrt(8 / 7 * np.sum((blocks.counts[:, k] * (means - ybar)) ** 2)) / total
    assert block_standard_errors(blocks)[k] == pytest.approx(expected)
    assert np.sqrt(np.sum(factor[k] ** 2)) == pytest.approx(expected)
    assert np.isnan(factor[-1]).all()  # only one block has anchors that far back
    exact = anchor_block_sums(unit_rows(make_encoding("sinusoidal").generate(256, 32)), 255, block_length=32)
    assert np.nanmax(np.abs(block_noise(exact))) < 1e-12


def test_expected_cosine_of_correlated_gaussian_vectors_matches_monte_carlo():
    """The null-coverage benchmark's truth: E[x·y / (|x||y|)] for dim i.i.d. pairs with correlation ρ."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from null_coverage import expected_similarity

    rng = np.random.default_rng(0)
    dim, sigma, k = 8, 4.0, 6.0
    rho = math.exp(-k**2 / (4 * sigma**2))
    x = rng.standard_normal((100_000, dim))
    y = rho * x + math.sqrt(1 - rho**2) * rng.standard_normal((100_000, dim))
    mc = np.mean(np.sum(x * y, 1) / np.linalg.norm(x, axis=1) / np.linalg.norm(y, axis=1))
    assert expected_similarity(k, sigma, dim) == pytest.approx(mc, abs=3e-3)
    assert abs(expected_similarity(k, sigma, dim) - rho) > 0.01  # the finite-dim correction is real at dim 8


def test_the_run_gives_intervals_of_the_model_free_summaries():
    from poslab.study.runner import analyse_table

    table = make_encoding("smoothed_random", length_scale=8.0).generate(512, 64, rng=np.random.default_rng(1))
    run = analyse_table(table, max_distance=511, seed=1)
    boot = run.bootstrap
    assert set(boot.summaries_ci) == {"e_folding_distance", "zero_crossing", "first_minimum", "integral_scale"}
    low, high = boot.summaries_ci["e_folding_distance"]
    assert low <= 16 <= high and low == math.floor(low)  # e-folding of exp(-k²/256): k = 16
    assert boot.summaries["integral_scale"].shape == (boot.n_resamples,)
    assert boot.block_length >= 512 // 32 and boot.widening > 1


@pytest.mark.slow
def test_decay_length_and_summary_intervals_cover_on_the_null_model():
    """A smaller version of benchmarks/null_coverage.py: 60 seeds at σ = 8, n = 256, dim 64."""
    import sys
    from pathlib import Path

    from poslab.study.runner import analyse_table

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from null_coverage import truths

    truth = truths(8.0, 64, 256)
    covered = {"decay_length": 0, "band_width_0p5": 0, "e_folding_distance": 0}
    for seed in range(60):
        table = make_encoding("smoothed_random", length_scale=8.0).generate(256, 64, rng=np.random.default_rng(seed))
        boot = analyse_table(table, max_distance=255, seed=seed).bootstrap
        intervals = {"decay_length": boot.decay_length_ci, "band_width_0p5": boot.band_widths_ci[0.5],
                     "e_folding_distance": boot.summaries_ci["e_folding_distance"]}
        for name, (low, high) in intervals.items():
            covered[name] += low <= truth[name] <= high
    assert all(51 <= c <= 60 for c in covered.values()), covered  # 85-100 % of 60 (nominal 95 %)


def _block_lag_sums_every_pair(x, block_length, size):
    """The block sums with the products of every block pair in one stacked product (the implementation before the
    pairs c >= b were grouped and threaded), for the bit-for-bit comparison."""
    from scipy import fft

    n, dim = x.shape
    n_blocks = math.ceil(n / block_length)
    n_fft = fft.next_fast_len(2 * block_length, real=True)
    reach = min(n_blocks - 1, (size - 1) // block_length + 1)
    chunk = min(dim, max(bootstrap._MIN_CHUNK_DIMS, bootstrap._FFT_BLOCK_ENTRIES // (n_blocks * n_fft)))
    spectra = np.zeros((n_fft // 2 + 1, n_blocks, n_blocks), dtype=np.complex128)
    buf, padded = np.zeros((n_blocks, chunk, n_fft)), np.zeros((n_blocks * block_length, chunk))
    for c0 in range(0, dim, chunk):
        m = min(chunk, dim - c0)
        padded[:n, :m] = x[:, c0:c0 + m]
        buf[:, :m, :block_length] = padded[:, :m].reshape(n_blocks, block_length, m).transpose(0, 2, 1)
        spec = fft.rfft(buf[:, :m], axis=-1).transpose(2, 0, 1)
        spectra += np.matmul(spec.conj(), spec.transpose(0, 2, 1))
    k = np.arange(size)
    offset, r = k // block_length, k % block_length
    sums = np.zeros((n_blocks, size))
    for b in range(n_blocks):
        hi = min(n_blocks, b + reach + 1)
        corr = fft.irfft(spectra[:, b, b:hi], n=n_fft, axis=0)
        near, far = offset < hi - b, offset + 1 < hi - b
        sums[b, near] += corr[r[near], offset[near]]
        sums[b, far] += corr[(r[far] - block_length) % n_fft, offset[far] + 1]
    return sums


@pytest.mark.parametrize("n_blocks", [32, 20, 16, 9])
@pytest.mark.parametrize("trim", [5, 0])  # the last block zero-padded, or every block whole (read in place)
@pytest.mark.parametrize("small", [False, True])  # chunks of 16 dims (the last of 8) and 7 frequencies per product
def test_grouped_threaded_block_products_equal_every_pair_bit_for_bit(n_blocks, trim, small, monkeypatch):
    if small:
        monkeypatch.setattr(bootstrap, "_FFT_BLOCK_ENTRIES", 1)
        monkeypatch.setattr(bootstrap, "_PRODUCT_FREQUENCIES", 7)
    rng = np.random.default_rng(n_blocks)
    x = rng.standard_normal((n_blocks * 64 - trim, 40))
    for threads, size in ((1, len(x)), (3, len(x)), (3, 3 * 64 + 10), (1, 50)):
        monkeypatch.setattr(_threads, "_limit", threads)
        np.testing.assert_array_equal(bootstrap._block_lag_sums(x, 64, size),
                                      _block_lag_sums_every_pair(x, 64, size))


@pytest.mark.parametrize("n, block_length", [(100, 7), (1000, 32), (257, 256), (64, 64)])
@pytest.mark.parametrize("tile", [2**14, 7])  # tiles of 7 distances: runs of a block cut by tiles and vice versa
def test_pooled_means_by_the_counts_closed_form_equal_the_matrix_products_bit_for_bit(n, block_length, tile,
                                                                                      monkeypatch):
    monkeypatch.setattr(bootstrap, "_TILE_COLUMNS", tile)
    units = unit_rows(np.random.default_rng(n).standard_normal((n, 3)))
    blocks = bootstrap.anchor_block_sums(units, n - 1, block_length)
    layout = bootstrap._block_layout(blocks.counts)
    assert layout is not None
    weights = bootstrap._resample_weights(blocks.counts.shape[0], 30, np.random.default_rng(1))
    weights[:4, 0] = 0.0  # resamples without the first block: no pair at the last distances
    buffers = {}
    for c0, c1 in [(0, n), (0, 1), (n // 3, n // 2 + 1), (n - 1, n), (max(0, n - block_length - 3), n)]:
        j, partial, whole, padded = bootstrap._block_count_terms(weights, layout, c0, c1 - c0)
        np.testing.assert_array_equal(whole[:, j] + padded[:, j] * partial, weights @ blocks.counts[:, c0:c1])
        expected = bootstrap._pooled(weights, blocks.sums[:, c0:c1], blocks.counts[:, c0:c1])[0]
        for given in (None, buffers):  # fresh arrays, or the buffers of the previous chunk reused
            np.testing.assert_array_equal(
                bootstrap._pooled_means(weights, blocks.sums[:, c0:c1], blocks.counts[:, c0:c1], layout, c0, given),
                expected)
        assert np.isnan(expected).any() or c1 < n  # the resamples without the first block


@pytest.mark.parametrize("n, length, max_distance", [(600, 40, 599), (600, 37, 300), (257, 256, 256)])
def test_the_bootstrap_by_the_blocks_layout_equals_the_general_path_bit_for_bit(n, length, max_distance,
                                                                               monkeypatch):
    """The counts' closed form (pooled means, the last distance with a pair) gives every replicate, interval and
    band of the matrix products, bit for bit: widths beyond the window or undefined where a resample has no pair
    at its end (few blocks, so some resamples lack the first), in chunks of 53 distances and 3 resamples."""
    import dataclasses

    from poslab.stages import AnalysisOptions
    from poslab.stages.bands import summariser

    table = make_encoding("smoothed_random", length_scale=6.0).generate(n, 16, rng=np.random.default_rng(n))
    profile = similarity_profile(table, max_distance=max_distance)
    fits = fit_decay(profile.distance[1:], profile.mean_similarity[1:], n_pairs=profile.n_pairs[1:],
                     std=profile.std_similarity[1:])
    blocks = anchor_block_sums(unit_rows(table), max_distance, length)
    assert bootstrap._block_layout(blocks.counts) is not None
    summarise = summariser(profile, AnalysisOptions(), bootstrap.block_standard_errors(blocks))
    monkeypatch.setattr(bootstrap, "_CHUNK_ENTRIES", 40 * 53)
    monkeypatch.setattr(bootstrap, "_REPLICATE_ENTRIES", 3 * n)
    monkeypatch.setattr(bootstrap, "_TILE_COLUMNS", 50)
    results = []
    for layout in (bootstrap._block_layout, lambda counts: None):
        monkeypatch.setattr(bootstrap, "_block_layout", layout)
        results.append(bootstrap_anchor_blocks(profile.distance, blocks, 40, np.random.default_rng(2), fits=fits,
                                               thresholds=(0.9, 0.5, -0.9), level=0.9, summarise=summarise))
    by_layout, general = results
    for field in dataclasses.fields(general):
        np.testing.assert_equal(getattr(by_layout, field.name), getattr(general, field.name), err_msg=field.name)
    widths = general.band_widths[:, 2]  # -0.9: never reached
    assert np.isinf(widths).any() and (np.isnan(widths).any() or max_distance < n - 1 or length * 2 > n)


def test_block_layout_only_for_counts_of_blocks_of_valid_positions():
    table = np.random.default_rng(0).standard_normal((50, 3))
    table[7] = 0.0  # an excluded position: its block's counts are not the closed form
    with pytest.warns(UserWarning, match="1 of 50 positions"):
        units = unit_rows(table)
    blocks = bootstrap.anchor_block_sums(units, 49, 8)
    assert bootstrap._block_layout(blocks.counts) is None
    assert bootstrap._block_layout(np.full((3, 10), 10.0) - np.arange(10)) is None  # seeds: n − k each
    assert bootstrap._block_layout(np.zeros((0, 4))) is None
    counts = bootstrap.anchor_block_sums(unit_rows(np.random.default_rng(1).standard_normal((50, 3))), 49, 8).counts
    assert bootstrap._block_layout(counts) is not None
    for b, k in ((0, 0), (2, 10), (3, 30), (3, 48), (6, 49), (5, 2)):  # all of a block's anchors, fewer, none
        changed = counts.copy()
        changed[b, k] += 1
        assert bootstrap._block_layout(changed) is None, (b, k)


def test_block_noise_in_column_chunks_equals_the_whole_array_formula_bit_for_bit(monkeypatch):
    monkeypatch.setattr(bootstrap, "_CHUNK_ENTRIES", 64)  # many chunks of a few columns
    table = np.random.default_rng(3).standard_normal((300, 4))
    table[[5, 140]] = 0.0  # excluded positions: counts not the closed form
    with pytest.warns(UserWarning):
        units = unit_rows(table)
    blocks = anchor_block_sums(units, 299, 37)
    sums, counts = blocks.sums, blocks.counts
    total = counts.sum(axis=0)  # block_noise before it was chunked
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(axis=0) / total
        used = (counts > 0).sum(axis=0)
        factor = (np.sqrt(used / np.maximum(used - 1, 1)) / total) * np.where(counts > 0, sums - counts * mean, 0.0)
    factor[:, used < 2] = np.nan
    np.testing.assert_array_equal(bootstrap.block_noise(blocks), factor.T)
    np.testing.assert_array_equal(bootstrap.block_standard_errors(blocks), np.sqrt(np.sum(factor.T ** 2, axis=1)))


@pytest.mark.parametrize("n", [600, 4200])  # 4200: a binned fit
def test_the_bootstrap_in_threads_equals_one_thread_bit_for_bit_and_reports_in_order(n, monkeypatch):
    """The chunks of distances and of resamples are reduced in threads and combined in their order: every
    replicate, interval and band is the one-thread result bit for bit, and progress counts up in order."""
    import dataclasses

    from poslab.stages import AnalysisOptions
    from poslab.stages.bands import summariser

    table = make_encoding("smoothed_random", length_scale=6.0).generate(n, 16, rng=np.random.default_rng(n))
    units = unit_rows(table)
    profile = similarity_profile(table)
    fits = fit_decay(profile.distance[1:], profile.mean_similarity[1:], n_pairs=profile.n_pairs[1:],
                     std=profile.std_similarity[1:])
    blocks = anchor_block_sums(units, n - 1, n // 16)
    summarise = summariser(profile, AnalysisOptions(), bootstrap.block_standard_errors(blocks))
    monkeypatch.setattr(bootstrap, "_CHUNK_ENTRIES", 40 * 53)  # chunks of 53 distances
    monkeypatch.setattr(bootstrap, "_REPLICATE_ENTRIES", 3 * n)  # chunks of 3 resamples
    results, reports = [], []
    for threads in (1, 3):
        monkeypatch.setattr(_threads, "_limit", threads)
        seen = []
        results.append(bootstrap_anchor_blocks(profile.distance, blocks, 40, np.random.default_rng(2), fits=fits,
                                               thresholds=(0.9, 0.5, 0.0), level=0.9, summarise=summarise,
                                               progress=lambda *a, seen=seen: seen.append(a)))
        reports.append(seen)
    one, many = results
    for field in dataclasses.fields(one):
        np.testing.assert_equal(getattr(many, field.name), getattr(one, field.name), err_msg=field.name)
    assert reports[0] == reports[1]
    for what in ("distances", "summaries"):
        done = [d for w, d, _ in reports[0] if w == what]
        assert len(done) > 3 and done == sorted(done)
    assert one.summaries and np.isfinite(one.decay_lengths).any() and not one.exact


def test_anchor_block_sums_in_reused_buffers_equal_fresh_ones_bit_for_bit():
    """The working arrays kept in ``buffers`` (a run, then its smaller windows, then a larger call again; a padded
    last block; excluded rows) give the sums and counts of fresh arrays."""
    x = np.random.default_rng(8).standard_normal((1000, 20))
    x[[5, 600]] = 0.0
    with pytest.warns(UserWarning):
        masked = unit_rows(x)
    clean = unit_rows(np.random.default_rng(9).standard_normal((1000, 20)))
    buffers = {}
    for units, n, d, length in ((clean, 1000, 999, 40), (clean, 500, 499, 20), (clean, 250, 124, 10),
                                (masked, 1000, 700, 33), (clean, 999, 998, 64), (masked, 300, 299, 17)):
        window = type(units)(units.vectors[:n], units.valid[:n], units.center)
        reused = anchor_block_sums(window, d, length, buffers=buffers)
        fresh = anchor_block_sums(window, d, length)
        np.testing.assert_array_equal(reused.sums, fresh.sums)
        np.testing.assert_array_equal(reused.counts, fresh.counts)
    assert buffers  # they were kept


def test_column_quantiles_equal_a_loop_over_columns_bit_for_bit(monkeypatch):
    """The pointwise percentiles (chunks of columns without NaN by one order statistic and weight for all, others
    column by column; the sorted columns in a reused buffer) are the linear interpolation of each column's sorted
    finite values, computed column by column."""
    monkeypatch.setattr(bootstrap, "_CHUNK_ENTRIES", 40 * 7)  # chunks of 7 columns
    rng = np.random.default_rng(5)
    values = rng.standard_normal((40, 60))
    values[rng.random((40, 60)) < 0.2 * (np.arange(60) >= 30)] = np.nan  # NaN in the second half only
    values[:, 59] = np.nan
    values[1:, 58] = np.nan  # one finite value
    buffers = {}
    for _ in range(2):
        got = bootstrap._column_quantiles(values, [0.025, 0.975], buffers)
        for q, column_values in zip([0.025, 0.975], got):
            for c in range(values.shape[1]):
                x = np.sort(values[~np.isnan(values[:, c]), c])
                if not x.size:
                    assert np.isnan(column_values[c])
                    continue
                h = (x.size - 1) * q
                lo = math.floor(h)
                hi = min(lo + 1, x.size - 1)
                assert column_values[c] == x[lo] + (h - lo) * (x[hi] - x[lo]), (q, c)
