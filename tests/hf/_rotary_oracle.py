"""The installed transformers as the oracle for RoPE configs (test helper; needs transformers and torch).

- :func:`rotary_cases` enumerates, from transformers itself (``CONFIG_MAPPING_NAMES``
  and the modeling modules), every rotary module of every architecture with the
  config class it reads.
- :func:`architecture_table` derives from transformers' config classes (and, for two
  behaviours, their rotary modules) the data poslab ships in
  ``poslab/encodings/hf_rope_architectures.json``: what a key left out of a
  config.json means, per model_type. ``python tests/hf/_rotary_oracle.py`` rewrites
  that file; ``tests/hf/test_rotary_architectures.py`` checks it is current.
- :func:`module_tables` runs a rotary module at positions 0..n−1 and
  :func:`match_layout` compares its cos / sin tables with poslab's frequencies.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import io
import inspect
import json
import logging
import math
import re
import sys
import warnings
from pathlib import Path

import numpy as np

TABLE = Path(__file__).parents[2] / "src" / "poslab" / "encodings" / "hf_rope_architectures.json"

# Standard names (as rotary modules read them) whose aliases / class defaults poslab needs.
SIZE_KEYS = ("hidden_size", "num_attention_heads", "head_dim", "max_position_embeddings", "qk_rope_head_dim",
             "rotary_dim", "rotary_embedding_base", "speech_encoder_attention_heads", "num_hidden_layers")
# Keys that may set the head width a rotary module reads (probed per class).
HEAD_KEYS = ("head_dim", "qk_rope_head_dim", "kv_channels", "attention_head_dim")
# Top-level keys transformers' config classes may read into the RoPE parameters.
TOP_LEVEL = {"rope_theta": "rope_theta", "rotary_emb_base": "rope_theta",
             "partial_rotary_factor": "partial_rotary_factor", "rotary_pct": "partial_rotary_factor"}
# Keys that switch a model between RoPE and another position scheme.
SWITCHES = ("position_embedding_type", "position_embeddings_type", "alibi")
_SENTINEL = {"rope_theta": 123457.0, "partial_rotary_factor": 0.375}


def quiet():
    """Silence transformers' logging and warnings (configs built with odd values warn a lot)."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity(logging.CRITICAL)
    logging.disable(logging.ERROR)  # a few config classes log errors for the probes below
    logging.getLogger("transformers").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")


def _build(cls, **kwargs):
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return cls(**kwargs)
    except Exception:  # noqa: BLE001 - a probe the class refuses tells us nothing
        return None


def _get(obj, name):
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - heterogeneous configs refuse global per-layer attributes: the global value
        try:
            return obj._getattr_without_heterogeneous_validation(name, None)
        except Exception:  # noqa: BLE001
            return None


def _has_rope(cfg) -> bool:
    return bool(_get(cfg, "rope_parameters")) or _get(cfg, "rotary_embedding_base") is not None


def _accepts(rot_cls, cfg) -> bool:
    if cfg is None:
        return False
    try:
        rot_cls(cfg)
    except Exception:  # noqa: BLE001 - not a config this module reads
        return False
    return True


@functools.lru_cache(maxsize=1)
def rotary_classes() -> tuple:
    """(module name, class name, rotary class, annotated config class or None) for every rotary module.

    A rotary module is an ``nn.Module`` subclass defined in ``transformers.models.X.modeling_X``
    whose name contains ``Rotary``; only modules whose source defines one are imported.
    """
    import torch
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES, model_type_to_module_name

    quiet()
    root = Path(importlib.util.find_spec("transformers").origin).parent / "models"
    out = []
    for mod in sorted({model_type_to_module_name(mt) for mt in CONFIG_MAPPING_NAMES}):
        path = root / mod / f"modeling_{mod}.py"
        if not path.is_file() or not re.search(r"class \w*Rotary\w*\(", path.read_text(encoding="utf-8")):
            continue  # no rotary class: do not pay for the import
        module = importlib.import_module(f"transformers.models.{mod}.modeling_{mod}")
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and "Rotary" in name and issubclass(cls, torch.nn.Module) \
                    and cls.__module__ == module.__name__:
                ann = inspect.signature(cls.__init__).parameters.get("config")
                cfg = ann.annotation if ann is not None and inspect.isclass(ann.annotation) \
                    and ann.annotation is not inspect.Parameter.empty else None
                out.append((mod, name, cls, cfg))
    return tuple(out)


