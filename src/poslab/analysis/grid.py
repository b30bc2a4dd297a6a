"""Similarity of position vectors on their grid: (h, w) patches or (t, h, w) video patches.

Positions that are points of a grid — a vision transformer's patches, the
(t, h, w) positions of M-RoPE, an axial RoPE or a 2-D sin-cos table — are
rows of the table in C order: with grid shape (H, W) point (h, w) is row
``h * W + w``; with (T, H, W) point (t, h, w) is row ``(t * H + h) * W + w``.
On the flattened index, "distance 1" mixes horizontal neighbours with the wrap
from the end of one row to the start of the next; here pairs are grouped by
their displacement on the grid instead (:func:`grid_similarity`):

- jointly, by displacement (Δt, Δh, Δw) (or (Δh, Δw)), one unordered pair
  counted once, under the displacement whose first non-zero component is
  positive (cosine similarity is symmetric, so d and −d hold the same pairs);
- ``euclidean``: √(Σ Δ²) over every axis (one frame step counts as one patch step);
- ``manhattan``: Σ |Δ|;
- ``along_row``: pairs in the same row (and frame), distance |Δw|;
- ``along_column``: pairs in the same column (and frame), distance |Δh|;
- ``along_frame`` (3-D grids): pairs at the same (h, w), distance |Δt|.

Distance 0 pairs each point with itself (similarity 1), as in
:func:`poslab.analysis.similarity_profile`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a frame is built: parsing a grid (poslab.encodings) needs none
    import pandas as pd

from .similarity import unit_rows

__all__ = ["GridSimilarity", "grid_similarity", "parse_grid", "parse_grid_shape", "GRID_METRICS", "AXIS_METRICS"]

GRID_METRICS = ("euclidean", "manhattan", "along_row", "along_column", "along_frame")
#: The metric of pairs that differ along one axis only, by number of axes: (t,) h, w.
AXIS_METRICS = {2: ("along_column", "along_row"), 3: ("along_frame", "along_column", "along_row")}
# Pairs of points compared at once (peak memory ~ 40 bytes each: ~40 MiB).
_CHUNK_PAIRS = 1 << 20


def parse_grid(text: str) -> tuple[int, int]:
    """``"27x27"`` -> (27, 27): the 2-D patch grid of a vision table.

    Raises
    ------
    ValueError
        Not ``ROWSxCOLS`` with positive integers.
    """
    parts = str(text).lower().split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"grid must be 'ROWSxCOLS' with positive integers, e.g. '27x27'; got {text!r}")
    return int(parts[0]), int(parts[1])


def parse_grid_shape(text, axes: tuple[int, ...] = (2, 3)) -> tuple[int, ...]:
    """``"4x16x16"`` -> (4, 16, 16), ``"16x16"`` -> (16, 16): a grid of (t,) h, w points.

    Parameters
    ----------
    text : str or sequence of int
    axes : tuple of int
        Numbers of axes accepted.

    Raises
    ------
    ValueError
        Not ``TxHxW`` / ``HxW`` with positive integers, or another number of axes.
    """
    parts = [str(p) for p in text] if isinstance(text, (tuple, list)) else str(text).lower().split("x")
    want = " or ".join({2: "'HxW' (e.g. '16x16')", 3: "'TxHxW' (e.g. '4x16x16')"}[a] for a in axes)
    if len(parts) not in axes or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"grid must be {want} with positive integers (frames x rows x columns); got {text!r}")
    return tuple(int(p) for p in parts)


@dataclasses.dataclass(frozen=True)
class GridSimilarity:
    """Cosine similarity of grid positions against their displacement and distance on the grid.

    Attributes
    ----------
    grid : tuple of int
        (rows, cols) or (frames, rows, cols).
    metric : ndarray of str, shape (n,)
        One of :data:`GRID_METRICS` per entry.
    distance : ndarray of float, shape (n,)
        Grid distance in grid steps (integers except for ``euclidean``).
    mean_similarity, std_similarity : ndarray of float, shape (n,)
        Mean and population standard deviation of the cosine similarity over
        the pairs at that distance.
    n_pairs : ndarray of int, shape (n,)
        Unordered pairs of valid points averaged.
    displacement : ndarray of int, shape (m, n_axes)
        Every displacement that has a pair, first non-zero component positive (the zero one first).
    displacement_mean, displacement_std : ndarray of float, shape (m,)
        Mean and population standard deviation of the similarity over the pairs at that displacement.
    displacement_n_pairs : ndarray of int, shape (m,)
    reference : tuple of int
        The centre point, ``size // 2`` on every axis.
    reference_similarity : ndarray of the grid's shape
        Cosine similarity of every point to the centre point (NaN for excluded points).
    """

    grid: tuple[int, ...]
    metric: np.ndarray
    distance: np.ndarray
    mean_similarity: np.ndarray
    std_similarity: np.ndarray
    n_pairs: np.ndarray
    displacement: np.ndarray
    displacement_mean: np.ndarray
    displacement_std: np.ndarray
    displacement_n_pairs: np.ndarray
    reference: tuple[int, ...]
    reference_similarity: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """Tidy table: metric, distance, mean_similarity, std_similarity, n_pairs."""
        import pandas as pd

        return pd.DataFrame({"metric": self.metric, "distance": self.distance, "mean_similarity": self.mean_similarity,
                             "std_similarity": self.std_similarity, "n_pairs": self.n_pairs})

    def displacement_frame(self) -> pd.DataFrame:
        """Tidy table: dt (empty for 2-D grids), dh, dw, mean_similarity, std_similarity, n_pairs."""
        import pandas as pd

        d = self.displacement
        dt = pd.array(d[:, 0], dtype="Int64") if d.shape[1] == 3 else pd.array([None] * len(d), dtype="Int64")
        return pd.DataFrame({"dt": dt, "dh": d[:, -2], "dw": d[:, -1], "mean_similarity": self.displacement_mean,
                             "std_similarity": self.displacement_std, "n_pairs": self.displacement_n_pairs})

    def map_frame(self) -> pd.DataFrame:
        """Tidy table of the centre point's similarity map: frame (empty for 2-D grids), row, col,
        reference_frame, reference_row, reference_col, similarity."""
        import pandas as pd

        idx = np.indices(self.grid).reshape(len(self.grid), -1)
        three = len(self.grid) == 3
        n = idx.shape[1]
        frame = pd.array(idx[0] if three else [None] * n, dtype="Int64")
        ref_frame = pd.array([self.reference[0] if three else None] * n, dtype="Int64")
        return pd.DataFrame({"frame": frame, "row": idx[-2], "col": idx[-1], "reference_frame": ref_frame,
                             "reference_row": self.reference[-2], "reference_col": self.reference[-1],
                             "similarity": self.reference_similarity.ravel()})

    def neighbour_similarity(self, metric: str) -> float:
        """Mean similarity of adjacent points ``along_row`` (horizontal), ``along_column`` (vertical) or
        ``along_frame`` (consecutive frames)."""
        if metric not in GRID_METRICS[2:]:
            raise ValueError(f"metric must be one of {', '.join(GRID_METRICS[2:])}, got {metric!r}")
        hit = (self.metric == metric) & (self.distance == 1)
        if not hit.any():
            raise ValueError(f"the {'x'.join(map(str, self.grid))} grid has no neighbours {metric}")
        return float(self.mean_similarity[hit][0])


def grid_similarity(table, grid) -> GridSimilarity:
    """Similarity against displacement and distance on a 2-D or 3-D grid.

    Parameters
    ----------
    table : array_like of shape (prod(grid), dim)
        Position vectors of the grid points in C order (prefix tokens removed).
    grid : tuple of int or str
        ``(rows, cols)``, ``(frames, rows, cols)``, ``"HxW"`` or ``"TxHxW"``.

    Returns
    -------
    GridSimilarity

    Raises
    ------
    ValueError
        The table does not have prod(grid) rows, or the grid is not 2-D or 3-D.

    Notes
    -----
    Exact in float64 up to rounding: the cosine of every pair of points
    (BLAS, in blocks of rows) is binned by displacement with
    ``numpy.bincount`` — the displacement of pair (i, j) is P[j] − P[i] in a
    mixed-radix code P of the coordinates — then each bin's spread is taken
    about its own mean (a second pass), and bins are merged into distances with
    Chan et al.'s pairwise update. Time O(N² · dim) for N = prod(grid)
    points, memory O(N · dim + chunk). Zero or non-finite rows are excluded
    with an :class:`~poslab.analysis.InvalidPositionsWarning`.
    """
    shape = parse_grid_shape(grid) if isinstance(grid, str) else parse_grid_shape(tuple(grid))
    units = unit_rows(table)
    n = int(np.prod(shape))
    if len(units.vectors) != n:
        what = "patches" if len(shape) == 2 else "points"
        raise ValueError(f"a {'x'.join(map(str, shape))} grid has {n} {what} but the table has "
                         f"{len(units.vectors)} rows; remove prefix tokens (CLS) first, or give the right grid")
    u, valid = units.vectors, units.valid
    coords = np.indices(shape).reshape(len(shape), n)  # (axes, n)
    extent = np.array([2 * s - 1 for s in shape])      # displacements -(s-1) .. s-1 per axis
    stride = np.cumprod(np.r_[extent[1:], 1][::-1])[::-1]
    code = stride @ coords                             # P[i]; the bin of (i, j) is P[j] − P[i] + centre
    centre = int(stride @ (np.array(shape) - 1))
    n_bins = int(np.prod(extent))
    rows = max(1, _CHUNK_PAIRS // n)
    every = bool(valid.all())

    def blocks():
        """(similarity, bin) of every ordered pair of valid points, a block of rows at a time."""
        for start in range(0, n, rows):
            stop = min(n, start + rows)
            s = np.clip(u[start:stop] @ u.T, -1.0, 1.0)
            s[np.arange(stop - start), np.arange(start, stop)] = 1.0
            bins = code[None, :] - code[start:stop, None] + centre
            if not every:
                ok = valid[start:stop, None] & valid[None, :]
                s, bins = s[ok], bins[ok]
            yield s.ravel(), bins.ravel()

    sums, counts = np.zeros(n_bins), np.zeros(n_bins)
    for s, bins in blocks():
        sums += np.bincount(bins, weights=s, minlength=n_bins)
        counts += np.bincount(bins, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    m2 = np.zeros(n_bins)
    for s, bins in blocks():  # second pass: squares about each bin's own mean (exact spread, 0 when it is 0)
        s -= means[bins]
        m2 += np.bincount(bins, weights=s * s, minlength=n_bins)
    disp = np.stack(np.unravel_index(np.arange(n_bins), tuple(extent)), axis=1) - (np.array(shape) - 1)
    first = np.take_along_axis(disp, np.argmax(disp != 0, axis=1)[:, None], axis=1)[:, 0]
    keep = (counts > 0) & (first >= 0)          # one of d, −d (they hold the same pairs); d = 0 once
    zero = ~disp.any(axis=1)
    order = np.argsort(~zero[keep], kind="stable")   # the zero displacement first
    disp, count, mean = disp[keep][order], counts[keep][order], means[keep][order]
    m2 = m2[keep][order]
    count_pairs = count.astype(np.int64)  # bin d holds each unordered pair at ±d once (its twin is bin −d)
    m2_pairs = m2
    a = np.abs(disp)
    groups = {"euclidean": (np.ones(len(a), bool), (a**2).sum(axis=1)), "manhattan": (np.ones(len(a), bool),
                                                                                       a.sum(axis=1))}
    for axis, metric in enumerate(AXIS_METRICS[len(shape)]):
        others = np.delete(a, axis, axis=1)
        groups[metric] = (~others.any(axis=1), a[:, axis])
    out = {k: [] for k in ("metric", "distance", "mean", "std", "n")}
    for metric in GRID_METRICS:
        if metric not in groups:
            continue
        use, key = groups[metric]
        for k in np.unique(key[use]):
            sel = use & (key == k)
            n_k = count_pairs[sel].sum()
            mu = (count_pairs[sel] * mean[sel]).sum() / n_k
            var = (m2_pairs[sel] + count_pairs[sel] * (mean[sel] - mu) ** 2).sum() / n_k
            out["metric"].append(metric)
            out["distance"].append(np.sqrt(k) if metric == "euclidean" else float(k))
            out["mean"].append(mu)
            out["std"].append(np.sqrt(max(var, 0.0)))
            out["n"].append(n_k)
    ref = tuple(s // 2 for s in shape)
    ref_row = int(np.ravel_multi_index(ref, shape))
    ref_sim = np.clip(u @ u[ref_row], -1.0, 1.0)
    ref_sim[ref_row] = 1.0
    ref_sim[~valid] = np.nan
    if not valid[ref_row]:
        ref_sim[:] = np.nan
    return GridSimilarity(
        grid=shape,
        metric=np.array(out["metric"]),
        distance=np.array(out["distance"], dtype=float),
        mean_similarity=np.array(out["mean"]),
        std_similarity=np.array(out["std"]),
        n_pairs=np.array(out["n"], dtype=np.int64),
        displacement=disp.astype(np.int64),
        displacement_mean=mean,
        displacement_std=np.sqrt(np.maximum(m2 / np.maximum(count, 1), 0.0)),
        displacement_n_pairs=count_pairs,
        reference=ref,
        reference_similarity=ref_sim.reshape(shape),
    )
