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
Every model reports one model-independent number, ``decay_length`` (in
positions): the distance L at which the fitted curve has covered 1 - 1/e of
the way from its value at distance 0 to its asymptote, i.e.
``f(L) - asymptote = (f(0) - asymptote) / e``, the first such distance. For the
monotone models this has a closed form; for ``damped_cosine`` it is the first
root of exp(-d / length) * cos(2 pi d / period) = 1/e, which lies below
min(length, period / 4) (so an undamped oscillation still decorrelates at its
first quarter period, and encodings compare on the same footing).

Goodness of fit
---------------
Over the N points used, with residuals r = y - f(d), k model parameters and
weights w = n_pairs / mean(n_pairs) (all 1 without ``n_pairs``)::

    r2   = 1 - sum(r**2) / sum((y - mean(y))**2)      (unweighted)
    rmse = sqrt(mean(r**2))                            (unweighted)
    aic  = N * ln(RSS_w / N) + 2 * k,  RSS_w = sum(w * r**2)
    bic  = N * ln(RSS_w / N) + k * ln(N)
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from typing import Callable

import numpy as np
import pandas as pd
from scipy import fft, optimize, stats

__all__ = ["DecayModel", "DecayFit", "DecayFits", "DECAY_MODELS", "fit_decay"]

MAXFEV = 20_000  # function evaluations allowed per curve_fit call
#: A model must lower the AIC by this much against a constant (no decay) to be reported;
#: ΔAIC > 10 means "essentially no support" for the worse model (Burnham & Anderson,
#: Model Selection and Multimodel Inference, 2nd ed., 2002, §2.6).
MIN_AIC_GAIN = 10.0


def _information_criteria(rss_w: float, n_points: int, k: int) -> tuple[float, float]:
    """(AIC, BIC) of a least-squares fit with weighted residual sum ``rss_w`` and ``k`` parameters."""
    log_term = n_points * math.log(max(rss_w / n_points, np.finfo(float).tiny))
    return log_term + 2 * k, log_term + k * math.log(n_points)


@dataclass(frozen=True)
class DecayModel:
    """A named decay function with parameter bounds and a data-driven guess.

    ``function(d, *params)`` evaluates the curve at distances ``d`` (positions,
    any shape); ``param_names`` gives the parameter order and the table columns
    ``<name>`` / ``<name>_se``; ``formula`` is the human-readable curve in ``d``.
    ``guess(d, y)`` and ``bounds(d, y)`` take sorted distances and similarities
    of shape (n_points,) and return ``p0`` and ``(lower, upper)``, arrays of
    shape (n_params,). ``decay_length(params)`` is the closed-form decay length
    in positions (see the module docstring).
    """

    name: str
    param_names: tuple[str, ...]
    formula: str
    function: Callable[..., np.ndarray]
    guess: Callable[[np.ndarray, np.ndarray], np.ndarray]
    bounds: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
    decay_length: Callable[[np.ndarray], float]


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
    k = int(np.argmax(np.abs(fft.rfft(z))[1:])) + 1
    return d.size * step / k


def _guess(names):
    """Guess maker for parameters ``names``: the shared :func:`_start` values,
    sigma = L / sqrt(2), exponent = 1 / ln(1 + L), stretch = 1 and the period of
    the dominant rfft frequency of y - asymptote (each gives decay length L)."""

    def guess(d, y):
        asymptote, amplitude, length = _start(d, y)
        rule = {"amplitude": amplitude, "asymptote": asymptote, "length": length, "sigma": length / math.sqrt(2),
                "exponent": 1 / math.log1p(length), "stretch": 1.0}
        if "period" in names:
            rule["period"] = _dominant_period(d, y - asymptote)
        return np.array([rule[p] for p in names], dtype=float)

    return guess


