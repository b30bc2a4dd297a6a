"""The similarity profile: mean and spread of S[i, i + k] over i, for each distance k.

Nothing here holds the n × n matrix S. The mean comes from real FFTs in
O(dim · n log n); the standard deviation is exact (every pair, streamed in
strips of S) for small profiles and estimated from a stratified sample of
anchor positions for large ones (see :func:`similarity_profile`, Notes).
"""

from __future__ import annotations

import contextlib
import dataclasses
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import scipy  # scipy.fft (~0.25 s with scipy.special) loads on first use; poslab run imports it beside the run

from .._threads import analysis_threads
from .._validation import check_positive_int
from .similarity import UnitRows, unit_rows

__all__ = ["SimilarityProfile", "similarity_profile", "PRECISIONS"]

#: Arithmetic of the FFT and of the strips of S: float64 (default) or float32 (about 2x faster).
PRECISIONS = ("float64", "float32")
#: Largest number of entries held at once in an FFT chunk or a strip of S (32 MiB of float64).
_BLOCK_ENTRIES = 4_000_000
#: Fewest distances whose std strips are split between threads (by distance: the same sums; below, one thread).
_THREADED_DISTANCES = 4096
#: Entries per FFT chunk (4 MiB of float64): cache-sized transforms were the fastest measured, and one
#: transform at a time beat two threads once a transform outgrows the cache (memory-bound).
_FFT_ENTRIES = 2**19
#: The standard deviation is exact (every pair) up to this many positions.
_EXACT_STD_POSITIONS = 2048
#: Otherwise it is estimated from this many anchor positions (both ends included).
_STD_ANCHORS = 128
#: Seed of the anchor sample: the estimate is reproducible.
_STD_SEED = 0


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
        Population standard deviation (ddof 0) of the same entries: exact, or
        estimated from ``std_pairs`` of them (see :func:`similarity_profile`).
    n_pairs : ndarray of int, shape (max_distance + 1,)
        Number of valid pairs at each distance (n_positions − distance when
        no position is excluded).
    n_positions : int
    excluded_positions : tuple of int
        Positions whose zero or non-finite vectors were excluded.
    center : bool
        Whether the mean position vector was subtracted first.
    std_pairs : ndarray of int, shape (max_distance + 1,), optional
        Number of pairs the standard deviation was computed from; equal to
        ``n_pairs`` where it is exact.
    """

    distance: np.ndarray
    mean_similarity: np.ndarray
    std_similarity: np.ndarray
    n_pairs: np.ndarray
    n_positions: int
    excluded_positions: tuple[int, ...] = ()
    center: bool = False
    std_pairs: np.ndarray | None = None

    @property
    def std_exact(self) -> bool:
        """Whether the standard deviation used every pair."""
        return self.std_pairs is None or bool(np.array_equal(self.std_pairs, self.n_pairs))

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
                       invalid: str = "exclude", precision: str = "float64") -> SimilarityProfile:
    """Mean and standard deviation of cosine similarity at each distance.

    For k = 0..max_distance, summarises the k-th diagonal of S (the cosine
    similarity matrix) over the positions i whose pair (i, i + k) is valid,
    without ever forming S.

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
    max_distance : int, optional
        Largest distance, 0 <= max_distance < n_positions (default n_positions − 1).
    center : bool
        Subtract the mean position vector first.
    invalid : {"exclude", "raise"}
        Zero or non-finite rows: excluded with a warning, or an error.
    precision : {"float64", "float32"}
        Arithmetic of the FFTs and strips (rows are normalised in float64 and
        results are float64 either way). float32 is about twice as fast (see
        benchmarks/README.md). Its mean differs from float64 by at most
        ~1e-7 · n_positions / n_pairs: ≤ 2e-7 up to distance n/2, but growing
        towards the last distances, which have few pairs (measured maximum of
        |Δ| · n_pairs / n_positions: 6.5e-8 over real GPT-2, random, biased
        random, sinusoidal and RoPE tables, n up to 16384); its std by ≤ 2e-7.
        Use float64 when the longest distances matter.

    Returns
    -------
    SimilarityProfile

    Raises
    ------
    ValueError
        Bad ``max_distance`` or ``precision``; invalid rows with ``invalid="raise"``.

    Notes
    -----
    **Mean.** With unit rows u_i (excluded rows set to 0) and validity mask
    v_i, the sum Σ_i u_i · u_{i+k} is the autocorrelation along positions
    summed over dims, and n_pairs(k) = Σ_i v_i v_{i+k}. Both come from real
    FFTs of length ``next_fast_len(n + max_distance)`` (Wiener–Khinchin: the
    power spectra are summed over dims, then one inverse FFT), in chunks of
    dims of at most ~5·10⁵ entries (or one dim per CPU): O(dim · n log n) time,
    O(n · dim) memory. float64 agrees with the brute-force loop to
    ~1e-16 · n_positions / n_pairs (the FFT's rounding error on the summed
    power, divided by the pairs): measured ≤ 1e-14 at n = 4096 and ≤ 1e-13
    at n = 1,048,576 (benchmarks/README.md), the last distance included.

    **Standard deviation.** The sum of squares Σ_i (u_i · u_{i+k})² would need
    dim² FFTs, so S itself is streamed: the rows of S of a set of anchor
    positions a, in strips of at most ~4·10⁶ entries, each value taken as its
    difference from the FFT mean (shifted data: exact where the spread is
    ~0). Up to 2048 positions every position is an anchor and the std is
    exact, in O(n · (max_distance + 1) · dim). Beyond, 128 anchors are used,
    one drawn uniformly in each of 128 equal strata of positions with a
    fixed seed (reproducible), plus positions 0 and n − 1; each anchor
    contributes its pairs (a, a + k) and (a − k, a), a pair counted once and
    weighted by the inverse of its chance of being sampled (Horvitz–Thompson;
    the always-sampled ends are not over-represented). At distance k that is
    about 2 · 128 · (n − k) / n pairs, at least 1: a relative standard error
    of about sqrt((κ − 1) / (4 · std_pairs)) (κ the kurtosis of the
    similarities), ~4 % at short distances for Gaussian-like spreads and
    larger towards k = n. Measured against the exact std up to distance n/2:
    median relative error 3.4 % and 95th percentile 9.7 % on a random
    Gaussian table (n = 4096, dim 768); 1.1 % and 4.6 % on real GPT-2
    (n = 1024, sampling forced; tests/analysis/test_profile.py); on translation-invariant tables
    (sinusoidal, RoPE) the std is ~1e-16 and so is the estimate. Cost
    O(128 · n · dim).
    ``std_pairs`` records how many pairs each value used.
    """
    units = unit_rows(table, center=center, invalid=invalid)
    n = len(units.vectors)
    max_distance = n - 1 if max_distance is None else check_positive_int(max_distance, "max_distance", minimum=0)
    if max_distance >= n:
        raise ValueError(f"max_distance must be < n_positions = {n}, got {max_distance}")
    return _similarity_profile(units, max_distance, precision=precision)


def _similarity_profile(units: UnitRows, max_distance: int, *, precision: str = "float64",
                        lag_sums=None) -> SimilarityProfile:
    """Computing twin of :func:`similarity_profile` on checked unit rows.

    ``lag_sums``: (Σ_i S[i, i + k], n_pairs(k)) for k = 0..max_distance, each of shape (max_distance + 1,), when
    already known (e.g. :class:`poslab.analysis.bootstrap.AnchorBlocks`' sums and counts totalled over the blocks:
    the same sums by FFTs of blocks, ~1e-16 relative from the whole-table FFT's); else by FFT. ``precision`` is
    then the arithmetic of the std's strips only."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    dtype = np.dtype(precision)
    u, valid = units.vectors, units.valid
    n = len(u)
    size = max_distance + 1
    if lag_sums is None:
        if valid.all():  # the pairs at distance k: n − k (what the mask's FFT gives, rounded)
            n_pairs = n - np.arange(size, dtype=np.int64)
        else:
            n_pairs = np.rint(_lag_sums(valid[:, None].astype(np.float64), size, np.float64)).astype(np.int64)
        sums = _lag_sums(u, size, dtype)
    else:
        sums, n_pairs = (np.asarray(x, dtype=np.float64) for x in lag_sums)
        if sums.shape != (size,) or n_pairs.shape != (size,):
            raise ValueError(f"lag_sums must be two arrays of shape ({size},), got {sums.shape} and {n_pairs.shape}")
        n_pairs = np.rint(n_pairs).astype(np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(n_pairs > 0, sums / n_pairs, np.nan)
    mean = np.clip(mean, -1.0, 1.0)
    if n_pairs[0] > 0:
        mean[0] = 1.0
    if n <= _EXACT_STD_POSITIONS:
        anchors, pair_weight = np.arange(n), 1.0
    else:
        anchors = _stratified_anchors(n, _STD_ANCHORS, np.random.default_rng(_STD_SEED))
        pair_weight = _pair_weight(n, _STD_ANCHORS)
    std, std_pairs = _std_from_anchors(u, valid, mean, anchors, dtype, pair_weight)
    return SimilarityProfile(
        distance=np.arange(size),
        mean_similarity=mean,
        std_similarity=std,
        n_pairs=n_pairs,
        n_positions=n,
        excluded_positions=units.excluded_positions,
        center=units.center,
        std_pairs=std_pairs,
    )


def _lag_sums(x: np.ndarray, size: int, dtype) -> np.ndarray:
    """Σ_i x_i · x_{i+k} for k = 0..size − 1 (float64), x of shape (n, dim), by real FFTs."""
    n, dim = x.shape
    length = scipy.fft.next_fast_len(n + size - 1, real=True)  # no wrap-around up to lag size − 1
    chunk = max(1, min(dim, _FFT_ENTRIES // length))
    power = np.zeros(length // 2 + 1)
    buf = np.zeros((chunk, length), dtype=dtype)
    for c0 in range(0, dim, chunk):
        m = min(chunk, dim - c0)
        buf[:m, :n] = x[:, c0:c0 + m].T
        spec = scipy.fft.rfft(buf[:m], axis=1, workers=analysis_threads())
        power += np.einsum("ij,ij->j", spec.real, spec.real, dtype=np.float64)
        power += np.einsum("ij,ij->j", spec.imag, spec.imag, dtype=np.float64)
    return scipy.fft.irfft(power, n=length, workers=analysis_threads())[:size]


def _stratified_anchors(n: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """One position drawn uniformly in each of ``count`` equal strata of [0, n), plus 0 and n − 1."""
    edges = np.linspace(0, n, count + 1)
    draws = np.floor(edges[:-1] + rng.random(count) * np.diff(edges)).astype(np.int64)
    return np.unique(np.concatenate([[0, n - 1], np.clip(draws, 0, n - 1)]))


def _pair_weight(n: int, strata: int) -> float:
    """Inverse probability that a pair away from both ends is sampled: either of its
    positions drawn, each with probability 1 / (stratum width) = strata / n."""
    p = strata / n
    return 1.0 / (1.0 - (1.0 - p) ** 2)


def _distance_parts(n: int, size: int, parts: int) -> list[tuple[int, int]]:
    """Up to ``parts`` runs [k0, k1) of the distances 0..size − 1 holding about equal shares of the pairs (n − k at
    distance k), none empty."""
    pairs = np.cumsum(n - np.arange(size, dtype=np.float64))
    cuts = np.searchsorted(pairs, pairs[-1] * np.arange(1, parts) / parts)
    edges = sorted({0, size, *(int(c) for c in cuts if 0 < c < size)})
    return list(zip(edges[:-1], edges[1:]))


def _std_from_anchors(u, valid, mean, anchors, dtype, pair_weight):
    """Population std per distance over the pairs (a, a + k) and (a − k, a) of the anchors a.

    Columns of S are taken in blocks, each multiplied by the anchors within
    max_distance of it (a strip of at most ~_BLOCK_ENTRIES entries). A pair
    counts once: a backward pair (a − k, a) is skipped when a − k is itself an
    anchor (it was counted forward), so with every position an anchor the
    pairs are exactly those of the profile. A sampled pair is weighted by the
    inverse of its probability of being sampled (Horvitz–Thompson): 1 if it
    touches position 0 or n − 1 (always anchors), else ``pair_weight``, so
    the always-included ends are not over-represented. Each value
    enters as its difference from the FFT mean (shifted data: no
    cancellation where the spread is ~0). Returns (std, pairs used), each of
    shape (max_distance + 1,).
    """
    n, size = len(u), len(mean)
    max_distance = size - 1
    is_anchor = np.zeros(n, bool)
    is_anchor[anchors] = True
    sampled = len(anchors) < n  # else every position is an anchor and forward pairs are all pairs
    masked = not valid.all()
    anchors = anchors[valid[anchors]]
    shift = np.nan_to_num(mean)
    # count, Σ d, Σ d² per distance, for pairs of weight 1 (touching an end; every pair when not sampled)
    # and for pairs of weight pair_weight (the others)
    acc = np.zeros((2, 3, size))
    uu = u.astype(dtype, copy=False)
    width = max(1, _BLOCK_ENTRIES // max(1, min(len(anchors), 2 * size)))
    buffer = np.empty(0, dtype=dtype)  # one strip buffer, reused: fresh memory is slow to fault in

    def accumulate(part, near, strip, c0, c1):
        """The strip's pairs at distances [k0, k1) into acc: each thread its own distances, so every entry of
        acc gets the same terms in the same order (strip, anchor, segment) as on one thread."""
        k0, k1 = part
        for a, row in zip(near.tolist(), strip):
            group = int(sampled and 0 < a < n - 1)
            lo, hi = max(a, c0), min(c1, a + size)  # forward pairs (a, column)
            segments = [(lo, hi - 1, 1, 1), (hi - 1, hi, 0, 1)] if group and hi == n else [(lo, hi, group, 1)]
            if sampled:  # backward pairs (column, a)
                segments.append((max(a - max_distance, c0), min(c1, a), group, -1))
            for lo, hi, g, sign in segments:
                # the columns at distances k0 <= k < k1: a + k forward, a − k backward
                lo, hi = (max(lo, a + k0), min(hi, a + k1)) if sign > 0 else (max(lo, a - k1 + 1), min(hi, a - k0 + 1))
                if lo >= hi:
                    continue
                k = slice(lo - a, hi - a) if sign > 0 else slice(a - lo, a - hi, -1)  # distance of each column
                d = row[lo - c0:hi - c0] - shift[k]
                if masked or sign < 0:
                    ok = valid[lo:hi] if sign > 0 else valid[lo:hi] & ~is_anchor[lo:hi]
                    d *= ok
                    acc[g, 0, k] += ok
                else:
                    acc[g, 0, k] += 1.0
                acc[g, 1, k] += d
                d *= d
                acc[g, 2, k] += d

    parts = _distance_parts(n, size, analysis_threads() if size >= _THREADED_DISTANCES else 1)
    with ThreadPoolExecutor(len(parts)) if len(parts) > 1 else contextlib.nullcontext() as pool:
        for c0 in range(0, n, width):
            c1 = min(n, c0 + width)
            near = anchors[np.searchsorted(anchors, c0 - max_distance):np.searchsorted(anchors, c1 + max_distance)]
            if buffer.size < len(near) * (c1 - c0):
                buffer = np.empty(len(near) * (c1 - c0), dtype=dtype)
            strip = buffer[:len(near) * (c1 - c0)].reshape(len(near), c1 - c0)
            np.matmul(uu[near], uu[c0:c1].T, out=strip)  # S[near, c0:c1]
            np.clip(strip, -1.0, 1.0, out=strip)
            list((pool.map if pool else map)(lambda part: accumulate(part, near, strip, c0, c1), parts))
    count = acc[0, 0] + acc[1, 0]
    sum_w, total, squares = acc[0] + pair_weight * acc[1]
    with np.errstate(invalid="ignore", divide="ignore"):
        var = squares / sum_w - (total / sum_w) ** 2
        std = np.where(count > 0, np.sqrt(np.maximum(var, 0.0)), np.nan)
    if count[0] > 0:
        std[0] = 0.0
    return std, count.astype(np.int64)
