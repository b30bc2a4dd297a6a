"""Choosing the position table of real model layouts (config.json + tensor names), offsets (C8), refusals."""

import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from poslab.checkpoints import select_position_table
from poslab.cli import main
from poslab.encodings import make_encoding
from poslab.stages import run_stage


def _source(enc, n_positions):
    """The learned_source stage's summary columns of a run."""
    return run_stage("learned_source", enc, n_positions).summary


def _grid(enc, n_positions):
    """The grid stage's tables of a run ({} when it has no patch grid)."""
    out = run_stage("grid", enc, n_positions)
    return out.tables if out is not None else {}


def learned(source, **kw):
    return make_encoding("learned", source=str(source), **kw)


@pytest.mark.parametrize("prefix", ["", "transformer."])
def test_gpt2_both_key_layouts(tmp_path, make_model, wpe, prefix):
    folder = make_model(tmp_path / "gpt2", {"model_type": "gpt2", "n_positions": 40, "n_ctx": 40},
                        {f"{prefix}wpe.weight": wpe[:40], f"{prefix}wte.weight": wpe[900:950],
                         f"{prefix}h.0.ln_1.weight": wpe[7]})
    enc = learned(folder)
    np.testing.assert_array_equal(enc.generate(40, 1), wpe[:40])
    assert _source(enc, 40) == {"tensor": f"{prefix}wpe.weight", "source_dtype": "float32", "row_offset": 0,
                                "grid_shape": None, "prefix_tokens": None,
                                "position_rule": "GPT-2: position p is row 0 + p"}
    assert enc.label == f"learned(source={folder})"


def test_bert_never_takes_position_ids(tmp_path, make_model, wpe):
    folder = make_model(tmp_path, {"model_type": "bert", "max_position_embeddings": 32},
                        {"bert.embeddings.position_embeddings.weight": wpe[100:132],
                         "bert.embeddings.position_ids": np.arange(32, dtype=np.int64)[None],
                         "bert.embeddings.token_type_embeddings.weight": wpe[:2],
                         "bert.embeddings.word_embeddings.weight": wpe[200:260]})
    np.testing.assert_array_equal(learned(folder).generate(32, 1), wpe[100:132])
    sel = select_position_table(folder)
    roles = {c.key: c.role for c in sel.candidates}
    assert roles == {"bert.embeddings.position_embeddings.weight": "learned",
                     "bert.embeddings.position_ids": "integer buffer"}


@pytest.mark.parametrize("pad", [1, 3])
def test_roberta_positions_start_after_padding(tmp_path, make_model, wpe, pad):
    """RoBERTa: rows = max_position_embeddings (514 for 512 positions); position p is row pad_token_id + 1 + p."""
    rows = 32 + pad + 1
    folder = make_model(tmp_path, {"model_type": "roberta", "max_position_embeddings": rows, "pad_token_id": pad},
                        {"roberta.embeddings.position_embeddings.weight": wpe[:rows]})
    enc = learned(folder)
    np.testing.assert_array_equal(enc.generate(32, 1), wpe[pad + 1 : rows])
    assert _source(enc, 32)["row_offset"] == pad + 1
    with pytest.raises(ValueError, match=rf"n_positions=33 with offset={pad + 1} needs {rows + 1} rows.*has {rows}"):
        enc.generate(33, 1)


def test_roberta_rows_must_match_max_position_embeddings(tmp_path, make_model, wpe):
    folder = make_model(tmp_path, {"model_type": "xlm-roberta", "max_position_embeddings": 34, "pad_token_id": 1},
                        {"roberta.embeddings.position_embeddings.weight": wpe[:36]})
    with pytest.raises(ValueError, match="36 rows but max_position_embeddings = 34"):
        learned(folder).generate(4, 1)


