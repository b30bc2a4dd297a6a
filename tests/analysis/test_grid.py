"""Similarity on the 2-D patch grid: closed form, brute-force oracle, and the real SigLIP table."""

import itertools

import numpy as np
import pytest

from poslab.analysis import InvalidPositionsWarning
from poslab.analysis.grid import grid_similarity, parse_grid
from poslab.encodings import make_encoding
from poslab.plots import STUDY_FIGURES
from poslab.stages import run_stage


def _source(enc, n_positions):
    """The learned_source stage's summary columns of a run."""
    return run_stage("learned_source", enc, n_positions).summary


def _grid(enc, n_positions):
    """The grid stage's tables of a run ({} when it has no patch grid)."""
    out = run_stage("grid", enc, n_positions)
    return out.tables if out is not None else {}


def _rows(result, metric):
    use = result.metric == metric
    return result.distance[use], result.mean_similarity[use], result.std_similarity[use], result.n_pairs[use]


def test_separable_grid_closed_form():
    """x(r, c) = [cos αr, sin αr, cos βc, sin βc]: cosine = (cos αΔr + cos βΔc) / 2 exactly."""
    gh, gw, a, b = 5, 7, 0.3, 0.8
    r, c = np.divmod(np.arange(gh * gw), gw)
    table = np.stack([np.cos(a * r), np.sin(a * r), np.cos(b * c), np.sin(b * c)], axis=1)
    res = grid_similarity(table, "5x7")
    d, m, s, n = _rows(res, "along_row")
    np.testing.assert_allclose(m, (1 + np.cos(b * d)) / 2, atol=1e-14)
    np.testing.assert_allclose(s, 0, atol=1e-12)
    np.testing.assert_array_equal(n, gh * (gw - d))
    d, m, s, n = _rows(res, "along_column")
    np.testing.assert_allclose(m, (np.cos(a * d) + 1) / 2, atol=1e-14)
    np.testing.assert_array_equal(n, (gh - d) * gw)
    # Euclidean √5 mixes displacements (1, ±2) and (2, ±1)
    d, m, s, n = _rows(res, "euclidean")
    k = np.flatnonzero(np.isclose(d, np.sqrt(5)))[0]
    n12, n21 = 2 * (gh - 1) * (gw - 2), 2 * (gh - 2) * (gw - 1)
    v12, v21 = (np.cos(a) + np.cos(2 * b)) / 2, (np.cos(2 * a) + np.cos(b)) / 2
    mean = (n12 * v12 + n21 * v21) / (n12 + n21)
    assert n[k] == n12 + n21 and m[k] == pytest.approx(mean, abs=1e-14)
    assert s[k] == pytest.approx(np.sqrt((n12 * (v12 - mean) ** 2 + n21 * (v21 - mean) ** 2) / (n12 + n21)), abs=1e-12)
    # total pairs: every unordered pair once, plus each patch with itself
    for metric in ("euclidean", "manhattan"):
        assert _rows(res, metric)[3].sum() == gh * gw * (gh * gw + 1) // 2
    assert res.reference == (2, 3)
    np.testing.assert_allclose(res.reference_similarity, (np.cos(a * (np.arange(gh)[:, None] - 2))
                                                          + np.cos(b * (np.arange(gw)[None, :] - 3))) / 2, atol=1e-14)


def test_matches_brute_force_with_an_excluded_patch(rng):
    gh, gw = 3, 5
    table = rng.normal(size=(gh * gw, 6))
    table[7] = 0.0
    with pytest.warns(InvalidPositionsWarning, match="1 of 15 positions"):
        res = grid_similarity(table, (gh, gw))
    groups = {}
    for i, j in itertools.combinations_with_replacement(range(gh * gw), 2):
        if 7 in (i, j):
            continue
        (ri, ci), (rj, cj) = divmod(i, gw), divmod(j, gw)
        dr, dc = abs(ri - rj), abs(ci - cj)
        s = table[i] @ table[j] / np.linalg.norm(table[i]) / np.linalg.norm(table[j])
        keys = [("euclidean", np.hypot(dr, dc)), ("manhattan", dr + dc)]
        keys += [("along_row", dc)] if dr == 0 else []
        keys += [("along_column", dr)] if dc == 0 else []
        for key in keys:
            groups.setdefault((key[0], round(float(key[1]), 9)), []).append(s)
    got = {(mt, round(float(d), 9)): (m, s, n) for mt, d, m, s, n in
           zip(res.metric, res.distance, res.mean_similarity, res.std_similarity, res.n_pairs)}
    assert set(got) == set(groups)
    for key, vals in groups.items():
        assert got[key][0] == pytest.approx(np.mean(vals), abs=1e-13)
        assert got[key][1] == pytest.approx(np.std(vals), abs=1e-12)
        assert got[key][2] == len(vals)
    assert np.isnan(res.reference_similarity[1, 2])  # patch 7 is (1, 2), the centre of a 3 x 5 grid


