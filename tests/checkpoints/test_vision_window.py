"""A vision table analysed on a window other than its whole patch grid: what is analysed, and what is said."""

import tomllib

import numpy as np
import pytest

from poslab.encodings import make_encoding
from poslab.study import StudyError, parse_study, run_study

CFG = {"model_type": "vit", "image_size": 32, "patch_size": 8}  # 4 x 4 patches after 1 CLS row


def _study(tmp_path, vit, body):
    text = f'name = "v"\nn_positions = 16\ndim = 8\n[analysis]\nn_resamples = 0\n{body}'
    return parse_study(tomllib.loads(text.replace("VIT", str(vit))), source=str(tmp_path / "s.toml"))


def test_a_window_shorter_than_the_grid_skips_the_grid_and_says_why(tmp_path, make_model, wpe):
    """The 1-D profile covers the n patches asked for; the grid tables need every patch, so none are written."""
    vit = make_model(tmp_path / "vit", CFG, {"vit.embeddings.position_embeddings": wpe[None, :17, :8]})
    spec = _study(tmp_path, vit, '[[encodings]]\nkind = "learned"\nsource = "VIT"\nn_positions = 6\n'
                                 '[[encodings]]\nkind = "learned"\nsource = "VIT"\noffset = 1\n')
    result = run_study(spec, progress=False, executor="serial")
    short, whole = result.summary["label"].tolist()
    summary = result.summary.set_index("label")
    assert summary.loc[short, "status"] == "ok" and summary.loc[whole, "status"] == "ok"
    assert summary.loc[short, "grid_skipped"] == ("n_positions = 6 covers 6 of the 16 patches of the 4x4 grid "
                                                  "(1 full row(s) and 2 patch(es)); the grid tables need the whole "
                                                  "grid: n_positions = 16")
    assert summary.loc[whole, "grid_skipped"] == ""
    assert set(result.grid_profiles["label"]) == set(result.grid_maps["label"]) == {whole}
    assert len(result.grid_maps) == 16
    profile = result.profiles[result.profiles["label"] == short]
    assert profile["distance"].max() == 5  # positions 0..5 = patches 0..5 in raster order (rows 1..6)
    np.testing.assert_array_equal(make_encoding("learned", source=str(vit)).generate(6, 1), wpe[1:7, :8])


def test_a_window_longer_than_the_grid_is_refused(tmp_path, make_model, wpe):
    """Rows after the grid (YOLOS detection tokens, or a grid given on a longer table) are not patch positions."""
    enc = make_encoding("learned", source="gpt2", grid="4x4")
    enc.check_size(16, 1)
    with pytest.raises(ValueError, match=r"the 16 patches of its 4x4 grid \(rows 0..15; other rows are not "
                                         r"patches\); lower n_positions to at most 16"):
        enc.check_size(17, 1)
    yolos = make_model(tmp_path / "yolos", {**CFG, "model_type": "yolos", "num_detection_tokens": 3},
                       {"vit.embeddings.position_embeddings": wpe[None, :20, :8]})
    with pytest.raises(StudyError, match=r"entry 1 \(kind = 'learned'\).*16 patches of its 4x4 grid \(rows 1..16"):
        parse_study(tomllib.loads(f'name = "v"\nn_positions = 19\ndim = 8\n[[encodings]]\nkind = "learned"\n'
                                  f'source = "{yolos}"\n'), source=str(tmp_path / "s.toml"))
