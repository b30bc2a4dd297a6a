"""Issue 10's learned-table findings and issue 11's checkpoint items, one test each (no transformers needed).

The layouts (tensor names, config keys, row conventions) are those transformers 5.24 writes with
save_pretrained; tests/hf/test_learned_matrix.py checks the same rules against the models' forward pass.
"""

import json
import re
import tracemalloc
import zipfile

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from poslab.checkpoints import list_tensors
from poslab.cli import main
from poslab.encodings import make_encoding
from poslab.stages import run_stage

BERT = "embeddings.position_embeddings.weight"


def _source(enc, n_positions):
    """The learned_source stage's summary columns of a run."""
    return run_stage("learned_source", enc, n_positions).summary


def learned(source, **kw):
    return make_encoding("learned", source=str(source), **kw)


@pytest.mark.parametrize("model_type, pad", [
    ("camembert", 1), ("xlm-roberta-xl", 1), ("roberta-prelayernorm", 1), ("data2vec-text", 1), ("xmod", 1),
    ("mpnet", 1), ("longformer", 1), ("markuplm", 0), ("esm", 1), ("ibert", 1), ("luke", 1)])
def test_padding_idx_plus_one_families(tmp_path, make_model, wpe, model_type, pad):
    """Position p is row pad_token_id + 1 + p (rows 0..n-1 were used before)."""
    folder = make_model(tmp_path, {"model_type": model_type, "max_position_embeddings": 20, "pad_token_id": pad},
                        {BERT: wpe[:20, :8], "embeddings.word_embeddings.weight": wpe[500:510, :8]})
    enc = learned(folder)
    np.testing.assert_array_equal(enc.generate(20 - pad - 1, 1), wpe[pad + 1 : 20, :8])
    assert _source(enc, 4)["row_offset"] == pad + 1
    assert "pad_token_id + 1 + p" in _source(enc, 4)["position_rule"]


@pytest.mark.parametrize("model_type, key", [
    ("biogpt", "embed_positions.weight"), ("nystromformer", BERT), ("mra", BERT), ("yoso", BERT),
    ("mbart", "encoder.embed_positions.weight"), ("plbart", "decoder.embed_positions.weight"),
    ("mvp", "decoder.embed_positions.weight")])
def test_offset_two_families_also_with_key(tmp_path, make_model, wpe, model_type, key):
    tensors = {key: wpe[:18, :8]}
    if model_type in ("mbart", "plbart", "mvp"):  # two tables: refused without key, offset 2 with it
        other = key.replace("decoder", "X").replace("encoder", "decoder").replace("X", "encoder")
        tensors[other] = wpe[100:118, :8]
    folder = make_model(tmp_path, {"model_type": model_type, "max_position_embeddings": 16}, tensors)
    if len(tensors) == 2:
        with pytest.raises(ValueError, match="ambiguous: choose one with key"):
            learned(folder).generate(4, 1)
    enc = learned(folder, key=key) if len(tensors) == 2 else learned(folder)
    np.testing.assert_array_equal(enc.generate(16, 1), wpe[2:18, :8])


@pytest.mark.parametrize("model_type, config, rows, prefix, grid", [
    ("vit_msn", {"image_size": 32, "patch_size": 8}, 17, 1, (4, 4)),
    ("dinov2", {"image_size": 32, "patch_size": 8}, 17, 1, (4, 4)),
    ("dinov2_with_registers", {"image_size": 32, "patch_size": 8, "num_register_tokens": 4}, 17, 1, (4, 4)),
    ("yolos", {"image_size": [32, 24], "patch_size": 8, "num_detection_tokens": 5}, 1 + 12 + 5, 1, (4, 3)),
    ("audio-spectrogram-transformer", {"num_mel_bins": 16, "max_length": 32, "patch_size": 8,
                                       "frequency_stride": 10, "time_stride": 10}, 5, 2, (1, 3)),
])
def test_vision_prefixes_and_grids(tmp_path, make_model, wpe, model_type, config, rows, prefix, grid):
    folder = make_model(tmp_path, {"model_type": model_type, **config},
                        {"embeddings.position_embeddings": wpe[None, :rows, :8], "embeddings.cls_token": wpe[None, :1, :8]})
    enc = learned(folder)
    cells = grid[0] * grid[1]
    np.testing.assert_array_equal(enc.generate(cells, 1), wpe[prefix : prefix + cells, :8])
    info = _source(enc, cells)
    assert (info["row_offset"], info["grid_shape"], info["prefix_tokens"]) == (prefix, f"{grid[0]}x{grid[1]}", prefix)


@pytest.mark.parametrize("model_type, key, section", [
    ("owlvit", "vision_model.embeddings.position_embedding.weight", "vision_config"),
    ("chinese_clip", "vision_model.embeddings.position_embedding.weight", "vision_config"),
    ("blip", "vision_model.embeddings.position_embedding", "vision_config"),
    ("git", "image_encoder.vision_model.embeddings.position_embedding.weight", "vision_config")])