def _module_configs(mod: str):
    from transformers import PreTrainedConfig

    module = importlib.import_module(f"transformers.models.{mod}.configuration_{mod}")
    return [c for c in vars(module).values() if inspect.isclass(c) and issubclass(c, PreTrainedConfig)
            and c.__module__ == module.__name__]


@functools.lru_cache(maxsize=1)
def rotary_cases() -> tuple:
    """(model_type, config class, rotary class, module name) for every config class a rotary module reads.

    The annotated config class when it has a RoPE of its own; otherwise (a container such as
    Qwen2-VL's or Dia's, ``AutoConfig``, no annotation) each config class of the model's
    configuration module that has RoPE parameters and that the rotary module accepts.
    Rotary modules no config class drives (a config with no model_type cannot name them)
    come back with model_type "".
    """
    out = []
    for mod, name, cls, annotated in rotary_classes():
        if annotated is not None and getattr(annotated, "model_type", "") and _accepts(cls, _build(annotated)) \
                and not any(_has_rope(_build(sub)) for _key, sub in _sub_configs(annotated)):
            out.append((annotated.model_type, annotated, cls, mod))
            continue
        if _is_config(annotated) and getattr(annotated, "sub_configs", None):  # a container: the parts it reads
            parts = [(key, sub) for key, sub in _sub_configs(annotated) if getattr(sub, "model_type", "")
                     and _accepts(cls, _build(sub))]
            texts = [(key, sub) for key, sub in parts if key.split(".")[-1] == "text_config"]
            found = list(dict.fromkeys(sub for _key, sub in (texts or parts)))
        else:
            found = []
        if not found:  # AutoConfig parts, no annotation: the model's own config classes that the module reads
            found = [c for c in _module_configs(mod) if getattr(c, "model_type", "")
                     and not getattr(c, "sub_configs", None) and _accepts(cls, _build(c))]
        for cfg_cls in found:
            out.append((cfg_cls.model_type, cfg_cls, cls, mod))
        if not found:
            out.append(("", annotated, cls, mod))
    return tuple(out)


def _is_config(cls) -> bool:
    from transformers import PreTrainedConfig

    return inspect.isclass(cls) and issubclass(cls, PreTrainedConfig)


def _flat(rope_parameters):
    """A flat (not per-layer-type) RoPE dict, or None."""
    if not isinstance(rope_parameters, dict) or any(isinstance(v, dict) or v is None for v in rope_parameters.values()):
        return None
    return rope_parameters


def effective_head(cfg):
    """The head width a rotary module reads: ``head_dim``, else hidden_size // num_attention_heads."""
    head = _get(cfg, "head_dim")
    if isinstance(head, int) and head:
        return head
    hidden, heads = _get(cfg, "hidden_size"), _get(cfg, "num_attention_heads")
    return hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads else None


def head_rule(cls) -> dict:
    """How the class derives the head width: keys that set it, else a multiple of hidden / heads, else a constant."""
    base = _build(cls)
    head0, hidden, heads = effective_head(base), _get(base, "hidden_size"), _get(base, "num_attention_heads")
    keys = [k for k in HEAD_KEYS if effective_head(_build(cls, **{k: 24})) == 24]
    if len(keys) > 1:  # several keys set it: the one that wins when all are given comes first
        probe = {k: 24 + 2 * i for i, k in enumerate(keys)}
        winner = effective_head(_build(cls, **probe))
        keys.sort(key=lambda k: probe[k] != winner)
    rule = {"keys": keys}
    if isinstance(hidden, int) and isinstance(heads, int) and heads:
        # head = per_hidden · hidden_size // heads: probed at hidden sizes that divide evenly
        head1 = effective_head(_build(cls, hidden_size=64 * heads))
        head2 = effective_head(_build(cls, hidden_size=128 * heads))
        if head1 and head2 and head2 == 2 * head1:
            rule["per_hidden"] = head1 / 64
    if "per_hidden" not in rule and head0:
        rule["default"] = head0
    return rule


