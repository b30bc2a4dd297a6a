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

import numpy as np

from .._validation import Integer, Real, check
from .rope_scaling import CONSTRAINTS, ROPE_THETA, ROPE_TYPES, SCALING_KEYS

__all__ = ["ModelConfigError", "RopeConfig", "RopeInventory", "LayerGroup", "NopeTemperature", "read_rope_config",
           "read_rope_inventory", "config_path", "ARCHITECTURE_KEYS", "REFUSED_ARCHITECTURES", "NO_ROPE_SCHEMES",
           "NOPE_LAYER_TYPES"]

_TABLE = Path(__file__).with_name("hf_rope_architectures.json")
_proxy = types.MappingProxyType


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
    "deepseek_v4": "two RoPEs per attention layer (rope_parameters 'main' and 'compress', for the compressed "
                   "key-value stream), not one per layer type",
}
#: Layer types whose attention skips RoPE although the model has one (model_type -> layer type -> why), read in
#: transformers' attention modules (``if self.sliding_window is not None: apply_rotary_pos_emb(...)``).
NOPE_LAYER_TYPES = {
    "cohere2": {"full_attention": "Cohere2Attention rotates only sliding-window layers: full-attention layers "
                                  "use no position encoding"},
    "flint": {"full_attention": "FlintAttention rotates only sliding-window layers: full-attention layers use no "
                                "position encoding"},
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
    layer_type : str or None
        The layer type this RoPE belongs to when the model has one per layer type (``rope_parameters``
        keyed by ``full_attention``, ``sliding_attention``, ...), else None.
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
    layer_type: str | None = None

    def same_rope(self, other: "RopeConfig") -> bool:
        """Whether two readings give the same frequencies (every value that enters them)."""
        keys = ("rope_type", "rope_theta", "head_dim", "partial_rotary_factor", "rotary_dim",
                "max_position_embeddings", "original_max_position_embeddings", "prf_in_default", "mrope_section")
        return all(getattr(self, k) == getattr(other, k) for k in keys) and dict(self.scaling) == dict(other.scaling)

    def describe(self) -> str:
        """One line: rope type, base, widths and scaling parameters (``poslab inspect``, messages)."""
        parts = [f"rope_type {self.rope_type}", f"rope_theta {_fmt(self.rope_theta)}"]
        if self.head_dim is not None:
            parts.append(f"head_dim {self.head_dim}")
        if self.rotary_dim is not None:
            parts.append(f"rotary_dim {self.rotary_dim}")
        if self.partial_rotary_factor is not None:
            parts.append(f"partial_rotary_factor {_fmt(self.partial_rotary_factor)}")
        for k, v in self.scaling.items():
            if k not in ("short_factor", "long_factor"):
                parts.append(f"{k} {_fmt(v)}")
            else:
                parts.append(f"{k} [{len(v)} values]")
        return ", ".join(parts)


def _fmt(v) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return str(v)


@dataclasses.dataclass(frozen=True)
class NopeTemperature:
    """The query temperature of Llama 4's layers without RoPE (``attn_temperature_tuning``).

    Queries at position p are multiplied by 1 + attn_scale · ln(⌊(p + 1) / floor_scale⌋ + 1)
    (transformers ``Llama4TextAttention.forward``: ``log1p(floor((positions + 1) / floor_scale)) *
    attn_scale + 1``; Meta, Llama 4, 2025). Published Llama 4 configs: attn_scale 0.1, floor_scale 8192.
    """

    attn_scale: float
    floor_scale: int

    def scale(self, positions) -> np.ndarray:
        """Query scale at integer ``positions`` (array_like of int, shape (n,)): float64, shape (n,)."""
        p = np.asarray(positions, dtype=np.int64)
        return 1.0 + self.attn_scale * np.log1p(np.floor((p + 1) / self.floor_scale))


@dataclasses.dataclass(frozen=True, eq=False)
class LayerGroup:
    """Layers of one layer type that apply the same RoPE (or none).

    Attributes
    ----------
    layer_type : str or None
        The config's layer type (``layer_types``), None when the config has no layer pattern.
    name : str
        The group's name: the layer type, or ``"TYPE (no RoPE)"`` for the layers of a type that skip RoPE
        while others of the type apply it; ``"all"`` without a layer pattern.
    layers : tuple of int
        Layer indices (0-based).
    rope : RopeConfig or None
        The RoPE these layers apply; None: no RoPE (see ``no_rope``).
    no_rope : str or None
        Why these layers have no RoPE (no positional geometry), None if they have one.
    temperature : NopeTemperature or None
        Llama 4's query temperature on these layers without RoPE, if any.
    attention_window : tuple of (str, int) or None
        The key and value that limit how far these layers attend (``sliding_window`` of
        sliding-attention layers, ``attention_chunk_size`` of Llama 4's chunked layers), when
        the config gives one: distances beyond it never meet in these layers.
    """

    layer_type: str | None
    name: str
    layers: tuple[int, ...]
    rope: RopeConfig | None
    no_rope: str | None
    temperature: NopeTemperature | None
    attention_window: tuple[str, int] | None = None

    @property
    def count(self) -> int:
        return len(self.layers)


@dataclasses.dataclass(frozen=True, eq=False)
class RopeInventory:
    """Every layer of a model and the RoPE it applies, read from config.json as transformers builds the model.

    Attributes
    ----------
    path : str
    model_type : str or None
    part : str or None
        The part of the config read (``text_config``), None for the top level.
    num_hidden_layers : int or None
    groups : tuple of LayerGroup
        In order of first appearance; layers with RoPE and layers without.
    sources : mapping
        Where the layer pattern and NoPE parameters came from (``layer_types``, ``no_rope_layers``, ...).
    rules : tuple of str
        Rules applied reading the layers.
    """

    path: str
    model_type: str | None
    part: str | None
    num_hidden_layers: int | None
    groups: tuple[LayerGroup, ...]
    sources: Mapping[str, str]
    rules: tuple[str, ...]

    @property
    def layer_types(self) -> tuple[str, ...]:
        """Names of the groups that apply RoPE (what ``layer_type =`` selects), in order."""
        return tuple(g.name for g in self.groups if g.rope is not None)

    @property
    def layer_pattern(self) -> tuple[str, ...]:
        """The group name of every layer, by layer index."""
        out = [""] * sum(g.count for g in self.groups)
        for g in self.groups:
            for i in g.layers:
                out[i] = g.name
        return tuple(out)

    def group(self, name: str) -> LayerGroup:
        """The group named ``name`` (ModelConfigError naming the groups otherwise)."""
        for g in self.groups:
            if g.name == name or g.layer_type == name and g.rope is not None:
                return g
        raise ModelConfigError(f"{self.path}: no layer type {name!r}; this config has "
                               f"{self.describe_types()}")

    def describe_types(self) -> str:
        return "; ".join(f"{g.name} ({g.count} layer{'s' if g.count != 1 else ''}: " + (g.rope.describe() if g.rope is not None else "no RoPE")
                         + ")" for g in self.groups)

    def select(self, layer_type: str | None = None) -> RopeConfig:
        """The RoPE of one layer type; without one, the model's only RoPE (memoised: the same object again).

        Rule (stated in ``rope_rules``): when the layer types that apply RoPE all apply the same one (or
        there is one), it is read; layers without RoPE are named, never analysed. Several different RoPEs
        and no ``layer_type``: refused, naming each type and what to write.

        Raises
        ------
        ModelConfigError
            Unknown layer type, a layer type without RoPE, or several RoPEs and no layer_type.
        """
        return _select(self, layer_type)


@functools.lru_cache(maxsize=256)
def _select(self: RopeInventory, layer_type: str | None) -> RopeConfig:
    if True:  # the body of RopeInventory.select
        ropes = [g for g in self.groups if g.rope is not None]
        nope = [g for g in self.groups if g.rope is None]
        if layer_type is not None:
            g = self.group(layer_type)
            if g.rope is None:
                temp = (f"; its query temperature (1 + {_fmt(g.temperature.attn_scale)}·ln(⌊(p+1)/"
                        f"{g.temperature.floor_scale}⌋ + 1)) is in the nope_temperature table of any rotary run "
                        "of this config") if g.temperature else ""
                raise ModelConfigError(f"{self.path}: layer type {layer_type!r} ({g.count} layers) applies no RoPE "
                                       f"({g.no_rope}): it has no positional geometry to analyse{temp}; layer types "
                                       f"with RoPE: {', '.join(self.layer_types) or 'none'}")
            rope, chosen = g.rope, [g]
        else:
            if not ropes:
                raise ModelConfigError(f"{self.path}: no layer applies RoPE ({self.describe_types()})")
            distinct = [g for i, g in enumerate(ropes) if not any(g.rope.same_rope(h.rope) for h in ropes[:i])]
            if len(distinct) > 1:
                raise ModelConfigError(
                    f"{self.path}: this model has a different RoPE per layer type: {self.describe_types()}. Say "
                    f"which to analyse: layer_type = \"{distinct[0].name}\" (or a list, layer_type = ["
                    + ", ".join(f'"{g.name}"' for g in distinct) + "], or \"all\", for one run each)")
            rope, chosen = ropes[0].rope, ropes
        rules = list(rope.rules)
        if len(self.groups) > 1 or nope:
            rules.append("layers: " + "; ".join(
                f"{g.name} {g.count}" + (" (analysed)" if g in chosen else " (no RoPE)" if g.rope is None else "")
                for g in self.groups))
        if layer_type is None and len(ropes) > 1:
            rules.append(f"layer types {', '.join(g.name for g in ropes)} apply the same RoPE: read once")
        for g in nope:
            rules.append(f"{g.name}: {g.count} layers without RoPE ({g.no_rope}), not analysed: no positional "
                         "geometry" + (f"; query temperature 1 + {_fmt(g.temperature.attn_scale)}·ln(⌊(p+1)/"
                                       f"{g.temperature.floor_scale}⌋ + 1) (nope_temperature)"
                                       if g.temperature else ""))
        return dataclasses.replace(rope, rules=tuple(dict.fromkeys(rules)))


def config_path(path) -> Path:
    """The ``config.json`` a source names, found as ``learned source =`` finds it.

    Anything :func:`poslab.checkpoints.resolve_model` takes: a ``config.json``, a
    weights file or model folder holding one, a Hugging Face cache snapshot or
    ``models--ORG--NAME`` folder, or a Hub id ``ORG/NAME[@REVISION]`` (from the
    local cache; nothing is downloaded unless ``HF_HUB_OFFLINE=0`` is set, and
    then only config.json).

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


def read_rope_config(path, layer_type: str | None = None) -> RopeConfig:
    """RoPE parameters of a model, read from its config.json as transformers reads them.

    Parameters
    ----------
    path : str or os.PathLike
        A ``config.json``, a model folder, a Hugging Face cache snapshot or
        ``models--ORG--NAME`` folder, or a Hub id (see :func:`config_path`).
    layer_type : str, optional
        The layer type whose RoPE to read (``full_attention``, ``sliding_attention``,
        ...; see :func:`read_rope_inventory`). None: the model's only RoPE (layer
        types that share one RoPE are read once; layers without RoPE are named in
        ``rules``).

    Returns
    -------
    RopeConfig
        Frozen.

    Raises
    ------
    ModelConfigError
        Missing file, invalid JSON, a config without RoPE (the message names
        the position scheme it has), several RoPEs per layer type and no
        ``layer_type`` (the message names them and what to write), an unknown
        layer type or one without RoPE, multi-axis RoPE, an unknown rope type
        (the valid ones are listed), a key of the RoPE parameters poslab does not
        understand, a key the architecture ignores, conflicting ``rope_scaling``
        and ``rope_parameters``, or non-numeric or degenerate sizes
        (``num_attention_heads = 0``, ...).
    """
    return read_rope_inventory(path).select(layer_type)


def read_rope_inventory(path) -> RopeInventory:
    """Every layer of a model and its RoPE, read from config.json as transformers builds the model.

    The layer pattern is the config's ``layer_types``, else the one the architecture's
    config class builds (Gemma 3's ``sliding_window_pattern``, ModernBERT's
    ``global_attn_every_n_layers``, Llama 4's ``no_rope_layers`` / ``no_rope_layer_interval``);
    per-layer-type RoPE is ``rope_parameters`` keyed by layer type (transformers 5), or
    the legacy keys the config class converts (Gemma 3 ``rope_theta`` / ``rope_local_base_freq`` /
    ``rope_scaling``, ModernBERT ``global_rope_theta`` / ``local_rope_theta``), with
    per-type sizes from ``per_layer_config`` or keys such as Gemma 4's ``global_head_dim``.
    Layers without RoPE (Llama 4 / SmolLM3 ``no_rope_layers``, Cohere 2's full-attention
    layers, a layer type whose RoPE dict is null) are groups with ``rope = None`` and
    the reason, and Llama 4's query temperature.

    Parameters
    ----------
    path : str or os.PathLike
        As :func:`read_rope_config`.

    Returns
    -------
    RopeInventory
        Frozen; the same object for the same unchanged file (memoised by path,
        modification time and size).

    Raises
    ------
    ModelConfigError
        As :func:`read_rope_config`, for any layer type.
    """
    file = config_path(path).absolute()
    stat = file.stat()
    return _read_cached(str(file), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=64)
def _read_cached(file: str, mtime_ns: int, size: int) -> RopeInventory:
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
    return _Reader(cfg, where).inventory()


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
        self.rope_name: str | None = None  # the RoPE dict's name when it is one layer type's

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
    def inventory(self) -> RopeInventory:
        """Every layer of the model: its layer type and the RoPE it applies (None: no RoPE)."""
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
        cfg = self.apply_aliases(cfg, arch)
        n_layers = self.n_layers(cfg, arch, model_type)
        nope = self.nope_layers(cfg, arch, model_type, n_layers)
        types = self.layer_types(cfg, arch, model_type, n_layers, nope)
        if types is not None:
            n_layers = len(types)
        per_type = self.per_type_dicts(cfg, arch, model_type, types)
        inv_sources = dict(self.sources)
        base_rules = list(self.rules)
        if per_type is None:  # one RoPE for every layer
            rope = self.read_flat(cfg, model_type, arch)
            ropes = {t: rope for t in dict.fromkeys(types or ["all"])}
        else:
            ropes = {}
            for t in dict.fromkeys(types):
                entry = per_type.get(t)
                if entry is None:
                    ropes[t] = None
                    continue
                sub = _Reader(self.top, self.where)
                sub.part, sub.rules = self.part, list(base_rules)
                cfg_t, arch_t, name, sources = self.layer_config(cfg, arch, model_type, t, entry, types)
                sub.rope_name = name
                rope = sub.read_flat(cfg_t, model_type, arch_t)
                srcs = dict(rope.sources)
                srcs.update({k: v for k, v in sources.items() if k in srcs})
                ropes[t] = dataclasses.replace(rope, sources=_proxy(srcs), layer_type=t)
        return self.assemble(cfg, arch, model_type, n_layers, types, nope, ropes, per_type, inv_sources, base_rules)

    def read_flat(self, cfg: dict, model_type, arch) -> RopeConfig:
        """One RoPE read from a language part whose RoPE dict is flat (``cfg`` with aliases applied)."""
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

    # ----------------------------------------------------------- layers
    def n_layers(self, cfg, arch, model_type):
        value, source = self.size(cfg, "num_hidden_layers", arch, model_type)
        if value is not None:
            self.sources["num_hidden_layers"] = source
        return value

    def periodic(self, rule: dict, n: int, cfg: dict, what: str) -> list:
        """A layer pattern transformers' config class fills in (probed, shipped in the table)."""
        if "constant" in rule:
            return [rule["constant"]] * n
        period = rule["period"]
        if rule.get("key") and cfg.get(rule["key"]) is not None:
            period = self.number(cfg[rule["key"]], rule["key"])
            self.sources[f"{what} period"] = f"config: {self.key(rule['key'])}"
        out = [rule["special"] if (i + rule["offset"]) % period == 0 else rule["other"] for i in range(n)]
        if rule.get("last") is not None and out:
            out[-1] = rule["last"]
        return out

    def nope_layers(self, cfg, arch, model_type, n_layers):
        """Per layer, True where the layer applies no RoPE (iRoPE ``no_rope_layers``: 0 = no RoPE); None if none."""
        given = cfg.get("no_rope_layers")
        rule = (arch or {}).get("nope_rule")
        if given:  # transformers: an empty list means the default pattern
            if not isinstance(given, list) or not all(v in (0, 1) and not isinstance(v, float) for v in given):
                self.fail(f"{self.key('no_rope_layers')} must be a list of 0 (no RoPE) and 1 (RoPE), got {given!r}")
            if n_layers is not None and len(given) != n_layers:
                self.fail(f"{self.key('no_rope_layers')} has {len(given)} entries for num_hidden_layers = {n_layers}; "
                          "they must be equal")
            self.sources["no_rope_layers"] = f"config: {self.key('no_rope_layers')}"
            return [v == 0 for v in given]
        if rule is None:
            if "no_rope_layer_interval" in cfg or "no_rope_layers" in cfg:
                self.rules.append(f"{self.key('no_rope_layers')} / no_rope_layer_interval not read: transformers' "
                                  f"{model_type or 'generic'} config applies RoPE in every layer")
            return None
        if n_layers is None:
            self.fail("no num_hidden_layers: the layers without RoPE (no_rope_layers) cannot be placed; give it")
        self.sources["no_rope_layers"] = f"architecture default ({model_type}): every " \
            f"{cfg.get(rule.get('key'), rule.get('period'))}th layer (no_rope_layer_interval)"
        return [v == 0 for v in self.periodic(rule, n_layers, cfg, "no_rope_layers")]

    def layer_types(self, cfg, arch, model_type, n_layers, nope):
        """The layer type of every layer: the config's ``layer_types``, else the architecture's pattern."""
        given = cfg.get("layer_types")
        if given is not None:
            if not isinstance(given, list) or not given or not all(isinstance(t, str) for t in given):
                self.fail(f"{self.key('layer_types')} must be a non-empty list of layer type names, got {given!r}")
            if model_type == "dory" and "mlp" in given:  # DoryConfig.__post_init__: (attention, mlp) block pairs
                given, n_layers = given[::2], (n_layers // 2 if n_layers is not None else None)
                self.rules.append("dory: layer_types lists an attention and an mlp block per layer; every second "
                                  "entry and half of num_hidden_layers are the layers, as transformers reads them")
            if n_layers is not None and len(given) != n_layers:
                self.fail(f"{self.key('layer_types')} has {len(given)} entries for num_hidden_layers = {n_layers}; "
                          "they must be equal")
            self.sources["layer_types"] = f"config: {self.key('layer_types')}"
            return list(given)
        if model_type == "llama4_text" and nope is not None:  # Llama4TextConfig: from no_rope_layers
            chunk = cfg.get("attention_chunk_size", 8192)
            self.sources["layer_types"] = f"architecture default ({model_type}): chunked_attention where RoPE " \
                                          "applies and attention_chunk_size is set, else full_attention"
            return ["chunked_attention" if chunk is not None and not off else "full_attention" for off in nope]
        if arch is None or n_layers is None:
            return None
        rule, default = arch.get("layer_types_rule"), arch.get("layer_types")
        if rule is not None:
            self.sources["layer_types"] = f"architecture default ({model_type})"
            return self.periodic(rule, n_layers, cfg, "layer_types")
        if default is not None:
            if len(default) != n_layers:
                self.fail(f"no layer_types, and transformers' {model_type} builds its layer pattern by a rule poslab "
                          f"knows only for {len(default)} layers (num_hidden_layers = {n_layers} here); write "
                          "layer_types (one name per layer) into the config")
            self.sources["layer_types"] = f"architecture default ({model_type})"
            return list(default)
        return None

    def per_type_dicts(self, cfg, arch, model_type, types):
        """Layer type -> (RoPE dict or None, where its keys came from, name), or None for one RoPE in every layer."""
        found = cfg.get("rope_parameters") or cfg.get("rope_scaling")
        which = "rope_parameters" if cfg.get("rope_parameters") else "rope_scaling"
        nested = isinstance(found, dict) and any(isinstance(v, dict) or v is None for v in found.values())
        per_layer = (arch or {}).get("layer_rope")
        if not nested and per_layer is None:
            return None
        if nested and cfg.get("rope_parameters") and cfg.get("rope_scaling") \
                and cfg["rope_parameters"] != cfg["rope_scaling"]:
            self.fail("has both rope_scaling and rope_parameters, and they differ; keep one "
                      "(rope_parameters is the transformers 5 name of rope_scaling)")
        if types is None:
            self.fail(f"{self.key(which)} is given per layer type ({', '.join(found)}) but the config has no "
                      "layer_types saying which layer has which type; add layer_types (one name per layer)")
        out = {}
        if nested:
            for t, d in found.items():
                if d is not None and not isinstance(d, dict):
                    self.fail(f"{self.key(which)}.{t} must be a JSON object or null, got {d!r}")
                name = self.key(f"{which}.{t}")
                out[t] = None if d is None else (dict(d), {k: f"config: {name}.{k}" for k in d}, name)
            missing = [t for t in dict.fromkeys(types) if t not in found]
            if per_layer is not None:  # transformers fills a type the file leaves out with its class default
                for t in missing:
                    if per_layer.get(t) is not None:
                        out[t] = (dict(per_layer[t]), {k: f"architecture default ({model_type})"
                                                       for k in per_layer[t]}, self.key(f"{which}.{t}"))
            return out
        # legacy keys (transformers 4 files): the class's convert_rope_params_to_dict, probed into the table
        legacy_theta, targets = arch.get("legacy_theta", {}), arch.get("legacy_scaling", [])
        if isinstance(found, dict) and found and not targets:
            self.fail(f"{self.key(which)} is one flat dict, but transformers' {model_type} reads RoPE per layer type "
                      f"({', '.join(per_layer)}); write {which} as {{layer type: {{rope_type, rope_theta, ...}}}}")
        if cfg.get("rope_parameters") and not cfg.get("rope_scaling") and found:
            self.fail(f"{self.key('rope_parameters')} is one flat dict, but transformers' {model_type} reads "
                      f"rope_parameters per layer type ({', '.join(per_layer)}); write it as "
                      "{layer type: {rope_type, rope_theta, ...}} (rope_scaling is the legacy flat form)")
        for t, default in per_layer.items():
            if default is None:
                out[t] = None
                continue
            d, src = dict(default), {k: f"architecture default ({model_type})" for k in default}
            if found and t in targets:
                d.update(found)
                src.update({k: f"config: {self.key(which)}.{k}" for k in found})
            for key, ts in legacy_theta.items():
                if t in ts and cfg.get(key) is not None and not (found and t in targets and "rope_theta" in found):
                    d["rope_theta"] = cfg[key]
                    src["rope_theta"] = f"config: {self.key(key)}"
            if "type" in d and "rope_type" not in d:
                d["rope_type"] = d.pop("type")
                src["rope_type"] = src.pop("type")
            out[t] = (d, src, self.key(f"rope_parameters.{t}"))
        used = [k for k, ts in legacy_theta.items() if cfg.get(k) is not None]
        self.rules.append(f"{model_type}: RoPE per layer type built from the legacy keys "
                          f"{', '.join(used + ([which] if found else [])) or '(none: class defaults)'}, "
                          "as transformers' config class converts them")
        return out

    def layer_config(self, cfg, arch, model_type, t, entry, types):
        """The flat config one layer type reads: its RoPE dict and its per-layer overrides (head_dim)."""
        d, sources, name = entry
        drop = {"rope_parameters", "rope_scaling", "layer_types", "per_layer_config",
                *((arch or {}).get("legacy_theta") or {})}
        cfg_t = {k: v for k, v in cfg.items() if k not in drop}
        cfg_t["rope_parameters"] = d
        overrides, where = self.layer_overrides(cfg, arch, model_type, t, types)
        for key, value in overrides.items():
            cfg_t[key] = value
            sources[key] = where[key]
        if arch is None:
            return cfg_t, None, name, sources
        default = ((arch.get("layer_rope") or {}).get(t)) or {}
        arch_t = {k: v for k, v in arch.items() if k not in ("per_layer_type", "layer_rope", "legacy_theta",
                                                              "legacy_scaling", "layer_overrides", "override_keys")}
        arch_t.update(rope_parameters=default, default_theta=default.get("rope_theta"),
                      partial_rotary_factor=default.get("partial_rotary_factor"), top_level={},
                      prf_in_default=(arch.get("prf_in_default") or {}).get(t) is not False)
        if "head_dim" in overrides:
            arch_t["head"] = {**arch_t.get("head", {}), "keys": ["head_dim", *arch_t.get("head", {}).get("keys", [])]}
        return cfg_t, arch_t, name, sources

    def layer_overrides(self, cfg, arch, model_type, t, types):
        """Per-layer-type overrides of sizes (Gemma 4's head_dim 512 on full-attention layers): the config's
        ``per_layer_config``, else the keys that set them (``global_head_dim``), else the class defaults."""
        fields = ("head_dim", "hidden_size", "num_attention_heads", "qk_rope_head_dim", "partial_rotary_factor")
        given = cfg.get("per_layer_config")
        if given is not None:
            if not isinstance(given, dict):
                self.fail(f"{self.key('per_layer_config')} must be a JSON object of layer index -> overrides")
            seen = {}
            for index, overrides in given.items():
                try:
                    layer = int(index)
                except (TypeError, ValueError):
                    layer = index  # a layer type name
                kind = types[layer] if isinstance(layer, int) and 0 <= layer < len(types) else layer
                if kind != t or not isinstance(overrides, dict):
                    continue
                kept = {k: v for k, v in overrides.items() if k in fields}
                if seen and kept != seen:
                    self.fail(f"{self.key('per_layer_config')} gives layers of type {t!r} different sizes "
                              f"({seen} and {kept}); transformers refuses this too")
                seen = kept
            missing = [i for i, kind in enumerate(types) if kind == t and str(i) not in given
                       and f"{i:02d}" not in given and t not in given]
            if seen and missing:
                self.fail(f"{self.key('per_layer_config')} overrides some layers of type {t!r} and not layers "
                          f"{missing}; transformers refuses this too")
            return seen, {k: f"config: {self.key('per_layer_config')} (layer type {t})" for k in seen}
        out, where = {}, {}
        for key, targets in ((arch or {}).get("override_keys") or {}).items():
            for target, field in targets:
                if target == t and cfg.get(key) is not None:
                    out[field], where[field] = cfg[key], f"config: {self.key(key)}"
        for field, value in (((arch or {}).get("layer_overrides") or {}).get(t) or {}).items():
            if field not in out:
                out[field], where[field] = value, f"architecture default ({model_type}, layer type {t})"
        return out, where

    def assemble(self, cfg, arch, model_type, n_layers, types, nope, ropes, per_type, sources, rules):
        """The inventory: groups of layers with one RoPE (or none), in order of first appearance."""
        if types is None:
            types = ["all"] * (n_layers or 0) if nope is not None else None
        if nope is not None and types is not None and len(nope) != len(types):
            self.fail(f"no_rope_layers has {len(nope)} entries and layer_types {len(types)}; they must be equal")
        off_types = NOPE_LAYER_TYPES.get(model_type, ())
        groups: dict[str, dict] = {}
        for i, t in enumerate(types if types is not None else []):
            rope = ropes.get(t)
            why = None
            if rope is None:
                why = (f"{self.key('rope_parameters')}.{t} is null: transformers builds no rotary table for it"
                       if per_type is not None and t in per_type else
                       f"no RoPE parameters for layer type {t!r}: transformers builds no rotary table for it")
            elif nope is not None and nope[i]:
                why = "no_rope_layers = 0: the layer skips RoPE (iRoPE)"
            elif t in off_types:
                why = off_types[t]
            key = (t, why is None)
            g = groups.setdefault(key, {"layers": [], "rope": None if why else rope, "why": why, "type": t,
                                        "irope": why is not None and rope is not None and nope is not None
                                        and nope[i]})
            g["layers"].append(i)
        temperature = None
        tune = (arch or {}).get("nope_temperature")
        if tune is not None and any(g["irope"] for g in groups.values()):
            values = {}
            for key in ("attn_temperature_tuning", "attn_scale", "floor_scale"):
                if cfg.get(key) is not None:
                    values[key], sources[f"nope.{key}"] = cfg[key], f"config: {self.key(key)}"
                else:
                    values[key], sources[f"nope.{key}"] = tune[key], f"architecture default ({model_type})"
            if values["attn_temperature_tuning"]:  # Llama4TextAttention: on layers without RoPE only
                temperature = NopeTemperature(
                    attn_scale=float(self.number(values["attn_scale"], "attn_scale", Real(minimum=0))),
                    floor_scale=int(self.number(values["floor_scale"], "floor_scale")))
        out = []
        for (t, has_rope), g in groups.items():
            name = t if has_rope or (t, True) not in groups else f"{t} (no RoPE)"
            window = None
            if "sliding" in t and isinstance(cfg.get("sliding_window"), int):
                window = ("sliding_window", cfg["sliding_window"])
            elif "chunked" in t and isinstance(cfg.get("attention_chunk_size", 8192 if model_type == "llama4_text"
                                                       else None), int):
                window = ("attention_chunk_size", cfg.get("attention_chunk_size", 8192))
            out.append(LayerGroup(layer_type=g["type"], name=name, layers=tuple(g["layers"]), rope=g["rope"],
                                  no_rope=g["why"], temperature=temperature if g["irope"] else None,
                                  attention_window=window))
        if types is None:  # no layer pattern: one group for every layer
            rope = ropes["all"]
            out = [LayerGroup(layer_type=None, name="all", layers=tuple(range(n_layers)) if n_layers else (),
                              rope=rope, no_rope=None, temperature=None)]
        return RopeInventory(path=self.where, model_type=model_type, part=self.part, num_hidden_layers=n_layers,
                             groups=tuple(out), sources=_proxy({**self.sources, **sources}),
                             rules=tuple(dict.fromkeys(self.rules)))

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
        name = self.rope_name or self.key("rope_scaling" if scaling else "rope_parameters")
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