def test_siglip_neighbours_along_rows_and_columns_agree():
    """Measured on the bundled SigLIP so400m/14@384 table (27 x 27 patches, no prefix token).

    Horizontal neighbours (along a row): 0.89642; vertical (along a column): 0.91352 — they differ by
    0.0171 (1.9 %). That is smaller than the spread of the neighbour similarity between grid rows
    (standard deviation of the 27 per-row means: 0.0225) and a tenth of the drop from grid distance 1 to 2
    (0.896 -> 0.727 along rows), so the grid is close to isotropic, with columns slightly more similar.
    Tolerance: |difference| <= 0.018, the measured 0.0171 rounded up.
    On the flattened index, "distance 1" also pairs the end of each row with the start of the next:
    those 26 wrap pairs average 0.543, pulling the flattened neighbour mean down to 0.8838.
    """
    enc = make_encoding("learned", source="siglip-so400m")
    table = enc.generate(729, 1)
    assert _source(enc, 729)["grid_shape"] == "27x27"
    res = grid_similarity(table, "27x27")
    row, col = res.neighbour_similarity("along_row"), res.neighbour_similarity("along_column")
    assert row == pytest.approx(0.896423, abs=1e-6) and col == pytest.approx(0.913518, abs=1e-6)
    assert abs(row - col) <= 0.018
    u = table / np.linalg.norm(table, axis=1, keepdims=True)
    g = u.reshape(27, 27, -1)
    per_row = np.sum(g[:, :-1] * g[:, 1:], axis=-1).mean(axis=1)
    assert abs(row - col) < per_row.std(ddof=1)
    assert abs(row - col) < 0.2 * (row - _rows(res, "along_row")[1][2])
    wrap = np.sum(u[np.arange(26) * 27 + 26] * u[np.arange(1, 27) * 27], axis=1)
    assert wrap.mean() == pytest.approx(0.5427, abs=1e-4)
    assert np.mean(np.sum(u[:-1] * u[1:], axis=1)) == pytest.approx(0.8838, abs=1e-4)


def test_grid_tables_and_figure_of_a_vision_run():
    enc = make_encoding("learned", source="siglip-so400m")
    tables = {k: v.assign(label=enc.label) for k, v in _grid(enc, 729).items()}
    assert set(tables["grid_profiles"]["metric"]) == {"euclidean", "manhattan", "along_row", "along_column"}
    fig = STUDY_FIGURES["grid_profiles.png"](tables, "t")
    profile_ax, map_ax = fig.axes[:2]
    assert len(profile_ax.get_lines()) >= 4
    image = map_ax.get_images()[0].get_array()
    np.testing.assert_allclose(image, tables["grid_maps"]["similarity"].to_numpy().reshape(27, 27))
    assert image[13, 13] == 1.0
    assert STUDY_FIGURES["grid_profiles.png"]({"profiles": tables["grid_profiles"]}, None) is None
    assert _grid(make_encoding("learned", source="gpt2"), 10) == {}


def test_bad_grids():
    with pytest.raises(ValueError, match="a 4x4 grid has 16 patches but the table has 15 rows"):
        grid_similarity(np.ones((15, 3)), (4, 4))
    for bad in ["27", "0x3", "ax3", "3x3x3"]:
        with pytest.raises(ValueError, match="ROWSxCOLS"):
            parse_grid(bad)
    with pytest.raises(ValueError, match="grid"):
        make_encoding("learned", source="gpt2", grid="27by27")
    with pytest.raises(ValueError, match="grid = '10x10' given, but the source's grid is 27x27"):
        make_encoding("learned", source="siglip-so400m", grid="10x10").generate(4, 1)
    enc = make_encoding("learned", source="gpt2", grid="32x32")  # a user-declared grid on a plain table
    assert _source(enc, 1024)["grid_shape"] == "32x32"
    with pytest.raises(ValueError, match="a 33x33 grid from row 0 needs 1089 rows, but the table has 1024"):
        make_encoding("learned", source="gpt2", grid="33x33").generate(4, 1)


def test_3d_grid_figures_show_the_centre_frame_and_each_axis():
    """An M-RoPE run on a 2x3x4 grid: the map is the centre frame (t = 1), grid_axes.png has a panel per axis."""
    enc = make_encoding("mrope", grid="2x3x4", mrope_section="4,2,2", rotary_dim=16)
    out = run_stage("grid", enc, 24, 16)
    tables = {k: v.assign(label=enc.label) for k, v in out.tables.items()}
    fig = STUDY_FIGURES["grid_profiles.png"](tables, None)
    image = fig.axes[1].get_images()[0].get_array()
    maps = tables["grid_maps"]
    np.testing.assert_allclose(image, maps[maps["frame"] == 1]["similarity"].to_numpy().reshape(3, 4))
    assert image[1, 2] == 1.0
    axes_fig = STUDY_FIGURES["grid_axes.png"](tables, None)
    assert [ax.get_xlabel() for ax in axes_fig.axes] == ["distance along t (frames)", "distance along h (rows)",
                                                         "distance along w (columns)"]
    assert STUDY_FIGURES["grid_axes.png"]({}, None) is None
