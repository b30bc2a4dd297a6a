"""Bootstrap confidence intervals for decay lengths, band widths and the profile.

Two resampling units, one machinery:

* **anchor blocks** (one fixed table, e.g. GPT-2): the profile at distance k
  is the mean over anchors i of S[i, i + k]. Anchors are cut into
  contiguous, non-overlapping blocks B of ``block_length`` positions, and the
  per-block sums Σ_{i∈B} u_i·u_{i+k} and pair counts are computed once
  (:func:`anchor_block_sums`, by FFTs of the blocks: O(n · dim · (log
  block_length + n_blocks)) time, O(n_blocks · n) memory). A resample draws n_blocks
  blocks with replacement, the same blocks for every distance, so the
  correlation between distances is kept: its profile is the ratio of summed
  sums to summed counts, a (R, n_blocks) × (n_blocks, K) product, made a
  chunk of distances at a time by :func:`bootstrap_units`. This is
  the non-overlapping block bootstrap (Carlstein 1986; Lahiri, *Resampling
  Methods for Dependent Data*, 2003, §2.5): blocks keep the dependence
  between neighbouring anchors (they share positions and, in a smooth table,
  similar vectors) inside a block.
* **seeds** (a stochastic encoding run with several seeds): each seed's
  profile is one unit; a resample draws seeds with replacement and pools
  their profiles weighted by pair counts, by the same :func:`bootstrap_units`
  with the seeds' sums (mean × n_pairs) and pair counts as units. With few
  seeds this is coarse (3 seeds give 10 distinct resamples).

For every resampled profile the band widths are recomputed and the selected
decay model is refitted (same model and weights, started from the original
estimate, with Levenberg–Marquardt — ``method="lm"``, six times faster than
the bounded trust-region fit and, from a start at the optimum, the same
answer; a refit that leaves the model's bounds is redone with the bounded
fit, and a replicate on a bound is kept, since dropping it would censor the
distribution when the truth lies on the bound, as a stretched exponential's
stretch = 2 for a Gaussian profile); a refit that fails is a NaN replicate
and is counted (more than ``max_failed_fraction``, default 10 %, failures
leave the decay-length interval empty: the fit is unstable under resampling); a refit whose curve does not fall
by 1/e within the fitted range is +inf (the interval is then open above). The model-free summaries
(:mod:`poslab.analysis.summaries`) are recomputed on every resample too (``summarise``). Intervals are percentile
intervals at ``level`` (Efron & Tibshirani 1993, §13.3), for anchor blocks widened about the replicates' median
by :func:`interval_widening` (few blocks: Hesterberg 2015's expanded percentile; blocks not much longer than the
dependence: Künsch 1989). Resampling is seeded (``numpy.random.default_rng(seed)``), so results are reproducible.

Block length
------------
Chosen from the data (:func:`choose_block_length`): the largest Politis & White (2004, with Patton, Politis &
White 2009's correction) block length of the lag-product series S[i, i + k] over anchors i, for k = 1, 2, 4, ...
up to max_distance / 2 (the profile at distance k is that series' mean), clipped so that there are between
MIN_BLOCKS = 8 and ``n_blocks`` (32) blocks. The ``arch`` package has the same rule (``optimal_block_length``); it
is not used because it would bring statsmodels for forty lines (its formula is tested against the AR(1) closed
form in tests/analysis/test_bootstrap.py). Measured coverage on the null model: benchmarks/README.md.

A table that is exactly translation invariant (sinusoidal, RoPE) has the
same S[i, i + k] at every anchor: every resample equals the profile, and the
intervals have zero width (``BootstrapResult.exact``). That is the truth
about position sampling (the numbers are exact for the analysed window); it
says nothing about the choice of window or model, so the study tables leave
those intervals empty with ``ci_method = "exact"``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy  # scipy.fft, .special and .optimize (~0.3 s) load on first use; poslab run imports them beside the run

from .._threads import analysis_threads, one_blas_thread
from .bands import first_crossings
from .decay import MAXFEV, DecayFits
from .summaries import threshold_name

__all__ = [
    "N_RESAMPLES", "BOOTSTRAP_LEVEL", "BOOTSTRAP_SEED", "N_BLOCKS", "MAX_FAILED_FRACTION",
    "AnchorBlocks", "BootstrapResult", "anchor_block_sums", "resample_units", "bootstrap_units",
    "bootstrap_anchor_blocks", "percentile_interval", "block_standard_errors", "block_noise", "politis_white",
    "choose_block_length", "MIN_BLOCKS", "interval_widening", "summary_floor", "summary_interval", "summary_replicates",
]

#: Resamples per bootstrap (refits of the selected decay model per run).
N_RESAMPLES = 200
#: Level of the bootstrap intervals.
BOOTSTRAP_LEVEL = 0.95
#: Seed of the bootstrap's random generator.
BOOTSTRAP_SEED = 0
#: Default number of anchor blocks: block_length = ceil(n_positions / N_BLOCKS).
N_BLOCKS = 32
#: More failed refits than this fraction of the resamples leave the decay-length interval NaN.
MAX_FAILED_FRACTION = 0.1
#: Entries of the FFT input of a chunk of dims of :func:`anchor_block_sums` (blocks × dims × FFT length: 32 MiB of
#: float64).
_FFT_BLOCK_ENTRIES = 2**22
#: Fewest dims per chunk of :func:`anchor_block_sums` (even if the FFT buffer grows beyond _FFT_BLOCK_ENTRIES).
_MIN_CHUNK_DIMS = 16
#: Stand-in for +inf replicates inside the quantiles.
_BEYOND = 1e300
#: Entries of the temporaries of the interval computations (8 MiB of float64).
_CHUNK_ENTRIES = 2**20
#: Entries of the temporaries of :func:`block_noise` and :func:`block_standard_errors` (512 KB of float64: with
#: 8 MB ones the allocator returned and re-faulted their memory, 0.8 against 0.3 GB of page faults at 10^6
#: distances; every column is computed alone, so the values do not depend on it).
_NOISE_CHUNK_ENTRIES = 2**16
#: Anchors per chunk of the lag products of :func:`choose_block_length` (2 MiB of rows at dim 128).
_LAG_ROWS = 2048
#: Frequencies per block-pair product of :func:`anchor_block_sums` (copied contiguous first; 128 was the fastest
#: measured at 32 blocks of 16 dims: 0.27 CPU-s a chunk of dims at 10^6 positions, 2.4 s on the FFT's layout).
_PRODUCT_FREQUENCIES = 128
#: Entries of the resampled profiles summarised at once (64 MiB of float64: 8 resamples of 10⁶ distances; the
#: units' sums are read once per chunk, so one resample at a time read them 200 times at 200 resamples).
_REPLICATE_ENTRIES = 2**23
#: Distances per tile of pair counts made and divided by at once by :func:`_pooled_means` (1 MiB of float64 at 8
#: resamples, in cache: 1.7 against 2.5 CPU-s for 200 resamples of 2^20 distances; narrower tiles of a chunk of
#: 5242 distances of 200 resamples were slower than the whole chunk, 1.3 against 0.9 CPU-s).
_TILE_COLUMNS = 2**14


@dataclasses.dataclass(frozen=True)
class AnchorBlocks:
    """Per-block sums of S[i, i + k] over the anchors i of each block.

    Attributes
    ----------
    sums : ndarray of shape (n_blocks, max_distance + 1)
        Σ_{i∈B} S[i, i + k] over valid pairs.
    counts : ndarray of shape (n_blocks, max_distance + 1)
        Number of valid pairs (i, i + k) with i in B.
    block_length : int
        Anchors per block (positions); the last block may be shorter.
    """

    sums: np.ndarray
    counts: np.ndarray
    block_length: int

    @property
    def profile(self) -> np.ndarray:
        """The mean profile, shape (max_distance + 1,); NaN where no pair."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.sums.sum(axis=0) / self.counts.sum(axis=0)


