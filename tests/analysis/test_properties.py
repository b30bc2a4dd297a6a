"""Property metrics: known values on sinusoidal and random tables, brute-force oracles, anchor subsampling."""

import math

import numpy as np
import pytest
from scipy import stats

from poslab.analysis import cosine_similarity, similarity_profile, unit_rows
from poslab.analysis.properties import (anchor_positions, kernel_asymmetry, locality, monotonicity,
                                        table_properties, translation_variance_ratio)
from poslab.encodings import apply_rotary, make_encoding


def brute_force(table, max_distance):
    """Every metric straight from the definitions, on the full n × n matrix."""
    s = cosine_similarity(table)
    n = len(s)
    rhos, rises, steps = [], 0, 0
    for i in range(n):
        v = s[i, i + 1:i + 1 + max_distance]
        if v.size >= 3:
            rhos.append(stats.spearmanr(np.arange(v.size), v)[0])
        rises += int(np.sum(v[1:] > v[:-1]))
        steps += max(v.size - 1, 0)
    pairs = [(j - i, s[i, j]) for i in range(n) for j in range(i + 1, min(n, i + max_distance + 1))]
    k, v = np.array(pairs).T
    within = sum(np.sum((v[k == d] - v[k == d].mean()) ** 2) for d in np.unique(k))
    a = np.clip(s, 0, None)
    a /= a.sum(axis=1, keepdims=True)
    weights = 2.0 ** -np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    return {"monotonicity_spearman": np.mean(rhos), "monotonicity_violation_rate": rises / steps,
            "translation_variance_ratio": within / np.sum((v - v.mean()) ** 2),
            "symmetry_deviation": np.linalg.norm(s - s.T) / np.linalg.norm(s),
            "locality": np.mean(np.sum(a * weights, axis=1))}


@pytest.mark.parametrize("kind, params", [("sinusoidal", {}), ("random", {}), ("learned", {"source": "gpt2"}),
                                          ("smoothed_random", {"length_scale": 6.0})])
def test_metrics_equal_the_brute_force_definitions(kind, params):
    table = make_encoding(kind, **params).generate(160, 48, rng=np.random.default_rng(3))
    props = table_properties(unit_rows(table), similarity_profile(table, max_distance=100))
    frame = props.to_frame().set_index("metric")
    expected = brute_force(table, 100)
    for metric, value in expected.items():
        assert frame.loc[metric, "value"] == pytest.approx(value, abs=1e-12), metric
    assert (frame["n_anchors"] == 160).all() and (frame["anchor_step"] == 1).all()
    assert set(frame["reference"]) == {"Wang et al. 2021", "Chen et al. 2023"}


def test_sinusoidal_is_exactly_translation_invariant_and_symmetric():
    table = make_encoding("sinusoidal").generate(512, 128)
    units = unit_rows(table)
    assert translation_variance_ratio(similarity_profile(table)) < 1e-25
    assert kernel_asymmetry(units.vectors, units.vectors.copy()) < 1e-14  # computed, not short-cut
    frame = table_properties(units, similarity_profile(table)).to_frame().set_index("metric")["value"]
    assert frame["symmetry_deviation"] == 0.0
    # S[i, i + k] is the same at every anchor: each anchor's rho is that of the profile over its own distances
    profile = similarity_profile(table).mean_similarity
    oracle = np.mean([stats.spearmanr(np.arange(511 - i), profile[1:512 - i])[0] for i in range(509)])
    assert frame["monotonicity_spearman"] == pytest.approx(oracle, abs=1e-9)


def test_random_table_has_its_known_values():
    """i.i.d. Gaussian rows: no monotonicity (rho ~ 0, rises at half the steps), distance explains nothing,
    locality (1 + 2c) / (1 + (n - 1) c) with c = E[max(S, 0)] = 1 / sqrt(2π d)."""
    n, d = 1024, 256
    table = make_encoding("random").generate(n, d, rng=np.random.default_rng(0))
    units = unit_rows(table)
    frame = table_properties(units, similarity_profile(table)).to_frame().set_index("metric")["value"]
    assert abs(frame["monotonicity_spearman"]) < 0.01
    assert frame["monotonicity_violation_rate"] == pytest.approx(0.5, abs=0.005)
    # diagonal means take a share max_distance / n_pairs ~ 2 / n of the spread by chance
    assert 1 - 4 / n < frame["translation_variance_ratio"] <= 1
    c = 1 / math.sqrt(2 * math.pi * d)
    assert frame["locality"] == pytest.approx((1 + 2 * c) / (1 + (n - 1) * c), rel=0.02)


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
    assert sub.loc["locality", "n_anchors"] == 150 and sub.loc["locality", "anchor_step"] == 4
    assert sub.loc["translation_variance_ratio", "n_anchors"] == 600  # from the exact profile
    for metric in ("monotonicity_spearman", "monotonicity_violation_rate", "locality"):
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
    assert sub.loc["locality", "n_anchors"] == 64 and sub.loc["locality", "anchor_step"] == 16
    for metric in ("monotonicity_spearman", "monotonicity_violation_rate", "locality"):
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
    # identical rows: S = 1 everywhere, no rank order (NaN), no rise, no locality
    same = unit_rows(np.ones((30, 4)))
    assert math.isnan(monotonicity(same, 29)[0]) and monotonicity(same, 29)[1] == 0.0
    assert locality(same) == pytest.approx(np.mean([sum(2.0 ** -abs(i - j) for j in range(30)) / 30
                                                    for i in range(30)]))
