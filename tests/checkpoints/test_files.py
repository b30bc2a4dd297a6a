"""Tensor files: safetensors (lazy, bf16/fp16), sharded indexes, .npy/.npz, PyTorch files via weights_only."""

import fractions
import json
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import save_file as torch_save_file

from poslab.checkpoints import list_tensors, load_tensor
from poslab.encodings import make_encoding
from poslab.stages import run_stage

C9_BITS = [0x3F80, 0x4049, 0xC2F7, 0x7F80, 0x7FC0]
C9_VALUES = [1.0, 3.140625, -123.5, np.inf, np.nan]

def _source(enc, n_positions):
    """The learned_source stage's summary columns of a run."""
    return run_stage("learned_source", enc, n_positions).summary


def test_c9_bf16_bit_patterns(tmp_path, raw_safetensors):
    raw = np.array(C9_BITS, dtype="<u2").tobytes()
    path = raw_safetensors(tmp_path / "bf16.safetensors", {"x": ("BF16", (5,), raw), "y": ("F32", (2,), bytes(8))})
    assert [str(i) for i in list_tensors(path)] == ["x (5,) bfloat16", "y (2,) float32"]
    got = load_tensor(path, "x")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.astype(np.float64), C9_VALUES)  # nan == nan for assert_array_equal


def test_bf16_and_fp16_tables_are_upcast_exactly_with_dtype_recorded(tmp_path, wpe):
    rows = torch.from_numpy(wpe[:24].copy())
    torch_save_file({"wpe.weight": rows.bfloat16()}, str(tmp_path / "bf16.safetensors"))  # the reference writer
    torch_save_file({"wpe.weight": rows.half()}, str(tmp_path / "fp16.safetensors"))
    for name, ref in [("bf16", rows.bfloat16().float().numpy()), ("fp16", rows.half().float().numpy())]:
        enc = make_encoding("learned", source=str(tmp_path / f"{name}.safetensors"))
        table = enc.generate(24, 1)
        assert table.dtype == np.float64
        np.testing.assert_array_equal(table, ref.astype(np.float64))
        assert _source(enc, 24)["source_dtype"] == {"bf16": "bfloat16", "fp16": "float16"}[name]
    # bf16 keeps the top 16 bits of each float32 (torch rounds to nearest even, so compare within one bf16 ulp)
    np.testing.assert_allclose(rows.bfloat16().float().numpy(), wpe[:24], rtol=2**-8)


def test_safetensors_reads_only_the_requested_tensor(tmp_path, wpe):
    """A 2 GiB tensor (a sparse file on disk) sits before the tables; reading them must not touch it."""
    import struct
    import tracemalloc

    big = 2**29  # float32 values: 2 GiB
    small = wpe[:4, :8].astype("<f4").tobytes()
    bf16 = np.array(C9_BITS, dtype="<u2").tobytes()
    header = {"big.weight": {"dtype": "F32", "shape": [big], "data_offsets": [0, 4 * big]},
              "wpe.weight": {"dtype": "F32", "shape": [4, 8], "data_offsets": [4 * big, 4 * big + len(small)]},
              "x": {"dtype": "BF16", "shape": [5], "data_offsets": [4 * big + len(small), 4 * big + len(small) + 10]}}
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path = tmp_path / "big.safetensors"
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        f.seek(4 * big, 1)  # a hole: no disk space, reads as zeros
        f.write(small + bf16)
    tracemalloc.start()
    try:
        got, x = load_tensor(path, "wpe.weight"), load_tensor(path, "x")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(got, wpe[:4, :8])
    np.testing.assert_array_equal(x, np.array(C9_VALUES, dtype=np.float32))
    assert peak < 2**20  # far below the 2 GiB of the other tensor


