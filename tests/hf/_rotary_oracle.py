"""The installed transformers as the oracle for RoPE configs (test helper; needs transformers and torch).

- :func:`rotary_classes` enumerates every ``*Rotary*`` module of every architecture
  transformers knows (from ``CONFIG_MAPPING_NAMES`` and the modeling modules), with
  the config class it takes.
- :func:`architecture_table` derives, from transformers' config classes alone, the
  data poslab ships in ``poslab/encodings/hf_rope_architectures.json`` (what a key
  left out of a config.json means, per model_type). ``python tests/hf/_rotary_oracle.py``
  rewrites that file; ``tests/hf/test_rotary_architectures.py`` checks it is current.
- :func:`module_tables` runs a rotary module at positions 0..n−1 and returns its
  cos / sin tables, inverse frequencies and attention scaling.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib
import inspect
import json
import logging
import math
import re
import warnings
from pathlib import Path

import numpy as np

TABLE = Path(__file__).parents[2] / "src" / "poslab" / "encodings" / "hf_rope_architectures.json"

# Standard names (as rotary modules read them) whose aliases / class defaults poslab needs.
SIZE_KEYS = ("hidden_size", "num_attention_heads", "head_dim", "max_position_embeddings", "qk_rope_head_dim")
# Top-level keys transformers' config classes may read into the RoPE parameters.
TOP_LEVEL = {"rope_theta": "rope_theta", "rotary_emb_base": "rope_theta",
             "partial_rotary_factor": "partial_rotary_factor", "rotary_pct": "partial_rotary_factor"}
_SENTINEL = {"rope_theta": 123457.0, "partial_rotary_factor": 0.375}


def quiet():
    """Silence transformers' logging and warnings (configs built with odd values warn a lot)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


@functools.lru_cache(maxsize=1)
def rotary_classes() -> tuple:
    """(module name, class name, class, config class or None) for every rotary module of every architecture.

    A rotary module is an ``nn.Module`` subclass defined in ``transformers.models.X.modeling_X``
    whose name contains ``Rotary``; its config class is the annotation of its ``config``
    argument (None when it takes no config).
    """
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES, model_type_to_module_name

    quiet()
    modules = sorted({model_type_to_module_name(mt) for mt in CONFIG_MAPPING_NAMES})
    out = []
    for mod in modules:
        path = Path(importlib.util.find_spec("transformers").origin).parent / "models" / mod / f"modeling_{mod}.py"
        if not path.is_file() or not re.search(r"class \w*Rotary\w*\(", path.read_text(encoding="utf-8")):
            continue  # no rotary class: do not pay for the import
        module = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and "Rotary" in name and issubclass(cls, torch.nn.Module) \
                    and cls.__module__ == module.__name__:
                ann = inspect.signature(cls.__init__).parameters.get("config")
                cfg = ann.annotation if ann is not None and inspect.isclass(ann.annotation) \
                    and ann.annotation is not inspect.Parameter.empty else None
                out.append((mod, name, cls, effective_config_class(cfg)))
    return tuple(out)


def _sub_configs(cls, prefix=""):
    for key, sub in getattr(cls, "sub_configs", {}).items():
        yield f"{prefix}{key}", sub
        yield from _sub_configs(sub, f"{prefix}{key}.")


def effective_config_class(cls):
    """The config class a rotary module really reads: the language part when it is annotated with a
    container config that has no RoPE of its own (Qwen2-VL's rotary module takes ``text_config``)."""
    if cls is None or not getattr(cls, "sub_configs", None):
        return cls
    own = getattr(_build(cls), "rope_parameters", None)
    if own:
        return cls
    texts = [sub for key, sub in _sub_configs(cls) if key.split(".")[-1] == "text_config"]
    return texts[0] if len(texts) == 1 else cls


def _field_default(cls, name):
    field = getattr(cls, "__dataclass_fields__", {}).get(name)
    if field is None or field.default is dataclasses.MISSING or field.default is None:
        return None
    return field.default


def _build(cls, **kwargs):
    try:
        return cls(**kwargs)
    except Exception:  # noqa: BLE001 - a probe the class refuses tells us nothing
        return None


def _flat(rope_parameters):
    """A flat (not per-layer-type) RoPE dict, or None."""
    if not isinstance(rope_parameters, dict) or any(isinstance(v, dict) or v is None for v in rope_parameters.values()):
        return None
    return rope_parameters


