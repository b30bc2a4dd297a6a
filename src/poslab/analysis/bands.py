"""Band metrics: how far the similarity band around the diagonal reaches."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

__all__ = ["BandMetrics", "band_metrics", "first_crossings", "DEFAULT_THRESHOLDS"]

DEFAULT_THRESHOLDS = (0.9, 0.5)


@dataclasses.dataclass(frozen=True)
class BandMetrics:
    """Band width at each similarity threshold.

    Attributes
    ----------
    threshold : ndarray of shape (n_thresholds,)
        Cosine-similarity levels.
    width : ndarray of float, shape (n_thresholds,)
        First distance (positions) at which the mean profile falls below the
        threshold; NaN if it never does up to the profile's max_distance.
    recrosses : ndarray of bool
        True if the profile rises back to >= threshold at a larger distance
        (an oscillating profile, e.g. sinusoidal, case C2).
    crossings : ndarray of int
        Number of downward crossings (from >= threshold to < threshold) in all.
    """

    threshold: np.ndarray
    width: np.ndarray
    recrosses: np.ndarray
    crossings: np.ndarray

    def to_frame(self) -> pd.DataFrame:
        """Columns threshold, width (nullable Int64), recrosses, crossings."""
        return pd.DataFrame(
            {
                "threshold": self.threshold,
                "width": pd.array([None if np.isnan(w) else int(w) for w in self.width], dtype="Int64"),
                "recrosses": self.recrosses,
                "crossings": self.crossings,
            }
        )


def band_metrics(profile, thresholds=DEFAULT_THRESHOLDS) -> BandMetrics:
    """Band width (first crossing) and re-crossings of a similarity profile.

    Parameters
    ----------
    profile : SimilarityProfile or array_like of shape (max_distance + 1,)
        Mean similarity at distances 0, 1, ...; NaN entries (no valid pair)
        are skipped.
    thresholds : sequence of float
        Similarity levels in [−1, 1].

    Returns
    -------
    BandMetrics

    Raises
    ------
    ValueError
        A threshold outside [−1, 1], or an empty profile.
    """
    mean = np.asarray(getattr(profile, "mean_similarity", profile), dtype=np.float64)
    distance = np.asarray(getattr(profile, "distance", np.arange(mean.size)))
    thresholds = np.atleast_1d(np.asarray(thresholds, dtype=np.float64))
    if mean.ndim != 1 or mean.size == 0:
        raise ValueError(f"profile must be a non-empty 1-D array of mean similarities, got shape {mean.shape}")
    if np.any(np.abs(thresholds) > 1) or not np.isfinite(thresholds).all():
        raise ValueError(f"thresholds must lie in [-1, 1], got {thresholds.tolist()}")
    ok = np.isfinite(mean)
    mean, distance = mean[ok], distance[ok]
    first = first_crossings(distance, mean[None, :], thresholds)[0]
    widths = np.where(np.isinf(first), np.nan, first)
    recrosses, crossings = [], []
    for t, width in zip(thresholds, widths):
        below = mean < t
        down = np.flatnonzero(~below[:-1] & below[1:]) + 1
        crossings.append(down.size + int(below[0]) if below.size else 0)
        recrosses.append(bool(np.isfinite(width) and (~below[distance >= width]).any()))
    return BandMetrics(thresholds, widths, np.array(recrosses), np.array(crossings, dtype=np.int64))


def first_crossings(distance, profiles, thresholds) -> np.ndarray:
    """First distance at which each profile falls below each threshold (the band width).

    Parameters
    ----------
    distance : array_like of shape (n_distances,)
        Distances in positions, increasing.
    profiles : array_like of shape (n_profiles, n_distances)
        Mean similarities; NaN entries (no pair) are skipped.
    thresholds : sequence of float

    Returns
    -------
    ndarray of shape (n_profiles, n_thresholds)
        Widths in positions; +inf where a profile never falls below the
        threshold (beyond the window).
    """
    p = np.asarray(profiles, dtype=float)
    d = np.asarray(distance, dtype=float)
    out = np.empty((p.shape[0], len(thresholds)))
    for j, t in enumerate(thresholds):
        below = p < t  # NaN compares False: skipped
        out[:, j] = np.where(below.any(axis=1), d[np.argmax(below, axis=1)], np.inf)
    return out
