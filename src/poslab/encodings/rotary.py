"""RoPE-derived position vectors and the rotary rotation itself (Su et al., RoFormer, 2021).

RoPE does not add a vector to the token; it rotates each frequency pair of a
query or key by the angle m·θ_i. The *position vector* of position m is the
phase pair (cos mθ_i, sin mθ_i) for every pair i: the dot product of two such
vectors is Σ_i cos((m − n)θ_i), the relative kernel RoPE induces, so its
similarity profile is the sinusoidal closed form with the same base and width.

What a :class:`Rotary` encoding uses is resolved in one explicit, pure step,
:meth:`Rotary.resolve`, which returns a frozen :class:`RopeResolution`
(frequencies, attention scaling, widths, and where every value came from:
inline, a config key, the architecture's default, transformers' default).
Model configs are read by :func:`poslab.encodings.model_config.read_rope_config`
and the Hugging Face scaling types computed by
:mod:`poslab.encodings.rope_scaling`; the rest of this module only consumes
``inv_freq``.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from typing import Any, ClassVar, Literal, Mapping

import numpy as np

from .._validation import AnyOf, Integer, NoneValue, problem
from .base import Encoding, ParameterError, parameter
from .model_config import RopeConfig, read_rope_config, read_rope_inventory
from .registry import register
from .rope_scaling import (
    CONSTRAINTS,
    DEFAULTS,
    LIST_KEYS,
    ROPE_THETA,
    ROPE_TYPES,
    SCALING_KEYS,
    check_rope_scaling,
    dynamic_rope_theta,
    ntk_alpha_rope_theta,
    rope_inv_freq,
    rope_parameters,
    rope_scaling_keys,
)

__all__ = ["Rotary", "RopeResolution", "rope_inv_freq", "rope_angles", "apply_rotary", "rope_decay_bound"]

def _optional(constraint):
    return AnyOf((constraint, NoneValue()))


def _scaling(name: str):
    """An optional Hugging Face scaling parameter, checked by the one table of :mod:`.rope_scaling`."""
    return parameter(None, check=_optional(CONSTRAINTS[name]))


# Scaling parameters a Rotary takes inline: every Hugging Face scaling key but the per-pair lists
# (config only) and partial_rotary_factor (a field of its own, it sets the rotated width).
_INLINE = tuple(k for k in SCALING_KEYS if k not in LIST_KEYS and k != "partial_rotary_factor")


def rope_angles(positions, inv_freq) -> np.ndarray:
    """Rotation angles m·θ_i in float64 from integer positions.

    Positions are taken as int64 and the product is formed in float64, so
    large positions keep their precision (case C5: in float16, position 1857
    at θ_1 = 10000^(−1/16) rounds 1044.2678 rad to 1045.0, and 70000 is inf).

    Parameters
    ----------
    positions : array_like of int, shape (n,)
    inv_freq : array_like of shape (n_pairs,)

    Returns
    -------
    ndarray of shape (n, n_pairs), radians.

    Raises
    ------
    TypeError
        If positions are not integers.
    """
    positions = np.asarray(positions)
    if positions.dtype.kind not in "iu":
        raise TypeError(f"positions must be integers, got dtype {positions.dtype}")
    return positions.astype(np.int64)[:, None] * np.asarray(inv_freq, dtype=np.float64)[None, :]


def _split(x, pairing):
    if pairing == "interleaved":
        return x[..., 0::2], x[..., 1::2]
    half = x.shape[-1] // 2
    return x[..., :half], x[..., half:]


def _merge(a, b, pairing):
    out = np.empty(a.shape[:-1] + (2 * a.shape[-1],), dtype=np.result_type(a, b))
    if pairing == "interleaved":
        out[..., 0::2], out[..., 1::2] = a, b
    else:
        half = a.shape[-1]
        out[..., :half], out[..., half:] = a, b
    return out


def apply_rotary(x, positions, inv_freq, *, pairing: str = "interleaved") -> np.ndarray:
    """Rotate vectors by RoPE: each pair (x_a, x_b) at position m by the angle m·θ_i.

    Parameters
    ----------
    x : array_like of shape (n, rotary_dim)
        Queries or keys, one row per position.
    positions : array_like of int, shape (n,)
    inv_freq : array_like of shape (rotary_dim // 2,)
    pairing : {"interleaved", "half"}
        ``interleaved`` pairs dims (2i, 2i+1) as in the RoFormer paper and
        GPT-J; ``half`` pairs dims (i, i + d/2) as in GPT-NeoX and Hugging
        Face's ``rotate_half``. Frequency i goes with pair i in both.

    Returns
    -------
    ndarray of shape (n, rotary_dim), float64.
    """
    x = np.asarray(x, dtype=np.float64)
    angles = rope_angles(positions, inv_freq)
    if x.shape[-1] != 2 * angles.shape[-1]:
        raise ValueError(f"x has width {x.shape[-1]}, expected 2 * len(inv_freq) = {2 * angles.shape[-1]}")
    a, b = _split(x, pairing)
    cos, sin = np.cos(angles), np.sin(angles)
    return _merge(a * cos - b * sin, a * sin + b * cos, pairing)


def rope_decay_bound(inv_freq, distance, *, chunk: int = 2048) -> np.ndarray:
    """RoFormer's long-term decay bound: the relative upper bound of |q·k| against distance.

    (1 / (d/2)) · Σ_{j=1}^{d/2} |S_j|, with S_j = Σ_{l=0}^{j−1} e^{i·k·θ_l}
    (Su et al. 2021, RoFormer, section 3.4.3 and its figure 2): Abel summation
    bounds |Σ_l h_l e^{i k θ_l}| by max_l |h_{l+1} − h_l| · Σ_j |S_j|. At k = 0 it is
    (d/2 + 1) / 2; it decays with k for any decreasing frequencies.

    Parameters
    ----------
    inv_freq : array_like of shape (d/2,)
        Frequencies θ_l in radians per position, in pair order.
    distance : array_like of int, shape (n,)
        Distances k in positions.
    chunk : int
        Distances evaluated at once (memory ~ chunk · d/2 complex numbers).

    Returns
    -------
    ndarray of shape (n,), float64, dimensionless.
    """
    distance = np.asarray(distance)
    inv_freq = np.asarray(inv_freq, dtype=np.float64)
    out = np.empty(distance.shape[0], dtype=np.float64)
    for start in range(0, distance.shape[0], chunk):
        angles = rope_angles(distance[start:start + chunk], inv_freq)
        partial = np.cumsum(np.cos(angles), axis=1) + 1j * np.cumsum(np.sin(angles), axis=1)
        out[start:start + chunk] = np.abs(partial).mean(axis=1)
    return out


@dataclasses.dataclass(frozen=True, eq=False)
class RopeResolution:
    """Everything a :class:`Rotary` run uses, and where each value came from (see :meth:`Rotary.resolve`).

    Attributes
    ----------
    rope_type : str
        The Hugging Face rope type applied.
    rope_theta : float
        The base of the default frequencies (before dynamic / NTK-alpha scaling).
    effective_rope_theta : float
        The base the frequencies are computed from: ``rope_theta`` except for
        ``dynamic`` (at the analysed length; with ``alpha``, NTK-alpha's static base).
    head_dim : int
        Width of the attention head the rotation acts on.
    rotary_dim : int
        Rotated width = columns of the table = 2 · len(inv_freq). For ``proportional``
        the whole head: its un-rotated pairs have frequency 0.
    inv_freq : ndarray of shape (rotary_dim // 2,), float64, read-only
        Frequencies used, radians per position.
    reference_inv_freq : ndarray of shape (rotary_dim // 2,), float64, read-only
        Unscaled default frequencies rope_theta^(−2i/rotary_dim).
    attention_scaling : float
        Factor transformers multiplies cos and sin by.
    n_positions : int or None
        Length the length-dependent rope types (dynamic, longrope) are evaluated at:
        ``context_length``, else the analysed length.
    scaling : mapping
        Scaling parameters passed to :func:`~poslab.encodings.rope_scaling.rope_parameters`.
    sources : mapping
        Value name -> ``inline``, ``config: KEY``, ``architecture default (MODEL_TYPE)``,
        ``transformers default``, ``study dim``, or a derivation.
    rules : tuple of str
        Rules applied beyond reading a value (recorded in summary.csv as ``rope_rules``).
    config : RopeConfig or None
        The config.json reading, if any.
    """

    rope_type: str
    rope_theta: float
    effective_rope_theta: float
    head_dim: int
    rotary_dim: int
    inv_freq: np.ndarray
    reference_inv_freq: np.ndarray
    attention_scaling: float
    n_positions: int | None
    scaling: Mapping[str, Any]
    sources: Mapping[str, str]
    rules: tuple[str, ...]
    config: RopeConfig | None

    def summary(self) -> dict[str, Any]:
        """``summary.csv`` columns, see :func:`_summary`."""
        values = {"rope_type": self.rope_type, "rope_theta": self.rope_theta, "head_dim": self.head_dim,
                  "rotary_dim": self.rotary_dim, **self.scaling}
        if self.config is not None and self.config.partial_rotary_factor is not None:
            values.setdefault("partial_rotary_factor", self.config.partial_rotary_factor)
        return _summary(self.rope_type, self.attention_scaling, self.n_positions, self.scaling, self.sources,
                        self.rules, values)


def _summary(rope_type, attention, n_positions, scaling, sources, rules, values) -> dict[str, Any]:
    """``effective_rope_type``, ``attention_scaling``, ``rope_defaults`` (values nobody wrote, taken from the
    architecture's or transformers' defaults: ``name=value (source)``, ``;``-separated),
    ``rope_rules`` (``;``-separated); ``rope_length`` (dynamic, longrope) and ``rope_factors`` (longrope:
    short | long)."""
    defaults = {k: v for k, v in sources.items()
                if v.startswith(("architecture default", "transformers default")) and values.get(k) is not None}
    info = {"effective_rope_type": rope_type, "attention_scaling": attention,
            "rope_defaults": "; ".join(f"{k}={_fmt_value(values.get(k))} ({v})" for k, v in defaults.items()) or None,
            "rope_rules": "; ".join(rules) or None}
    if rope_type in ("dynamic", "longrope") and n_positions is not None:
        info["rope_length"] = int(n_positions)
    if rope_type == "longrope":
        long = n_positions is not None and n_positions > scaling["original_max_position_embeddings"]
        info["rope_factors"] = "long" if long else "short"
    return info


def _fmt_value(v) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return str(v)


@register
@dataclasses.dataclass(frozen=True)
class Rotary(Encoding):
    """RoPE-derived position table: row m is a·(cos mθ_i, sin mθ_i) for every frequency pair i.

    θ_i are the frequencies the model uses (its rope type applied) and a is the
    attention factor transformers multiplies cos and sin by (1 unless yarn or
    longrope; it scales every row alike, so similarities do not see it).

    Parameters
    ----------
    rope_theta : float or None
        Base of the default frequencies (10000 in RoFormer, 500000 in Llama 3), > 1.
        None: the config's (or its architecture's default), else 10000.
    rotary_dim : int or None
        Number of rotated dims (even). None: the config's head_dim ×
        partial_rotary_factor, else the study's ``dim`` × partial_rotary_factor.
        The table has exactly ``rotary_dim`` columns: the un-rotated dims of a
        partially rotary head carry no position and are absent.
    pairing : {"interleaved", "half"}
        Dim layout, see :func:`apply_rotary`. It permutes columns only, so
        it does not change the similarity between positions.
    config : str or None
        A model's ``config.json`` or a folder holding one, read as transformers
        reads it (see :func:`poslab.encodings.model_config.read_rope_config`). In
        a study file a relative path is resolved beside the study file.
    layer_type : str or None
        For a model with a different RoPE per layer type (Gemma 3 / 4, ModernBERT, OLMo 3, ...):
        the layer type whose RoPE to analyse (``"full_attention"``, ``"sliding_attention"``, ...;
        ``poslab inspect CONFIG`` lists them). None: the model's only RoPE (layer types that
        share one are read once); a config with several different ones is refused, naming
        them. In a study file, a list gives one run per layer type and ``"all"`` one run per
        layer type with RoPE. Layers without RoPE (Llama 4's NoPE layers) have no positional
        geometry and cannot be selected; they are listed in ``rope_rules`` and the
        ``rope_layers`` table.
    rope_type : {"default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional"} or None
        Hugging Face RoPE type. None: the config's, else ``"default"``.
    partial_rotary_factor : float or None
        Fraction of the head that is rotated, in (0, 1]; the head is the config's
        head_dim or else the study's dim. Give it or ``rotary_dim``, not both.
        For ``proportional`` the fraction of pairs with a non-zero frequency.
    context_length : int or None
        The sequence length the model runs at, where the length-dependent rope types are
        evaluated (``dynamic``: the base; ``longrope``: short or long factors); at least the
        analysed n_positions. None: the analysed n_positions. Analysing Phi-3.5's first 4096
        positions inside a 131072-token prompt is ``n_positions = 4096``, ``context_length = 131072``
        (transformers evaluates the scaling at the largest position + 1 of the whole sequence).
    factor, original_max_position_embeddings, max_position_embeddings, alpha, low_freq_factor, high_freq_factor, beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor, truncate, short_mscale, long_mscale
        Hugging Face scaling parameters, with transformers' meanings and defaults
        (see :func:`poslab.encodings.rope_scaling.rope_parameters`). None: the
        config's, else transformers' default. longrope's ``short_factor`` and
        ``long_factor`` come from a config only.

    Notes
    -----
    Inline values override the config's, key by key, so one config can be
    analysed under several rope types or factors. A parameter the resolved rope
    type does not use is an error when given inline, and recorded as not used
    (``rope_rules``) when it comes from the config. ``dynamic`` and ``longrope``
    are evaluated at ``context_length``, by default the analysed length n_positions
    (transformers' ``seq_len`` = largest position + 1).
    """

    kind = "rotary"
    keeps_own_dim = True
    path_params = ("config",)
    #: What an omitted (None) parameter means, as ``poslab encodings`` prints it.
    unset_defaults: ClassVar[dict[str, str]] = {
        "rope_theta": "from config, else 10000 (a config that omits it: its architecture's default)",
        "rotary_dim": "from config (head_dim x partial_rotary_factor), else the study's dim",
        "config": "none: every value inline",
        "layer_type": "the config's only RoPE (a config with a different RoPE per layer type needs one)",
        "rope_type": "from config, else 'default'",
        "context_length": "the analysed n_positions",
        "partial_rotary_factor": "from config, else 1 (a config that omits it: its architecture's default)",
        "beta_fast": "from config, else 32 (yarn)",
        "beta_slow": "from config, else 1 (yarn)",
        "truncate": "from config, else true (yarn)",
    }

    rope_theta: float | None = parameter(None, check=_optional(ROPE_THETA))
    rotary_dim: int | None = parameter(None, check=_optional(Integer(minimum=2)))
    pairing: Literal["interleaved", "half"] = "interleaved"
    config: str | None = None
    layer_type: str | None = None
    rope_type: Literal[ROPE_TYPES] | None = None  # type: ignore[valid-type]
    context_length: int | None = parameter(None, check=_optional(Integer(minimum=2)))
    partial_rotary_factor: float | None = _scaling("partial_rotary_factor")
    factor: float | None = _scaling("factor")
    original_max_position_embeddings: int | None = _scaling("original_max_position_embeddings")
    max_position_embeddings: int | None = _scaling("max_position_embeddings")
    alpha: float | None = _scaling("alpha")
    low_freq_factor: float | None = _scaling("low_freq_factor")
    high_freq_factor: float | None = _scaling("high_freq_factor")
    beta_fast: float | None = _scaling("beta_fast")
    beta_slow: float | None = _scaling("beta_slow")
    mscale: float | None = _scaling("mscale")
    mscale_all_dim: float | None = _scaling("mscale_all_dim")
    attention_factor: float | None = _scaling("attention_factor")
    truncate: bool | None = _scaling("truncate")
    short_mscale: float | None = _scaling("short_mscale")
    long_mscale: float | None = _scaling("long_mscale")

    def _check_params(self):
        if self.rotary_dim is not None and self.rotary_dim % 2:
            raise ParameterError(problem("rotary", "rotary_dim", "an even integer >= 2 (cos and sin pairs)",
                                         self.rotary_dim))
        if self.rotary_dim is not None and self.partial_rotary_factor is not None:
            raise ParameterError("rotary: give rotary_dim or partial_rotary_factor, not both")
        if self.layer_type is not None and self.config is None:
            raise ParameterError(f"rotary: layer_type = {self.layer_type!r} selects one layer type of a model's "
                                 "config; give config = the model's config.json (or its folder)")
        plan = _plan(self, self.read_config())  # reads and checks the config and the scaling parameters
        if self.context_length is not None and plan.rope_type not in ("dynamic", "longrope"):
            raise ParameterError(f"rotary: context_length = {self.context_length} changes only the length-dependent "
                                 f"rope types (dynamic, longrope); this run's rope type is {plan.rope_type!r}, "
                                 "whose frequencies do not depend on the length: leave context_length out")

    @classmethod
    def expand_study_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Study-file shorthand: ``layer_type = "all"`` becomes the list of the config's layer types with RoPE.

        Raises
        ------
        ValueError
            ``layer_type = "all"`` without one ``config``, or a config poslab cannot read.
        """
        if params.get("layer_type") != "all":
            return params
        config = params.get("config")
        if not isinstance(config, str):
            raise ValueError(f'layer_type = "all" needs config = one model config (its layer types are listed from '
                             f"it); got config = {config!r}")
        try:
            types = read_rope_inventory(config).layer_types
        except ValueError as exc:
            raise ValueError(f"config: {exc}") from None
        return {**params, "layer_type": list(types)}

    # ------------------------------------------------------------ resolution
    def read_config(self) -> RopeConfig | None:
        """The reading of ``config`` (memoised by file), None without one.

        Raises
        ------
        ParameterError
            Missing or unreadable config, or one poslab refuses (the message says why and what to write).
        """
        if self.config is None:
            return None
        try:
            return read_rope_config(self.config, self.layer_type)
        except ValueError as exc:  # ModelConfigError: missing file, bad JSON, no RoPE, unknown key, ...
            raise ParameterError(f"rotary: config: {exc}") from None

    def resolve(self, dim: int, n_positions: int | None = None) -> RopeResolution:
        """Everything this encoding uses in a study of width ``dim`` and length ``n_positions``.

        A pure function of the parameters and the config file (memoised); the
        one place where inline values, the config and defaults meet.

        Parameters
        ----------
        dim : int
            The study's width: the head width when neither the config nor
            ``rotary_dim`` gives one.
        n_positions : int, optional
            Analysed length (positions 0 .. n_positions − 1): ``dynamic`` and
            ``longrope`` are evaluated there unless ``context_length`` is set.
            None: transformers' initial state (or ``context_length``).

        Returns
        -------
        RopeResolution

        Raises
        ------
        ValueError
            A rotated width that is odd, zero or wider than the head, dynamic
            scaling of a single pair, longrope factor lists of the wrong length, a
            ``context_length`` shorter than ``n_positions``.
        """
        length = None if n_positions is None else int(n_positions)
        if self.context_length is not None:
            if length is not None and self.context_length < length:
                raise ValueError(f"rotary: context_length = {self.context_length} is shorter than the analysed "
                                 f"n_positions = {length}: the model cannot hold {length} positions in a shorter "
                                 "sequence; give context_length >= n_positions or leave it out")
            length = self.context_length
        return _resolve(self, self.read_config(), int(dim), length)

    @property
    def resolved_rope_type(self) -> str:
        """The rope type used: inline, else the config's, else ``"default"``."""
        return _plan(self, self.read_config()).rope_type

    @property
    def resolved_rope_theta(self) -> float:
        """The base used: inline, else the config's (or its architecture's), else 10000 (before dynamic scaling)."""
        return _plan(self, self.read_config()).rope_theta

    def rope_parameters(self, dim: int, n_positions: int | None = None) -> tuple[np.ndarray, float]:
        """Frequencies and attention factor in a study of width ``dim`` and length ``n_positions``.

        Returns
        -------
        inv_freq : ndarray of shape (rotary_dim // 2,), float64, radians per position
        attention_factor : float
        """
        r = self.resolve(dim, n_positions)
        return r.inv_freq, r.attention_scaling

    def inv_freq(self, dim: int, n_positions: int | None = None) -> np.ndarray:
        """Inverse frequencies used in a study of width ``dim``, shape (rotary_dim // 2,)."""
        return self.resolve(dim, n_positions).inv_freq

    # ------------------------------------------------------------ hooks
    def _check_size(self, n_positions, dim):
        self.resolve(dim, n_positions)

    def _generate(self, n_positions, dim, rng):
        r = self.resolve(dim, n_positions)
        angles = rope_angles(np.arange(n_positions), r.inv_freq)
        return r.attention_scaling * _merge(np.cos(angles), np.sin(angles), self.pairing)

    def _kernel(self, n_positions, max_distance, dim):
        """The exact cosine kernel Σ_i a² cos(k·θ_i) / Σ_i a² of the frequencies used (:meth:`resolve`).

        Row m is a·(cos mθ_i, sin mθ_i) for every pair, a the attention scaling
        (one factor for all pairs, so it cancels), zero-frequency pairs
        (proportional) included with cos 0 = 1; the pairing permutes columns
        only. See :func:`poslab.encodings.kernel.cosine_kernel`.
        """
        from .kernel import Kernel, cosine_kernel

        r = self.resolve(dim, n_positions)
        weights = np.full(r.inv_freq.shape, r.attention_scaling**2)
        values = cosine_kernel(r.inv_freq, max_distance, weights)
        row = values[None, :]
        return Kernel("cosine", np.arange(max_distance + 1), row, row)


@dataclasses.dataclass(frozen=True, eq=False)
class _Plan:
    """The dim-free part of a resolution: rope type, base, scaling parameters, with sources and rules."""

    config: RopeConfig | None
    rope_type: str
    rope_theta: float
    partial_rotary_factor: float | None
    scaling: dict
    sources: dict
    rules: tuple[str, ...]


@functools.lru_cache(maxsize=512)
def _plan(enc: Rotary, cfg: RopeConfig | None) -> _Plan:
    """Inline values over the config's, key by key; checks the scaling parameters (ParameterError)."""
    sources = dict(cfg.sources) if cfg is not None else {}
    rules = list(cfg.rules) if cfg is not None else []

    def pick(name, inline, configured, default):
        if inline is not None:
            sources[name] = "inline"
            return inline
        if configured is not None:
            return configured
        sources[name] = "transformers default"
        return default

    rope_type = pick("rope_type", enc.rope_type, cfg.rope_type if cfg else None, "default")
    theta = pick("rope_theta", enc.rope_theta, cfg.rope_theta if cfg else None, 10000.0)
    if cfg is not None and enc.rope_theta is None and enc.rope_type is None and _names_no_rope(cfg):
        what = f"model_type {cfg.model_type!r} is not a transformers architecture" if cfg.model_type \
            else "it has no model_type"
        raise ParameterError(f"rotary: config {enc.config}: {what} and names no RoPE key (rope_theta, rope_parameters, "
                             "rope_scaling, rotary_dim, partial_rotary_factor): nothing says this model uses RoPE, or "
                             "with which base. To analyse it as RoPE anyway, give the base in this entry "
                             "(rope_theta = 10000.0) or write it into the config")
    prf = enc.partial_rotary_factor
    if prf is not None:
        sources["partial_rotary_factor"] = "inline"
    elif cfg is not None:
        prf = cfg.partial_rotary_factor
        if prf is not None and prf != 1 and rope_type == "default" and not cfg.prf_in_default:
            rules.append(f"{cfg.model_type}: its default RoPE rotates the whole head, so partial_rotary_factor = "
                         f"{prf} ({sources.get('partial_rotary_factor')}) is not applied, as in transformers")
            prf = None
            sources.pop("partial_rotary_factor", None)
    used = rope_scaling_keys(rope_type)
    unused = [k for k in _INLINE if getattr(enc, k) is not None and k not in used]
    if unused:
        uses = ", ".join(k for k in used if k != "partial_rotary_factor") or "no scaling parameters"
        raise ParameterError(f"rotary: rope_type {rope_type!r} does not use {', '.join(unused)}; it uses: {uses}")
    configured = dict(cfg.scaling) if cfg is not None else {}
    if cfg is not None:
        if cfg.max_position_embeddings is not None:
            configured["max_position_embeddings"] = cfg.max_position_embeddings
        if cfg.original_max_position_embeddings is not None:
            configured["original_max_position_embeddings"] = cfg.original_max_position_embeddings
    scaling = {}
    for key in used:
        if key == "partial_rotary_factor":  # proportional: the fraction of pairs that rotate
            if prf is not None:
                scaling[key] = prf
            continue
        inline = getattr(enc, key) if key in _INLINE else None
        if inline is not None:
            scaling[key], sources[key] = inline, "inline"
        elif configured.get(key) is not None:
            scaling[key] = configured[key]
    ignored = [k for k in (cfg.scaling if cfg is not None else {}) if k not in used]
    if ignored:
        rules.append(f"config keys {', '.join(ignored)} not used by rope_type {rope_type!r} (transformers ignores "
                     "them too)")
    if rope_type == "dynamic" and "alpha" in scaling:
        if "factor" in scaling:
            rules.append("dynamic with alpha: NTK-alpha (Hunyuan), rope_theta·alpha^(d/(d−2)) at every length; "
                         "factor not used")
        scaling.pop("factor", None)
        scaling.pop("max_position_embeddings", None)
    try:
        standard = check_rope_scaling(rope_type, **scaling)
    except ValueError as exc:
        where = f" (config {enc.config} with the inline values)" if enc.config is not None else ""
        if rope_type == "longrope" and not all(k in configured for k in LIST_KEYS):
            where += "; short_factor and long_factor are read from a model's config.json only: give config"
        raise ParameterError(f"rotary: {exc}{where}") from None
    for key, value in standard.items():  # what transformers fills in: an original length, a factor
        if key not in scaling:
            scaling[key] = value
            sources[key] = ("transformers default (max_position_embeddings)" if key == "original_max_position_embeddings"
                            else "transformers default (max_position_embeddings / original_max_position_embeddings)")
    for key in used:
        if key in DEFAULTS and key not in scaling:
            scaling[key], sources[key] = DEFAULTS[key], "transformers default"
    return _Plan(cfg, rope_type, float(theta), prf, scaling, sources, tuple(rules))


def _names_no_rope(cfg: RopeConfig) -> bool:
    """True for a config of an architecture transformers does not know whose keys say nothing about RoPE."""
    from .model_config import architectures

    known = cfg.model_type is not None and cfg.model_type in architectures()
    return not known and not cfg.scaling and cfg.partial_rotary_factor is None and cfg.rotary_dim is None and all(
        cfg.sources.get(k) == "transformers default" for k in ("rope_theta", "rope_type"))


def _length_rules(plan: _Plan, n_positions: int | None) -> list[str]:
    cfg = plan.config
    if plan.rope_type == "longrope" and cfg is not None and cfg.model_type == "phimoe" and n_positions is not None \
            and n_positions > plan.scaling["original_max_position_embeddings"]:
        return ["phimoe beyond original_max_position_embeddings: long_factor frequencies (the LongRoPE rule; "
                "transformers 5.24's PhimoeRotaryEmbedding keeps the short_factor ones) and long_mscale"]
    return []


@functools.lru_cache(maxsize=512)
def _resolve(enc: Rotary, cfg: RopeConfig | None, dim: int, n_positions: int | None) -> RopeResolution:
    plan = _plan(enc, cfg)
    sources, rules = dict(plan.sources), list(plan.rules)
    if cfg is not None and cfg.head_dim is not None:
        head, head_from = cfg.head_dim, "head_dim of the config"
    else:
        head, head_from = dim, "study dim"
        sources.setdefault("head_dim", "study dim")
    prf = plan.partial_rotary_factor
    if enc.rotary_dim is not None:
        rotary_dim = enc.rotary_dim
        sources["rotary_dim"] = "inline"
    elif plan.rope_type == "proportional":
        rotary_dim = head  # the un-rotated pairs are part of the table, with frequency 0
    elif enc.partial_rotary_factor is None and cfg is not None and cfg.rotary_dim is not None:
        rotary_dim = cfg.rotary_dim
    else:
        rotary_dim = int(head * (prf if prf is not None else 1.0))
    if rotary_dim < 2 or rotary_dim % 2:
        how = f"{head_from}={head}" + (f" x partial_rotary_factor={prf}" if prf is not None else "")
        what = "odd" if rotary_dim % 2 else "< 2"
        raise ValueError(f"rotary: rotary_dim comes out as {rotary_dim} from {how}, which is {what}; "
                         "set an even rotary_dim >= 2")
    if rotary_dim > head:
        raise ValueError(f"rotary: rotary_dim={rotary_dim} exceeds the {head_from}={head}")
    try:
        inv_freq, attention = rope_parameters(plan.rope_type, rotary_dim=rotary_dim, rope_theta=plan.rope_theta,
                                              seq_len=n_positions, **plan.scaling)
    except ValueError as exc:  # longrope factor lists of the wrong length, dynamic on one pair, ...
        raise ValueError(f"rotary: {exc}") from None
    effective = plan.rope_theta
    if plan.rope_type == "dynamic":
        s = plan.scaling
        effective = ntk_alpha_rope_theta(plan.rope_theta, rotary_dim, s["alpha"]) if "alpha" in s else \
            dynamic_rope_theta(plan.rope_theta, rotary_dim, s["factor"], s["max_position_embeddings"], n_positions)
    rules += _length_rules(plan, n_positions)
    reference = rope_inv_freq(rotary_dim, plan.rope_theta)
    inv_freq.setflags(write=False)
    reference.setflags(write=False)
    return RopeResolution(
        rope_type=plan.rope_type, rope_theta=plan.rope_theta, effective_rope_theta=float(effective), head_dim=head,
        rotary_dim=rotary_dim, inv_freq=inv_freq, reference_inv_freq=reference, attention_scaling=float(attention),
        n_positions=n_positions, scaling=types.MappingProxyType(dict(plan.scaling)),
        sources=types.MappingProxyType(sources), rules=tuple(rules), config=cfg)