def test_sharded_index(tmp_path, make_model, wpe):
    make_model(tmp_path, None, {"transformer.wte.weight": wpe[500:530]}, "model-00001-of-00002.safetensors")
    make_model(tmp_path, None, {"transformer.wpe.weight": wpe[:30], "transformer.ln_f.weight": wpe[0]},
               "model-00002-of-00002.safetensors")
    index = {"metadata": {"total_size": 1}, "weight_map": {
        "transformer.wte.weight": "model-00001-of-00002.safetensors",
        "transformer.wpe.weight": "model-00002-of-00002.safetensors",
        "transformer.ln_f.weight": "model-00002-of-00002.safetensors"}}
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps(index))
    infos = list_tensors(tmp_path / "model.safetensors.index.json")
    assert {(i.key, i.file) for i in infos} == {(k, v) for k, v in index["weight_map"].items()}
    np.testing.assert_array_equal(load_tensor(tmp_path / "model.safetensors.index.json", "transformer.wpe.weight"),
                                  wpe[:30])
    (tmp_path / "model-00001-of-00002.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="names the shard model-00001-of-00002.safetensors, which is missing"):
        list_tensors(tmp_path / "model.safetensors.index.json")


def test_npz_never_unpickles(tmp_path):
    np.savez(tmp_path / "obj.npz", a=np.array([{"x": 1}], dtype=object))
    with pytest.raises(ValueError, match="cannot read .*obj.npz"):
        list_tensors(tmp_path / "obj.npz")


def test_state_dict_bin_with_position_ids(tmp_path, wpe):
    """torch.save'd state dict read with weights_only=True; the int position_ids buffer is never the table."""
    state = {"bert.embeddings.position_ids": torch.arange(40).unsqueeze(0),
             "bert.embeddings.position_embeddings.weight": torch.from_numpy(wpe[300:340].copy()),
             "bert.embeddings.word_embeddings.weight": torch.from_numpy(wpe[:10].copy())}
    torch.save(state, tmp_path / "pytorch_model.bin")
    assert str(list_tensors(tmp_path / "pytorch_model.bin")[0]) == "bert.embeddings.position_ids (1, 40) int64"
    with pytest.raises(ValueError, match="holds position 0 is unknown .*poslab does not guess. Write offset"):
        make_encoding("learned", source=str(tmp_path / "pytorch_model.bin")).generate(40, 1)  # no config: no rule
    enc = make_encoding("learned", source=str(tmp_path / "pytorch_model.bin"), offset=0)  # by name, offset given
    np.testing.assert_array_equal(enc.generate(40, 1), wpe[300:340])
    assert _source(enc, 40)["position_rule"] == "offset = 0 given"
    assert _source(enc, 40)["tensor"] == "bert.embeddings.position_embeddings.weight"
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert", "max_position_embeddings": 40}))
    enc = make_encoding("learned", source=str(tmp_path))  # model folder with pytorch_model.bin
    np.testing.assert_array_equal(enc.generate(40, 1), wpe[300:340])
    with pytest.raises(ValueError, match="position_ids.*dtype int64 is not a float table"):
        make_encoding("learned", source=str(tmp_path), key="bert.embeddings.position_ids").generate(2, 1)


def test_pickled_objects_are_refused(tmp_path):
    torch.save({"w": torch.zeros(2, 2), "opt": fractions.Fraction(1, 3)}, tmp_path / "evil.pt")
    with pytest.raises(ValueError, match=r"a pickled fractions.Fraction object, which torch.load\(weights_only=True\) refuses") as err:
        list_tensors(tmp_path / "evil.pt")
    assert "weights_only=False" not in str(err.value) and "trust" not in str(err.value)  # never advise unsafe loading
    (tmp_path / "garbage.bin").write_bytes(b"\x80\x04 not a checkpoint")
    with pytest.raises(ValueError, match="cannot read .*garbage.bin"):
        load_tensor(tmp_path / "garbage.bin")


def test_pytorch_file_without_torch_names_the_extra(tmp_path, monkeypatch):
    torch.save({"wpe.weight": torch.zeros(3, 2)}, tmp_path / "m.pt")
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    with pytest.raises(ImportError, match=r"m.pt is a PyTorch file; reading it needs torch.*pip install 'poslab\[train\]'"):
        list_tensors(tmp_path / "m.pt")