def architecture_entry(cls) -> dict:
    """What a key left out of a config.json of this class means, from transformers' config class alone."""
    base = cls()
    aliases = {alias: std for std, alias in getattr(cls, "attribute_map", {}).items() if std in SIZE_KEYS}
    fields = {}
    for std in SIZE_KEYS:
        name = getattr(cls, "attribute_map", {}).get(std, std)
        value = _field_default(cls, name)
        if isinstance(value, int) and not isinstance(value, bool):
            fields[std] = value
    entry = {"aliases": dict(sorted(aliases.items())), "fields": fields}
    rope = getattr(base, "rope_parameters", None)
    if isinstance(rope, dict) and rope and _flat(rope) is None:
        entry["per_layer_type"] = sorted(k for k, v in rope.items() if isinstance(v, dict) or v is None)
        return entry
    rope = _flat(rope) or {}
    entry["rope_parameters"] = {k: rope[k] for k in sorted(rope) if k != "type"}
    given = _build(cls, rope_parameters={"rope_type": "default"})
    given_rope = _flat(getattr(given, "rope_parameters", None)) or {}
    entry["default_theta"] = given_rope.get("rope_theta", getattr(cls, "default_theta", 10000.0))
    if isinstance(entry["default_theta"], dict):  # per-layer defaults (gemma3-like): not a flat architecture
        entry["default_theta"] = None
    entry["partial_rotary_factor"] = given_rope.get("partial_rotary_factor")
    # which top-level keys the class reads, with and without a rope dict in the file
    top = {}
    for key, std in TOP_LEVEL.items():
        sentinel = _SENTINEL[std]
        with_dict = _flat(getattr(_build(cls, rope_parameters={"rope_type": "default"}, **{key: sentinel}),
                                  "rope_parameters", None)) or {}
        without = _flat(getattr(_build(cls, **{key: sentinel}), "rope_parameters", None)) or {}
        top[key] = [with_dict.get(std) == sentinel, without.get(std) == sentinel]
    entry["top_level"] = {k: v for k, v in top.items() if any(v)}
    return entry


def architecture_table() -> dict:
    """The data of ``hf_rope_architectures.json`` from the installed transformers."""
    import transformers
    from transformers import CONFIG_MAPPING

    quiet()
    configs = {}
    for _mod, _name, _cls, cfg in rotary_classes():
        if cfg is not None and getattr(cfg, "model_type", ""):
            configs[cfg.model_type] = cfg
    composite = {}
    for mt in sorted(CONFIG_MAPPING.keys()):
        cls = CONFIG_MAPPING[mt]
        if mt in configs and getattr(_build(cls), "rope_parameters", None):
            continue  # a RoPE of its own: an architecture, not a container
        found = {k: sub.model_type for k, sub in _sub_configs(cls) if getattr(sub, "model_type", None) in configs}
        if found:
            composite[mt] = dict(sorted(found.items()))
            configs.pop(mt, None)
    table = {mt: architecture_entry(cfg) for mt, cfg in sorted(configs.items())}
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    unconfigured = {mod for mod, _name, _cls, cfg in rotary_classes() if cfg is None}
    other = sorted(mt for mt in CONFIG_MAPPING.keys() if model_type_to_module_name(mt) in unconfigured
                   and mt not in table and mt not in composite)
    no_rope = sorted(mt for mt in CONFIG_MAPPING.keys() if mt not in table and mt not in composite and mt not in other)
    return {"transformers": transformers.__version__, "architectures": table, "composite": composite,
            "other_rotary": other, "no_rope": no_rope}


def module_tables(rot, n: int):
    """Run a rotary module at positions 0..n−1: ((first, second) tables as float64 arrays (n, width), extra).

    Rotary modules return (cos, sin) (GPT-J / CodeGen: (sin, cos)); multimodal ones take position ids of
    shape (3, batch, n), here t = h = w = position (text tokens).
    """
    import torch

    x = torch.zeros(1, n, 8, dtype=torch.float32)
    ids = torch.arange(n)[None]
    try:
        out = rot(x, ids)
    except (RuntimeError, TypeError, IndexError, ValueError):
        out = rot(x, ids[None].expand(3, 1, n))
    first, second = out[0], out[1]
    return tuple(t.detach().double().reshape(-1, n, t.shape[-1])[0].numpy() for t in (first, second))


def match_layout(first, second, inv_freq, attention, atol):
    """Which column layout makes (first, second) equal attention·(cos, sin)(m·inv_freq); (max error, layout).

    Layouts: ``half`` (cat(f, f), rotate_half), ``interleaved`` (each frequency twice in a row),
    ``pairs`` (one column per frequency); order ``cos,sin`` or ``sin,cos``.
    """
    angles = np.arange(first.shape[0], dtype=np.int64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos, sin = attention * np.cos(angles), attention * np.sin(angles)
    layouts = {"half": lambda a: np.concatenate([a, a], 1), "interleaved": lambda a: np.repeat(a, 2, 1),
               "pairs": lambda a: a}
    best = (math.inf, None)
    for name, lay in layouts.items():
        for order, (a, b) in (("cos,sin", (cos, sin)), ("sin,cos", (sin, cos))):
            a, b = lay(a), lay(b)
            if a.shape != first.shape or b.shape != second.shape:
                continue
            err = max(float(np.abs(a - first).max()), float(np.abs(b - second).max()))
            if err < best[0]:
                best = (err, f"{name}/{order}")
    return best


def dumps(table: dict) -> str:
    """The JSON text of the table: one line per architecture, so a diff shows what changed."""
    lines = ["{", f' "transformers": {json.dumps(table["transformers"])},']
    for name in ("architectures", "composite"):
        lines.append(f' "{name}": {{')
        items = list(table[name].items())
        for i, (key, value) in enumerate(items):
            lines.append(f'  {json.dumps(key)}: {json.dumps(value, sort_keys=True)}' + ("," if i < len(items) - 1 else ""))
        lines.append(" },")
    lines.append(f' "other_rotary": {json.dumps(table["other_rotary"])},')
    lines.append(f' "no_rope": {json.dumps(table["no_rope"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    TABLE.write_text(dumps(architecture_table()), encoding="utf-8")
    print(f"wrote {TABLE}")
