"""Block-averaged similarity matrices for figures, in O(n · dim) without forming S."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .._validation import check_positive_int
from .similarity import UnitRows, unit_rows

__all__ = ["BlockSimilarity", "block_similarity", "kernel_block_means"]


@dataclasses.dataclass(frozen=True)
class BlockSimilarity:
    """Mean cosine similarity over each pair of position blocks.

    Attributes
    ----------
    edges : ndarray of int, shape (bins + 1,)
        Block boundaries in positions; block b covers [edges[b], edges[b+1]).
    mean_similarity : ndarray of shape (bins, bins)
        Mean of S over the valid pairs of each block pair (diagonal pairs included).
    """

    edges: np.ndarray
    mean_similarity: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """One row per block pair: row_start, row_stop, col_start, col_stop, mean_similarity."""
        b = len(self.edges) - 1
        r, c = np.divmod(np.arange(b * b), b)
        return pd.DataFrame(
            {
                "row_start": self.edges[r],
                "row_stop": self.edges[r + 1],
                "col_start": self.edges[c],
                "col_stop": self.edges[c + 1],
                "mean_similarity": self.mean_similarity.ravel(),
            }
        )


def block_similarity(table, *, bins: int = 128, center: bool = False) -> BlockSimilarity:
    """Block-averaged cosine-similarity matrix.

    The mean of S over blocks A × B is (Σ_{i∈A} u_i) · (Σ_{j∈B} u_j) / (|A| |B|)
    for unit vectors u, so the whole picture costs O(n · dim + bins² · dim)
    and never holds the n × n matrix (case C13). Excluded (zero or
    non-finite) positions count in neither sum nor size.

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
    bins : int
        Number of blocks per axis (at most n_positions; blocks are near-equal,
        edges ``linspace(0, n, bins + 1)`` rounded down).
    center : bool
        Subtract the mean position vector first.

    Returns
    -------
    BlockSimilarity
    """
    return _block_similarity(unit_rows(table, center=center), check_positive_int(bins, "bins"))


def _block_similarity(units: UnitRows, bins: int) -> BlockSimilarity:
    """Computing twin of :func:`block_similarity` on checked unit rows."""
    n = len(units.vectors)
    bins = min(bins, n)
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    sums = np.add.reduceat(units.vectors, edges[:-1], axis=0)
    sizes = np.add.reduceat(units.valid.astype(float), edges[:-1])
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (sums @ sums.T) / np.outer(sizes, sizes)
    return BlockSimilarity(edges, np.clip(mean, -1.0, 1.0))


def kernel_block_means(kernel, n_positions: int, bins: int = 128) -> BlockSimilarity:
    """Block means of the n × n Toeplitz matrix K[i, j] = κ(j − i) of a kernel, never forming it.

    κ is the kernel's mean over heads (:meth:`Kernel.matrix_values
    <poslab.encodings.kernel.Kernel.matrix_values>`): forward for j > i,
    backward for j < i; entries a causal kernel does not cover (NaN) count in
    neither sum nor size, so a block wholly above the diagonal is NaN. The
    heatmap of a translation-invariant table (block_similarity of its unit
    rows) equals this one of its kernel (to ~1e-13).

    Parameters
    ----------
    kernel : poslab.encodings.kernel.Kernel
        Up to distance n_positions − 1 at least.
    n_positions : int
    bins : int
        Blocks per axis (at most n_positions; edges as :func:`block_similarity`).

    Returns
    -------
    BlockSimilarity

    Notes
    -----
    With C(d) = Σ_{d' <= d} κ(d') and H(d) = Σ_{d' <= d} C(d') over offsets
    d = j − i, the sum over a block [r0, r1) × [c0, c1) is
    H(c1−1−r0) − H(c1−1−r1) − H(c0−1−r0) + H(c0−1−r1) (and the same with
    counts of covered entries, in integers): O(n + bins²) time and memory, the sums in extended
    precision (long double).
    """
    n = check_positive_int(n_positions, "n_positions")
    bins = min(check_positive_int(bins, "bins"), n)
    if kernel.max_distance < n - 1:
        raise ValueError(f"the heatmap of {n} positions needs the kernel up to distance {n - 1}, "
                         f"got {kernel.max_distance}")
    offset, value = kernel.matrix_values(n - 1)  # offsets -(n-1)..n-1
    covered = np.isfinite(value)
    # prefix sums over offsets, with a leading 0 for offsets below -(n-1): index x + n gives H(x) for x >= -n
    wide = np.longdouble  # the double prefix sums reach ~n²: extended precision keeps block means to ~1e-13
    sums = np.concatenate([[0.0], np.cumsum(np.cumsum(np.where(covered, value, 0.0), dtype=wide))])
    counts = np.concatenate([[0.0], np.cumsum(np.cumsum(covered, dtype=np.int64))])
    edges = np.linspace(0, n, bins + 1).astype(np.int64)
    r0, r1 = edges[:-1, None], edges[1:, None]
    c0, c1 = edges[None, :-1], edges[None, 1:]

    def block(h):
        def at(x):
            return h[np.clip(x + n, 0, 2 * n - 1)]
        return at(c1 - 1 - r0) - at(c1 - 1 - r1) - at(c0 - 1 - r0) + at(c0 - 1 - r1)

    count = block(counts)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, (block(sums) / count).astype(np.float64), np.nan)
    return BlockSimilarity(edges, np.clip(mean, -1.0, 1.0))
