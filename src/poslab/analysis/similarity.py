"""Cosine similarity between positions, with invalid (zero or non-finite) rows excluded.

S[i, j] = ⟨x_i, x_j⟩ / (‖x_i‖ ‖x_j‖) in float64, clipped to [−1, 1], with an
exact 1 on the diagonal. A zero or non-finite row has no direction: its
positions are reported in a warning and its pairs are excluded (NaN in S,
left out of every mean), never counted as 0 (case C10).
"""

from __future__ import annotations

import dataclasses
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .._threads import analysis_threads
from .._validation import check_table

__all__ = ["InvalidPositionsWarning", "UnitRows", "unit_rows", "cosine_similarity"]

#: A row whose norm is at most this fraction of the largest norm counts as zero.
ZERO_NORM_RTOL = 1e-12
#: Entries per run of rows of the row-wise passes of :func:`unit_rows` (8 MiB of float64).
_ROW_ENTRIES = 2**20


class InvalidPositionsWarning(UserWarning):
    """Some positions have zero or non-finite vectors and are excluded."""


@dataclasses.dataclass(frozen=True)
class UnitRows:
    """Unit-normalised position vectors.

    Attributes
    ----------
    vectors : ndarray of shape (n_positions, dim)
        Row i is x_i / ‖x_i‖ (after centering, if asked); excluded rows are 0.
    valid : ndarray of bool, shape (n_positions,)
        False for excluded (zero or non-finite) rows.
    center : bool
        Whether the mean position vector was subtracted first.
    """

    vectors: np.ndarray
    valid: np.ndarray
    center: bool

    @property
    def excluded_positions(self) -> tuple[int, ...]:
        return tuple(int(i) for i in np.flatnonzero(~self.valid))


def unit_rows(table, *, center: bool = False, invalid: str = "exclude") -> UnitRows:
    """Normalise each position vector to unit length.

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
    center : bool
        Subtract the mean of the valid position vectors first.
    invalid : {"exclude", "raise"}
        What to do with zero or non-finite rows: exclude them with an
        :class:`InvalidPositionsWarning` naming the positions, or raise.

    Raises
    ------
    ValueError
        ``invalid="raise"`` and a row is invalid, or no valid row is left.
    """
    return _unit_rows(table, center=center, invalid=invalid)


def _unit_rows(table, *, center: bool = False, invalid: str = "exclude", overwrite: bool = False,
               stacklevel: int = 4) -> UnitRows:
    """:func:`unit_rows`; ``overwrite``: the rows are divided by their norms in place, in the caller's float64
    C-contiguous table (no second array of the table's size: 1 GiB at n = 2^20, dim 128; the same values), which
    the caller then no longer reads. ``stacklevel`` of the warning: the caller's caller."""
    if invalid not in ("exclude", "raise"):
        raise ValueError(f"invalid must be 'exclude' or 'raise', got {invalid!r}")
    x = check_table(table, allow_nonfinite=True)
    valid, norms = np.empty(len(x), dtype=bool), np.empty(len(x))
    _by_rows(lambda r0, r1: np.all(np.isfinite(x[r0:r1]), axis=1, out=valid[r0:r1]), x)
    if center and valid.any():
        x = x - x[valid].mean(axis=0)  # the one copy centering needs

    def row_norms(r0, r1):
        with np.errstate(invalid="ignore", over="ignore"):
            np.sqrt(np.einsum("ij,ij->i", x[r0:r1], x[r0:r1]), out=norms[r0:r1])

    _by_rows(row_norms, x)
    norms[~valid] = 0.0
    # squares overflowed (entries beyond ~1e154) or underflowed (below ~1e-154: a table scaled by 1e-200 is not
    # zero): scale those rows by their largest entry first
    rescale = valid & (~np.isfinite(norms) | (norms < 1e-150))
    if rescale.any():
        rows = x[rescale]
        scale = np.abs(rows).max(axis=1)
        nonzero = scale > 0
        scaled = rows[nonzero] / scale[nonzero, None]
        fixed = np.zeros(len(rows))
        fixed[nonzero] = scale[nonzero] * np.sqrt(np.einsum("ij,ij->i", scaled, scaled))
        norms[rescale] = fixed
    largest = norms.max(initial=0.0)
    valid &= norms > ZERO_NORM_RTOL * largest
    if not valid.all():
        bad = np.flatnonzero(~valid)
        what = (
            f"{bad.size} of {len(x)} positions have zero or non-finite vectors"
            f"{' after centering' if center else ''} (first: {bad[:10].tolist()})"
        )
        if invalid == "raise" or not valid.any():
            raise ValueError(f"{what}; cosine similarity is undefined for them. Drop or fix those rows")
        warnings.warn(f"{what}; their pairs are excluded from every mean", InvalidPositionsWarning,
                      stacklevel=stacklevel)
    # in place when x is this function's own (centred) copy or the caller gives its table up (the same quotients)
    into = x if center or (overwrite and x is table) else None
    if valid.all():  # one pass, no fancy-index copies: ~2x the table's memory instead of ~5x
        vectors = np.empty_like(x) if into is None else into
        _by_rows(lambda r0, r1: np.divide(x[r0:r1], norms[r0:r1, None], out=vectors[r0:r1]), x)
    elif into is not None:
        vectors = np.divide(x, norms[:, None], out=into, where=valid[:, None])
        vectors[~valid] = 0.0
    else:
        vectors = np.zeros_like(x)
        np.divide(x, norms[:, None], out=vectors, where=valid[:, None])
    return UnitRows(vectors, valid, bool(center))


def _by_rows(function, x) -> None:
    """``function(r0, r1)`` for runs of ~_ROW_ENTRIES entries of the rows of ``x``, split between
    :func:`~poslab._threads.analysis_threads` threads when there are several (numpy's loops release the GIL): for
    row-wise work whose rows do not depend on each other (the same values whatever the split); one call for a small
    table."""
    rows = max(1, _ROW_ENTRIES // max(1, x.shape[1]))
    starts = range(0, len(x), rows)
    threads = min(analysis_threads(), len(starts))
    if threads <= 1:
        function(0, len(x))
        return
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda r0: function(r0, min(len(x), r0 + rows)), starts))


def cosine_similarity(table, *, center: bool = False, invalid: str = "exclude") -> np.ndarray:
    """Cosine similarity matrix between all positions.

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
    center : bool
        Subtract the mean position vector first.
    invalid : {"exclude", "raise"}
        See :func:`unit_rows`.

    Returns
    -------
    ndarray of shape (n_positions, n_positions), float64
        Symmetric, in [−1, 1], exactly 1 on the diagonal of valid positions,
        NaN in the rows and columns of excluded positions.

    Notes
    -----
    Holds the whole n × n matrix: use :func:`poslab.analysis.similarity_profile`
    or :func:`poslab.analysis.block_similarity` for long contexts.
    """
    u = unit_rows(table, center=center, invalid=invalid)
    s = np.clip(u.vectors @ u.vectors.T, -1.0, 1.0)
    np.fill_diagonal(s, 1.0)
    s[~u.valid, :] = np.nan
    s[:, ~u.valid] = np.nan
    return s
