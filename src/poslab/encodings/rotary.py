"""RoPE-derived position vectors and the rotary rotation itself (Su et al., RoFormer, 2021).

RoPE does not add a vector to the token; it rotates each frequency pair of a
query or key by the angle m·θ_i. The *position vector* of position m is the
phase pair (cos mθ_i, sin mθ_i) for every pair i: the dot product of two such
vectors is Σ_i cos((m − n)θ_i), the relative kernel RoPE induces, so its
similarity profile is the sinusoidal closed form with the same base and width.

Frequencies are computed by :func:`rope_inv_freq`; RoPE scaling types plug in
there (a later step), the rest of this module only consumes ``inv_freq``.
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from .base import Encoding, ParameterError
from .registry import register

__all__ = ["Rotary", "rope_inv_freq", "rope_angles", "apply_rotary"]


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


@register
@dataclasses.dataclass(frozen=True)
class Rotary(Encoding):
    """RoPE-derived position table: row m is the phase pairs (cos mθ_i, sin mθ_i).

    Parameters
    ----------
    rope_theta : float
        Base of the frequencies (10000 in RoFormer, 500000 in Llama 3), > 1.
    rotary_dim : int or None
        Number of rotated dims (even). None means the study's ``dim``. The
        table has exactly ``rotary_dim`` columns: the un-rotated dims of a
        partially rotary head carry no position and are absent.
    pairing : {"interleaved", "half"}
        Dim layout, see :func:`apply_rotary`. It permutes columns only, so
        it does not change the similarity between positions.
    """

    kind = "rotary"
    keeps_own_dim = True

    rope_theta: float = 10000.0
    rotary_dim: int | None = None
    pairing: Literal["interleaved", "half"] = "interleaved"

    def _check_params(self):
        if not self.rope_theta > 1:
            raise ParameterError(f"rotary: rope_theta must be > 1, got {self.rope_theta}")
        if self.rotary_dim is not None and (self.rotary_dim < 2 or self.rotary_dim % 2):
            raise ParameterError(f"rotary: rotary_dim must be an even integer >= 2, got {self.rotary_dim}")

    def resolved_rotary_dim(self, dim: int) -> int:
        """The rotary dim used in a study of width ``dim``."""
        return dim if self.rotary_dim is None else self.rotary_dim

    def inv_freq(self, dim: int) -> np.ndarray:
        """Inverse frequencies used in a study of width ``dim``, shape (rotary_dim // 2,)."""
        return rope_inv_freq(self.resolved_rotary_dim(dim), self.rope_theta)

    def _check_size(self, n_positions, dim):
        rd = self.resolved_rotary_dim(dim)
        if rd % 2:
            raise ValueError(f"rotary: rotary_dim defaults to dim={dim}, which is odd; set an even rotary_dim")
        if rd > dim:
            raise ValueError(f"rotary: rotary_dim={rd} exceeds the study dim={dim}")

    def _generate(self, n_positions, dim, rng):
        angles = rope_angles(np.arange(n_positions), self.inv_freq(dim))
        return _merge(np.cos(angles), np.sin(angles), self.pairing)
