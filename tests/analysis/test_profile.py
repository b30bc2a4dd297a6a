import warnings

import numpy as np
import pytest

from poslab.analysis import (
    InvalidPositionsWarning,
    band_metrics,
    block_similarity,
    cosine_similarity,
    similarity_profile,
)
from poslab.encodings import make_encoding

C10 = np.array([[1, 0, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0]], float)


def brute_force_profile(table, max_distance):
    """The plain O(n²) loop: cosine of every valid pair, grouped by distance."""
    n = len(table)
    sums = [[] for _ in range(max_distance + 1)]
    for i in range(n):
        for j in range(i, min(n, i + max_distance + 1)):
            a, b = table[i], table[j]
            na, nb = np.sqrt(a @ a), np.sqrt(b @ b)
            if na == 0 or nb == 0 or not (np.isfinite(na) and np.isfinite(nb)):
                continue
            sums[j - i].append(a @ b / (na * nb))
    mean = np.array([np.mean(s) for s in sums])
    std = np.array([np.std(s) for s in sums])
    return mean, std, np.array([len(s) for s in sums])


@pytest.mark.parametrize("maker", ["random", "gpt2", "sinusoidal_odd", "c10"])
@pytest.mark.parametrize("max_distance", [None, 7])
def test_fast_profile_equals_brute_force_loop(maker, max_distance, gpt2_table):
    table = {
        "random": lambda: np.random.default_rng(1).normal(size=(70, 9)),
        "gpt2": lambda: gpt2_table[::15],
        "sinusoidal_odd": lambda: make_encoding("sinusoidal").generate(60, 11),
        "c10": lambda: C10,
    }[maker]()
    k = len(table) - 1 if max_distance is None else min(max_distance, len(table) - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidPositionsWarning)
        prof = similarity_profile(table, max_distance=None if max_distance is None else k)
    mean, std, count = brute_force_profile(table, k)
    np.testing.assert_allclose(prof.mean_similarity, mean, rtol=0, atol=1e-13)
    np.testing.assert_allclose(prof.std_similarity, std, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(prof.n_pairs, count)


def test_fast_profile_equals_diagonals_of_full_matrix_on_real_gpt2(gpt2_table, monkeypatch):
    s = cosine_similarity(gpt2_table)
    mean = np.array([np.diagonal(s, k).mean() for k in range(1024)])
    std = np.array([np.diagonal(s, k).std() for k in range(1024)])
    # force many small blocks so the block merge is exercised on real data
    import poslab.analysis.profile as mod

    monkeypatch.setattr(mod, "_BLOCK_ENTRIES", 50_000)
    for max_distance in (None, 100):
        prof = similarity_profile(gpt2_table, max_distance=max_distance)
        k = len(prof.distance)
        np.testing.assert_allclose(prof.mean_similarity, mean[:k], atol=1e-13)
        np.testing.assert_allclose(prof.std_similarity, std[:k], atol=1e-12)
    assert prof.std_similarity[0] == 0.0 and prof.mean_similarity[0] == 1.0


def test_c10_zero_vector_is_reported_and_excluded():
    with pytest.warns(InvalidPositionsWarning, match=r"\[2\]"):
        prof = similarity_profile(C10)
    np.testing.assert_allclose(prof.mean_similarity, [1, 0.707107, 0.816497, 0.57735], atol=1e-6)
    np.testing.assert_array_equal(prof.n_pairs, [3, 1, 1, 1])
    assert prof.excluded_positions == (2,)
    assert np.isfinite(prof.mean_similarity).all()
    with pytest.raises(ValueError, match="zero or non-finite"):
        similarity_profile(C10, invalid="raise")
    with pytest.warns(InvalidPositionsWarning):
        s = cosine_similarity(C10)
    assert np.isnan(s[2]).all() and np.isnan(s[:, 2]).all() and s[0, 0] == 1.0
    nan_row = C10.copy()
    nan_row[2] = [np.nan, 1, 1, 1, 1, 1]
    with pytest.warns(InvalidPositionsWarning):
        np.testing.assert_allclose(similarity_profile(nan_row).mean_similarity, [1, 0.707107, 0.816497, 0.57735], atol=1e-6)


def test_similarity_matrix_properties(rng):
    table = rng.normal(size=(40, 5)) * rng.uniform(0.1, 100, size=(40, 1))
    s = cosine_similarity(table)
    assert (np.diag(s) == 1.0).all() and (np.abs(s) <= 1).all()
    np.testing.assert_allclose(s, s.T, atol=0)
    same = cosine_similarity(np.repeat(table[:1] * 1e8, 3, axis=0))
    assert (same <= 1.0).all() and np.abs(same - 1).max() < 1e-15  # clipped, never 1 + 1e-16


def test_center_subtracts_mean_vector(rng):
    table = rng.normal(size=(30, 4)) + 10.0
    assert cosine_similarity(table)[0, 1] > 0.9
    centred = table - table.mean(axis=0)
    np.testing.assert_allclose(cosine_similarity(table, center=True), cosine_similarity(centred), atol=1e-14)
    assert similarity_profile(table, center=True).center


def test_bad_max_distance():
    with pytest.raises(ValueError, match="max_distance"):
        similarity_profile(np.eye(4), max_distance=4)
    with pytest.raises(ValueError, match="2-D"):
        similarity_profile(np.ones(5))


def test_c2_band_first_crossing_and_recross():
    table = make_encoding("sinusoidal").generate(16, 8)
    bands = band_metrics(similarity_profile(table), thresholds=[0.5, 0.0])
    assert bands.width[0] == 3 and bands.recrosses[0]  # 0.4912 at 3, back to 0.5667 at 4
    assert np.isnan(bands.width[1]) and not bands.recrosses[1]
    frame = bands.to_frame()
    assert list(frame.columns) == ["threshold", "width", "recrosses", "crossings"]
    assert frame["width"].isna().tolist() == [False, True]


def test_band_metrics_on_monotone_curve():
    d = np.arange(100)
    bands = band_metrics(np.exp(-d / 10.0), thresholds=[0.9, 0.5])
    # first d with exp(-d/10) < t: d > -10 ln t
    np.testing.assert_array_equal(bands.width, np.floor(-10 * np.log([0.9, 0.5])) + 1)
    assert not bands.recrosses.any() and (bands.crossings == 1).all()
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        band_metrics(np.ones(3), thresholds=[1.5])


@pytest.mark.parametrize("bins", [1, 7, 64])
def test_block_similarity_equals_block_means_of_s(bins, gpt2_table):
    table = gpt2_table[:200]
    s = cosine_similarity(table)
    blocks = block_similarity(table, bins=bins)
    e = blocks.edges
    expected = np.array([[s[e[a]:e[a + 1], e[b]:e[b + 1]].mean() for b in range(bins)] for a in range(bins)])
    np.testing.assert_allclose(blocks.mean_similarity, expected, atol=1e-13)
    frame = blocks.to_frame()
    assert len(frame) == bins * bins
    assert frame["row_start"].iloc[-1] == e[-2] and frame["col_stop"].iloc[-1] == 200


def test_block_similarity_excludes_invalid_positions():
    with pytest.warns(InvalidPositionsWarning):
        blocks = block_similarity(C10, bins=2)
    with pytest.warns(InvalidPositionsWarning):
        s = cosine_similarity(C10)
    assert blocks.mean_similarity[1, 1] == pytest.approx(np.nanmean(s[2:, 2:]), abs=1e-14)
    assert blocks.mean_similarity[0, 1] == pytest.approx(np.nanmean(s[:2, 2:]), abs=1e-14)
