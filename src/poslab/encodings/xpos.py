"""xPos: RoPE with a per-pair exponential decay (Sun et al. 2022, "A Length-Extrapolatable Transformer").

Reference implementation: torchscale, ``torchscale/component/xpos_relative_position.py``
(``XPOS``; Microsoft, MIT licence). Each RoPE pair i of a head of width d (rotary_dim) gets the
factor

    ζ_i = (2i/d + γ) / (1 + γ),   γ = 0.4   (torchscale: (arange(0, d, 2) + 0.4·d) / (1.4·d))

raised to the query position m over ``scale_base`` on the query, and to minus the key position n
on the key, so the score of a query at m and a key at n gets ζ_i^((m − n)/scale_base) on top of
RoPE's rotation by (m − n)·θ_i (θ_i = rope_theta^(−2i/d), interleaved pairs; torchscale uses
rope_theta 10000 and scale_base 512). For a key k positions before the query the factor is
ζ_i^(k/scale_base) ≤ 1: low-frequency pairs (ζ near 1) keep long-range scores, high-frequency
pairs (small ζ) fade. xPos is a causal (decoder) scheme: a key after the query would get a
growing factor ζ_i^(−k/scale_base) and is masked.

Which scale poslab reports. The cosine of the rotated-and-scaled vectors would divide the decay
back out (cosine ignores norms) and would not be translation invariant (queries and keys are
scaled differently), so it says little about what attention sees. poslab reports the
*score kernel*: the attention score of a query and a key with the same content, equal weight on
every pair, relative to distance 0,

    K(k) = Σ_i ζ_i^(k/scale_base) · cos(k·θ_i) / Σ_i 1,

exactly what RoPE's cosine kernel Σ_i cos(k·θ_i) / Σ_i 1 is for RoPE (rotations keep norms, so
for RoPE the two coincide), so xPos and RoPE runs differ by the decay alone.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import AnyOf, Integer, NoneValue, Real
from .base import Encoding, ParameterError, TableCost, parameter
from .kernel import Kernel
from .registry import register
from .rope_scaling import ROPE_THETA, rope_inv_freq

__all__ = ["XPos", "xpos_zeta", "xpos_decay", "xpos_score_kernel"]


def xpos_zeta(rotary_dim: int, gamma: float = 0.4) -> np.ndarray:
    """xPos's per-pair base ζ_i = (2i/d + γ) / (1 + γ), i = 0 .. d/2 − 1.

    Parameters
    ----------
    rotary_dim : int
        d, the rotated width (even).
    gamma : float
        γ (0.4 in Sun et al. and torchscale), > 0.

    Returns
    -------
    ndarray of shape (rotary_dim // 2,), float64, in (0, 1).

    Notes
    -----
    d = 128: ζ_0 = 0.4 / 1.4 = 0.285714, ζ_63 = (126/128 + 0.4) / 1.4 = 0.988839.
    """
    d = int(rotary_dim)
    if d < 2 or d % 2:
        raise ValueError(f"rotary_dim must be an even integer >= 2, got {rotary_dim}")
    return (np.arange(0, d, 2, dtype=np.float64) / d + gamma) / (1.0 + gamma)


def xpos_decay(distance, rotary_dim: int, *, scale_base: float = 512.0, gamma: float = 0.4) -> np.ndarray:
    """The relative factor ζ_i^(k/scale_base) on each pair's score at distance k (key k before the query).

    Parameters
    ----------
    distance : float or array_like
        k = query position − key position, in positions (negative k: a key after the query);
        a scalar or an array of any shape (m,), (m, p), ...
    rotary_dim : int
    scale_base : float
        512 in torchscale.
    gamma : float

    Returns
    -------
    ndarray of shape (rotary_dim // 2,) + shape of ``distance``, float64: (rotary_dim // 2,) for a
    scalar distance, (rotary_dim // 2, m) for m distances.

    Notes
    -----
    d = 128, scale_base 512, k = 2048: 0.00666389 for pair 0, 0.956099 for pair 63.
    """
    k = np.asarray(distance, dtype=np.float64)
    zeta = xpos_zeta(rotary_dim, gamma)
    return zeta.reshape(zeta.shape + (1,) * k.ndim) ** (k / float(scale_base))


def xpos_score_kernel(distance, inv_freq, *, scale_base: float = 512.0, gamma: float = 0.4) -> np.ndarray:
    """K(k) = Σ_i ζ_i^(k/scale_base) cos(k·θ_i) / Σ_i 1: the score of equal content at distance k relative to k = 0.

    Parameters
    ----------
    distance : array_like of int, shape (m,)
        Key k positions before the query.
    inv_freq : array_like of shape (n_pairs,)
        θ_i, radians per position; rotary_dim = 2·n_pairs.

    Returns
    -------
    ndarray of shape (m,), float64; 1 at k = 0.
    """
    inv_freq = np.asarray(inv_freq, dtype=np.float64)
    k = np.asarray(distance)
    if k.dtype.kind not in "iu":
        raise TypeError(f"distances must be integers, got dtype {k.dtype}")
    decay = xpos_decay(k, 2 * inv_freq.size, scale_base=scale_base, gamma=gamma)
    angles = k.astype(np.int64)[None, :] * inv_freq[:, None]
    return np.mean(decay * np.cos(angles), axis=0)


@register
@dataclasses.dataclass(frozen=True)
class XPos(Encoding):
    """xPos (Sun et al. 2022): RoPE's rotation with the per-pair decay ζ_i^(k/scale_base); a causal score kernel.

    Parameters
    ----------
    rope_theta : float
        Base of the RoPE frequencies θ_i = rope_theta^(−2i/d) (10000 in torchscale), > 1.
    rotary_dim : int or None
        d, the rotated width (even). None: the study's ``dim``.
    scale_base : float
        The decay's length unit (512 in torchscale), > 0.
    gamma : float
        γ in ζ_i = (2i/d + γ) / (1 + γ) (0.4 in torchscale), > 0.

    Notes
    -----
    No position table: the run's profile is the exact score kernel (see the module docstring)
    for keys before the query; keys after it are masked in the causal models xPos is made for.
    """

    kind = "xpos"
    keeps_own_dim = True
    generates_table = False
    unset_defaults = {"rotary_dim": "the study's dim"}

    rope_theta: float = parameter(10000.0, check=ROPE_THETA)
    rotary_dim: int | None = parameter(None, check=AnyOf((Integer(minimum=2), NoneValue())))
    scale_base: float = parameter(512.0, check=Real(minimum=0, open_min=True), doc="the decay's length unit")
    gamma: float = parameter(0.4, check=Real(minimum=0, open_min=True), doc="γ in ζ_i = (2i/d + γ) / (1 + γ)")

    def _check_params(self):
        if self.rotary_dim is not None and self.rotary_dim % 2:
            raise ParameterError(f"xpos: rotary_dim must be an even integer >= 2 (cos and sin pairs), got "
                                 f"{self.rotary_dim}")

    def width(self, dim: int) -> int:
        """The rotated width d used in a study of width ``dim``."""
        return int(self.rotary_dim if self.rotary_dim is not None else dim)

    def _check_size(self, n_positions, dim):
        if self.width(dim) % 2:
            raise ValueError(f"xpos: the study's dim = {dim} is odd; xPos rotates pairs: give an even dim or "
                             "rotary_dim")

    def inv_freq(self, dim: int) -> np.ndarray:
        """θ_i = rope_theta^(−2i/d), shape (d // 2,)."""
        return rope_inv_freq(self.width(dim), self.rope_theta)

    def zeta(self, dim: int) -> np.ndarray:
        """ζ_i, shape (d // 2,)."""
        return xpos_zeta(self.width(dim), self.gamma)

    def score_kernel(self, max_distance: int, dim: int) -> np.ndarray:
        """K(k) for k = 0 .. max_distance (keys before the query), shape (max_distance + 1,)."""
        return xpos_score_kernel(np.arange(int(max_distance) + 1), self.inv_freq(dim), scale_base=self.scale_base,
                                 gamma=self.gamma)

    def table_cost(self, n_positions: int, dim: int) -> TableCost:
        """No table: the factors and angles over pairs × distances."""
        return TableCost(table_dim=0, peak_bytes=4 * 8 * (self.width(dim) // 2) * int(n_positions))

    def _kernel(self, n_positions, max_distance, dim):
        """The score kernel K(k) for keys k positions before the query (scale ``score``); causal."""
        backward = self.score_kernel(max_distance, dim)[None, :]
        forward = np.full_like(backward, np.nan)
        forward[:, 0] = 1.0
        return Kernel("score", np.arange(max_distance + 1), forward, backward, ("all",), "causal")
