"""Similarity of vision position tables on their 2-D patch grid.

A vision transformer's table, after its prefix tokens (CLS, ...), holds one
row per patch in raster order: patch (r, c) is row ``r * cols + c``. On the
flattened index, "distance 1" mixes horizontal neighbours with the wrap from
the end of one row to the start of the next; here pairs are grouped by their
distance on the grid instead:

- ``euclidean``: √(Δr² + Δc²)
- ``manhattan``: |Δr| + |Δc|
- ``along_row``: pairs in the same row, distance |Δc| (horizontal neighbours at 1)
- ``along_column``: pairs in the same column, distance |Δr| (vertical neighbours at 1)

Each unordered pair of patches is counted once; distance 0 pairs each patch
with itself (similarity 1), as in :func:`poslab.analysis.similarity_profile`.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .similarity import unit_rows

__all__ = ["GridSimilarity", "grid_similarity", "parse_grid", "GRID_METRICS"]

GRID_METRICS = ("euclidean", "manhattan", "along_row", "along_column")


def parse_grid(text: str) -> tuple[int, int]:
    """``"27x27"`` -> (27, 27).

    Raises
    ------
    ValueError
        Not ``ROWSxCOLS`` with positive integers.
    """
    parts = str(text).lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"grid must be 'ROWSxCOLS' with positive integers, e.g. '27x27'; got {text!r}")
    return int(parts[0]), int(parts[1])


@dataclasses.dataclass(frozen=True)
class GridSimilarity:
    """Cosine similarity of patch positions against their distance on the grid.

    Attributes
    ----------
    grid : tuple of int
        (rows, cols) of the patch grid.
    metric : ndarray of str, shape (n,)
        One of :data:`GRID_METRICS` per entry.
    distance : ndarray of float, shape (n,)
        Grid distance in patches (integers except for ``euclidean``).
    mean_similarity, std_similarity : ndarray of float, shape (n,)
        Mean and population standard deviation of the cosine similarity over
        the pairs at that distance.
    n_pairs : ndarray of int, shape (n,)
        Unordered pairs of valid patches averaged.
    reference : tuple of int
        (row, col) of the centre patch, ``(rows // 2, cols // 2)``.
    reference_similarity : ndarray of shape (rows, cols)
        Cosine similarity of every patch to the centre patch (NaN for excluded patches).
    """

    grid: tuple[int, int]
    metric: np.ndarray
    distance: np.ndarray
    mean_similarity: np.ndarray
    std_similarity: np.ndarray
    n_pairs: np.ndarray
    reference: tuple[int, int]
    reference_similarity: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """Tidy table: metric, distance, mean_similarity, std_similarity, n_pairs."""
        return pd.DataFrame({"metric": self.metric, "distance": self.distance, "mean_similarity": self.mean_similarity,
                             "std_similarity": self.std_similarity, "n_pairs": self.n_pairs})

    def map_frame(self) -> pd.DataFrame:
        """Tidy table of the centre patch's similarity map: row, col, reference_row, reference_col, similarity."""
        rows, cols = np.indices(self.grid)
        return pd.DataFrame({"row": rows.ravel(), "col": cols.ravel(), "reference_row": self.reference[0],
                             "reference_col": self.reference[1], "similarity": self.reference_similarity.ravel()})

    def neighbour_similarity(self, metric: str) -> float:
        """Mean similarity of adjacent patches ``along_row`` (horizontal) or ``along_column`` (vertical)."""
        if metric not in ("along_row", "along_column"):
            raise ValueError(f"metric must be 'along_row' or 'along_column', got {metric!r}")
        hit = (self.metric == metric) & (self.distance == 1)
        if not hit.any():
            raise ValueError(f"the {self.grid[0]}x{self.grid[1]} grid has no neighbours {metric}")
        return float(self.mean_similarity[hit][0])


def grid_similarity(table, grid) -> GridSimilarity:
    """Similarity against 2-D grid distance for a table of patch positions.

    Parameters
    ----------
    table : array_like of shape (rows * cols, dim)
        Patch position vectors in raster order (prefix tokens removed).
    grid : tuple of int or str
        ``(rows, cols)`` or ``"ROWSxCOLS"``.

    Returns
    -------
    GridSimilarity

    Raises
    ------
    ValueError
        The table does not have rows * cols positions.

    Notes
    -----
    Forms the (rows·cols)² cosine matrix once (BLAS), then averages it over
    each displacement (Δr, Δc) and merges displacements by distance with
    Chan et al.'s pairwise update, so means and standard deviations are exact
    in float64 up to rounding. Zero or non-finite rows are excluded with an
    :class:`~poslab.analysis.InvalidPositionsWarning`.
    """
    gh, gw = parse_grid(grid) if isinstance(grid, str) else (int(grid[0]), int(grid[1]))
    units = unit_rows(table)
    n = gh * gw
    if len(units.vectors) != n:
        raise ValueError(f"a {gh}x{gw} grid has {n} patches but the table has {len(units.vectors)} rows; "
                         "remove prefix tokens (CLS) first, or give the right grid")
    s = np.clip(units.vectors @ units.vectors.T, -1.0, 1.0)
    np.fill_diagonal(s, 1.0)
    s[~units.valid] = np.nan
    s[:, ~units.valid] = np.nan
    s4 = s.reshape(gh, gw, gh, gw)
    disp, count, mean, m2 = [], [], [], []
    for dr in range(gh):
        for dc in range(-(gw - 1), gw):
            if dr == 0 and dc < 0:
                continue  # unordered pairs: each displacement once
            c0 = max(0, -dc)
            r_idx, c_idx = np.meshgrid(np.arange(gh - dr), np.arange(c0, gw - max(0, dc)), indexing="ij")
            vals = s4[r_idx, c_idx, r_idx + dr, c_idx + dc]
            vals = vals[np.isfinite(vals)]
            if vals.size == 0:
                continue
            mu = vals.mean()
            disp.append((dr, abs(dc)))
            count.append(vals.size)
            mean.append(mu)
            m2.append(((vals - mu) ** 2).sum())
    disp = np.array(disp)
    count, mean, m2 = np.array(count, dtype=np.int64), np.array(mean), np.array(m2)
    dr, dc = disp[:, 0], disp[:, 1]
    groups = {
        "euclidean": (np.ones_like(dr, bool), dr**2 + dc**2),
        "manhattan": (np.ones_like(dr, bool), dr + dc),
        "along_row": (dr == 0, dc),
        "along_column": (dc == 0, dr),
    }
    out = {k: [] for k in ("metric", "distance", "mean", "std", "n")}
    for metric, (use, key) in groups.items():
        for k in np.unique(key[use]):
            sel = use & (key == k)
            n_k = count[sel].sum()
            mu = (count[sel] * mean[sel]).sum() / n_k
            var = (m2[sel] + count[sel] * (mean[sel] - mu) ** 2).sum() / n_k
            out["metric"].append(metric)
            out["distance"].append(np.sqrt(k) if metric == "euclidean" else float(k))
            out["mean"].append(mu)
            out["std"].append(np.sqrt(max(var, 0.0)))
            out["n"].append(n_k)
    ref = (gh // 2, gw // 2)
    return GridSimilarity(
        grid=(gh, gw),
        metric=np.array(out["metric"]),
        distance=np.array(out["distance"], dtype=float),
        mean_similarity=np.array(out["mean"]),
        std_similarity=np.array(out["std"]),
        n_pairs=np.array(out["n"], dtype=np.int64),
        reference=ref,
        reference_similarity=s4[ref[0], ref[1]].copy(),
    )
