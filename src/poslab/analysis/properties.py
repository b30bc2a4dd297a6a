"""Properties of a position table from the literature: monotonicity, translation
invariance (Wang et al., ICLR 2021), symmetry and locality (Chen et al., 2023);
from a table (its cosine-similarity matrix S) or from an exact kernel (a
Toeplitz S).

S is the cosine-similarity matrix between positions. No function forms S
whole: rows of S are computed for blocks of anchor positions (at most
~4·10⁶ entries at once). The anchor-based metrics (monotonicity, locality,
symmetry) use every ``anchor_step``-th position as anchor, a regular
subsample recorded in the table: every position up to :data:`MAX_ANCHORS`
positions, then at most MAX_ANCHORS anchors and at most
:data:`MAX_ENTRIES` / n_positions of them. Translation invariance comes from
the profile: exact up to 2048 positions, beyond from its anchor-sampled
standard deviation (see :func:`poslab.analysis.similarity_profile`).

What each metric measures, and its window:

* ``monotonicity_discordance`` — Wang et al.'s monotonicity, ∀ m > n:
  φ(x, x+m) < φ(x, x+n), counted over all pairs: over anchors x and pairs
  1 ≤ n < m ≤ w(x) of forward distances (w(x) = min(max_distance, n_positions
  − 1 − x): the run's window), the fraction that violate it (φ(x, x+m) ≥
  φ(x, x+n)). 0: similarity falls strictly with distance at every anchor; ½
  for a random table. Pairs are counted by a bottom-up merge sort of each
  row's ranks (:func:`_count_inversions`), O(w log² w) per anchor in numpy's sort.
* ``monotonicity_spearman`` — mean over anchors of Spearman's ρ between the
  distance and S[x, x+k], k = 1..w(x) (−1: strictly decreasing).
* ``translation_variance_ratio`` — within-diagonal over total sum of squares
  of S (tables only: a kernel is translation invariant by construction).
* ``symmetry`` and ``locality`` — Chen et al.'s, on a declared attention-like
  transform of S: each anchor row i attends to the keys j with |i − j| ≤
  ``reach`` (default :data:`LOCALITY_REACH`, 64) with weights A_ij =
  softmax_j(S_ij / τ) (default τ = :data:`LOCALITY_TAU` = 0.1 for cosine
  similarity; an attention prior, already a logit, uses τ = 1); only anchors
  whose whole reach lies inside the table are used, so for a
  translation-invariant table every row is the same and the values do not
  depend on n_positions (a softmax over all n keys would spread its mass
  like 1/n: that was poslab's old locality). Locality = mean_i Σ_j A_ij
  2^(−|i−j|) (1: every position attends to itself only). Symmetry = 1 − mean
  over anchors i and offsets m = 1..reach of |A_i,i−m − A_i,i+m| min-max
  scaled within each row, as in Chen et al.'s ``calculate.py``
  (``cal_matrix_symmetry``), with one guard: differences within 1e-9 of the
  row's largest weight are rounding noise, set to 0 before scaling (their
  scaling would blow noise of 1e-17 up to [0, 1]), so an exactly
  translation-invariant table scores exactly 1.

The column ``symmetry_deviation`` (‖S − Sᵀ‖ / ‖S‖) of earlier versions is gone:
it is 0 by construction for every cosine-similarity matrix;
:func:`kernel_asymmetry` still gives it for query/key kernels.

References
----------
Wang, B., Shang, L., Lioma, C., Jiang, X., Yang, H., Liu, Q., Simonsen, J. G.
(2021). On Position Embeddings in BERT. ICLR 2021. §3: with a proximity
φ between position vectors, *monotonicity*: ∀x, m, n: m > n ⟺
φ(x, x+m) < φ(x, x+n); *translation invariance*: ∀x₁…xₙ, m:
φ(x₁, x₁+m) = … = φ(xₙ, xₙ+m); *symmetry*: ∀x, y: φ(x, y) = φ(y, x).

Chen, L., Varoquaux, G., Suchanek, F. M. (2023). The Locality and Symmetry
of Positional Encodings. Findings of EMNLP 2023 (arXiv:2310.12864), and
their reference implementation ``locality_symmetry/calculate.py``
(``matrix_locality``: Loc(A) = (1/n) Σ_i Σ_j A_ij 2^(−|i−j|) for a
row-stochastic attention matrix A; ``cal_matrix_symmetry``: 1 − the mean of
the row-wise min-max scaled |A_i,i−m − A_i,i+m|).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from .._threads import analysis_threads
from .profile import _STD_ANCHORS, _STD_SEED, SimilarityProfile, _stratified_anchors
from .similarity import UnitRows

__all__ = ["MAX_ANCHORS", "MAX_ENTRIES", "MIN_ANCHORS", "LOCALITY_TAU", "LOCALITY_REACH", "anchor_positions",
           "monotonicity", "translation_variance_ratio", "kernel_asymmetry", "attention_rows", "locality", "symmetry",
           "table_properties", "kernel_properties", "Properties"]

#: Tables with more positions use a regular subsample of this many anchors (at most).
MAX_ANCHORS = 2048
#: ... and of at most this many anchors × positions (entries of S), but never fewer than MIN_ANCHORS anchors.
MAX_ENTRIES = 2**23
#: Fewest anchors of a subsample.
MIN_ANCHORS = 32
#: Largest number of entries of S held at once.
_BLOCK_ENTRIES = 4_000_000
#: Temperature of the attention-like transform softmax(S / τ) of cosine similarities (locality, symmetry).
LOCALITY_TAU = 0.1
#: Keys each anchor attends to: |i − j| <= LOCALITY_REACH (2^-64 weighs nothing in locality).
LOCALITY_REACH = 64
#: Differences of attention weights within this fraction of the row's largest weight are rounding noise (symmetry).
_SYMMETRY_NOISE = 1e-9
#: Rows with at most this many valid entries get Spearman's sums in exact integers (every partial sum < 2^51 / 4).
_EXACT_RHO = 2**18
#: Fewest entries per row sorted at once by the merge levels of :func:`_count_inversions`.
_SORT_WIDTH = 256


def anchor_positions(n_positions: int, max_anchors: int = MAX_ANCHORS,
                     max_entries: int = MAX_ENTRIES) -> tuple[np.ndarray, int]:
    """Anchors used by the anchor-based metrics: every ``step``-th position.

    Parameters
    ----------
    n_positions : int
    max_anchors : int
        Most anchors.
    max_entries : int
        Most anchors × positions (rows of S computed), down to :data:`MIN_ANCHORS` anchors.

    Returns
    -------
    anchors : ndarray of int, shape (ceil(n_positions / step),)
    step : int
        ceil(n_positions / count), count = min(max_anchors, max(MIN_ANCHORS,
        max_entries // n_positions)) (1: every position).
    """
    count = max(1, min(max_anchors, max(MIN_ANCHORS, max_entries // max(1, n_positions))))
    step = max(1, math.ceil(n_positions / count))
    return np.arange(0, n_positions, step), step


def _row_blocks(anchors, n_columns):
    size = max(1, _BLOCK_ENTRIES // max(1, n_columns))
    for a in range(0, anchors.size, size):
        yield anchors[a:a + size]


def _forward_blocks(anchors, max_distance):
    """Chunks of sorted anchors whose forward strip rows × (span + max_distance) stays below _BLOCK_ENTRIES."""
    step = int(np.min(np.diff(anchors))) if anchors.size > 1 else 1
    size = 1
    while size < anchors.size and (2 * size) * (2 * size * step + max_distance + 1) <= _BLOCK_ENTRIES:
        size *= 2
    for a in range(0, anchors.size, size):
        yield anchors[a:a + size]


def monotonicity(units: UnitRows, max_distance: int, anchors=None) -> tuple[float, float]:
    """Monotonicity of S with distance, after Wang et al. (2021), §3.

    For each anchor x, the forward pairs (x, x + k), k = 1..w(x) = min(max_distance,
    n − 1 − x), valid positions only (anchors with fewer than 3 valid pairs
    are skipped).

    Parameters
    ----------
    units : UnitRows
    max_distance : int
    anchors : ndarray of int, optional
        Default :func:`anchor_positions`.

    Returns
    -------
    rho : float
        Mean over anchors of Spearman's ρ between k and S[x, x + k] (−1:
        similarity always falls with distance; about 0 for a random table;
        anchors whose similarities are all equal have no rank order and are skipped).
    discordance : float
        Over all anchors and pairs n < m of their distances, the fraction
        violating Wang et al.'s monotonicity (S[x, x+m] >= S[x, x+n]): 0 for a
        strictly decreasing S at every anchor, 1/2 for a random table.
    """
    u, valid = units.vectors, units.valid
    n = len(u)
    anchors = anchor_positions(n)[0] if anchors is None else np.asarray(anchors)
    parts = _threaded_map(lambda part: _block_monotonicity(*part), _forward_strips(u, valid, anchors, max_distance),
                          analysis_threads())
    rhos = [rho for rho, _, _ in parts]
    return _pooled_monotonicity(rhos, sum(v for _, v, _ in parts), sum(p for _, _, p in parts))


def _forward_strips(u, valid, anchors, max_distance):
    """(S[x, x + k] clipped to [−1, 1], valid) for k = 1..max_distance, rows x of consecutive anchors, lazily.

    The products are those of :func:`_forward_blocks` (their entries do not depend on how a block is cut up
    afterwards); each block's rows are then yielded in runs whose valid spans (up to the last valid entry)
    differ by at most 1/8 (or :data:`_SORT_WIDTH` entries), at most ~2^20 entries a run unless one row is longer,
    so a run sorts few invalid entries."""
    n = len(u)
    ahead = np.zeros((1, n + max_distance + 1), dtype=bool)  # valid positions; none past the table's end
    ahead[0, :n] = valid
    for rows in _forward_blocks(anchors, max_distance):
        c0, c1 = int(rows[0]), min(n, int(rows[-1]) + max_distance + 1)
        ok = valid[rows, None] & _band(ahead, rows + 1, max_distance, same_row=True)
        # forward strip of S: rows × (c1 - c0) entries, followed by the zeros the last rows' bands run into
        room = np.empty(rows.size * (c1 - c0) + max(0, int(rows[-1] - rows[0]) + 1 + max_distance - (c1 - c0)))
        block = room[:rows.size * (c1 - c0)].reshape(rows.size, c1 - c0)
        np.matmul(u[rows], u[c0:c1].T, out=block)
        np.clip(block, -1.0, 1.0, out=block)
        room[block.size:] = 0.0
        strip = _band(block, rows + 1 - c0, max_distance, room)  # S[x, x + k], k = 1..max_distance (past c1: not ok)
        last = np.where(ok.any(axis=1), max_distance - np.argmax(ok[:, ::-1], axis=1), 0).tolist()
        start = 0
        while start < len(last):
            stop, low, high = start + 1, last[start], last[start]
            while stop < len(last):
                lo, hi = min(low, last[stop]), max(high, last[stop])
                if hi - lo > max(hi // 8, _SORT_WIDTH) or (stop + 1 - start) * hi > 2**20:
                    break
                low, high, stop = lo, hi, stop + 1
            yield strip[start:stop], ok[start:stop]  # whole rows: the long rows' float sums run over them
            start = stop


def _threaded_map(function, items, threads: int) -> list:
    """``[function(item) for item in items]`` in ``threads`` threads (numpy's sorts and ufuncs release the GIL).

    Items are drawn from the iterable as results are taken, at most 2 · threads ahead, so a lazy iterable's items
    are not all held at once."""
    if threads <= 1:
        return [function(item) for item in items]
    results, pending = [], collections.deque()
    with ThreadPoolExecutor(threads) as pool:
        for item in items:
            if len(pending) >= 2 * threads:
                results.append(pending.popleft().result())
            pending.append(pool.submit(function, item))
        results.extend(future.result() for future in pending)
    return results


def _band(a: np.ndarray, starts: np.ndarray, width: int, room: np.ndarray | None = None,
          same_row: bool = False) -> np.ndarray:
    """``a[r, starts[r]:starts[r] + width]`` for every r (``a[0, ...]`` for every r when ``same_row``), shape
    (starts.size, width): a strided view when the starts step evenly, else a copy. Entries past the end of a's
    row come from the next row or are zero: the caller masks them. ``room``: a 1-D array that begins with a's
    entries (a = room[:a.size].reshape(a.shape)) and goes on with zeros; entries past a's end are read from it
    (else from a zero-padded copy of a)."""
    rows, cols = a.shape
    step = np.unique(np.diff(starts))
    if not a.flags.c_contiguous or step.size > 1 or np.any(step < 0) or (starts.size and starts[0] < 0):
        index = np.minimum(starts[:, None] + np.arange(width)[None, :], cols - 1)
        return a[0, index] if same_row else a[np.arange(starts.size)[:, None], index]
    step = int(step[0]) if step.size else 0
    stride = step if same_row else cols + step
    end = (starts.size - 1) * stride + int(starts[0]) + width if starts.size else 0
    flat = a.reshape(-1) if room is None else room
    if end > flat.size:
        flat = np.concatenate([flat, np.zeros(end - flat.size, dtype=a.dtype)])
    return np.lib.stride_tricks.as_strided(flat[int(starts[0]) if starts.size else 0:], (starts.size, width),
                                           (stride * a.itemsize, a.itemsize), writeable=False)


def _pooled_monotonicity(rhos, violations, pairs) -> tuple[float, float]:
    rhos = np.concatenate(rhos) if rhos else np.array([])
    return (float(rhos.mean()) if rhos.size else math.nan), (violations / pairs if pairs else math.nan)


def _block_monotonicity(q: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, int, int]:
    """Spearman ρ per row, and violations / pairs of Wang et al.'s monotonicity pooled over rows.

    ``q`` (rows × distances, increasing) holds similarities, ``ok`` which are
    valid. A pair of distances n < m violates monotonicity when q_m >= q_n.
    Ranks are taken with ties in distance order (a stable sort), so q_n <= q_m
    ⟺ rank_n < rank_m for n < m; the pairs with rank_n > rank_m (strict
    decreases, Wang et al.'s order) are the inversions of the ranks, counted
    on the distances in value order (:func:`_count_inversions`, the same
    count), and the violations are the other pairs. Spearman's ρ is Pearson's
    correlation of the ranks with the valid distances' order, cov / √(Σ dq² ·
    Σ dk²) with dq, dk the deviations from the mean rank (c + 1) / 2 (c valid
    entries): for c <= :data:`_EXACT_RHO` every partial sum is an exact
    multiple of 1/4 and the sums are taken in integers (Σ dq² = Σ dk² =
    c(c² − 1)/12, cov = Σ rank·k − c(c + 1)²/4), longer rows sum the
    deviations in floating point over the whole row, as :func:`numpy.nansum`
    would. O(rows · w log² w) in numpy's sort.
    """
    rows, w = q.shape
    count = ok.sum(axis=1)
    pairs = int(np.sum(count * (count - 1) // 2))
    # columns up to the last valid entry of any row
    span = int(np.max(np.where(count > 0, w - np.argmax(ok[:, ::-1], axis=1), 0), initial=0))
    if span == 0:
        return np.array([]), 0, 0
    okc = ok[:, :span]
    qc = q[:, :span]
    order = _stable_order(qc, okc)
    index = np.arange(span)
    # the distances in value order, the invalid entries (last) replaced by ones above every valid distance
    distances = order if np.all(count == span) else np.where(index[None, :] < count[:, None], order, span + index)
    # Spearman's rho of each row
    row = np.arange(rows)
    with np.errstate(invalid="ignore"):
        flat_row = qc[row, order[row, np.maximum(count - 1, 0)]] == qc[row, order[:, 0]]
    c = count.astype(np.int64)
    rho = np.full(rows, np.nan)
    # integer sums while Σ_a (a + 1)(distance + 1) over the span fits in int64 (span <= 2^20: < 2^61)
    exact = (count >= 3) & (count <= _EXACT_RHO) & (span <= 2**20)
    if exact.any():
        # Σ rank · k over the valid entries (k: the entry's place among the row's valid distances, 1-based): in
        # value order Σ_a (a + 1) k(a), with k = distance + 1 when the valid distances come first (a row cut only
        # by the table's end), less the replaced entries a >= c: Σ_{b=c+1}^{span} b (b + span), in closed form
        sel = exact if not exact.all() else slice(None)
        d, ce = distances[sel], c[sel]
        def upto(m):  # Σ_{b<=m} b (b + span)
            return m * (m + 1) * (2 * m + 1) // 6 + span * (m * (m + 1) // 2)

        rank_times_k = np.einsum("ij,j->i", d, index + 1) + span * (span + 1) // 2 - (upto(span) - upto(ce))
        gaps = np.flatnonzero(np.where(okc[sel].all(axis=1), span, np.argmin(okc[sel], axis=1)) < ce)
        if gaps.size:  # invalid distances before valid ones: count each valid entry's place
            k = np.take_along_axis(np.cumsum(okc[sel][gaps], axis=1), order[sel][gaps], axis=1)
            rank_times_k[gaps] = np.einsum("ij,j->i", np.where(index < ce[gaps, None], k, 0), index + 1)
        cov = (4 * rank_times_k - ce * (ce + 1) ** 2) / 4
        sum_sq = (ce * (ce * ce - 1) // 3) / 4
        with np.errstate(invalid="ignore", divide="ignore"):
            rho[sel] = cov / np.sqrt(sum_sq * sum_sq)
    long_rows = np.flatnonzero((count >= 3) & ~exact)
    if long_rows.size:  # floating-point sums over the whole row, as numpy.nansum would take them
        # dq, dk: the deviations at the valid entries, 0 elsewhere, over the whole row (the sums' order), in place
        dq, dk = np.zeros((long_rows.size, w)), np.zeros((long_rows.size, w))
        mean = ((c[long_rows] + 1) / 2)[:, None]
        invalid = ~okc[long_rows]
        np.put_along_axis(dq[:, :span], order[long_rows], (index + 1.0)[None, :], axis=1)  # the ranks
        np.cumsum(okc[long_rows], axis=1, dtype=np.float64, out=dk[:, :span])  # the valid entries' places
        for d in (dq, dk):
            d[:, :span] -= mean
            np.copyto(d[:, :span], 0.0, where=invalid)
        product = dq * dk
        cov = np.sum(product, axis=1)
        sum_qq = np.sum(np.multiply(dq, dq, out=product), axis=1)
        sum_kk = np.sum(np.multiply(dk, dk, out=product), axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            rho[long_rows] = cov / np.sqrt(sum_qq * sum_kk)
    rho = rho[(count >= 3) & np.isfinite(rho) & ~flat_row]
    # violations: the pairs n < m that are not strict decreases (inversions of the distances in value order)
    violations = pairs - _count_inversions(distances)
    return rho, violations, pairs


def _stable_order(q: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """The valid entries of each row of ``q`` in value order, ties in position order, then the invalid ones:
    ``np.argsort(np.where(ok, q, inf), axis=1, kind="stable")`` up to the order among infinite entries.

    One int64 key per entry: the float's bits mapped to an integer of the same order, its lowest
    b = ⌈log₂ w⌉ bits replaced by the entry's column, so a plain (vectorised) sort of the keys orders the entries
    by value and carries the columns along; an invalid entry gets a key above every float's, 2^(b + 1) apart from
    the next invalid one. Two neighbours in key order whose keys differ by 2^(b + 1) or more are in value order;
    the runs of closer neighbours (equal values, −0.0 and 0.0, values within ~2^(b − 52) relative of each other;
    a few per row of 2^20 entries, rarely any in a row of 4096) are then ordered exactly by (value, column).
    Rows with NaN, rows over 2^25 entries, and other dtypes are argsorted (:func:`_argsort_ties_by_position`).
    """
    rows, w = q.shape
    bits = max(1, (w - 1).bit_length())
    if q.dtype != np.float64 or bits > 25 or rows == 0:  # invalid keys up to +inf + 2^(2b + 1) < 2^63
        return _argsort_ties_by_position(np.where(ok, q, np.inf))
    raw = q.view(np.int64)
    key = np.right_shift(raw, 63, order="C")  # 0 or -1; C order whatever q's (places are counted row by row)
    key &= np.int64(0x7FFF_FFFF_FFFF_FFFF)
    key ^= raw  # negative floats: their magnitude bits flipped; increasing with the float
    low = np.int64((1 << bits) - 1)
    key &= ~low
    column = np.arange(w, dtype=np.int64)
    key |= column
    inf = np.int64(0x7FF0_0000_0000_0000)  # +inf's bits: above every finite float's
    full = bool(ok.all())
    if not full:
        np.copyto(key, inf + (column << (bits + 1)) + column, where=~ok)
    key.sort(axis=1)
    order = key & low
    near = np.diff(key, axis=1) < (1 << (bits + 1))
    del key
    row, place = np.nonzero(near)
    if row.size:  # runs of near neighbours: sorted again by (value, column)
        member = np.unique(np.concatenate([row * w + place, row * w + place + 1]))  # flat places, ascending
        r, p = np.divmod(member, w)
        start = (p == 0) | ~near[r, np.maximum(p - 1, 0)]  # not joined to the place before it
        flat = order.reshape(-1)
        col = flat[member]
        value = np.where(ok[r, col], q[r, col], np.inf)
        flat[member] = col[np.lexsort((col, value, np.cumsum(start)))]
    nan = np.isnan(np.max(q, axis=1) if full else np.max(q, axis=1, where=ok, initial=-np.inf))
    if nan.any():
        order[nan] = _argsort_ties_by_position(np.where(ok[nan], q[nan], np.inf))
    return order


def _argsort_ties_by_position(v: np.ndarray) -> np.ndarray:
    """:func:`_stable_order` by numpy's quicksort argsort, rows with equal finite values or NaN sorted again stably."""
    order = np.argsort(v, axis=1)
    ordered = np.take_along_axis(v, order, axis=1)
    tie = ordered[:, 1:] == ordered[:, :-1]
    tie &= np.isfinite(ordered[:, 1:])  # equal infinities (invalid entries) are not a tie
    redo = tie.any(axis=1) | np.isnan(ordered[:, -1])
    if redo.any():
        order[redo] = np.argsort(v[redo], axis=1, kind="stable")
    return order


def _count_inversions(x: np.ndarray) -> int:
    """Pairs i < j with x[r, i] > x[r, j] (strictly), summed over the rows r of x: non-negative integers.

    Bottom-up merge sort of every row at once. A level merges sorted blocks of
    s entries pairwise: each entry is packed into one integer as (pair of
    blocks, value, half) and the rows of the packed array are sorted (numpy's
    vectorised sort; the bottom levels sort several pairs per row, at least
    :data:`_SORT_WIDTH` entries). In a merged pair of a left and b right
    entries a left entry at place p has p − (its rank among the left entries)
    right entries before it, all strictly below it (a tie puts the left entry
    first), so the level adds Σ_left p − a(a − 1)/2 = (a + b)(a + b − 1)/2 −
    Σ_right p − a(a − 1)/2 per pair. Rows are padded (with a value above every
    entry, placed after them: in no inversion) to a multiple of a power of two
    at least w / 16, not to the next power of two; only the last pair of a
    row can then be short. On the levels with one pair a row after a level
    without pair bits only the half bit changes; it is set on views of the two
    halves (no array of the row's length). O(n log² n) comparisons in the
    sort, O(n log n) elsewhere.
    """
    rows, w = x.shape
    if rows == 0 or w < 2:
        return 0
    unit = 1 << (w - 1).bit_length()  # rows up to _SORT_WIDTH: the next power of two
    if w > _SORT_WIDTH:
        unit = max(_SORT_WIDTH, 1 << max(0, (w // 16).bit_length() - 1) + 1)
    size = -(-w // unit) * unit
    top = int(x.max()) + 1  # the padding: above every entry and after them, so in no inversion
    shift = top.bit_length() + 1  # value bits and the half bit
    dtype = np.int32 if shift + (_SORT_WIDTH // 2).bit_length() <= 31 else np.int64
    packed = np.empty((rows, size), dtype=dtype)
    np.left_shift(x, 1, out=packed[:, :w], casting="unsafe")  # fits: below 2^shift
    packed[:, w:] = top << 1
    flat = packed.reshape(-1)
    half = np.empty_like(flat)
    total = 0
    s = 1
    clean = True  # no pair bits left by the level before
    while s < size:
        width = max(2 * s, _SORT_WIDTH)
        width = width if size % width == 0 else size  # whole rows once 2s no longer divides them
        block = flat.reshape(-1, width)
        if clean and width == 2 * s:  # one pair a row, none before: only the half bit changes, set on views
            pairs = flat.reshape(-1, 2, s)
            np.bitwise_and(pairs[:, 0], ~1, out=pairs[:, 0])
            np.bitwise_or(pairs[:, 1], 1, out=pairs[:, 1])
            place = np.arange(width)
        else:
            place = np.arange(width)
            np.bitwise_and(block, (1 << shift) - 2, out=block)  # the value
            np.bitwise_or(block, (((place // (2 * s)) << shift) | ((place // s) & 1)).astype(dtype), out=block)
        clean = width == 2 * s
        block.sort(axis=1)
        np.bitwise_and(flat, 1, out=half)  # 1: a right entry
        weight = (place % (2 * s) if width > 2 * s else place).astype(np.int64 if width * s >= 2**31 else dtype)
        right = int(np.einsum("ij,j->i", half.reshape(-1, width), weight).sum(dtype=np.int64))
        # per block of `width` entries: full pairs of s + s entries, and a last pair of a + b = width mod 2s
        full, rest = divmod(width, 2 * s)
        a = min(s, rest)
        per_block = full * (s * (2 * s - 1) - s * (s - 1) // 2) + rest * (rest - 1) // 2 - a * (a - 1) // 2
        total += (flat.size // width) * per_block - right
        s *= 2
    return total


def _prefix_monotonicity(q: np.ndarray, lengths: np.ndarray) -> tuple[float, float]:
    """:func:`_block_monotonicity` pooled over rows that are prefixes ``q[:L]`` of one sequence (a Toeplitz kernel).

    Every anchor of a translation-invariant kernel sees the same forward row,
    cut at its own length L (shorter near the end of the window). Instead of
    ranking each row (O(anchors · w log² w)), one pass over ``q`` gives, for
    every prefix length L at once, the violations of Wang et al.'s
    monotonicity (pairs n < m < L with q_n <= q_m) and Spearman's ρ of the
    prefix (ranks taken with ties in distance order, as for tables, so the
    ranks are a permutation and ρ = 1 − 6 Σ (r_i − i)² / (L (L² − 1))).
    Both come from two per-element dominance sums over earlier elements,
    counted by a radix partition of the keys (:func:`_dominance`): exact, O(w log w).

    Parameters
    ----------
    q : ndarray of shape (w,)
        The kernel at distances 1..w.
    lengths : ndarray of int
        Each anchor's row length (distances 1..L).

    Returns
    -------
    rho, discordance : float
        As :func:`monotonicity` (rows with fewer than 3 entries, or all equal, have no ρ).
    """
    q = np.asarray(q, dtype=np.float64)
    w = q.size
    if w == 0:
        return math.nan, math.nan
    # value order with ties broken by position: q_n <= q_m (n < m) <=> key_n < key_m
    order = np.argsort(q)  # quicksort; stable (ties by position) only where that can differ: ties or NaN
    ordered = q[order]
    if np.any(ordered[1:] == ordered[:-1]) or np.isnan(ordered[-1]):  # (equal infinities are ties too)
        order = np.argsort(q, kind="stable")
    key = np.empty(w, dtype=np.int64)
    key[order] = np.arange(w)
    below, index_above = _dominance(key)  # per m: #{n < m: key_n < key_m}, Σ_{n < m: key_n > key_m} (n + 1)
    idx = np.arange(1, w + 1, dtype=np.float64)
    violations = np.concatenate([[0], np.cumsum(below)])  # by prefix length L = 0..w
    t = np.concatenate([[0.0], np.cumsum(index_above + idx * (1.0 + below))])  # Σ_i i · r_i(L)
    lengths = np.asarray(lengths, dtype=np.int64)
    lengths = lengths[lengths >= 1]
    ell = lengths.astype(np.float64)
    pairs = ell * (ell - 1) / 2
    discordance = float(violations[lengths].sum() / pairs.sum()) if pairs.sum() > 0 else math.nan
    # ρ per row: Σ (r_i − i)² = 2 Σ i² − 2 Σ i r_i
    sum_sq = ell * (ell + 1) * (2 * ell + 1) / 6
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - 6.0 * (2 * sum_sq - 2 * t[lengths]) / (ell * (ell * ell - 1))
    running_max = np.maximum.accumulate(q)
    running_min = np.minimum.accumulate(q)
    flat = running_max[lengths - 1] == running_min[lengths - 1]
    keep = (lengths >= 3) & ~flat & np.isfinite(rho)
    return (float(rho[keep].mean()) if keep.any() else math.nan), discordance


def _dominance(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a permutation ``key`` of 0..w − 1: per m, #{n < m: key_n < key_m} and Σ_{n < m: key_n > key_m} (n + 1).

    Radix partition of the keys from their top bit down, a wavelet matrix
    kept in one array. Before level b the elements sit in aligned groups of
    2^(b + 1): all the keys with one value of key >> (b + 1), in position
    order (the groups in bit-reversed order of that value). Within a group,
    an element whose bit b is set is above every earlier element whose bit b
    is clear (same higher bits), and level b is the only one where the two
    keys part, so summing over levels counts every pair n < m once. A
    level's counts come from where the zeros and ones of bit b sit (their
    indices) and one cumulative sum of the ones' positions; the stable
    partition of the whole array by bit b (zeros, then ones) is the next
    level's order. The keys are padded to 2^B by themselves (positions after
    every real one: never counted), so every group holds exactly 2^b of each
    bit and its boundaries are known. O(w log w): B = ⌈log₂ w⌉ levels of
    streaming gathers and sums, no sort; the counts are exact integers (the
    sums returned as float64, exact below 2^53).
    """
    key = np.asarray(key)
    w = key.size
    if w == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    levels = max(1, (w - 1).bit_length())
    size, half = 1 << levels, 1 << (levels - 1)
    itype = np.int32 if size <= 2**30 else np.int64
    keys = np.arange(size, dtype=itype)
    keys[:w] = key
    position = np.arange(1, size + 1, dtype=itype)  # 1-based, carried with the keys
    below = np.zeros(size, dtype=itype)
    above = np.zeros(size, dtype=np.int64)
    spare = [np.empty_like(keys), np.empty_like(position), np.empty_like(below), np.empty_like(above)]
    rank = np.arange(half, dtype=np.int64)  # j: the j-th zero (one) of the level
    before_group = np.empty(half, dtype=np.int64)
    scratch = np.empty(half, dtype=np.int64)
    ones_sum = np.zeros(half + 1, dtype=np.int64)
    masked = np.empty(size, dtype=itype)
    bit = np.empty(size, dtype=bool)
    source = np.empty(size, dtype=np.intp)
    for b in range(levels - 1, -1, -1):
        np.bitwise_and(keys, itype(1 << b), out=masked)
        np.not_equal(masked, 0, out=bit)
        source[half:] = np.flatnonzero(bit)  # the ones, in order
        np.logical_not(bit, out=bit)
        source[:half] = np.flatnonzero(bit)  # the zeros, in order
        current = [keys, position, below, above]
        for a, out in zip(current, spare):
            np.take(a, source, out=out, mode="clip")
        (keys, position, below, above), spare = spare, current
        # the j-th zero (one) is in group j >> b: j & ~(2^b - 1) zeros (ones) of the level lie in earlier groups
        np.bitwise_and(rank, ~((1 << b) - 1), out=before_group)
        # a one at index i: i − (group start) − (ones before it in the group) zeros before it in its group
        np.subtract(source[half:], rank, out=scratch)
        scratch -= before_group
        np.add(below[half:], scratch, out=below[half:], casting="unsafe")
        # a zero at index i: the ones before it, i − j of them over the whole level, less those of earlier groups
        np.cumsum(position[half:], dtype=np.int64, out=ones_sum[1:])
        np.subtract(source[:half], rank, out=scratch)
        above[:half] += ones_sum[scratch]
        above[:half] -= ones_sum[before_group]
    counts = np.empty(size, dtype=np.int64)
    sums = np.empty(size, dtype=np.float64)
    counts[position - 1] = below
    sums[position - 1] = above
    return counts[:w], sums[:w]


def translation_variance_ratio(profile: SimilarityProfile) -> float:
    """Departure from translation invariance (Wang et al. 2021, §3), from the exact profile.

    Translation invariance asks S[i, i + k] to be the same at every anchor i.
    Over all pairs i < j within the profile's max_distance (distance ≥ 1),
    the within-diagonal sum of squares over the total sum of squares::

        Σ_k n_k · std_k²  /  Σ_k n_k · (std_k² + (mean_k − grand mean)²)

    0: exactly translation invariant (every diagonal constant: sinusoidal,
    RoPE); 1: distance explains none of the spread of S (a random table,
    up to the O(max_distance / n_pairs) share the diagonal means take by chance).
    """
    k = profile.distance >= 1
    n, mean, std = profile.n_pairs[k].astype(float), profile.mean_similarity[k], profile.std_similarity[k]
    use = n > 0
    n, mean, std = n[use], mean[use], std[use]
    if n.sum() == 0:
        return math.nan
    grand = np.sum(n * mean) / np.sum(n)
    within = float(np.sum(n * std**2))
    total = within + float(np.sum(n * (mean - grand) ** 2))
    return within / total if total > 0 else 0.0


def kernel_asymmetry(queries, keys, anchors=None) -> float:
    """Departure from symmetry (Wang et al. 2021, §3) of the kernel K[i, j] = ⟨q_i, k_j⟩.

    ‖K − Kᵀ‖_F / ‖K‖_F over the anchor rows and columns (i ∈ anchors, all
    j), without forming K. 0 for any Gram matrix (``queries is keys``: returned
    without computing), so 0 for cosine similarity by construction; meaningful for asymmetric kernels such
    as attention logits with distinct query and key vectors, e.g. RoPE
    scores ⟨R_i q, R_j k⟩ with q ≠ k.

    Parameters
    ----------
    queries, keys : ndarray of shape (n_positions, dim)
    anchors : ndarray of int, optional
        Default every position.

    Returns
    -------
    float in [0, 2]
    """
    if queries is keys:  # a Gram matrix: symmetric by construction, nothing to compute
        return 0.0
    q, k = np.asarray(queries, dtype=float), np.asarray(keys, dtype=float)
    if q.shape != k.shape or q.ndim != 2:
        raise ValueError(f"queries and keys must be 2-D arrays of one shape, got {q.shape} and {k.shape}")
    anchors = np.arange(len(q)) if anchors is None else np.asarray(anchors)
    diff = norm = 0.0
    for rows in _row_blocks(anchors, len(q)):
        forward = q[rows] @ k.T          # K[i, :]
        backward = (q @ k[rows].T).T     # K[:, i]ᵀ
        diff += float(np.sum((forward - backward) ** 2))
        norm += float(np.sum(forward**2))
    return math.sqrt(diff / norm) if norm > 0 else math.nan


def _reach(n_positions: int, reach: int) -> int:
    """The reach used: ``reach``, or less when the table has fewer than 2 · reach + 1 positions."""
    return max(1, min(int(reach), (n_positions - 1) // 2))


def attention_rows(units: UnitRows, anchors=None, *, tau: float = LOCALITY_TAU, reach: int = LOCALITY_REACH):
    """Rows of the attention-like transform A_ij = softmax_j(S_ij / τ), |i − j| <= reach, at full-reach anchors.

    Parameters
    ----------
    units : UnitRows
    anchors : ndarray of int, optional
        Default :func:`anchor_positions`; only those with reach <= i <= n − 1 − reach are used.
    tau : float
        Temperature (cosine similarity).
    reach : int
        Keys per side; lowered to (n − 1) // 2 for a table too short for it.

    Returns
    -------
    weights : ndarray of shape (n_used, 2 · reach + 1)
        A_i,i+m for m = −reach..reach (rows sum to 1; excluded positions weigh 0).
    used : ndarray of int
        The anchors used.
    reach : int
    """
    u, valid = units.vectors, units.valid
    n = len(u)
    reach = _reach(n, reach)
    anchors = anchor_positions(n)[0] if anchors is None else np.asarray(anchors)
    inside = anchors[(anchors >= reach) & (anchors <= n - 1 - reach)]
    used = inside[valid[inside]]
    offsets = np.arange(-reach, reach + 1)
    step = np.unique(np.diff(inside))
    if u.flags.c_contiguous and inside.size and step.size <= 1 and np.all(step > 0):
        # regular anchors: S[i, i + m] for every offset m in one einsum over a strided view of the table (no copies)
        step = int(step[0]) if step.size else 1
        keys = np.lib.stride_tricks.as_strided(u[inside[0] - reach:], (offsets.size, inside.size, u.shape[1]),
                                               (u.strides[0], step * u.strides[0], u.strides[1]), writeable=False)
        logits = np.einsum("kij,ij->ki", keys, u[inside[0]:inside[-1] + 1:step])[:, valid[inside]].T.astype(float)
    else:
        logits = np.empty((used.size, offsets.size))
        for j, m in enumerate(offsets):
            logits[:, j] = np.einsum("ij,ij->i", u[used], u[used + m])
    logits = np.where(valid[used[:, None] + offsets[None, :]], np.clip(logits, -1.0, 1.0) / tau, -np.inf)
    return _softmax(logits), used, reach


def _softmax(logits: np.ndarray) -> np.ndarray:
    z = logits - np.max(logits, axis=1, keepdims=True)
    w = np.exp(z)
    return w / w.sum(axis=1, keepdims=True)


def _locality(weights: np.ndarray, reach: int) -> float:
    """Chen et al.'s locality of attention rows over offsets −reach..reach."""
    if not weights.size:
        return math.nan
    offsets = np.arange(-reach, reach + 1)
    return float(np.mean(weights @ (2.0 ** -np.abs(offsets))))


def _symmetry(weights: np.ndarray, reach: int) -> float:
    """Chen et al.'s row-mirror symmetry of attention rows, rounding noise guarded (module docstring)."""
    if not weights.size:
        return math.nan
    left, right = weights[:, reach - 1::-1], weights[:, reach + 1:]  # offsets -1..-reach and +1..+reach
    diff = np.abs(left - right)
    diff[diff <= _SYMMETRY_NOISE * weights.max(axis=1, keepdims=True)] = 0.0
    low, high = diff.min(axis=1, keepdims=True), diff.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = np.where(high > low, (diff - low) / (high - low), 0.0)
    return float(1.0 - scaled.mean())


def locality(units: UnitRows, anchors=None, *, tau: float = LOCALITY_TAU, reach: int = LOCALITY_REACH) -> float:
    """Locality of Chen et al. (2023) on A = softmax(S / τ) within ``reach`` (module docstring)."""
    weights, _, reach = attention_rows(units, anchors, tau=tau, reach=reach)
    return _locality(weights, reach)


def symmetry(units: UnitRows, anchors=None, *, tau: float = LOCALITY_TAU, reach: int = LOCALITY_REACH) -> float:
    """Row-mirror symmetry of Chen et al. (2023) on A = softmax(S / τ) within ``reach`` (module docstring)."""
    weights, _, reach = attention_rows(units, anchors, tau=tau, reach=reach)
    return _symmetry(weights, reach)


@dataclasses.dataclass(frozen=True)
class Properties:
    """Property metrics of one table or kernel; ``to_frame()`` gives one row per metric."""

    values: dict
    n_anchors: dict
    anchor_step: dict
    window: dict = dataclasses.field(default_factory=dict)
    transform: dict = dataclasses.field(default_factory=dict)

    def to_frame(self) -> pd.DataFrame:
        """Columns metric, value, n_anchors, anchor_step, window, transform, reference."""
        return pd.DataFrame({
            "metric": list(self.values),
            "value": list(self.values.values()),
            "n_anchors": [self.n_anchors[m] for m in self.values],
            "anchor_step": [self.anchor_step[m] for m in self.values],
            "window": pd.array([self.window.get(m) for m in self.values], dtype="Int64"),
            "transform": [self.transform.get(m, "") for m in self.values],
            "reference": [_REFERENCES[m] for m in self.values],
        })


_REFERENCES = {
    "monotonicity_spearman": "Wang et al. 2021",
    "monotonicity_discordance": "Wang et al. 2021",
    "translation_variance_ratio": "Wang et al. 2021",
    "symmetry": "Chen et al. 2023",
    "locality": "Chen et al. 2023",
}


def _transform_text(tau: float, reach: int) -> str:
    return f"softmax(S / {tau:g}) over |i - j| <= {reach}"


def table_properties(units: UnitRows, profile: SimilarityProfile, *, max_anchors: int = MAX_ANCHORS,
                     max_entries: int = MAX_ENTRIES, tau: float = LOCALITY_TAU,
                     reach: int = LOCALITY_REACH, ranked: tuple[float, float] | None = None) -> Properties:
    """Every property metric of one table (see the module docstring).

    Parameters
    ----------
    units : UnitRows
        Unit rows of the table (as analysed).
    profile : SimilarityProfile
        Its profile (gives max_distance and translation invariance).
    max_anchors, max_entries : int
        Anchor budget of the anchor-based metrics (:func:`anchor_positions`).
    tau, reach : float, int
        The attention-like transform of locality and symmetry.
    ranked : (float, float), optional
        (rho, discordance) of :func:`monotonicity` over the profile's max_distance and these anchors, when
        already computed (it needs no profile: the properties stage ranks while the profile is computed).

    Returns
    -------
    Properties
        Metrics ``monotonicity_discordance``, ``monotonicity_spearman`` (window:
        distances 1..max_distance), ``translation_variance_ratio``,
        ``symmetry`` and ``locality`` (window: the reach; ``transform`` says
        which), with the anchors each used. For ``translation_variance_ratio``
        these are the anchors of the profile's standard deviation: every
        position when it is exact (step 1), else the stratified sample's size
        and stratum width (n_positions // 128).
    """
    n = len(units.vectors)
    anchors, step = anchor_positions(n, max_anchors, max_entries)
    max_distance = int(profile.distance[-1])
    rho, discordance = monotonicity(units, max_distance, anchors) if ranked is None else ranked
    weights, used, reach = attention_rows(units, anchors, tau=tau, reach=reach)
    values = {
        "monotonicity_discordance": discordance,
        "monotonicity_spearman": rho,
        "translation_variance_ratio": translation_variance_ratio(profile),
        "symmetry": _symmetry(weights, reach),
        "locality": _locality(weights, reach),
    }
    if profile.std_exact:
        std_anchors, std_step = n, 1
    else:  # the profile's std comes from a stratified anchor sample
        std_anchors = int(_stratified_anchors(n, _STD_ANCHORS, np.random.default_rng(_STD_SEED)).size)
        std_step = n // _STD_ANCHORS
    n_anchors = {m: int(anchors.size) for m in values} | {"translation_variance_ratio": std_anchors,
                                                          "symmetry": int(used.size), "locality": int(used.size)}
    steps = {m: step for m in values} | {"translation_variance_ratio": std_step}
    window = {"monotonicity_discordance": max_distance, "monotonicity_spearman": max_distance,
              "translation_variance_ratio": max_distance, "symmetry": reach, "locality": reach}
    transform = dict.fromkeys(("symmetry", "locality"), _transform_text(tau, reach))
    return Properties(values, n_anchors, steps, window, transform)


def kernel_properties(forward, backward=None, *, n_positions: int, max_distance: int | None = None,
                      tau: float = LOCALITY_TAU, reach: int = LOCALITY_REACH, max_anchors: int = MAX_ANCHORS,
                      max_entries: int = MAX_ENTRIES) -> Properties:
    """The property metrics of a translation-invariant kernel: S[i, j] = forward[j − i] (j >= i), backward[i − j].

    Exact (no sampling): a Toeplitz S has the same row at every anchor, up
    to the anchors near the end whose forward rows are shorter; they are
    averaged over the same anchors as :func:`table_properties`, so a
    translation-invariant table and its kernel give the same values (to
    rounding). ``translation_variance_ratio`` is not reported: it is 0 by construction.

    Parameters
    ----------
    forward : array_like of shape (m,)
        Kernel at key − query = 0, 1, ..., m − 1 (cosine similarity, or an attention prior).
    backward : array_like of shape (m,), optional
        Kernel at key − query = 0, −1, ..., −(m − 1); default ``forward`` (symmetric).
    n_positions : int
        Positions of the analysed window.
    max_distance : int, optional
        Largest distance of monotonicity's window (default m − 1, at most n_positions − 1).
    tau : float
        Temperature of softmax(S / τ): 0.1 for cosine similarity; 1 for an attention prior (already a logit).
    reach : int
        Keys per side of the attention-like transform (needs m > reach).
    max_anchors, max_entries : int
        Anchor budget (:func:`anchor_positions`), as for tables.

    Returns
    -------
    Properties
        ``monotonicity_discordance``, ``monotonicity_spearman`` (forward
        direction, Wang et al.'s x + m), ``symmetry``, ``locality``.

    Raises
    ------
    ValueError
        Shapes that do not match, or a kernel shorter than the reach needs.
    """
    f = np.asarray(forward, dtype=np.float64)
    b = f if backward is None else np.asarray(backward, dtype=np.float64)
    if f.ndim != 1 or b.shape != f.shape:
        raise ValueError(f"forward and backward must be 1-D arrays of one length, got {f.shape} and {b.shape}")
    n = int(n_positions)
    max_distance = min(f.size - 1, n - 1) if max_distance is None else int(max_distance)
    reach = _reach(n, reach)
    if f.size <= reach or max_distance > f.size - 1:
        raise ValueError(f"the kernel has {f.size} distances; it needs more than reach {reach} and max_distance "
                         f"{max_distance}")
    anchors, step = anchor_positions(n, max_anchors, max_entries)
    lengths = np.minimum(max_distance, n - 1 - anchors)
    rho, discordance = _prefix_monotonicity(f[1:max_distance + 1], lengths)
    logits = np.concatenate([b[reach:0:-1], f[:reach + 1]])[None, :] / tau  # offsets -reach..reach
    weights = _softmax(logits)
    used = int(np.sum((anchors >= reach) & (anchors <= n - 1 - reach)))
    values = {"monotonicity_discordance": discordance, "monotonicity_spearman": rho,
              "symmetry": _symmetry(weights, reach), "locality": _locality(weights, reach)}
    n_anchors = {m: int(anchors.size) for m in values} | {"symmetry": used, "locality": used}
    window = {"monotonicity_discordance": max_distance, "monotonicity_spearman": max_distance,
              "symmetry": reach, "locality": reach}
    transform = dict.fromkeys(("symmetry", "locality"), _transform_text(tau, reach))
    return Properties(values, n_anchors, dict.fromkeys(values, step), window, transform)
