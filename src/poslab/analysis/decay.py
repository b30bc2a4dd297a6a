"""Decay fits of a similarity profile with :func:`scipy.optimize.curve_fit`.

A *similarity profile* S(d) is the mean cosine similarity between position
vectors at distance d = |i - j| (in positions). It starts at or near 1 at
d = 0 and decays, possibly oscillating, towards an asymptote. Each model in
:data:`DECAY_MODELS` is, as in lmfit's ``models.py``, a named function with
parameter bounds and a data-driven initial guess; each fit is summarised by
values, standard errors, goodness of fit and a ``status`` saying whether the
numbers can be used.

Decay length
------------
Every model with a scale reports one number, ``decay_length`` (in
positions), read on the fitted curve inside the fitted range: the distance L
over which f − asymptote falls to 1/e of its value at the first fitted
distance d0, ``f(d0 + L) − asymptote = (f(d0) − asymptote) / e``. Distance 0
is not fitted (S(0) = 1 by construction), so the length is never an
extrapolation to it: for the exponential L = length from any d0; for the
gaussian sqrt(d0² + 2 sigma²) − d0; for the power law (1 + d0)(e^(1/exponent) − 1);
for the stretched exponential length (1 + (d0/length)^stretch)^(1/stretch) − d0;
for ``damped_cosine`` the root of g(d0 + L) = g(d0)/e, g = exp(−d/length)
cos(2πd/period), unique before the first quarter period. When d0 + L lies
beyond the last fitted distance the fit is ``out_of_range``, with no number.
The ``log_law`` (intercept − slope · ln d) has no scale, so no decay length:
its ``slope`` is the summary (sinusoidal and RoPE profiles follow it with slope
1 / ln base: S(k) ≈ [Ci(k) − Ci(k / base)] / ln base ≈ 1 − (γ + ln k) / ln base).

Fit range
---------
The study pipeline fits distances from ``fit_min_distance`` (1) up to the
profile's first zero crossing (:func:`fit_range_end`), else the whole window,
and records the rule (``fit_range_rule``) and ``fit_max_distance``. Beyond its
zero crossing a profile no longer decays towards a level (GPT-2's helix
oscillates; a noisy tail is noise), which no decay model describes.

Weights
-------
Each point is the mean of ``n_pairs`` similarities with standard deviation
``std``; its standard error of the mean, used as curve_fit's ``sigma``, is ::

    se = max(std, floor) / sqrt(n_pairs),   floor = max(0.1 * pooled, 1e-6)

with ``pooled = sqrt(sum(n_pairs * std**2) / sum(n_pairs))`` the pooled
per-pair standard deviation (cosine-similarity units). The floor caps the
weight a point can gain from a small std at 100 times that of a point with
the pooled std: a std from a handful of pairs, or from an exactly
translation-invariant table (sinusoidal, RoPE: std ~ 1e-16), would otherwise
get an unbounded weight. Distances with fewer than 2 pairs are dropped (their
std is 0 or a single difference). Without ``std`` the weights are
``n_pairs``; without both, uniform. Only relative weights matter: the
noise that decides goodness of fit, selection and standard errors is
``noise`` (below), since the SEM treats the pairs at one distance as
independent, which they are not (neighbouring pairs share positions).

Goodness of fit
---------------
``r2`` (unweighted), ``rmse`` and ``durbin_watson`` are reported, not gated:
neighbouring distances share positions, so even a true model's residuals are
strongly autocorrelated (Durbin–Watson near 0) and a naive test would reject
it. The gate compares the misfit with the profile's own noise, given as
``noise``: one column per anchor block (:func:`poslab.analysis.bootstrap.block_noise`),
F with F Fᵀ the covariance of the mean profile across distances. For a true
model the residual is that noise minus its weighted projection on the curve's
tangents, r ≈ (I − P) F z, so ‖r‖² is distributed as Σ λ_j χ²₁ with λ the
eigenvalues of Fᵀ(I − P)ᵀ(I − P)F; ``gof_p_value`` is its tail probability by
Satterthwaite's two-moment χ² (g χ²_h, g = Σλ²/Σλ, h = (Σλ)²/Σλ²). A fit is
``poor_fit`` when that p-value is below ``gof_alpha`` (0.001) **and** its
``misfit`` exceeds ``fit_tolerance`` (0.1): the largest |mean residual| over
LOG_BINS = 20 bins equally spaced in ln(1 + d), relative to the profile's
range over the fitted distances (a misfit at a few distances counts; the
ripple of a finite cosine sum averages out). The tolerance keeps a misfit
that is statistically detectable but negligible (a random-Fourier table's
realised kernel against its Gaussian expectation: r² 0.9996, misfit 0.01)
from being rejected. An exact profile (noise <= EXACT_NOISE everywhere: a
translation-invariant table or a kernel) has no noise: the tolerance alone
decides. Measured (benchmarks/fit_gate.py, benchmarks/model_selection.py,
benchmarks/README.md): every bad fit issue 13 found is ``poor_fit``; false
alarms on correct models are reported there. Without ``noise``
(``gof_test = none``) no fit is gated.

Model selection
---------------
Akaike weights treat residuals as independent; here they are not. Among the
``ok`` fits of a target, QAICc (Burnham & Anderson 2002, §2.5) ::

    qaicc = chi2 / c_hat + 2K + 2K(K + 1) / (n_effective − K − 1),  K = k + 1,
    chi2 = Σ (r / se)²  (the fit's weights)

with ĉ the mean generalised design effect of the most general ok model (most
parameters, then lowest chi2): δ̄ = tr(A⁻¹ Jᵀ W Σ W J) / k, A = Jᵀ W J (Rao &
Scott 1984's first-order correction; as for AIC under complex sampling,
Lumley & Scott 2015), and n_effective the number of anchor blocks (the
independent units). Without ``noise`` ĉ = τ · chi2 / (N − k) and n_effective
= N / τ, τ the integrated autocorrelation time of that model's standardised
residuals (:func:`autocorrelation_time`). ``akaike_weight`` = exp(−Δ/2) /
Σ exp(−Δ/2), Δ = qaicc − min(qaicc); the lowest qaicc is ``selected``.
:meth:`DecayFits.averaged` gives the model-averaged decay length and its
unconditional standard error (eq. 4.9). ``aic``, ``aicc`` (Hurvich & Tsai
1989) and ``bic`` are kept as they were (independent residuals,
w = (1 / se²) / mean(1 / se²), aic = N ln(RSS_w / N) + 2k).

Confidence intervals
--------------------
``<param>_ci_low`` / ``<param>_ci_high`` are Wald intervals at ``level``:
value ∓ t_{(1 + level) / 2, dof} · se. With ``noise`` the covariance is the
cluster-robust sandwich A⁻¹ (Jᵀ W F)(Jᵀ W F)ᵀ A⁻¹ (anchor blocks as
clusters: White 1980; Liang & Zeger 1986) and dof = n_blocks − k; without it,
curve_fit's covariance times τ and dof = N / τ − k. ``decay_length_se``
propagates the covariance through the decay length (delta method, central
differences). The bootstrap (:mod:`poslab.analysis.bootstrap`) gives the
intervals the study reports.

Long profiles
-------------
A profile with more than MAX_FIT_POINTS = 4096 usable distances (a table of
more than ~4096 positions) is fitted on 4096 points: the first
EXACT_FIT_POINTS = 2048 distances as they are, the rest cut into 2048
contiguous bins of (nearly) equal numbers of distances. A bin's point is the
pair-count-weighted mean of its distances and of its similarities (the
mean over all the bin's pairs), with n_pairs the bin's pairs and std the
pooled within-distance std sqrt(Σ n_j std_j² / Σ n_j), so that its standard
error std / sqrt(Σ n_j) is that of the weighted mean of independent
per-distance means (the "Weights" model). Bin averages keep every
oscillation slower than about twice a bin's width (width about (N − 2048) /
2048): 63 distances at n = 131072, 511 at n = 1,048,576) and average faster
ones out beyond distance 2048, where log-spaced subsampling would alias
them; decays shorter than 2048 positions see exactly the unbinned points.
Fitting 4096 points instead of 131071 takes ~0.2 s instead of 4-7 s.
Measured at n = 131072, dim 128: the selected decay length moved by 1e-5
(smoothed_random, 31.91) and 9e-4 (sinusoidal, 951.9 against 952.7)
relative; the Wald standard errors grew 4-5 times (the reduced chi^2 of a
smooth misfit grows with the distances per bin, up to sqrt(bin width):
unbinned they assumed independent residuals, which they are not). ``n_points`` counts the fitted points (bins);
:attr:`DecayFits.bins` records them, and the bootstrap refits bin each
resampled profile the same way. Profiles and ``decay_metrics`` tables keep
every distance.

Envelope target
---------------
An oscillating profile (sinusoidal, RoPE, GPT-2's helix; :func:`oscillates`:
it rises back by more than 5 % of its range and 25 median standard errors)
is also fitted on its upper envelope (``target="envelope"``): the running maximum from the
right, M(d) = max_{d' >= d} y(d'), the smallest non-increasing curve on or
above the profile (:func:`upper_envelope`). The fit uses the distances where
the profile touches it, y(d) = M(d), i.e. where the profile exceeds every
value farther out: no interpolated points are invented. For a non-increasing
profile the envelope is the profile itself.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Callable

import numpy as np
import pandas as pd
import scipy  # scipy.fft, .special and .optimize (~0.3 s) load on first use; poslab run imports them beside the run

__all__ = ["DecayModel", "Parameter", "Scales", "DecayFit", "DecayFits", "DECAY_MODELS", "PARAMETERS", "fit_decay",
           "fit_weights", "upper_envelope", "oscillates", "bin_points", "MAX_FIT_POINTS", "fit_range_end",
           "autocorrelation_time", "GOF_ALPHA", "FIT_TOLERANCE"]

MAXFEV = 20_000  # function evaluations allowed per curve_fit call
#: A model must lower the AIC by this much against a constant (no decay) to be reported;
#: ΔAIC > 10 means "essentially no support" for the worse model (Burnham & Anderson,
#: Model Selection and Multimodel Inference, 2nd ed., 2002, §2.6).
MIN_AIC_GAIN = 10.0
#: Default level of the parameter confidence intervals.
CI_LEVEL = 0.95
#: The std floor, as a fraction of the pooled per-pair std (see "Weights").
STD_FLOOR_FRACTION = 0.1
#: Absolute std floor, in cosine-similarity units.
STD_FLOOR_ABSOLUTE = 1e-6
#: A profile oscillates when it rises back by more than this fraction of its range.
OSCILLATION_MIN_DEPTH = 0.05
#: ... and by more than this many median standard errors.
OSCILLATION_MIN_SE = 25.0
#: Goodness-of-fit gate: residuals less probable than this under the profile's noise model are ``poor_fit``.
GOF_ALPHA = 1e-3
#: ... and whose largest |mean residual| over LOG_BINS bins of ln(1 + d), relative to the profile's range, exceeds
#: this (for an exact profile, which has no noise, this alone) are ``poor_fit``.
FIT_TOLERANCE = 0.1
#: Bins of ln(1 + distance) of the exact gate.
LOG_BINS = 20
#: Noise at or below this everywhere (cosine similarity) makes a profile exact (translation invariant).
EXACT_NOISE = 1e-9
#: Profiles with more usable distances are fitted on bins (see "Long profiles").
MAX_FIT_POINTS = 4096
#: ... of which the first this many distances stay single points.
EXACT_FIT_POINTS = 2048


def _information_criteria(rss_w: float, n_points: int, k: int) -> tuple[float, float]:
    """(AIC, BIC) of a least-squares fit with weighted residual sum ``rss_w`` and ``k`` parameters."""
    log_term = n_points * math.log(max(rss_w / n_points, np.finfo(float).tiny))
    return log_term + 2 * k, log_term + k * math.log(n_points)


@dataclass(frozen=True)
class Scales:
    """What a parameter's data-driven bounds and initial guess are computed from.

    Attributes
    ----------
    d, y : ndarray of shape (n_points,)
        Sorted distances (positions) and similarities being fitted.
    spacing, span : float
        Smallest step and extent of ``d`` (positions).
    asymptote, amplitude, length : float
        The shared start (:func:`_start`): tail mean, y[0] − tail mean, and
        the interpolated distance where y − asymptote first falls below
        amplitude / e (span / 3 if it never does).
    """

    d: np.ndarray
    y: np.ndarray
    spacing: float
    span: float
    asymptote: float
    amplitude: float
    length: float

    @classmethod
    def of(cls, d, y) -> "Scales":
        spacing, span = _scales(d)
        asymptote, amplitude, length = _start(d, y)
        return cls(d, y, spacing, span, asymptote, amplitude, length)


@dataclass(frozen=True)
class Parameter:
    """A decay-model parameter with its hints, as lmfit's parameter hints: unit, bounds and initial guess.

    Attributes
    ----------
    name : str
        Also the ``decay_metrics`` columns ``<name>``, ``<name>_se``, ``<name>_ci_low``, ``<name>_ci_high``.
    unit : str
        ``cosine similarity``, ``positions`` or "" (dimensionless).
    description : str
    bounds : callable
        ``bounds(scales) -> (lower, upper)`` from the data's :class:`Scales`.
    guess : callable
        ``guess(scales) -> float``: the data-driven initial value.
    scale : bool
        A positive scale: a relative standard error above 1 makes the fit ``not_identifiable``.
    """

    name: str
    unit: str
    description: str
    bounds: Callable[[Scales], tuple[float, float]]
    guess: Callable[[Scales], float]
    scale: bool = True


@dataclass(frozen=True)
class DecayModel:
    """A named decay curve: its function, parameters with hints, and decay-length rule (lmfit's ``Model``).

    Attributes
    ----------
    name : str
    function : callable
        ``function(d, *params)``: the curve at distances ``d`` (positions, any shape).
    parameters : tuple of Parameter
        In the order ``function`` takes them.
    formula : str
        The curve in ``d``, for people.
    length_rule : str
        How the decay length follows from the parameters, for people.
    length : callable
        ``length(params, start) -> float``: the decay length in positions measured from the distance
        ``start`` (module docstring, "Decay length"); NaN for a scale-free model (the log law).

    ``guess(d, y)`` and ``bounds(d, y)`` take sorted distances and
    similarities of shape (n_points,) and return ``p0`` and ``(lower, upper)``,
    arrays of shape (n_params,); ``decay_length(params)`` applies ``length``.
    """

    name: str
    function: Callable[..., np.ndarray]
    parameters: tuple[Parameter, ...]
    formula: str
    length_rule: str
    length: Callable[..., float]
    scale_free: bool = False

    @property
    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    def guess(self, d, y) -> np.ndarray:
        """Data-driven initial values, shape (n_params,) (each :class:`Parameter`'s hint)."""
        scales = Scales.of(d, y)
        return np.array([p.guess(scales) for p in self.parameters], dtype=float)

    def bounds(self, d, y) -> tuple[np.ndarray, np.ndarray]:
        """Data-driven (lower, upper), each of shape (n_params,)."""
        scales = Scales.of(d, y)
        lower, upper = np.array([p.bounds(scales) for p in self.parameters], dtype=float).T
        return lower, upper

    def decay_length(self, params, start: float = 0.0) -> float:
        """Decay length (positions) of the curve with parameters ``params`` (in order), measured from ``start``.

        The distance L over which f − asymptote falls to 1/e of its value at ``start`` (the first fitted
        distance): f(start + L) − asymptote = (f(start) − asymptote) / e; NaN for a model without a scale."""
        return self.length(params, start)

    def curve(self, distance, params: dict) -> np.ndarray:
        """The curve at ``distance`` (positions) with named parameters."""
        return np.asarray(self.function(distance, *(params[p] for p in self.param_names)), float)


def _exponential(d, amplitude, length, asymptote):
    return amplitude * np.exp(-d / length) + asymptote


def _gaussian(d, amplitude, sigma, asymptote):
    return amplitude * np.exp(-(d**2) / (2 * sigma**2)) + asymptote


def _power_law(d, amplitude, exponent, asymptote):
    return amplitude * (1.0 + d) ** (-exponent) + asymptote


def _stretched_exponential(d, amplitude, length, stretch, asymptote):
    return amplitude * np.exp(-((d / length) ** stretch)) + asymptote


def _damped_cosine(d, amplitude, length, period, asymptote):
    return amplitude * np.exp(-d / length) * np.cos(2 * np.pi * d / period) + asymptote


def _scales(d):
    """Return (spacing, span) in positions: smallest step and extent of sorted ``d``."""
    steps = np.diff(d)
    steps = steps[steps > 0]
    spacing = float(steps.min()) if steps.size else 1.0
    return spacing, max(float(d[-1] - d[0]), spacing)


def _start(d, y):
    """Shared guess: asymptote = tail mean (last ~10%), amplitude = y[0] - asymptote,
    and L = interpolated distance where y - asymptote first falls below amplitude / e
    (span / 3 if it never does)."""
    asymptote = float(np.clip(y[-max(1, y.size // 10):].mean(), -1.0, 1.0))
    amplitude = float(np.clip(y[0] - asymptote, 0.0, 2.0))
    z, target = y - asymptote, amplitude / math.e
    below = np.flatnonzero(z < target)
    if amplitude > 0 and below.size and below[0] > 0:
        i = below[0]
        t = (z[i - 1] - target) / (z[i - 1] - z[i])
        return asymptote, amplitude, float(d[i - 1] + t * (d[i] - d[i - 1]))
    return asymptote, amplitude, _scales(d)[1] / 3


def _dominant_period(d, z):
    """Period (positions) of the largest nonzero-frequency rfft peak of ``z``,
    after linear interpolation onto a regular grid if ``d`` is irregular."""
    grid = np.linspace(d[0], d[-1], d.size)
    step = grid[1] - grid[0]
    if not np.allclose(np.diff(d), step, rtol=1e-6, atol=0):
        z = np.interp(grid, d, z)
    k = int(np.argmax(np.abs(scipy.fft.rfft(z))[1:])) + 1
    return d.size * step / k


def _length_bounds(s: Scales) -> tuple[float, float]:
    return s.spacing / 10, 100 * s.span


def _damped_cosine_length(p, start: float = 0.0) -> float:
    """Distance from ``start`` over which exp(-d / length) * cos(2 pi d / period) falls to 1/e of its value at
    ``start``: the root of g(start + L) = g(start) / e, unique in [start, period / 4] where g falls from g(start)
    to 0 (NaN when start >= period / 4: g(start) <= 0, nothing to fall from)."""
    _, length, period, _ = (float(v) for v in p)
    quarter = period / 4

    def g(d):
        return math.exp(-d / length) * math.cos(2 * math.pi * d / period)

    if not start < quarter:
        return math.nan
    target = g(start) / math.e
    root = scipy.optimize.brentq(lambda d: g(d) - target, start, quarter, xtol=1e-12 * max(quarter, 1.0))
    return float(root - start)


def _stretched_length(p, start: float = 0.0) -> float:
    """(d / length)**stretch rises by 1 from ``start``: L = length * (1 + (start / length)**stretch)**(1 / stretch)."""
    length, stretch = float(p[1]), float(p[2])
    return float(length * (1 + (start / length) ** stretch) ** (1 / stretch) - start)


#: Parameter hints shared by the models: cosine similarity lies in [-1, 1]; decays are from above.
AMPLITUDE = Parameter("amplitude", "cosine similarity", "height of the decay above its asymptote at distance 0",
                      lambda s: (0.0, 2.0), lambda s: s.amplitude)
ASYMPTOTE = Parameter("asymptote", "cosine similarity", "similarity the curve tends to at large distance",
                      lambda s: (-1.0, 1.0), lambda s: s.asymptote, scale=False)
LENGTH = Parameter("length", "positions", "e-folding length", _length_bounds, lambda s: s.length)
SIGMA = Parameter("sigma", "positions", "Gaussian width", _length_bounds, lambda s: s.length / math.sqrt(2))
EXPONENT = Parameter("exponent", "", "power-law exponent",
                     lambda s: (1 / math.log1p(100 * s.span), 20.0), lambda s: 1 / math.log1p(s.length))
STRETCH = Parameter("stretch", "", "stretching exponent (1: exponential, 2: Gaussian)",
                    lambda s: (1e-2, 2.0), lambda s: 1.0)
PERIOD = Parameter("period", "positions", "oscillation period",
                   lambda s: (2 * s.spacing, 2 * s.span), lambda s: _dominant_period(s.d, s.y - s.asymptote))
INTERCEPT = Parameter("intercept", "cosine similarity", "log law: the curve at distance 1",
                      lambda s: (-3.0, 3.0), lambda s: _log_law_guess(s)[0], scale=False)
SLOPE = Parameter("slope", "cosine similarity", "log law: fall of the curve per e-fold of distance (b in a - b ln d)",
                  lambda s: (0.0, 10.0), lambda s: _log_law_guess(s)[1])


def _log_law(d, intercept, slope):
    return intercept - slope * np.log(d)


def _log_law_guess(s: Scales) -> tuple[float, float]:
    """The line through the first and last points in ln d (distances > 0), slope clipped into (0, 10)."""
    keep = s.d > 0
    if keep.sum() < 2:
        return float(s.y[0]), 0.1
    d, y = s.d[keep], s.y[keep]
    slope = (y[0] - y[-1]) / math.log(d[-1] / d[0])
    slope = float(np.clip(slope, 1e-3, 9.0))
    return float(y[0] + slope * math.log(d[0])), slope


DECAY_MODELS: Mapping[str, DecayModel] = MappingProxyType({m.name: m for m in (
    DecayModel("exponential", _exponential, (AMPLITUDE, LENGTH, ASYMPTOTE),
               "amplitude * exp(-d / length) + asymptote", "length", lambda p, start=0.0: float(p[1])),
    DecayModel("gaussian", _gaussian, (AMPLITUDE, SIGMA, ASYMPTOTE),
               "amplitude * exp(-d**2 / (2 * sigma**2)) + asymptote",
               "sqrt(d0**2 + 2 * sigma**2) - d0 (sigma * sqrt(2) from d0 = 0)",
               lambda p, start=0.0: float(math.sqrt(start**2 + 2 * p[1] ** 2) - start)),
    DecayModel("power_law", _power_law, (AMPLITUDE, EXPONENT, ASYMPTOTE),
               "amplitude * (1 + d)**(-exponent) + asymptote", "(1 + d0) * (e**(1 / exponent) - 1)",
               lambda p, start=0.0: float((1 + start) * math.expm1(1 / p[1]))),
    DecayModel("stretched_exponential", _stretched_exponential, (AMPLITUDE, LENGTH, STRETCH, ASYMPTOTE),
               "amplitude * exp(-(d / length)**stretch) + asymptote",
               "length * (1 + (d0 / length)**stretch)**(1 / stretch) - d0 (length from d0 = 0)", _stretched_length),
    DecayModel("damped_cosine", _damped_cosine, (AMPLITUDE, LENGTH, PERIOD, ASYMPTOTE),
               "amplitude * exp(-d / length) * cos(2 * pi * d / period) + asymptote",
               "root L of g(d0 + L) = g(d0) / e, g = exp(-d / length) * cos(2 * pi * d / period), "
               "d0 + L <= period / 4", _damped_cosine_length),
    DecayModel("log_law", _log_law, (INTERCEPT, SLOPE), "intercept - slope * ln(d)",
               "none: a log law has no scale (its slope is the summary; sinusoidal and RoPE profiles follow one "
               "with slope 1 / ln base)", lambda p, start=0.0: math.nan, scale_free=True),
)})
"""The built-in decay models by name, read-only (pass your own :class:`DecayModel` to :func:`fit_decay`).
Bounds: amplitude in [0, 2] (decay from above), asymptote in [-1, 1], length and sigma in
[spacing / 10, 100 * span], exponent in [1 / ln(1 + 100 * span), 20] (decay length at most
100 * span, as for length), stretch in [0.01, 2], period in [2 * spacing, 2 * span] (spacing,
span: smallest step and extent of the distances, in positions). Initial guesses: the shared
start (:class:`Scales`), sigma = L / sqrt(2), exponent = 1 / ln(1 + L), stretch = 1 and the
period of the dominant rfft frequency of y - asymptote (each gives decay length L).
``damped_cosine`` has zero phase (cos = 1 at d = 0)."""

#: Every parameter of the built-in models, each once, in first-seen order (the ``decay_metrics`` columns).
PARAMETERS: tuple = tuple({p.name: p for m in DECAY_MODELS.values() for p in m.parameters}.values())


@dataclass(frozen=True)
class DecayFit:
    """Summary of one model fitted to one profile (or its upper envelope).

    ``status`` is ``"ok"`` or says why there are no numbers: ``"too_few_points"``,
    ``"flat"``, ``"rising"``, ``"not_converged"``, ``"not_identifiable"``,
    ``"at_bound"`` (a parameter pinned on its bound), ``"out_of_range"`` (decay
    length outside the fitted distances), ``"no_better_than_constant"`` or
    ``"failed"``; ``message`` explains it ("" when ok). Unless ok, ``params``,
    ``stderr``, intervals, goodness of fit and ``decay_length`` (positions) are NaN.
    ``ci`` maps each parameter to its (low, high) Wald interval at ``ci_level``;
    ``decay_model`` is the :class:`DecayModel` fitted (``model`` is its name).
    """

    model: str
    status: str
    message: str
    params: dict[str, float]
    stderr: dict[str, float]
    r2: float
    rmse: float
    aic: float
    bic: float
    decay_length: float
    n_points: int
    selected: bool = False
    target: str = "profile"
    aicc: float = math.nan
    akaike_weight: float = math.nan
    ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    decay_length_se: float = math.nan
    decay_length_ci: tuple[float, float] = (math.nan, math.nan)
    ci_level: float = CI_LEVEL
    decay_model: DecayModel | None = field(default=None, repr=False, compare=False)
    misfit: float = math.nan
    gof_p_value: float = math.nan
    durbin_watson: float = math.nan
    qaicc: float = math.nan
    chi2: float = math.nan
    residuals: np.ndarray | None = field(default=None, repr=False, compare=False)
    design_effect: float = math.nan


@dataclass(frozen=True)
class DecayFits:
    """All model fits of one profile and one target; the ok fit with the lowest QAICc is selected.

    ``distance``, ``similarity`` and ``sigma`` are the points actually fitted
    (after masking, sorting, the fit range, binning a long profile and, for the envelope,
    keeping the touch points), arrays of shape (n_points,); ``sigma`` is None
    when unweighted. For a binned profile (module docstring, "Long
    profiles"), ``bin_distance`` holds the usable input distances, sorted
    (shape (n_usable,)), and ``bins`` the [start, stop) indices into it of
    each fitted point (shape (n_points, 2)); both None when not binned.
    ``range_rule`` says how the fitted range's upper end was chosen; ``gate``
    which goodness-of-fit test applied (``noise``, ``exact`` or ``none``);
    ``c_hat`` and ``n_effective`` are the overdispersion and effective number of
    points behind QAICc (module docstring, "Model selection").
    """

    fits: tuple[DecayFit, ...]
    target: str = "profile"
    distance: np.ndarray | None = None
    similarity: np.ndarray | None = None
    sigma: np.ndarray | None = None
    bin_distance: np.ndarray | None = None
    bins: np.ndarray | None = None
    range_rule: str = "window"
    gate: str = "none"
    c_hat: float = math.nan
    n_effective: float = math.nan

    @property
    def selected(self) -> DecayFit | None:
        """The selected fit, or None if no fit has status ``"ok"``."""
        return next((f for f in self.fits if f.selected), None)

    @property
    def fit_range(self) -> tuple[float, float]:
        """(first, last) fitted distance in positions (NaN, NaN) without points."""
        if self.distance is None or not self.distance.size:
            return math.nan, math.nan
        last = self.bin_distance[-1] if self.bin_distance is not None else self.distance[-1]
        first = self.bin_distance[0] if self.bin_distance is not None else self.distance[0]
        return float(first), float(last)

    def averaged(self) -> tuple[float, float, str]:
        """Model-averaged decay length, its unconditional standard error, and why it is empty (or "").

        Over the ok fits that have a decay length, with their Akaike weights renormalised:
        L̄ = Σ w_i L_i and se(L̄) = Σ w_i sqrt(se_i² + (L_i − L̄)²) (Burnham & Anderson 2002, §4.3.2,
        eq. 4.9). Empty when no ok fit has a decay length, or when scale-free fits (the log law) carry
        more than half of the weight: the profile is then better described without a scale.
        """
        ok = [f for f in self.fits if f.status == "ok" and np.isfinite(f.akaike_weight)]
        scaled = [f for f in ok if np.isfinite(f.decay_length)]
        if not scaled:
            return math.nan, math.nan, "no ok fit with a decay length"
        free = sum(f.akaike_weight for f in ok if f.decay_model is not None and f.decay_model.scale_free)
        if free > 0.5:
            return math.nan, math.nan, f"scale-free fits (log law) carry Akaike weight {free:.3g} > 0.5: no scale"
        w = np.array([f.akaike_weight for f in scaled])
        w = w / w.sum()
        lengths = np.array([f.decay_length for f in scaled])
        se = np.array([f.decay_length_se for f in scaled])
        mean = float(w @ lengths)
        return mean, float(w @ np.sqrt(se**2 + (lengths - mean) ** 2)), ""

    def predict(self, distance) -> np.ndarray:
        """Selected model's curve at ``distance`` (positions, any shape); all NaN if none."""
        d = np.asarray(distance, dtype=float)
        best = self.selected
        if best is None:
            return np.full(d.shape, np.nan)
        with np.errstate(all="ignore"):
            return best.decay_model.curve(d, best.params)

    def to_frame(self) -> pd.DataFrame:
        """One row per model: target, model, status, message, then for the union of
        parameter names (first-seen order; NaN where a model lacks one) ``<param>``,
        ``<param>_se``, ``<param>_ci_low``, ``<param>_ci_high``; then r2, rmse, aic,
        aicc, bic, qaicc, akaike_weight, decay_length, decay_length_se,
        decay_length_ci_low, decay_length_ci_high (positions), ci_level,
        n_points, fit_min_distance, fit_max_distance, fit_range_rule, misfit,
        gof_p_value, gof_test, durbin_watson, c_hat, n_effective, selected."""
        names = list(dict.fromkeys(p for f in self.fits for p in f.params))
        tail = ["r2", "rmse", "aic", "aicc", "bic", "qaicc", "akaike_weight", "decay_length", "decay_length_se",
                "decay_length_ci_low", "decay_length_ci_high", "ci_level", "n_points", "fit_min_distance",
                "fit_max_distance", "fit_range_rule", "misfit", "gof_p_value", "gof_test", "durbin_watson", "c_hat",
                "n_effective",
                "selected"]
        per_param = [c for p in names for c in (p, f"{p}_se", f"{p}_ci_low", f"{p}_ci_high")]
        columns = ["target", "model", "status", "message", *per_param, *tail]
        first, last = self.fit_range
        shared = {"fit_min_distance": first, "fit_max_distance": last, "fit_range_rule": self.range_rule,
                  "gof_test": self.gate, "c_hat": self.c_hat, "n_effective": self.n_effective}
        rows = []
        for f in self.fits:
            row = {"target": f.target, "model": f.model, "status": f.status, "message": f.message}
            for p in names:
                low, high = f.ci.get(p, (math.nan, math.nan))
                row |= {p: f.params.get(p, np.nan), f"{p}_se": f.stderr.get(p, np.nan),
                        f"{p}_ci_low": low, f"{p}_ci_high": high}
            row |= {"decay_length_ci_low": f.decay_length_ci[0], "decay_length_ci_high": f.decay_length_ci[1]}
            row |= shared
            rows.append(row | {c: getattr(f, c) for c in tail if c not in row})
        return pd.DataFrame(rows, columns=columns)


def upper_envelope(similarity) -> tuple[np.ndarray, np.ndarray]:
    """Upper envelope of a profile: the running maximum from the right.

    Parameters
    ----------
    similarity : array_like of shape (n_distances,)
        Profile values in order of increasing distance, all finite.

    Returns
    -------
    envelope : ndarray of shape (n_distances,)
        M[j] = max(similarity[j:]), the smallest non-increasing sequence on or
        above the profile.
    touches : ndarray of bool, shape (n_distances,)
        True where similarity[j] == M[j] (the profile exceeds or equals every
        value farther out); these are the points an envelope fit uses.
    """
    y = np.asarray(similarity, dtype=float)
    envelope = np.maximum.accumulate(y[::-1])[::-1]
    return envelope, y >= envelope


def oscillates(similarity, *, se=None, min_depth: float = OSCILLATION_MIN_DEPTH,
               min_se: float = OSCILLATION_MIN_SE) -> bool:
    """True if the profile rises back by more than noise: an oscillation worth an envelope fit.

    Parameters
    ----------
    similarity : array_like of shape (n_distances,)
        Profile in order of increasing distance; non-finite values are skipped.
    se : array_like of shape (n_distances,), optional
        Standard errors of the points (:func:`fit_weights`).
    min_depth : float
        Fraction of the profile's range the depth must exceed (default
        OSCILLATION_MIN_DEPTH = 0.05).
    min_se : float
        Median standard errors the depth must exceed (default OSCILLATION_MIN_SE = 25).

    Returns
    -------
    bool
        The depth max(M − y), M the :func:`upper_envelope`, exceeds both
        ``min_depth`` of the profile's range and, given ``se``, ``min_se``
        times the median standard error. The second
        condition keeps a noisy tail from passing for an oscillation: the
        standard errors treat neighbouring anchors as independent, while the
        profile's noise is correlated over distances and rises several times
        higher: 15-20 standard errors in the tail of a smoothed_random table of
        dim 64 (a heuristic threshold, not a test; GPT-2 rises by 80).
    """
    y = np.asarray(similarity, dtype=float)
    keep = np.isfinite(y)
    if se is not None:
        se = np.asarray(se, dtype=float)
        keep &= np.isfinite(se)
    y = y[keep]
    if y.size < 3:
        return False
    envelope, _ = upper_envelope(y)
    depth = float(np.max(envelope - y))
    noise = min_se * float(np.median(se[keep])) if se is not None else 0.0
    return bool(depth > max(min_depth * np.ptp(y), noise) and depth > 0)


def fit_weights(n_pairs, std, *, pooled: float | None = None) -> np.ndarray | None:
    """Standard errors used as curve_fit ``sigma`` (see the module docstring, "Weights").

    Parameters
    ----------
    n_pairs, std : ndarray of shape (n_points,) or None
        Pairs behind each mean (>= 2) and their standard deviation.
    pooled : float, optional
        Pooled per-pair std of the floor (default: from ``n_pairs`` and ``std``;
        given for a subset of a profile's points, e.g. its envelope's).

    Returns
    -------
    ndarray of shape (n_points,) or None
        max(std, floor) / sqrt(n_pairs); 1 / sqrt(n_pairs) without std; None without n_pairs.
    """
    if n_pairs is None:
        return None
    n = np.asarray(n_pairs, dtype=float)
    if std is None:
        return 1.0 / np.sqrt(n)
    s = np.asarray(std, dtype=float)
    if pooled is None:
        pooled = math.sqrt(float(np.sum(n * s**2) / np.sum(n))) if n.size else 0.0
    floor = max(STD_FLOOR_FRACTION * pooled, STD_FLOOR_ABSOLUTE)
    return np.maximum(s, floor) / np.sqrt(n)


def fit_decay(distance, similarity, *, n_pairs=None, std=None, models=None, target="profile",
              level=CI_LEVEL, min_aic_gain: float = MIN_AIC_GAIN, maxfev: int = MAXFEV, max_distance=None,
              range_rule: str = "window", noise=None, gof_alpha: float = GOF_ALPHA,
              fit_tolerance: float = FIT_TOLERANCE) -> DecayFits:
    """Fit decay models to a similarity profile or to its upper envelope.

    Parameters
    ----------
    distance : array_like of shape (n_distances,)
        Distances |i - j| in positions (>= 0; any spacing, any order). The
        study pipeline passes distances >= 1.
    similarity : array_like of shape (n_distances,)
        Mean cosine similarity at each distance.
    n_pairs : array_like of shape (n_distances,), optional
        Number of position pairs behind each mean (>= 0); distances with fewer
        than 2 are dropped.
    std : array_like of shape (n_distances,), optional
        Standard deviation of the similarities at each distance. With
        ``n_pairs`` it gives the weights (standard error of the mean, with a
        floor: module docstring, "Weights") and the flatness test.
    models : str, DecayModel or iterable of them, optional
        Names from :data:`DECAY_MODELS` or your own :class:`DecayModel`
        objects (default: every built-in, in catalogue order).
    target : {"profile", "envelope"}
        Fit the profile itself, or its upper envelope (:func:`upper_envelope`)
        at the distances where the profile touches it.
    level : float
        Confidence level of the parameter and decay-length intervals, in (0, 1).
    min_aic_gain : float
        A model must lower the AIC by at least this much against a constant
        (default MIN_AIC_GAIN = 10), else ``no_better_than_constant``.
    maxfev : int
        Function evaluations allowed per curve_fit call (default MAXFEV = 20000).
    max_distance : float, optional
        Largest distance fitted (default: all; :func:`fit_range_end` gives the study's rule). The
        ``flat`` and ``rising`` checks still see every distance.
    range_rule : str
        How ``max_distance`` was chosen, recorded (``DecayFits.range_rule``).
    noise : array_like of shape (n_distances,), optional
        Standard error of each mean that accounts for the dependence between pairs (e.g.
        :func:`poslab.analysis.bootstrap.block_standard_errors`): turns the goodness-of-fit gate on
        (module docstring, "Goodness of fit"). All <= EXACT_NOISE: the profile is exact and the gate is
        the relative residual. Without it no fit is gated.
    gof_alpha, fit_tolerance : float
        Thresholds of the gate (GOF_ALPHA = 0.001, FIT_TOLERANCE = 0.1).

    Returns
    -------
    DecayFits
        One :class:`DecayFit` per model, in the order requested.

    Raises
    ------
    ValueError
        If the arrays are not 1-D of one shape, a finite distance or n_pairs is
        negative, a model name, target or level is invalid. Numerical trouble never
        raises: it becomes a status.

    Notes
    -----
    Points with NaN/inf in any given array or with n_pairs < 2 are dropped.
    Statuses, in the order they are checked: ``too_few_points`` (fewer than
    n_params + 2 points); ``flat`` (np.ptp(y) <= 1e-9 * max(1, max|y|), or,
    given std and n_pairs, reduced chi^2 of y about its weighted mean below
    1 + 3 * sqrt(2 / (N - 1)), with se = max(std, pooled, 1e-12) / sqrt(n_pairs)
    and pooled = sqrt(sum(n_pairs * std**2) / sum(n_pairs)), so that a std
    from two pairs cannot blow up the test); ``rising`` (Spearman rho > 0,
    p < 0.01, and the mean of the first tenth of the points below that of the
    last tenth: a decay followed by a long noisy tail is not rising); then per
    model: ``not_converged`` (maxfev reached), ``failed`` (any other error),
    ``not_identifiable`` (a standard error zero, not finite or larger than the
    parameter's bounded range, or a relative standard error above 1 for a
    positive scale parameter — amplitude, length, sigma, period, exponent,
    stretch — or for the decay length), ``at_bound`` (a parameter within 1e-6
    of its range's width from a bound; on a log scale for a range of positive
    values such as length, so that a range of 0.1 to 1e8 positions does not
    pin every length below 100), ``not_converged`` (the result equals
    the guess), ``not_identifiable`` (infinite decay length), ``out_of_range``
    (decay length outside the fitted distances: an extrapolation) and
    ``no_better_than_constant`` (AIC not at least ``min_aic_gain`` below that
    of a constant, Burnham & Anderson 2002). Fits use curve_fit with
    ``method="trf"``, bounds, ``x_scale="jac"`` and ``maxfev``.
    """
    if target not in ("profile", "envelope"):
        raise ValueError(f"target must be 'profile' or 'envelope', got {target!r}")
    if not (isinstance(level, (int, float)) and 0 < level < 1):
        raise ValueError(f"level must be a number in (0, 1), e.g. 0.95, got {level!r}")
    factor = None
    if noise is not None and np.ndim(noise) == 2:  # columns whose outer products sum to the noise covariance
        factor = np.nan_to_num(np.asarray(noise, dtype=float))
        if factor.shape[1] == 1:  # one column (a kernel's zeros): its square root of the square, in one array
            noise = np.square(factor[:, 0])
            np.sqrt(noise, out=noise)
        else:
            noise = np.sqrt(np.sum(factor**2, axis=1))
    inputs = (distance, similarity)
    d, y, n, s, e, index = _check_inputs(distance, similarity, n_pairs, std, noise)
    if factor is not None:
        factor = factor[index[0]:index[-1] + 1] if index.size and index[-1] - index[0] + 1 == index.size \
            and np.all(index[1:] > index[:-1]) else factor[index]
    chosen = _check_models(models)
    pooled = (math.sqrt(float(_weighted_sum_of_squares(n, s) / np.sum(n))) if n.size else 0.0) \
        if s is not None and n is not None else None  # of the whole profile (envelope points are a subset; bins keep Σ n·std²)
    shape = bin_points(_fit_bins(d.size), d, y, n, s) if d.size > MAX_FIT_POINTS else (d, y, n, s)
    gate = "none" if e is None else "exact" if (not e.size or float(np.max(e)) <= EXACT_NOISE) else "noise"
    if max_distance is not None:  # the fit range (the flat / rising checks above keep the whole profile)
        keep = d <= max_distance
        d, y = d[keep], y[keep]
        n, s, e, factor = (None if a is None else a[keep] for a in (n, s, e, factor))
    if target == "envelope" and d.size:  # touch points of the whole profile, then binned if many
        _, touch = upper_envelope(y)
        d, y = d[touch], y[touch]
        n, s, e, factor = (None if a is None else a[touch] for a in (n, s, e, factor))
    raw_d, bins = None, None
    if d.size > MAX_FIT_POINTS:
        raw_d, bins = d, _fit_bins(d.size)
        if factor is not None:  # a bin's mean is the pair-weighted mean of its distances' means: so is its noise
            w = np.ones_like(d) if n is None else n
            factor = np.add.reduceat(w[:, None] * factor, bins[:, 0], axis=0) / np.add.reduceat(w, bins[:, 0])[:, None]
            e = np.sqrt(np.sum(factor**2, axis=1))
        elif e is not None:  # neighbouring means are nearly perfectly correlated: a bin's error is their mean error
            e = bin_points(bins, d, e, n)[1]
        d, y, n, s = bin_points(bins, d, y, n, s)
    sigma = fit_weights(n, s, pooled=pooled)
    gof = _Gate(gate, e, gof_alpha, fit_tolerance, factor if gate == "noise" else None)
    # flat / rising are properties of the whole profile, whatever the target and fit range
    common = _shape_status(*shape) if shape[0].size >= 4 else ("", "")
    fits = []
    for model in chosen:
        need = len(model.param_names) + 2
        if common[0]:
            fits.append(_unfit(model, *common, d.size, target, level))
        elif d.size < need:
            message = (f"only {d.size} usable points (finite, n_pairs >= 2"
                       f"{', on the envelope' if target == 'envelope' else ''}"
                       f"{f', within the fit range up to {max_distance:g}' if max_distance is not None else ''}); "
                       f"the {model.name} model needs at least {need}")
            fits.append(_unfit(model, "too_few_points", message, d.size, target, level))
        else:
            fits.append(_fit_one(model, d, y, sigma, target, level, min_aic_gain, maxfev, gof))
    fits, c_hat, n_eff = _select(fits, d.size, None if gof.factor is None else gof.factor.shape[1])
    d, y, raw_d = (_owned(a, inputs) for a in (d, y, raw_d))
    return DecayFits(tuple(fits), target, d, y, sigma, raw_d, bins, range_rule, gate, c_hat, n_eff)


def fit_range_end(distance, similarity) -> tuple[float | None, str]:
    """The fit range's upper end by the stated rule: the first zero crossing of the profile, else the window.

    Parameters
    ----------
    distance, similarity : ndarray of shape (n_distances,)
        The profile from the first fitted distance on (positions, cosine similarity), increasing distances.

    Returns
    -------
    (max_distance, rule)
        The first distance where the mean profile is <= 0 and ``"first_zero_crossing"``; or (None, ``"window"``)
        when it stays above 0. Beyond its zero crossing a profile no longer decays towards a level (GPT-2's helix
        oscillates, the trained table's tail is noise), which no decay model describes. The first local minimum
        is not used: the exact profiles of RoPE and sinusoidal ripple (RoPE θ = 500000 has one at 34, 0.648)
        while following a log law over the whole window.
    """
    d = np.asarray(distance, dtype=float)
    y = np.asarray(similarity, dtype=float)
    below = np.flatnonzero(np.isfinite(y) & (y <= 0))
    if below.size:
        return float(d[below[0]]), "first_zero_crossing"
    return None, "window"


def autocorrelation_time(x) -> float:
    """Integrated autocorrelation time τ = 1 + 2 Σ_{t=1}^{W} ρ̂(t) of a series, with Sokal's automatic window.

    Parameters
    ----------
    x : array_like of shape (n,)
        The series (e.g. standardised residuals in order of distance).

    Returns
    -------
    float
        τ >= 1 (1: uncorrelated); the window W is the smallest with W >= 5 τ(W) (Sokal 1997, "Monte Carlo
        methods in statistical mechanics", §3; as emcee's ``integrated_time``), capped at n / 2. The variance of
        the mean of n such points is τ times that of n independent ones: n / τ is the effective number of points.
    """
    x = np.asarray(x, dtype=float)
    x = x[np.isfinite(x)]
    n = x.size
    if n < 4 or not np.any(x != x[0]):
        return 1.0
    z = x - x.mean()
    n_fft = scipy.fft.next_fast_len(2 * n, real=True)
    f = scipy.fft.rfft(z, n_fft)
    acf = scipy.fft.irfft(f * np.conj(f), n_fft)[:n]
    acf = acf / acf[0]
    taus = 2 * np.cumsum(acf) - 1
    windows = np.arange(n)
    ok = windows >= 5 * taus
    w = int(np.argmax(ok)) if ok.any() else n // 2
    return float(max(1.0, taus[min(w, n // 2)]))


@dataclass(frozen=True)
class _Gate:
    """The goodness-of-fit gate of one fit_decay call (module docstring, "Goodness of fit")."""

    test: str  # "noise", "exact" or "none"
    noise: np.ndarray | None
    alpha: float
    tolerance: float
    factor: np.ndarray | None = None  # (n_points, n_units): Σ = factor @ factor.T, the profile's noise covariance

    def misfit(self, d, y, resid, jac=None, w=None) -> tuple[float, float, float]:
        """(misfit, p-value, ratio): see the module docstring, "Goodness of fit"."""
        spread = float(np.ptp(y))
        if not spread > 0:
            return math.inf, math.nan, math.nan
        # the systematic misfit: residuals averaged over LOG_BINS bins equally spaced in ln(1 + d), so that the
        # ripple of a finite cosine sum (RoPE: 64 frequencies) averages out while a misfit at a few distances stays
        x = np.log1p(np.maximum(d, 0.0))
        edges = np.linspace(x[0], x[-1], LOG_BINS + 1)
        index = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, LOG_BINS - 1)
        counts = np.bincount(index, minlength=LOG_BINS)
        means = np.bincount(index, weights=resid, minlength=LOG_BINS)[counts > 0] / counts[counts > 0]
        misfit = float(np.max(np.abs(means)) / spread)
        if self.test != "noise":
            return misfit, math.nan, math.nan
        total = float(np.sum(resid**2))
        if self.factor is not None and jac is not None:
            # the residual of a true model is the noise minus its weighted projection on the curve's tangents
            bread = np.linalg.pinv(jac.T @ (w[:, None] * jac))
            a = self.factor - jac @ (bread @ (jac.T @ (w[:, None] * self.factor)))
            lam = np.clip(np.linalg.eigvalsh(a.T @ a), 0.0, None)
        else:  # independent noise of the given standard errors (the projection ignored: conservative)
            lam = self.noise**2
        mean, square = float(lam.sum()), float(np.sum(lam**2))
        if not mean > 0:
            return misfit, 0.0, math.inf
        g, h = square / mean, mean**2 / square  # Satterthwaite: Σ λ_j χ²_1 ≈ g χ²_h, same mean and variance
        return misfit, float(scipy.special.chdtrc(h, total / g)), total / mean  # the χ²_h survival function

    def fails(self, misfit, p_value) -> bool:
        if self.test == "none" or not misfit > self.tolerance:
            return False
        return self.test == "exact" or not p_value >= self.alpha

    def message(self, misfit, p_value, ratio, r2, dw) -> str:
        text = (f"the residuals, averaged over {LOG_BINS} bins of ln(1 + distance), reach {misfit:.3g} of the profile's "
                f"range over the fitted distances (tolerance {self.tolerance:g})")
        if self.test == "noise":
            text += (f", and their sum of squares is {ratio:.3g} times what the profile's noise (anchor blocks as "
                     f"clusters) leaves after a fit (p = {p_value:.2g} < {self.alpha:g})")
        else:
            text += " on an exact profile, which has no noise"
        return text + f"; r2 {r2:.3g}, Durbin-Watson {dw:.3g}: the model does not describe the profile"


def _select(fits, n_points, n_units=None):
    """QAICc, Akaike weights and the selected fit among the ok fits (module docstring, "Model selection")."""
    ok = [f for f in fits if f.status == "ok"]
    if not ok:
        return fits, math.nan, math.nan
    general = max(ok, key=lambda f: (len(f.params), -f.chi2))
    k_general = len(general.params)
    if n_units is not None and np.isfinite(general.design_effect):
        # Rao & Scott's first-order correction: the mean generalised design effect of the most general model
        c_hat, n_eff = general.design_effect, float(n_units)
    else:
        tau = min(autocorrelation_time(general.residuals), n_points / (max(len(f.params) for f in ok) + 3))
        # the weights are relative (standard errors of the mean with a floor, or none), so ĉ also carries their
        # scale: no floor at 1 (Burnham & Anderson's floor assumes absolute variances)
        c_hat = tau * general.chi2 / max(n_points - k_general, 1)
        n_eff = n_points / tau
    if not c_hat > 0:
        c_hat = float(np.finfo(float).tiny)
    qaicc = {}
    for f in ok:
        k = len(f.params) + 1  # + c_hat (Burnham & Anderson 2002, §2.5)
        qaicc[id(f)] = f.chi2 / c_hat + 2 * k + 2 * k * (k + 1) / max(n_eff - k - 1, 1.0)
    best = min(qaicc.values())
    raw = {i: math.exp(-(q - best) / 2) for i, q in qaicc.items()}
    total = sum(raw.values())
    chosen = min(ok, key=lambda f: qaicc[id(f)])
    fits = [replace(f, qaicc=qaicc[id(f)], akaike_weight=raw[id(f)] / total, selected=f is chosen)
            if id(f) in raw else f for f in fits]
    return fits, float(c_hat), float(n_eff)


def _fit_bins(size: int) -> np.ndarray:
    """[start, stop) of the fitted points of ``size`` > MAX_FIT_POINTS sorted distances: the first
    EXACT_FIT_POINTS alone, the rest in MAX_FIT_POINTS − EXACT_FIT_POINTS contiguous bins; shape (n_bins, 2)."""
    edges = np.concatenate([np.arange(EXACT_FIT_POINTS),
                            np.linspace(EXACT_FIT_POINTS, size, MAX_FIT_POINTS - EXACT_FIT_POINTS + 1).astype(int)])
    edges = np.unique(edges)
    return np.stack([edges[:-1], edges[1:]], axis=1)


def bin_points(bins, d, y, n=None, s=None):
    """Pair-count-weighted bin means of a profile (module docstring, "Long profiles").

    Parameters
    ----------
    bins : ndarray of int, shape (n_bins, 2)
        Contiguous [start, stop) index ranges covering the points in order.
    d, y : ndarray of shape (n_points,)
        Distances and similarities.
    n, s : ndarray of shape (n_points,), optional
        Pairs and standard deviations (without ``n``, every point weighs 1).

    Returns
    -------
    d, y, n, s : ndarray of shape (n_bins,) (n, s None when not given)
        Weighted mean distance and similarity, summed pairs, pooled within-distance std.
    """
    starts = bins[:, 0]
    w = np.ones_like(y, dtype=float) if n is None else n
    total = np.add.reduceat(w, starts)
    w = np.asarray(w, dtype=float)
    product = np.empty(np.shape(y))  # one temporary for the three weighted sums (a long profile's are 8 MiB each)
    d_bin = np.add.reduceat(np.multiply(w, d, out=product), starts) / total
    y_bin = np.add.reduceat(np.multiply(w, y, out=product), starts) / total
    s_bin = None if s is None else np.sqrt(np.add.reduceat(_weighted_squares(w, s, out=product), starts) / total)
    return d_bin, y_bin, (None if n is None else total), s_bin


def _weighted_squares(w, s, out=None):
    """w · s² elementwise (the operations of ``w * s**2``, the same numbers), into ``out`` if given."""
    out = np.square(s, out=out)
    return np.multiply(w, out, out=out)


def _weighted_sum_of_squares(w, s) -> float:
    """Σ w · s² (the numbers of ``np.sum(w * s**2)``) with one temporary array instead of two."""
    return np.sum(_weighted_squares(w, s))


def _check_inputs(distance, similarity, n_pairs, std, noise=None):
    """The usable points (finite everywhere, n_pairs >= 2), sorted by distance, and their indices into the input.

    At 10^6 distances every full-size temporary costs (a page-faulted 8 MiB): the checks run without copies, and
    usable points that are one contiguous run (a study's profile: every distance but the last ones, with fewer
    than 2 pairs) are taken as views of the inputs; :func:`fit_decay` never returns those views
    (:func:`_owned`)."""
    given = {"distance": distance, "similarity": similarity, "n_pairs": n_pairs, "std": std, "noise": noise}
    arrays = {k: np.asarray(v, dtype=float) for k, v in given.items() if v is not None}
    shapes = {k: a.shape for k, a in arrays.items()}
    if arrays["distance"].ndim != 1 or len(set(shapes.values())) > 1:
        raise ValueError("distance, similarity, n_pairs, std and noise must be 1-D arrays of one shape, got "
                         + ", ".join(f"{k} {v}" for k, v in shapes.items()))
    keep = np.ones(arrays["distance"].shape, dtype=bool)
    for a in arrays.values():
        keep &= np.isfinite(a)
    if "n_pairs" in arrays:
        n = arrays["n_pairs"]
        if np.any((n < 0) & keep):
            raise ValueError(f"n_pairs must be >= 0 (the number of position pairs behind each mean), got minimum "
                             f"{n[keep].min():g}; pass the profile's n_pairs")
        keep &= n >= 2
    if np.any((arrays["distance"] < 0) & keep):
        raise ValueError(f"distance must be >= 0 (|i - j| in positions), got minimum "
                         f"{arrays['distance'][keep].min()}")
    index = np.flatnonzero(keep)
    if index.size and index[-1] - index[0] + 1 == index.size:  # one contiguous run: views, no copy
        if index.size < keep.size:
            arrays = {k: a[index[0]:index[-1] + 1] for k, a in arrays.items()}
    else:
        arrays = {k: a[index] for k, a in arrays.items()}
    d = arrays["distance"]
    if not np.all(d[1:] >= d[:-1]):  # the study's profiles come sorted: their stable sort would be the identity
        order = np.argsort(d, kind="stable")
        arrays = {k: a[order] for k, a in arrays.items()}
        index = index[order]
    d, y, n, s, e = (arrays.get(k) for k in given)
    return d, y, n, s, e, index


def _owned(array, inputs):
    """``array``, or a copy of it when it may share memory with one of the ``inputs`` (the caller's arrays are
    never the ones returned)."""
    if array is not None and any(x is not None and np.may_share_memory(array, x) for x in inputs):
        return array.copy()
    return array


def _average_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks 1..n of ``x``, ties given the mean of their ranks (scipy.stats.rankdata's ``average``)."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    first = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1], True])  # where each run of equal values starts, and n
    mean_rank = (first[:-1] + first[1:] + 1) / 2  # runs [a, b) hold ranks a + 1 .. b: their mean
    ranks = np.empty(x.size)
    ranks[order] = np.repeat(mean_rank, np.diff(first))
    return ranks


def _spearman(x, y) -> tuple[float, float]:
    """Spearman's rank correlation of two 1-D samples and its two-sided p-value from the t approximation with
    n − 2 degrees of freedom: scipy.stats.spearmanr's numbers (the same operations), without importing
    scipy.stats (0.4 s at start-up). NaN and NaN for fewer than 2 points or a constant sample."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.size <= 1 or (x[0] == x).all() or (y[0] == y).all():
        return math.nan, math.nan
    rs = np.corrcoef(np.column_stack((_average_ranks(x), _average_ranks(y))), rowvar=False)[1, 0]
    dof = x.size - 2
    with np.errstate(divide="ignore"):
        t = rs * np.sqrt((dof / ((rs + 1.0) * (1.0 - rs))).clip(0))
    return float(rs), float(2 * scipy.special.stdtr(dof, -np.abs(t)))


def _check_models(models) -> list[DecayModel]:
    """The models asked for, each once: names from :data:`DECAY_MODELS` or :class:`DecayModel` objects."""
    given = list(DECAY_MODELS) if models is None else [models] if isinstance(models, (str, DecayModel)) \
        else list(models)
    unknown = [m for m in given if not isinstance(m, DecayModel) and m not in DECAY_MODELS]
    if unknown or not given:
        raise ValueError(f"unknown decay model(s) {unknown}; choose from {list(DECAY_MODELS)} or pass DecayModel objects")
    chosen = [m if isinstance(m, DecayModel) else DECAY_MODELS[m] for m in given]
    first: dict[str, DecayModel] = {}
    for m in chosen:
        first.setdefault(m.name, m)
    return list(first.values())


def _shape_status(d, y, n, s):
    """("flat" | "rising", message) if the profile has no decay to fit, else ("", "")."""
    if y.size < 2:
        return "", ""
    spread = float(np.ptp(y))
    if spread <= 1e-9 * max(1.0, float(np.abs(y).max())):
        return "flat", f"the profile is constant (spread {spread:.3g}): there is no decay to fit"
    if n is not None and s is not None:
        # floor each std at the pooled per-pair std: a std from a few pairs is too noisy
        # (two give a Cauchy-like chi^2 term) to test against
        pooled = math.sqrt(np.sum(n * s**2) / np.sum(n))
        se = np.maximum(s, max(pooled, 1e-12)) / np.sqrt(n)
        mean = np.sum(y / se**2) / np.sum(1 / se**2)
        chi2 = float(np.sum(((y - mean) / se) ** 2) / (y.size - 1))
        limit = 1 + 3 * math.sqrt(2 / (y.size - 1))
        if chi2 < limit:
            return "flat", (f"a constant ({mean:.3g}) explains the profile within its standard errors "
                            f"(reduced chi^2 {chi2:.3g} < {limit:.3g}): there is no decay to fit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho, p = _spearman(d, y)
    tenth = max(1, y.size // 10)
    if rho > 0 and p < 0.01 and y[:tenth].mean() < y[-tenth:].mean():
        return "rising", (f"the profile rises with distance (Spearman rho {rho:.3f}, p {p:.2g}; the last tenth "
                          "lies above the first): decay models do not apply")
    return "", ""


def _unfit(model, status, message, n_points, target="profile", level=CI_LEVEL):
    nan = {p: math.nan for p in model.param_names}
    return DecayFit(model.name, status, message, nan, dict(nan), math.nan, math.nan, math.nan,
                    math.nan, math.nan, int(n_points), target=target,
                    ci={p: (math.nan, math.nan) for p in model.param_names}, ci_level=level, decay_model=model)


def _decay_length_se(model, popt, pcov, start=0.0) -> float:
    """Delta-method standard error of the decay length measured from ``start`` (central differences)."""
    grad = np.zeros(popt.size)
    for j in range(popt.size):
        h = 1e-6 * max(abs(popt[j]), 1e-8)
        up, down = popt.copy(), popt.copy()
        up[j] += h
        down[j] -= h
        grad[j] = (model.decay_length(up, start) - model.decay_length(down, start)) / (2 * h)
    var = float(grad @ pcov @ grad)
    return math.sqrt(var) if var >= 0 else math.nan


def _on_bound(value, lower, upper) -> bool:
    """Within 1e-6 of the range from a bound: on a log scale for a positive range (scales such as
    length: a range of 0.1 to 1e8 positions would otherwise pin every value below ~100), else linearly."""
    if lower > 0:
        width = math.log(upper / lower)
        return min(math.log(value / lower), math.log(upper / value)) <= 1e-6 * width
    return min(value - lower, upper - value) <= 1e-6 * (upper - lower)


def _fit_one(model, d, y, sigma, target="profile", level=CI_LEVEL, min_aic_gain=MIN_AIC_GAIN, maxfev=MAXFEV,
             gate=None):
    """Fit one model; every numerical failure becomes a status, never an exception."""
    gate = gate or _Gate("none", None, GOF_ALPHA, FIT_TOLERANCE)

    def unfit(status, message):
        return _unfit(model, status, message, d.size, target, level)

    if model.scale_free and d[0] <= 0:
        return unfit("failed", f"the {model.name} model needs distances > 0 (ln d); the fit starts at {d[0]:g}: "
                               "set fit_min_distance >= 1")
    start = float(d[0])
    try:
        lower, upper = (np.asarray(b, dtype=float) for b in model.bounds(d, y))
        margin = 1e-9 * (upper - lower)
        p0 = np.clip(np.asarray(model.guess(d, y), dtype=float), lower + margin, upper - margin)
        with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
            warnings.simplefilter("always")
            popt, pcov = scipy.optimize.curve_fit(
                model.function, d, y, p0=p0, sigma=sigma,
                absolute_sigma=False, bounds=(lower, upper), method="trf", x_scale="jac", maxfev=maxfev)
            resid = y - model.function(d, *popt)
            standard = resid if sigma is None else resid / sigma
            tau = autocorrelation_time(standard) if np.isfinite(standard).all() else 1.0
            design_effect, jac = math.nan, None
            w = np.ones(d.size) if sigma is None else 1 / sigma**2
            if gate.test == "noise":
                jac = _jacobian(model, d, popt)
            if gate.factor is not None:  # sandwich covariance with the anchor blocks as clusters
                pcov, design_effect = _sandwich(jac, w, gate.factor)
                tau = float(gate.factor.shape[0]) / gate.factor.shape[1]  # dof of the t quantile: the units
            else:
                pcov = pcov * tau  # dependent residuals: the variance of smooth functionals grows by τ
            stderr = np.sqrt(np.diag(pcov))
            length = model.decay_length(popt, start)
            length_se = _decay_length_se(model, popt, pcov, start) if np.isfinite(length) else math.nan
    except RuntimeError as exc:
        return unfit("not_converged", f"curve_fit did not converge within {maxfev} evaluations: {exc}")
    except Exception as exc:  # noqa: BLE001 - a failed fit is a row, not a crash
        return unfit("failed", f"fit failed with {type(exc).__name__}: {exc}")
    bad = [p for p, e, lo, hi in zip(model.param_names, stderr, lower, upper) if not 0 < e <= hi - lo]
    vague = [f"{p.name} ({e / abs(v):.3g})" for p, v, e in zip(model.parameters, popt, stderr)
             if p.scale and not e <= abs(v)]
    if np.isfinite(length) and not length_se <= length:
        vague.append(f"decay length ({length_se / length:.3g})")
    r2 = float(1 - np.sum(resid**2) / np.sum((y - y.mean()) ** 2))
    dw = float(np.sum(np.diff(resid) ** 2) / np.sum(resid**2)) if np.any(resid) else math.nan
    misfit, p_value, ratio = gate.misfit(d, y, resid, jac, w) if gate.test != "none" else (math.nan,) * 3
    if any(issubclass(w.category, scipy.optimize.OptimizeWarning) for w in caught) or bad:
        why = f"the standard error of {', '.join(bad)} is" if bad else "the covariance is"
        problem = "not_identifiable", (f"{why} zero, not finite or wider than the allowed range: "
                                       "the data do not determine the parameters")
    elif pinned := [f"{p} = {v:.6g}" for p, v, lo, hi in zip(model.param_names, popt, lower, upper)
                    if _on_bound(v, lo, hi)]:
        problem = "at_bound", (f"{', '.join(pinned)} sits on its bound: the optimum lies outside what the model "
                               "allows, so its values (and decay length) describe the bound, not the data")
    elif np.allclose(popt, p0, rtol=1e-10, atol=0):
        problem = "not_converged", "the optimiser returned the initial guess unchanged"
    elif not np.isfinite(resid).all() or not (model.scale_free or np.isfinite(length)):
        problem = "not_identifiable", "the fitted curve does not decay within a finite distance"
    elif vague:
        problem = "not_identifiable", (f"relative standard error above 1 for {', '.join(vague)}: "
                                       "the data do not determine it")
    elif gate.fails(misfit, p_value):
        problem = "poor_fit", gate.message(misfit, p_value, ratio, r2, dw)
    elif not model.scale_free and not start + length <= d[-1]:
        problem = "out_of_range", (f"the curve does not fall to 1/e of its height at distance {start:.4g} within the "
                                   f"fitted distances [{start:.4g}, {d[-1]:.4g}] (it would at {start + length:.4g}): "
                                   "the decay length would be an extrapolation")
    else:
        problem = None
    if problem:
        return unfit(*problem)
    k, n_pts = len(popt), d.size
    w = np.ones_like(y) if sigma is None else (1 / sigma**2) / np.mean(1 / sigma**2)
    aic, bic = _information_criteria(float(np.sum(w * resid**2)), n_pts, k)
    aic_constant, _ = _information_criteria(float(np.sum(w * (y - np.sum(w * y) / np.sum(w)) ** 2)), n_pts, 1)
    if aic > aic_constant - min_aic_gain:
        return unfit("no_better_than_constant",
                     f"AIC {aic:.4g} is not at least {min_aic_gain:g} below that of a constant ({aic_constant:.4g}): "
                     "the decay is not supported over no decay")
    t = float(scipy.special.stdtrit(max(n_pts / tau - k, 1), (1 + level) / 2))  # Student's t quantile
    has_length = np.isfinite(length)
    return DecayFit(
        model.name, "ok", "", dict(zip(model.param_names, map(float, popt))),
        dict(zip(model.param_names, map(float, stderr))),
        r2=r2,
        rmse=float(np.sqrt(np.mean(resid**2))),
        aic=aic, bic=bic,
        decay_length=float(length) if has_length else math.nan, n_points=int(n_pts), target=target,
        aicc=aic + 2 * k * (k + 1) / (n_pts - k - 1) if n_pts > k + 1 else math.nan,
        ci={p: (float(v - t * e), float(v + t * e)) for p, v, e in zip(model.param_names, popt, stderr)},
        decay_length_se=float(length_se) if has_length else math.nan,
        decay_length_ci=(float(length - t * length_se), float(length + t * length_se)) if has_length
        else (math.nan, math.nan),
        ci_level=float(level), decay_model=model, misfit=misfit, gof_p_value=p_value, durbin_watson=dw,
        chi2=float(np.sum(standard**2)), residuals=standard, design_effect=float(design_effect))


def _jacobian(model, d, popt) -> np.ndarray:
    """∂f/∂p at ``popt`` by central differences, shape (n_points, n_params)."""
    jac = np.empty((d.size, popt.size))
    for j in range(popt.size):
        h = 1e-6 * max(abs(popt[j]), 1e-8)
        up, down = popt.copy(), popt.copy()
        up[j] += h
        down[j] -= h
        jac[:, j] = (model.function(d, *up) - model.function(d, *down)) / (2 * h)
    return jac


def _sandwich(jac, w, factor):
    """Cluster-robust covariance of the parameters and the mean generalised design effect.

    With J the Jacobian of the curve at the estimate, W = diag(w) the fit's weights (1 / sigma²) and
    Σ = F Fᵀ the profile's noise covariance (F = ``factor``, one column per anchor block):
    cov = A⁻¹ (Jᵀ W F)(Jᵀ W F)ᵀ A⁻¹, A = Jᵀ W J (White 1980; Liang & Zeger 1986, blocks as clusters), and
    δ̄ = tr(A⁻¹ Jᵀ W Σ W J) / p, the mean eigenvalue of the design-effect matrix (Rao & Scott 1984): how much
    larger the sampling variance is than the weights assume, on average over the parameters."""
    bread = np.linalg.pinv(jac.T @ (w[:, None] * jac))
    score = jac.T @ (w[:, None] * factor)  # (p, n_units)
    meat = score @ score.T
    return bread @ meat @ bread, float(np.trace(bread @ meat) / jac.shape[1])
