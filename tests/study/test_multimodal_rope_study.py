"""studies/multimodal_rope.toml: the numbers its README paragraph states, recomputed from the grid stage."""

from pathlib import Path

import numpy as np
import pytest

from poslab.stages import run_stage
from poslab.study import load_study

STUDY = Path(__file__).parents[2] / "src" / "poslab" / "studies" / "multimodal_rope.toml"


@pytest.fixture(scope="module")
def grids():
    spec = load_study(STUDY)
    assert [enc.kind for enc in spec.encodings] == ["mrope", "mrope", "mrope", "axial_rope"]
    out = {}
    for enc in spec.encodings:
        tables = run_stage("grid", enc, spec.n_positions, spec.dim).tables
        prof = tables["grid_profiles"]
        out[enc.params().get("layout") or "axial", enc.rope_theta] = (
            {m: prof[prof["metric"] == m].sort_values("distance")["mean_similarity"].to_numpy()
             for m in ("along_frame", "along_column", "along_row")}, tables["grid_displacements"])
    return out


def test_chunked_m_rope_leaves_h_and_w_nearly_invisible(grids):
    axes, disp = grids["chunked", 5e6]  # section [24, 20, 20]
    assert 1 - axes["along_column"].min() < 4.4e-5 and 1 - axes["along_row"].min() < 2.9e-9
    assert axes["along_frame"][3] == pytest.approx(0.883, abs=5e-4)
    assert disp["mean_similarity"].min() == pytest.approx(0.883, abs=5e-4)
    axes, disp = grids["chunked", 1e6]  # Qwen2-VL [16, 24, 24]
    assert axes["along_column"][15] == pytest.approx(0.995, abs=5e-4) and 1 - axes["along_row"].min() < 1.6e-7
    assert axes["along_frame"][3] == pytest.approx(0.872, abs=5e-4)
    assert disp["mean_similarity"].min() == pytest.approx(0.867, abs=5e-4)


def test_interleaving_and_axial_separate_every_axis(grids):
    axes, disp = grids["interleaved", 5e6]
    assert (axes["along_column"][1], axes["along_row"][1]) == pytest.approx((0.994, 0.996), abs=5e-4)
    assert axes["along_column"].argmin() == 12 and axes["along_column"][12] == pytest.approx(0.915, abs=5e-4)
    assert axes["along_row"][15] == pytest.approx(0.915, abs=5e-4) and axes["along_frame"][3] == pytest.approx(
        0.950, abs=5e-4)
    assert disp["mean_similarity"].min() == pytest.approx(0.780, abs=5e-4)
    axes, disp = grids["axial", 1e4]
    np.testing.assert_allclose(axes["along_column"], axes["along_row"], atol=1e-14)  # the same 28 pairs on h and w
    assert axes["along_row"][1] == pytest.approx(0.985, abs=5e-4) and axes["along_row"][15] == pytest.approx(
        0.824, abs=5e-4)
    assert axes["along_frame"][3] == pytest.approx(0.962, abs=5e-4)
    assert disp["mean_similarity"].min() == pytest.approx(0.610, abs=5e-4)
    for _, d in grids.values():
        assert d["std_similarity"].max() < 1e-13  # translation-invariant on the grid: exact per displacement


def test_grid_runs_have_no_1d_numbers_and_the_grid_tables_of_the_grid_stage():
    """A study of grid runs (M-RoPE, axial RoPE, 2-D sin-cos): every 1-D stage is not_applicable (empty columns and
    tables, the reason in not_applicable and message, no comparison rows); the grid tables are the grid stage's."""
    import pandas as pd

    from poslab.encodings import make_encoding
    from poslab.stages import PIPELINE
    from poslab.study import parse_study, run_study

    spec = parse_study({"name": "g", "n_positions": 24, "dim": 16, "analysis": {"n_resamples": 0}, "encodings": [
        {"kind": "mrope", "grid": "2x3x4", "mrope_section": "4,2,2", "rotary_dim": 16},
        {"kind": "axial_rope", "grid": "2x3x4", "axes_dim": "4,6,6"},
        {"kind": "sincos2d", "grid": "4x6"}]})
    result = run_study(spec, progress=False, executor="serial")
    s = result.summary
    assert (s["status"] == "ok").all()
    line = [n for st in PIPELINE if st.positions == "line" for c in st.summary for n in s.columns if c.matches(n)]
    assert (s[line].isna() | s[line].eq("")).all(axis=None)
    expected = ("not_applicable: multi-axis positions; see grid tables (heatmap, properties, kernel, profile, "
                "summaries, window_sensitivity, decay, bootstrap, envelope)")
    assert (s["not_applicable"] == expected).all() and s["message"].str.contains(expected, regex=False).all()
    assert not any(len(result.frames.get(t, ())) for t in ("profiles", "heatmaps", "decay_metrics", "comparison"))
    for enc, label in zip(spec.encodings, s["label"]):
        grid = run_stage("grid", enc, 24, 16).tables["grid_displacements"]
        got = result.grid_displacements[result.grid_displacements["label"] == label][list(grid.columns)]
        pd.testing.assert_frame_equal(got.reset_index(drop=True), grid, check_dtype=False)
    assert make_encoding("mrope", mrope_section="4,2,2", rotary_dim=16).grid_shape(24) is None  # text tokens: a line
    from poslab.cli import _summary_text

    text = _summary_text(result.summary)  # the console: n/a, and why, never "> max_distance"
    assert "n/a" in text and "> 23" not in text and "positions on a grid" in text and "grid_profiles.csv" in text