def test_c8_opt_offset_is_rows_minus_max_position_embeddings(tmp_path, make_model, wpe):
    table = wpe[np.arange(2050) % 1024, :16]  # (2050, 16), rows of the real table
    folder = make_model(tmp_path, {"model_type": "opt", "max_position_embeddings": 2048},
                        {"model.decoder.embed_positions.weight": table,
                         "model.decoder.embed_tokens.weight": wpe[:50, :16]})
    enc = learned(folder)
    np.testing.assert_array_equal(enc.generate(2048, 1), table[2:2050])  # position p is row p + 2
    info = _source(enc, 2048)
    assert (info["tensor"], info["row_offset"]) == ("model.decoder.embed_positions.weight", 2)
    with pytest.raises(ValueError, match="offset = 0 given, but .* position 0 at row 2"):
        learned(folder, offset=0).generate(8, 1)
    assert _source(learned(folder, offset=2), 8)["row_offset"] == 2
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "opt", "max_position_embeddings": 2047}))
    with pytest.raises(ValueError, match=r"2050 rows − max_position_embeddings 2047 = offset 3, but OPT uses offset 2"):
        learned(folder).generate(8, 1)


def test_vit_and_deit_prefix_tokens_and_grid(tmp_path, make_model, wpe):
    cfg = {"image_size": 32, "patch_size": 8}  # 4 x 4 patches
    vit = make_model(tmp_path / "vit", {"model_type": "vit", **cfg},
                     {"vit.embeddings.position_embeddings": wpe[None, :17], "vit.embeddings.cls_token": wpe[None, None, 0]})
    enc = learned(vit)
    np.testing.assert_array_equal(enc.generate(16, 1), wpe[1:17])  # CLS row skipped
    assert _source(enc, 16) == {"tensor": "vit.embeddings.position_embeddings", "source_dtype": "float32",
                                "row_offset": 1, "grid_shape": "4x4", "prefix_tokens": 1,
                                "position_rule": "ViT: 1 prefix row(s) (CLS), then the patch grid in raster order"}
    tables = _grid(enc, 16)
    assert set(tables) == {"grid_profiles", "grid_displacements", "grid_maps"} and len(tables["grid_maps"]) == 16
    deit = make_model(tmp_path / "deit", {"model_type": "deit", **cfg}, {"deit.embeddings.position_embeddings": wpe[None, :18]})
    np.testing.assert_array_equal(learned(deit).generate(16, 1), wpe[2:18])
    wrong = make_model(tmp_path / "wrong", {"model_type": "deit", **cfg}, {"deit.embeddings.position_embeddings": wpe[None, :17]})
    with pytest.raises(ValueError, match=r"17 rows − 4x4 = 16 patches leaves 1 prefix row\(s\), but DeiT has 2"):
        learned(wrong).generate(4, 1)


def test_clip_and_siglip_vision_configs(tmp_path, make_model, wpe):
    vision = "vision_model.embeddings.position_embedding.weight"
    text = "text_model.embeddings.position_embedding.weight"
    clip = make_model(tmp_path / "clip", {"model_type": "clip", "vision_config": {"image_size": 24, "patch_size": 8},
                                          "text_config": {"max_position_embeddings": 12}},
                      {vision: wpe[:10], text: wpe[500:512], "vision_model.embeddings.position_ids": np.arange(10)[None]})
    sel = select_position_table(clip)
    assert sel.chosen is None and "2 learned position tables" in sel.reason  # vision and text: refused
    with pytest.raises(ValueError, match=r"ambiguous") as err:
        learned(clip).generate(4, 1)
    assert f"\n  {vision}  (10, 768)  float32  offset 1  grid 3x3, prefix tokens 1" in str(err.value)
    assert f"\n  {text}  (12, 768)  float32  offset 0  learned: CLIP text positions" in str(err.value)
    enc = learned(clip, key=vision)
    np.testing.assert_array_equal(enc.generate(9, 1), wpe[1:10])
    assert _source(enc, 9)["grid_shape"] == "3x3"
    np.testing.assert_array_equal(learned(clip, key=text).generate(12, 1), wpe[500:512])
    siglip = make_model(tmp_path / "siglip", {"model_type": "siglip_vision_model", "image_size": 24, "patch_size": 8},
                        {vision: wpe[:9]})
    assert _source(learned(siglip), 9) == {"tensor": vision, "source_dtype": "float32", "row_offset": 0,
                                           "grid_shape": "3x3", "prefix_tokens": 0, "position_rule":
                                           "SigLIP vision: 0 prefix row(s) (none), then the patch grid in raster order"}