def _bounds(names):
    """Bounds maker for parameters ``names``; cosine similarity lies in [-1, 1]."""

    def bounds(d, y):
        spacing, span = _scales(d)
        length = (spacing / 10, 100 * span)
        rule = {"amplitude": (0.0, 2.0), "asymptote": (-1.0, 1.0), "length": length, "sigma": length,
                "exponent": (1 / math.log1p(100 * span), 20.0), "stretch": (1e-2, 2.0),
                "period": (2 * spacing, 2 * span)}
        lower, upper = np.array([rule[p] for p in names], dtype=float).T
        return lower, upper

    return bounds


def _damped_cosine_decay_length(p) -> float:
    """First d > 0 with exp(-d / length) * cos(2 pi d / period) = 1/e.

    The product falls monotonically on [0, min(length, period / 4)] from 1 to
    at most 1/e, so the root is bracketed there and unique."""
    _, length, period, _ = (float(v) for v in p)
    upper = min(length, period / 4)

    def excess(d):
        return math.exp(-d / length) * math.cos(2 * math.pi * d / period) - 1 / math.e

    return upper if excess(upper) >= 0 else float(optimize.brentq(excess, 0.0, upper, xtol=1e-12 * upper))


def _model(name, params, formula, function, decay_length):
    return DecayModel(name, params, formula, function, _guess(params), _bounds(params), decay_length)


DECAY_MODELS: dict[str, DecayModel] = {m.name: m for m in (
    _model("exponential", ("amplitude", "length", "asymptote"), "amplitude * exp(-d / length) + asymptote",
           _exponential, lambda p: float(p[1])),
    _model("gaussian", ("amplitude", "sigma", "asymptote"), "amplitude * exp(-d**2 / (2 * sigma**2)) + asymptote",
           _gaussian, lambda p: float(p[1] * math.sqrt(2))),
    _model("power_law", ("amplitude", "exponent", "asymptote"), "amplitude * (1 + d)**(-exponent) + asymptote",
           _power_law, lambda p: float(math.expm1(1 / p[1]))),
    _model("stretched_exponential", ("amplitude", "length", "stretch", "asymptote"),
           "amplitude * exp(-(d / length)**stretch) + asymptote",
           _stretched_exponential, lambda p: float(p[1])),
    _model("damped_cosine", ("amplitude", "length", "period", "asymptote"),
           "amplitude * exp(-d / length) * cos(2 * pi * d / period) + asymptote",
           _damped_cosine, _damped_cosine_decay_length),
)}
"""Built-in decay models by name. Bounds: amplitude in [0, 2] (decay from above), asymptote in
[-1, 1], length and sigma in [spacing / 10, 100 * span], exponent in [1 / ln(1 + 100 * span), 20]
(decay length at most 100 * span, as for length), stretch in [0.01, 2], period in
[2 * spacing, 2 * span] (spacing, span: smallest step and extent of the distances, in
positions). ``damped_cosine`` has zero phase (cos = 1 at d = 0)."""


