"""T5 relative-attention bias tables, read from a checkpoint, a plain array or the shipped synthetic table.

T5 (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
Transformer") and the models built on its attention (mT5, UMT5, Switch Transformers) add to the
attention logits a learned scalar per head and *bucket* of the relative position key − query.
The table is ``relative_attention_bias.weight``, shape (num_buckets, n_heads), held by the first
self-attention layer of the encoder (bidirectional buckets) and of the decoder (causal buckets):
``encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight`` and
``decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight`` in transformers'
``T5Model`` (``modeling_t5.py``: only block 0 has ``has_relative_attention_bias``; the other
blocks reuse its bias). UMT5 gives every block its own table. The bucket rule is in
:mod:`poslab.encodings.t5_buckets`.

Sources are read through :func:`poslab.checkpoints.resolve_model` (files, model folders, cache
snapshots, Hub ids: the same as ``learned``), and only the bias tensor is read. No silent
guesses: two candidate tables (encoder and decoder, or one per UMT5 block) are refused naming
them and what to write (``stack``, ``key``); a model type whose attention is not T5's is refused.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
from importlib import resources
from pathlib import Path

import numpy as np

from .files import FLOAT_DTYPES, tensor_list
from .models import open_checkpoint
from .sources import quoted

__all__ = ["RelativeBias", "read_t5_bias", "T5_MODEL_TYPES", "BUNDLED_BIASES", "T5_SUFFIX"]

#: model_types whose attention is transformers' T5Attention (bucket rule and bias lookup), checked in
#: tests/hf/test_t5_checkpoints.py against the forward pass of tiny models saved with save_pretrained.
T5_MODEL_TYPES = ("t5", "mt5", "umt5", "switch_transformers")
#: model_types holding a ``relative_attention_bias`` that is not used as T5's per-token bias, and why.
_OTHER_USES = {
    "longt5": "LongT5 applies its buckets inside local blocks (and a second table to global tokens), not over the "
              "whole sequence",
}
#: The tensor name, matched on a '.' boundary after any prefix.
T5_SUFFIX = "relative_attention_bias.weight"
#: transformers' T5Config defaults (relative_attention_num_buckets, relative_attention_max_distance, num_heads).
T5_DEFAULTS = {"relative_attention_num_buckets": 32, "relative_attention_max_distance": 128, "num_heads": 8}

#: Shipped bias tables: name -> (file in poslab/data, description). Provenance: ``poslab/data/PROVENANCE.md``.
BUNDLED_BIASES: dict[str, tuple[str, str]] = {
    "t5-small-synthetic": ("t5_small_synthetic_relative_attention_bias.npy",
                           "SYNTHETIC T5 encoder bias table in t5-small's configuration (32 buckets, max_distance "
                           "128, 8 heads, bidirectional), made by scripts/make_t5_synthetic_bias.py; not a real "
                           "checkpoint"),
}
#: What the shipped tables stand for: name -> (stack, num_buckets, max_distance).
_BUNDLED_CONFIG = {"t5-small-synthetic": ("encoder", 32, 128)}
_PREFIX = "bundled:"


@dataclasses.dataclass(frozen=True)
class RelativeBias:
    """A T5 relative-attention bias table and where it came from.

    Attributes
    ----------
    bias : ndarray of shape (num_buckets, n_heads)
        The stored values, float64 (bfloat16 / float16 / float32 widened exactly), read-only.
    tensor : str
        Tensor name, or the file name of a plain array.
    source_dtype : str
        dtype as stored.
    stack : {"encoder", "decoder"} or None
        Which stack the table belongs to (from its name, or the shipped table's); None for a plain array.
    num_buckets, max_distance : int or None
        ``relative_attention_num_buckets`` / ``relative_attention_max_distance`` from ``config.json``
        (or the shipped table's configuration); None when nothing says.
    model_type : str or None
    reason : str
        How the tensor was chosen.
    repo_id, revision : str or None
        The Hugging Face repo and snapshot commit, for a Hub id or a cache entry.
    sha256 : str
        SHA-256 of the values as little-endian float64 in C order.
    """

    bias: np.ndarray
    tensor: str
    source_dtype: str
    stack: str | None
    num_buckets: int | None
    max_distance: int | None
    model_type: str | None
    reason: str
    repo_id: str | None = None
    revision: str | None = None
    sha256: str = ""

    def __post_init__(self):
        if not self.sha256:
            digest = hashlib.sha256(np.ascontiguousarray(self.bias, dtype="<f8").tobytes()).hexdigest()
            object.__setattr__(self, "sha256", digest)


def bundled_bias_name(source: str) -> str | None:
    """The shipped bias table ``source`` names, or None when it names a path or a Hub id.

    ``bundled:NAME`` always names the shipped table; a bare ``NAME`` does when no file or folder
    of that name exists in the working folder, and is refused as ambiguous when one does (the rule
    of :func:`poslab.data.bundled_name`).
    """
    if source.startswith(_PREFIX):
        name = source[len(_PREFIX):]
        if name not in BUNDLED_BIASES:
            raise ValueError(f"{source!r}: no shipped bias table {name!r}; shipped: {', '.join(BUNDLED_BIASES)}")
        return name
    if source not in BUNDLED_BIASES:
        return None
    if os.path.lexists(source):
        raise ValueError(f"{source!r} is both the shipped bias table {source} and the path {os.path.abspath(source)}; "
                         f"poslab does not guess which. Write \"./{source}\" for the path, or \"{_PREFIX}{source}\" "
                         "for the shipped table")
    return source


def bundled_bias_path(name: str) -> Path:
    """Path of the shipped bias table ``name`` (a key of :data:`BUNDLED_BIASES`)."""
    return Path(str(resources.files("poslab.data").joinpath(BUNDLED_BIASES[name][0])))


def _stack_of(key: str | None) -> str | None:
    parts = (key or "").split(".")
    found = {p for p in parts if p in ("encoder", "decoder")}
    return found.pop() if len(found) == 1 else None


def _matches(key: str | None) -> bool:
    return key is not None and (key == T5_SUFFIX or key.endswith("." + T5_SUFFIX))


def _block(key: str) -> int | None:
    m = re.search(r"(?:^|\.)block\.(\d+)\.", key)
    return int(m.group(1)) if m else None


def _as_float64(arr: np.ndarray, name: str) -> np.ndarray:
    out = np.array(arr, dtype=np.float64)
    if out.ndim != 2 or 0 in out.shape:
        raise ValueError(f"{name}: a T5 bias table has shape (num_buckets, n_heads); got shape {arr.shape}")
    if not np.isfinite(out).all():
        bad = np.argwhere(~np.isfinite(out))[0]
        raise ValueError(f"{name}: value at bucket {bad[0]}, head {bad[1]} is {out[tuple(bad)]}; a bias table "
                         "must be finite")
    out.flags.writeable = False
    return out


def _config_int(config: dict, key: str, where: str) -> int | None:
    if key not in config:
        return None
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{where}: config {key} = {quoted(value)}: expected a positive integer")
    return value


def _describe(infos) -> str:
    return "; ".join(f"{i.key} {i.shape} {i.dtype}" for i in infos)


def read_t5_bias(source: str, *, stack: str | None = None, key: str | None = None) -> RelativeBias:
    """The T5 relative-attention bias table named by ``source`` (memoised by file fingerprint).

    Parameters
    ----------
    source : str
        A shipped table (``t5-small-synthetic``, also ``bundled:t5-small-synthetic``), a plain
        array file (``.npy``, or a ``.npz`` / ``.safetensors`` holding one 2-D array), or a T5-family
        checkpoint: a weights file, a model folder, a Hugging Face cache snapshot or
        ``models--ORG--NAME`` folder, a Hub id ``ORG/NAME[@REVISION]`` (see
        :func:`poslab.checkpoints.resolve_model`).
    stack : {"encoder", "decoder"}, optional
        The stack whose table to read when the checkpoint holds both.
    key : str, optional
        The tensor to read (e.g. one block's table in a UMT5 checkpoint).

    Returns
    -------
    RelativeBias

    Raises
    ------
    FileNotFoundError
        Nothing at ``source``.
    ValueError, KeyError
        Two candidate tables and neither ``stack`` nor ``key`` to choose (both are named, with what to
        write); no table; a model type whose attention is not T5's; a table whose shape disagrees
        with ``config.json``; a ``stack`` or ``key`` that contradicts the tensor.
    """
    name = bundled_bias_name(str(source))
    if name is not None:
        return _read_bundled(name, stack, key)
    path = Path(str(source)).expanduser()
    fingerprint = ()
    if path.exists():
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())[:200]
        fingerprint = tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files)
    return _read_cached(str(source), stack, key, fingerprint)


def _read_bundled(name: str, stack: str | None, key: str | None) -> RelativeBias:
    own_stack, buckets, distance = _BUNDLED_CONFIG[name]
    if key is not None:
        raise ValueError(f"t5_buckets: the shipped table {name!r} holds one array; remove key = {key!r}")
    if stack is not None and stack != own_stack:
        raise ValueError(f"t5_buckets: the shipped table {name!r} is an {own_stack} table; remove stack = "
                         f"{stack!r} or write stack = {own_stack!r}")
    path = bundled_bias_path(name)
    arr = np.load(path, allow_pickle=False)
    return RelativeBias(_as_float64(arr, name), path.name, str(arr.dtype), own_stack, buckets, distance, None,
                        f"shipped table {name} ({BUNDLED_BIASES[name][1]})")


@functools.lru_cache(maxsize=16)
def _read_cached(source: str, stack: str | None, key: str | None, fingerprint: tuple) -> RelativeBias:
    ckpt = open_checkpoint(source)
    where = ckpt.path
    config = ckpt.config
    model_type = config.get("model_type") if isinstance(config, dict) else None
    infos = ckpt.tensors()
    model = ckpt.model
    hub = {"repo_id": model.repo_id, "revision": model.revision}
    if config is None and len(infos) == 1 and key is None:  # a plain array: the table itself (stated rule)
        info = infos[0]
        if len(info.shape) != 2 or info.dtype not in FLOAT_DTYPES:
            raise ValueError(f"{where}: a T5 bias table is a 2-D float array (num_buckets, n_heads); the file "
                             f"holds {info}")
        arr = ckpt.read(info.key)
        return RelativeBias(_as_float64(arr, where), info.key or ckpt.weights_name, info.dtype,
                            stack if stack is not None else _stack_of(info.key), None, None, None,
                            "the file's one array, taken as the table (rows = buckets, columns = heads)", **hub)
    if model_type in _OTHER_USES:
        raise ValueError(f"{where}: model_type {model_type!r}: {_OTHER_USES[model_type]}; poslab's t5_buckets "
                         "analyses T5's whole-sequence buckets only")
    if config is not None and model_type not in T5_MODEL_TYPES:
        raise ValueError(f"{where}: config.json model_type {model_type!r} is not a T5-family model "
                         f"({', '.join(T5_MODEL_TYPES)}); poslab reads T5 relative-attention bias tables only from "
                         "these (for any other table, save the array as .npy and give it as source)")
    cfg = config or {}
    num_buckets = _config_int(cfg, "relative_attention_num_buckets", where)
    max_distance = _config_int(cfg, "relative_attention_max_distance", where)
    n_heads = _config_int(cfg, "num_heads", where)
    if config is not None:
        num_buckets = num_buckets or T5_DEFAULTS["relative_attention_num_buckets"]
        max_distance = max_distance or T5_DEFAULTS["relative_attention_max_distance"]
        n_heads = n_heads or T5_DEFAULTS["num_heads"]
    if key is not None:
        chosen = [i for i in infos if i.key == key]
        if not chosen:
            raise KeyError(f"{where}: no tensor {key!r}; it holds {tensor_list(infos)}")
        info = chosen[0]
        key_stack = _stack_of(key)
        if stack is not None and key_stack is not None and key_stack != stack:
            raise ValueError(f"{where}: key = {key!r} is a {key_stack} table but stack = {stack!r}; remove one")
        reason = f"key = {key!r} given"
        stack = stack if stack is not None else key_stack
    else:
        found = [i for i in infos if _matches(i.key)]
        if not found:
            raise ValueError(f"{where}: no tensor named *.{T5_SUFFIX} (a T5 relative-attention bias table); it holds "
                             f"{tensor_list(infos)}. Give key = NAME for the table, or a .npy holding it")
        candidates = [i for i in found if stack is None or _stack_of(i.key) == stack]
        if not candidates:
            raise ValueError(f"{where}: stack = {stack!r}, but the checkpoint's bias tables are {_describe(found)}; "
                             f"write stack = {_stack_of(found[0].key)!r}")
        if len(candidates) > 1:
            stacks = sorted({s for s in (_stack_of(i.key) for i in candidates) if s})
            if stack is None and len(stacks) > 1:
                raise ValueError(
                    f"{where}: holds two T5 bias tables, {_describe(candidates)}; poslab does not guess which. "
                    'Write stack = "encoder" (bidirectional buckets) or stack = "decoder" (causal buckets)')
            raise ValueError(f"{where}: holds {len(candidates)} T5 bias tables{' in the ' + stack if stack else ''} "
                             f"({_describe(candidates)}); choose one with key = NAME (UMT5 gives each block its "
                             "own table)")
        info = candidates[0]
        stack = _stack_of(info.key)
        block = _block(info.key or "")
        reason = f"the {stack or 'only'} T5 bias table" + (f" (block {block})" if block is not None else "")
    if len(info.shape) != 2 or info.dtype not in FLOAT_DTYPES:
        raise ValueError(f"{where}: {info.key} has shape {info.shape}, dtype {info.dtype}; a T5 bias table is a 2-D "
                         "float array (num_buckets, n_heads)")
    rows, heads = info.shape
    if num_buckets is not None and rows != num_buckets:
        raise ValueError(f"{where}: {info.key} has {rows} rows but config relative_attention_num_buckets = "
                         f"{num_buckets}; the table and config.json disagree")
    if n_heads is not None and heads != n_heads:
        raise ValueError(f"{where}: {info.key} has {heads} columns but config num_heads = {n_heads}; the table and "
                         "config.json disagree")
    arr = ckpt.read(info.key)
    return RelativeBias(_as_float64(arr, f"{where}[{info.key}]"), info.key or ckpt.weights_name, info.dtype, stack,
                        num_buckets, max_distance, model_type, reason, **hub)

