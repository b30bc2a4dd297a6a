"""Block-averaged similarity matrices for figures, in O(n · dim) without forming S."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .._validation import check_positive_int
from .similarity import UnitRows, unit_rows

__all__ = ["BlockSimilarity", "block_similarity"]


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
