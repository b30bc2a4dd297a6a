"""Kernels by distance: what a translation-invariant encoding does between two positions, exactly.

A :class:`Kernel` holds, per head h and distance k = 0..max_distance, the
value of a relative kernel for key − query = +k (``forward``) and −k
(``backward``), on one declared *scale*:

``cosine``
    Vector encodings (sinusoidal, every RoPE variant): the cosine similarity
    of the position vectors at distance k. For vectors made of frequency pairs
    a_i·(cos pθ_i, sin pθ_i) it is S(k) = Σ_i w_i cos(kθ_i) / Σ_i w_i with
    w_i = a_i² (:func:`cosine_kernel`); zero-frequency pairs have cos(0) = 1 and
    count with their weight.
``attention_prior``
    Bias encodings (ALiBi, T5 buckets, KERPLE, FIRE): the bias b_h(k) added to
    the attention logit turned into what it does to attention,
    exp(b_h(k) − b_h(0)) — the ratio of the attention weight on a key at
    distance k to the weight on the query's own position when the contents
    score alike. It is 1 at distance 0 and in (0, 1] for a bias that decays.
``score``
    Encodings that scale the query–key score by distance instead of adding a
    bias (xPos: RoPE's rotation times a per-pair decay ζ_i^(k/scale_base)): the
    score of equal content at distance k relative to distance 0,
    Σ_i ζ_i^(k/s) cos(kθ_i) / Σ_i 1 (:mod:`poslab.encodings.xpos`). Without
    the decay it is RoPE's cosine kernel; it is neither a cosine of vectors
    (xPos scales queries and keys differently) nor a bias.

Why two scales and not one: a bias has no vectors, so it has no cosine
similarity; a vector encoding's cosine is a geometry of its table, not an
attention weight. Both are 1 at distance 0 and ≤ 1 where they decay, so the
model-free summaries (the distance at which a kernel first falls below 1/e or
1/2) are defined on both, but a decay length of a cosine profile and one of an
attention prior measure different things: runs are ranked on one scale only.
exp(b − b(0)) is the natural image of a bias: softmax is invariant to a
constant added to a row of logits, so only differences b_h(k) − b_h(0) have
meaning (this is also why BLOOM's slope × key-position form equals ALiBi's
−slope·(query − key) on causal rows), and exp turns them into the
multiplicative prior they put on attention.

``direction`` says which keys the kernel covers: ``bidirectional`` (both
signs of key − query: encoders, T5's bidirectional buckets) or ``causal``
(keys at or before the query only: decoders; ``forward`` is NaN beyond
distance 0, where the causal mask removes the keys).

Aggregate across heads (the run's profile, :meth:`Kernel.profile`): the mean
over heads of each head's kernel averaged over the directions it covers. The
mean is the kernel of a head drawn at random: it keeps 1 at distance 0 and the
(0, 1] range, is monotone when every head is, and at long distance it follows
the heads that reach furthest (an ALiBi model's gentlest slopes), which is what
a model's reach depends on; a median head would switch between heads'
curves distance by distance, and the prior of the mean bias (a geometric
mean) would hide the far-reaching heads behind the steep ones. Each head's
own kernel and summaries are in the per-head table (stage ``kernel``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np

__all__ = ["Kernel", "SCALES", "DIRECTIONS", "cosine_kernel", "attention_prior"]

#: The scales a kernel reports (``summary.csv`` column ``kernel``).
SCALES = ("cosine", "attention_prior", "score")
#: Which keys a kernel covers.
DIRECTIONS = ("bidirectional", "causal")
#: A kernel's value at distance 0 must be 1 to this tolerance.
_UNIT_TOLERANCE = 1e-12
#: Distances per block of :func:`cosine_kernel` (a block is two small matrix products).
_BLOCK = 1024


@dataclasses.dataclass(frozen=True, eq=False)
class Kernel:
    """A relative kernel by distance, per head, on a declared scale (module docstring).

    Attributes
    ----------
    scale : {"cosine", "attention_prior", "score"}
        What the values measure: cosine similarity of position vectors, or the
        attention prior exp(b_h(k) − b_h(0)) of a bias (dimensionless).
    distance : ndarray of int64, shape (m,)
        0, 1, ..., max_distance (positions); m = max_distance + 1.
    forward : ndarray of float64, shape (n_heads, m)
        Value at key − query = +distance. NaN beyond distance 0 for a causal kernel.
    backward : ndarray of float64, shape (n_heads, m)
        Value at key − query = −distance (the same array when the kernel is symmetric).
    heads : tuple of str
        Head labels, one per row; ``("all",)`` for a vector encoding.
    direction : {"bidirectional", "causal"}
        Keys covered: both sides of the query, or only those at or before it.
    head_parameters : mapping of str to tuple of float, optional
        Per-head parameters behind the values (ALiBi ``slope``, KERPLE ``p`` and ``a``), one value per head.
    notes : tuple of str, optional
        Rules applied in building it that a reader must know (recorded in the run's ``message``).

    Raises
    ------
    ValueError
        Bad scale or direction, shapes that do not match, distances other than
        0..max_distance, non-finite values where the kernel is covered, a
        value at distance 0 other than 1, or a causal forward that is not NaN.
    """

    scale: str
    distance: np.ndarray
    forward: np.ndarray
    backward: np.ndarray
    heads: tuple[str, ...] = ("all",)
    direction: str = "bidirectional"
    head_parameters: Mapping[str, tuple[float, ...]] = dataclasses.field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def __post_init__(self):
        if self.scale not in SCALES:
            raise ValueError(f"kernel scale must be one of {', '.join(SCALES)}, got {self.scale!r}")
        if self.direction not in DIRECTIONS:
            raise ValueError(f"kernel direction must be one of {', '.join(DIRECTIONS)}, got {self.direction!r}")
        distance = np.asarray(self.distance)
        if distance.ndim != 1 or distance.size == 0 or not np.array_equal(distance, np.arange(distance.size)):
            raise ValueError("kernel distance must be 0, 1, ..., max_distance")
        distance = distance.astype(np.int64)
        same = self.backward is self.forward
        forward = np.array(self.forward, dtype=np.float64, ndmin=2)  # a copy: the kernel owns its values
        backward = forward if same else np.array(self.backward, dtype=np.float64, ndmin=2)
        heads = tuple(str(h) for h in self.heads)
        shape = (len(heads), distance.size)
        for name, values in (("forward", forward), ("backward", backward)):
            if values.shape != shape:
                raise ValueError(f"kernel {name} must have shape (n_heads, max_distance + 1) = {shape}, "
                                 f"got {values.shape}")
        if not np.isfinite(backward).all():
            raise ValueError("kernel backward values must be finite")
        if self.direction == "causal":
            if not (np.isnan(forward[:, 1:]).all() and np.array_equal(forward[:, 0], backward[:, 0])):
                raise ValueError("a causal kernel's forward values are NaN beyond distance 0 (the mask removes "
                                 "keys after the query) and equal backward at distance 0")
        elif not np.isfinite(forward).all():
            raise ValueError("kernel forward values must be finite (a kernel covering only keys before the query "
                             "is direction='causal')")
        if np.any(np.abs(backward[:, 0] - 1.0) > _UNIT_TOLERANCE):
            raise ValueError(f"a kernel is 1 at distance 0 on both scales, got {backward[:, 0].tolist()}")
        params = {}
        for name, values in dict(self.head_parameters).items():
            values = tuple(float(v) for v in values)
            if len(values) != len(heads):
                raise ValueError(f"kernel head parameter {name} has {len(values)} values for {len(heads)} heads")
            params[str(name)] = values
        for values in (distance, forward, backward):
            values.setflags(write=False)
        object.__setattr__(self, "distance", distance)
        object.__setattr__(self, "forward", forward)
        object.__setattr__(self, "backward", backward)
        object.__setattr__(self, "heads", heads)
        object.__setattr__(self, "head_parameters", params)
        object.__setattr__(self, "notes", tuple(str(n) for n in self.notes))

    @property
    def max_distance(self) -> int:
        """The largest distance (positions)."""
        return int(self.distance[-1])

    @property
    def n_heads(self) -> int:
        return len(self.heads)

    @property
    def symmetric(self) -> bool:
        """Bidirectional and forward equal to backward (exactly)."""
        return self.direction == "bidirectional" and (
            self.forward is self.backward or bool(np.array_equal(self.forward, self.backward)))

    def per_head(self) -> np.ndarray:
        """Each head's kernel averaged over the directions it covers, shape (n_heads, m).

        Bidirectional: (forward + backward) / 2 (the mean over the pairs (i, i ± k) of the n × n kernel
        matrix); causal: backward.
        """
        if self.direction == "causal" or self.forward is self.backward:
            return self.backward
        return 0.5 * (self.forward + self.backward)

    def profile(self) -> np.ndarray:
        """The run's profile: the mean over heads of :meth:`per_head`, shape (m,) (module docstring, "Aggregate")."""
        values = self.per_head()
        return values[0].copy() if values.shape[0] == 1 else values.mean(axis=0)

    def matrix_values(self, max_offset: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The head-mean kernel at every offset key − query = −max_offset..max_offset (NaN where not covered).

        Returns
        -------
        offset : ndarray of int64, shape (2 · max_offset + 1,)
        value : ndarray of float64, same shape
        """
        m = self.max_distance if max_offset is None else int(max_offset)
        forward = self.forward[:, :m + 1].mean(axis=0)
        backward = self.backward[:, :m + 1].mean(axis=0)
        return np.arange(-m, m + 1), np.concatenate([backward[:0:-1], forward])

    def to_frame(self):
        """One row per head × distance: head, distance, forward, backward (pandas DataFrame)."""
        import pandas as pd

        h, k = np.divmod(np.arange(self.n_heads * self.distance.size), self.distance.size)
        return pd.DataFrame({"head": np.asarray(self.heads, dtype=object)[h], "distance": self.distance[k],
                             "forward": self.forward.ravel(), "backward": self.backward.ravel()})


def cosine_kernel(frequencies, max_distance: int, weights=None) -> np.ndarray:
    """The cosine kernel of frequency pairs: S(k) = Σ_i w_i cos(k·θ_i) / Σ_i w_i for k = 0..max_distance.

    The cosine similarity between positions p and p + k of a table whose row p
    is the pairs a_i·(cos pθ_i, sin pθ_i) (in any column order), with
    w_i = a_i²: the dot product is Σ_i a_i² cos(kθ_i) and every row has
    squared norm Σ_i a_i² (RoFormer, Su et al. 2021, §3.4; sinusoidal tables,
    Vaswani et al. 2017, are pairs with a_i = 1). Exact only when every
    column belongs to a full pair: an odd width leaves a lone sine column,
    the row norm then varies with p and S depends on p (case C1).

    Parameters
    ----------
    frequencies : array_like of shape (n_pairs,)
        θ_i, radians per position (0 allowed: a pair that does not rotate, cos 0 = 1).
    max_distance : int
        Largest distance k, >= 0.
    weights : array_like of shape (n_pairs,), optional
        w_i >= 0, not all 0 (default: 1 each).

    Returns
    -------
    ndarray of shape (max_distance + 1,), float64; 1 at distance 0.

    Notes
    -----
    O(max_distance · n_pairs) in blocks of 1024 distances: with k = k0 + j,
    cos(kθ) = cos(k0θ)cos(jθ) − sin(k0θ)sin(jθ), so a block is two matrix
    products of (n_blocks × n_pairs) by (n_pairs × 1024); every angle is an
    int64 position times a float64 frequency (case C5), so the rounding is that
    of the angles, ~1e-16 · k·θ radians — below what a table's rows carry.
    """
    theta = np.asarray(frequencies, dtype=np.float64).ravel()
    w = np.ones_like(theta) if weights is None else np.asarray(weights, dtype=np.float64).ravel()
    if w.shape != theta.shape or not (np.isfinite(w).all() and np.all(w >= 0) and w.sum() > 0):
        raise ValueError("cosine_kernel weights must be finite, >= 0, not all 0, one per frequency")
    if not np.isfinite(theta).all():
        raise ValueError("cosine_kernel frequencies must be finite")
    w = w / w.sum()
    size = int(max_distance) + 1
    block = min(_BLOCK, size)
    j = np.arange(block, dtype=np.int64)
    starts = np.arange(0, size, block, dtype=np.int64)
    inner = np.outer(j, theta)  # (block, pairs)
    outer = np.outer(starts, theta)  # (n_blocks, pairs)
    values = (np.cos(outer) * w) @ np.cos(inner).T - (np.sin(outer) * w) @ np.sin(inner).T
    out = values.ravel()[:size]
    out[0] = 1.0
    return out


def attention_prior(bias) -> np.ndarray:
    """exp(b − b[..., 0]): a bias by distance (last axis, distance 0 first) as the attention prior it imposes.

    Parameters
    ----------
    bias : array_like of shape (..., m)
        Bias added to the attention logits at distances 0..m − 1 (NaN: not attended).

    Returns
    -------
    ndarray of the same shape, float64; exactly 1 at distance 0.
    """
    b = np.asarray(bias, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        prior = np.exp(b - b[..., :1])
    prior[..., 0] = 1.0
    return prior