def test_whisper_decoder_is_learned_encoder_is_sinusoidal(tmp_path, make_model, wpe):
    folder = make_model(tmp_path, {"model_type": "whisper", "max_target_positions": 20, "max_source_positions": 30},
                        {"model.decoder.embed_positions.weight": wpe[:20, :32],
                         "model.encoder.embed_positions.weight": wpe[100:130, :32]})
    sel = select_position_table(folder)
    assert sel.chosen.key == "model.decoder.embed_positions.weight"
    assert "model.encoder.embed_positions.weight is the Whisper encoder positions, a fixed sinusoidal table" in sel.reason
    np.testing.assert_array_equal(learned(folder).generate(20, 1), wpe[:20, :32])


def test_bart_has_two_learned_tables_and_is_refused(tmp_path, make_model, wpe):
    folder = make_model(tmp_path, {"model_type": "bart", "max_position_embeddings": 10},
                        {"model.encoder.embed_positions.weight": wpe[:12, :8],
                         "model.decoder.embed_positions.weight": wpe[20:32, :8]})
    with pytest.raises(ValueError, match="ambiguous: choose one with key"):
        learned(folder).generate(10, 1)
    enc = learned(folder, key="model.decoder.embed_positions.weight")
    np.testing.assert_array_equal(enc.generate(10, 1), wpe[22:32, :8])
    assert _source(enc, 10)["row_offset"] == 2


def test_without_config_names_decide_or_refuse(tmp_path, make_model, wpe):
    one = make_model(tmp_path / "one", None, {"transformer.wpe.weight": wpe[:30], "transformer.wte.weight": wpe[:5]})
    with pytest.raises(ValueError, match="holds position 0 is unknown"):  # no config: no silent offset 0
        learned(one / "model.safetensors").generate(30, 1)
    np.testing.assert_array_equal(learned(one / "model.safetensors", offset=0).generate(30, 1), wpe[:30])
    unknown = make_model(tmp_path / "unknown", {"model_type": "my_model"},
                         {"enc.pos_embed": wpe[:30], "dec.embed_positions.weight": wpe[:30]})
    with pytest.raises(ValueError, match=r"(?s)'my_model' is not a family poslab knows.*ambiguous.*\n  enc.pos_embed  \(30, 768\)  float32  offset \?"):
        learned(unknown).generate(4, 1)
    none = make_model(tmp_path / "none", None, {"a": wpe[:3], "b": wpe[:4]})
    with pytest.raises(ValueError, match="no float tensor is named like a position table"):
        learned(none).generate(2, 1)
    with pytest.raises(KeyError, match="no tensor 'c'"):
        learned(none, key="c").generate(2, 1)


