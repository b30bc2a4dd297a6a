"""Property metrics: known values on sinusoidal and random tables, brute-force oracles, anchor subsampling."""

import math

import numpy as np
import pytest
from scipy import stats

from poslab.analysis import cosine_similarity, similarity_profile, unit_rows
from poslab.analysis.properties import (anchor_positions, kernel_asymmetry, kernel_properties, locality,
                                        monotonicity, table_properties, translation_variance_ratio)
from poslab.encodings import apply_rotary, make_encoding


def brute_force(table, max_distance, tau=0.1, reach=64):
    """Every metric straight from the definitions, on the full n × n matrix."""
    s = cosine_similarity(table)
    n = len(s)
    rhos, violations, pairs = [], 0, 0
    for i in range(n):
        v = s[i, i + 1:i + 1 + max_distance]
        if v.size >= 3:
            rhos.append(stats.spearmanr(np.arange(v.size), v)[0])
        later_not_lower = v[None, :] >= v[:, None]  # [n, m]: S(i, i+m) >= S(i, i+n)
        violations += int(np.sum(np.triu(later_not_lower, k=1)))
        pairs += v.size * (v.size - 1) // 2
    pairs_k = [(j - i, s[i, j]) for i in range(n) for j in range(i + 1, min(n, i + max_distance + 1))]
    k, v = np.array(pairs_k).T
    within = sum(np.sum((v[k == d] - v[k == d].mean()) ** 2) for d in np.unique(k))
    reach = min(reach, (n - 1) // 2)
    local, scaled = [], []
    for i in range(reach, n - reach):  # anchors whose whole reach lies inside the table
        logits = s[i, i - reach:i + reach + 1] / tau
        a = np.exp(logits - logits.max())
        a /= a.sum()
        local.append(sum(a[reach + m] * 2.0 ** -abs(m) for m in range(-reach, reach + 1)))
        diff = np.array([abs(a[reach - m] - a[reach + m]) for m in range(1, reach + 1)])
        diff[diff <= 1e-9 * a.max()] = 0.0  # rounding noise (the guard against Chen et al.'s min-max scaling)
        span = diff.max() - diff.min()
        scaled.extend((diff - diff.min()) / span if span > 0 else np.zeros(reach))
    return {"monotonicity_discordance": violations / pairs, "monotonicity_spearman": np.mean(rhos),
            "translation_variance_ratio": within / np.sum((v - v.mean()) ** 2),
            "symmetry": 1 - np.mean(scaled), "locality": np.mean(local)}


@pytest.mark.parametrize("kind, params", [("sinusoidal", {}), ("random", {}), ("learned", {"source": "gpt2"}),
                                          ("smoothed_random", {"length_scale": 6.0})])
def test_metrics_equal_the_brute_force_definitions(kind, params):
    table = make_encoding(kind, **params).generate(160, 48, rng=np.random.default_rng(3))
    props = table_properties(unit_rows(table), similarity_profile(table, max_distance=100))
    frame = props.to_frame().set_index("metric")
    expected = brute_force(table, 100)
    for metric, value in expected.items():
        assert frame.loc[metric, "value"] == pytest.approx(value, abs=1e-12), metric
    assert (frame["anchor_step"] == 1).all()
    assert (frame.loc[["monotonicity_discordance", "monotonicity_spearman"], "n_anchors"] == 160).all()
    assert (frame.loc[["symmetry", "locality"], "n_anchors"] == 160 - 2 * 64).all()
    assert frame.loc["locality", "transform"] == "softmax(S / 0.1) over |i - j| <= 64"
    assert frame.loc["locality", "window"] == 64 and frame.loc["monotonicity_discordance", "window"] == 100
    assert set(frame["reference"]) == {"Wang et al. 2021", "Chen et al. 2023"}


def test_sinusoidal_is_exactly_translation_invariant_and_symmetric_and_its_kernel_agrees():
    table = make_encoding("sinusoidal").generate(512, 128)
    units = unit_rows(table)
    profile = similarity_profile(table)
    assert translation_variance_ratio(profile) < 1e-25
    assert kernel_asymmetry(units.vectors, units.vectors.copy()) < 1e-14  # computed, not short-cut
    frame = table_properties(units, profile).to_frame().set_index("metric")["value"]
    assert frame["symmetry"] == 1.0  # rounding noise is not blown up by the per-row min-max scaling
    assert "symmetry_deviation" not in frame  # 0 by construction for cosine similarity: dropped
    # S[i, i + k] is the same at every anchor: each anchor's rho is that of the profile over its own distances
    oracle = np.mean([stats.spearmanr(np.arange(511 - i), profile.mean_similarity[1:512 - i])[0] for i in range(509)])
    assert frame["monotonicity_spearman"] == pytest.approx(oracle, abs=1e-9)
    kernel = kernel_properties(profile.mean_similarity, n_positions=512).to_frame().set_index("metric")["value"]
    assert "translation_variance_ratio" not in kernel  # 0 by construction for a kernel
    for metric, value in kernel.items():
        assert value == pytest.approx(frame[metric], abs=1e-9), metric


def test_locality_and_symmetry_do_not_scale_with_the_window():
    """Issue 13: the old locality (max(S, 0) over every position) fell like 1/n on sinusoidal tables."""
    values = [table_properties(unit_rows(t := make_encoding("sinusoidal").generate(n, 768)),
                               similarity_profile(t)).to_frame().set_index("metric")["value"] for n in (256, 1024)]
    assert values[0]["locality"] == pytest.approx(values[1]["locality"], rel=1e-12)
    assert values[0]["symmetry"] == values[1]["symmetry"] == 1.0


def test_an_asymmetric_kernel_has_symmetry_below_one():
    forward = np.exp(-np.arange(200) / 5.0)
    backward = np.exp(-np.arange(200) / 20.0)
    props = kernel_properties(forward, backward, n_positions=200).values
    assert props["symmetry"] < 1.0 and props["monotonicity_discordance"] == 0.0  # Chen et al.: 0.945 here
    assert kernel_properties(forward, n_positions=200).values["symmetry"] == 1.0


def test_random_table_has_its_known_values():
    """i.i.d. Gaussian rows: no monotonicity (rho ~ 0, half the pairs violate it), distance explains nothing,
    locality: the self-weight e^(1/tau) against 128 neighbours of weight E[e^(S/tau)] = e^(1/(2 d tau^2))."""
    n, d = 1024, 256
    table = make_encoding("random").generate(n, d, rng=np.random.default_rng(0))
    units = unit_rows(table)
    frame = table_properties(units, similarity_profile(table)).to_frame().set_index("metric")["value"]
    assert abs(frame["monotonicity_spearman"]) < 0.01
    assert frame["monotonicity_discordance"] == pytest.approx(0.5, abs=0.005)
    # diagonal means take a share max_distance / n_pairs ~ 2 / n of the spread by chance
    assert 1 - 4 / n < frame["translation_variance_ratio"] <= 1
    e = math.exp(1 / (2 * d * 0.1**2))
    expected = (math.exp(10) + 2 * (1 - 2.0**-64) * e) / (math.exp(10) + 128 * e)
    assert frame["locality"] == pytest.approx(expected, rel=2e-3)


def test_asymmetric_kernel_value():
    """RoPE scores <R_i q, R_j k> with q != k are not symmetric; brute force on the full matrix."""
    rng = np.random.default_rng(1)
    q, k = rng.normal(size=16), rng.normal(size=16)
    positions = np.arange(40)
    inv_freq = 100.0 ** (-np.arange(0, 16, 2) / 16)
    queries = apply_rotary(np.tile(q, (40, 1)), positions, inv_freq)
    keys = apply_rotary(np.tile(k, (40, 1)), positions, inv_freq)
    kernel = queries @ keys.T
    expected = np.linalg.norm(kernel - kernel.T) / np.linalg.norm(kernel)
    assert expected > 0.1
    assert kernel_asymmetry(queries, keys) == pytest.approx(expected, rel=1e-12)
    assert kernel_asymmetry(queries, queries) == 0.0
    with pytest.raises(ValueError, match="one shape"):
        kernel_asymmetry(queries, keys[:, :8])


def test_anchor_subsample_is_recorded_and_close():
    table = make_encoding("learned", source="gpt2").generate(600, 768)
    units, profile = unit_rows(table), similarity_profile(table)
    full = table_properties(units, profile).to_frame().set_index("metric")
    sub = table_properties(units, profile, max_anchors=150).to_frame().set_index("metric")
    assert anchor_positions(600, 150)[1] == 4
    assert sub.loc["monotonicity_spearman", "n_anchors"] == 150 and sub.loc["locality", "anchor_step"] == 4
    assert sub.loc["translation_variance_ratio", "n_anchors"] == 600  # from the exact profile
    for metric in ("monotonicity_spearman", "monotonicity_discordance", "locality"):
        assert sub.loc[metric, "value"] == pytest.approx(full.loc[metric, "value"], rel=0.05, abs=0.005)


def test_anchor_budget_bounds_the_entries_of_s():
    """Every position up to 2048, 2048 anchors up to 4096 positions (as before the budget), then
    at most 2**23 entries of S (anchors × positions), never fewer than 32 anchors."""
    assert anchor_positions(2048)[1] == 1 and anchor_positions(4096)[1] == 2
    anchors, step = anchor_positions(131072)
    assert (anchors.size, step) == (64, 2048)
    assert anchor_positions(1 << 20)[0].size == 32


def test_entry_budget_subsample_is_recorded_and_close(gpt2_table):
    units = unit_rows(gpt2_table)
    profile = similarity_profile(gpt2_table)
    full = table_properties(units, profile).to_frame().set_index("metric")
    sub = table_properties(units, profile, max_entries=64 * 1024).to_frame().set_index("metric")
    assert sub.loc["monotonicity_spearman", "n_anchors"] == 64 and sub.loc["locality", "anchor_step"] == 16
    for metric in ("monotonicity_spearman", "monotonicity_discordance", "locality"):
        assert sub.loc[metric, "value"] == pytest.approx(full.loc[metric, "value"], rel=0.05, abs=0.01)


def test_translation_variance_records_the_profile_std_anchors():
    table = np.random.default_rng(0).standard_normal((4100, 8))
    units = unit_rows(table)
    props = table_properties(units, similarity_profile(table, max_distance=50)).to_frame().set_index("metric")
    assert props.loc["translation_variance_ratio", "anchor_step"] == 4100 // 128
    assert 128 <= props.loc["translation_variance_ratio", "n_anchors"] <= 130  # strata plus both ends
    assert props.loc["translation_variance_ratio", "value"] == pytest.approx(1.0, abs=0.05)  # a random table


def test_excluded_positions_and_degenerate_rows():
    table = make_encoding("learned", source="gpt2").generate(80, 768).copy()
    table[10] = 0.0
    with pytest.warns(UserWarning, match="zero or non-finite"):
        units = unit_rows(table)
    rho, violations = monotonicity(units, 79)
    assert np.isfinite(rho) and 0 <= violations <= 1
    assert 0 < locality(units) <= 1
    # identical rows: S = 1 everywhere, no rank order (NaN), every pair violates strict decrease, uniform attention
    same = unit_rows(np.ones((30, 4)))
    assert math.isnan(monotonicity(same, 29)[0]) and monotonicity(same, 29)[1] == 1.0
    assert locality(same) == pytest.approx((1 + 2 * (1 - 2.0**-14)) / 29)  # reach 14: 29 keys


def test_kernel_monotonicity_by_prefix_equals_ranking_every_row():
    """kernel_properties' one-pass prefix counts equal ranking every anchor's row (brute force), ties included."""
    from poslab.analysis.properties import _block_monotonicity, _pooled_monotonicity, _prefix_monotonicity

    rng = np.random.default_rng(7)
    for trial in range(40):
        w = int(rng.integers(1, 200))
        q = rng.normal(size=w)
        if trial % 3 == 0:
            q = np.round(q, 1)  # ties: ranked in distance order, as for tables
        if trial % 7 == 0:
            q = np.zeros(w)  # flat rows have no rho
        lengths = np.minimum(w, rng.integers(0, w + 5, size=int(rng.integers(1, 30))))
        rows = np.broadcast_to(q, (lengths.size, w))
        rho, v, p = _block_monotonicity(rows, np.arange(1, w + 1)[None, :] <= lengths[:, None])
        expected = _pooled_monotonicity([rho], v, p)
        np.testing.assert_allclose(_prefix_monotonicity(q, lengths), expected, rtol=1e-10, atol=1e-12)
        if w > 3:  # log of an attention prior with zeros: tied -inf entries rank in distance order, as a finite tie
            q[rng.choice(w, size=w // 3, replace=False)] = -np.inf
            finite = np.where(np.isinf(q), np.min(q[np.isfinite(q)], initial=0.0) - 1.0, q)
            assert _prefix_monotonicity(q, lengths) == pytest.approx(_prefix_monotonicity(finite, lengths),
                                                                      nan_ok=True, rel=0, abs=0)


def test_dominance_radix_counts_equal_brute_force():
    """_dominance's radix counts equal the double loop: #{n < m: key_n < key_m}, Σ_{n < m: key_n > key_m} (n + 1),
    for every length up to and past powers of two (the padding), sorted, reversed and random keys."""
    from poslab.analysis.properties import _dominance

    rng = np.random.default_rng(11)
    for w in (0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 33, 100, 257, 1024, 1500):
        for key in (rng.permutation(w), np.arange(w), np.arange(w)[::-1]):
            key = np.asarray(key, dtype=np.int64)
            below, above = _dominance(key)
            expected_below = [int(np.sum(key[:m] < key[m])) for m in range(w)]
            expected_above = [float(np.sum((np.arange(m) + 1)[key[:m] > key[m]])) for m in range(w)]
            assert below.dtype == np.int64 and above.dtype == np.float64
            np.testing.assert_array_equal(below, np.array(expected_below, dtype=np.int64))
            np.testing.assert_array_equal(above, np.array(expected_above, dtype=np.float64))


def test_inversion_count_equals_brute_force():
    """_count_inversions (packed merge levels) equals the double loop: pairs i < j with x_i > x_j, ties not counted."""
    from poslab.analysis.properties import _count_inversions

    rng = np.random.default_rng(12)
    # rows padded to a multiple of 256, 512; 4096 and 5000: pairs of whole rows (only the half bit set) on 4 levels
    for w in (0, 1, 2, 3, 5, 8, 9, 31, 64, 100, 256, 257, 600, 1500, 3071, 4096, 5000):
        for high in (2, 7, 1000):  # many ties, some, none
            x = rng.integers(0, high, size=(int(rng.integers(1, 4)), w))
            expected = sum(int(np.count_nonzero(np.triu(row[:, None] > row[None, :], k=1))) for row in x)
            assert _count_inversions(x) == expected, (w, high)


def _ranked_row_brute_force(q, ok):
    """Spearman's rho (stable ranks, ties in distance order) and Wang et al.'s violations of one row, by loops."""
    v = q[ok]
    ranks = np.empty(v.size)
    ranks[np.argsort(v, kind="stable")] = np.arange(1, v.size + 1)
    rho = np.corrcoef(ranks, np.arange(v.size))[0, 1] if v.size >= 3 and v.max() > v.min() else None
    violations = sum(int(v[m] >= v[n]) for n in range(v.size) for m in range(n + 1, v.size))
    return rho, violations, v.size * (v.size - 1) // 2


def test_block_monotonicity_equals_ranking_rows_by_loops(monkeypatch):
    """Ranks by quicksort (stable redo on ties), inversions by merge levels, rho in exact integers or in floating
    point over the row: the same as ranking each row by loops, with ties, invalid entries, cut rows and flat rows;
    the integer and the floating-point rho are the same numbers."""
    import poslab.analysis.properties as properties

    rng = np.random.default_rng(13)
    for trial in range(60):
        rows, w = int(rng.integers(1, 6)), int(rng.integers(1, 90))
        q = rng.normal(size=(rows, w))
        if trial % 3 == 0:
            q = np.round(q, 1)
        if trial % 5 == 0:
            q[0] = 0.25
        ok = rng.random((rows, w)) < (0.75 if trial % 2 else 1.0)
        ok &= np.arange(w)[None, :] < rng.integers(0, w + 1, size=rows)[:, None]  # rows cut by the table's end
        rho, violations, pairs = properties._block_monotonicity(q, ok)
        expected = [_ranked_row_brute_force(q[r], ok[r]) for r in range(rows)]
        np.testing.assert_allclose(rho, [e[0] for e in expected if e[0] is not None], rtol=0, atol=1e-12)
        assert (violations, pairs) == (sum(e[1] for e in expected), sum(e[2] for e in expected))
        monkeypatch.setattr(properties, "_EXACT_RHO", 0)  # every row through the floating-point sums
        float_rho, *counts = properties._block_monotonicity(q, ok)
        monkeypatch.undo()
        np.testing.assert_array_equal(float_rho, rho)
        assert counts == [violations, pairs]


def test_monotonicity_of_irregular_anchors_and_excluded_positions_equals_brute_force():
    """Forward strips read through strided views (regular anchors) or gathered (irregular): the brute-force counts."""
    table = np.random.default_rng(14).normal(size=(120, 6))
    table[[7, 50, 51]] = 0.0
    with pytest.warns(UserWarning, match="zero or non-finite"):
        units = unit_rows(table)
    s = units.vectors @ units.vectors.T
    for anchors in (np.arange(0, 120, 3), np.array([0, 1, 2, 9, 40, 41, 100, 118, 119]), np.arange(5, 120, 7)):
        for max_distance in (1, 2, 30, 119):
            rhos, violations, pairs = [], 0, 0
            for x in anchors:
                k = np.arange(x + 1, min(120, x + max_distance + 1))
                if not units.valid[x]:
                    k = k[:0]
                rho, v, p = _ranked_row_brute_force(np.clip(s[x, k], -1, 1), units.valid[k])
                rhos += [rho] if rho is not None else []
                violations, pairs = violations + v, pairs + p
            rho, discordance = monotonicity(units, max_distance, anchors)
            assert rho == pytest.approx(np.mean(rhos), abs=1e-12) if rhos else math.isnan(rho)
            assert discordance == (violations / pairs if pairs else pytest.approx(math.nan, nan_ok=True))


def test_attention_rows_from_one_strided_einsum_equal_one_einsum_per_offset():
    """The attention logits of regular anchors (one einsum over a strided view) are the per-offset einsums, bit for bit."""
    from poslab.analysis.properties import attention_rows

    rng = np.random.default_rng(15)
    for n, dim, dtype in ((300, 48, np.float64), (301, 5, np.float32), (700, 1, np.float64)):
        table = rng.normal(size=(n, dim)).astype(dtype)
        table[40] = 0.0
        with pytest.warns(UserWarning, match="zero or non-finite"):
            units = unit_rows(table)
        for anchors, reach in ((None, 64), (np.arange(0, n, 3), 10), (np.array([3, 70, 71, 200, 230]), 64)):
            weights, used, r = attention_rows(units, anchors, reach=reach)
            offsets = np.arange(-r, r + 1)
            logits = np.stack([np.einsum("ij,ij->i", units.vectors[used], units.vectors[used + m]) for m in offsets],
                              axis=1).astype(float)
            logits = np.where(units.valid[used[:, None] + offsets], np.clip(logits, -1, 1) / 0.1, -np.inf)
            expected = np.exp(logits - logits.max(axis=1, keepdims=True))
            np.testing.assert_array_equal(weights, expected / expected.sum(axis=1, keepdims=True))


def test_stable_order_by_packed_keys_equals_a_stable_argsort():
    """_stable_order (int64 keys of value bits and column, runs of near neighbours sorted exactly) is the stable
    argsort of the valid entries, invalid ones last: with ties, -0.0 and 0.0, values an ulp apart, tiny values,
    infinities, NaN (one with a payload in its lowest bits only), garbage in invalid entries, Fortran order."""
    from poslab.analysis.properties import _stable_order

    rng = np.random.default_rng(16)
    low_nan = np.array(0x7FF0000000000001, dtype=np.int64).view(np.float64)
    for trial in range(160):
        rows, w = int(rng.integers(1, 4)), int(rng.integers(1, 300)) if trial % 40 else 70_000  # 17 column bits
        v = rng.normal(size=(rows, w))
        case = trial % 8
        if case == 0:
            v = np.round(v, 1)
        elif case == 1:
            v[rng.random((rows, w)) < 0.3] = np.inf
        elif case == 2:
            v[rng.random((rows, w)) < 0.1] = np.nan
        elif case == 3:
            v[rng.random((rows, w)) < 0.3] = -np.inf
        elif case == 4:
            v = np.where(rng.random((rows, w)) < 0.5, 0.0, -0.0)
        elif case == 5:
            v = v * 1e-300
        elif case == 6:
            v = 1 + rng.integers(-3, 3, size=(rows, w)) * np.finfo(float).eps
        else:
            v[:, ::3] = low_nan
        ok = rng.random((rows, w)) < (0.7 if trial % 2 else 1.0)
        q = np.where(ok, v, np.nan if trial % 3 else 7.0)  # whatever the invalid entries hold
        order = _stable_order(np.asfortranarray(q) if trial % 5 == 0 else q, ok)
        masked = np.where(ok, v, np.inf)
        expected = np.argsort(masked, axis=1, kind="stable")
        for r in range(rows):
            assert sorted(order[r]) == list(range(w))
            # infinite entries (invalid ones among them) may come in any order among themselves
            np.testing.assert_array_equal(masked[r][order[r]], masked[r][expected[r]])
            finite = ~np.isinf(masked[r][expected[r]])
            np.testing.assert_array_equal(order[r][finite], expected[r][finite])


def test_monotonicity_in_threads_and_the_stage_overlap_give_the_single_threaded_values(monkeypatch):
    """Runs of rows cut from each product block and ranked in two threads pool to the one-thread values bit for
    bit; the stage's ranked=(rho, discordance), computed beside the profile, is table_properties' own."""
    import poslab.analysis.properties as properties
    from poslab.analysis import similarity_profile

    table = np.random.default_rng(17).normal(size=(700, 16))
    table[[5, 300]] = 0.0
    with pytest.warns(UserWarning, match="zero or non-finite"):
        units = unit_rows(table)
    anchors = np.arange(700)

    def whole_blocks():  # each product block ranked whole, in one thread: the values before the runs
        ahead = np.zeros((1, 1400), dtype=bool)
        ahead[0, :700] = units.valid
        parts = []
        for rows in properties._forward_blocks(anchors, 699):
            block = np.clip(units.vectors[rows] @ units.vectors[rows[0]:].T, -1.0, 1.0)
            ok = units.valid[rows, None] & properties._band(ahead, rows + 1, 699, same_row=True)
            parts.append(properties._block_monotonicity(properties._band(block, rows + 1 - rows[0], 699), ok))
        return properties._pooled_monotonicity([p[0] for p in parts], sum(p[1] for p in parts),
                                               sum(p[2] for p in parts))

    for exact_rho in (properties._EXACT_RHO, 0):  # Spearman's sums in integers, and in floating point
        monkeypatch.setattr(properties, "_EXACT_RHO", exact_rho)
        threaded = monotonicity(units, 699, anchors)
        assert threaded == whole_blocks()
        monkeypatch.setattr(properties, "analysis_threads", lambda: 1)
        assert monotonicity(units, 699, anchors) == threaded
        monkeypatch.undo()
    runs = [len(q) for q, _ in properties._forward_strips(units.vectors, units.valid, anchors, 699)]
    assert len(runs) > 2 and sum(runs) == 700  # the blocks are cut into runs of similar span
    with pytest.warns(UserWarning, match="zero or non-finite"):
        profile = similarity_profile(table, max_distance=699)
    own = table_properties(units, profile).values
    given = table_properties(units, profile, ranked=monotonicity(units, 699, anchor_positions(700)[0])).values
    assert own == given