def anchor_block_sums(units, max_distance: int, block_length: int | None = None, *,
                      n_blocks: int = N_BLOCKS, buffers: dict | None = None) -> AnchorBlocks:
    """Per-anchor-block sums of the similarity profile, computed once.

    Parameters
    ----------
    units : UnitRows
        Unit-normalised rows (:func:`poslab.analysis.unit_rows`); excluded
        positions (zero rows) contribute no pair.
    max_distance : int
        Largest distance, 0 <= max_distance < n_positions.
    block_length : int, optional
        Anchors per block; default ceil(n_positions / n_blocks).
    n_blocks : int
        Blocks when ``block_length`` is not given (default N_BLOCKS = 32).
    buffers : dict, optional
        Working arrays (the FFT buffers and block-pair spectra) kept in it and reused by the next call with it
        (the same values): a run's nested windows after the run itself (~0.9 GB at n = 2^20, dim 128, whose fresh
        pages cost ~3 CPU-s of page faults on a small VM).

    Returns
    -------
    AnchorBlocks
        Its ``profile`` equals :func:`poslab.analysis.similarity_profile`'s mean.

    Raises
    ------
    ValueError
        ``max_distance`` or ``block_length`` out of range.

    Notes
    -----
    S is never formed. Cut the rows into blocks x_b = u[b·L:(b + 1)·L]
    (L = ``block_length``, the last block zero-padded). A pair (i, i + k)
    with i in block b and k = m·L + r (0 <= r < L) has its second position in
    block b + m or b + m + 1, so::

        sums[b, k] = C_{b,b+m}(r) + C_{b,b+m+1}(r − L),
        C_{b,c}(t) = Σ_j x_b[j] · x_c[j + t]   (t in (−L, L)),

    and every C_{b,c} is one inverse real FFT of length next_fast_len(2L)
    (no wrap-around) of Σ_dims conj(X_b) X_c, X_b the rfft of block b. The
    products Σ_dims conj(X_b) X_c for the block pairs c >= b (the only ones
    used) are, per frequency, matrix products of groups of 8 blocks' rows
    (n_blocks >= 16; else all of them) by the blocks from the group's first on
    (5/8 of every pair's products at 32 blocks), accumulated over chunks of
    dims, the frequencies split between threads (one per CPU); each entry is
    the same sum as when every pair was multiplied in one product, bit for bit
    (tests/analysis/test_bootstrap.py). Cost: O(n · dim · log L) for the FFTs plus
    O(n_blocks · n · dim) complex multiply-adds for the block-pair products
    (n_blocks = 32 by default) and n_blocks² inverse FFTs of length 2L;
    memory O(n_blocks · n) (the block-pair spectra: 70 MB at n = 131072,
    540 MB at n = 1,048,576, plus a chunk of dims' block spectra: 268 MB). Pair counts are
    counted directly when every position is valid (block b's anchors i with
    i + k < n), otherwise they are the same sums of the validity mask (one
    more "dim"), rounded; S[i, i] is 1 for every valid i. Agrees with the brute-force sums to ~1e-16 times the
    block length (the FFT's rounding): measured ≤ 2e-13 at n = 4096, 1e-12 at
    n = 16384 (tests/analysis/test_bootstrap.py). The earlier strip
    implementation multiplied out n × (L + max_distance) entries of S
    (O(n² · dim): 2 s at n = 8192, a MemoryError at n = 131072); this one
    takes ~2 s at n = 131072, dim 128 (benchmarks/README.md).
    """
    u, valid = units.vectors, units.valid
    n = len(u)
    if not 0 <= max_distance < n:
        raise ValueError(f"max_distance must be in [0, {n}), got {max_distance}")
    block_length = math.ceil(n / n_blocks) if block_length is None else int(block_length)
    if not 1 <= block_length <= n:
        raise ValueError(f"block_length must be in [1, n_positions = {n}], got {block_length}")
    size = max_distance + 1
    if valid.all():  # every position valid: block b's pairs at distance k are its anchors i with i + k < n
        start = np.arange(0, n, block_length)
        end = np.minimum(start + block_length, n)
        counts = np.empty((len(start), size))  # min(end_b, n − k) − start_b, at least 0: integers, exact in float64
        np.minimum(end[:, None].astype(np.float64), n - np.arange(size, dtype=np.float64), out=counts)
        counts -= start[:, None]
        np.maximum(counts, 0.0, out=counts)
    else:
        counts = np.rint(_block_lag_sums(valid[:, None].astype(np.float64), block_length, size, buffers))
    sums = _block_lag_sums(u, block_length, size, buffers)
    sums[:, 0] = counts[:, 0]  # S[i, i] = 1 for every valid position
    if valid.all():  # block b has no pair from distance n − start_b on
        for b, first in enumerate(range(0, n, block_length)):
            sums[b, n - first:] = 0.0
    else:
        sums[counts == 0] = 0.0
    return AnchorBlocks(sums, counts, block_length)


def block_noise(blocks: AnchorBlocks) -> np.ndarray:
    """The mean profile's noise with the anchor blocks as independent clusters, as one column per block.

    Parameters
    ----------
    blocks : AnchorBlocks
        B blocks' sums s_b(k) and pair counts c_b(k).

    Returns
    -------
    ndarray of shape (max_distance + 1, n_blocks)
        F[k, b] = sqrt(B_k / (B_k − 1)) · (s_b(k) − c_b(k) · ȳ(k)) / Σ_b c_b(k), ȳ = Σ s_b / Σ c_b, B_k the blocks
        holding a pair at k: F Fᵀ is the cluster-robust (linearised ratio-estimator) covariance of the mean
        profile across distances (Cochran 1977, §6.4; Liang & Zeger 1986), and the row norms are its standard
        errors. Unlike std / sqrt(n_pairs) it counts the dependence between anchors of one block (they share
        positions and, in a smooth table, similar vectors) and between distances (the same anchors serve every
        distance); blocks longer than the dependence make the blocks nearly independent. Rows where fewer than
        two blocks hold a pair are NaN; all zero for an exactly translation-invariant table.
    """
    sums, counts = blocks.sums, blocks.counts
    factor = np.empty(sums.shape[::-1])  # C order, distance by distance
    for c0, c1 in _column_chunks(sums):  # the same values column by column, without full-size temporaries
        factor[c0:c1] = _block_noise(sums[:, c0:c1], counts[:, c0:c1]).T
    return factor


