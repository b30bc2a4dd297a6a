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
    assert fields - set(SCALING_KEYS) == {"rope_theta", "rotary_dim", "pairing", "config", "rope_type"}
