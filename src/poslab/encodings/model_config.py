"""RoPE parameters from a Hugging Face model's ``config.json``.

Reads what transformers' rotary embeddings read, by the same rules
(``RotaryEmbeddingConfigMixin.standardize_rope_params`` and the
``_compute_*_parameters`` functions of ``modeling_rope_utils.py``):

- ``rope_theta`` (default 10000), also inside ``rope_parameters`` (transformers 5),
  or ``rotary_emb_base`` (GPT-NeoX / Pythia);
- the head width: ``head_dim``, else ``hidden_size // num_attention_heads``
  (DeepSeek-V2/V3: ``qk_rope_head_dim``, as transformers sets head_dim);
  times ``partial_rotary_factor`` (or GPT-NeoX's ``rotary_pct``); GPT-J's
  ``rotary_dim`` is taken as given;
- the scaling dict ``rope_scaling`` (transformers 4) or ``rope_parameters``
  (transformers 5), its type under ``rope_type`` or the older ``type``;
- ``max_position_embeddings``, and ``original_max_position_embeddings`` inside
  the scaling dict or at the top level (Phi-3 keeps it there; it then wins, as in
  transformers).

Multimodal configs that keep the language model under ``text_config`` are read
from there. Nothing is downloaded; nothing but the JSON file is opened.
"""

from __future__ import annotations

import json
from pathlib import Path

from .rope_scaling import ROPE_TYPES

__all__ = ["ModelConfigError", "read_rope_config", "config_path"]

_SCALING_KEYS = (
    "factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor", "beta_fast", "beta_slow",
    "mscale", "mscale_all_dim", "attention_factor", "truncate", "short_factor", "long_factor",
)


class ModelConfigError(ValueError):
    """A config.json is missing, unreadable or describes RoPE in a way poslab cannot take."""


def config_path(path) -> Path:
    """The ``config.json`` a path names: the file itself, or ``config.json`` inside a model folder.

    Raises
    ------
    ModelConfigError
        No such file, or a folder without ``config.json``.
    """
    path = Path(path)
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelConfigError(f"no config.json in folder {path}; give the model folder or the config file itself")
        return path / "config.json"
    if not path.is_file():
        raise ModelConfigError(f"no config file {path}; give a config.json or a model folder holding one")
    return path


def _number(cfg, key, where, *, integer=False):
    value = cfg[key]
    ok = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok:
        kind = "an integer" if integer else "a number"
        raise ModelConfigError(f"{where}: {key} must be {kind}, got {value!r}")
    return value


