"""Axial RoPE: each axis of a (t, h, w) or (h, w) grid rotates its own block of frequency pairs.

Axial RoPE (FLUX ``EmbedND``, HunyuanVideo, the 2-D RoPE of Qwen-VL vision
towers) gives axis ``a`` its own ``axes_dim[a]`` dims, i.e. ``axes_dim[a] / 2``
frequency pairs θ_{a,j} = rope_theta^(−2j / axes_dim[a]), j < axes_dim[a] / 2,
rotated by the point's coordinate on that axis; the blocks are concatenated
in axis order. Row p of the table is grid point p in C order:
a·(cos x_{a(i)} θ_i, sin x_{a(i)} θ_i) for every pair i, as for 1-D RoPE
(:mod:`poslab.encodings.rotary`). Sources: FLUX ``flux/modules/layers.py``
``EmbedND`` / ``rope`` (axes_dim [16, 56, 56], θ 10000); transformers'
``Qwen2VLVisionRotaryEmbedding`` (rope_type ``axial``: head_dim / 4 frequencies
rope_theta^(−2j/(head_dim/2)) shared by h and w, i.e. axes_dim
[head_dim/2, head_dim/2]).

This module also holds what every multi-axis encoding shares
(:class:`AxesResolution`, :func:`grid_points`, :func:`axis_table`), used by
:mod:`.mrope`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
from typing import Any, ClassVar, Literal, Mapping

import numpy as np

from .._validation import AnyOf, Integer, NoneValue, Real, Text
from ..analysis.grid import parse_grid_shape
from .base import Encoding, ParameterError, TableCost, parameter
from .registry import register

__all__ = ["AxialRope", "AxesResolution", "check_grid_size", "grid_points", "axis_table", "parse_axes", "read_axial_config",
           "GRID_PARAMETER_DOC", "AXIAL_CONFIGS"]

GRID_PARAMETER_DOC = ('"TxHxW" or "HxW" grid whose points are the positions, in C order (row p = (t·H + h)·W + w); '
                      'n_positions at most T·H·W; the grid tables need n_positions = T·H·W')
AXIS_NAMES = {1: ("p",), 2: ("h", "w"), 3: ("t", "h", "w")}


def _is_grid(text: str) -> bool:
    try:
        parse_grid_shape(text)
    except ValueError:
        return False
    return True


def _is_int_list(text: str) -> bool:
    try:
        parse_axes(text, "x")
    except ValueError:
        return False
    return True


GRID_TEXT = Text("a grid 'TxHxW' or 'HxW' of positive integers, e.g. '4x16x16'", test=_is_grid)
GRID = AnyOf((GRID_TEXT, NoneValue()))
INT_LIST = AnyOf((Text("comma-separated non-negative integers, e.g. '16,24,24'", test=_is_int_list), NoneValue()))


def parse_axes(text: str, name: str) -> tuple[int, ...]:
    """``"16,56,56"`` -> (16, 56, 56).

    Raises
    ------
    ValueError
        Not 1 to 3 comma-separated non-negative integers.
    """
    parts = [p.strip() for p in str(text).split(",")]
    if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"{name} must be 1 to 3 comma-separated non-negative integers, e.g. '16,24,24'; "
                         f"got {text!r}")
    return tuple(int(p) for p in parts)


def check_grid_size(label: str, grid: tuple[int, ...], n_positions: int) -> None:
    """Refuse a window other than the whole grid (ValueError naming both sizes and what to write).

    Positions on a grid are analysed on the grid, whole: the first n points in C order are a few rows
    and a partial one, and their row index is not a distance (the 1-D stages do not apply to grids).
    """
    total = int(np.prod(grid))
    if n_positions != total:
        what = "patches" if len(grid) == 2 else "points"
        raise ValueError(f"{label}: n_positions={n_positions}, but the {'x'.join(map(str, grid))} grid has {total} "
                         f"{what}, and a grid is analysed whole; set n_positions = {total} (in a study, the entry's "
                         "own n_positions), or give the grid that many points")


def grid_points(grid: tuple[int, ...], n_positions: int) -> np.ndarray:
    """Coordinates of the first ``n_positions`` points of ``grid`` in C order.

    Returns
    -------
    ndarray of int64, shape (n_positions, len(grid)): (t, h, w) or (h, w) per row.
    """
    return np.stack(np.unravel_index(np.arange(n_positions), grid), axis=1).astype(np.int64)


def axis_table(coords: np.ndarray, axis: np.ndarray, inv_freq: np.ndarray, attention_scaling: float,
               pairing: str) -> np.ndarray:
    """Phase pairs of multi-axis RoPE: pair i turns by coords[:, axis[i]] · inv_freq[i].

    Parameters
    ----------
    coords : ndarray of int, shape (n, n_axes)
    axis : ndarray of int, shape (n_pairs,)
        The axis each frequency pair rotates with.
    inv_freq : ndarray of float, shape (n_pairs,)
    attention_scaling : float
    pairing : {"interleaved", "half"}
        Column layout, as :func:`poslab.encodings.apply_rotary`.

    Returns
    -------
    ndarray of shape (n, 2 · n_pairs), float64: angles formed in float64 from int64 coordinates.
    """
    from .rotary import _merge

    angles = coords[:, axis].astype(np.float64) * np.asarray(inv_freq, dtype=np.float64)[None, :]
    return attention_scaling * _merge(np.cos(angles), np.sin(angles), pairing)


@dataclasses.dataclass(frozen=True, eq=False)
class AxesResolution:
    """What a multi-axis RoPE run uses: the frequency of every pair and the axis it turns with.

    Attributes
    ----------
    axes : tuple of str
        Axis names, ("t", "h", "w") or ("h", "w").
    axis : ndarray of int, shape (n_pairs,)
        Index into ``axes`` of the axis pair i rotates with.
    inv_freq : ndarray of float64, shape (n_pairs,)
        Radians per grid step.
    attention_scaling : float
        Factor transformers multiplies cos and sin by.
    rope_theta : float
    layout : str
        How pairs are given to axes: ``axial`` (contiguous blocks, each with its own frequencies),
        ``chunked`` or ``interleaved`` (M-RoPE).
    sources : mapping
        Value name -> where it came from (``inline``, ``config: KEY``, ``architecture default (...)``, ...).
    rules : tuple of str
        Rules applied beyond reading a value.
    """

    axes: tuple[str, ...]
    axis: np.ndarray
    inv_freq: np.ndarray
    attention_scaling: float
    rope_theta: float
    layout: str
    sources: Mapping[str, str]
    rules: tuple[str, ...]

    def pairs_per_axis(self) -> dict[str, int]:
        """Number of frequency pairs each axis rotates with."""
        return {name: int(np.sum(self.axis == a)) for a, name in enumerate(self.axes)}

    def describe(self) -> str:
        """``t: 16 pairs (0-15); h: 24 (16-39); w: 24 (40-63)`` — the pairs of each axis."""
        out = []
        for a, name in enumerate(self.axes):
            idx = np.flatnonzero(self.axis == a)
            if idx.size == 0:
                out.append(f"{name}: 0 pairs")
            elif np.all(np.diff(idx) == 1):
                out.append(f"{name}: {idx.size} pairs ({idx[0]}-{idx[-1]})")
            else:
                step = np.unique(np.diff(idx))
                tail = f"every {step[0]}" if step.size == 1 else "mixed"
                out.append(f"{name}: {idx.size} pairs ({', '.join(map(str, idx[:3]))}, ... {idx[-1]}; {tail})")
        return "; ".join(out)


#: Vision towers whose 2-D RoPE (rope_type ``axial``) poslab reads from a config: those whose transformers
#: module gives h and w each head_dim / 4 pairs with the frequencies rope_theta^(-2j/(head_dim/2)), h's block
#: then w's (Qwen2-VL's ``VisionRotaryEmbedding``), head_dim = ``head_dim``, else hidden_size // heads. Each is
#: checked against its module in tests/hf/test_multi_axis.py. Qwen2-VL's tower takes embed_dim, not hidden_size.
#: Not read (other layouts): Inkling2 (w's block first, interleaved pairs), Pixtral, Gemma 4, Kimi-K2.5,
#: MiniMax-M3-VL, Step-3.5 (other frequency splits), SAM 2 / 3 and EdgeTAM (no head_dim rule).
AXIAL_CONFIGS = (
    "cohere_compass_vision", "dots3_note_vision_encoder", "ernie4_5_vl_moe_vision", "exaone4_5_vision",
    "glm4v_moe_vision", "glm4v_vision", "glm5_next_vision", "glm_ocr_vision", "lfm3_vl_vision",
    "muse_glimmer_vision", "muse_spark_vision", "paddleocr_vl_vision", "qwen2_5_omni_vision_encoder",
    "qwen2_5_vl_vision", "qwen2_vl_vision", "qwen3_5_moe_vision", "qwen3_5_vision", "qwen3_omni_moe_vision_encoder",
    "qwen3_vl_moe_vision", "qwen3_vl_vision", "qwen4_exp_vision", "video_llama_3_vision",
)
_HIDDEN_KEY = {"qwen2_vl_vision": ("embed_dim", 1280)}  # the key and class default of the width split into heads


@functools.lru_cache(maxsize=64)
def read_axial_config(path: str) -> tuple[dict, dict, tuple[str, ...]]:
    """(values, sources, rules) of a vision tower's 2-D RoPE (Qwen-VL style), from its config.json.

    A vision config (``model_type`` one of :data:`AXIAL_CONFIGS`) or a multimodal one holding it as
    ``vision_config``. Values: ``head_dim``, ``rope_theta``.

    Raises
    ------
    ParameterError
        Missing or unreadable file, or a config without a vision tower poslab reads (the message names it).
    """
    from .model_config import _table, architectures, config_path

    try:
        file = config_path(path)
        cfg = json.loads(file.read_text(encoding="utf-8-sig"))
    except (ValueError, OSError) as exc:
        raise ParameterError(f"axial_rope: config: {exc}") from None
    if not isinstance(cfg, dict):
        raise ParameterError(f"axial_rope: config {file}: expected a JSON object")
    rules = []
    model_type = cfg.get("model_type")
    part = None
    if model_type not in AXIAL_CONFIGS:
        parts = {p: t for p, t in _table()["composite"].get(model_type, {}).items() if p.endswith("vision_config")}
        if len(parts) == 1:
            part, vision_type = next(iter(parts.items()))
            sub = cfg
            for key in part.split("."):
                sub = sub.get(key) if isinstance(sub, dict) else None
            cfg = sub if isinstance(sub, dict) else {}
            rules.append(f"{model_type}: its vision tower {part} (model_type {vision_type!r}, as transformers "
                         "builds it) is read" + ("" if sub is not None else ", left out: its defaults"))
            model_type = vision_type  # published parts may name the container's type; transformers builds this
    if model_type not in AXIAL_CONFIGS:
        raise ParameterError(
            f"axial_rope: config {file}: model_type {model_type!r} is not a vision tower whose 2-D RoPE poslab reads "
            f"({', '.join(AXIAL_CONFIGS)}, or a multimodal config holding one); give axes_dim and rope_theta inline")
    arch = architectures().get(model_type, {})
    fields = arch.get("fields", {})
    aliases = {std: alias for alias, std in arch.get("aliases", {}).items()}
    hidden_key, hidden_default = _HIDDEN_KEY.get(model_type, ("hidden_size", fields.get("hidden_size")))
    heads_key = aliases.get("num_attention_heads", "num_attention_heads")
    where = f"config: {part + '.' if part else ''}"
    sources = {}
    if cfg.get("head_dim") is not None:
        head, sources["head_dim"] = cfg["head_dim"], f"{where}head_dim"
    else:
        hidden = cfg.get(hidden_key, hidden_default)
        heads = cfg.get(heads_key, cfg.get("num_attention_heads", fields.get("num_attention_heads")))
        if not isinstance(hidden, int) or not isinstance(heads, int) or heads < 1 or hidden < heads:
            raise ParameterError(f"axial_rope: config {file}: {hidden_key} = {hidden!r}, {heads_key} = {heads!r}: "
                                 "no head width; give head_dim, or axes_dim inline")
        head = hidden // heads
        given = [k for k in (hidden_key, heads_key) if k in cfg]
        sources["head_dim"] = (f"{hidden_key} // {heads_key} ({where}{', '.join(given) or 'none'} given; "
                               f"the rest: architecture default ({model_type}))")
    if not isinstance(head, int) or head < 4:
        raise ParameterError(f"axial_rope: config {file}: head_dim = {head!r}: a 2-D RoPE needs an integer >= 4")
    rope = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if rope.get("rope_theta") is not None:
        theta, sources["rope_theta"] = float(rope["rope_theta"]), f"{where}rope_parameters.rope_theta"
    elif cfg.get("rope_theta") is not None:
        theta, sources["rope_theta"] = float(cfg["rope_theta"]), f"{where}rope_theta"
    else:
        theta = float((arch.get("rope_parameters") or {}).get("rope_theta", arch.get("default_theta", 10000.0)))
        sources["rope_theta"] = f"architecture default ({model_type})"
    kind = rope.get("rope_type", rope.get("type", "axial"))
    if kind not in ("axial", "default"):
        raise ParameterError(f"axial_rope: config {file}: rope_type {kind!r}: the vision tower's 2-D RoPE is 'axial'")
    if head % 4:
        raise ParameterError(f"axial_rope: config {file}: head_dim {head} is not a multiple of 4: h and w each need "
                             "whole frequency pairs")
    rules.append(f"{model_type}: 2-D axial RoPE, head_dim {head}: h and w each rotate head_dim / 4 = {head // 4} "
                 "pairs with the same frequencies rope_theta^(-2j/(head_dim/2)), as its transformers vision rotary")
    return {"head_dim": head, "rope_theta": theta}, sources, tuple(rules)


@register
@dataclasses.dataclass(frozen=True)
class AxialRope(Encoding):
    """Axial RoPE on a grid: each axis rotates its own block of ``axes_dim[a] / 2`` frequency pairs.

    Parameters
    ----------
    grid : str
        ``"TxHxW"`` or ``"HxW"``: the positions are the grid's points in C order (required).
    axes_dim : str or None
        Dims per axis, comma-separated, one per grid axis, each even (FLUX: ``"16,56,56"``). The table has
        sum(axes_dim) columns. None: from ``config`` (head_dim / 2 per axis of a 2-D grid).
    rope_theta : float or None
        Base, > 1. None: the config's, else 10000.
    pairing : {"interleaved", "half"}
        Column layout (permutes columns only).
    config : str or None
        A Qwen-VL vision tower's config.json (or a multimodal config holding one, or anything
        ``learned source =`` takes), whose rope_type is ``axial``.

    Notes
    -----
    Frequencies of axis a: rope_theta^(−2j/axes_dim[a]), j = 0 .. axes_dim[a]/2 − 1 (FLUX ``rope``,
    transformers' ``compute_axial_rope_parameters``). The similarity of two points depends on their
    displacement alone and is the mean over axes, weighted by pairs, of each axis's 1-D RoPE profile.
    """

    kind = "axial_rope"
    keeps_own_dim = True
    path_params = ("config",)
    unset_defaults: ClassVar[dict[str, str]] = {
        "axes_dim": "from config (head_dim / 2 per axis of a 2-D grid)",
        "rope_theta": "from config, else 10000",
        "config": "none: every value inline",
    }

    grid: str = parameter(check=GRID_TEXT, doc=GRID_PARAMETER_DOC)
    axes_dim: str | None = parameter(None, check=INT_LIST, doc="dims per axis, comma-separated, each even, e.g. "
                                                                  "'16,56,56' (FLUX)")
    rope_theta: float | None = parameter(None, check=AnyOf((Real(minimum=1, open_min=True), NoneValue())))
    pairing: Literal["interleaved", "half"] = "interleaved"
    config: str | None = None

    def _check_params(self):
        self.resolve()

    def grid_shape(self, n_positions: int) -> tuple[int, ...]:
        return parse_grid_shape(self.grid)

    def resolve(self, dim: int | None = None, n_positions: int | None = None) -> AxesResolution:
        """The frequencies, axes and their sources (see :class:`AxesResolution`)."""
        return _resolve_axial(self)

    def _check_size(self, n_positions, dim):
        check_grid_size(self.label, self.grid_shape(n_positions), n_positions)

    def table_cost(self, n_positions, dim):
        width = 2 * len(self.resolve().inv_freq)
        return TableCost(table_dim=width, peak_bytes=24 * int(n_positions) * width)

    def _generate(self, n_positions, dim, rng):
        r = self.resolve()
        coords = grid_points(self.grid_shape(n_positions), n_positions)
        return axis_table(coords, r.axis, r.inv_freq, r.attention_scaling, self.pairing)


@functools.lru_cache(maxsize=256)
def _resolve_axial(enc: AxialRope) -> AxesResolution:
    grid = parse_grid_shape(enc.grid)
    sources: dict[str, Any] = {}
    rules: list[str] = []
    values: dict[str, Any] = {}
    if enc.config is not None:
        values, read_sources, read_rules = read_axial_config(enc.config)
        sources.update(read_sources)
        rules += read_rules
    if enc.axes_dim is not None:
        axes_dim = parse_axes(enc.axes_dim, "axes_dim")
        sources["axes_dim"] = "inline"
    elif "head_dim" in values:
        if len(grid) != 2:
            raise ParameterError(f"axial_rope: the config's 2-D RoPE rotates (h, w), but grid {enc.grid!r} has "
                                 f"{len(grid)} axes; give an 'HxW' grid")
        axes_dim = (values["head_dim"] // 2,) * 2
        sources["axes_dim"] = "head_dim / 2 per axis (config)"
    else:
        raise ParameterError("axial_rope: give axes_dim (dims per axis, e.g. '16,56,56') or a config")
    if len(axes_dim) != len(grid):
        raise ParameterError(f"axial_rope: axes_dim {enc.axes_dim or axes_dim} has {len(axes_dim)} axes, but grid "
                             f"{enc.grid!r} has {len(grid)}; give one width per grid axis")
    if any(d % 2 or d < 2 for d in axes_dim):
        raise ParameterError(f"axial_rope: every axes_dim must be even and >= 2 (cos and sin pairs), got "
                             f"{enc.axes_dim or axes_dim}")
    if enc.rope_theta is not None:
        theta, sources["rope_theta"] = enc.rope_theta, "inline"
    elif "rope_theta" in values:
        theta = values["rope_theta"]
    else:
        theta, sources["rope_theta"] = 10000.0, "transformers default"
    inv, axis = [], []
    for a, d in enumerate(axes_dim):
        inv.append(theta ** (-np.arange(0, d, 2, dtype=np.float64) / d))
        axis.append(np.full(d // 2, a))
    inv_freq, axis_idx = np.concatenate(inv), np.concatenate(axis)
    inv_freq.setflags(write=False)
    axis_idx.setflags(write=False)
    return AxesResolution(axes=AXIS_NAMES[len(grid)], axis=axis_idx, inv_freq=inv_freq, attention_scaling=1.0,
                          rope_theta=float(theta), layout="axial", sources=types.MappingProxyType(sources),
                          rules=tuple(rules))
