"""Model-free summaries of a similarity profile: where it crosses levels, its first trough, its integral scale.

A similarity profile S(k) (mean cosine similarity at distance k, or an exact
kernel) is summarised here without fitting any model, in O(max_distance)
per profile, as time-series and turbulence practice summarises an
autocorrelation function:

``band_width_<t>``
    First distance at which S falls below the threshold t (today's band
    width): the smallest k with S(k) < t. An integer distance; where it
    lies between k − 1 and k is given by the linear interpolation used for
    conditioning (``crossing``).
``e_folding_distance``
    First distance at which S(k) / S(0) falls below 1/e: the e-folding lag of
    an autocorrelation function (Box, Jenkins, Reinsel & Ljung, *Time Series
    Analysis*, 5th ed. 2015, §2.1; for an exponential profile exp(−k/L) it is
    ⌈L⌉).
``zero_crossing``
    First distance at which S falls below 0 (first zero crossing of the
    autocorrelation; Box et al. 2015, §2.1).
``first_minimum``
    The first trough: the lowest point of S before S first rises back by more
    than ``min_rise`` (and ``min_rise_se`` standard errors of the two means,
    when ``se`` is given), with its similarity and its depth (how far S rises
    back before falling below the trough again, or up to the window's end).
``integral_scale``
    ∫₀^z S(k) / S(0) dk up to the first zero crossing z: the integral length
    scale of turbulence (Pope, *Turbulent Flows*, 2000, §6.2, eq. 6.45; the
    integral time scale of Box et al. 2015 for an autocorrelation), by the
    trapezoidal rule on the integer distances, the last segment ending at the
    zero z interpolated linearly between the last distance with S ≥ 0 and the
    first with S < 0. With no zero crossing within the window the integral is
    not defined (the window would be its upper limit): ``not_reached``. S ≥ 0
    over the whole window then (it lies before the zero crossing), so every
    trapezoid up to the window is a term of the integral scale and their sum,
    ∫₀^W S(k) / S(0) dk by the same rule up to the window's last distance W,
    is a lower bound of it (strict when S(W) > 0): ``lower_bound``, recorded
    for exact profiles only (a bound estimated from a noisy profile is no
    bound: its tail may be above 0 by noise alone).

Every summary is a distance (positions) or NaN with a **status**:

* ``ok`` — a distance;
* ``not_reached`` — not reached within max_distance (never the window itself);
* ``undefined`` — S(0) is not positive, so S / S(0) means nothing (e-folding
  distance, integral scale);
* ``within_noise`` — S falls to the noise floor around the level but not
  significantly below it within max_distance, or only at the last distances,
  whose pairs lie in one anchor block (a crossing of a level the profile only
  approaches; see "Crossings within the noise" below);

and, for the whole profile, one of these *degenerate* statuses, which every
summary of that profile takes (with the reason), never a number:

* ``too_few_points`` — fewer than :data:`MIN_POINTS` distances with a finite
  value (e.g. NaN beyond distance 0, or only distances 0 and 1);
* ``flat`` — no decay beyond distance 1: S at the first distance ≥ 1 lies
  within ``min_rise`` of the median of S over distances ≥ 1 (a constant
  profile, a random table);
* ``no_decay`` — S oscillates (it has a first minimum and falls below its
  median at least twice) and rises back, over the second half of the window,
  to within ``min_rise`` of S at the first distance ≥ 1: it oscillates
  without decaying (a single cosine), so a crossing says where a period
  falls, not how far similarity reaches;
* ``rising`` — the mean of S over the second half of the distances ≥ 1 is
  more than ``min_rise`` above its mean over the first half.

**Conditioning** of a crossing (threshold crossings, e-folding distance, zero
crossing): ``slope`` is S(k) − S(k − 1) at the first distance k below the
level (cosine similarity per position); ``crossing`` the crossing interpolated
linearly between k − 1 and k; ``crossing_low`` / ``crossing_high`` the
interpolated first crossings of the level raised / lowered by
:data:`CONDITIONING_DELTA` (0.02); ``recrossings`` how often S falls below the
level again after coming back above it. A crossing ``not_reached`` keeps
``crossing_low`` when S falls below the level + 0.02 inside the window (the
same interpolation), and its ``crossing_high`` is empty: S never falls below
the level, so never below the level − 0.02 within the window (beyond it). Its
value is no number, but the ±0.02 change of the level brings it back to
``crossing_low``; :mod:`poslab.study.comparison` takes (crossing_low, ∞) as an
exact label's range there. A crossing is ``ill_conditioned`` when S
comes back above the level later in the window (so the first crossing is one
of several) *and* the ±0.02 change of the level moves the first crossing by
more than :data:`ILL_CONDITIONED_SPREAD` (25 %) of its value: RoPE θ = 500000's
0.5 crossing (135 / 166 / 203 at 0.52 / 0.50 / 0.48, ripples around 0.5 from
166 to ~1000) is; sinusoidal's 0.5 crossing (no ripple back above 0.5) is not.
The integral scale takes the conditioning of the zero crossing it ends at.

**Crossings within the noise.** A sampled profile that decays towards a level
L without crossing it (the null model ``smoothed_random``: E[S] > 0 at every
distance) still dips below L in its noisy tail, so a plain first crossing
would report the place where the noise first dips, with a confident interval.
Given the profile's standard errors (``noise_se``: the anchor-block,
cluster-robust ones, which count the dependence between anchors), a crossing
of L (every threshold, the e-folding level S(0)/e, 0) counts as reached only
if the profile falls below L by more than its sampling noise somewhere at or
after its first crossing k₀::

    reached  ⇔  S(k) < L − z · se_L(k) for some k ≥ k₀,
    se_L(k)² = V_L / n_pairs(k),   V_L = mean over k ≥ k₀ of se(k)² · n_pairs(k),

over the distances k ≥ k₀ whose se is known. A distance where fewer than two
anchor blocks hold a pair (the window's last distances, whose pairs all start
in the first block) has no standard error and is no evidence either way: its
mean is one block's, a handful of pairs at the very end. (Carrying the last
known variance forward made single pairs "cross": whisper-tiny's zero crossing
at distance 447 of 447 rested on one pair, S = −0.03 with a per-pair spread of
~0.1, against a variance carried from a distance with two blocks.) A crossing
whose first distance k₀ lies beyond the last distance with a known se is
therefore ``within_noise``.

Here z = ``crossing_z`` (:data:`CROSSING_Z` = 3.5). The crossing distance
stays k₀ (no upward bias for a real crossing); otherwise the summary is
``within_noise`` (NaN) and the integral scale, which ends at the zero
crossing, takes the zero crossing's status. This is the practice of judging a
sample autocorrelation against its standard error (Box, Jenkins, Reinsel &
Ljung 2015, §2.1.6 and the identification of ch. 6: autocorrelations within
about two standard errors of 0 are not distinguished from 0), with two changes: (1) the
per-distance variance is pooled beyond the crossing as Bartlett's (1946)
large-lag approximation does (var r_k ≈ (1/n)(1 + 2 Σ_{v ≤ q} ρ_v²), the same
for every lag k > q; Box et al. §2.1.6): V_L / n_pairs(k) instead of each
distance's own block variance, which rests on few blocks (B − 1 degrees of
freedom, one or two near the window's end) and made the minimum of S / se
over the tail heavy-tailed on the null (below −5 in 5 % of the seeds, down
to −33);
(2) z is a simultaneous bound over the tail, not a pointwise 2: the tail holds
tens to hundreds of effectively independent distances, and z = 3.5 is the
one-sided Bonferroni bound at 5 % over about 200 of them (Φ⁻¹(1 − 0.05 / 200)
= 3.48). Measured on the null (benchmarks/README.md): the zero crossing is
``within_noise`` in most seeds and its interval is open above in 90–100 %.
Exact profiles (``noise_se`` None, or at most :data:`EXACT_SE` everywhere:
kernels, translation-invariant tables) keep the plain first crossing. Bootstrap replicates apply the same rule with
the original profile's ``noise_se`` (a replicate within the noise is beyond
the window, +inf, so the interval is open above). The first minimum keeps its
own noise rule (``min_rise``, ``min_rise_se``).

:func:`profile_summaries` summarises one profile (a :class:`ProfileSummaries`);
:func:`summaries_many` the rows of a 2-D array (bootstrap resamples) at once,
vectorised, returning values and status codes (:class:`SummaryArrays`);
:func:`summary_values_many` only the values and statuses (what a bootstrap
replicate needs), equal to summaries_many's entry for entry but row by row with
early exits (a flat profile is recognised by counting, a crossing found by
scanning from distance 0), so that 200 replicates of 10⁶ distances take
seconds, not minutes (benchmarks/README.md, issue 16).
All refuse thresholds outside [−1, 1] naming the valid range.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from .bands import DEFAULT_THRESHOLDS

__all__ = [
    "MIN_POINTS", "CONDITIONING_DELTA", "ILL_CONDITIONED_SPREAD", "MIN_RISE", "MIN_RISE_SE", "CROSSING_Z", "EXACT_SE",
    "STATUSES", "DEGENERATE", "SUMMARY_NAMES", "ProfileSummaries", "SummaryArrays", "profile_summaries", "summaries_many",
    "summary_names", "threshold_name", "check_thresholds", "summary_settings", "summary_values_many",
]

#: Fewest distances with a finite value (distance 0 included) a profile needs to be summarised.
MIN_POINTS = 3
#: Change of a level by which the conditioning of a crossing is measured (cosine similarity).
CONDITIONING_DELTA = 0.02
#: A re-crossed first crossing moved by more than this fraction by ±CONDITIONING_DELTA is ill-conditioned.
ILL_CONDITIONED_SPREAD = 0.25
#: Default rise after a trough that makes it the first minimum, and tolerance of the flat / rising / no-decay tests.
MIN_RISE = 0.05
#: Default rise after a trough in standard errors of the two means (when ``se`` is given).
MIN_RISE_SE = 25.0

#: Standard errors by which a profile must fall below a level, somewhere at or after its first crossing, for the
#: crossing to count (one-sided Bonferroni bound at 5 % over ~200 distances; module docstring).
CROSSING_Z = 3.5
#: Standard errors at or below this everywhere are an exact profile's rounding (an exactly translation-invariant
#: table's anchor blocks agree to ~1e-16; the bootstrap's exactness tolerance, 1e-12): no noise rule.
EXACT_SE = 1e-12

#: Status codes of :class:`SummaryArrays` (index = code; the degenerate ones last, so a row's largest code is its
#: degenerate status when it has one).
STATUSES = ("ok", "not_reached", "undefined", "within_noise", "too_few_points", "flat", "rising", "no_decay")
#: Statuses of a whole profile (every summary of it takes one).
DEGENERATE = ("too_few_points", "flat", "rising", "no_decay")
#: The summaries after the threshold crossings, in order.
SUMMARY_NAMES = ("e_folding_distance", "zero_crossing", "first_minimum", "integral_scale")
_OK, _NOT_REACHED, _UNDEFINED, _WITHIN_NOISE, _TOO_FEW, _FLAT, _RISING, _NO_DECAY = range(len(STATUSES))
_CROSSING_KINDS = ("threshold", "e_folding", "zero")


def threshold_name(threshold: float) -> str:
    """The summary (and ``summary.csv`` column) name of a threshold: 0.9 -> band_width_0p9, -0.5 -> band_width_m0p5."""
    return "band_width_" + f"{float(threshold):g}".replace("-", "m").replace(".", "p")


def summary_names(thresholds) -> tuple[str, ...]:
    """Names of every summary, in order: one ``band_width_<t>`` per threshold, then :data:`SUMMARY_NAMES`."""
    return (*(threshold_name(t) for t in thresholds), *SUMMARY_NAMES)


def check_thresholds(thresholds) -> tuple[float, ...]:
    """Thresholds as floats, refused unless each is a finite number in [−1, 1] (cosine similarity).

    Raises
    ------
    ValueError
        Naming the bad values and the valid range.
    """
    values = np.atleast_1d(np.asarray(thresholds, dtype=np.float64))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"thresholds must be a non-empty list of numbers in [-1, 1], got {thresholds!r}")
    bad = [float(t) for t in values if not (np.isfinite(t) and -1.0 <= t <= 1.0)]
    if bad:
        raise ValueError(f"thresholds must lie in [-1, 1] (cosine similarity levels), got {bad} in "
                         f"{values.tolist()}; give levels between -1 and 1")
    return tuple(float(t) for t in values)


@dataclasses.dataclass(frozen=True)
class SummaryArrays:
    """The summaries of many profiles (rows), vectorised.

    Attributes
    ----------
    names : tuple of str
        Summary names (:func:`summary_names`), the columns of every array.
    values : ndarray of shape (n_profiles, n_summaries)
        Distances in positions (integers for crossings and first minima, the
        integral scale a float); NaN wherever the status is not ``ok``.
    status : ndarray of int8, shape (n_profiles, n_summaries)
        Index into :data:`STATUSES`.
    crossing, crossing_low, crossing_high, slope : ndarray of shape (n_profiles, n_summaries)
        Conditioning of crossings (NaN for the other summaries and where not
        reached; see the module docstring).
    recrossings : ndarray of int, shape (n_profiles, n_summaries)
    ill_conditioned : ndarray of bool, shape (n_profiles, n_summaries)
    first_minimum_similarity, first_minimum_depth : ndarray of shape (n_profiles,)
        S at the first minimum and how far S rises back after it (NaN without one).
    level : ndarray of shape (n_profiles, n_summaries)
        The level each crossing is of (S(0)/e for the e-folding distance; NaN for the others).
    below_se : ndarray of shape (n_profiles, n_summaries)
        How far S falls below each crossing's level at or after its first crossing, in standard errors: the
        largest (L − S(k)) / se_L(k) over k ≥ k₀ (module docstring); a crossing counts when it exceeds
        ``crossing_z``. NaN without ``noise_se``, without a crossing, and for the first minimum; the integral
        scale takes the zero crossing's.
    lower_bound : ndarray of shape (n_profiles, n_summaries)
        A lower bound of a summary that is ``not_reached`` (positions): the integral scale of an exact profile
        (no ``noise_se``) whose zero crossing lies beyond the window, ∫₀^W S(k) / S(0) dk by the integral
        scale's trapezoids up to the window's last finite distance W (module docstring); NaN everywhere else.
    """

    names: tuple[str, ...]
    values: np.ndarray
    status: np.ndarray
    crossing: np.ndarray
    crossing_low: np.ndarray
    crossing_high: np.ndarray
    slope: np.ndarray
    recrossings: np.ndarray
    ill_conditioned: np.ndarray
    first_minimum_similarity: np.ndarray
    first_minimum_depth: np.ndarray
    level: np.ndarray
    reasons: tuple[str, ...] = ()
    below_se: np.ndarray | None = None
    lower_bound: np.ndarray | None = None

    def column(self, name: str) -> np.ndarray:
        """The values of one summary over the profiles (NaN where not ok)."""
        return self.values[:, self.names.index(name)]


@dataclasses.dataclass(frozen=True)
class ProfileSummaries:
    """The model-free summaries of one profile (see the module docstring).

    Attributes
    ----------
    names : tuple of str
    values : ndarray of shape (n_summaries,)
        Positions; NaN where the status is not ``ok``.
    status : tuple of str
        One of :data:`STATUSES` per summary.
    reason : tuple of str
        Why a summary is not a number, or why it is ill-conditioned (empty when ok and well conditioned).
    crossing, crossing_low, crossing_high, slope : ndarray of shape (n_summaries,)
    recrossings : ndarray of int
    ill_conditioned : ndarray of bool
    first_minimum_similarity, first_minimum_depth : float
    max_distance : int
    below_se, lower_bound : ndarray of shape (n_summaries,)
        See :class:`SummaryArrays`.
    crossing_z : float or None
        The bound the crossings were held to (None: exact profile, plain first crossings).
    """

    names: tuple[str, ...]
    values: np.ndarray
    status: tuple[str, ...]
    reason: tuple[str, ...]
    crossing: np.ndarray
    crossing_low: np.ndarray
    crossing_high: np.ndarray
    slope: np.ndarray
    recrossings: np.ndarray
    ill_conditioned: np.ndarray
    first_minimum_similarity: float
    first_minimum_depth: float
    max_distance: int
    below_se: np.ndarray | None = None
    crossing_z: float | None = None
    lower_bound: np.ndarray | None = None

    def __getitem__(self, name: str) -> float:
        """The value of one summary (NaN when its status is not ok)."""
        return float(self.values[self.names.index(name)])

    def status_of(self, name: str) -> str:
        return self.status[self.names.index(name)]

    @property
    def degenerate(self) -> str:
        """The profile's degenerate status (``flat``, ...), or empty when it has none."""
        return next((s for s in self.status if s in DEGENERATE), "")

    def to_frame(self) -> pd.DataFrame:
        """One row per summary: summary, value, status, reason and the conditioning columns."""
        return pd.DataFrame({
            "summary": list(self.names), "value": self.values, "status": list(self.status),
            "reason": list(self.reason), "crossing": self.crossing, "crossing_low": self.crossing_low,
            "crossing_high": self.crossing_high, "slope": self.slope, "recrossings": self.recrossings,
            "ill_conditioned": self.ill_conditioned,
            "below_se": self.below_se if self.below_se is not None else np.full(len(self.names), np.nan),
            "lower_bound": self.lower_bound if self.lower_bound is not None else np.full(len(self.names), np.nan),
        })

    def notes(self) -> str:
        """';'-separated ``name: status (reason)`` for every summary that is not ok or is ill-conditioned."""
        out = []
        degenerate = self.degenerate
        if degenerate:
            return f"every summary: {degenerate} ({self.reason[0]})"
        for name, status, reason, ill in zip(self.names, self.status, self.reason, self.ill_conditioned):
            if status != "ok" or ill:
                out.append(f"{name}: {'ill_conditioned' if ill else status}" + (f" ({reason})" if reason else ""))
        return "; ".join(out)


