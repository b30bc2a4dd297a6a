"""Multimodal RoPE (M-RoPE): one head's frequency pairs shared among the t, h and w axes of a video grid.

A token of a vision-language model has three position ids (t, h, w); text
tokens have t = h = w = their position. Every frequency pair of the head
turns with one of the three, and ``mrope_section`` = [s_t, s_h, s_w] says
how many pairs each axis gets (the frequencies themselves are the 1-D RoPE's,
rope_theta^(−2i/rotary_dim), so scaled rope types apply as in
:mod:`poslab.encodings.rotary`). Two layouts:

- ``chunked`` (Qwen2-VL, Qwen2.5-VL; transformers' ``Qwen2VLRotaryEmbedding``):
  contiguous blocks, pairs 0 .. s_t − 1 turn with t, the next s_h with h, the
  last s_w with w ([16, 24, 24]: 0–15 t, 16–39 h, 40–63 w);
- ``interleaved`` (Qwen3-VL, Qwen3.5; ``Qwen3VLTextRotaryEmbedding``, MRoPE-Interleave):
  pair j turns with h if j mod 3 = 1 and j < 3·s_h, with w if j mod 3 = 2 and
  j < 3·s_w, and with t otherwise ([24, 20, 20] over 64 pairs: 24 / 20 / 20).

Which layout a config means is its architecture's (transformers' modules do
not read the ``mrope_interleaved`` key; it is recorded when it disagrees).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import ClassVar, Literal

import numpy as np

from .._validation import Integer
from ..analysis.grid import parse_grid_shape
from .axial import GRID, INT_LIST, AxesResolution, axis_table, check_grid_size, grid_points, parse_axes
from .base import Encoding, ParameterError, TableCost, parameter
from .registry import register
from .rope_scaling import ROPE_THETA, ROPE_TYPES
from .rotary import Rotary, _optional, _scaling

__all__ = ["MRope", "mrope_axes", "MROPE_ARCHITECTURES"]

#: Language models whose M-RoPE poslab reads from a config, checked against their transformers module
#: (tests/hf/test_multi_axis.py): model_type -> (layout, transformers' default mrope_section).
MROPE_ARCHITECTURES = {
    "qwen2_vl_text": ("chunked", (16, 24, 24)),
    "qwen2_5_vl_text": ("chunked", (16, 24, 24)),
    "qwen3_vl_text": ("interleaved", (24, 20, 20)),
    "qwen3_vl_moe_text": ("interleaved", (24, 20, 20)),
    "qwen3_5_text": ("interleaved", (11, 11, 10)),
    "qwen3_5_moe_text": ("interleaved", (11, 11, 10)),
    "paddleocr_vl_text": ("chunked", (16, 24, 24)),
    "cosmos3_edge_text": ("interleaved", (24, 20, 20)),
    "hy_v4_vl_text": ("interleaved", (24, 20, 20)),
    "qwen4_exp_text": ("interleaved", (11, 11, 10)),
}


def mrope_axes(section, n_pairs: int, layout: str) -> np.ndarray:
    """The axis (0 = t, 1 = h, 2 = w) each of ``n_pairs`` frequency pairs turns with.

    Parameters
    ----------
    section : sequence of 3 int
        mrope_section [s_t, s_h, s_w], summing to n_pairs.
    n_pairs : int
    layout : {"chunked", "interleaved"}

    Returns
    -------
    ndarray of int64, shape (n_pairs,)

    Notes
    -----
    chunked: transformers' ``freq.split(mrope_section)`` with block i taking axis i (Qwen2-VL);
    interleaved: t everywhere, then h at j ≡ 1 (mod 3), j < 3·s_h and w at j ≡ 2 (mod 3), j < 3·s_w
    (``Qwen3VLTextRotaryEmbedding.recomposition_frequencies``).
    """
    s_t, s_h, s_w = (int(s) for s in section)
    if s_t + s_h + s_w != n_pairs:
        raise ValueError(f"mrope_section {list(section)} sums to {s_t + s_h + s_w}, but the head rotates {n_pairs} "
                         "frequency pairs; they must be equal")
    if layout == "chunked":
        return np.repeat(np.arange(3), [s_t, s_h, s_w]).astype(np.int64)
    j = np.arange(n_pairs)
    axis = np.zeros(n_pairs, dtype=np.int64)
    axis[(j % 3 == 1) & (j < 3 * s_h)] = 1
    axis[(j % 3 == 2) & (j < 3 * s_w)] = 2
    return axis


@register
@dataclasses.dataclass(frozen=True)
class MRope(Encoding):
    """M-RoPE on a (t, h, w) grid: row p holds a·(cos x θ_i, sin x θ_i) with x the axis pair i turns with.

    Parameters
    ----------
    grid : str or None
        ``"TxHxW"``: the positions are the grid's points in C order (an image is ``"1xHxW"``).
        None: text tokens, t = h = w = the token position (every pair turns as in 1-D RoPE).
    mrope_section : str or None
        Pairs per axis ``"s_t,s_h,s_w"``, summing to the rotated pairs. None: the config's, else its
        architecture's default.
    layout : {"chunked", "interleaved"} or None
        How the pairs are given to the axes (see the module). None: the config's architecture's.
    t_step : int
        Position-id step between consecutive frames (1). Qwen2.5-VL spaces frames by
        second_per_grid_t · tokens_per_second (``get_rope_index``; 2 at 2 fps with temporal
        patches of 2 frames and tokens_per_second 2): frame t has temporal position t · t_step.
    rope_theta, rotary_dim, partial_rotary_factor, rope_type, config, pairing
        As :class:`~poslab.encodings.rotary.Rotary` (the 1-D frequencies, read from the same config).

    Notes
    -----
    A shift of every position id by the same offset (the text before an image, Qwen2.5-VL's time
    scaling aside) turns every pair of both points alike, so it leaves the similarities unchanged: the
    grid starts at (0, 0, 0).
    """

    kind = "mrope"
    keeps_own_dim = True
    path_params = ("config",)
    unset_defaults: ClassVar[dict[str, str]] = {
        "grid": "none: text tokens (t = h = w = token position)",
        "mrope_section": "from config, else its architecture's default",
        "layout": "the config's architecture's (chunked: Qwen2-VL / 2.5-VL; interleaved: Qwen3-VL / 3.5)",
        "rope_theta": "from config, else 10000",
        "rotary_dim": "from config (head_dim x partial_rotary_factor), else the study's dim",
        "config": "none: every value inline",
        "rope_type": "from config, else 'default'",
        "partial_rotary_factor": "from config, else 1",
    }

    grid: str | None = parameter(None, check=GRID, doc='"TxHxW" grid whose points are the positions, in C order '
                                 '(row p = (t·H + h)·W + w; an image is "1xHxW"); n_positions at most T·H·W')
    mrope_section: str | None = parameter(None, check=INT_LIST, doc="pairs per axis t,h,w, e.g. '16,24,24'")
    layout: Literal["chunked", "interleaved"] | None = None
    t_step: int = parameter(1, check=Integer(minimum=1), doc="position-id step between frames (Qwen2.5-VL: "
                                                               "second_per_grid_t x tokens_per_second)")
    rope_theta: float | None = parameter(None, check=_optional(ROPE_THETA))
    rotary_dim: int | None = parameter(None, check=_optional(Integer(minimum=2)))
    partial_rotary_factor: float | None = _scaling("partial_rotary_factor")
    rope_type: Literal[ROPE_TYPES] | None = None  # type: ignore[valid-type]
    config: str | None = None
    pairing: Literal["interleaved", "half"] = "interleaved"

    def _check_params(self):
        if self.grid is None and self.t_step != 1:
            raise ParameterError(f"mrope: t_step = {self.t_step} needs a grid: text tokens have t = h = w = their "
                                 "position")
        if self.grid is not None and len(parse_grid_shape(self.grid)) != 3:
            raise ParameterError(f"mrope: grid must be 'TxHxW' (three axes: an image is '1xHxW'), got {self.grid!r}")
        if self.mrope_section is not None and len(parse_axes(self.mrope_section, "mrope_section")) != 3:
            raise ParameterError(f"mrope: mrope_section must give three numbers s_t,s_h,s_w, got "
                                 f"{self.mrope_section!r}")
        self.rotary()
        _plan(self)

    def rotary(self) -> Rotary:
        """The 1-D RoPE whose frequencies the axes share (same config and inline values)."""
        try:
            return Rotary(rope_theta=self.rope_theta, rotary_dim=self.rotary_dim,
                          partial_rotary_factor=self.partial_rotary_factor, rope_type=self.rope_type,
                          config=self.config, pairing=self.pairing)
        except ParameterError as exc:
            raise ParameterError(str(exc).replace("rotary:", "mrope:", 1)) from None

    def grid_shape(self, n_positions: int) -> tuple[int, ...] | None:
        return parse_grid_shape(self.grid) if self.grid is not None else None

    def resolve(self, dim: int, n_positions: int | None = None) -> AxesResolution:
        """Frequencies, the axis of each pair, and where every value came from, for a study of width ``dim``.

        Raises
        ------
        ValueError
            mrope_section not summing to the rotated pairs, or what :meth:`Rotary.resolve` refuses.
        """
        return _resolve(self, int(dim), None if n_positions is None else int(n_positions))

    def _coords(self, n_positions: int) -> np.ndarray:
        if self.grid is None:
            return np.repeat(np.arange(n_positions, dtype=np.int64)[:, None], 3, axis=1)
        coords = grid_points(parse_grid_shape(self.grid), n_positions)
        coords[:, 0] *= self.t_step
        return coords

    def _check_size(self, n_positions, dim):
        if self.grid is not None:
            check_grid_size(self.label, parse_grid_shape(self.grid), n_positions)
        self.resolve(dim, n_positions)

    def table_cost(self, n_positions, dim):
        width = 2 * len(self.resolve(dim).inv_freq)
        return TableCost(table_dim=width, peak_bytes=24 * int(n_positions) * width)

    def _generate(self, n_positions, dim, rng):
        r = self.resolve(dim, n_positions)
        return axis_table(self._coords(n_positions), r.axis, r.inv_freq, r.attention_scaling, self.pairing)


@functools.lru_cache(maxsize=256)
def _plan(enc: MRope):
    """(section or None, layout, sources, rules) from the inline values and the config."""
    cfg = enc.rotary().read_config()
    sources, rules = {}, []
    arch = None
    if cfg is not None:
        known = cfg.model_type in MROPE_ARCHITECTURES
        from .model_config import architectures

        if not known and cfg.model_type in architectures():
            raise ParameterError(
                f"mrope: config {enc.config}: model_type {cfg.model_type!r} is not a language model whose M-RoPE "
                f"poslab reads ({', '.join(MROPE_ARCHITECTURES)}); its rotary module may split or order the axes "
                "otherwise. Give mrope_section, layout and rope_theta inline without config")
        arch = MROPE_ARCHITECTURES.get(cfg.model_type)
    if enc.mrope_section is not None:
        section, sources["mrope_section"] = parse_axes(enc.mrope_section, "mrope_section"), "inline"
    elif cfg is not None and cfg.mrope_section is not None:
        section, sources["mrope_section"] = cfg.mrope_section, "config: mrope_section"
    elif arch is not None:
        section, sources["mrope_section"] = arch[1], f"architecture default ({cfg.model_type})"
    else:
        section = None
    if section is not None and len(section) != 3:
        raise ParameterError(f"mrope: mrope_section {list(section)} ({sources['mrope_section']}) must have three "
                             "numbers s_t, s_h, s_w")
    if enc.layout is not None:
        layout, sources["layout"] = enc.layout, "inline"
        if arch is not None and arch[0] != enc.layout:
            rules.append(f"layout {enc.layout} given inline; transformers' {cfg.model_type} uses {arch[0]}")
    elif arch is not None:
        layout, sources["layout"] = arch[0], f"architecture ({cfg.model_type})"
        if cfg.mrope_interleaved is not None and cfg.mrope_interleaved != (arch[0] == "interleaved"):
            rules.append(f"config mrope_interleaved = {str(cfg.mrope_interleaved).lower()} not read: transformers' "
                         f"{cfg.model_type} is {arch[0]} whatever the key says")
    elif cfg is not None and cfg.mrope_interleaved is not None:
        layout = "interleaved" if cfg.mrope_interleaved else "chunked"
        sources["layout"] = "config: mrope_interleaved"
    else:
        layout, sources["layout"] = "chunked", "default (Qwen2-VL)"
    return section, layout, sources, tuple(rules)


@functools.lru_cache(maxsize=512)
def _resolve(enc: MRope, dim: int, n_positions: int | None) -> AxesResolution:
    section, layout, sources, rules = _plan(enc)
    coords_max = None
    if n_positions is not None:
        coords_max = int(enc._coords(n_positions).max()) + 1  # dynamic / longrope: transformers' seq_len
    try:
        r = enc.rotary().resolve(dim, coords_max)
    except ValueError as exc:
        raise ValueError(str(exc).replace("rotary:", "mrope:", 1)) from None
    n_pairs = len(r.inv_freq)
    if section is None:
        raise ParameterError("mrope: give mrope_section (pairs per axis t,h,w, e.g. '16,24,24'), or a config with one")
    try:
        axis = mrope_axes(section, n_pairs, layout)
    except ValueError as exc:
        raise ValueError(f"mrope: {exc} ({sources['mrope_section']}; rotary_dim {r.rotary_dim})") from None
    counts = np.bincount(axis, minlength=3)
    if layout == "interleaved" and tuple(counts) != tuple(section):
        rules = (*rules, f"interleaved layout gives t/h/w {'/'.join(map(str, counts))} pairs, not mrope_section "
                         f"{list(section)} (3·s_h or 3·s_w reaches past the last pair), as transformers computes it")
    axis.setflags(write=False)
    all_sources = {**{k: v for k, v in r.sources.items()}, **sources}
    return AxesResolution(axes=("t", "h", "w"), axis=axis, inv_freq=r.inv_freq, attention_scaling=r.attention_scaling,
                          rope_theta=r.rope_theta, layout=layout, sources=types.MappingProxyType(all_sources),
                          rules=tuple((*(x for x in r.rules if not x.startswith("M-RoPE (")), *rules)))
