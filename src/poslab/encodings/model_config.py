"""RoPE parameters from a Hugging Face model's ``config.json``, read as transformers reads it.

:func:`read_rope_config` is the one reading step: a pure function of the file
(memoised by path, modification time and size) that returns a frozen
:class:`RopeConfig` holding every value poslab takes from the file, where each
came from (a config key, the architecture's default, transformers' default)
and every rule applied. Nothing is downloaded; nothing but the JSON file is
opened; transformers is not needed.

What a config means depends on its architecture (``model_type``): transformers
writes only some keys, and a key left out means the default of the
architecture's config class (GPT-NeoX rotates 25 % of each head, Cohere's
rope_theta is 500000, ...). Those defaults, the key aliases (DBRX ``d_model``,
JetMoE ``kv_channels``, ...) and which top-level keys each class reads were
taken from transformers' config classes and ship as data in
``hf_rope_architectures.json`` (``tests/hf/_rotary_oracle.py`` regenerates it;
a test checks it against the installed transformers, and another checks every
architecture against its rotary module). Rules that live in code rather than
in class defaults are in :data:`ARCHITECTURE_KEYS`, :data:`REFUSED_ARCHITECTURES`
and the reader itself (DBRX, conformer encoders).

Reading order (transformers' ``RotaryEmbeddingConfigMixin`` and the
``_compute_*_parameters`` functions of ``modeling_rope_utils.py``):

- the language part of a multimodal config (``text_config``, or the top level
  of a flat legacy config such as the published Qwen2-VL one);
- the scaling dict: ``rope_scaling`` (transformers 4) or ``rope_parameters``
  (transformers 5), type under ``rope_type`` or the older ``type``; without
  one, the architecture's default dict;
- ``rope_theta``: the dict's, else the top-level key the class reads
  (``rope_theta``; GPT-NeoX ``rotary_emb_base``), else the architecture's
  default, else transformers' 10000;
- ``partial_rotary_factor`` likewise (GPT-NeoX ``rotary_pct``);
- the head width: MLA models (DeepSeek-V2/V3) rotate ``qk_rope_head_dim``;
  else ``head_dim`` (or its alias), else the architecture's rule, else
  ``hidden_size // num_attention_heads``; GPT-J / CodeGen give the rotated
  width ``rotary_dim`` itself;
- ``max_position_embeddings``, and ``original_max_position_embeddings`` inside
  the scaling dict or at the top level (Phi-3 keeps it there; it then wins).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
from pathlib import Path
from typing import Any, Mapping

from .._validation import Integer, check
from .rope_scaling import CONSTRAINTS, ROPE_THETA, ROPE_TYPES, SCALING_KEYS

__all__ = ["ModelConfigError", "RopeConfig", "read_rope_config", "config_path", "ARCHITECTURE_KEYS",
           "REFUSED_ARCHITECTURES", "NO_ROPE_SCHEMES"]

_TABLE = Path(__file__).with_name("hf_rope_architectures.json")


class ModelConfigError(ValueError):
    """A config.json is missing, unreadable or describes RoPE in a way poslab cannot take."""


@functools.lru_cache(maxsize=1)
def _table() -> dict:
    return json.loads(_TABLE.read_text(encoding="utf-8"))


def architectures() -> Mapping[str, dict]:
    """Per model_type: aliases, class defaults and default RoPE parameters (from transformers' config classes)."""
    return _table()["architectures"]


#: Keys only some architectures read (transformers' rotary modules, checked in tests/hf): key -> model_types.
#: The key in any other architecture's config is refused (transformers would ignore it).
ARCHITECTURE_KEYS = {
    "alpha": ("hunyuan_v1_dense", "hunyuan_v1_moe", "hunyuan_vl_text"),  # NTK-alpha, with rope_type dynamic
    "short_mscale": ("phimoe",), "long_mscale": ("phimoe",),  # longrope attention scaling
}
#: Architectures with a rotary module poslab does not read, and why (model_type -> reason).
REFUSED_ARCHITECTURES = {
    "efficientloftr": "a 2-D RoPE over the rows and columns of a feature map (EfficientLoFTR, a keypoint matcher)",
    "eomt_dinov3": "a 2-D RoPE over normalised patch coordinates (DINOv3 backbone)",
    "llama4_vision_model": "a 2-D RoPE over patch rows and columns (Llama 4 vision tower)",
    "musicflamingo": "a RoPE over audio timestamps (seconds), not over token positions",
    "clvp_encoder": "a rotary width max(projection_dim // (2 · num_attention_heads), 32) at a fixed base 10000 "
                    "that no RoPE key of its config describes",
    "cohere_compass_text": "per-layer-type RoPE (its rotary module reads rope_parameters['full_attention'])",
}
# Conformer audio encoders: RoPE over frames with base rotary_embedding_base, when position_embeddings_type is
# 'rotary'; head width hidden_size // (this key).
_CONFORMER_HEADS = {"wav2vec2-conformer": "num_attention_heads", "wav2vec2-bert": "num_attention_heads",
                    "seamless_m4t": "speech_encoder_attention_heads"}

#: Position schemes of well-known architectures without RoPE (the message of a refusal names them).
NO_ROPE_SCHEMES = {
    **dict.fromkeys(("gpt2", "gpt_neo", "openai-gpt", "opt", "bart", "mbart", "biogpt", "gpt_bigcode", "xglm"),
                    "a learned absolute position table"),
    **dict.fromkeys(("bert", "roberta", "distilbert", "xlm-roberta", "camembert", "electra", "albert", "vit",
                     "deit", "clip", "siglip", "whisper"), "a learned absolute position table"),
    **dict.fromkeys(("bloom", "mpt"), "ALiBi (linear biases on attention scores, no rotation)"),
    **dict.fromkeys(("t5", "mt5", "umt5", "longt5", "switch_transformers"),
                    "T5 relative position buckets (a learned bias per bucket and head)"),
}
_POSITION_EMBEDDING_TYPES = {
    "absolute": "a learned absolute position table (position_embedding_type = 'absolute')",
    "relative_key": "learned relative distance embeddings (position_embedding_type = 'relative_key', Shaw et al. 2018)",
    "relative_key_query": "learned relative distance embeddings (position_embedding_type = 'relative_key_query')",
    "relative": "relative position encoding (position_embeddings_type = 'relative')",
}
# Keys of a RoPE dict that do not change the rotary table: not read, with the stated reason (recorded).
_NO_EFFECT = {
    "llama_4_scaling_beta": "a query temperature 1 + β·ln(1 + ⌊p / original_max_position_embeddings⌋) on the "
                            "attention scores (Llama 4 / Ministral), not part of the rotary table",
    "max_position_embeddings": "transformers reads max_position_embeddings from the top level of the config",
}
_MROPE = ("mrope_section", "mrope_interleaved")
# Top-level keys that show a multimodal config is flat (its language model's keys at the top level).
_FLAT_KEYS = ("hidden_size", "num_attention_heads", "head_dim", "rope_theta", "rope_scaling", "rope_parameters")
_HEAD_KEYS = ("hidden_size", "num_attention_heads", "head_dim", "max_position_embeddings", "qk_rope_head_dim")


@dataclasses.dataclass(frozen=True, eq=False)
class RopeConfig:
    """What a config.json says about RoPE, by Hugging Face names, with where each value came from.

    Attributes
    ----------
    path : str
        The config.json read.
    model_type : str or None
        The architecture whose rules were applied (of the language part for a multimodal config).
    part : str or None
        The part of the config read (``text_config``, ``thinker_config.text_config``), None for the top level.
    rope_type : str
        One of :data:`poslab.encodings.rope_scaling.ROPE_TYPES`.
    rope_theta : float
    head_dim : int or None
        Width of a head (MLA: of its rotated part ``qk_rope_head_dim``); None if the config does not say.
    partial_rotary_factor : float or None
        Fraction of the head that is rotated; None: the whole head.
    rotary_dim : int or None
        A rotated width the config gives directly (GPT-J / CodeGen ``rotary_dim``).
    scaling : mapping
        The scaling parameters of the RoPE dict (Hugging Face names; longrope factor lists as
        tuples), every one poslab understands, whether ``rope_type`` uses it or not (an inline
        ``rope_type`` may).
    max_position_embeddings : int or None
        The top-level value (or its alias, or the architecture's default).
    original_max_position_embeddings : int or None
        A top-level value (Phi-3); it wins over the RoPE dict's, as in transformers.
    prf_in_default : bool
        Whether the architecture's unscaled (``default``) RoPE applies ``partial_rotary_factor``;
        transformers' Llama-style models rotate the whole head there (the scaled types always apply it).
    sources : mapping
        Value name -> where it came from: ``config: KEY`` (dotted path in the file),
        ``architecture default (MODEL_TYPE)``, ``transformers default``.
    rules : tuple of str
        Every rule applied beyond reading a key (text part, legacy names, ignored keys).
    mrope_section : tuple of int or None
        M-RoPE's frequency pairs per axis (t, h, w) as the config writes them (``mrope_section``, HunYuan-VL
        ``xdrope_section``); None when it has none. ``kind = "mrope"`` reads it (:mod:`poslab.encodings.mrope`).
    mrope_interleaved : bool or None
        The config's ``mrope_interleaved`` key as written (transformers' modules do not read it: the layout
        is the architecture's), None when absent.
    """

    path: str
    model_type: str | None
    part: str | None
    rope_type: str
    rope_theta: float
    head_dim: int | None
    partial_rotary_factor: float | None
    rotary_dim: int | None
    scaling: Mapping[str, Any]
    max_position_embeddings: int | None
    original_max_position_embeddings: int | None
    prf_in_default: bool
    sources: Mapping[str, str]
    rules: tuple[str, ...]
    mrope_section: tuple[int, ...] | None = None
    mrope_interleaved: bool | None = None


def config_path(path) -> Path:
    """The ``config.json`` a source names, found as ``learned source =`` finds it.

    Anything :func:`poslab.checkpoints.resolve_model` takes: a ``config.json``, a
    weights file or model folder holding one, a Hugging Face cache snapshot or
    ``models--ORG--NAME`` folder, or a Hub id ``ORG/NAME[@REVISION]`` (the local
    cache first; nothing but config.json is ever downloaded).

    Raises
    ------
    ModelConfigError
        Nothing there, a source without config.json, or one whose files lie outside it.
    """
    from ..checkpoints.sources import SourceError, resolve_model

    try:
        source = resolve_model(path)
    except (FileNotFoundError, SourceError) as exc:
        raise ModelConfigError(str(exc)) from None
    if source.config_path is None:
        raise ModelConfigError(f"{source.label} ({source.what}) has no config.json; give the model folder that holds "
                               "one, or the config file itself")
    return source.config_path


def read_rope_config(path) -> RopeConfig:
    """RoPE parameters of a model, read from its config.json as transformers reads them.

    Parameters
    ----------
    path : str or os.PathLike
        A ``config.json``, a model folder, a Hugging Face cache snapshot or
        ``models--ORG--NAME`` folder, or a Hub id (see :func:`config_path`).

    Returns
    -------
    RopeConfig
        Frozen; the same object for the same unchanged file (memoised by path,
        modification time and size).

    Raises
    ------
    ModelConfigError
        Missing file, invalid JSON, a config without RoPE (the message names
        the position scheme it has), per-layer-type or multi-axis RoPE, an
        unknown rope type (the valid ones are listed), a key of the RoPE
        parameters poslab does not understand, a key the architecture ignores,
        conflicting ``rope_scaling`` and ``rope_parameters``, or non-numeric
        or degenerate sizes (``num_attention_heads = 0``, ...).
    """
    file = config_path(path).absolute()
    stat = file.stat()
    return _read_cached(str(file), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _read_cached(file: str, mtime_ns: int, size: int) -> RopeConfig:
    where = file
    try:
        cfg = json.loads(Path(file).read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ModelConfigError(f"{where}: not a UTF-8 text file ({exc.reason}); a config.json is JSON") from None
    except json.JSONDecodeError as exc:
        raise ModelConfigError(f"{where}: not valid JSON: {exc}") from None
    except RecursionError:
        raise ModelConfigError(f"{where}: JSON nested too deeply to be a config.json") from None
    if not isinstance(cfg, dict):
        raise ModelConfigError(f"{where}: expected a JSON object, got {type(cfg).__name__}")
    return _Reader(cfg, where).read()


class _Reader:
    """One reading of one config dict (kept small: every method reads, none writes files)."""

    def __init__(self, cfg: dict, where: str):
        self.top, self.where = cfg, where
        self.sources: dict[str, str] = {}
        self.aliased: dict[str, str] = {}  # standard name -> the alias key the config used
        self.rules: list[str] = []
        self.part: str | None = None
        self.mrope_section: tuple[int, ...] | None = None
        self.mrope_interleaved: bool | None = None

    # ----------------------------------------------------------- helpers
    def fail(self, message: str):
        raise ModelConfigError(f"{self.where}: {message}")

    def key(self, name: str) -> str:
        return f"{self.part}.{name}" if self.part else name

    def number(self, value, name, constraint=None):
        """A size of the config (an integer >= 1 unless ``constraint`` says otherwise), or a refusal in the
        message style of :mod:`poslab._validation` naming the file and key."""
        return check(value, constraint or Integer(minimum=1), self.key(name), where=self.where,
                     fix="a config.json with this value describes no model" if constraint is None else "",
                     error=ModelConfigError)

    # ----------------------------------------------------------- steps
    def read(self) -> RopeConfig:
        cfg, model_type = self.language_part()
        arch = architectures().get(model_type) if model_type else None
        self.check_scheme(cfg, model_type, arch)
        if model_type and arch is None:
            self.rules.append(f"model_type {model_type!r} is not a transformers {_table()['transformers']} "
                              "architecture: generic rules (head_dim or hidden_size // num_attention_heads; "
                              "rope_theta 10000 unless given)")
        elif model_type is None:
            self.rules.append("no model_type: generic rules (head_dim or hidden_size // num_attention_heads; "
                              "rope_theta 10000 unless given)")
        if arch is not None and "per_layer_type" in arch and not self.flat_dict_given(cfg):
            self.per_layer(arch["per_layer_type"])
        if (arch or {}).get("nope_layers") or any(k in cfg for k in ("no_rope_layers", "no_rope_layer_interval")):
            self.rules.append(f"{model_type}: some layers use no RoPE (no_rope_layers, iRoPE); the RoPE layers are "
                              "analysed, the others have no positional rotation")
        cfg = self.apply_aliases(cfg, arch)
        rope, rope_name = self.rope_dict(cfg)
        default_rope = dict(arch.get("rope_parameters") or {}) if arch is not None else {}
        rope_type = self.rope_type(rope, rope_name, default_rope, model_type)
        theta = self.rope_theta(cfg, rope, rope_name, default_rope, arch, model_type)
        prf = self.partial_rotary_factor(cfg, rope, rope_name, default_rope, arch, model_type)
        head_dim, rotary_dim = self.head_width(cfg, arch, model_type)
        if model_type == "moonshine" and cfg.get("encoder_num_attention_heads", 8) != cfg.get("num_attention_heads", 8):
            self.rules.append("moonshine: one rotary table, from the decoder's heads (decoder_num_attention_heads), "
                              "rotates the first dims of encoder and decoder heads alike, as transformers' "
                              "MoonshineRotaryEmbedding does")
        scaling = self.scaling(rope if rope is not None else default_rope, rope_name if rope is not None else None,
                               model_type, head_dim, prf)
        mpe, source = self.size(cfg, "max_position_embeddings", arch, model_type)
        if mpe is not None:
            self.sources["max_position_embeddings"] = source
        original = None
        if cfg.get("original_max_position_embeddings") is not None:  # Phi-3: the top level wins, as in transformers
            original = self.number(cfg["original_max_position_embeddings"], "original_max_position_embeddings")
            self.sources["original_max_position_embeddings"] = f"config: {self.key('original_max_position_embeddings')}"
            if scaling.get("original_max_position_embeddings") not in (None, original):
                self.rules.append(f"original_max_position_embeddings: the top-level {original} wins over "
                                  f"{rope_name}'s {scaling['original_max_position_embeddings']} (as transformers)")
        return RopeConfig(
            path=self.where, model_type=model_type, part=self.part, rope_type=rope_type, rope_theta=float(theta),
            head_dim=head_dim, partial_rotary_factor=prf, rotary_dim=rotary_dim,
            scaling=types.MappingProxyType(scaling), max_position_embeddings=mpe,
            original_max_position_embeddings=original,
            prf_in_default=bool(arch is None or arch.get("prf_in_default") is not False),
            sources=types.MappingProxyType(dict(self.sources)), rules=tuple(self.rules),
            mrope_section=self.mrope_section, mrope_interleaved=self.mrope_interleaved)

    def language_part(self) -> tuple[dict, str | None]:
        cfg = self.top
        model_type = cfg.get("model_type")
        if model_type is not None and not isinstance(model_type, str):
            self.fail(f"model_type must be a string, got {model_type!r}")
        composite = _table()["composite"].get(model_type)
        if composite:
            texts = [p for p in composite if p.split(".")[-1] == "text_config"]
            paths = texts or list(composite)
            if len(paths) > 1:
                self.fail(f"model_type {model_type!r} has several rotary parts ({', '.join(paths)}); poslab reads one "
                          "RoPE: copy the part you want into a config.json of its own")
            path = paths[0]
            sub = cfg
            for key in path.split("."):
                sub = sub.get(key) if isinstance(sub, dict) else None
            if isinstance(sub, dict):
                self.part = path
                self.rules.append(f"{model_type}: the rotary part {path} (model_type {composite[path]!r}) is read")
                return sub, sub.get("model_type") or composite[path]
            if path == "text_config" and sub is None and any(k in cfg for k in _FLAT_KEYS):
                # a flat legacy config (the published Qwen2-VL one): transformers builds text_config from the top level
                self.rules.append(f"{model_type}: flat config, its top level is the language part "
                                  f"(model_type {composite[path]!r}), as transformers reads it")
                return cfg, composite[path]
            if sub is None:
                self.part = path
                self.rules.append(f"{model_type}: {path} left out, so it is {model_type}'s default {path} "
                                  f"(model_type {composite[path]!r}), as transformers builds it")
                return dict(_table().get("part_defaults", {}).get(model_type, {}).get(path, {})), composite[path]
            self.fail(f"{path} must be a JSON object, got {sub!r}")
        if isinstance(cfg.get("text_config"), dict) and not any(
                k in cfg for k in ("hidden_size", "head_dim", "rope_theta", "rope_scaling", "rope_parameters")):
            self.part = "text_config"
            self.rules.append("the language part text_config is read (a multimodal config)")
            sub = cfg["text_config"]
            return sub, sub.get("model_type") or model_type
        return cfg, model_type

    def check_scheme(self, cfg: dict, model_type: str | None, arch):
        """Refuse configs whose model uses no RoPE, naming the scheme it has."""
        switches = (arch or {}).get("switches", {})
        alibi = cfg.get("alibi", switches.get("alibi"))
        if alibi is True or (isinstance(cfg.get("attn_config"), dict) and cfg["attn_config"].get("alibi")):
            self.fail(f"this model ({model_type or 'no model_type'}) uses ALiBi (alibi = true), not RoPE: it has "
                      "no rotary frequencies to analyse")
        for key in ("position_embedding_type", "position_embeddings_type"):
            value = cfg.get(key, switches.get(key))
            if value is not None and value != "rotary":
                scheme = _POSITION_EMBEDDING_TYPES.get(value, f"{key} = {value!r}")
                given = "" if key in cfg else f" ({key} left out: {model_type}'s default)"
                learned = 'for a learned table use kind = "learned"' if "learned" in scheme else \
                    "rotary reads RoPE only"
                self.fail(f"this model ({model_type or 'no model_type'}) uses {scheme}{given}, not RoPE; {learned}")
        if model_type in REFUSED_ARCHITECTURES:
            self.fail(f"model_type {model_type!r} uses {REFUSED_ARCHITECTURES[model_type]}; poslab analyses the "
                      "1-D RoPE of token positions and does not read it")
        if model_type in NO_ROPE_SCHEMES:
            hint = ' use kind = "learned" with source = this model' if "learned" in NO_ROPE_SCHEMES[model_type] else ""
            self.fail(f"model_type {model_type!r} uses {NO_ROPE_SCHEMES[model_type]}, not RoPE: it has no rotary "
                      f"frequencies to analyse;{hint or ' nothing in poslab reads it yet'}")
        if model_type in _table()["no_rope"] and model_type not in architectures():
            self.fail(f"model_type {model_type!r} has no rotary embedding in transformers {_table()['transformers']}: "
                      "its positions are not RoPE, so rotary has nothing to read")

    def flat_dict_given(self, cfg: dict) -> bool:
        found = cfg.get("rope_scaling") or cfg.get("rope_parameters")
        return isinstance(found, dict) and not any(isinstance(v, dict) or v is None for v in found.values())

    def per_layer(self, layer_types):
        self.fail(f"per-layer-type RoPE parameters ({', '.join(layer_types)}): this architecture has a different RoPE per layer "
                  "type and poslab reads one; copy the one you want into a config of its own (rope_parameters "
                  "with rope_type and rope_theta) or give its values inline")

    def apply_aliases(self, cfg: dict, arch) -> dict:
        aliases = (arch or {}).get("aliases", {})
        out = dict(cfg)
        for alias, std in aliases.items():
            if alias in cfg:
                if std in cfg and cfg[std] != cfg[alias]:
                    self.fail(f"gives both {self.key(std)} = {cfg[std]!r} and its alias {self.key(alias)} = "
                              f"{cfg[alias]!r}; keep one")
                out[std] = cfg[alias]
                self.aliased[std] = f"config: {self.key(alias)}"
        return out

    def src(self, name: str, std: str) -> str:
        return self.aliased.get(std, f"config: {self.key(name)}")

    def rope_dict(self, cfg: dict):
        scaling, parameters = cfg.get("rope_scaling"), cfg.get("rope_parameters")
        if scaling and parameters and scaling != parameters:
            self.fail("has both rope_scaling and rope_parameters, and they differ; keep one "
                      "(rope_parameters is the transformers 5 name of rope_scaling)")
        found = scaling or parameters
        name = self.key("rope_scaling" if scaling else "rope_parameters")
        if found is None or found == {}:
            return None, name
        if not isinstance(found, dict):
            self.fail(f"{name} must be a JSON object, got {found!r}")
        nested = [k for k, v in found.items() if isinstance(v, dict) or v is None]
        if nested:
            self.per_layer(nested)
        return dict(found), name

    def rope_type(self, rope, name, default_rope, model_type) -> str:
        if rope is not None:
            rope_type = rope.get("rope_type", rope.get("type", "default"))
            if "rope_type" in rope and "type" in rope and rope["type"] != rope["rope_type"]:
                if (rope["type"], rope["rope_type"]) != ("mrope", "default"):
                    self.fail(f"{name} gives type = {rope['type']!r} and rope_type = {rope['rope_type']!r}; keep one")
                # transformers 5 re-saves a legacy Qwen2-VL dict with both keys and reads rope_type
                self.rules.append(f"{name}: type 'mrope' beside rope_type 'default' (a legacy Qwen2-VL dict as "
                                  "transformers 5 re-saves it): default RoPE with mrope_section, as transformers reads it")
            key = "rope_type" if "rope_type" in rope else "type"
            self.sources["rope_type"] = f"config: {name}.{key}" if key in rope else "transformers default"
        else:
            rope_type = default_rope.get("rope_type", "default")
            self.sources["rope_type"] = (f"architecture default ({model_type})" if default_rope
                                         else "transformers default")
        if rope_type == "mrope":  # transformers' Qwen2-VL configs: the legacy name of default RoPE + mrope_section
            self.rules.append("rope type 'mrope' (Qwen2-VL legacy) is default RoPE with mrope_section")
            return "default"
        if rope_type == "axial":
            self.fail("rope_type 'axial': a 2-D RoPE over patch rows and columns (a vision tower), not a RoPE of 1-D "
                      "token positions; analyse it on its patch grid with kind = \"axial_rope\" (axes_dim, "
                      "rope_theta, grid; config = a Qwen-VL vision config)")
        if rope_type not in ROPE_TYPES:
            hint = " ('su' is the old name of 'longrope'; edit the config)" if rope_type == "su" else ""
            self.fail(f"unknown rope type {rope_type!r}{hint}; valid: {', '.join(ROPE_TYPES)}")
        return rope_type

    def top_level(self, cfg, names, std, rope, arch, model_type):
        """A top-level key feeding ``std``: (value, source) or None; refuses a key the architecture ignores."""
        for key in names:
            if key in cfg and cfg[key] is not None:
                if arch is not None:
                    honoured = arch.get("top_level", {}).get(key, [False, False])
                    if not honoured[0 if rope is not None else 1]:
                        reads = [k for k, v in arch.get("top_level", {}).items() if TOP_STD[k] == std and any(v)]
                        self.fail(f"{self.key(key)} = {cfg[key]!r}: transformers' {model_type} ignores this key here"
                                  + (f" (it reads {', '.join(reads)})" if reads else "")
                                  + f"; write {std} inside rope_parameters, or remove it to analyse what "
                                    "transformers computes")
                return cfg[key], self.src(key, std)
        return None

    def rope_value(self, std, top_keys, cfg, rope, name, default_rope, arch, model_type, fallback):
        """(value, source) of ``rope_theta`` / ``partial_rotary_factor``, as transformers' config classes fill
        them: the RoPE dict's, else a top-level key the class reads, else the architecture's default dict (when
        the file has none), else the class's fallback (``default_theta``); None if nothing gives one."""
        if rope is not None and rope.get(std) is not None:
            return rope[std], f"config: {name}.{std}"
        found = self.top_level(cfg, top_keys, std, rope, arch, model_type)
        if found is not None:
            return found
        if rope is None and default_rope.get(std) is not None:
            return default_rope[std], f"architecture default ({model_type})"
        if arch is not None and arch.get(fallback) is not None:
            return arch[fallback], f"architecture default ({model_type})"
        return None

    def rope_theta(self, cfg, rope, name, default_rope, arch, model_type) -> float:
        found = None
        if rope is None or rope.get("rope_theta") is None:
            found = self.special_theta(cfg, model_type, arch)
        found = found or self.rope_value("rope_theta", ("rope_theta", "rotary_emb_base"), cfg, rope, name,
                                         default_rope, arch, model_type, "default_theta")
        theta, source = found or (10000.0, "transformers default")
        theta = self.number(theta, "rope_theta", ROPE_THETA)
        self.sources["rope_theta"] = source
        return theta

    def special_theta(self, cfg, model_type, arch):
        """rope_theta kept outside the RoPE keys: DBRX's attn_config, conformer encoders' rotary_embedding_base."""
        if model_type == "dbrx" and isinstance(cfg.get("attn_config"), dict) \
                and cfg["attn_config"].get("rope_theta") is not None:
            self.rules.append("dbrx: rope_theta is read from attn_config, where the published DBRX config keeps it "
                              "(transformers 5.24's DbrxConfig ignores it and uses 10000)")
            return cfg["attn_config"]["rope_theta"], f"config: {self.key('attn_config.rope_theta')}"
        if model_type in _CONFORMER_HEADS:
            self.rules.append(f"{model_type}: a conformer audio encoder, RoPE over frames with base "
                              "rotary_embedding_base")
            return self.size(cfg, "rotary_embedding_base", arch, model_type)
        return None

    def partial_rotary_factor(self, cfg, rope, name, default_rope, arch, model_type):
        found = self.rope_value("partial_rotary_factor", ("partial_rotary_factor", "rotary_pct"), cfg, rope, name,
                                default_rope, arch, model_type, "partial_rotary_factor")
        if found is None:
            return None
        prf = self.number(found[0], "partial_rotary_factor", CONSTRAINTS["partial_rotary_factor"])
        self.sources["partial_rotary_factor"] = found[1]
        return float(prf)

    def size(self, cfg, name, arch, model_type):
        """(value, source) of a size key: the config's (or its alias'), else the architecture's class default."""
        if cfg.get(name) is not None:
            return self.number(cfg[name], name), self.src(name, name)
        default = (arch or {}).get("fields", {}).get(name)
        if default is not None:
            return default, f"architecture default ({model_type})"
        return None, None

    def head_width(self, cfg, arch, model_type):
        """(head_dim, rotary_dim): the rule transformers' config class follows (probed, in the table), else generic."""
        if model_type in ("gptj", "codegen") or (arch is None and cfg.get("rotary_dim") is not None):
            rd, source = self.size(cfg, "rotary_dim", arch, model_type)
            if rd is None:
                self.fail(f"{model_type} config with rotary_dim null: transformers would build a rotary table as wide "
                          "as the whole hidden_size, which no head uses; give rotary_dim")
            self.sources["rotary_dim"] = source
            hidden, hs = self.size(cfg, "hidden_size", arch, model_type)
            heads, ns = self.size(cfg, "num_attention_heads", arch, model_type)
            head = self.derived(hidden, heads, 1, hs, ns) if hidden is not None and heads is not None else None
            return head, rd
        if arch is None:  # generic: MLA's rotated part, else head_dim, else hidden_size // heads
            for key in ("qk_rope_head_dim", "head_dim"):
                if cfg.get(key) is not None:
                    self.sources["head_dim"] = self.src(key, key)
                    return self.number(cfg[key], key), None
            hidden, hs = self.size(cfg, "hidden_size", None, model_type)
            heads, ns = self.size(cfg, "num_attention_heads", None, model_type)
            if hidden is None or heads is None:
                return None, None
            return self.derived(hidden, heads, 1, hs, ns), None
        rule = arch.get("head", {})
        for key in rule.get("keys", ()):
            if cfg.get(key) is not None:
                self.sources["head_dim"] = self.src(key, key)
                return self.number(cfg[key], key), None
        if rule.get("per_hidden"):
            hidden, hs = self.size(cfg, "hidden_size", arch, model_type)
            heads_key = _CONFORMER_HEADS.get(model_type, "num_attention_heads")
            heads, ns = self.size(cfg, heads_key, arch, model_type)
            if hidden is None or heads is None:
                self.fail(f"no head width: give head_dim, or hidden_size and {heads_key}")
            if rule["per_hidden"] != 1:
                self.rules.append(f"{model_type}: head_dim = {rule['per_hidden']:g} · hidden_size // {heads_key}, "
                                  "as its transformers config class computes it")
            return self.derived(hidden, heads, rule["per_hidden"], hs, ns, heads_key), None
        if rule.get("default") is not None:
            self.sources["head_dim"] = f"architecture default ({model_type})"
            return rule["default"], None
        return None, None

    def derived(self, hidden, heads, per_hidden, hs, ns, heads_key="num_attention_heads") -> int:
        what = "hidden_size" if per_hidden == 1 else f"{per_hidden:g} * hidden_size"
        head = int(per_hidden * hidden) // heads
        if head < 1:
            self.fail(f"{what} // {heads_key} = {int(per_hidden * hidden)} // {heads} = 0: no head width")
        self.sources["head_dim"] = f"{what} // {heads_key} ({hs}; {ns})"
        return head

    def scaling(self, rope, name, model_type, head_dim, prf) -> dict:
        """Every scaling key of the RoPE dict poslab understands; any other key is refused or a stated rule."""
        out = {}
        origin = f"config: {name}" if name else f"architecture default ({model_type})"
        known_architecture = model_type in architectures()
        for key, value in (rope or {}).items():
            if key in ("rope_type", "type", "rope_theta", "partial_rotary_factor") or key in _MROPE \
                    or key == "xdrope_section":
                continue
            if key in _NO_EFFECT:
                self.rules.append(f"{name or 'rope_parameters'}.{key} not read: {_NO_EFFECT[key]}")
                continue
            if key in ARCHITECTURE_KEYS and known_architecture and model_type not in ARCHITECTURE_KEYS[key]:
                readers = {"alpha": "Hunyuan models (NTK-alpha scaling)"}.get(key, "PhiMoE")
                self.fail(f"{name}.{key} is read only by {readers} in transformers; transformers' {model_type} "
                          "ignores it: remove it to analyse what transformers computes")
            if key not in SCALING_KEYS:
                self.fail(f"{name} has a key poslab does not understand: {key!r} = {value!r}; known keys: rope_type, "
                          f"rope_theta, {', '.join(SCALING_KEYS)}, mrope_section, mrope_interleaved, xdrope_section")
            if value is None:
                continue
            out[key] = check(value, CONSTRAINTS[key], f"{name or 'rope_parameters'}.{key}", where=self.where,
                             error=ModelConfigError)
            self.sources[key] = f"{origin}.{key}" if name else origin
        self.mrope(rope or {}, name, head_dim, prf)
        return out

    def mrope(self, rope, name, head_dim, prf):
        section = rope.get("mrope_section")
        if section is None and rope.get("xdrope_section") is not None:  # HunYuan-VL's legacy name
            section = rope["xdrope_section"]
            self.rules.append("xdrope_section is the legacy HunYuan-VL name of mrope_section")
        if section is None:
            if rope.get("mrope_interleaved"):
                self.fail(f"{name}.mrope_interleaved without mrope_section")
            return
        if not isinstance(section, list) or not section or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in section):
            self.fail(f"{name}.mrope_section must be a list of non-negative integers, got {section!r}")
        if head_dim is not None:
            pairs = int(head_dim * (prf or 1.0)) // 2
            if sum(section) != pairs:
                self.fail(f"{name}.mrope_section {section} sums to {sum(section)}, but the head rotates {pairs} "
                          "frequency pairs; they must be equal")
        layout = "interleaved" if rope.get("mrope_interleaved") else "chunked"
        self.mrope_section = tuple(section)
        if rope.get("mrope_interleaved") is not None:
            self.mrope_interleaved = bool(rope["mrope_interleaved"])
        self.rules.append(f"M-RoPE ({layout}, mrope_section {section}): analysed for text tokens, whose t, h and w "
                          "positions are all the token position, so every pair rotates by it as in 1-D RoPE "
                          "(kind = \"mrope\" analyses the (t, h, w) axes on a grid)")


TOP_STD = {"rope_theta": "rope_theta", "rotary_emb_base": "rope_theta", "partial_rotary_factor": "partial_rotary_factor",
           "rotary_pct": "partial_rotary_factor"}