def _first_below(y: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Index of the first column with y < level (per row; NaN never), or -1."""
    below = y < level[:, None]
    return np.where(below.any(axis=1), np.argmax(below, axis=1), -1)


def _interpolated(d: np.ndarray, y: np.ndarray, prev: np.ndarray, index: np.ndarray, level: np.ndarray) -> np.ndarray:
    """Linear interpolation of the crossing of ``level`` between the last finite point before ``index`` and it."""
    rows = np.arange(y.shape[0])
    k = np.maximum(index, 0)
    j = prev[rows, np.maximum(k - 1, 0)]  # last finite point before k (-1: none)
    ok = (index > 0) & (j >= 0)
    y1, y0 = y[rows, k], y[rows, np.maximum(j, 0)]
    d1, d0 = d[k], d[np.maximum(j, 0)]
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.clip((y0 - level) / (y0 - y1), 0.0, 1.0)
    out = np.where(ok, d0 + frac * (d1 - d0), np.where(index == 0, d[0], np.nan))
    return np.where(index < 0, np.nan, out)


def summaries_many(distance, similarities, *, thresholds=DEFAULT_THRESHOLDS, se=None, min_rise: float = MIN_RISE,
                   min_rise_se: float = MIN_RISE_SE, noise_se=None, n_pairs=None,
                   crossing_z: float = CROSSING_Z) -> SummaryArrays:
    """The model-free summaries of many profiles at once (rows: e.g. bootstrap resamples).

    O(n_profiles · n_distances) time and memory; no fitting.

    Parameters
    ----------
    distance : array_like of shape (n_distances,)
        Distances in positions, increasing, starting at 0 (S(0) normalises the
        e-folding distance and the integral scale).
    similarities : array_like of shape (n_profiles, n_distances) or (n_distances,)
        Mean similarity (or kernel value) at each distance; NaN where there is
        no pair (skipped: a crossing is between the finite points around it).
    thresholds : sequence of float
        Levels in [−1, 1] (cosine similarity) of the ``band_width_<t>`` summaries.
    se : array_like of shape (n_distances,) or (n_profiles, n_distances), optional
        Standard errors of the means; a first minimum must then rise back by
        ``min_rise_se`` standard errors of the two means too (so a noisy
        tail is no minimum). None: exact profiles (kernels, translation-invariant tables).
    min_rise : float
        Cosine similarity: the rise that makes a trough a first minimum, and
        the tolerance of the flat / rising / no-decay tests (module docstring).
    min_rise_se : float
    noise_se : array_like of shape (n_distances,), optional
        Standard errors of the mean profile that count the dependence between
        anchors (:func:`poslab.analysis.bootstrap.block_standard_errors`; NaN
        where unknown): a crossing counts only when S falls below its level by
        more than ``crossing_z`` of them (module docstring, "Crossings within
        the noise"); the same for every row (bootstrap replicates use the
        original profile's). None, or all at most EXACT_SE: exact profiles, plain first
        crossings.
    n_pairs : array_like of shape (n_distances,), optional
        Pairs behind each distance's mean (the pooling weights of ``noise_se``);
        required with ``noise_se``.
    crossing_z : float
        The bound, in standard errors (>= 0; default :data:`CROSSING_Z`).

    Returns
    -------
    SummaryArrays

    Raises
    ------
    ValueError
        A threshold outside [−1, 1] (naming the valid range), a distance array
        that is not increasing, shapes that do not match, ``noise_se`` without
        ``n_pairs``, or a negative ``crossing_z``.
    """
    thresholds = check_thresholds(thresholds)
    d = np.asarray(distance, dtype=np.float64)
    y = np.asarray(similarities, dtype=np.float64)
    if y.ndim == 1:
        y = y[None, :]
    if d.ndim != 1 or y.ndim != 2 or y.shape[1] != d.size or d.size == 0:
        raise ValueError(f"similarities must have shape (n_profiles, {d.size}) to match distance, got {y.shape}")
    if d.size > 1 and np.any(np.diff(d) <= 0):
        raise ValueError("distance must be strictly increasing")
    n_rows, n = y.shape
    noise = _pooled_noise(noise_se, n_pairs, n, crossing_z)
    names = summary_names(thresholds)
    m = len(names)
    col = {name: i for i, name in enumerate(names)}
    finite = np.isfinite(y)
    all_finite = bool(finite.all())
    idx = np.arange(n)
    # last finite column at or before each (without a gap: the column itself)
    prev = np.broadcast_to(idx, y.shape) if all_finite else np.maximum.accumulate(np.where(finite, idx, -1), axis=1)

    values = np.full((n_rows, m), np.nan)
    status = np.zeros((n_rows, m), dtype=np.int8)
    crossing, low, high, slope, level_out, below_se = (np.full((n_rows, m), np.nan) for _ in range(6))
    recross = np.zeros((n_rows, m), dtype=np.int64)
    ill = np.zeros((n_rows, m), dtype=bool)

    s0 = y[:, 0] if d[0] == 0 else np.full(n_rows, np.nan)
    levels = [(col[threshold_name(t)], np.full(n_rows, t)) for t in thresholds]
    with np.errstate(invalid="ignore"):
        levels.append((col["e_folding_distance"], np.where(s0 > 0, s0 / math.e, np.nan)))
    levels.append((col["zero_crossing"], np.zeros(n_rows)))
    for j, level in levels:
        index = _first_below(y, level)
        reached = index >= 0
        values[:, j] = np.where(reached, d[np.maximum(index, 0)], np.nan)
        status[:, j] = np.where(np.isnan(level), _UNDEFINED, np.where(reached, _OK, _NOT_REACHED))
        if noise is not None:  # a crossing counts only beyond the noise (module docstring)
            below_se[:, j] = _below_se(y, level, index, *noise)
            status[:, j] = np.where(reached & ~(below_se[:, j] > crossing_z), _WITHIN_NOISE, status[:, j])
        crossing[:, j] = _interpolated(d, y, prev, index, level)
        lo = _interpolated(d, y, prev, _first_below(y, level + CONDITIONING_DELTA), level + CONDITIONING_DELTA)
        hi = _interpolated(d, y, prev, _first_below(y, level - CONDITIONING_DELTA), level - CONDITIONING_DELTA)
        # a crossing not reached keeps crossing_low (S comes within CONDITIONING_DELTA of the level inside the
        # window there; NaN: not even that) and has no crossing_high (S never falls below the level, so never
        # below the level - CONDITIONING_DELTA: beyond the window)
        low[:, j], high[:, j] = lo, np.where(reached, hi, np.nan)
        level_out[:, j] = level
        rows = np.arange(n_rows)
        k = np.maximum(index, 0)
        j_prev = prev[rows, np.maximum(k - 1, 0)]
        with np.errstate(invalid="ignore", divide="ignore"):
            slope[:, j] = np.where(reached & (index > 0) & (j_prev >= 0),
                                   (y[rows, k] - y[rows, np.maximum(j_prev, 0)]) / (d[k] - d[np.maximum(j_prev, 0)]),
                                   np.nan)
        # downward crossings after the first: S back at or above the level, then below again (finite points only)
        after = idx[None, :] > index[:, None]
        # returns above the level: transitions below -> above among the finite points after the first crossing
        if all_finite:  # no gap to carry the state over (an exact profile): the same counts in fewer passes
            above = y >= level[:, None]
            ups = above[:, 1:] & ~above[:, :-1] & after[:, 1:]
        else:
            above = np.where(finite, y >= level[:, None], False)
            state = _ffill_state(np.where(finite, above.astype(np.int8), -1))
            ups = (state[:, 1:] == 1) & (state[:, :-1] == 0) & after[:, 1:] & finite[:, 1:]
        recross[:, j] = np.where(reached, ups.sum(axis=1), 0)
        spread = np.where(np.isfinite(lo) & np.isfinite(hi), (hi - lo), np.inf)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = spread / np.where(crossing[:, j] > 0, crossing[:, j], np.nan)
        ill[:, j] = reached & (recross[:, j] > 0) & ~(rel <= ILL_CONDITIONED_SPREAD)

    # first minimum (the first_minimum stage's rule, vectorised)
    fm_col = col["first_minimum"]
    yy = y if all_finite else np.where(finite, y, np.inf)
    running = np.minimum.accumulate(yy, axis=1)
    trough = np.maximum.accumulate(np.where(yy == running, idx, 0), axis=1)
    rise = y - running if all_finite else np.where(finite, y - running, -np.inf)
    qualifies = rise >= min_rise
    if se is not None:
        s = np.broadcast_to(np.asarray(se, dtype=np.float64), y.shape)
        s_trough = np.take_along_axis(s, trough, axis=1)
        with np.errstate(invalid="ignore"):
            qualifies &= rise >= min_rise_se * np.hypot(s, s_trough)
    has_min = qualifies.any(axis=1)
    first_rise = np.argmax(qualifies, axis=1)
    rows = np.arange(n_rows)
    k_min = trough[rows, first_rise]
    fm_sim = np.where(has_min, y[rows, k_min], np.nan)
    values[:, fm_col] = np.where(has_min, d[k_min], np.nan)
    status[:, fm_col] = np.where(has_min, _OK, _NOT_REACHED)
    # depth: highest point after the trough before S falls below the trough again (or the window's end)
    after_min = idx[None, :] > k_min[:, None]
    falls = after_min & finite & (y < fm_sim[:, None])
    end = np.where(falls.any(axis=1), np.argmax(falls, axis=1), n)
    seg = after_min & (idx[None, :] < end[:, None]) & finite
    fm_depth = np.where(has_min & seg.any(axis=1), np.max(np.where(seg, y, -np.inf), axis=1) - fm_sim, np.nan)

    # integral scale: trapezoid of S / S(0) from 0 to the interpolated first zero crossing
    zc = col["zero_crossing"]
    z_index = _first_below(y, np.zeros(n_rows))
    filled = _fill_gaps(d, y, finite)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = filled / s0[:, None]
        seg_area = 0.5 * (r[:, 1:] + r[:, :-1]) * np.diff(d)[None, :]
        cum = np.concatenate([np.zeros((n_rows, 1)), np.nancumsum(seg_area, axis=1)], axis=1)
        zk = np.maximum(z_index, 1)
        z = crossing[:, zc]
        j_prev = np.maximum(zk - 1, 0)
        partial = 0.5 * (z - d[j_prev]) * r[rows, j_prev]  # from the last point >= 0 to the zero (S = 0 there)
        integral = cum[rows, j_prev] + partial
    ic = col["integral_scale"]
    defined = s0 > 0
    values[:, ic] = np.where((z_index > 0) & defined, integral, np.nan)
    status[:, ic] = np.where(~defined, _UNDEFINED, np.where(z_index > 0, _OK, _NOT_REACHED))
    status[:, ic] = np.where(defined & (status[:, zc] == _WITHIN_NOISE), _WITHIN_NOISE, status[:, ic])
    # lower bound of an integral scale not reached (exact profiles only: a bound estimated with noise is no bound):
    # S >= 0 over the whole window, before its zero crossing, so the same trapezoids up to the last finite
    # distance are at most the integral scale (module docstring)
    bound = np.full((n_rows, m), np.nan)
    if noise is None:
        last = prev[:, -1]  # the last finite distance (-1: none)
        bound[:, ic] = np.where((status[:, ic] == _NOT_REACHED) & (last >= 0), cum[rows, np.maximum(last, 0)], np.nan)
    for name in ("integral_scale",):
        j = col[name]
        below_se[:, j] = below_se[:, zc]
        recross[:, j], ill[:, j] = recross[:, zc], ill[:, zc]
        crossing[:, j], low[:, j], high[:, j], slope[:, j] = crossing[:, zc], low[:, zc], high[:, zc], slope[:, zc]

    # degenerate profiles: every summary takes the profile's status
    degenerate, reasons = _degenerate(d, y, finite, has_min, min_rise)
    bad = degenerate >= 0
    status[bad] = degenerate[bad, None]
    values[bad] = np.nan
    for a in (crossing, low, high, slope, below_se, bound):
        a[bad] = np.nan
    recross[bad] = 0
    ill[bad] = False
    fm_sim = np.where(bad, np.nan, fm_sim)
    fm_depth = np.where(bad, np.nan, fm_depth)
    values[status != _OK] = np.nan
    ill[status != _OK] = False  # only a crossing that counts is conditioned well or ill
    return SummaryArrays(names, values, status, crossing, low, high, slope, recross, ill, fm_sim, fm_depth, level_out,
                         reasons, below_se, bound)


def _pooled_noise(noise_se, n_pairs, n: int, crossing_z: float):
    """(reverse cumulative sums of the variances per pair se² · n_pairs and counts, over the distances whose se is
    known; n_pairs, NaN where se is unknown) for the pooled V_L of the module docstring; None for an exact profile
    (no ``noise_se``, or all <= EXACT_SE)."""
    if not crossing_z >= 0:
        raise ValueError(f"crossing_z must be a number >= 0 (standard errors), got {crossing_z!r}")
    if noise_se is None:
        return None
    se = np.asarray(noise_se, dtype=np.float64)
    if n_pairs is None:
        raise ValueError("noise_se needs n_pairs (the pairs behind each distance's mean), the pooling weights")
    pairs = np.asarray(n_pairs, dtype=np.float64)
    if se.shape != (n,) or pairs.shape != (n,):
        raise ValueError(f"noise_se and n_pairs must have shape ({n},) like distance, got {se.shape} and "
                         f"{pairs.shape}")
    known = np.isfinite(se) & (pairs > 0)
    if not np.any(se[known] > EXACT_SE):  # an exact profile (its blocks agree but for rounding)
        return None
    # a distance whose standard error is unknown (fewer than two blocks hold a pair: the window's end) is no
    # evidence: it is left out of V_L and of the maximum (its pairs NaN)
    weighted = np.where(known, se**2 * np.where(known, pairs, 0.0), 0.0)
    total = np.cumsum(weighted[::-1])[::-1]
    count = np.cumsum(known[::-1])[::-1]
    return total, count, np.where(known, pairs, np.nan)


def _below_se(y, level, index, total, count, pairs) -> np.ndarray:
    """Per row: max over k ≥ k₀ = index of (level − S(k)) / se_L(k), se_L(k)² = V_L / n_pairs(k) (module
    docstring); NaN where the row has no crossing (index −1) or no known standard error beyond it."""
    k0 = np.maximum(index, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        v = np.where(count[k0] > 0, total[k0] / np.maximum(count[k0], 1), np.nan)  # V_L per row
        se = np.sqrt(v[:, None] / pairs[None, :])
        t = (level[:, None] - y) / se
    t = np.where(np.arange(y.shape[1])[None, :] >= k0[:, None], t, np.nan)
    t = np.where(np.isnan(t), -np.inf, t)
    best = t.max(axis=1)
    return np.where((index >= 0) & np.isfinite(best), best, np.where((index >= 0) & (best == np.inf), np.inf, np.nan))


def _ffill_state(ab: np.ndarray) -> np.ndarray:
    """Forward-fill the -1 (NaN) entries of a 0/1 state array along rows (leading -1 stay -1)."""
    idx = np.arange(ab.shape[1])
    last = np.maximum.accumulate(np.where(ab >= 0, idx, -1), axis=1)
    return np.where(last >= 0, np.take_along_axis(ab, np.maximum(last, 0), axis=1), -1)


def _fill_gaps(d: np.ndarray, y: np.ndarray, finite: np.ndarray) -> np.ndarray:
    """Rows of y with NaN gaps filled by linear interpolation between finite neighbours (ends held)."""
    if finite.all():
        return y
    out = y.copy()
    for r in np.flatnonzero(~finite.all(axis=1)):
        ok = finite[r]
        if ok.sum() >= 1:
            out[r] = np.interp(d, d[ok], y[r, ok])
    return out


def _degenerate(d, y, finite, has_min, min_rise) -> tuple[np.ndarray, tuple[str, ...]]:
    """Per row: the degenerate status code (or -1) and its reason (module docstring)."""
    n_rows, n = y.shape
    code = np.full(n_rows, -1)
    reasons = [""] * n_rows
    beyond = finite & (d[None, :] >= 1)
    count = finite.sum(axis=1)
    count_beyond = beyond.sum(axis=1)
    for r in range(n_rows):  # a loop over rows of scalar tests, each O(n)
        if count[r] < MIN_POINTS:
            code[r] = _TOO_FEW
            reasons[r] = ("no finite similarity beyond distance 0" if count_beyond[r] == 0 else
                          f"{count[r]} distances with a finite value, fewer than {MIN_POINTS}")
            continue
        first_beyond = int(np.argmax(beyond[r]))
        if count_beyond[r] == n - first_beyond:  # every point from there on (no gap): views, no copies
            v, dv = y[r, first_beyond:], d[first_beyond:]
        else:
            v, dv = y[r, beyond[r]], d[beyond[r]]
        first = v[0]
        median = float(np.median(v))
        if abs(first - median) <= min_rise:
            code[r] = _FLAT
            reasons[r] = (f"no decay beyond distance {dv[0]:g}: S there ({first:.3g}) is within {min_rise:g} of "
                          f"its median over distances {dv[0]:g}..{dv[-1]:g} ({median:.3g})")
            continue
        median_crossings = int(np.sum((v[:-1] >= median) & (v[1:] < median)))
        if has_min[r] and median_crossings >= 2:
            second = v[dv > d[-1] / 2]
            if second.size and float(second.max()) >= first - min_rise:
                code[r] = _NO_DECAY
                reasons[r] = (f"S oscillates without decaying: after its first minimum it rises back to "
                              f"{float(second.max()):.3g} beyond distance {d[-1] / 2:g}, within {min_rise:g} of S "
                              f"at distance {dv[0]:g} ({first:.3g})")
                continue
        half = dv > (dv[0] + dv[-1]) / 2
        head, tail = float(v[~half].mean()), float(v[half].mean()) if half.any() else float(v[-1])
        if tail - head > min_rise:
            code[r] = _RISING
            reasons[r] = (f"S rises with distance: {tail:.3g} on average over the second half of distances "
                          f"{dv[0]:g}..{dv[-1]:g} against {head:.3g} over the first")
    return code, tuple(reasons)


def profile_summaries(distance, similarity, *, thresholds=DEFAULT_THRESHOLDS, se=None, min_rise: float = MIN_RISE,
                      min_rise_se: float = MIN_RISE_SE, noise_se=None, n_pairs=None,
                      crossing_z: float = CROSSING_Z) -> ProfileSummaries:
    """The model-free summaries of one profile (module docstring): pure, O(max_distance), no fitting.

    Parameters
    ----------
    distance : array_like of shape (n_distances,)
        0, 1, ..., max_distance (positions), increasing.
    similarity : array_like of shape (n_distances,)
        Mean similarity at each distance (NaN: no pair, skipped).
    thresholds : sequence of float
        Levels in [−1, 1] of the ``band_width_<t>`` summaries.
    se : array_like of shape (n_distances,), optional
        Standard errors of the means (a first minimum must rise back beyond them); None for exact profiles.
    min_rise, min_rise_se : float
        See :func:`summaries_many`.
    noise_se, n_pairs : array_like of shape (n_distances,), optional
        Standard errors counting the dependence between anchors and the pairs behind each mean: a crossing
        counts only beyond ``crossing_z`` of them (:func:`summaries_many`; module docstring); None: exact.
    crossing_z : float

    Returns
    -------
    ProfileSummaries

    Raises
    ------
    ValueError
        A threshold outside [−1, 1] (the message names the valid range), or a
        similarity array that is not 1-D and as long as ``distance``.

    Examples
    --------
    >>> import numpy as np
    >>> k = np.arange(200)
    >>> s = profile_summaries(k, np.exp(-k / 20.0), thresholds=[0.5])
    >>> s["band_width_0p5"], s["e_folding_distance"], s.status_of("zero_crossing")
    (14.0, 21.0, 'not_reached')
    """
    y = np.asarray(similarity, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"similarity must be a 1-D profile, got shape {y.shape}; use summaries_many for many")
    arrays = summaries_many(distance, y[None, :], thresholds=thresholds, se=se, min_rise=min_rise,
                            min_rise_se=min_rise_se, noise_se=noise_se, n_pairs=n_pairs, crossing_z=crossing_z)
    noise = _pooled_noise(noise_se, n_pairs, y.size, crossing_z)
    exact = noise is None
    d = np.asarray(distance, dtype=float)
    max_distance = int(d[-1]) if d.size else 0
    known = np.flatnonzero(np.isfinite(noise[2])) if noise is not None else np.zeros(0, dtype=int)
    last_known = int(d[known[-1]]) if known.size else None  # the last distance with a standard error
    statuses = tuple(STATUSES[c] for c in arrays.status[0])
    reasons = []
    for j, (name, st) in enumerate(zip(arrays.names, statuses)):
        if st in DEGENERATE:
            reasons.append(arrays.reasons[0])
        elif st == "not_reached":
            reasons.append(_not_reached_reason(name, arrays.level[0, j], max_distance, arrays.crossing_low[0, j],
                                               arrays.lower_bound[0, j]))
        elif st == "undefined":
            reasons.append("S(0) is not positive: S / S(0) is not defined")
        elif st == "within_noise":
            reasons.append(_within_noise_reason(name, arrays, j, crossing_z, max_distance, last_known))
        elif arrays.ill_conditioned[0, j]:  # the integral scale: that of the zero crossing it is integrated up to
            reasons.append(("it ends at the zero crossing, which is ill-conditioned: " if name == "integral_scale" else "")
                           + f"S comes back above the level {arrays.recrossings[0, j]} time(s) after its first "
                           f"crossing, and a change of ±{CONDITIONING_DELTA:g} in the level moves that crossing "
                           f"from {arrays.crossing_low[0, j]:.1f} to "
                           + (f"{arrays.crossing_high[0, j]:.1f}" if np.isfinite(arrays.crossing_high[0, j]) else
                              "beyond the window"))
        else:
            reasons.append("")
    return ProfileSummaries(
        names=arrays.names, values=arrays.values[0], status=statuses, reason=tuple(reasons),
        crossing=arrays.crossing[0], crossing_low=arrays.crossing_low[0], crossing_high=arrays.crossing_high[0],
        slope=arrays.slope[0], recrossings=arrays.recrossings[0], ill_conditioned=arrays.ill_conditioned[0],
        first_minimum_similarity=float(arrays.first_minimum_similarity[0]),
        first_minimum_depth=float(arrays.first_minimum_depth[0]), max_distance=max_distance,
        below_se=arrays.below_se[0], crossing_z=None if exact else float(crossing_z),
        lower_bound=arrays.lower_bound[0])


def _within_noise_reason(name: str, arrays: SummaryArrays, j: int, crossing_z: float, max_distance: int,
                         last_known: int | None) -> str:
    if name == "integral_scale":
        j = arrays.names.index("zero_crossing")
        prefix = "it ends at the zero crossing, which is within the noise: "
    else:
        prefix = ""
    below = arrays.below_se[0, j]
    if not np.isfinite(below):  # the crossing lies beyond every distance with a standard error
        return (f"{prefix}S first falls below {arrays.level[0, j]:.3g} at {arrays.crossing[0, j]:.1f}, beyond "
                f"distance {last_known}, the last one whose pairs lie in two or more anchor blocks: there S rests on "
                "one block's few pairs and has no standard error, so the fall is no evidence of a crossing")
    return (f"{prefix}S first falls below {arrays.level[0, j]:.3g} at {arrays.crossing[0, j]:.1f} but never by more "
            f"than {crossing_z:g} standard errors up to max_distance {max_distance} (at most {below:.2g}): it falls to "
            "the noise floor around the level, not significantly below it")


def _not_reached_reason(name: str, level: float, max_distance: int, low: float, bound: float) -> str:
    if name == "first_minimum":
        return f"no trough that S rises back from within max_distance {max_distance}"
    if name == "integral_scale":
        text = f"no zero crossing within max_distance {max_distance}: the integral up to it is not defined"
        if np.isfinite(bound):
            text += (f"; S >= 0 up to the window, so the integral scale is at least {bound:.4g}, the integral of "
                     f"S / S(0) up to {max_distance} (lower_bound)")
        return text
    text = f"S stays at or above {level:.3g} up to max_distance {max_distance}"
    if np.isfinite(low):
        text += (f"; it falls below the level + {CONDITIONING_DELTA:g} at {low:.1f} (crossing_low; the level - "
                 f"{CONDITIONING_DELTA:g} is not crossed within the window: crossing_high empty)")
    return text


#: First and largest chunk (distances) of the scans of :func:`summary_values_many`: a crossing near the start is
#: found after a few hundred distances, a scan over the whole window runs in cache-sized pieces (512 KiB).
_SCAN_FIRST, _SCAN_MAX = 1024, 2**16


@dataclasses.dataclass(frozen=True)
class _Settings:
    """What :func:`summary_values_many` needs about a profile's distances and noise, prepared once per run."""

    d: np.ndarray
    thresholds: tuple[float, ...]
    se: np.ndarray | None
    min_rise: float
    min_rise_se: float
    noise: tuple | None
    crossing_z: float
    beyond: int  # first index with d >= 1
    step: np.ndarray  # np.diff(d)


def summary_settings(distance, *, thresholds=DEFAULT_THRESHOLDS, se=None, min_rise: float = MIN_RISE,
                     min_rise_se: float = MIN_RISE_SE, noise_se=None, n_pairs=None,
                     crossing_z: float = CROSSING_Z) -> _Settings:
    """The arguments of :func:`summaries_many` checked and prepared once, for :func:`summary_values_many` on many
    chunks of rows (the pooled noise of ``noise_se`` is O(n_distances) to prepare). Raises as summaries_many."""
    thresholds = check_thresholds(thresholds)
    d = np.asarray(distance, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"distance must be a non-empty 1-D array, got shape {d.shape}")
    if d.size > 1 and np.any(np.diff(d) <= 0):
        raise ValueError("distance must be strictly increasing")
    noise = _pooled_noise(noise_se, n_pairs, d.size, crossing_z)
    s = None if se is None else np.asarray(se, dtype=np.float64)
    if s is not None and s.shape not in ((d.size,), ()):
        raise ValueError(f"se must have shape ({d.size},) like distance, got {s.shape}")
    if s is not None and s.ndim == 0:
        s = np.full(d.size, float(s))
    return _Settings(d, thresholds, s, float(min_rise), float(min_rise_se), noise, float(crossing_z),
                     int(np.searchsorted(d, 1.0, side="left")), np.diff(d))


def summary_values_many(settings: _Settings, similarities) -> tuple[tuple[str, ...], np.ndarray, np.ndarray]:
    """The values and statuses of :func:`summaries_many` (and only those), row by row with early exits.

    For bootstrap replicates, which need each summary's value and status and none of the conditioning columns:
    equal, entry for entry, to ``summaries_many(...).values`` and ``.status`` with the same arguments (brute-force
    tests in tests/analysis/test_summaries_fast.py), in O(n_distances) per row at worst but usually far less. The
    profile's degenerate status is decided first (a flat profile, e.g. a random table's, needs nothing else; its
    median is compared with S at distance 1 by counting, :func:`_flat`); a crossing is the first distance below
    its level, found by scanning from distance 0 in growing chunks; the noise rule scans from the crossing only
    until S falls beyond ``crossing_z`` standard errors; the first minimum stops at the first rise that qualifies;
    the integral scale sums the trapezoids up to the zero crossing only (the same sequential sums).

    Parameters
    ----------
    settings
        From :func:`summary_settings`.
    similarities : array_like of shape (n_profiles, n_distances)

    Returns
    -------
    (names, values, status)
        As :class:`SummaryArrays`' ``names``, ``values`` (n_profiles, n_summaries) and ``status``.
    """
    p = settings
    y = np.asarray(similarities, dtype=np.float64)
    if y.ndim == 1:
        y = y[None, :]
    if y.ndim != 2 or y.shape[1] != p.d.size:
        raise ValueError(f"similarities must have shape (n_profiles, {p.d.size}) to match distance, got {y.shape}")
    names = summary_names(p.thresholds)
    values = np.full((y.shape[0], len(names)), np.nan)
    status = np.zeros((y.shape[0], len(names)), dtype=np.int8)
    scratch = np.empty(p.d.size, dtype=bool)  # the flat test's comparisons, reused row after row (fresh: page faults)
    for r in range(y.shape[0]):
        _row_values(p, np.ascontiguousarray(y[r]), values[r], status[r], scratch)
    values[status != _OK] = np.nan
    return names, values, status


def _scan(n: int, start: int, hit) -> int:
    """First index i >= start with hit(c0, c1)[i - c0] true, scanning chunks [c0, c1) of growing size; -1: none."""
    c0, size = start, _SCAN_FIRST
    while c0 < n:
        c1 = min(n, c0 + size)
        m = hit(c0, c1)
        i = int(np.argmax(m))
        if m[i]:
            return c0 + i
        c0, size = c1, min(2 * size, _SCAN_MAX)
    return -1


def _flat(v: np.ndarray, first: float, min_rise: float, scratch=None) -> bool:
    """``abs(first - np.median(v)) <= min_rise`` decided by counting where the two middle values of v lie
    (exact: a margin of 1e-9 covers the rounding of the median and of the difference; np.median otherwise).
    ``scratch``: a boolean array of at least v's size for the comparisons."""
    size = v.size
    lo, hi = (size - 1) // 2, size // 2  # the middle order statistics (0-based)
    a, b = first - min_rise, first + min_rise
    eps = 1e-9 * (1.0 + abs(first) + min_rise)
    # inside first (a flat profile needs only these two counts): then neither middle value is below a − eps (at
    # most lo <= hi values are) nor above b + eps (at most size − 1 − hi < size − lo values are), so the test for
    # outside below could not have held
    out = None if scratch is None else scratch[:size]
    if np.count_nonzero(np.less(v, a + eps, out=out)) <= lo and \
            np.count_nonzero(np.greater(v, b - eps, out=out)) <= size - 1 - hi:
        return True  # both middle values inside [a, b] by more than the margin
    if np.count_nonzero(np.less(v, a - eps, out=out)) > hi or \
            np.count_nonzero(np.greater(v, b + eps, out=out)) >= size - lo:
        return False  # both middle values below a (or above b) by more than the margin
    return abs(first - float(np.median(v))) <= min_rise


def _row_values(p: _Settings, y: np.ndarray, values: np.ndarray, status: np.ndarray, scratch=None) -> None:
    """One row of :func:`summary_values_many` (values, status filled in place; ``scratch``: :func:`_flat`'s)."""
    d, n = p.d, y.size
    # a finite sum has finite terms (a NaN or an infinity makes it NaN or infinite): one pass without a temporary
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(np.sum(y))
    finite = None if math.isfinite(total) else np.isfinite(y)
    count = n if finite is None else int(np.count_nonzero(finite))
    if count == n:  # all finite (the sum overflowed)
        finite = None
    all_finite = finite is None
    # the degenerate statuses (as _degenerate), the flat test first: it needs no other summary
    if count < MIN_POINTS:
        status[:] = _TOO_FEW
        return
    if all_finite:
        v, dv = y[p.beyond:], d[p.beyond:]
    elif finite[:count].all():  # finite up to a distance, NaN beyond (a resample without the first anchor blocks):
        v, dv = y[p.beyond:count], d[p.beyond:count]  # the same values as below, as views (no 16 MB of copies)
    else:
        keep = finite[p.beyond:]
        v, dv = y[p.beyond:][keep], d[p.beyond:][keep]
    first = v[0]
    if _flat(v, first, p.min_rise, scratch):
        status[:] = _FLAT
        return
    has_min, k_min = _first_minimum(p, y, finite)
    code = -1
    if has_min:
        median = float(np.median(v))
        if int(np.sum((v[:-1] >= median) & (v[1:] < median))) >= 2:
            second = v[dv > d[-1] / 2]
            if second.size and float(second.max()) >= first - p.min_rise:
                code = _NO_DECAY
    if code < 0:
        half = dv > (dv[0] + dv[-1]) / 2
        head, tail = float(v[~half].mean()), float(v[half].mean()) if half.any() else float(v[-1])
        if tail - head > p.min_rise:
            code = _RISING
    if code >= 0:
        status[:] = code
        return
    names = len(p.thresholds)
    fm, zc, ic = names + 2, names + 1, names + 3
    values[fm], status[fm] = (d[k_min], _OK) if has_min else (np.nan, _NOT_REACHED)
    # the crossings of each level (as summaries_many)
    s0 = y[0] if d[0] == 0 else np.nan
    e_level = s0 / math.e if s0 > 0 else np.nan
    z_index = -1
    for j, level in enumerate((*p.thresholds, e_level, 0.0)):
        if np.isnan(level):
            status[j] = _UNDEFINED
            continue
        index = _scan(n, 0, lambda c0, c1: y[c0:c1] < level)
        if j == zc:
            z_index = index
        if index < 0:
            status[j] = _NOT_REACHED
            continue
        values[j], status[j] = d[index], _OK
        if p.noise is not None and not _beyond_noise(p, y, level, index):
            status[j] = _WITHIN_NOISE
    # the integral scale: trapezoids of S / S(0) up to the interpolated zero crossing
    defined = s0 > 0
    if not defined:
        status[ic] = _UNDEFINED
    elif z_index <= 0:
        status[ic] = _NOT_REACHED
    else:
        values[ic], status[ic] = _integral(p, y, finite, z_index, s0), _OK
    if defined and status[zc] == _WITHIN_NOISE:
        status[ic] = _WITHIN_NOISE


def _beyond_noise(p: _Settings, y: np.ndarray, level: float, index: int) -> bool:
    """Whether S falls below ``level`` by more than crossing_z pooled standard errors at some k >= index
    (``_below_se(...) > crossing_z``, the same arithmetic, stopping at the first such k)."""
    total, count, pairs = p.noise
    if not count[index] > 0:
        return False  # no known standard error beyond the crossing: below_se is NaN
    v = total[index] / np.maximum(count[index], 1)
    z = p.crossing_z

    def hit(c0, c1):
        with np.errstate(invalid="ignore", divide="ignore"):
            return (level - y[c0:c1]) / np.sqrt(v / pairs[c0:c1]) > z

    return _scan(y.size, index, hit) >= 0


def _first_minimum(p: _Settings, y: np.ndarray, finite) -> tuple[bool, int]:
    """(has a first minimum, its index) by summaries_many's rule, scanning until the first qualifying rise."""
    n = y.size
    carry = [np.inf, 0]  # running minimum and trough index before the chunk

    def hit(c0, c1):
        yc = y[c0:c1]
        fc = None if finite is None else finite[c0:c1]
        yy = yc if fc is None else np.where(fc, yc, np.inf)
        running = np.minimum.accumulate(yy)
        np.minimum(running, carry[0], out=running)
        trough = np.maximum.accumulate(np.where(yy == running, np.arange(c0, c1), 0))
        np.maximum(trough, carry[1], out=trough)
        rise = yc - running if fc is None else np.where(fc, yc - running, -np.inf)
        qualifies = rise >= p.min_rise
        if p.se is not None:
            with np.errstate(invalid="ignore"):
                qualifies &= rise >= p.min_rise_se * np.hypot(p.se[c0:c1], p.se[trough])
        carry[:] = running[-1], trough[-1]
        troughs[:] = c0, trough
        return qualifies

    troughs = [0, None]  # the last chunk's start and trough indices
    at = _scan(n, 0, hit)
    if at < 0:
        return False, -1
    return True, int(troughs[1][at - troughs[0]])


def _integral(p: _Settings, y: np.ndarray, finite, m: int, s0: float) -> float:
    """summaries_many's integral scale of a row whose first zero crossing is at index m > 0: the same trapezoids
    (NaN gaps filled linearly) summed sequentially up to distance m − 1, plus the piece to the interpolated zero."""
    d = p.d
    if finite is None or finite[:m + 1].all():
        f, j = y[:m], m - 1  # j: the last finite point before m (prev[m - 1])
    else:
        ok = finite[:m + 1]
        f = np.interp(d[:m + 1], d[:m + 1][ok], y[:m + 1][ok])[:m]
        j = int(np.flatnonzero(ok[:m])[-1]) if ok[:m].any() else -1
    if j < 0:
        z = np.nan
    else:
        y0, y1 = y[j], y[m]
        frac = np.clip((y0 - 0.0) / (y0 - y1), 0.0, 1.0)
        z = d[j] + frac * (d[m] - d[j])
    with np.errstate(invalid="ignore", divide="ignore"):
        r = f / s0
        seg = 0.5 * (r[1:] + r[:-1]) * p.step[:m - 1]
        cum = np.nancumsum(seg)[-1] if m > 1 else 0.0
        return float(cum + 0.5 * (z - d[m - 1]) * r[m - 1])
