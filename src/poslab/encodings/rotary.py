"""RoPE-derived position vectors and the rotary rotation itself (Su et al., RoFormer, 2021).

RoPE does not add a vector to the token; it rotates each frequency pair of a
query or key by the angle m·θ_i. The *position vector* of position m is the
phase pair (cos mθ_i, sin mθ_i) for every pair i: the dot product of two such
vectors is Σ_i cos((m − n)θ_i), the relative kernel RoPE induces, so its
similarity profile is the sinusoidal closed form with the same base and width.

Default frequencies come from :func:`rope_inv_freq`; the Hugging Face RoPE
scaling types (:mod:`poslab.encodings.rope_scaling`) and model configs
(:mod:`poslab.encodings.model_config`) are resolved in one place,
:meth:`Rotary.rope_parameters`; the rest of this module only consumes ``inv_freq``.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

import numpy as np
import pandas as pd

from .base import Encoding, ParameterError
from .model_config import read_rope_config
from .registry import register
from .rope_scaling import ROPE_TYPES, check_rope_scaling, dynamic_rope_theta, rope_attention_factor, rope_parameters
from .rope_scaling import rope_scaling_keys

__all__ = ["Rotary", "rope_inv_freq", "rope_angles", "apply_rotary", "rope_decay_bound"]

# Scaling parameters (Hugging Face names) a Rotary takes inline or from a config.json.
_SCALING = (
    "factor", "original_max_position_embeddings", "max_position_embeddings", "low_freq_factor", "high_freq_factor",
    "beta_fast", "beta_slow", "mscale", "mscale_all_dim", "attention_factor", "truncate",
)
_CONFIG_ONLY = ("short_factor", "long_factor")


def rope_inv_freq(rotary_dim: int, rope_theta: float = 10000.0) -> np.ndarray:
    """Inverse frequencies θ_i = rope_theta^(−2i/rotary_dim), i = 0 .. rotary_dim/2 − 1.

    As ``inv_freq`` in Hugging Face transformers' ``_compute_default_rope_parameters``,
    but in float64.

    Returns
    -------
    ndarray of shape (rotary_dim // 2,), radians per position.
    """
    if rotary_dim < 2 or rotary_dim % 2:
        raise ValueError(f"rotary_dim must be an even integer >= 2, got {rotary_dim}")
    return rope_theta ** (-np.arange(0, rotary_dim, 2, dtype=np.float64) / rotary_dim)


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
        None: the config's, else 10000.
    rotary_dim : int or None
        Number of rotated dims (even). None: the config's head_dim ×
        partial_rotary_factor, else the study's ``dim`` × partial_rotary_factor.
        The table has exactly ``rotary_dim`` columns: the un-rotated dims of a
        partially rotary head carry no position and are absent.
    pairing : {"interleaved", "half"}
        Dim layout, see :func:`apply_rotary`. It permutes columns only, so
        it does not change the similarity between positions.
    config : str or None
        A model's ``config.json`` or a folder holding one (see
        :func:`poslab.encodings.model_config.read_rope_config`). In a study file
        a relative path is resolved beside the study file.
    rope_type : {"default", "linear", "dynamic", "yarn", "longrope", "llama3"} or None
        Hugging Face RoPE type. None: the config's, else ``"default"``.
    partial_rotary_factor : float or None
        Fraction of the head that is rotated, in (0, 1]; the head is the config's
        head_dim or else the study's dim. Give it or ``rotary_dim``, not both.
    factor, original_max_position_embeddings, max_position_embeddings, low_freq_factor, high_freq_factor, beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor, truncate
        Hugging Face scaling parameters, with transformers' meanings and defaults
        (see :func:`poslab.encodings.rope_scaling.rope_parameters`). None: the
        config's, else transformers' default. longrope's ``short_factor`` and
        ``long_factor`` come from a config only.

    Notes
    -----
    Inline values override the config's, key by key, so one config can be
    analysed under several rope types or factors. A parameter the resolved rope
    type does not use is an error when given inline and ignored when it comes
    from the config. ``dynamic`` and ``longrope`` are evaluated at the analysed
    length n_positions (transformers' ``seq_len`` = largest position + 1).
    """

    kind = "rotary"
    keeps_own_dim = True
    path_params = ("config",)
    #: What an omitted (None) parameter means, as ``poslab encodings`` prints it.
    unset_defaults: ClassVar[dict[str, str]] = {
        "rope_theta": "from config, else 10000",
        "rotary_dim": "from config (head_dim x partial_rotary_factor), else the study's dim",
        "config": "none: every value inline",
        "rope_type": "from config, else 'default'",
        "partial_rotary_factor": "from config, else 1",
        "beta_fast": "from config, else 32 (yarn)",
        "beta_slow": "from config, else 1 (yarn)",
        "truncate": "from config, else true (yarn)",
    }

    rope_theta: float | None = None
    rotary_dim: int | None = None
    pairing: Literal["interleaved", "half"] = "interleaved"
    config: str | None = None
    rope_type: Literal[ROPE_TYPES] | None = None  # type: ignore[valid-type]
    partial_rotary_factor: float | None = None
    factor: float | None = None
    original_max_position_embeddings: int | None = None
    max_position_embeddings: int | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    beta_fast: float | None = None
    beta_slow: float | None = None
    mscale: float | None = None
    mscale_all_dim: float | None = None
    attention_factor: float | None = None
    truncate: bool | None = None

    def _check_params(self):
        if self.rope_theta is not None and not self.rope_theta > 1:
            raise ParameterError(f"rotary: rope_theta must be > 1, got {self.rope_theta}")
        if self.rotary_dim is not None and (self.rotary_dim < 2 or self.rotary_dim % 2):
            raise ParameterError(f"rotary: rotary_dim must be an even integer >= 2, got {self.rotary_dim}")
        if self.partial_rotary_factor is not None and not 0 < self.partial_rotary_factor <= 1:
            raise ParameterError(f"rotary: partial_rotary_factor must be in (0, 1], got {self.partial_rotary_factor}")
        if self.rotary_dim is not None and self.partial_rotary_factor is not None:
            raise ParameterError("rotary: give rotary_dim or partial_rotary_factor, not both")
        from_config = {}
        if self.config is not None:
            try:
                from_config = read_rope_config(self.config)
            except ValueError as exc:  # ModelConfigError: missing file, bad JSON, unknown rope type, ...
                raise ParameterError(f"rotary: config: {exc}") from None
        object.__setattr__(self, "_from_config", from_config)  # a cache of the file, not a parameter
        rope_type = self.resolved_rope_type
        used = rope_scaling_keys(rope_type)
        unused = [k for k in _SCALING if getattr(self, k) is not None and k not in used]
        if unused:
            uses = ", ".join(used) or "no scaling parameters"
            raise ParameterError(f"rotary: rope_type {rope_type!r} does not use {', '.join(unused)}; it uses: {uses}")
        try:
            check_rope_scaling(rope_type, **self._scaling())
        except ValueError as exc:
            where = f" (config {self.config} with the inline values)" if self.config is not None else ""
            if rope_type == "longrope" and not all(k in self._from_config for k in _CONFIG_ONLY):
                where += "; short_factor and long_factor are read from a model's config.json only: give config"
            raise ParameterError(f"rotary: {exc}{where}") from None

    # ------------------------------------------------------------ resolution
    @property
    def resolved_rope_type(self) -> str:
        """The rope type used: inline, else the config's, else ``"default"``."""
        return self.rope_type or self._from_config.get("rope_type", "default")

    @property
    def resolved_rope_theta(self) -> float:
        """The base used: inline, else the config's, else 10000 (before dynamic scaling)."""
        return self.rope_theta if self.rope_theta is not None else self._from_config.get("rope_theta", 10000.0)

    def _scaling(self) -> dict:
        """Scaling parameters the resolved rope type reads: inline values over the config's."""
        used = rope_scaling_keys(self.resolved_rope_type)
        out = {k: self._from_config[k] for k in used if k in self._from_config}
        out.update({k: getattr(self, k) for k in used if k in _SCALING and getattr(self, k) is not None})
        return out

    def _head_dim(self, dim: int) -> int:
        return self._from_config.get("head_dim", dim)

    def resolved_rotary_dim(self, dim: int) -> int:
        """The rotary dim used in a study of width ``dim``."""
        if self.rotary_dim is not None:
            return self.rotary_dim
        if self.partial_rotary_factor is not None:
            return int(self._head_dim(dim) * self.partial_rotary_factor)
        return self._from_config.get("rotary_dim", dim)

    def rope_parameters(self, dim: int, n_positions: int | None = None) -> tuple[np.ndarray, float]:
        """Frequencies and attention factor used in a study of width ``dim`` and length ``n_positions``.

        Returns
        -------
        inv_freq : ndarray of shape (rotary_dim // 2,), float64, radians per position
        attention_factor : float
        """
        return self._frequencies(self.resolved_rotary_dim(dim), n_positions)

    def inv_freq(self, dim: int, n_positions: int | None = None) -> np.ndarray:
        """Inverse frequencies used in a study of width ``dim``, shape (rotary_dim // 2,)."""
        return self.rope_parameters(dim, n_positions)[0]

    def _frequencies(self, rotary_dim: int, n_positions: int | None):
        return rope_parameters(self.resolved_rope_type, rotary_dim=rotary_dim, rope_theta=self.resolved_rope_theta,
                               seq_len=n_positions, **self._scaling())

    # ------------------------------------------------------------ hooks
    def _check_size(self, n_positions, dim):
        rd = self.resolved_rotary_dim(dim)
        head = self._head_dim(dim)
        if rd % 2:
            how = "the study dim" if head == dim and "head_dim" not in self._from_config else "head_dim"
            raise ValueError(f"rotary: rotary_dim comes out as {rd} from {how}={head}, which is odd; "
                             "set an even rotary_dim")
        if rd > head:
            which = "head_dim of the config" if "head_dim" in self._from_config else "study dim"
            raise ValueError(f"rotary: rotary_dim={rd} exceeds the {which}={head}")
        try:
            self._frequencies(rd, n_positions)
        except ValueError as exc:  # e.g. longrope factor lists of the wrong length
            raise ValueError(f"rotary: {exc}") from None

    def _generate(self, n_positions, dim, rng):
        inv_freq, attention = self.rope_parameters(dim, n_positions)
        angles = rope_angles(np.arange(n_positions), inv_freq)
        return attention * _merge(np.cos(angles), np.sin(angles), self.pairing)

    def run_info(self, n_positions):
        """``effective_rope_type``, ``attention_scaling``; for dynamic and longrope the
        analysed length ``rope_length``; for longrope ``rope_factors`` (short | long)."""
        rope_type = self.resolved_rope_type
        info = {"effective_rope_type": rope_type,
                "attention_scaling": rope_attention_factor(rope_type, **self._scaling())}
        if rope_type in ("dynamic", "longrope"):
            info["rope_length"] = int(n_positions)
        if rope_type == "longrope":
            original = check_rope_scaling(rope_type, **self._scaling())["original_max_position_embeddings"]
            info["rope_factors"] = "long" if n_positions > original else "short"
        return info

    def run_tables(self, table, n_positions):
        """``inv_freq`` (one row per frequency pair) and ``rope_decay`` (RoFormer's bound per distance)."""
        rotary_dim = table.shape[1]
        inv_freq, attention = self._frequencies(rotary_dim, n_positions)
        theta = self.resolved_rope_theta
        reference = rope_inv_freq(rotary_dim, theta)
        if self.resolved_rope_type == "dynamic":
            scaling = self._scaling()
            theta = dynamic_rope_theta(theta, rotary_dim, scaling["factor"], scaling["max_position_embeddings"],
                                       n_positions)
        freqs = pd.DataFrame({
            "pair": np.arange(rotary_dim // 2),
            "inv_freq": inv_freq,
            "reference_inv_freq": reference,
            "wavelength": 2 * np.pi / inv_freq,
            "scale_factor": reference / inv_freq,
            "effective_rope_theta": theta,
            "attention_scaling": attention,
        })
        distance = np.arange(n_positions)
        decay = pd.DataFrame({"distance": distance, "relative_upper_bound": rope_decay_bound(inv_freq, distance)})
        return {"inv_freq": freqs, "rope_decay": decay}
