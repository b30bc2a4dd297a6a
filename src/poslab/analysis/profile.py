"""The similarity profile: mean and spread of S[i, i + k] over i, for each distance k."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .._validation import check_positive_int
from .similarity import UnitRows, unit_rows

__all__ = ["SimilarityProfile", "similarity_profile"]

#: Largest number of entries of S held at once (32 MiB of float64).
_BLOCK_ENTRIES = 4_000_000


@dataclasses.dataclass(frozen=True)
class SimilarityProfile:
    """Mean cosine similarity by distance.

    Attributes
    ----------
    distance : ndarray of int, shape (max_distance + 1,)
        0, 1, ..., max_distance, in positions.
    mean_similarity : ndarray of shape (max_distance + 1,)
        Mean over i of S[i, i + distance] (valid pairs only; NaN where none).
    std_similarity : ndarray of shape (max_distance + 1,)
        Population standard deviation (ddof 0) of the same entries.
    n_pairs : ndarray of int, shape (max_distance + 1,)
        Number of valid pairs at each distance (n_positions − distance when
        no position is excluded).
    n_positions : int
    excluded_positions : tuple of int
        Positions whose zero or non-finite vectors were excluded.
    center : bool
        Whether the mean position vector was subtracted first.
    """

    distance: np.ndarray
    mean_similarity: np.ndarray
    std_similarity: np.ndarray
    n_pairs: np.ndarray
    n_positions: int
    excluded_positions: tuple[int, ...] = ()
    center: bool = False

    def to_frame(self) -> pd.DataFrame:
        """Columns distance, mean_similarity, std_similarity, n_pairs."""
        return pd.DataFrame(
            {
                "distance": self.distance,
                "mean_similarity": self.mean_similarity,
                "std_similarity": self.std_similarity,
                "n_pairs": self.n_pairs,
            }
        )


def similarity_profile(table, *, max_distance: int | None = None, center: bool = False,
                       invalid: str = "exclude") -> SimilarityProfile:
    """Mean and standard deviation of cosine similarity at each distance.

    For k = 0..max_distance, summarises the k-th diagonal of S over the
    positions i whose pair (i, i + k) is valid. Equal to the plain O(n²)
    loop over diagonals, computed block by block: rows are taken in blocks
    whose strip of S (block rows × (block + max_distance) columns) is formed
    with one matrix product; per-distance means and squared deviations are
    merged across blocks with Chan et al.'s pairwise update, so the standard
    deviation keeps full precision even where it is ~0. Peak memory is
    O(n · dim + 4·10⁶) floats whatever n.

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
    max_distance : int, optional
        Largest distance, 0 <= max_distance < n_positions (default n_positions − 1).
    center : bool
        Subtract the mean position vector first.
    invalid : {"exclude", "raise"}
        Zero or non-finite rows: excluded with a warning, or an error.

    Returns
    -------
    SimilarityProfile

    Raises
    ------
    ValueError
        Bad ``max_distance``; invalid rows with ``invalid="raise"``.
    """
    units = unit_rows(table, center=center, invalid=invalid)
    n = len(units.vectors)
    max_distance = n - 1 if max_distance is None else check_positive_int(max_distance, "max_distance", minimum=0)
    if max_distance >= n:
        raise ValueError(f"max_distance must be < n_positions = {n}, got {max_distance}")
    return _similarity_profile(units, max_distance)


def _similarity_profile(units: UnitRows, max_distance: int) -> SimilarityProfile:
    """Computing twin of :func:`similarity_profile` on checked unit rows."""
    u, valid = units.vectors, units.valid
    n = len(u)
    size = max_distance + 1
    count = np.zeros(size)
    mean = np.zeros(size)
    m2 = np.zeros(size)
    # rows per block b such that the strip b × (b + max_distance) holds at most _BLOCK_ENTRIES
    block = int((-max_distance + np.sqrt(max_distance**2 + 4 * _BLOCK_ENTRIES)) / 2)
    block = max(1, min(n, block))
    for r0 in range(0, n, block):
        r1 = min(n, r0 + block)
        c1 = min(n, r1 + max_distance)
        s = np.clip(u[r0:r1] @ u[r0:c1].T, -1.0, 1.0)
        k = np.arange(r0, c1)[None, :] - np.arange(r0, r1)[:, None]
        keep = (k >= 0) & (k <= max_distance) & valid[r0:r1, None] & valid[None, r0:c1]
        k, s = k[keep], s[keep]
        s[k == 0] = 1.0
        b_count = np.bincount(k, minlength=size).astype(float)
        seen = b_count > 0
        b_mean = np.zeros(size)
        b_mean[seen] = np.bincount(k, weights=s, minlength=size)[seen] / b_count[seen]
        b_m2 = np.bincount(k, weights=(s - b_mean[k]) ** 2, minlength=size)
        total = count + b_count
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = b_mean - mean
            mean = np.where(seen, mean + delta * b_count / total, mean)
            m2 = np.where(seen, m2 + b_m2 + delta**2 * count * b_count / total, m2)
        count = total
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(count > 0, mean, np.nan)
        std = np.where(count > 0, np.sqrt(m2 / count), np.nan)
    return SimilarityProfile(
        distance=np.arange(size),
        mean_similarity=mean,
        std_similarity=std,
        n_pairs=count.astype(np.int64),
        n_positions=n,
        excluded_positions=units.excluded_positions,
        center=units.center,
    )