def read_rope_config(path) -> dict:
    """RoPE parameters of a model, by their Hugging Face names.

    Parameters
    ----------
    path : str or os.PathLike
        A ``config.json`` or a model folder (a snapshot of the local Hugging
        Face cache works too) that holds one.

    Returns
    -------
    dict
        ``rope_type`` (``"default"`` without scaling) and ``rope_theta``
        (10000.0 if absent) always; ``rotary_dim`` (head width × partial rotary
        factor, an int) when the config gives a head width; and, when present,
        ``head_dim``, ``partial_rotary_factor``, ``max_position_embeddings`` and
        the scaling parameters (``factor``, ``original_max_position_embeddings``,
        ``low_freq_factor``, ``high_freq_factor``, ``beta_fast``, ``beta_slow``,
        ``mscale``, ``mscale_all_dim``, ``attention_factor``, ``truncate``,
        ``short_factor``, ``long_factor``). Other keys of the scaling dict are left out.

    Raises
    ------
    ModelConfigError
        Missing file, invalid JSON, a scaling dict that is not a JSON object,
        per-layer-type RoPE parameters, an unknown rope type (the valid ones are
        listed), conflicting ``rope_scaling`` and ``rope_parameters``, or
        non-numeric sizes.
    """
    file = config_path(path)
    where = str(file)
    try:
        cfg = json.loads(file.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ModelConfigError(f"{where}: not a UTF-8 text file ({exc.reason}); a config.json is JSON") from None
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"{where}: not valid JSON: {exc}") from None
    if not isinstance(cfg, dict):
        raise ModelConfigError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
    if isinstance(cfg.get("text_config"), dict) and not any(
        k in cfg for k in ("hidden_size", "head_dim", "rope_theta", "rope_scaling", "rope_parameters")
    ):
        cfg, where = cfg["text_config"], f"{where} (text_config)"

    scaling = _scaling_dict(cfg, where)
    out: dict = {}
    rope_type = scaling.get("rope_type", scaling.get("type", "default"))
    if rope_type not in ROPE_TYPES:
        hint = " ('su' is the old name of 'longrope'; edit the config)" if rope_type == "su" else ""
        raise ModelConfigError(f"{where}: unknown rope type {rope_type!r}{hint}; valid: {', '.join(ROPE_TYPES)}")
    out["rope_type"] = rope_type

    theta = scaling.get("rope_theta", cfg.get("rope_theta", cfg.get("rotary_emb_base")))
    if theta is None:
        theta = 10000.0
    elif isinstance(theta, bool) or not isinstance(theta, (int, float)):
        raise ModelConfigError(f"{where}: rope_theta must be a number, got {theta!r}")
    out["rope_theta"] = float(theta)

    for key in ("max_position_embeddings", "original_max_position_embeddings"):
        if cfg.get(key) is not None:
            out[key] = _number(cfg, key, where, integer=True)
    for key in _SCALING_KEYS:
        if scaling.get(key) is not None and not (key == "original_max_position_embeddings" and key in out):
            out[key] = tuple(scaling[key]) if isinstance(scaling[key], list) else scaling[key]

    prf = scaling.get("partial_rotary_factor", cfg.get("partial_rotary_factor", cfg.get("rotary_pct")))
    if prf is not None:
        if isinstance(prf, bool) or not isinstance(prf, (int, float)) or not 0 < prf <= 1:
            raise ModelConfigError(f"{where}: partial_rotary_factor must be a number in (0, 1], got {prf!r}")
        out["partial_rotary_factor"] = float(prf)
    if cfg.get("qk_rope_head_dim") is not None:  # DeepSeek-V2/V3: only this part of each head is rotated
        out["head_dim"] = _number(cfg, "qk_rope_head_dim", where, integer=True)
    elif cfg.get("head_dim") is not None:
        out["head_dim"] = _number(cfg, "head_dim", where, integer=True)
    elif cfg.get("hidden_size") is not None and cfg.get("num_attention_heads") is not None:
        out["head_dim"] = _number(cfg, "hidden_size", where, integer=True) // _number(
            cfg, "num_attention_heads", where, integer=True)
    if cfg.get("rotary_dim") is not None:  # GPT-J: the rotated width itself
        out["rotary_dim"] = _number(cfg, "rotary_dim", where, integer=True)
    elif "head_dim" in out:
        out["rotary_dim"] = int(out["head_dim"] * out.get("partial_rotary_factor", 1.0))
    return out


def _scaling_dict(cfg: dict, where: str) -> dict:
    scaling, parameters = cfg.get("rope_scaling"), cfg.get("rope_parameters")
    if scaling and parameters and scaling != parameters:
        raise ModelConfigError(
            f"{where}: has both rope_scaling and rope_parameters, and they differ; keep one "
            "(rope_parameters is the transformers 5 name of rope_scaling)")
    found = scaling or parameters or {}
    name = "rope_scaling" if scaling else "rope_parameters"
    if not isinstance(found, dict):
        raise ModelConfigError(f"{where}: {name} must be a JSON object, got {found!r}")
    nested = [k for k, v in found.items() if isinstance(v, dict)]
    if nested:
        raise ModelConfigError(
            f"{where}: {name} holds per-layer-type RoPE parameters ({', '.join(nested)}); poslab reads one set: "
            "copy the one you want into a config of its own, or give its values inline")
    return found