def test_vision_key_of_two_tower_models_skips_the_cls_row(tmp_path, make_model, wpe, model_type, key, section):
    table = wpe[None, :10, :8] if not key.endswith("weight") else wpe[:10, :8]
    text = {"git": "embeddings.position_embeddings.weight", "owlvit": "text_model.embeddings.position_embedding.weight"
            }.get(model_type, "text_model.embeddings.position_embeddings.weight")
    folder = make_model(tmp_path, {"model_type": model_type, section: {"image_size": 24, "patch_size": 8}},
                        {key: table, text: wpe[200:216, :8]})
    with pytest.raises(ValueError, match="ambiguous"):
        learned(folder).generate(4, 1)
    enc = learned(folder, key=key)
    np.testing.assert_array_equal(enc.generate(9, 1), wpe[1:10, :8])
    assert _source(enc, 9)["grid_shape"] == "3x3"


@pytest.mark.parametrize("model_type, prefix", [("clip_vision_model", 1), ("siglip_vision_model", 0)])
def test_vision_towers_saved_alone(tmp_path, make_model, wpe, model_type, prefix):
    """transformers 5 saves CLIPVisionModel / SiglipVisionModel without the vision_model. prefix."""
    folder = make_model(tmp_path, {"model_type": model_type, "image_size": 24, "patch_size": 8},
                        {"embeddings.position_embedding.weight": wpe[: 9 + prefix, :8]})
    np.testing.assert_array_equal(learned(folder).generate(9, 1), wpe[prefix : 9 + prefix, :8])


def test_unknown_family_needs_an_explicit_offset(tmp_path, make_model, wpe):
    """It silently got offset 0; now refused with what was found and what to write, unless offset is given."""
    folder = make_model(tmp_path, {"model_type": "my_model", "max_position_embeddings": 20},
                        {"embeddings.position_embeddings.weight": wpe[:22, :8]})
    with pytest.raises(ValueError, match=r"which row of embeddings.position_embeddings.weight \(22, 8\) holds "
                                         r"position 0 is unknown.*Write offset = ROW OF POSITION 0"):
        learned(folder).generate(4, 1)
    result = CliRunner().invoke(main, ["inspect", str(folder)])
    assert "rows: unknown — no rule applies; give offset" in result.output
    enc = learned(folder, offset=2)
    np.testing.assert_array_equal(enc.generate(20, 1), wpe[2:22, :8])
    assert _source(enc, 20)["position_rule"] == "offset = 2 given"


def test_inspect_says_tensor_rows_and_rule(tmp_path, make_model, wpe):
    folder = make_model(tmp_path, {"model_type": "dinov2", "image_size": 32, "patch_size": 8},
                        {"embeddings.position_embeddings": wpe[None, :17, :8]})
    out = CliRunner().invoke(main, ["inspect", str(folder)])
    assert out.exit_code == 0, out.output
    assert ("rows: position 0 at row 1, 1 prefix row(s), patch grid 4x4 — rule: DINOv2: 1 prefix row(s) (CLS), "
            "then the patch grid in raster order") in out.output


# ------------------------------------------------------------------- issue 11 checkpoint items
@pytest.mark.parametrize("patch", [0, -8, [8, 0], 64, "8"])
def test_degenerate_patch_size(tmp_path, make_model, wpe, patch):
    folder = make_model(tmp_path, {"model_type": "vit", "image_size": 32, "patch_size": patch},
                        {"embeddings.position_embeddings": wpe[None, :17, :8]})
    with pytest.raises(ValueError, match=r"patch_size"):
        learned(folder).generate(4, 1)
    out = CliRunner().invoke(main, ["inspect", str(folder)])
    assert out.exit_code != 0 and "Traceback" not in out.output and "patch_size" in out.output


def test_offset_past_the_table(tmp_path):
    with pytest.raises(ValueError, match=r"offset = 2000 is past the end of gpt2_wpe.npy, which has 1024 rows "
                                         r"\(offsets 0..1023\)"):
        make_encoding("learned", source="gpt2", offset=2000).generate(4, 1)


def test_empty_pt_file(tmp_path):
    (tmp_path / "x.pt").write_bytes(b"")
    with pytest.raises(ValueError, match=r"x.pt: the file is empty \(0 bytes"):
        learned(tmp_path / "x.pt").generate(4, 1)