def test_hf_cache_snapshot_with_symlinks(tmp_path, make_model, wpe):
    repo = tmp_path / "hub" / "models--openai-community--gpt2"
    build = make_model(tmp_path / "build", {"model_type": "gpt2", "n_positions": 24}, {"wpe.weight": wpe[:24]})
    (repo / "blobs").mkdir(parents=True)
    snap = repo / "snapshots" / "607a30d783dfa663caf39e06633721c8d4cfcd7e"
    snap.mkdir(parents=True)
    for name, blob in [("config.json", "b1"), ("model.safetensors", "b2")]:
        (build / name).rename(repo / "blobs" / blob)
        os.symlink(f"../../blobs/{blob}", snap / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(snap.name)
    for source in (snap, repo, snap / "model.safetensors"):
        np.testing.assert_array_equal(learned(source).generate(24, 1), wpe[:24])
    result = CliRunner().invoke(main, ["inspect", str(repo)])
    assert result.exit_code == 0, result.output
    assert "Hugging Face cache repo" in result.output and "model_type 'gpt2'" in result.output
    (repo / "blobs" / "b2").unlink()  # an incomplete download
    with pytest.raises(FileNotFoundError, match=r"model.safetensors is a broken symlink \(to ../../blobs/b2; in a cache: its blob was not downloaded\)"):
        learned(snap).generate(4, 1)


def test_inspect_lists_candidates_and_the_choice(tmp_path, make_model, wpe):
    folder = make_model(tmp_path / "opt", {"model_type": "opt", "max_position_embeddings": 30},
                        {"model.decoder.embed_positions.weight": wpe[:32, :8],
                         "model.decoder.embed_tokens.weight": wpe[:5, :8]})
    result = CliRunner().invoke(main, ["inspect", str(folder)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{folder}: model folder, weights model.safetensors, config.json model_type 'opt'"
    assert lines[2] == ("  * model.decoder.embed_positions.weight  (32, 8)  float32  offset 2  "
                        "learned: OPT decoder positions")
    assert lines[3] == ("used: model.decoder.embed_positions.weight — model_type 'opt': the OPT decoder positions "
                        "table; offset 2 = 32 rows − max_position_embeddings 30 (OPT uses 2)")
    bart = make_model(tmp_path / "bart", {"model_type": "bart", "max_position_embeddings": 30},
                      {"model.encoder.embed_positions.weight": wpe[:32, :8],
                       "model.decoder.embed_positions.weight": wpe[:32, :8]})
    result = CliRunner().invoke(main, ["inspect", str(bart)])
    assert result.exit_code == 2  # refused: the report, then why (exit 2: input refused)
    assert result.output.count("offset 2  learned: BART") == 2
    assert "used: none — model_type 'bart' has 2 learned position tables" in result.output
    result = CliRunner().invoke(main, ["inspect", str(bart), "--key", "nope"])
    assert result.exit_code == 2 and "no tensor 'nope'" in result.output


@pytest.mark.parametrize("config, name", [
    ({"model_type": "gpt_neo", "max_position_embeddings": 24}, "transformer.wpe.weight"),
    ({"model_type": "openai-gpt", "n_positions": 24}, "transformer.positions_embed.weight"),
    ({"model_type": "distilbert", "max_position_embeddings": 24}, "distilbert.embeddings.position_embeddings.weight"),
    ({"model_type": "whisper", "max_target_positions": 24}, "decoder.positional_embedding"),  # OpenAI's names
])
def test_more_text_families(tmp_path, make_model, wpe, config, name):
    folder = make_model(tmp_path, config, {name: wpe[40:64, :16], "lm_head.weight": wpe[:3, :16]})
    enc = learned(folder)
    np.testing.assert_array_equal(enc.generate(24, 1), wpe[40:64, :16])
    assert (_source(enc, 24)["tensor"], _source(enc, 24)["row_offset"]) == (name, 0)


def test_distilbert_sinusoidal_table_is_recognised_not_taken(tmp_path, make_model, wpe):
    folder = make_model(tmp_path, {"model_type": "distilbert", "max_position_embeddings": 24, "sinusoidal_pos_embds": True},
                        {"distilbert.embeddings.position_embeddings.weight": wpe[:24, :16]})
    with pytest.raises(ValueError, match="is sinusoidal \\(fixed\\), not learned; pass key"):
        learned(folder).generate(4, 1)
    key = "distilbert.embeddings.position_embeddings.weight"
    np.testing.assert_array_equal(learned(folder, key=key).generate(24, 1), wpe[:24, :16])
