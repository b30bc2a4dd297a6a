"""Properties of a position table from the literature: monotonicity, translation
invariance, symmetry (Wang et al., ICLR 2021) and locality (Chen et al., 2023).

S is the cosine-similarity matrix between positions. No function forms S
whole: rows of S are computed for blocks of anchor positions (at most
~4·10⁶ entries at once). The anchor-based metrics (monotonicity, locality,
symmetry) use every ``anchor_step``-th position as anchor, a regular
subsample recorded in the table: every position up to :data:`MAX_ANCHORS`
positions, then at most MAX_ANCHORS anchors and at most
:data:`MAX_ENTRIES` / n_positions of them (so at most ~8.4·10⁶ entries of S
in all: 2048 anchors up to n = 4096, 64 at n = 131072, 32 from n = 262144
on), each metric costing O(n_anchors · n · dim) for the products plus
O(n_anchors · n log n) for monotonicity's ranks. Measured at n = 131072,
dim 128: ~1 s instead of 72 s with 2048 anchors (benchmarks/README.md).
Translation invariance comes from the profile: exact up to 2048 positions,
beyond from its anchor-sampled standard deviation (128 stratified anchors;
see :func:`poslab.analysis.similarity_profile`).

References
----------
Wang, B., Shang, L., Lioma, C., Jiang, X., Yang, H., Liu, Q., Simonsen, J. G.
(2021). On Position Embeddings in BERT. ICLR 2021. §3: with a proximity
φ between position vectors, *monotonicity*: ∀x, m, n: m > n ⟺
φ(x, x+m) < φ(x, x+n); *translation invariance*: ∀x₁…xₙ, m:
φ(x₁, x₁+m) = … = φ(xₙ, xₙ+m); *symmetry*: ∀x, y: φ(x, y) = φ(y, x).

Chen, L., Varoquaux, G., Suchanek, F. M. (2023). The Locality and Symmetry
of Positional Encodings. Findings of EMNLP 2023 (arXiv:2310.12864), and
their reference implementation ``locality_symmetry/calculate.py``
(``matrix_locality``): for a row-stochastic attention matrix A of size n,
Loc(A) = (1/n) Σ_i Σ_j A_ij 2^(−|i−j|), in [0, 1], 1 when every position
attends only to itself.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats

from .profile import _STD_ANCHORS, _STD_SEED, SimilarityProfile, _stratified_anchors
from .similarity import UnitRows

__all__ = ["MAX_ANCHORS", "MAX_ENTRIES", "MIN_ANCHORS", "anchor_positions", "monotonicity", "translation_variance_ratio", "kernel_asymmetry",
           "locality", "table_properties", "Properties"]

#: Tables with more positions use a regular subsample of this many anchors (at most).
MAX_ANCHORS = 2048
#: ... and of at most this many anchors × positions (entries of S), but never fewer than MIN_ANCHORS anchors.
MAX_ENTRIES = 2**23
#: Fewest anchors of a subsample.
MIN_ANCHORS = 32
#: Largest number of entries of S held at once.
_BLOCK_ENTRIES = 4_000_000
#: Distances beyond this contribute < 2^-60 to locality and are skipped in its numerator.
_LOCALITY_REACH = 60


def anchor_positions(n_positions: int, max_anchors: int = MAX_ANCHORS,
                     max_entries: int = MAX_ENTRIES) -> tuple[np.ndarray, int]:
    """Anchors used by the anchor-based metrics: every ``step``-th position.

    Parameters
    ----------
    n_positions : int
    max_anchors : int
        Most anchors.
    max_entries : int
        Most anchors × positions (rows of S computed), down to :data:`MIN_ANCHORS` anchors.

    Returns
    -------
    anchors : ndarray of int, shape (ceil(n_positions / step),)
    step : int
        ceil(n_positions / count), count = min(max_anchors, max(MIN_ANCHORS,
        max_entries // n_positions)) (1: every position).
    """
    count = max(1, min(max_anchors, max(MIN_ANCHORS, max_entries // max(1, n_positions))))
    step = max(1, math.ceil(n_positions / count))
    return np.arange(0, n_positions, step), step


def _row_blocks(anchors, n_columns):
    size = max(1, _BLOCK_ENTRIES // max(1, n_columns))
    for a in range(0, anchors.size, size):
        yield anchors[a:a + size]


def _forward_blocks(anchors, max_distance):
    """Chunks of sorted anchors whose forward strip rows × (span + max_distance) stays below _BLOCK_ENTRIES."""
    step = int(np.min(np.diff(anchors))) if anchors.size > 1 else 1
    size = 1
    while size < anchors.size and (2 * size) * (2 * size * step + max_distance + 1) <= _BLOCK_ENTRIES:
        size *= 2
    for a in range(0, anchors.size, size):
        yield anchors[a:a + size]


def monotonicity(units: UnitRows, max_distance: int, anchors=None) -> tuple[float, float]:
    """Monotonicity of S with distance, after Wang et al. (2021), §3.

    For each anchor i, the forward pairs (i, i + k), k = 1..min(max_distance,
    n − 1 − i): Spearman's ρ between k and S[i, i + k] (anchors with fewer than
    3 valid pairs or constant similarities are skipped; exact ties, which
    float similarities almost never have, are ranked in distance order). Wang et al.'s
    monotonicity (m > n ⟺ φ(x, x+m) < φ(x, x+n)) holds exactly at an anchor
    when its ρ = −1.

    Parameters
    ----------
    units : UnitRows
    max_distance : int
    anchors : ndarray of int, optional
        Default :func:`anchor_positions`.

    Returns
    -------
    rho : float
        Mean over anchors of Spearman's ρ (−1: similarity always falls with
        distance; about 0 for a random table).
    violation_rate : float
        Fraction of consecutive distances (k, k + 1), over all anchors, at
        which the similarity rises: S[i, i+k+1] > S[i, i+k] (0 for a monotone
        decay, about 1/2 for a random table).
    """
    u, valid = units.vectors, units.valid
    n = len(u)
    anchors = anchor_positions(n)[0] if anchors is None else np.asarray(anchors)
    ks = np.arange(1, max_distance + 1)
    rhos, rises, steps = [], 0, 0
    for rows in _forward_blocks(anchors, max_distance):
        c0, c1 = int(rows[0]), min(n, int(rows[-1]) + max_distance + 1)
        cols = rows[:, None] + ks[None, :]
        ok = (cols < n) & valid[rows, None] & valid[np.minimum(cols, n - 1)]
        block = u[rows] @ u[c0:c1].T  # forward strip of S: rows × (c1 - c0) entries
        strip = block[np.arange(rows.size)[:, None], np.minimum(cols, c1 - 1) - c0]
        q = np.where(ok, np.clip(strip, -1.0, 1.0), np.nan)
        both = ok[:, 1:] & ok[:, :-1]
        rises += int(np.sum((q[:, 1:] > q[:, :-1]) & both))
        steps += int(np.sum(both))
        if not ok.any():
            continue
        # ranks among each anchor's valid pairs (invalid entries are +inf, ranked last); exact ties,
        # which float similarities almost never have, are ranked in distance order (stable sort)
        order = np.argsort(np.where(ok, q, np.inf), axis=1, kind="stable")
        rank_q = np.empty(q.shape)
        np.put_along_axis(rank_q, order, np.arange(1, q.shape[1] + 1, dtype=float)[None, :], axis=1)
        rank_q[~ok] = np.nan
        flat_row = np.nanmax(q, axis=1, initial=-np.inf) == np.nanmin(q, axis=1, initial=np.inf)
        rank_k = np.where(ok, np.cumsum(ok, axis=1), np.nan)  # k increases along the row
        count = ok.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # anchors without pairs
            mq = np.nanmean(rank_q, axis=1, keepdims=True)
            mk = np.nanmean(rank_k, axis=1, keepdims=True)
            cov = np.nansum((rank_q - mq) * (rank_k - mk), axis=1)
            rho = cov / np.sqrt(np.nansum((rank_q - mq) ** 2, axis=1) * np.nansum((rank_k - mk) ** 2, axis=1))
        rhos.append(rho[(count >= 3) & np.isfinite(rho) & ~flat_row])  # a constant row has no rank order
    rhos = np.concatenate(rhos) if rhos else np.array([])
    return (float(rhos.mean()) if rhos.size else math.nan), (rises / steps if steps else math.nan)


def translation_variance_ratio(profile: SimilarityProfile) -> float:
    """Departure from translation invariance (Wang et al. 2021, §3), from the exact profile.

    Translation invariance asks S[i, i + k] to be the same at every anchor i.
    Over all pairs i < j within the profile's max_distance (distance ≥ 1),
    the within-diagonal sum of squares over the total sum of squares::

        Σ_k n_k · std_k²  /  Σ_k n_k · (std_k² + (mean_k − grand mean)²)

    0: exactly translation invariant (every diagonal constant: sinusoidal,
    RoPE); 1: distance explains none of the spread of S (a random table,
    up to the O(max_distance / n_pairs) share the diagonal means take by chance).
    """
    k = profile.distance >= 1
    n, mean, std = profile.n_pairs[k].astype(float), profile.mean_similarity[k], profile.std_similarity[k]
    use = n > 0
    n, mean, std = n[use], mean[use], std[use]
    if n.sum() == 0:
        return math.nan
    grand = np.sum(n * mean) / np.sum(n)
    within = float(np.sum(n * std**2))
    total = within + float(np.sum(n * (mean - grand) ** 2))
    return within / total if total > 0 else 0.0


def kernel_asymmetry(queries, keys, anchors=None) -> float:
    """Departure from symmetry (Wang et al. 2021, §3) of the kernel K[i, j] = ⟨q_i, k_j⟩.

    ‖K − Kᵀ‖_F / ‖K‖_F over the anchor rows and columns (i ∈ anchors, all
    j), without forming K. 0 for any Gram matrix (``queries is keys``: returned
    without computing), so 0 for cosine similarity by construction; meaningful for asymmetric kernels such
    as attention logits with distinct query and key vectors, e.g. RoPE
    scores ⟨R_i q, R_j k⟩ with q ≠ k.

    Parameters
    ----------
    queries, keys : ndarray of shape (n_positions, dim)
    anchors : ndarray of int, optional
        Default every position.

    Returns
    -------
    float in [0, 2]
    """
    if queries is keys:  # a Gram matrix: symmetric by construction, nothing to compute
        return 0.0
    q, k = np.asarray(queries, dtype=float), np.asarray(keys, dtype=float)
    if q.shape != k.shape or q.ndim != 2:
        raise ValueError(f"queries and keys must be 2-D arrays of one shape, got {q.shape} and {k.shape}")
    anchors = np.arange(len(q)) if anchors is None else np.asarray(anchors)
    diff = norm = 0.0
    for rows in _row_blocks(anchors, len(q)):
        forward = q[rows] @ k.T          # K[i, :]
        backward = (q @ k[rows].T).T     # K[:, i]ᵀ
        diff += float(np.sum((forward - backward) ** 2))
        norm += float(np.sum(forward**2))
    return math.sqrt(diff / norm) if norm > 0 else math.nan


def locality(units: UnitRows, anchors=None) -> float:
    """Locality of Chen et al. (2023): (1/|anchors|) Σ_i Σ_j A_ij 2^(−|i−j|).

    Chen et al. define it for row-stochastic attention matrices. A cosine
    similarity row is turned into one without a temperature: negative
    similarities get no weight, A_ij = max(S_ij, 0) / Σ_j' max(S_ij', 0)
    (all positions j, excluded positions weigh 0). 1: every position is
    similar only to itself; a random Gaussian table of width d and n positions
    gives about (1 + 2c) / (1 + (n − 1) c) with c = E[max(S, 0)] = 1 / sqrt(2π d)
    (the self-weight diluted by chance positive similarities; 0.069 at n = 300,
    d = 64).

    Parameters
    ----------
    units : UnitRows
    anchors : ndarray of int, optional
        Rows i averaged over; default :func:`anchor_positions`.
    """
    u, valid = units.vectors, units.valid
    n = len(u)
    anchors = anchor_positions(n)[0] if anchors is None else np.asarray(anchors)
    anchors = anchors[valid[anchors]]
    offsets = np.arange(-_LOCALITY_REACH, _LOCALITY_REACH + 1)
    values = []
    for rows in _row_blocks(anchors, n):
        s = np.clip(u[rows] @ u.T, 0.0, 1.0)  # excluded columns are zero vectors: weight 0
        s[np.arange(rows.size), rows] = 1.0
        cols = rows[:, None] + offsets[None, :]
        inside = (cols >= 0) & (cols < n)
        near = np.where(inside, s[np.arange(rows.size)[:, None], np.clip(cols, 0, n - 1)], 0.0)
        values.append((near * 2.0 ** -np.abs(offsets)).sum(axis=1) / s.sum(axis=1))
    return float(np.concatenate(values).mean()) if values else math.nan


@dataclasses.dataclass(frozen=True)
class Properties:
    """Property metrics of one table; ``to_frame()`` gives one row per metric."""

    values: dict
    n_anchors: dict
    anchor_step: dict

    def to_frame(self) -> pd.DataFrame:
        """Columns metric, value, n_anchors, anchor_step, reference."""
        return pd.DataFrame({
            "metric": list(self.values),
            "value": list(self.values.values()),
            "n_anchors": [self.n_anchors[m] for m in self.values],
            "anchor_step": [self.anchor_step[m] for m in self.values],
            "reference": [_REFERENCES[m] for m in self.values],
        })


_REFERENCES = {
    "monotonicity_spearman": "Wang et al. 2021",
    "monotonicity_violation_rate": "Wang et al. 2021",
    "translation_variance_ratio": "Wang et al. 2021",
    "symmetry_deviation": "Wang et al. 2021",
    "locality": "Chen et al. 2023",
}


def table_properties(units: UnitRows, profile: SimilarityProfile, *, max_anchors: int = MAX_ANCHORS,
                     max_entries: int = MAX_ENTRIES) -> Properties:
    """Every property metric of one table (see the module docstring).

    Parameters
    ----------
    units : UnitRows
        Unit rows of the table (as analysed).
    profile : SimilarityProfile
        Its profile (gives max_distance and translation invariance).
    max_anchors, max_entries : int
        Anchor budget of the anchor-based metrics (:func:`anchor_positions`).

    Returns
    -------
    Properties
        Metrics ``monotonicity_spearman``, ``monotonicity_violation_rate``,
        ``translation_variance_ratio``, ``symmetry_deviation`` (‖S − Sᵀ‖_F / ‖S‖_F)
        and ``locality``, with the anchors each used. For
        ``translation_variance_ratio`` these are the anchors of the profile's
        standard deviation: every position when it is exact (step 1), else
        the stratified sample's size and stratum width (n_positions // 128).
    """
    n = len(units.vectors)
    anchors, step = anchor_positions(n, max_anchors, max_entries)
    max_distance = int(profile.distance[-1])
    rho, violations = monotonicity(units, max_distance, anchors)
    values = {
        "monotonicity_spearman": rho,
        "monotonicity_violation_rate": violations,
        "translation_variance_ratio": translation_variance_ratio(profile),
        "symmetry_deviation": kernel_asymmetry(units.vectors, units.vectors, anchors),
        "locality": locality(units, anchors),
    }
    if profile.std_exact:
        std_anchors, std_step = n, 1
    else:  # the profile's std comes from a stratified anchor sample
        std_anchors = int(_stratified_anchors(n, _STD_ANCHORS, np.random.default_rng(_STD_SEED)).size)
        std_step = n // _STD_ANCHORS
    n_anchors = {m: int(anchors.size) for m in values} | {"translation_variance_ratio": std_anchors}
    steps = {m: step for m in values} | {"translation_variance_ratio": std_step}
    return Properties(values, n_anchors, steps)
