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