def _column_chunks(a):
    """(c0, c1) of chunks of ~_NOISE_CHUNK_ENTRIES entries of an array of shape (n_blocks, n_columns)."""
    step = max(1, _NOISE_CHUNK_ENTRIES // max(1, a.shape[0]))
    return [(c0, min(a.shape[1], c0 + step)) for c0 in range(0, a.shape[1], step)]


def _block_noise(sums, counts) -> np.ndarray:
    """:func:`block_noise` of some columns, shape (n_blocks, n_columns) (its transpose)."""
    total = counts.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = sums.sum(axis=0) / total
        used = (counts > 0).sum(axis=0)
        dev = np.where(counts > 0, sums - counts * mean, 0.0)
        factor = (np.sqrt(used / np.maximum(used - 1, 1)) / total) * dev
    factor[:, used < 2] = np.nan
    return factor


def block_standard_errors(blocks: AnchorBlocks) -> np.ndarray:
    """Standard error of the mean profile at each distance, the row norms of :func:`block_noise`, shape
    (max_distance + 1,); NaN where fewer than two blocks hold a pair."""
    se = np.empty(blocks.sums.shape[1])
    for c0, c1 in _column_chunks(blocks.sums):
        se[c0:c1] = np.sqrt(np.sum(_block_noise(blocks.sums[:, c0:c1], blocks.counts[:, c0:c1]).T ** 2, axis=1))
    return se


def politis_white(x) -> tuple[float, float]:
    """Data-driven block length of the non-overlapping block bootstrap of a series' mean, and its correlation length.

    Parameters
    ----------
    x : array_like of shape (n,)
        A (weakly) stationary series, e.g. the lag products S[i, i + k] over anchors i.

    Returns
    -------
    (block_length, correlation_length) : floats
        b = (2 Ĝ² / D̂)^(1/3) n^(1/3) with D̂ = 2 ĝ(0)² (the non-overlapping blocks' variance constant,
        Lahiri 2003, §5.2 and §7.2), Ĝ = Σ λ(k/M) |k| R̂(k) and ĝ(0) = Σ λ(k/M) R̂(k) over |k| <= M with
        the flat-top window λ (1 up to 1/2, then linear to 0 at 1), M = 2 m̂ and m̂ the first lag after which
        K_n = max(5, ⌈sqrt(log10 n)⌉) autocorrelations lie within 2 sqrt(log10(n) / n) (Politis & White 2004,
        with the correction of Patton, Politis & White 2009; the rule of ``arch``'s ``optimal_block_length``);
        b is capped at min(3 sqrt(n), n / 3). ``correlation_length`` = Ĝ / ĝ(0), the relative downward bias of
        the block variance with blocks of length b being about correlation_length / b (Künsch 1989). (1, 0) for
        a constant series.
    """
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    if n < 8:
        return 1.0, 0.0
    z = x - x.mean()
    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    m_max = math.ceil(math.sqrt(n)) + k_n
    # the autocovariances at lags 0..m_max + k_n (the most the search below and the window read): a circular
    # correlation of length >= n + reach has no wrap-around at those lags (an FFT of about n, not 2n)
    reach = min(n - 1, m_max + k_n)
    n_fft = scipy.fft.next_fast_len(n + reach, real=True)
    f = scipy.fft.rfft(z, n_fft)
    f *= np.conj(f)
    acov = scipy.fft.irfft(f, n_fft)[:reach + 1] / n
    if not acov[0] > 1e-300:
        return 1.0, 0.0
    rho = acov / acov[0]
    limit = 2 * math.sqrt(math.log10(n) / n)
    small = np.abs(rho[1:]) < limit
    # m̂: the first m <= m_max with K_n small autocorrelations at lags m + 1..m + K_n, else m_max
    runs = np.lib.stride_tricks.sliding_window_view(small, k_n).all(axis=1)[:m_max + 1] \
        if small.size >= k_n else np.zeros(0, dtype=bool)
    m_hat = int(np.argmax(runs)) if runs.any() else m_max
    big_m = min(2 * max(m_hat, 1), m_max, n - 1)
    lags = np.arange(-big_m, big_m + 1)
    lam = np.clip(2 * (1 - np.abs(lags) / big_m), 0.0, 1.0)
    r = acov[np.abs(lags)]
    g_big = float(np.sum(lam * np.abs(lags) * r))
    g0 = float(np.sum(lam * r))
    if not g0 > 0:
        return 1.0, 0.0
    b = (2 * g_big**2 / (2 * g0**2)) ** (1 / 3) * n ** (1 / 3)
    return float(min(max(b, 1.0), 3 * math.sqrt(n), n / 3)), float(max(g_big / g0, 0.0))


#: Fewest anchor blocks a data-driven block length leaves (an interval from fewer units is too coarse).
MIN_BLOCKS = 8


def choose_block_length(units, max_distance: int, *, max_blocks: int = N_BLOCKS) -> tuple[int, float]:
    """Anchors per block, from the data: the largest Politis–White length over the lag-product series.

    Parameters
    ----------
    units : UnitRows
    max_distance : int
    max_blocks : int
        Most blocks (the block-pair spectra cost O(max_blocks · n) memory): block_length >= n / max_blocks.

    Returns
    -------
    (block_length, correlation_length)
        For k = 1, 2, 4, ... up to max_distance / 2 (at least k = 1) the series a_i = S[i, i + k] over valid
        anchors i gives :func:`politis_white`'s length; the largest, rounded up, clipped to
        [⌈n / max_blocks⌉, ⌊n / MIN_BLOCKS⌋] (at least 1); and the largest correlation length (positions).
        O(n · dim) per distance, about log2(max_distance) distances.
    """
    return _block_lengths(units, [(len(units.vectors), max_distance)], max_blocks=max_blocks)[0]


def _block_lags(max_distance: int, n: int) -> list[int]:
    """The lags of :func:`choose_block_length`: 1, 2, 4, ... up to max_distance / 2 (at least 1), below n."""
    lags = [1]
    while lags[-1] * 2 <= max(1, max_distance // 2):
        lags.append(lags[-1] * 2)
    return [k for k in lags if k < n]


def _block_lengths(units, windows, *, max_blocks: int = N_BLOCKS) -> list[tuple[int, float]]:
    """:func:`choose_block_length` of the first n positions of ``units`` up to distance d, for each (n, d) of
    ``windows``, from one pass of lag products (a window's series are the first n − k products of the longest's):
    the same lengths, bit for bit, as a call per window."""
    u, valid = units.vectors, units.valid
    n_all = max(n for n, _ in windows)
    lags = sorted(set().union(*(_block_lags(d, n) for n, d in windows)))
    # the lag products of every lag in one pass over chunks of anchors (a chunk of rows stays in cache for the
    # lags shorter than it): the same einsum, row for row, as one call per lag over all anchors; the chunks split
    # between the threads (einsum releases the GIL; each writes its own rows)
    products = {k: np.empty(n_all - k, dtype=u.dtype) for k in lags}

    def lag_products(starts):
        for c0 in starts:
            for k, a in products.items():
                c1 = min(c0 + _LAG_ROWS, n_all - k)
                if c0 < c1:
                    np.einsum("ij,ij->i", u[c0:c1], u[c0 + k:c1 + k], out=a[c0:c1])

    tasks = [(n, k) for n, d in windows for k in _block_lags(d, n)]
    starts = range(0, n_all, _LAG_ROWS)
    threads = max(1, min(analysis_threads(), len(tasks)))
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lag_products, [starts[t::threads] for t in range(threads)]))
        # each series' length on its own (an FFT of twice its length; pocketfft releases the GIL): the threads
        # share them
        lengths = dict(zip(tasks, pool.map(lambda t: politis_white(
            products[t[1]][:t[0] - t[1]][valid[:t[0] - t[1]] & valid[t[1]:t[0]]]), tasks)))
    out = []
    for n, d in windows:
        best, corr = 1.0, 0.0
        for k in _block_lags(d, n):
            b, c = lengths[n, k]
            best, corr = max(best, b), max(corr, c)
        low, high = math.ceil(n / max_blocks), max(1, n // MIN_BLOCKS)
        out.append((int(min(max(math.ceil(best), low), max(high, low))), float(corr)))
    return out


def _block_lag_sums(x: np.ndarray, block_length: int, size: int, buffers: dict | None = None) -> np.ndarray:
    """Σ_{i∈B_b} x_i · x_{i+k} for the blocks B_b = [b·L, (b + 1)·L) of x (n, dim), k < size, by
    real FFTs (see :func:`anchor_block_sums`, Notes); shape (n_blocks, size), float64. ``buffers``: a dict whose
    working arrays are reused (see :func:`anchor_block_sums`)."""
    n, dim = x.shape
    length = block_length
    n_blocks = math.ceil(n / length)
    n_fft = scipy.fft.next_fast_len(2 * length, real=True)  # C(t) for t in (-L, L) without wrap-around
    reach = min(n_blocks - 1, (size - 1) // length + 1)  # largest block offset c - b a distance needs
    # at least 16 dims per chunk: the per-frequency (n_blocks x chunk) products are inefficient below
    # (measured at n = 1,048,576: 1.7 s per dim with 2 dims per product, 0.04 s with 32)
    chunk = min(dim, max(_MIN_CHUNK_DIMS, _FFT_BLOCK_ENTRIES // (n_blocks * n_fft)))
    n_freq = n_fft // 2 + 1
    padded = _zeros(buffers, "padded", (n_blocks * length, chunk)) if n_blocks * length > n \
        else None  # the last block zero-padded
    # only the pairs c >= b are used: the blocks' rows in groups of 8 (at least 8 and 16 blocks), each group
    # times the blocks from its first on (5/8 of the products at 32 blocks); the frequencies split between threads
    # (numpy's products release the GIL). Each entry is the same sum over dims, in the same order, as the one
    # product of every pair before (tests/analysis/test_bootstrap.py checks it bit for bit).
    rows = [(g, g + 8) for g in range(0, n_blocks - 15, 8)] if n_blocks >= 16 else []
    rows.append((rows[-1][1] if rows else 0, n_blocks))
    # spectra[g][f, b − r0, c − r0] = Σ_dims conj(X_b) X_c at frequency f for group g's rows r0 <= b < r1 and the
    # blocks c >= r0: only what the products fill (5/8 of every pair's spectra at 32 blocks)
    spectra = [_zeros(buffers, f"spectra {g}", (n_freq, r1 - r0, n_blocks - r0), np.complex128)
               for g, (r0, r1) in enumerate(rows)]
    threads = analysis_threads()  # the CPUs this process may use, or its share of them in a pool of workers
    parts = [(f0, min(n_freq, f0 + -(-n_freq // threads))) for f0 in range(0, n_freq, -(-n_freq // threads))]

    # each part's frequencies a few at a time (_PRODUCT_FREQUENCIES): their spectra copied to a small contiguous
    # (frequency, block, dim) buffer and its conjugate, so every product reads contiguous matrices (on the FFT's
    # (block, dim, frequency) layout it read strided rows: 9x slower, the same sums bit for bit), in buffers reused
    # for every group and chunk (fresh memory is slow to fault in)
    few = _PRODUCT_FREQUENCIES
    scratch = {f0: tuple(np.empty(few * n_blocks * max(chunk, n_blocks), dtype=np.complex128) for _ in range(3))
               for f0, f1 in parts}

    def products(f0, f1, spec):
        rows_buf, conj_buf, product_buf = scratch[f0]
        shape = spec.shape[1:]
        for g0 in range(f0, f1, few):
            g1 = min(f1, g0 + few)
            block = rows_buf[:(g1 - g0) * shape[0] * shape[1]].reshape(g1 - g0, *shape)
            np.copyto(block, spec[g0:g1])
            conj = np.conjugate(block, out=conj_buf[:block.size].reshape(block.shape))
            for (r0, r1), out in zip(rows, spectra):
                product = product_buf[:(g1 - g0) * (r1 - r0) * (n_blocks - r0)].reshape(
                    g1 - g0, r1 - r0, n_blocks - r0)
                out[g0:g1] += np.matmul(conj[:, r0:r1], block[:, r0:].transpose(0, 2, 1), out=product)

    spec_buf = _buffer(buffers, "spectra of blocks", (n_blocks * chunk * n_freq,), np.complex128)
    block_parts = [(b0, min(n_blocks, b0 + -(-n_blocks // threads))) for b0 in range(0, n_blocks, -(-n_blocks // threads))]
    with ThreadPoolExecutor(max(len(parts), len(block_parts))) as pool:
        for c0 in range(0, dim, chunk):
            m = min(chunk, dim - c0)
            if padded is None:
                rows_of_blocks = x[:, c0:c0 + m].reshape(n_blocks, length, m)
            else:
                padded[:n, :m] = x[:, c0:c0 + m]
                rows_of_blocks = padded[:, :m].reshape(n_blocks, length, m)
            # the blocks' spectra made into one buffer for every chunk (numpy's rfft has ``out``, scipy's not: the
            # same pocketfft transform, bit for bit; a fresh 268 MB a chunk at 10^6 positions was ~0.3 s of page
            # faults) straight from the blocks' strided rows, zero-padded by the transform (no copy of the rows to a
            # padded buffer: 0.34 against 0.38 CPU-s a chunk at 10^6 positions and 268 MB less memory; the same
            # bits), the blocks split between the threads
            spec = spec_buf[:n_blocks * m * n_freq].reshape(n_blocks, m, n_freq)

            def block_spectra(part, rows_of_blocks=rows_of_blocks, spec=spec):
                b0, b1 = part
                np.fft.rfft(rows_of_blocks[b0:b1].transpose(0, 2, 1), n=n_fft, axis=-1, out=spec[b0:b1])

            list(pool.map(block_spectra, block_parts))
            spec = spec.transpose(2, 0, 1)  # (frequency, block, dim)
            list(pool.map(lambda part: products(*part, spec), parts))
    sums = np.zeros((n_blocks, size))
    for b in range(n_blocks):
        hi = min(n_blocks, b + reach + 1)
        (r0, _), group = next((r, g) for r, g in zip(rows, spectra) if r[0] <= b < r[1])
        # corr[t, o] = C_{b,b+o}(t), t mod n_fft
        corr = scipy.fft.irfft(group[:, b - r0, b - r0:hi - r0], n=n_fft, axis=0, workers=threads)
        # k = o·L + r: sums[b, k] = C_{b,b+o}(r) + C_{b,b+o+1}(r − L), a run of L distances per offset o, added in
        # that order (near, then far)
        for o in range(hi - b):  # near: offsets o < hi − b
            k0, k1 = o * length, min((o + 1) * length, size)
            if k0 < k1:
                sums[b, k0:k1] += corr[:k1 - k0, o]
        for o in range(hi - b - 1):  # far: offsets o + 1 < hi − b; (r − L) mod n_fft = n_fft − L + r
            k0, k1 = o * length, min((o + 1) * length, size)
            if k0 < k1:
                sums[b, k0:k1] += corr[n_fft - length:n_fft - length + k1 - k0, o + 1]
    return sums


def resample_units(sums, counts, n_resamples: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """Resample units (anchor blocks or seeds) with replacement and pool them.

    Parameters
    ----------
    sums, counts : ndarray of shape (n_units, n_distances)
        Per-unit sums of similarities and pair counts (for seeds: mean × n_pairs and n_pairs).
    n_resamples : int
    rng : numpy.random.Generator

    Returns
    -------
    means, pooled_counts : ndarray of shape (n_resamples, n_distances)
        Resampled profiles (NaN where a resample holds no pair) and their pair counts.
    """
    return _pooled(_resample_weights(sums.shape[0], n_resamples, rng), sums, counts)


def _resample_weights(n_units: int, n_resamples: int, rng) -> np.ndarray:
    """How often each unit is drawn in each resample, shape (n_resamples, n_units)."""
    picks = rng.integers(0, n_units, size=(n_resamples, n_units))
    weights = np.zeros((n_resamples, n_units))
    np.add.at(weights, (np.arange(n_resamples)[:, None], picks), 1.0)
    return weights


def _pooled(weights, sums, counts, buffers=None) -> tuple[np.ndarray, np.ndarray]:
    """Resampled means (NaN without a pair) and pair counts, shape (n_resamples, n_columns): ``weights @ sums`` over
    ``weights @ counts``. ``buffers``: a dict the results are written into, reused by the next call with it (the same
    values; fresh memory is slow to fault in), so the results are only valid until then."""
    shape = (weights.shape[0], sums.shape[1])
    means = np.matmul(weights, sums, out=_buffer(buffers, "means", shape))
    pooled_counts = np.matmul(weights, counts, out=_buffer(buffers, "counts", shape))
    with np.errstate(invalid="ignore", divide="ignore"):
        means /= pooled_counts  # in place: fresh memory is slow
    means[np.less_equal(pooled_counts, 0, out=_buffer(buffers, "empty", shape, bool))] = np.nan
    return means, pooled_counts


def _pooled_means(weights, sums, counts, blocks=None, c0: int = 0, buffers=None) -> np.ndarray:
    """The resampled means of :func:`_pooled` (its first result, bit for bit), shape (n_resamples, n_columns).

    ``blocks`` (:func:`_block_layout` of the whole counts array) and ``c0`` (the first column of ``counts``): the
    pair counts by their closed form (:func:`_block_count_terms`), made and divided by a tile of _TILE_COLUMNS
    distances at a time (in cache), not as a second array of the means' size with passes of its own for the
    division and the empty entries (five passes over 64 MB for a chunk of 8 resamples of 10^6 distances). The
    product ``weights @ sums`` stays one call (a product split into pieces of columns or rows can differ in its
    last bits). Without ``blocks``: :func:`_pooled`. ``buffers``: as for :func:`_pooled` (the means are only valid
    until the next call with it)."""
    if blocks is None:
        return _pooled(weights, sums, counts, buffers)[0]
    n_rows, width = weights.shape[0], sums.shape[1]
    means = np.matmul(weights, sums, out=_buffer(buffers, "means", (n_rows, width)))
    if width == 0 or n_rows == 0:
        return means
    j, partial, whole, padded = _block_count_terms(weights, blocks, c0, width)
    tile = min(width, _TILE_COLUMNS)
    pooled = _buffer(buffers, "counts", (n_rows, tile))
    runs = blocks.runs[(blocks.runs > c0) & (blocks.runs < c0 + width)] - c0  # runs of distances with the same j
    edges = np.union1d(np.arange(0, width, tile), runs)
    for s0, s1 in zip(edges, [*edges[1:], width]):
        s0, s1 = int(s0), int(s1)
        b = j[s0]
        counts_tile = pooled[:, :s1 - s0]
        np.multiply(padded[:, b, None], partial[None, s0:s1], out=counts_tile)
        counts_tile += whole[:, b, None]
        m = means[:, s0:s1]
        with np.errstate(invalid="ignore", divide="ignore"):
            m /= counts_tile
        empty = whole[:, b] <= 0  # a pair count is whole_b + w_b · partial >= whole_b, all >= 0: only these rows
        if empty.any():
            np.copyto(m, np.nan, where=(counts_tile <= 0) & empty[:, None])
    return means


def _buffer(buffers, name: str, shape, dtype=np.float64):
    """An array of ``shape`` from ``buffers[name]`` (grown when too small), or a new one without ``buffers``."""
    if buffers is None:
        return np.empty(shape, dtype=dtype)
    size = math.prod(shape)
    if name not in buffers or buffers[name].size < size:
        buffers[name] = np.empty(size, dtype=dtype)
    return buffers[name][:size].reshape(shape)


def _zeros(buffers, name: str, shape, dtype=np.float64):
    """:func:`_buffer` filled with zeros (``np.zeros`` without ``buffers``)."""
    if buffers is None:
        return np.zeros(shape, dtype=dtype)
    out = _buffer(buffers, name, shape, dtype)
    out.fill(0)
    return out


@dataclasses.dataclass(frozen=True)
class _BlockLayout:
    """Contiguous anchor blocks of positions that are all valid (:func:`_block_layout`), and what their pair counts'
    closed form needs at each distance (:func:`_block_count_terms`)."""

    start: np.ndarray  # (n_blocks,) first anchor of each block
    stop: np.ndarray  # (n_blocks,) one past its last anchor
    whole: np.ndarray  # (n_distances,) j: the blocks wholly before n − k (they hold all their anchors' pairs at k)
    partial: np.ndarray  # (n_distances,) anchors of block j with a pair at k: n − k − start_j, at least 0
    runs: np.ndarray  # first distances of the runs of distances with the same j (after distance 0)


def _block_layout(counts) -> _BlockLayout | None:
    """The blocks when ``counts`` are the pair counts of contiguous anchor blocks of positions that are all valid,
    column k being distance k (block b's anchors i with i + k < n: min(stop_b, n − k) − start_b, at least 0;
    :func:`anchor_block_sums` with every position valid), else None. Checked entry for entry."""
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.size == 0:
        return None
    length = counts[:, 0]
    if not (np.all(length >= 1) and np.all(length == np.round(length)) and length.sum() < 2**52):
        return None
    stop = np.cumsum(length)
    start, n = stop - length, stop[-1]
    size = counts.shape[1]
    for b, row in enumerate(counts):  # each block's three pieces: all its anchors, fewer, none
        full, none = int(min(size, n - stop[b] + 1)), int(min(size, n - start[b]))
        if not (np.all(row[:full] == length[b]) and np.all(row[none:] == 0)
                and np.array_equal(row[full:none], n - start[b] - np.arange(full, none))):
            return None
    free = n - np.arange(size, dtype=np.float64)  # n − k
    whole = np.searchsorted(stop, free, side="right")  # blocks wholly before n − k
    partial = np.maximum(free - np.append(start, n)[whole], 0.0)  # anchors of block j with i + k < n (j = B: none)
    return _BlockLayout(start, stop, whole, partial, np.flatnonzero(np.diff(whole)) + 1)


def _block_count_terms(weights, layout: _BlockLayout, c0: int, width: int):
    """The pair counts ``weights @ counts[:, c0:c0 + width]`` of :func:`_block_layout`'s blocks in closed form.

    At distance k the blocks ending at or before n − k hold all their anchors, the next one n − k − start of them
    and the later ones none, so a resample's pairs are whole_j + w_j · partial(k) with whole_j = Σ_{b < j} w_b ·
    length_b, partial(k) = n − k − start_j and j the number of whole blocks: O(n_resamples · width) instead of a
    product with n_units terms. Every term and sum is an integer below 2^53, exact in float64, so the counts equal
    the product bit for bit (whatever its order).

    Returns
    -------
    (j, partial, whole, padded)
        j and partial(k) for each distance (shape (width,)), whole (shape (n_resamples, n_blocks + 1)) and the
        weights with a zero column for j = n_blocks (shape (n_resamples, n_blocks + 1)).
    """
    whole = np.zeros((weights.shape[0], weights.shape[1] + 1))
    np.cumsum(weights * (layout.stop - layout.start), axis=1, out=whole[:, 1:])
    padded = np.pad(weights, ((0, 0), (0, 1)))
    return layout.whole[c0:c0 + width], layout.partial[c0:c0 + width], whole, padded


def min_replicates(level: float) -> int:
    """Fewest replicates for a percentile interval at ``level``: ⌈2 / (1 − level)⌉ (40 at 0.95).

    With fewer, (1 − level) / 2 of the replicates is less than one, so an end
    of the interval is the most extreme replicate (or an interpolation towards
    it) and its coverage is not ``level``.
    """
    return math.ceil(2 / (1 - level) - 1e-9)


def percentile_interval(values, level: float, *, integer: bool = False, widen: float = 1.0,
                        minimum: float | None = None) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates, optionally widened about their median.

    Parameters
    ----------
    values : array_like of shape (n_resamples,)
        Replicates; NaN entries are left out, +inf counts as beyond any bound (−inf below any: a difference of
        replicates one of which is beyond the window).
    level : float
        Coverage in (0, 1).
    integer : bool
        Use the ``inverted_cdf`` quantile (an observed value, so integer
        replicates give integer bounds) instead of linear interpolation; a widened
        interval is rounded outwards.
    widen : float
        Each end moved away from the replicates' median by this factor (>= 1;
        :func:`interval_widening`): low = m − widen · (m − q_low), high = m + widen · (q_high − m).
    minimum : float, optional
        The smallest value the quantity can take (:func:`summary_floor`: a distance is at least 1, a length or an
        integral at least 0): a widened low end below it is set to it (a 1/e distance of 41 [−10, 68] is
        41 [1, 68]). Replicates never lie below it, so only the widening can reach there; the coverage is
        unchanged, since the true value is never below it either.

    Returns
    -------
    (low, high) : floats; NaN if no finite replicate, and ``high`` NaN if the
    upper quantile is +inf (unbounded within the window). Both NaN when
    there are fewer than :func:`min_replicates` ``(level)`` usable
    replicates: an interval's ends must lie between replicates, not be
    the extreme ones (with 5 replicates a "95 %" interval is their range,
    and the point estimate can fall outside it).
    """
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if v.size < min_replicates(level) or not np.isfinite(v).any():
        return math.nan, math.nan
    method = "inverted_cdf" if integer else "linear"
    largest, smallest = float(np.max(v[np.isfinite(v)])), float(np.min(v[np.isfinite(v)]))
    v = np.clip(v, -_BEYOND, _BEYOND)  # ±inf: beyond any bound (interpolating with inf gives inf - inf)
    q = np.quantile(v, [(1 - level) / 2, (1 + level) / 2], method=method)
    q[q > largest] = np.inf  # interpolated towards a replicate beyond the window: beyond it too
    q[q < smallest] = -np.inf
    if widen != 1.0:
        mid = float(np.quantile(v, 0.5, method=method))
        if smallest <= mid <= largest:
            q = np.array([mid - widen * (mid - q[0]), mid + widen * (q[1] - mid)])
            if integer:
                q = np.array([math.floor(q[0]), math.ceil(q[1]) if np.isfinite(q[1]) else q[1]])
            if minimum is not None and np.isfinite(q[0]) and q[0] < minimum:
                q[0] = minimum
    low, high = (float(x) if np.isfinite(x) else math.nan for x in q)
    return low, high


def summary_interval(values, level: float, widen: float = 1.0) -> tuple[float, float]:
    """:func:`percentile_interval` of a model-free summary's replicates: whole-number ends for a distance
    (:func:`_integral`) and never below the smallest value the summary takes (:func:`summary_floor`)."""
    return percentile_interval(values, level, integer=_integral(values), widen=widen, minimum=summary_floor(values))


def summary_floor(values) -> float:
    """The smallest value a model-free summary can take, for :func:`percentile_interval`'s ``minimum``: 1 for a
    distance (whole-number replicates: a band width or crossing, since S(0) = 1 is above every level; a first
    minimum), 0 otherwise (the integral scale, up to the first zero crossing of S / S(0) > 0)."""
    return 1.0 if _integral(values) else 0.0


def interval_widening(n_units: int, level: float, correlation_length: float = 0.0,
                      block_length: float | None = None) -> float:
    """Factor by which percentile intervals from ``n_units`` resampled units are widened about their median.

    Two corrections, multiplied:

    * few units (Hesterberg 2015, "What teachers should know about the bootstrap", §5: the expanded
      percentile interval): a bootstrap of B units has variance (B − 1) / B of the plug-in one and no
      allowance for estimating it from B units; the normal interval needs sqrt(B / (B − 1)) ·
      t_{B−1, (1 + level) / 2} / z_{(1 + level) / 2} to match Student's (1.04 at B = 32, 1.29 at B = 8);
    * blocks shorter than the dependence (anchor blocks): neighbouring blocks are correlated, so the
      block variance is low by the fraction correlation_length / block_length (Künsch 1989, first-order
      bias; correlation_length = Σ|k| γ(k) / Σ γ(k) from :func:`politis_white`): 1 / sqrt(1 − ratio), the
      ratio capped at 1/2.

    Returns 1 when ``n_units`` < 2.
    """
    if n_units < 2:
        return 1.0
    z = scipy.special.ndtri((1 + level) / 2)  # the normal quantile (scipy.stats.norm.ppf, without importing scipy.stats)
    factor = math.sqrt(n_units / (n_units - 1)) * scipy.special.stdtrit(n_units - 1, (1 + level) / 2) / z
    if block_length and correlation_length > 0:
        factor /= math.sqrt(1 - min(correlation_length / block_length, 0.5))
    return float(factor)


@dataclasses.dataclass(frozen=True)
class BootstrapResult:
    """Bootstrap replicates and intervals of one profile.

    Attributes
    ----------
    method : str
        ``"anchor_block"`` or ``"seed"``.
    level : float
    n_resamples : int
    block_length : int or None
        Anchors per block (anchor_block only).
    thresholds : tuple of float
    decay_lengths : ndarray of shape (n_resamples,)
        The selected model's decay length refitted on each resample (positions;
        NaN if no model was selected or the refit failed).
    band_widths : ndarray of shape (n_resamples, n_thresholds)
        Each resample's band width at each threshold (positions; +inf: beyond
        the window; NaN: undefined, the resample has no pair at the window's end).
    decay_length_ci : (float, float)
    band_widths_ci : dict mapping threshold to (low, high)
        Integer positions; high NaN when the upper quantile lies beyond the window.
    profile_ci : (ndarray, ndarray) of shape (n_distances,) each
        Pointwise percentile band of the resampled mean profile.
    n_failed : int
        Refits that failed (not counted in the decay-length interval).
    exact : bool
        Every resampled profile equals the mean profile (within 1e-12 at
        every distance): the units carry no sampling variability, as in an
        exactly translation-invariant table, and every interval has zero
        width for that reason, not because it was estimated narrow.
    widening : float
        Factor the percentile intervals were widened by about the replicates' median (:func:`interval_widening`).
    correlation_length : float
        Of the anchors' lag products (positions), behind ``widening``.
    summaries, summaries_ci : dict
        Replicates (shape (n_resamples,)) and intervals of the model-free summaries (``summarise``).
    """

    method: str
    level: float
    n_resamples: int
    block_length: int | None
    thresholds: tuple[float, ...]
    decay_lengths: np.ndarray
    band_widths: np.ndarray
    decay_length_ci: tuple[float, float]
    band_widths_ci: dict
    profile_ci: tuple[np.ndarray, np.ndarray]
    n_failed: int
    exact: bool = False
    widening: float = 1.0
    correlation_length: float = math.nan
    summaries: dict = dataclasses.field(default_factory=dict)
    summaries_ci: dict = dataclasses.field(default_factory=dict)


def _column_quantiles(values, qs, buffers=None):
    """Linear-interpolation quantiles of each column, NaN left out (all-NaN column: NaN).

    Same as ``np.nanquantile(values, q, axis=0)``, vectorised (numpy loops over columns), in
    chunks of columns (temporaries of ~8 MB, reused rather than freshly faulted in; ``buffers``: a dict whose
    array for the sorted columns is reused by the next call with it)."""
    n_rows, n_cols = values.shape
    out = [np.full(n_cols, np.nan) for _ in qs]
    if n_rows == 0:  # no resample: no interval
        return out
    step = max(1, _CHUNK_ENTRIES // max(1, n_rows))
    q_all = np.asarray(qs, dtype=np.float64)
    for c0 in range(0, n_cols, step):
        part = values[:, c0:c0 + step]
        v = _buffer(buffers, "sorted", part.shape).T  # columns as rows, each contiguous in the copy below
        np.copyto(v, part.T)
        v.sort(axis=1)  # NaN sort last
        if not np.isnan(v[:, -1]).any():  # no NaN: the same order statistics and weights in every column
            h = (n_rows - 1) * q_all
            lo = np.floor(h).astype(int)
            hi = np.minimum(lo + 1, n_rows - 1)
            for o, q_lo, q_hi, frac in zip(out, lo, hi, h - lo):  # the same arithmetic as below, entry for entry
                o[c0:c0 + step] = v[:, q_lo] + frac * (v[:, q_hi] - v[:, q_lo])
            continue
        count = np.sum(~np.isnan(v), axis=1)
        rows = np.arange(v.shape[0])
        for o, q in zip(out, qs):
            h = np.maximum(count - 1, 0) * q
            lo = np.floor(h).astype(int)
            hi = np.minimum(lo + 1, np.maximum(count - 1, 0))
            frac = h - lo
            value = v[rows, lo] + frac * (v[rows, hi] - v[rows, lo])
            o[c0:c0 + step] = np.where(count > 0, value, np.nan)
    return out


def _spread(profiles) -> float:
    """max |profile − mean profile| over resamples and distances, NaN (no pair) left out; in chunks of columns.

    The NaN-skipping mean and maximum without numpy's warnings (an all-NaN column: a distance without any pair),
    so without ``warnings.catch_warnings``, which is not thread-safe: the mean is ``np.nanmean``'s own sum and
    count, bit for bit."""
    n_rows, n_cols = profiles.shape
    step = max(1, _CHUNK_ENTRIES // max(1, n_rows))
    spread = 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        for c0 in range(0, n_cols, step):
            p = profiles[:, c0:c0 + step]
            missing = np.isnan(p)
            mean = np.sum(np.where(missing, 0.0, p), axis=0) / np.sum(~missing, axis=0, dtype=np.intp)
            spread = max(spread, float(np.fmax.reduce(np.abs(p - mean), axis=None, initial=0.0)))
    return spread


class _BufferPool:
    """Sets of working arrays (dicts for :func:`_buffer`) for chunks computed in threads.

    A chunk takes a set no other chunk is using and gives it back for the next one, so a pass needs as many sets
    as chunks run at once, whichever threads run them, and the distance chunks' sets serve the resample chunks
    after them. Sets per thread (``threading.local``) were three for two threads (the first chunk of resamples is
    summarised in the calling thread) and fresh for every pool's new threads: at 8 resamples of 10^6 distances,
    64 MB of page faults each (the run's bootstrap 300k -> 75-83k minor faults). The values never depend on
    which set a chunk gets.
    """

    def __init__(self):
        self._free: list[dict] = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def take(self):
        with self._lock:
            buffers = self._free.pop() if self._free else {}
        try:
            yield buffers
        finally:
            with self._lock:
                self._free.append(buffers)


def _in_order(function, items):
    """``function(item)`` for each item, computed in :func:`~poslab._threads.analysis_threads` threads (numpy's
    products, sorts and reductions release the GIL) and yielded in the items' order, so what is made of them does
    not depend on the threads' timing. ``function`` must return results of its own (not views of a buffer it
    reuses) and report nothing (the caller reports progress as the results arrive, in order)."""
    items = list(items)
    threads = min(analysis_threads(), len(items))
    if threads <= 1:
        yield from map(function, items)
        return
    pool = ThreadPoolExecutor(threads)
    try:
        yield from pool.map(function, items)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _refit_points(fits: DecayFits, y_all, n_all, progress=None) -> tuple[np.ndarray, int]:
    """Refit the selected model to resampled fitted points y_all (pairs n_all), shape (n_resamples, n_points)."""
    best = fits.selected
    reps = np.full(y_all.shape[0], np.nan)
    if best is None or best.decay_model.scale_free:
        return reps, 0
    model = best.decay_model
    d_fit = fits.distance
    start, end = fits.fit_range
    p0 = np.array([best.params[p] for p in model.param_names])
    lower, upper = (np.asarray(b, dtype=float) for b in model.bounds(d_fit, fits.similarity))
    failed = 0
    for r in range(y_all.shape[0]):
        y = y_all[r]
        use = np.isfinite(y) & (n_all[r] >= 2)
        sigma = None if fits.sigma is None else fits.sigma[use]
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                popt, _ = scipy.optimize.curve_fit(model.function, d_fit[use], y[use], p0=p0, sigma=sigma,
                                             absolute_sigma=False, method="lm", maxfev=MAXFEV)
                if np.any((popt < lower) | (popt > upper)):  # left the model: redo within the bounds
                    popt, _ = scipy.optimize.curve_fit(model.function, d_fit[use], y[use], p0=p0, sigma=sigma,
                                                 absolute_sigma=False, bounds=(lower, upper), method="trf",
                                                 x_scale="jac", maxfev=MAXFEV)
                length = model.decay_length(popt, start)
            if not np.isfinite(length):
                raise ValueError("no finite decay length")
            reps[r] = length if start + length <= end else np.inf  # not reached within the fit range
        except Exception:  # noqa: BLE001 - a failed refit is a NaN replicate, counted
            failed += 1
        if progress is not None:
            progress("refits", r + 1, y_all.shape[0])
    return reps, failed


def bootstrap_anchor_blocks(distance, blocks: AnchorBlocks, n_resamples: int, rng, *, fits: DecayFits, thresholds,
                            level: float = BOOTSTRAP_LEVEL, max_failed_fraction: float = MAX_FAILED_FRACTION,
                            correlation_length: float = 0.0, summarise=None, progress=None) -> BootstrapResult:
    """The anchor-block bootstrap of one run: :func:`bootstrap_units` over its anchor blocks.

    Parameters
    ----------
    distance : ndarray of shape (n_distances,)
        0, 1, ..., max_distance (positions): the columns of ``blocks``.
    blocks : AnchorBlocks
    n_resamples : int
    rng : numpy.random.Generator
    fits, thresholds, level, max_failed_fraction, correlation_length, summarise, progress
        As for :func:`bootstrap_units`.

    Returns
    -------
    BootstrapResult
        ``method = "anchor_block"``, ``block_length`` from ``blocks``.
    """
    return bootstrap_units(distance, blocks.sums, blocks.counts, n_resamples, rng, fits=fits, thresholds=thresholds,
                           level=level, method="anchor_block", block_length=blocks.block_length,
                           max_failed_fraction=max_failed_fraction, correlation_length=correlation_length,
                           summarise=summarise, progress=progress)


@one_blas_thread
def bootstrap_units(distance, sums, counts, n_resamples: int, rng, *, fits: DecayFits, thresholds,
                    level: float = BOOTSTRAP_LEVEL, method: str = "anchor_block", block_length: int | None = None,
                    max_failed_fraction: float = MAX_FAILED_FRACTION, correlation_length: float = 0.0,
                    summarise=None, progress=None) -> BootstrapResult:
    """Band widths, refitted decay lengths and intervals from units (anchor blocks or seeds) resampled with replacement.

    Each resample draws the units with replacement (:func:`resample_units`,
    the same draws from ``rng``) and pools them into a profile. The resampled
    profiles are made and reduced (band widths, spread, pointwise
    percentiles) a chunk of distances at a time, never all at once (two
    (n_resamples, n_distances) arrays would take 3.2 GB at 200 resamples of
    1,048,576 distances), and the refits' points come from the units' sums at
    the fitted distances (or their bins): O(n_resamples · (n_fitted + ~10⁶ /
    n_resamples)) memory.

    Parameters
    ----------
    distance : ndarray of shape (n_distances,)
        Distances of the columns (positions), increasing.
    sums, counts : ndarray of shape (n_units, n_distances)
        Per-unit sums of similarities and pair counts (anchor blocks:
        :class:`AnchorBlocks`; seeds: mean × n_pairs and n_pairs).
    n_resamples : int
    rng : numpy.random.Generator
    fits : DecayFits
        The fit of the original profile (target ``profile``); its selected
        model is refitted on the distances it used, from its estimate.
    thresholds : sequence of float
        Band-width thresholds.
    level : float
        Level of the percentile intervals, in (0, 1).
    method : {"anchor_block", "seed"}
        Recorded.
    block_length : int, optional
        Recorded for anchor blocks.
    max_failed_fraction : float
        More failed refits than this fraction leave the decay-length interval
        NaN (default MAX_FAILED_FRACTION = 0.1).
    correlation_length : float
        Of the anchors' lag products (:func:`choose_block_length`): with ``block_length`` it widens the anchor-block
        intervals (:func:`interval_widening`).
    summarise : callable, optional
        ``summarise(distance, profiles) -> dict of name -> ndarray of shape (n_rows,)``: model-free summaries of
        resampled profiles (rows), e.g. :func:`poslab.analysis.summaries`'s vectorised form; called on chunks
        of resamples (O(~64 MB) each); their replicates and intervals are ``summaries`` / ``summaries_ci``. A
        band width it returns (``band_width_<t>``) replaces the plain first crossing of that resample (so a
        crossing within the noise is +inf there too), except where the resample has no pair at the window's end.
    progress : callable, optional
        Told how far the work is, for a progress display (the result does not depend on it):
        ``progress(what, done, total)`` after each piece, ``what`` being ``"distances"`` (the resampled
        profiles, reduced a chunk of distances at a time: distances done of all), ``"refits"`` (resamples
        refitted) and ``"summaries"`` (resamples summarised by ``summarise``), in that order.

    Returns
    -------
    BootstrapResult
        Anchor blocks: every interval widened by :func:`interval_widening` (recorded as ``widening``); seeds: not.
    """
    distance = np.asarray(distance, dtype=float)
    thresholds = tuple(float(t) for t in thresholds)
    weights = _resample_weights(sums.shape[0], n_resamples, rng)
    widths = np.full((n_resamples, len(thresholds)), np.inf)
    last_defined = np.full(n_resamples, -np.inf)  # largest distance at which each resample has a pair
    low, high = np.full(distance.size, np.nan), np.full(distance.size, np.nan)
    spread = 0.0
    step = max(1, _CHUNK_ENTRIES // max(1, n_resamples))
    pool = _BufferPool()  # buffers for the chunks' resampled profiles, reused (fresh memory is slow) by both passes
    blocks = _block_layout(counts)
    settled = {"widths": False, "spread": False}  # what no later chunk can change any more (work it may skip)
    if blocks is not None:  # a resample has pairs up to distance n − 1 − the first anchor of its blocks, none beyond
        first_anchor = np.min(np.where(weights > 0, blocks.start, blocks.stop[-1]), axis=1)
        last_defined = distance[np.minimum(blocks.stop[-1] - 1 - first_anchor, distance.size - 1).astype(np.intp)]

    def reduce_chunk(c0):
        """One chunk of distances: its resampled profiles, reduced (their widths, last defined distance, spread
        and pointwise quantiles); the chunks are combined in order below, as if one after the other."""
        c1 = min(distance.size, c0 + step)
        with pool.take() as buffers:
            chunk = _pooled_means(weights, sums[:, c0:c1], counts[:, c0:c1], blocks, c0, buffers)
            # skipped once every resample has fallen below every threshold (spread: exceeded 1e-12) in earlier chunks
            w = None if settled["widths"] else first_crossings(distance[c0:c1], chunk, thresholds)
            if blocks is None:  # the last defined distances (known from the blocks' layout otherwise)
                defined = ~np.isnan(chunk)
                has = defined.any(axis=1)
                last = distance[c0:c1][defined.shape[1] - 1 - np.argmax(defined[:, ::-1], axis=1)]
            else:
                has = last = None
            return (c1, w, has, last, None if settled["spread"] else _spread(chunk),
                    _column_quantiles(chunk, [(1 - level) / 2, (1 + level) / 2], buffers))

    for c1, w, has, last, chunk_spread, (chunk_low, chunk_high) in _in_order(
            reduce_chunk, range(0, distance.size, step)):
        c0 = c1 - chunk_low.size
        if w is not None and np.isinf(widths).any():  # the first chunk falling below gives the width
            first = np.isinf(widths) & np.isfinite(w)
            widths[first] = w[first]
        if has is not None:
            last_defined = np.where(has, last, last_defined)
        if spread <= 1e-12:  # only whether it exceeds 1e-12 is used (exact resamples)
            spread = max(spread, chunk_spread)
        low[c0:c1], high[c0:c1] = chunk_low, chunk_high
        settled["widths"], settled["spread"] = not np.isinf(widths).any(), spread > 1e-12
        if progress is not None:
            progress("distances", c1, distance.size)
    # a resample that never falls below a threshold but has no pairs at the window's far end (its
    # blocks hold no anchor that far back) says nothing about a width there: undefined, not beyond
    widths[np.isinf(widths) & (last_defined < np.nanmax(np.where(counts.sum(axis=0) > 0, distance, np.nan)))[:, None]] = np.nan
    if fits.selected is not None and spread <= 1e-12:  # every resample is the profile: no refits needed
        reps, failed = np.full(n_resamples, fits.selected.decay_length), 0
    elif fits.selected is None:
        reps, failed = np.full(n_resamples, np.nan), 0
    else:
        if fits.bins is None:
            index = np.searchsorted(distance, fits.distance)
            point_sums, point_counts = sums[:, index], counts[:, index]
        else:
            index = np.searchsorted(distance, fits.bin_distance)
            point_sums = np.add.reduceat(sums[:, index], fits.bins[:, 0], axis=1)
            point_counts = np.add.reduceat(counts[:, index], fits.bins[:, 0], axis=1)
        reps, failed = _refit_points(fits, *_pooled(weights, point_sums, point_counts), progress)
    replicates = summary_replicates(distance, sums, counts, weights, summarise, progress=progress, _blocks=blocks,
                                    _pool=pool) \
        if summarise is not None else {}
    for j, t in enumerate(thresholds):  # the band widths by the summaries' rule (a crossing within the noise: +inf)
        name = threshold_name(t)
        if name in replicates:
            widths[:, j] = np.where(np.isnan(widths[:, j]), np.nan, replicates.pop(name))
    widen = interval_widening(sums.shape[0], level, correlation_length, block_length) \
        if method == "anchor_block" else 1.0
    result = _result(method, level, block_length, thresholds, fits, reps, failed, widths, (low, high),
                     max_failed_fraction, widen)
    summaries_ci = {name: summary_interval(v, level, widen) for name, v in replicates.items()}
    return dataclasses.replace(result, exact=bool(spread <= 1e-12), correlation_length=float(correlation_length),
                               summaries=replicates, summaries_ci=summaries_ci)


@one_blas_thread
def summary_replicates(distance, sums, counts, weights, summarise, *, progress=None, _blocks=False,
                       _pool=None) -> dict:
    """The model-free summaries of resampled profiles, a chunk of resamples (~64 MB) at a time.

    Parameters
    ----------
    distance : ndarray of shape (n_distances,)
    sums, counts : ndarray of shape (n_units, n_distances)
        Per-unit sums and pair counts (anchor blocks or seeds).
    weights : ndarray of shape (n_resamples, n_units)
        How often each unit is drawn in each resample.
    summarise : callable
        ``summarise(distance, profiles) -> {name: ndarray of shape (n_rows,)}``.
    progress : callable, optional
        ``progress("summaries", done, n_resamples)`` after each chunk (for a progress display).

    Returns
    -------
    dict of name -> ndarray of shape (n_resamples,)
    """
    rows = max(1, _REPLICATE_ENTRIES // max(1, distance.size))
    blocks = _block_layout(counts) if _blocks is False else _blocks  # False: not known yet
    pool = _BufferPool() if _pool is None else _pool  # sets of buffers, reused chunk after chunk

    def summarise_chunk(r0):
        with pool.take() as buffers:
            values = summarise(distance, _pooled_means(weights[r0:r0 + rows], sums, counts, blocks, buffers=buffers))
            return {name: np.array(v, dtype=float) for name, v in values.items()}  # owned: the buffers are reused

    starts = range(0, weights.shape[0], rows)
    parts = []
    # the first chunk here (``summarise`` may prepare its settings on its first call), the others in threads
    for r0, part in zip(starts, itertools.chain(map(summarise_chunk, starts[:1]), _in_order(summarise_chunk,
                                                                                             starts[1:]))):
        parts.append(part)
        if progress is not None:
            progress("summaries", min(r0 + rows, weights.shape[0]), weights.shape[0])
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]} \
        if parts else {}


def _integral(values) -> bool:
    """All finite values are whole numbers (distances): intervals then have integer ends."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return bool(v.size) and bool(np.all(v == np.round(v)))


def _result(method, level, block_length, thresholds, fits, reps, failed, widths, profile_ci,
            max_failed_fraction, widen=1.0) -> BootstrapResult:
    """Percentile intervals of one bootstrap's replicates."""
    n_resamples = widths.shape[0]
    return BootstrapResult(
        method=method, level=float(level), n_resamples=int(n_resamples),
        block_length=block_length, thresholds=thresholds, decay_lengths=reps, band_widths=widths,
        decay_length_ci=(percentile_interval(reps, level, widen=widen, minimum=0.0) if fits.selected is not None
                         and failed <= max_failed_fraction * n_resamples else (math.nan, math.nan)),
        band_widths_ci={t: percentile_interval(widths[:, j], level, integer=True, widen=widen, minimum=1.0)
                        for j, t in enumerate(thresholds)},
        profile_ci=profile_ci, n_failed=int(failed), widening=float(widen))
