"""One place for checking arrays handed to poslab.

Modelled on scikit-learn's ``utils.validation.check_array``: dtype, ndim and
finiteness are checked here, and every message says what was given, what was
expected and what to do.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["check_table", "check_positive_int"]


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as ``int`` if it is an integer ``>= minimum``.

    Raises
    ------
    TypeError
        If ``value`` is not an integer (bools are refused too).
    ValueError
        If ``value < minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_table(table, *, name: str = "table", allow_nonfinite: bool = False) -> np.ndarray:
    """Return a position table as a C-contiguous float64 array of shape (n_positions, dim).

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
        Real-valued position vectors, one row per position.
    name : str
        What to call the array in error messages.
    allow_nonfinite : bool
        If False (default), NaN or inf anywhere is an error. The analysis
        functions pass True and handle such rows themselves (they are
        reported and excluded).

    Raises
    ------
    ValueError
        If the array is not 2-D, is empty, is complex or (unless allowed)
        holds non-finite values.
    """
    arr = np.asarray(table)
    if arr.dtype.kind == "c":
        raise ValueError(f"{name} must be real-valued, got complex dtype {arr.dtype}")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D of shape (n_positions, dim), got shape {arr.shape}; "
            "reshape it (a vision table of shape (1, N, d) is table[0])"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must have at least one position and one dim, got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not allow_nonfinite and not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
        raise ValueError(
            f"{name} holds NaN or inf in {bad.size} row(s), first positions {bad[:10].tolist()}; "
            "fix the source table or drop those positions"
        )
    return arr