@dataclass(frozen=True)
class DecayFit:
    """Summary of one model fitted to one profile.

    ``status`` is ``"ok"`` or says why there are no numbers: ``"too_few_points"``,
    ``"flat"``, ``"rising"``, ``"not_converged"``, ``"not_identifiable"``,
    ``"at_bound"`` (a parameter pinned on its bound), ``"out_of_range"`` (decay
    length outside the fitted distances), ``"no_better_than_constant"`` or
    ``"failed"``; ``message`` explains it ("" when ok). Unless ok, ``params``,
    ``stderr``, goodness of fit and ``decay_length`` (positions) are NaN.
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


@dataclass(frozen=True)
class DecayFits:
    """All model fits of one profile; the ok fit with the lowest AIC is selected."""

    fits: tuple[DecayFit, ...]

    @property
    def selected(self) -> DecayFit | None:
        """The selected fit, or None if no fit has status ``"ok"``."""
        return next((f for f in self.fits if f.selected), None)

    def predict(self, distance) -> np.ndarray:
        """Selected model's curve at ``distance`` (positions, any shape); all NaN if none."""
        d = np.asarray(distance, dtype=float)
        best = self.selected
        if best is None:
            return np.full(d.shape, np.nan)
        model = DECAY_MODELS[best.model]
        with np.errstate(all="ignore"):
            return np.asarray(model.function(d, *(best.params[p] for p in model.param_names)), float)

    def to_frame(self) -> pd.DataFrame:
        """One row per model: model, status, message, ``<param>`` and ``<param>_se``
        for the union of parameter names (first-seen order; NaN where a model lacks
        one), r2, rmse, aic, bic, decay_length (positions), n_points, selected."""
        names = list(dict.fromkeys(p for f in self.fits for p in f.params))
        tail = ["r2", "rmse", "aic", "bic", "decay_length", "n_points", "selected"]
        columns = ["model", "status", "message", *(c for p in names for c in (p, f"{p}_se")), *tail]
        rows = []
        for f in self.fits:
            row = {"model": f.model, "status": f.status, "message": f.message}
            for p in names:
                row[p], row[f"{p}_se"] = f.params.get(p, np.nan), f.stderr.get(p, np.nan)
            rows.append(row | {c: getattr(f, c) for c in tail})
        return pd.DataFrame(rows, columns=columns)


def fit_decay(distance, similarity, *, n_pairs=None, std=None, models=None) -> DecayFits:
    """Fit decay models to a similarity profile.

    Parameters
    ----------
    distance : array_like of shape (n_distances,)
        Distances |i - j| in positions (>= 0; any spacing, any order). The
        study pipeline passes distances >= 1.
    similarity : array_like of shape (n_distances,)
        Mean cosine similarity at each distance.
    n_pairs : array_like of shape (n_distances,), optional
        Number of position pairs behind each mean. Fits are weighted with
        relative sigma = 1 / sqrt(n_pairs) (``absolute_sigma=False``).
    std : array_like of shape (n_distances,), optional
        Standard deviation of the similarities at each distance; used only,
        together with ``n_pairs``, by the flatness test.
    models : str or iterable of str, optional
        Names from :data:`DECAY_MODELS` (default: all, in registry order).

    Returns
    -------
    DecayFits
        One :class:`DecayFit` per model, in the order requested.

    Raises
    ------
    ValueError
        If the arrays are not 1-D of one shape, a finite distance is negative,
        or a model name is unknown. Numerical trouble never raises: it
        becomes a status.

    Notes
    -----
    Points with NaN/inf in any given array or with n_pairs < 1 are dropped.
    Statuses, in the order they are checked: ``too_few_points`` (fewer than
    n_params + 2 points); ``flat`` (np.ptp(y) <= 1e-9 * max(1, max|y|), or,
    given std and n_pairs, reduced chi^2 of y about its weighted mean below
    1 + 3 * sqrt(2 / (N - 1)), with se = max(std, pooled, 1e-12) / sqrt(n_pairs)
    and pooled = sqrt(sum(n_pairs * std**2) / sum(n_pairs)) over points with
    n_pairs >= 2, so that a std from one or two pairs cannot blow up the test);
    ``rising`` (Spearman rho > 0, p < 0.01); then per model: ``not_converged``
    (maxfev reached), ``failed`` (any other error), ``not_identifiable`` (a
    standard error zero, not finite or larger than the parameter's bounded
    range), ``at_bound`` (a parameter within 1e-6 of its range's width from a
    bound), ``not_converged`` (the result equals the guess),
    ``not_identifiable`` (infinite decay length), ``out_of_range`` (decay
    length outside the fitted distances: an extrapolation) and
    ``no_better_than_constant`` (AIC not at least MIN_AIC_GAIN = 10 below that
    of a constant, Burnham & Anderson 2002). Fits use curve_fit with
    ``method="trf"``, bounds, ``x_scale="jac"`` and ``maxfev=MAXFEV``.
    """
    d, y, n, s = _check_inputs(distance, similarity, n_pairs, std)
    names = _check_models(models)
    common = None  # (status, message) shared by all models, computed once
    fits = []
    for name in names:
        model = DECAY_MODELS[name]
        need = len(model.param_names) + 2
        if d.size < need:
            message = (f"only {d.size} usable points (finite, n_pairs >= 1); "
                       f"the {name} model needs at least {need}")
            fits.append(_unfit(model, "too_few_points", message, d.size))
            continue
        if common is None:
            common = _shape_status(d, y, n, s)
        fits.append(_unfit(model, *common, d.size) if common[0] else _fit_one(model, d, y, n))
    best = min((f for f in fits if f.status == "ok"), key=lambda f: f.aic, default=None)
    return DecayFits(tuple(replace(f, selected=True) if f is best else f for f in fits))