@pytest.mark.parametrize("array, advice", [
    (np.zeros(10, np.float32), "it holds a 1-D array of shape (10,); a position table must be 2-D (positions x dim): "
                               "save it so, e.g. numpy.save(path, table.reshape(n_positions, dim))"),
    (np.zeros((2, 3, 4), np.float32), "it holds a 3-D array of shape (2, 3, 4); a position table must be 2-D "
                                      "(positions x dim) or (1, positions, dim), e.g. table.reshape(-1, dim) if its "
                                      "leading axes are positions"),
    (np.arange(12).reshape(6, 2), "it holds an array (6, 2) of dtype int64, not floats; a position table must be "
                                  "floats (positions x dim): save table.astype('float32')"),
    (np.ones((6, 2), complex), "it holds an array (6, 2) of dtype complex128, not floats;"),
    (np.zeros((0, 8)), "it holds an empty array of shape (0, 8); a position table must have a row per position "
                       "(positions x dim): save the whole table"),
    (np.zeros(0), "it holds an empty array of shape (0,);"),
    (np.float64(3.0), "it holds a single number (shape ()); a position table must be 2-D (positions x dim): save the "
                      "whole table")])
def test_npy_that_is_not_a_table(tmp_path, array, advice):
    """QA: a 1-D .npy was refused with the checkpoint path's "no config.json"; the message says what the file
    holds, what a position table is and what to save, in a study (naming its entry) as in poslab inspect."""
    from poslab.study import StudyError, load_study

    np.save(tmp_path / "t.npy", array)
    with pytest.raises(ValueError) as err:
        learned(tmp_path / "t.npy").generate(2, 1)
    assert str(err.value).startswith(f"{tmp_path / 't.npy'}: {advice}")
    assert "key = NAME" not in str(err.value) and "config.json" not in str(err.value)  # neither applies to a .npy
    study = tmp_path / "s.toml"
    study.write_text('name = "s"\nn_positions = 2\ndim = 2\n[[encodings]]\nkind = "learned"\nsource = "t.npy"\n')
    with pytest.raises(StudyError, match="^" + re.escape(f"{study}: [[encodings]] entry 1 (kind = 'learned'): "
                                                         f"{tmp_path / 't.npy'}: {advice}")):
        load_study(study)
    out = CliRunner().invoke(main, ["inspect", str(tmp_path / "t.npy")])
    assert out.exit_code == 2 and "key = NAME" not in out.output and advice in out.output


@pytest.mark.parametrize("name", ["t.npy", "t.npz"])
def test_an_array_of_python_objects_is_refused_as_such(tmp_path, name):
    """numpy pickles an object array; poslab never unpickles, and says so (not numpy's "cannot be memory-mapped")."""
    objects = np.array([{"x": 1}, None], dtype=object)
    np.save(tmp_path / name, objects, allow_pickle=True) if name.endswith(".npy") else np.savez(tmp_path / name, a=objects)
    what = "it" if name.endswith(".npy") else "member 'a.npy'"
    with pytest.raises(ValueError, match="^" + re.escape(
            f"cannot read {tmp_path / name}: {what} holds Python objects (dtype object), not numbers, and poslab never "
            "unpickles; save the table as floats, e.g. table.astype('float32')") + "$"):
        learned(tmp_path / name).generate(2, 1)


def test_npz_members_listed_from_headers_only(tmp_path, wpe):
    """A small .npz whose member inflates to 256 MiB: listing decompresses only each member's header."""
    path = tmp_path / "bomb.npz"
    big = np.lib.format.header_data_from_array_1_0(np.zeros(1, np.float64))
    big["shape"] = (2**25,)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        with zf.open("zeros.npy", "w", force_zip64=True) as f:
            np.lib.format.write_array_header_1_0(f, big)
            chunk = bytes(2**22)
            for _ in range(64):
                f.write(chunk)
        with zf.open("wpe.npy", "w") as f:
            np.lib.format.write_array(f, wpe[:10, :8])
    assert path.stat().st_size < 2**20
    tracemalloc.start()
    try:
        infos = list_tensors(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert [(i.key, i.shape) for i in infos] == [("zeros", (2**25,)), ("wpe", (10, 8))]
    assert peak < 2**22
    np.testing.assert_array_equal(learned(path, key="wpe").generate(10, 1), wpe[:10, :8])


def test_inspect_knows_bundled_names():
    out = CliRunner().invoke(main, ["inspect", "gpt2"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith("gpt2: bundled table gpt2_wpe.npy (1024, 768) float32")
    out = CliRunner().invoke(main, ["inspect", "siglip-so400m"])
    assert "grid 27x27" in out.output


def test_torch_advice_never_shown_for_any_refused_pickle(tmp_path):
    import datetime

    torch.save({"w": torch.zeros(2, 2), "x": datetime.date(2020, 1, 1)}, tmp_path / "set.pt")
    out = CliRunner().invoke(main, ["inspect", str(tmp_path / "set.pt")])
    assert out.exit_code != 0 and "weights_only=False" not in out.output and "trust" not in out.output
    assert "poslab never unpickles" in out.output
