"""The smoothed_random null model: its profile is exp(−k² / (4σ²)) and fits recover decay length 2σ."""

import math

import numpy as np
import pytest

from poslab.analysis import fit_decay, similarity_profile, unit_rows
from poslab.analysis.bootstrap import anchor_block_sums, bootstrap_anchor_blocks
from poslab.encodings import ParameterError, make_encoding


def test_profile_is_the_closed_form_and_stationary():
    """Averaged over seeds, S[i, i + k] is exp(−k²/(4σ²)) at the first anchor as in the middle (no boundary effect)."""
    sigma, n, dim, seeds = 5.0, 128, 256, 40
    enc = make_encoding("smoothed_random", length_scale=sigma)
    k = np.arange(0, 16)
    first, middle, profile = np.zeros(k.size), np.zeros(k.size), np.zeros(k.size)
    for seed in range(seeds):
        u = unit_rows(enc.generate(n, dim, rng=np.random.default_rng(seed))).vectors
        first += (u[0] @ u[k].T) / seeds
        middle += (u[60] @ u[60 + k].T) / seeds
        profile += similarity_profile(u, max_distance=15).mean_similarity / seeds
    truth = np.exp(-(k**2) / (4 * sigma**2))
    np.testing.assert_allclose(enc.expected_similarity(k), truth)
    # per-pair sd is at most 1/sqrt(dim) = 0.0625; over 40 seeds the mean of one pair has sd <= 0.01
    np.testing.assert_allclose(first, truth, atol=0.035)
    np.testing.assert_allclose(middle, truth, atol=0.035)
    np.testing.assert_allclose(profile, truth, atol=0.01)
    assert enc.decay_length == 2 * sigma and enc.radius == 20


def test_a_reflecting_boundary_would_have_shown():
    """The check above can fail: scipy's default mode="reflect" correlates position 0 with its mirror image."""
    from scipy.ndimage import gaussian_filter1d

    rng = np.random.default_rng(0)
    x = gaussian_filter1d(rng.standard_normal((64, 4096)), 5.0, axis=0)  # mode="reflect", no crop
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    assert u[0] @ u[8] > math.exp(-64 / 100) + 0.1  # boundary rows are far more similar than the closed form


def test_length_scale_below_one_refused():
    with pytest.raises(ParameterError, match="length_scale.*>= 1"):
        make_encoding("smoothed_random", length_scale=0.5)


@pytest.mark.parametrize("sigma", [4.0, 8.0, 16.0])
def test_fits_recover_the_length_scale_within_their_interval(sigma):
    """Over 3 seeds: the selected decay length, measured from distance 1, is sqrt(4σ² + 1) − 1 within 10 %
    (2σ from distance 0), and the anchor-block bootstrap 95 % interval holds it (at least 2 of 3 seeds per
    length scale; E[cos] lies O(1/dim) below ρ). The whole coverage is measured by benchmarks/null_coverage.py."""
    enc = make_encoding("smoothed_random", length_scale=sigma)
    covered = 0
    for seed in range(3):
        table = enc.generate(512, 128, rng=np.random.default_rng(seed))
        profile = similarity_profile(table)
        d = profile.distance[1:]
        fits = fit_decay(d, profile.mean_similarity[1:], n_pairs=profile.n_pairs[1:], std=profile.std_similarity[1:])
        best = fits.selected
        assert best is not None and best.status == "ok"
        truth = math.sqrt(4 * sigma**2 + 1) - 1
        assert best.decay_length == pytest.approx(truth, rel=0.1)
        blocks = anchor_block_sums(unit_rows(table), 511)
        result = bootstrap_anchor_blocks(profile.distance, blocks, 100, np.random.default_rng(seed), fits=fits,
                                         thresholds=(0.5,))
        low, high = result.decay_length_ci
        assert result.n_failed <= 10 and low < best.decay_length < high
        covered += low <= truth <= high
    assert covered >= 2
