"""Reading a config.json as transformers reads it: one pure, recorded step (Rotary.resolve)."""

import dataclasses
import json
import os

import numpy as np
import pytest

from poslab.encodings import ParameterError, make_encoding, rope_inv_freq
from poslab.encodings.model_config import RopeConfig, read_rope_config
from poslab.encodings.rotary import RopeResolution


def write(folder, cfg):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def test_no_hidden_state_and_resolution_records_sources(tmp_path):
    path = write(tmp_path / "m", {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                                  "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 5e5}})
    enc = make_encoding("rotary", config=str(path))
    assert set(vars(enc)) == {f.name for f in dataclasses.fields(enc)}  # nothing stored beside the parameters
    assert enc == make_encoding("rotary", config=str(path))
    r = enc.resolve(768, 32)
    assert isinstance(r, RopeResolution) and isinstance(r.config, RopeConfig)
    assert (r.rope_type, r.rope_theta, r.head_dim, r.rotary_dim) == ("linear", 5e5, 16, 16)
    np.testing.assert_array_equal(r.inv_freq, rope_inv_freq(16, 5e5) / 2)
    np.testing.assert_array_equal(r.reference_inv_freq, rope_inv_freq(16, 5e5))
    assert not r.inv_freq.flags.writeable
    assert r.sources["rope_theta"] == "config: rope_parameters.rope_theta"
    assert r.sources["factor"] == "config: rope_parameters.factor"
    assert r.sources["head_dim"] == "hidden_size // num_attention_heads (config: hidden_size; config: num_attention_heads)"
    inline = make_encoding("rotary", config=str(path), rope_theta=1e4).resolve(768, 32)
    assert inline.sources["rope_theta"] == "inline" and inline.rope_theta == 1e4


def test_reading_is_memoised_by_file_fingerprint(tmp_path):
    path = write(tmp_path / "m", {"rope_theta": 1e4, "head_dim": 8})
    first = read_rope_config(path)
    assert read_rope_config(path / "config.json") is first
    (path / "config.json").write_text(json.dumps({"rope_theta": 2e4, "head_dim": 8, "x": 1}))
    os.utime(path / "config.json", ns=(1, 1))  # a different modification time and size: read again
    assert read_rope_config(path).rope_theta == 2e4


def _checkpoint_fixtures():
    """tests/checkpoints' Hugging Face cache writer (one helper for learned and rotary tests)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "checkpoints_conftest", Path(__file__).parents[1] / "checkpoints" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_config_sources_are_those_of_learned_source(tmp_path, monkeypatch):
    """rotary config = accepts what learned source = accepts: folder, config.json, weights file beside it, cache
    snapshot, models--ORG--NAME folder, Hub id from the local cache (offline)."""
    from huggingface_hub import constants

    helpers = _checkpoint_fixtures()
    folder = write(tmp_path / "Llama", {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
                                        "rope_theta": 5e5})
    (folder / "model.safetensors").write_bytes(b"")  # a weights file name: its config.json is beside it
    cache = tmp_path / "hub"
    repo = helpers.write_cache(cache, "meta-llama/Llama-x", folder)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    sources = [folder, folder / "config.json", folder / "model.safetensors", repo,
               repo / "snapshots" / helpers.COMMIT, "meta-llama/Llama-x", f"meta-llama/Llama-x@{helpers.COMMIT}"]
    expected = rope_inv_freq(64, 5e5)
    for source in sources:
        r = make_encoding("rotary", config=str(source)).resolve(1, 8)
        np.testing.assert_array_equal(r.inv_freq, expected, err_msg=str(source))
        assert r.sources["rope_theta"] == "config: rope_theta"
    with pytest.raises(ParameterError, match="not-cached/model"):
        make_encoding("rotary", config="not-cached/model")


def test_one_table_of_scaling_keys():
    """Rotary's inline scaling parameters are rope_scaling's keys (issue 12: the keys were listed three times)."""
    from poslab.encodings.rope_scaling import LIST_KEYS, SCALING_KEYS
    from poslab.encodings.rotary import Rotary

    fields = {f.name for f in dataclasses.fields(Rotary)}
    assert set(SCALING_KEYS) - set(LIST_KEYS) <= fields
    assert fields - set(SCALING_KEYS) == {"rope_theta", "rotary_dim", "pairing", "config", "layer_type", "rope_type",
                                          "context_length"}


# ---------------------------------------------------------------- per-layer inventories (issue 14, item 1)

GEMMA3_LEGACY = {"model_type": "gemma3_text", "num_hidden_layers": 12, "head_dim": 16, "hidden_size": 64,
                 "num_attention_heads": 4, "rope_theta": 1e6, "rope_local_base_freq": 1e4,
                 "sliding_window_pattern": 6, "rope_scaling": {"rope_type": "linear", "factor": 8.0}}


def test_gemma3_legacy_keys_give_two_ropes_by_layer_type(tmp_path):
    """Gemma 3 as published (transformers 4 keys): sliding layers rope_local_base_freq 1e4, every 6th layer
    global with rope_theta 1e6 and linear factor 8 (Gemma3TextConfig.convert_rope_params_to_dict)."""
    from poslab.encodings.model_config import read_rope_inventory

    path = write(tmp_path / "g3", GEMMA3_LEGACY)
    inv = read_rope_inventory(path)
    assert inv.layer_types == ("sliding_attention", "full_attention")
    assert inv.group("full_attention").layers == (5, 11)
    assert inv.group("sliding_attention").count == 10
    full, sliding = inv.group("full_attention").rope, inv.group("sliding_attention").rope
    assert (full.rope_type, full.rope_theta, dict(full.scaling)) == ("linear", 1e6, {"factor": 8.0})
    assert (sliding.rope_type, sliding.rope_theta, dict(sliding.scaling)) == ("default", 1e4, {})
    assert full.sources["rope_theta"] == "config: rope_theta"
    assert sliding.sources["rope_theta"] == "config: rope_local_base_freq"
    assert inv.sources["layer_types period"] == "config: sliding_window_pattern"
    r = make_encoding("rotary", config=str(path), layer_type="full_attention").resolve(64, 16)
    np.testing.assert_allclose(r.inv_freq, rope_inv_freq(16, 1e6) / 8, rtol=1e-15)
    with pytest.raises(ParameterError, match='different RoPE per layer type: sliding_attention .*layer_type = '
                                             r'\["sliding_attention", "full_attention"\]'):
        make_encoding("rotary", config=str(path))
    with pytest.raises(ParameterError, match="no layer type 'global'; this config has sliding_attention"):
        make_encoding("rotary", config=str(path), layer_type="global")
    with pytest.raises(ParameterError, match="layer_type = 'full_attention' selects one layer type .* give config"):
        make_encoding("rotary", layer_type="full_attention")


def test_layer_type_all_expands_to_one_run_per_rope_layer_type(tmp_path):
    from poslab.encodings.rotary import Rotary

    path = write(tmp_path / "g3", GEMMA3_LEGACY)
    params = Rotary.expand_study_params({"config": str(path), "layer_type": "all"})
    assert params["layer_type"] == ["sliding_attention", "full_attention"]
    with pytest.raises(ValueError, match='layer_type = "all" needs config'):
        Rotary.expand_study_params({"layer_type": "all"})


def test_unknown_key_in_one_layer_types_dict_is_refused_naming_it(tmp_path):
    path = write(tmp_path / "m", {"model_type": "gemma3_text", "num_hidden_layers": 2, "head_dim": 8,
                                  "layer_types": ["sliding_attention", "full_attention"],
                                  "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 1e4},
                                                      "full_attention": {"rope_type": "default", "rope_theta": 1e6,
                                                                         "warp": 3}}})
    with pytest.raises(ParameterError, match=r"rope_parameters.full_attention has a key poslab does not understand: "
                                             r"'warp' = 3"):
        make_encoding("rotary", config=str(path), layer_type="full_attention")


def test_llama4_nope_layers_and_their_temperature(tmp_path):
    """Llama 4 (iRoPE): every 4th layer has no RoPE; its queries are scaled by 1 + 0.1·ln(⌊(p+1)/8192⌋ + 1)
    (values from the reference note: 1.06931 at p + 1 = 8192, 1.48598 at 2^20, 1.71553 at 10,485,760)."""
    from poslab.encodings.model_config import read_rope_inventory

    path = write(tmp_path / "l4", {"model_type": "llama4_text", "num_hidden_layers": 8, "head_dim": 16,
                                   "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 5e5,
                                   "attention_chunk_size": 8192,
                                   "rope_scaling": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0,
                                                    "high_freq_factor": 1.0, "original_max_position_embeddings": 8192}})
    inv = read_rope_inventory(path)
    assert inv.layer_pattern == ("chunked_attention",) * 3 + ("full_attention",) + ("chunked_attention",) * 3 \
        + ("full_attention",)
    nope = inv.group("full_attention")
    assert nope.rope is None and nope.layers == (3, 7) and "no_rope_layers" in nope.no_rope
    t = nope.temperature
    assert (t.attn_scale, t.floor_scale) == (0.1, 8192)
    np.testing.assert_allclose(t.scale([0, 8190, 8191, 2**20 - 1, 10_485_759]),
                               [1.0, 1.0, 1.0 + 0.1 * np.log(2), 1.0 + 0.1 * np.log(129), 1.0 + 0.1 * np.log(1281)])
    # the note's values are truncated to 5 decimals (1.7155396 at p + 1 = 10,485,760 reads 1.71553)
    np.testing.assert_array_equal(np.floor(t.scale([8191, 2**20 - 1, 10_485_759]) * 1e5) / 1e5,
                                  [1.06931, 1.48598, 1.71553])
    r = make_encoding("rotary", config=str(path)).resolve(64, 16)  # the only RoPE: the chunked layers'
    assert r.rope_type == "llama3"
    assert any("full_attention: 2 layers without RoPE" in rule and "nope_temperature" in rule for rule in r.rules)
    with pytest.raises(ParameterError, match="layer type 'full_attention' .* applies no RoPE .* no positional geometry"):
        make_encoding("rotary", config=str(path), layer_type="full_attention")


def test_cohere2_full_attention_layers_have_no_rope(tmp_path):
    from poslab.encodings.model_config import read_rope_inventory

    path = write(tmp_path / "c2", {"model_type": "cohere2", "num_hidden_layers": 8, "head_dim": 16,
                                   "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 5e4})
    inv = read_rope_inventory(path)
    assert inv.group("full_attention").rope is None and inv.group("full_attention").layers == (3, 7)
    assert inv.group("sliding_attention").rope.rope_theta == 5e4
