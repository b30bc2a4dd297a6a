"""Checkpoint fixtures: small files in the real formats, filled with rows of the real GPT-2 table."""

import hashlib
import json
import os
import shutil
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


COMMIT = "607a30d783dfa663caf39e06633721c8d4cfcd7e"


def write_cache(cache: Path, repo_id: str, folder: Path, commit: str = COMMIT) -> Path:
    """Put ``folder``'s files into a Hugging Face cache at ``cache`` (blobs/, snapshots/COMMIT links, refs/main).

    Returns the ``models--ORG--NAME`` folder. The layout is huggingface_hub's: each file's bytes in
    ``blobs/<sha256>``, ``snapshots/<commit>/<name>`` a relative symlink to it, ``refs/main`` the commit.
    """
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    for file in sorted(folder.iterdir()):
        blob = hashlib.sha256(file.read_bytes()).hexdigest()
        shutil.copyfile(file, repo / "blobs" / blob)
        os.symlink(f"../../blobs/{blob}", snap / file.name)
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return repo


@pytest.fixture
def make_cache():
    """write_cache(cache, repo_id, folder, commit=COMMIT) -> models--ORG--NAME folder."""
    return write_cache


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache in tmp_path/hub, offline: HF_HUB_CACHE and HF_HUB_OFFLINE as huggingface_hub reads them."""
    from huggingface_hub import constants

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))  # read at import time by huggingface_hub
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    return cache
