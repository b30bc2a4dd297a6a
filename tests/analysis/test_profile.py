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


# --- the FFT mean and the anchor-sampled std (issue 4: no n x n matrix) ---


def _diagonal_oracle(table):
    """Every diagonal of the full cosine-similarity matrix (an independent O(n²) path)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidPositionsWarning)
        s = cosine_similarity(table)
    n = len(s)
    diags = [np.diagonal(s, k) for k in range(n)]
    diags = [d[np.isfinite(d)] for d in diags]
    return (np.array([d.mean() if d.size else np.nan for d in diags]),
            np.array([d.std() if d.size else np.nan for d in diags]), np.array([d.size for d in diags]))


def _holey(rng, n, dim):
    table = rng.normal(size=(n, dim)) + 0.5
    table[rng.choice(n, size=n // 7, replace=False)] = 0.0  # excluded rows scattered everywhere
    table[5] = np.nan
    return table


def test_fft_mean_and_exact_n_pairs_with_many_excluded_rows(rng):
    table = _holey(rng, 900, 24)
    mean, std, count = _diagonal_oracle(table)
    with pytest.warns(InvalidPositionsWarning):
        prof = similarity_profile(table)
    np.testing.assert_array_equal(prof.n_pairs, count)
    np.testing.assert_allclose(prof.mean_similarity, mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(prof.std_similarity, std, rtol=0, atol=1e-12)
    assert prof.std_exact and np.array_equal(prof.std_pairs, prof.n_pairs)


def test_fft_mean_agrees_to_1e_9_where_pairs_are_few(gpt2_table):
    """Real GPT-2 rows repeated to 3072 positions: the last distances average 1..few pairs."""
    table = np.concatenate([gpt2_table, gpt2_table[::-1], gpt2_table])
    mean, _, count = _diagonal_oracle(table)
    prof = similarity_profile(table)
    np.testing.assert_array_equal(prof.n_pairs, count)
    np.testing.assert_allclose(prof.mean_similarity, mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(prof.mean_similarity[:2048], mean[:2048], rtol=0, atol=1e-13)


@pytest.mark.parametrize("maker", ["gpt2", "random_biased", "sinusoidal"])
def test_float32_within_stated_accuracy(maker, gpt2_table, rng):
    table = {"gpt2": lambda: gpt2_table,
             "random_biased": lambda: rng.normal(size=(1500, 32)) + 3.0,  # cos ~ 0.9: the hardest case for the FFT
             "sinusoidal": lambda: make_encoding("sinusoidal").generate(1500, 64)}[maker]()
    exact = similarity_profile(table)
    fast = similarity_profile(table, precision="float32")
    n = len(table)
    # stated in the docstring: |Δ mean| <= ~1e-7 · n / n_pairs, |Δ std| <= 2e-7
    assert np.all(np.abs(fast.mean_similarity - exact.mean_similarity) <= 2e-7 * n / exact.n_pairs)
    assert np.abs(fast.std_similarity - exact.std_similarity).max() <= 2e-7
    np.testing.assert_array_equal(fast.n_pairs, exact.n_pairs)
    with pytest.raises(ValueError, match="precision must be one of float64, float32"):
        similarity_profile(table, precision="float16")


def _sampled_pairs_oracle(table, anchors, max_distance, strata):
    """Brute force over the sampled pairs: (a, a + k) for every anchor a, and (a − k, a) unless a − k is an
    anchor; weighted std with weight 1 for pairs touching position 0 or n − 1, else 1 / P(pair sampled)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidPositionsWarning)
        s = cosine_similarity(table)
    n, anchor_set = len(table), set(anchors.tolist())
    inverse_p = 1 / (1 - (1 - strata / n) ** 2)
    values = [[] for _ in range(max_distance + 1)]
    for a in anchors:
        for k in range(max_distance + 1):
            for backward, (i, j) in enumerate(((a, a + k), (a - k, a))):
                if i < 0 or j >= n or not np.isfinite(s[i, j]) or (backward and (k == 0 or i in anchor_set)):
                    continue
                values[k].append((1.0 if k == 0 else s[i, j], 1.0 if {i, j} & {0, n - 1} else inverse_p))
    std = []
    for v in values:
        x, w = np.array(v).T if v else (np.array([]), np.array([]))
        m = np.average(x, weights=w) if v else np.nan
        std.append(np.sqrt(np.average((x - m) ** 2, weights=w)) if v else np.nan)
    return np.array(std), np.array([len(v) for v in values])