def prf_in_default(cfg_cls, rot_cls):
    """Whether the architecture's default (unscaled) RoPE applies partial_rotary_factor; None if not probed."""
    widths = []
    for prf in (1.0, 0.5):
        cfg = _build(cfg_cls, rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                                               "partial_rotary_factor": prf})
        try:
            widths.append(len(rot_cls(cfg).inv_freq))
        except Exception:  # noqa: BLE001
            return None
    return widths[1] < widths[0]


def architecture_entry(cls, rot_cls=None) -> dict:
    """What a key left out of a config.json of this class means, from transformers' config class alone."""
    base = cls()
    amap = getattr(cls, "attribute_map", {})
    aliases = {alias: std for std, alias in amap.items() if std in SIZE_KEYS}
    fields = {}
    for std in SIZE_KEYS:
        value = _get(base, std)
        if isinstance(value, int) and not isinstance(value, bool):
            fields[std] = value
    entry = {"aliases": dict(sorted(aliases.items())), "fields": fields, "head": head_rule(cls)}
    nope = _get(base, "no_rope_layers")
    if isinstance(nope, list) and 0 in nope:  # iRoPE: some layers have no RoPE (Llama 4, SmolLM3)
        entry["nope_layers"] = True
    switches = {k: _get(base, k) for k in SWITCHES if _get(base, k) is not None}
    if switches:
        entry["switches"] = switches
    if isinstance(nope, list) and 0 in nope:
        entry["nope_rule"] = layer_rule(cls, "no_rope_layers")
        temperature = {k: _get(base, k) for k in ("attn_temperature_tuning", "attn_scale", "floor_scale")}
        if all(v is not None for v in temperature.values()):  # Llama 4's query temperature on NoPE layers
            entry["nope_temperature"] = temperature
    if isinstance(_get(base, "layer_types"), list):
        entry["layer_types_rule"] = layer_rule(cls, "layer_types")
    rope = _get(base, "rope_parameters")
    if isinstance(rope, dict) and rope and _flat(rope) is None:
        entry["per_layer_type"] = sorted(rope)
        entry.update(per_layer_entry(cls, base, rot_cls))
        return entry
    rope = _flat(rope) or {}
    entry["rope_parameters"] = {k: rope[k] for k in sorted(rope) if k != "type"}
    given = _build(cls, rope_parameters={"rope_type": "default"})
    given_rope = _flat(_get(given, "rope_parameters")) or {}
    theta = given_rope.get("rope_theta", getattr(cls, "default_theta", 10000.0))
    entry["default_theta"] = theta if isinstance(theta, (int, float)) else None
    entry["partial_rotary_factor"] = given_rope.get("partial_rotary_factor")
    top = {}
    for key, std in TOP_LEVEL.items():  # which top-level keys the class reads, with and without a rope dict
        sentinel = _SENTINEL[std]
        with_dict = _flat(_get(_build(cls, rope_parameters={"rope_type": "default"}, **{key: sentinel}),
                               "rope_parameters")) or {}
        without = _flat(_get(_build(cls, **{key: sentinel}), "rope_parameters")) or {}
        top[key] = [with_dict.get(std) == sentinel, without.get(std) == sentinel]
    entry["top_level"] = {k: v for k, v in top.items() if any(v)}
    if not rope and isinstance(_get(base, "rope_theta"), (int, float)):  # a plain field the module reads (ESM)
        entry["top_level"]["rope_theta"] = [True, True]
        entry["default_theta"] = float(base.rope_theta)
    if rot_cls is not None:
        entry["prf_in_default"] = prf_in_default(cls, rot_cls)
    return entry


