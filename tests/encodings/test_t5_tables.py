"""T5 bias tables from plain arrays and the shipped synthetic table (no transformers needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from poslab.checkpoints.relative import BUNDLED_BIASES, bundled_bias_path, read_t5_bias
from poslab.encodings import ParameterError
from poslab.encodings.t5_buckets import T5Buckets, relative_position_bucket, t5_bias

from ..checkpoints.conftest import write_model

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_table_is_what_its_generator_makes():
    spec = importlib.util.spec_from_file_location("make_t5", ROOT / "scripts" / "make_t5_synthetic_bias.py")
    make = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make)
    shipped = np.load(bundled_bias_path("t5-small-synthetic"))
    assert shipped.dtype == np.float32 and shipped.shape == (32, 8)
    np.testing.assert_array_equal(make.make(), shipped)
    assert (shipped[16] == 0).all()  # the bucket bidirectional T5 never uses
    assert "SYNTHETIC" in BUNDLED_BIASES["t5-small-synthetic"][1]


def test_the_default_is_the_shipped_encoder_table():
    r = T5Buckets().resolve()
    assert (r.bidirectional, r.num_buckets, r.max_distance, r.n_heads) == (True, 32, 128, 8)
    assert r.stored.stack == "encoder" and r.rules == ()
    assert T5Buckets(source="bundled:t5-small-synthetic").resolve().stored.sha256 == r.stored.sha256
    forward, backward = r.bias_by_distance(200)
    assert not np.array_equal(forward, backward)  # head 1 prefers the previous token, head 2 the next
    assert backward[1, 1] > backward[1, 0] and forward[2, 1] > forward[2, 0]
    assert (forward[:, 91:] == forward[:, [91]]).all() and (forward[:, 90] != forward[:, 91]).any()  # from +91
    assert (backward[:, 91:] == backward[:, [91]]).all()  # and from -91: one shared bucket each


def test_a_plain_array_follows_stated_rules(tmp_path):
    table = np.arange(16 * 3, dtype=np.float32).reshape(16, 3)
    np.save(tmp_path / "bias.npy", table)
    r = T5Buckets(source=str(tmp_path / "bias.npy")).resolve()
    assert r.bidirectional and r.max_distance == 128 and r.num_buckets == 16
    assert any("relative_attention_max_distance=128" in rule for rule in r.rules)
    assert any("bidirectional=true" in rule for rule in r.rules)
    causal = T5Buckets(source=str(tmp_path / "bias.npy"), bidirectional=False,
                       relative_attention_max_distance=32).resolve()
    k = np.arange(50)
    np.testing.assert_array_equal(causal.bias_by_distance(49)[1],
                                  table[relative_position_bucket(-k, bidirectional=False, num_buckets=16,
                                                                 max_distance=32)].T)
    np.testing.assert_array_equal(causal.bias_by_distance(49)[0], np.repeat(table[[0]].T, 50, axis=1))
    save_file({"bias": table}, str(tmp_path / "bias.safetensors"))
    np.testing.assert_array_equal(T5Buckets(source=str(tmp_path / "bias.safetensors")).resolve().bias, table)


def test_bad_sources_are_refused_with_what_to_write(tmp_path, monkeypatch):
    np.save(tmp_path / "vec.npy", np.zeros(8))
    with pytest.raises(ParameterError, match=r"2-D float array \(num_buckets, n_heads\)"):
        T5Buckets(source=str(tmp_path / "vec.npy"))
    np.save(tmp_path / "nan.npy", np.full((8, 2), np.nan))
    with pytest.raises(ParameterError, match="bucket 0, head 0 is nan"):
        T5Buckets(source=str(tmp_path / "nan.npy"))
    with pytest.raises(ParameterError, match=r"missing\.npy' looks like a file path, and there is no file or folder .*missing\.npy"):
        T5Buckets(source=str(tmp_path / "missing.npy"))
    np.save(tmp_path / "few.npy", np.zeros((2, 2)))
    with pytest.raises(ParameterError, match="too few"):
        T5Buckets(source=str(tmp_path / "few.npy"))
    with pytest.raises(ParameterError, match="is an encoder table"):
        T5Buckets(stack="decoder")
    with pytest.raises(ParameterError, match="must exceed the exact buckets"):
        T5Buckets(source=_write(tmp_path, (32, 2)), relative_attention_max_distance=8)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t5-small-synthetic").mkdir()
    with pytest.raises(ParameterError, match='poslab does not guess which.*"bundled:t5-small-synthetic"'):
        T5Buckets(source="t5-small-synthetic")


def _write(folder, shape):
    path = folder / f"table_{shape[0]}x{shape[1]}.npy"
    np.save(path, np.zeros(shape))
    return str(path)


def test_a_folder_with_another_models_config_is_refused(tmp_path):
    make_model = write_model
    make_model(tmp_path / "gpt2", {"model_type": "gpt2"}, {"wpe.weight": np.zeros((8, 4), np.float32)})
    with pytest.raises(ParameterError, match="model_type 'gpt2' is not a T5-family model") as refused:
        T5Buckets(source=str(tmp_path / "gpt2"))
    assert str(refused.value).count(str(tmp_path / "gpt2")) == 1  # the folder named once, not by both layers
    make_model(tmp_path / "longt5", {"model_type": "longt5"},
               {"encoder.block.0.layer.0.LocalSelfAttention.relative_attention_bias.weight": np.zeros((32, 2), "f4")})
    with pytest.raises(ParameterError, match="LongT5 applies its buckets inside local blocks"):
        T5Buckets(source=str(tmp_path / "longt5"))
    make_model(tmp_path / "bad", {"model_type": "t5", "relative_attention_num_buckets": 16},
               {"encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight": np.zeros((32, 8), "f4")})
    with pytest.raises(ParameterError, match="has 32 rows but config relative_attention_num_buckets = 16"):
        T5Buckets(source=str(tmp_path / "bad"))


def test_t5_bias_is_a_lookup():
    table = np.random.default_rng(0).normal(size=(32, 4))
    rel = np.array([[-200, -1, 0], [1, 5, 300]])
    got = t5_bias(table, rel)
    assert got.shape == (4, 2, 3)
    np.testing.assert_array_equal(got[:, 0, 1], table[1])
    np.testing.assert_array_equal(got[:, 1, 2], table[31])
    assert read_t5_bias("t5-small-synthetic").reason.startswith("shipped table")