def _check_inputs(distance, similarity, n_pairs, std):
    given = {"distance": distance, "similarity": similarity, "n_pairs": n_pairs, "std": std}
    arrays = {k: np.asarray(v, dtype=float) for k, v in given.items() if v is not None}
    shapes = {k: a.shape for k, a in arrays.items()}
    if arrays["distance"].ndim != 1 or len(set(shapes.values())) > 1:
        raise ValueError("distance, similarity, n_pairs and std must be 1-D arrays of one shape, got "
                         + ", ".join(f"{k} {v}" for k, v in shapes.items()))
    keep = np.logical_and.reduce([np.isfinite(a) for a in arrays.values()])
    if "n_pairs" in arrays:
        keep &= arrays["n_pairs"] >= 1
    if np.any(arrays["distance"][keep] < 0):
        raise ValueError(f"distance must be >= 0 (|i - j| in positions), got minimum "
                         f"{arrays['distance'][keep].min()}")
    order = np.argsort(arrays["distance"][keep], kind="stable")
    d, y, n, s = (arrays[k][keep][order] if k in arrays else None for k in given)
    return d, y, n, s


def _check_models(models):
    names = list(DECAY_MODELS) if models is None else [models] if isinstance(models, str) else list(models)
    unknown = [m for m in names if m not in DECAY_MODELS]
    if unknown or not names:
        raise ValueError(f"unknown decay model(s) {unknown}; choose from {list(DECAY_MODELS)}")
    return list(dict.fromkeys(names))


def _shape_status(d, y, n, s):
    """("flat" | "rising", message) if the profile has no decay to fit, else ("", "")."""
    spread = float(np.ptp(y))
    if spread <= 1e-9 * max(1.0, float(np.abs(y).max())):
        return "flat", f"the profile is constant (spread {spread:.3g}): there is no decay to fit"
    if n is not None and s is not None:
        # floor each std at the pooled per-pair std: a std from a few pairs is too noisy
        # (one pair gives 0, two give a Cauchy-like chi^2 term) to test against
        several = n >= 2
        pooled = math.sqrt(np.sum(n[several] * s[several] ** 2) / np.sum(n[several])) if several.any() else 0
        se = np.maximum(s, max(pooled, 1e-12)) / np.sqrt(n)
        mean = np.sum(y / se**2) / np.sum(1 / se**2)
        chi2 = float(np.sum(((y - mean) / se) ** 2) / (y.size - 1))
        limit = 1 + 3 * math.sqrt(2 / (y.size - 1))
        if chi2 < limit:
            return "flat", (f"a constant ({mean:.3g}) explains the profile within its standard errors "
                            f"(reduced chi^2 {chi2:.3g} < {limit:.3g}): there is no decay to fit")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho, p = stats.spearmanr(d, y)
    if rho > 0 and p < 0.01:
        return "rising", (f"the profile rises with distance (Spearman rho {rho:.3f}, p {p:.2g}): "
                          "decay models do not apply")
    return "", ""


