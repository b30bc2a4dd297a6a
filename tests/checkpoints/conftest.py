"""Checkpoint fixtures: small files in the real formats, filled with rows of the real GPT-2 table."""

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from poslab.data import bundled_path


@pytest.fixture(scope="session")
def wpe():
    """The real GPT-2 small position table, float32 (1024, 768), as stored."""
    return np.load(bundled_path("gpt2"))


def write_model(folder: Path, config: dict | None, tensors: dict, name: str = "model.safetensors") -> Path:
    """A Hugging Face-style model folder: config.json (if given) and one safetensors file."""
    folder.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    save_file({k: np.ascontiguousarray(v) for k, v in tensors.items()}, str(folder / name))
    return folder


def write_raw_safetensors(path: Path, tensors: dict[str, tuple[str, tuple, bytes]]) -> Path:
    """A safetensors file written by the format's spec (u64 header size, JSON header, data), any dtype code."""
    header, data, offset = {}, b"", 0
    for key, (dtype, shape, raw) in tensors.items():
        header[key] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        data += raw
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.fixture
def make_model():
    """write_model(folder, config, tensors, name="model.safetensors") -> folder."""
    return write_model


@pytest.fixture
def raw_safetensors():
    """write_raw_safetensors(path, {key: (dtype_code, shape, raw_bytes)}) -> path."""
    return write_raw_safetensors
