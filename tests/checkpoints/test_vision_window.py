"""A vision table analysed on a window other than its whole patch grid: what is analysed, and what is said."""

import tomllib

import numpy as np
import pandas as pd
import pytest

from poslab.analysis.grid import grid_similarity
from poslab.encodings import make_encoding
from poslab.stages import PIPELINE
from poslab.study import StudyError, parse_study, run_study

CFG = {"model_type": "vit", "image_size": 32, "patch_size": 8}  # 4 x 4 patches after 1 CLS row


def _study(tmp_path, vit, body):
    text = f'name = "v"\nn_positions = 16\ndim = 8\n[analysis]\nn_resamples = 0\n{body}'
    return parse_study(tomllib.loads(text.replace("VIT", str(vit))), source=str(tmp_path / "s.toml"))


def test_a_vision_table_is_analysed_on_its_whole_grid_and_not_on_its_flattened_index(tmp_path, make_model, wpe):
    """A window shorter than the grid is refused when the study is read (a few grid rows are neither a grid nor a
    line); on the whole grid the grid tables are written and the 1-D stages do not apply: their columns are empty
    and the row says why."""
    vit = make_model(tmp_path / "vit", CFG, {"vit.embeddings.position_embeddings": wpe[None, :17, :8]})
    with pytest.raises(StudyError, match=r"entry 1 \(kind = 'learned'\).*n_positions=6, but the positions of this "
                                         r"vision table are the 16 patches of its 4x4 grid \(rows 1..16.*set "
                                         r"n_positions = 16"):
        _study(tmp_path, vit, '[[encodings]]\nkind = "learned"\nsource = "VIT"\nn_positions = 6\n')
    spec = _study(tmp_path, vit, '[[encodings]]\nkind = "learned"\nsource = "VIT"\n')
    result = run_study(spec, progress=False, executor="serial")
    row = result.summary.iloc[0]
    assert row["status"] == "ok" and row["grid_shape"] == "4x4"
    assert row["not_applicable"].startswith("not_applicable: multi-axis positions; see grid tables (heatmap, ")
    assert "not_applicable: multi-axis positions; see grid tables" in row["message"]
    assert len(result.grid_maps) == 16 and len(result.grid_profiles) and len(result.profiles) == 0
    line = [name for stage in PIPELINE if stage.positions == "line" for col in stage.summary
            for name in result.summary.columns if col.matches(name)]
    assert {"band_width_0p5", "decay_length", "profile_method"} <= set(line)
    empty = result.summary[line].isna() | result.summary[line].eq("")
    assert empty.all(axis=None), result.summary[line].loc[:, ~empty.iloc[0]]  # no number in a 1-D column
    for name in ("heatmaps", "properties", "decay_metrics", "bands", "summaries"):
        assert len(result.frames.get(name, ())) == 0, name
    grid = grid_similarity(make_encoding("learned", source=str(vit)).generate(16, 1), (4, 4))  # unchanged tables
    got = result.grid_displacements[list(grid.displacement_frame().columns)].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, grid.displacement_frame(), check_dtype=False)
    np.testing.assert_array_equal(make_encoding("learned", source=str(vit)).generate(16, 1), wpe[1:17, :8])


def test_a_window_longer_than_the_grid_is_refused(tmp_path, make_model, wpe):
    """Rows after the grid (YOLOS detection tokens, or a grid given on a longer table) are not patch positions."""
    enc = make_encoding("learned", source="gpt2", grid="4x4")
    enc.check_size(16, 1)
    with pytest.raises(ValueError, match=r"the 16 patches of its 4x4 grid \(rows 0..15; other rows are not "
                                         r"patches\), and a grid is analysed whole, on the grid; set n_positions = 16"):
        enc.check_size(17, 1)
    yolos = make_model(tmp_path / "yolos", {**CFG, "model_type": "yolos", "num_detection_tokens": 3},
                       {"vit.embeddings.position_embeddings": wpe[None, :20, :8]})
    with pytest.raises(StudyError, match=r"entry 1 \(kind = 'learned'\).*16 patches of its 4x4 grid \(rows 1..16"):
        parse_study(tomllib.loads(f'name = "v"\nn_positions = 19\ndim = 8\n[[encodings]]\nkind = "learned"\n'
                                  f'source = "{yolos}"\n'), source=str(tmp_path / "s.toml"))