def _unfit(model, status, message, n_points):
    nan = {p: math.nan for p in model.param_names}
    return DecayFit(model.name, status, message, nan, dict(nan), math.nan, math.nan, math.nan,
                    math.nan, math.nan, int(n_points))


def _fit_one(model, d, y, n):
    """Fit one model; every numerical failure becomes a status, never an exception."""
    try:
        lower, upper = (np.asarray(b, dtype=float) for b in model.bounds(d, y))
        margin = 1e-9 * (upper - lower)
        p0 = np.clip(np.asarray(model.guess(d, y), dtype=float), lower + margin, upper - margin)
        with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
            warnings.simplefilter("always")
            popt, pcov = optimize.curve_fit(
                model.function, d, y, p0=p0, sigma=None if n is None else 1 / np.sqrt(n),
                absolute_sigma=False, bounds=(lower, upper), method="trf", x_scale="jac", maxfev=MAXFEV)
            stderr = np.sqrt(np.diag(pcov))
            resid = y - model.function(d, *popt)
            length = model.decay_length(popt)
    except RuntimeError as exc:
        message = f"curve_fit did not converge within {MAXFEV} evaluations: {exc}"
        return _unfit(model, "not_converged", message, d.size)
    except Exception as exc:  # noqa: BLE001 - a failed fit is a row, not a crash
        return _unfit(model, "failed", f"fit failed with {type(exc).__name__}: {exc}", d.size)
    bad = [p for p, e, lo, hi in zip(model.param_names, stderr, lower, upper) if not 0 < e <= hi - lo]
    if any(issubclass(w.category, optimize.OptimizeWarning) for w in caught) or bad:
        why = f"the standard error of {', '.join(bad)} is" if bad else "the covariance is"
        problem = "not_identifiable", (f"{why} zero, not finite or wider than the allowed range: "
                                       "the data do not determine the parameters")
    elif pinned := [f"{p} = {v:.6g}" for p, v, lo, hi in zip(model.param_names, popt, lower, upper)
                    if min(v - lo, hi - v) <= 1e-6 * (hi - lo)]:
        problem = "at_bound", (f"{', '.join(pinned)} sits on its bound: the optimum lies outside what the model "
                               "allows, so its values (and decay length) describe the bound, not the data")
    elif np.allclose(popt, p0, rtol=1e-10, atol=0):
        problem = "not_converged", "the optimiser returned the initial guess unchanged"
    elif not (np.isfinite(length) and np.isfinite(resid).all()):
        problem = "not_identifiable", "the fitted curve does not decay within a finite distance"
    elif not d[0] <= length <= d[-1]:
        problem = "out_of_range", (f"the decay length {length:.4g} lies outside the fitted distances "
                                   f"[{d[0]:.4g}, {d[-1]:.4g}]: it would be an extrapolation")
    else:
        problem = None
    if problem:
        return _unfit(model, *problem, d.size)
    k, n_pts = len(popt), d.size
    w = np.ones_like(y) if n is None else n / n.mean()
    aic, bic = _information_criteria(float(np.sum(w * resid**2)), n_pts, k)
    aic_constant, _ = _information_criteria(float(np.sum(w * (y - np.sum(w * y) / np.sum(w)) ** 2)), n_pts, 1)
    if aic > aic_constant - MIN_AIC_GAIN:
        message = (f"AIC {aic:.4g} is not at least {MIN_AIC_GAIN:g} below that of a constant ({aic_constant:.4g}): "
                   "the decay is not supported over no decay")
        return _unfit(model, "no_better_than_constant", message, d.size)
    return DecayFit(
        model.name, "ok", "", dict(zip(model.param_names, map(float, popt))),
        dict(zip(model.param_names, map(float, stderr))),
        r2=float(1 - np.sum(resid**2) / np.sum((y - y.mean()) ** 2)),
        rmse=float(np.sqrt(np.mean(resid**2))),
        aic=aic, bic=bic,
        decay_length=float(length), n_points=int(n_pts))