@pytest.mark.parametrize("max_distance", [None, 40])
@pytest.mark.parametrize("holes", [True, False])
def test_sampled_std_is_the_std_of_the_sampled_pairs(max_distance, holes, monkeypatch, rng):
    import poslab.analysis.profile as mod

    monkeypatch.setattr(mod, "_EXACT_STD_POSITIONS", 100)
    monkeypatch.setattr(mod, "_STD_ANCHORS", 12)
    monkeypatch.setattr(mod, "_BLOCK_ENTRIES", 3000)  # many column blocks
    table = _holey(rng, 400, 10) if holes else rng.normal(size=(400, 10)) + 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InvalidPositionsWarning)
        prof = similarity_profile(table, max_distance=max_distance)
    assert (len(prof.excluded_positions) > 0) == holes
    anchors = mod._stratified_anchors(400, 12, np.random.default_rng(mod._STD_SEED))
    assert anchors[0] == 0 and anchors[-1] == 399 and len(anchors) <= 14
    std, pairs = _sampled_pairs_oracle(table, anchors, len(prof.distance) - 1, strata=12)
    np.testing.assert_array_equal(prof.std_pairs, pairs)
    np.testing.assert_allclose(prof.std_similarity, std, rtol=0, atol=1e-12)
    assert not prof.std_exact and (prof.std_pairs <= prof.n_pairs).all()
    mean, _, count = _diagonal_oracle(table)  # the mean stays exact
    np.testing.assert_allclose(prof.mean_similarity, mean[:len(prof.distance)], rtol=0, atol=1e-12)


def test_sampled_std_accuracy_on_real_gpt2(gpt2_table, monkeypatch):
    """128 anchors on the 1024 GPT-2 positions (forced sampling) against the exact std: the stated accuracy."""
    import poslab.analysis.profile as mod

    exact = similarity_profile(gpt2_table)
    monkeypatch.setattr(mod, "_EXACT_STD_POSITIONS", 0)
    sampled = similarity_profile(gpt2_table)
    np.testing.assert_array_equal(sampled.mean_similarity, exact.mean_similarity)
    k = slice(1, 512)  # >= ~128 sampled pairs each
    rel = np.abs(sampled.std_similarity[k] / exact.std_similarity[k] - 1)
    se = 1 / np.sqrt(2 * sampled.std_pairs[k])  # Gaussian-like spreads (docstring)
    assert np.median(rel) < 0.05 and np.mean(rel < 3 * se) > 0.95
    assert np.isfinite(sampled.std_similarity).all() and sampled.std_pairs.min() >= 1
    assert sampled.std_pairs[-1] == 1 == sampled.n_pairs[-1]  # both end positions are anchors


def test_long_context_never_holds_an_n_by_n_matrix(rng):
    """C13 at n = 30000: S alone would be 7.2 GB; profile and block heatmap peak far below (numpy reports to tracemalloc)."""
    import tracemalloc

    table = rng.normal(size=(30_000, 8))
    tracemalloc.start()
    try:
        prof = similarity_profile(table)
        blocks = block_similarity(table, bins=512)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 128 * 2**20  # < 2 % of S; strips of at most ~4e6 entries
    assert len(prof.distance) == 30_000 and prof.n_pairs[-1] == 1 and np.isfinite(prof.std_similarity).all()
    assert blocks.mean_similarity.shape == (512, 512)
    k = [1, 15_000, 29_999]  # exact row-wise dot products at a few distances
    u = table / np.linalg.norm(table, axis=1, keepdims=True)
    np.testing.assert_allclose(prof.mean_similarity[k], [np.einsum("ij,ij->i", u[:-d], u[d:]).mean() for d in k],
                               rtol=0, atol=1e-12)


def test_std_strips_split_between_threads_by_distance_give_the_same_bits(monkeypatch):
    """Each thread sums its own distances, in the one-thread order: the same std and pair counts, bit for bit."""
    from poslab import _threads
    from poslab.analysis import profile

    table = np.random.default_rng(3).standard_normal((5000, 8))
    table[[0, 77, 2500]] = 0.0
    monkeypatch.setattr(profile, "_THREADED_DISTANCES", 2)
    got = {}
    for threads in (1, 2, 3):
        monkeypatch.setattr(_threads, "_limit", threads)
        with pytest.warns(UserWarning, match="zero"):
            p = profile.similarity_profile(table, max_distance=3000)
        got[threads] = (p.std_similarity, p.std_pairs)
    parts = profile._distance_parts(5000, 3001, 3)  # contiguous runs of about equal shares of the pairs
    assert [p[0] for p in parts[1:]] == [p[1] for p in parts[:-1]] and parts[0][0] == 0 and parts[-1][1] == 3001
    shares = [sum(5000 - k for k in range(k0, k1)) for k0, k1 in parts]
    assert len(parts) == 3 and max(shares) / min(shares) < 1.01
    for threads in (2, 3):
        np.testing.assert_array_equal(got[threads][0], got[1][0])
        np.testing.assert_array_equal(got[threads][1], got[1][1])
