"""M-RoPE, axial RoPE and 2-D sin-cos: per-axis pair counts, closed forms on the grid, refusals."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from poslab.analysis.grid import grid_similarity
from poslab.encodings import make_encoding
from poslab.encodings.mrope import mrope_axes
from poslab.stages import run_stage


def _axis_ranges(axis):
    return {a: (int(np.flatnonzero(axis == a)[0]), int(np.flatnonzero(axis == a)[-1]), int(np.sum(axis == a)))
            for a in range(3)}


def test_chunked_pairs_are_contiguous_blocks():
    """Qwen2-VL [16, 24, 24]: pairs 0–15 turn with t, 16–39 with h, 40–63 with w."""
    assert _axis_ranges(mrope_axes((16, 24, 24), 64, "chunked")) == {0: (0, 15, 16), 1: (16, 39, 24), 2: (40, 63, 24)}


@pytest.mark.parametrize("section, pairs", [((24, 20, 20), 64), ((11, 11, 10), 32)])
def test_interleaved_pairs_follow_the_mod_3_rule(section, pairs):
    """Qwen3-VL [24, 20, 20] over 64 pairs and Qwen3.5 [11, 11, 10] over 32 (head_dim 256 × 0.25): pair j is h
    when j % 3 = 1 and j < 3·s_h, w when j % 3 = 2 and j < 3·s_w, else t; the counts are the section."""
    axis = mrope_axes(section, pairs, "interleaved")
    assert tuple(np.bincount(axis, minlength=3)) == section
    j = np.arange(pairs)
    np.testing.assert_array_equal(np.flatnonzero(axis == 1), j[(j % 3 == 1) & (j < 3 * section[1])])
    np.testing.assert_array_equal(np.flatnonzero(axis == 2), j[(j % 3 == 2) & (j < 3 * section[2])])
    assert axis[0] == 0 and axis[-1] == 0 if pairs == 64 else True  # Qwen3-VL: the last pairs (60–63) are t


def test_interleaved_counts_that_differ_from_the_section_are_recorded():
    """[2, 4, 2] over 8 pairs: 3·s_h = 12 reaches past the last pair, so h gets 3 pairs (1, 4, 7), not 4."""
    enc = make_encoding("mrope", mrope_section="2,4,2", layout="interleaved", rotary_dim=16)
    r = enc.resolve(16)
    assert r.pairs_per_axis() == {"t": 3, "h": 3, "w": 2}
    assert any("gives t/h/w 3/3/2 pairs, not mrope_section [2, 4, 2]" in rule for rule in r.rules)


def test_mrope_of_text_tokens_is_1d_rope():
    """Without a grid, t = h = w = the token position: the table is rotary's, whatever the section."""
    for layout in ("chunked", "interleaved"):
        enc = make_encoding("mrope", mrope_section="4,6,6", layout=layout, rope_theta=1e6, rotary_dim=32,
                            pairing="half")
        rot = make_encoding("rotary", rope_theta=1e6, rotary_dim=32, pairing="half")
        np.testing.assert_array_equal(enc.generate(50, 32), rot.generate(50, 32))
        assert enc.grid_shape(50) is None


def _rope_profile(inv_freq, k):
    return np.cos(np.multiply.outer(k, inv_freq)).mean(axis=-1)


@pytest.mark.parametrize("kind, params", [
    ("mrope", {"grid": "3x4x5", "mrope_section": "4,6,6", "layout": "chunked", "rope_theta": 1e4, "rotary_dim": 32}),
    ("mrope", {"grid": "3x4x5", "mrope_section": "6,5,5", "layout": "interleaved", "rope_theta": 5e6,
               "rotary_dim": 32}),
    ("axial_rope", {"grid": "3x4x5", "axes_dim": "8,12,12", "rope_theta": 256.0}),
])
def test_multi_axis_rope_on_the_grid_is_the_pair_weighted_mean_of_1d_profiles(kind, params):
    """Every pair turns with one axis, so cos-sim(Δt, Δh, Δw) = Σ_a (n_a/P) · f_a(Δ_a), with f_a the 1-D RoPE
    profile of that axis's n_a pairs: exact, the same for every pair of points (std 0)."""
    enc = make_encoding(kind, **params)
    r = enc.resolve(32) if kind == "mrope" else enc.resolve()
    res = grid_similarity(enc.generate(60, 32), "3x4x5")
    expect = np.zeros(len(res.displacement))
    for a in range(3):
        freq = r.inv_freq[r.axis == a]
        expect += len(freq) / len(r.inv_freq) * _rope_profile(freq, np.abs(res.displacement[:, a]))
    np.testing.assert_allclose(res.displacement_mean, expect, atol=1e-13)
    np.testing.assert_allclose(res.displacement_std, 0, atol=1e-7)
    assert res.displacement_n_pairs.sum() == 60 * 61 // 2