def _periodic(values):
    """(period, offset, special, other, last) with values[i] == special iff (i + offset) % period == 0 (the last
    layer possibly forced to ``special``), the smallest such period; {"constant": v} for one value; None otherwise."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) == 1:
        return {"constant": distinct[0]}
    if len(distinct) != 2:
        return None
    n = len(values)
    for period in range(2, n + 1):
        for offset in range(period):
            for special, other in (distinct, distinct[::-1]):
                want = [special if (i + offset) % period == 0 else other for i in range(n)]
                if want == values:
                    return {"period": period, "offset": offset, "special": special, "other": other, "last": None}
                if want[:-1] == values[:-1] and values[-1] == special:
                    return {"period": period, "offset": offset, "special": special, "other": other, "last": special}
    return None


# Config keys that may set a layer pattern's period (read from transformers' config classes).
PATTERN_KEYS = ("sliding_window_pattern", "global_attn_every_n_layers", "no_rope_layer_interval")


def layer_rule(cls, field):
    """How the class fills ``field`` (layer_types, no_rope_layers) when a config leaves it out: a periodic rule
    checked at 24, 25 and 36 layers, with the key that sets its period; None if it is not periodic."""
    rules = []
    for n in (24, 25, 36):
        values = _get(_build(cls, num_hidden_layers=n), field)
        rules.append(_periodic(values) if isinstance(values, list) and len(values) == n else None)
    if any(r is None for r in rules):
        return None
    forced = [r.pop("last", None) for r in rules]  # a last layer forced to the special type shows at some sizes
    if any(r != rules[0] for r in rules):
        return None
    rule = dict(rules[0])
    if "constant" not in rule:
        rule["last"] = next((f for f in forced if f is not None), None)
    for key in PATTERN_KEYS:
        probes = [_get(_build(cls, num_hidden_layers=24, **{key: p}), field) for p in (3, 4)]
        found = [_periodic(v) if isinstance(v, list) else None for v in probes]
        if all(f is not None and f.get("period") == p for f, p in zip(found, (3, 4))):
            rule["key"] = key
    return rule


_LEGACY_THETA = ("rope_theta", "rope_local_base_freq", "global_rope_theta", "local_rope_theta", "swa_rope_theta",
                 "compress_rope_theta")
_OVERRIDE_FIELDS = ("head_dim", "hidden_size", "num_attention_heads", "qk_rope_head_dim", "max_position_embeddings",
                    "partial_rotary_factor")


def _overrides_by_type(cfg) -> dict:
    """The RoPE-relevant per-layer overrides (``per_layer_config``) of a config, by layer type."""
    per_layer = (cfg.to_dict() if cfg is not None else {}).get("per_layer_config") or {}
    types = _get(cfg, "layer_types") or []
    out = {}
    for index, overrides in per_layer.items():
        kept = {k: v for k, v in overrides.items() if k in _OVERRIDE_FIELDS}
        if kept and int(index) < len(types):
            out.setdefault(types[int(index)], kept)
    return out


def per_layer_entry(cls, base, rot_cls) -> dict:
    """Per-layer-type RoPE of a class: its default dict per type, the legacy keys its config class converts
    (rope_theta per type, where rope_scaling goes), per-type overrides (head_dim) and the keys that set them,
    and per type whether its default RoPE applies partial_rotary_factor."""
    rope = _get(base, "rope_parameters")
    entry = {"layer_rope": {t: ({k: v for k, v in sorted(d.items()) if k != "type"} if isinstance(d, dict) else None)
                            for t, d in sorted(rope.items())},
             "layer_types": list(_get(base, "layer_types") or [])}
    source = inspect.getsource(sys.modules[cls.__module__])
    candidates = sorted(set(_LEGACY_THETA) | set(re.findall(r'kwargs\.(?:pop|get)\("(\w+)"', source)))
    legacy = {}
    for key in candidates:
        got = _get(_build(cls, **{key: 123457.0}), "rope_parameters")
        if isinstance(got, dict):
            hit = sorted(t for t, d in got.items() if isinstance(d, dict) and d.get("rope_theta") == 123457.0)
            if hit:
                legacy[key] = hit
    entry["legacy_theta"] = legacy
    got = _get(_build(cls, rope_scaling={"rope_type": "linear", "factor": 3.0}), "rope_parameters")
    entry["legacy_scaling"] = sorted(t for t, d in (got or {}).items() if isinstance(d, dict) and d.get("factor") == 3.0)
    entry["layer_overrides"] = _overrides_by_type(base)
    keys = {}
    for key in candidates:
        got = _overrides_by_type(_build(cls, **{key: 40}))
        for t, fields in got.items():
            for field, value in fields.items():
                if value == 40 and entry["layer_overrides"].get(t, {}).get(field) != 40:
                    keys.setdefault(key, []).append([t, field])
    entry["override_keys"] = keys
    if rot_cls is not None:
        prf = {}
        try:
            module = rot_cls(base)
        except Exception:  # noqa: BLE001
            module = None
        for t, d in rope.items():
            if not isinstance(d, dict):
                continue
            given = d.get("partial_rotary_factor")
            if given not in (None, 1.0) and getattr(module, f"{t}_inv_freq", None) is not None:  # the class's own factor (it may fix it itself)
                head = _get(base.per_layer_config[t], "head_dim") if entry["layer_overrides"].get(t) else None
                head = head or effective_head(base)
                width = len(getattr(module, f"{t}_inv_freq"))
                prf[t] = width == int(head * given) // 2 and width != head // 2
                continue
            widths = []
            for factor in (1.0, 0.5):
                params = {u: dict(e) for u, e in rope.items() if isinstance(e, dict)}
                params[t] = {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": factor}
                try:
                    widths.append(len(getattr(rot_cls(_build(cls, rope_parameters=params)), f"{t}_inv_freq")))
                except Exception:  # noqa: BLE001 - not probed
                    break
            prf[t] = widths[1] < widths[0] if len(widths) == 2 else None
        entry["prf_in_default"] = prf
    return entry


def _sub_configs(cls, prefix=""):
    for key, sub in getattr(cls, "sub_configs", {}).items():
        yield f"{prefix}{key}", sub
        yield from _sub_configs(sub, f"{prefix}{key}.")


def _instance_parts(inst, prefix=""):
    """(dotted key, model_type) of every sub-config of a config instance (AutoConfig parts resolved)."""
    from transformers import PreTrainedConfig

    for key in getattr(type(inst), "sub_configs", {}) if inst is not None else ():
        sub = _get(inst, key)
        if isinstance(sub, PreTrainedConfig):
            yield f"{prefix}{key}", getattr(sub, "model_type", "")
            yield from _instance_parts(sub, f"{prefix}{key}.")


# Keys of a part that decide its RoPE (what a container's own default part may set differently).
PART_KEYS = ("rope_parameters", "rope_theta", "partial_rotary_factor", "head_dim", "hidden_size",
             "num_attention_heads", "max_position_embeddings", "qk_rope_head_dim")


def _part_defaults(inst, path):
    """The RoPE keys of a container's default part that differ from the part class's own defaults: what a
    config.json that leaves the part out means (transformers builds the part with the container's values)."""
    sub = inst
    for key in path.split("."):
        sub = _get(sub, key)
    own = _build(type(sub))
    mine, theirs = sub.to_dict(), own.to_dict() if own is not None else {}
    if all(mine.get(k) == theirs.get(k) for k in PART_KEYS):
        return {}
    return {k: mine[k] for k in PART_KEYS if mine.get(k) is not None}


def architecture_table() -> dict:
    """The data of ``hf_rope_architectures.json`` from the installed transformers."""
    import transformers
    from transformers import CONFIG_MAPPING

    quiet()
    configs, rotary = {}, {}
    for model_type, cfg_cls, rot_cls, _mod in rotary_cases():
        if model_type:
            configs.setdefault(model_type, cfg_cls)
            rotary.setdefault(model_type, rot_cls)
    composite, part_defaults = {}, {}
    for mt in sorted(CONFIG_MAPPING.keys()):
        cls = CONFIG_MAPPING[mt]
        if mt in configs and _has_rope(_build(cls)):
            continue  # a RoPE of its own: an architecture, not a container
        inst = _build(cls)
        found = {k: mt2 for k, mt2 in _instance_parts(inst) if mt2 in configs}
        if found:
            composite[mt] = dict(sorted(found.items()))
            configs.pop(mt, None)
            defaults = {path: _part_defaults(inst, path) for path in found}
            defaults = {path: d for path, d in defaults.items() if d}
            if defaults:
                part_defaults[mt] = defaults
    table = {mt: architecture_entry(cfg, rotary.get(mt)) for mt, cfg in sorted(configs.items())}
    no_rope = sorted(mt for mt in CONFIG_MAPPING.keys() if mt not in table and mt not in composite)
    unconfigured = sorted({mod for mt, _cfg, _rot, mod in rotary_cases() if not mt})
    return {"transformers": transformers.__version__, "architectures": table, "composite": composite,
            "part_defaults": part_defaults, "no_rope": no_rope, "unconfigured_rotary_modules": unconfigured}


def module_tables(rot, n: int, layer_type: str | None = None):
    """Run a rotary module at positions 0..n−1: its two tables as float64 arrays of shape (n, width).

    Rotary modules return (cos, sin) (GPT-J / CodeGen: (sin, cos); DeepSeek-V2 / Llama 4: one complex
    tensor, returned as (real, imaginary)); multimodal ones take position ids of shape (3, batch, n),
    here t = h = w = position (text tokens); per-layer-type ones take the layer type. Conformer audio encoders take the hidden states and
    return stacked (cos, sin).
    """
    import torch

    x = torch.zeros(1, n, 8, dtype=torch.float32)
    ids = torch.arange(n)[None]
    params = list(inspect.signature(rot.forward).parameters)
    if params[:1] == ["hidden_states"]:
        out = rot(x)
    elif layer_type is not None:  # per-layer-type RoPE (Gemma 3 / 4, ModernBERT, ...): one table per layer type
        out = rot(x, ids, layer_type)
    else:
        try:
            out = rot(x, ids)
        except (RuntimeError, TypeError, IndexError, ValueError):
            out = rot(x, ids[None].expand(3, 1, n))
    if torch.is_tensor(out) and out.is_complex():
        out = (out.real, out.imag)
    first, second = out[0], out[1]
    return tuple(t.detach().double().reshape(-1, n, t.shape[-1])[0].numpy() for t in (first, second))


def module_frequencies(rot, layer_type: str | None = None):
    """(inv_freq as float64, attention_scaling) a rotary module holds (of one layer type: ``{type}_inv_freq``),
    or None (GPT-J / CodeGen keep a table; a layer type without RoPE)."""
    prefix = f"{layer_type}_" if layer_type is not None else ""
    inv = getattr(rot, f"{prefix}inv_freq", None)
    if inv is None:
        return None
    return inv.detach().double().numpy(), float(getattr(rot, f"{prefix}attention_scaling", 1.0))


def match_layout(first, second, inv_freq, attention):
    """How close attention·(cos, sin)(m·inv_freq) comes to the module's tables: (max abs error, layout).

    Layouts: ``half`` (cat(f, f), rotate_half), ``interleaved`` (each frequency twice in a row),
    ``pairs`` (one column per frequency); order ``cos,sin`` or ``sin,cos``.
    """
    angles = np.arange(first.shape[0], dtype=np.int64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]
    cos, sin = attention * np.cos(angles), attention * np.sin(angles)
    layouts = {"half": lambda a: np.concatenate([a, a], 1), "interleaved": lambda a: np.repeat(a, 2, 1),
               "pairs": lambda a: a}
    best = (math.inf, "no layout of this width")
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
    for name in ("architectures", "composite", "part_defaults"):
        lines.append(f' "{name}": {{')
        items = list(table[name].items())
        for i, (key, value) in enumerate(items):
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, sort_keys=True)}" + ("," if i < len(items) - 1 else ""))
        lines.append(" },")
    lines.append(f' "unconfigured_rotary_modules": {json.dumps(table["unconfigured_rotary_modules"])},')
    lines.append(f' "no_rope": {json.dumps(table["no_rope"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    TABLE.write_text(dumps(architecture_table()), encoding="utf-8")
    print(f"wrote {TABLE}")