def test_sincos2d_separable_closed_form():
    """MAE 2-D sin-cos: cos-sim(Δh, Δw) = ½ [f(Δh) + f(Δw)], f the 1-D sinusoidal profile of D/2 dims
    (D/4 frequencies ω_i = base^(−i/(D/4)))."""
    dim, base = 64, 10000.0
    enc = make_encoding("sincos2d", grid="7x9", base=base)
    res = grid_similarity(enc.generate(63, dim), "7x9")
    omega = base ** (-np.arange(dim // 4) / (dim // 4))
    f = lambda k: np.cos(np.multiply.outer(k, omega)).mean(axis=-1)  # noqa: E731
    dh, dw = np.abs(res.displacement[:, 0]), np.abs(res.displacement[:, 1])
    np.testing.assert_allclose(res.displacement_mean, (f(dh) + f(dw)) / 2, atol=1e-13)
    # along one axis the other term is 1: along_row(k) = (1 + f(k)) / 2
    use = res.metric == "along_row"
    np.testing.assert_allclose(res.mean_similarity[use], (1 + f(res.distance[use])) / 2, atol=1e-13)
    # MAE's column order: [sin wω | cos wω | sin hω | cos hω]
    row = enc.generate(63, dim)[1 * 9 + 2]  # (h, w) = (1, 2)
    np.testing.assert_allclose(row[:16], np.sin(2 * omega))
    np.testing.assert_allclose(row[48:], np.cos(1 * omega))


def test_3d_grid_analysis_matches_brute_force(rng):
    t, h, w = 2, 3, 4
    table = rng.normal(size=(t * h * w, 5))
    res = grid_similarity(table, (t, h, w))
    u = table / np.linalg.norm(table, axis=1, keepdims=True)
    coords = list(itertools.product(range(t), range(h), range(w)))
    groups, disp = {}, {}
    for i, j in itertools.combinations_with_replacement(range(len(coords)), 2):
        d = np.subtract(coords[j], coords[i])
        nz = d[np.flatnonzero(d)[0]] if d.any() else 1
        d = tuple(d if nz > 0 else -d)
        s = u[i] @ u[j]
        disp.setdefault(d, []).append(s)
        a = np.abs(d)
        keys = [("euclidean", float(np.sqrt((a**2).sum()))), ("manhattan", float(a.sum()))]
        keys += [("along_frame", a[0])] if not a[1:].any() else []
        keys += [("along_column", a[1])] if a[0] == 0 and a[2] == 0 else []
        keys += [("along_row", a[2])] if not a[:2].any() else []
        for key in keys:
            groups.setdefault((key[0], round(float(key[1]), 9)), []).append(s)
    got = {(m, round(float(d), 9)): (mu, sd, n) for m, d, mu, sd, n in
           zip(res.metric, res.distance, res.mean_similarity, res.std_similarity, res.n_pairs)}
    assert set(got) == set(groups)
    for key, vals in groups.items():
        assert got[key] == pytest.approx((np.mean(vals), np.std(vals), len(vals)), abs=1e-12)
    got_d = {tuple(d): (mu, n) for d, mu, n in zip(res.displacement.tolist(), res.displacement_mean,
                                                   res.displacement_n_pairs)}
    assert set(got_d) == set(disp)
    for d, vals in disp.items():
        assert got_d[d] == pytest.approx((np.mean(vals), len(vals)), abs=1e-12)
    frame = res.map_frame()
    assert len(frame) == 24 and frame["reference_frame"].iloc[0] == 1 and frame["reference_row"].iloc[0] == 1
    np.testing.assert_allclose(frame["similarity"], u @ u[(1 * h + 1) * w + 2], atol=1e-15)
    assert res.neighbour_similarity("along_frame") == pytest.approx(np.mean(groups[("along_frame", 1.0)]))


def test_the_grid_stage_analyses_every_encoding_that_declares_a_grid():
    enc = make_encoding("mrope", grid="2x3x4", mrope_section="4,2,2", rotary_dim=16)
    out = run_stage("grid", enc, 24, 16)
    assert set(out.tables) == {"grid_profiles", "grid_displacements", "grid_maps"}
    assert set(out.tables["grid_profiles"]["metric"]) == {"euclidean", "manhattan", "along_row", "along_column",
                                                          "along_frame"}
    with pytest.raises(ValueError, match=r"n_positions=10, but the 2x3x4 grid has 24 points, and a grid is analysed "
                                         r"whole; set n_positions = 24"):
        enc.check_size(10, 16)
    assert run_stage("grid", make_encoding("rotary"), 10) is None
    assert run_stage("profile", enc, 24, 16) is None  # the flattened index is not a distance
    axes = run_stage("axis_frequencies", enc, 24, 16)
    assert axes.summary["axis_pairs"] == "t: 4 pairs (0-3); h: 2 pairs (4-5); w: 2 pairs (6-7)"
    assert axes.tables["axis_freq"]["axis"].tolist() == list("tttthhww")


def test_refusals_name_the_value_and_what_to_write():
    with pytest.raises(ValueError, match="grid is required"):
        make_encoding("axial_rope", axes_dim="8,8")
    with pytest.raises(ValueError, match="axes_dim 8,8,8 has 3 axes, but grid '4x4' has 2"):
        make_encoding("axial_rope", grid="4x4", axes_dim="8,8,8")
    with pytest.raises(ValueError, match="every axes_dim must be even"):
        make_encoding("axial_rope", grid="4x4", axes_dim="8,7")
    with pytest.raises(ValueError, match="grid must be 'TxHxW'"):
        make_encoding("mrope", grid="4x4", mrope_section="2,3,3")
    with pytest.raises(ValueError, match="grid must be a grid 'HxW'"):
        make_encoding("sincos2d", grid="2x4x4")
    with pytest.raises(ValueError, match="grid"):
        make_encoding("sincos2d", grid="4by4")
    with pytest.raises(ValueError, match="not a multiple of 4"):
        make_encoding("sincos2d", grid="4x4").generate(16, 30)
    for n in (17, 15):  # a grid is analysed whole
        with pytest.raises(ValueError, match=f"n_positions={n}, but the 4x4 grid has 16 patches, and a grid is "
                                             r"analysed whole; set n_positions = 16"):
            make_encoding("sincos2d", grid="4x4").generate(n, 32)
    with pytest.raises(ValueError, match="sums to 8, but the head rotates 16"):
        make_encoding("mrope", grid="1x2x2", mrope_section="2,3,3", rotary_dim=32).generate(4, 32)
    with pytest.raises(ValueError, match="give mrope_section"):
        make_encoding("mrope", rotary_dim=32).generate(4, 32)


def test_mrope_from_a_config_records_where_the_layout_came_from(tmp_path):
    """Qwen3-VL's module interleaves whatever mrope_interleaved says; the key's disagreement is recorded."""
    cfg = {"model_type": "qwen3_vl", "text_config": {
        "model_type": "qwen3_vl_text", "hidden_size": 256, "num_attention_heads": 2, "head_dim": 128,
        "rope_parameters": {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20],
                            "mrope_interleaved": False}}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = make_encoding("mrope", config=str(tmp_path), grid="2x4x4").resolve(1)
    assert r.layout == "interleaved" and r.pairs_per_axis() == {"t": 24, "h": 20, "w": 20} and r.rope_theta == 5e6
    assert r.sources["layout"] == "architecture (qwen3_vl_text)"
    assert r.sources["mrope_section"] == "config: mrope_section"
    assert any("mrope_interleaved = false not read" in rule for rule in r.rules)
    assert not any(rule.startswith("M-RoPE (") for rule in r.rules)
    inline = make_encoding("mrope", config=str(tmp_path), grid="2x4x4", layout="chunked").resolve(1)
    assert inline.layout == "chunked" and any("transformers' qwen3_vl_text uses interleaved" in x for x in inline.rules)


def test_t_step_spaces_frames_in_position_ids():
    """Qwen2.5-VL's temporal spacing: with t_step = 2 frame f sits at temporal position 2f, so one frame apart
    is two positions apart: along_frame(1) with t_step 2 equals along_frame(2) with t_step 1."""
    base = dict(grid="5x2x2", mrope_section="4,2,2", rotary_dim=16, rope_theta=100.0)
    one = grid_similarity(make_encoding("mrope", **base).generate(20, 16), "5x2x2")
    two = grid_similarity(make_encoding("mrope", t_step=2, **base).generate(20, 16), "5x2x2")
    m1 = one.mean_similarity[one.metric == "along_frame"]
    m2 = two.mean_similarity[two.metric == "along_frame"]
    np.testing.assert_allclose(m2[1:3], m1[[2, 4]], atol=1e-14)
    with pytest.raises(ValueError, match="t_step = 2 needs a grid"):
        make_encoding("mrope", mrope_section="4,2,2", t_step=2)
