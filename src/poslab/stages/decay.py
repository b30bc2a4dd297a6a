"""Decay models fitted to the profile (the upper envelope of an oscillating one: stages/envelope.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .._validation import Choice, Integer, ListOf, Real
from ..analysis.decay import DECAY_MODELS, FIT_TOLERANCE, GOF_ALPHA, MIN_AIC_GAIN, PARAMETERS
from .base import Output, RunContext, Stage, register_stage, setting
from .schema import Column, Table

__all__ = ["Decay", "DECAY_METRICS", "fits_frame"]

_STATUS = ("ok, or why there are no numbers: too_few_points, flat, rising, not_converged, not_identifiable, "
           "at_bound, poor_fit, out_of_range, no_better_than_constant, failed")


def _parameter_columns():
    for p in PARAMETERS:
        yield Column(p.name, "float", p.unit, f"{p.description} (empty unless ok)")
        yield Column(f"{p.name}_se", "float", p.unit, f"standard error of {p.name}")
        yield Column(f"{p.name}_ci_low", "float", p.unit, f"Wald interval of {p.name} at ci_level, low end")
        yield Column(f"{p.name}_ci_high", "float", p.unit, f"Wald interval of {p.name}, high end")


DECAY_METRICS = Table(
    "decay_metrics", "run × target × model",
    "Every decay model fitted to the profile (and to its upper envelope when the profile oscillates); "
    "only ok rows carry numbers.",
    (
        Column("target", "str", "", "profile, or envelope (the running maximum from the right, fitted where the "
               "profile touches it)"),
        Column("model", "str", "", "decay model: " + ", ".join(DECAY_MODELS), required=True),
        Column("status", "str", "", _STATUS, required=True),
        Column("message", "str", "", "why the status (empty when ok)"),
        *_parameter_columns(),
        Column("r2", "float", "", "coefficient of determination (unweighted)"),
        Column("rmse", "float", "cosine similarity", "root-mean-square residual (unweighted)"),
        Column("aic", "float", "", "Akaike information criterion (weighted residuals)"),
        Column("aicc", "float", "", "AIC with the small-sample correction (Hurvich & Tsai 1989), treating the "
               "distances as independent (they are not: qaicc selects)"),
        Column("bic", "float", "", "Bayesian information criterion"),
        Column("qaicc", "float", "", "quasi-AICc: chi2 / c_hat + 2K + 2K(K + 1) / (n_effective - K - 1), K = "
               "parameters + 1 (Burnham & Anderson 2002, §2.5); selects the model"),
        Column("akaike_weight", "float", "", "Akaike weight from qaicc among the ok fits of the target"),
        Column("decay_length", "float", "positions",
               "distance over which the fitted curve minus its asymptote falls to 1/e of its value at the first "
               "fitted distance (fit_min_distance), read inside the fit range; empty for the scale-free log law",
               required=True),
        Column("decay_length_se", "float", "positions", "delta-method standard error of the decay length, the "
               "covariance inflated by the residuals' autocorrelation time"),
        Column("decay_length_ci_low", "float", "positions", "Wald interval of the decay length at ci_level, low end"),
        Column("decay_length_ci_high", "float", "positions", "Wald interval of the decay length, high end"),
        Column("ci_level", "float", "", "level of the Wald intervals"),
        Column("n_points", "int", "", "fitted points (bins beyond 4096 distances)"),
        Column("fit_min_distance", "float", "positions", "first fitted distance"),
        Column("fit_max_distance", "float", "positions", "last fitted distance (the fit range's end)"),
        Column("fit_range_rule", "str", "", "why the fit range ends there: first_zero_crossing (the first distance "
               "where the profile is <= 0) or window (it stays above 0); the envelope uses the window"),
        Column("misfit", "float", "", "goodness of fit: the largest |mean residual| over 20 bins of ln(1 + distance), "
               "relative to the profile's range over the fitted distances (a misfit at a few distances counts, the "
               "ripple of a cosine sum averages out)"),
        Column("gof_p_value", "float", "", "probability of a residual sum of squares at least this large under the "
               "profile's noise, anchor blocks as clusters (Satterthwaite's chi2 after the fit's projection; "
               "gof_test noise)"),
        Column("gof_test", "str", "", "the gate applied: noise (poor_fit when misfit > fit_tolerance and "
               "gof_p_value < gof_alpha), exact (a translation-invariant profile, no noise: misfit > fit_tolerance) "
               "or none (no noise model given)"),
        Column("durbin_watson", "float", "", "Durbin-Watson statistic of the residuals (about 2: uncorrelated; "
               "reported, not a gate: neighbouring distances share positions, so even a true model's residuals "
               "are correlated)"),
        Column("c_hat", "float", "", "overdispersion of the most general ok model: its reduced chi2 times its "
               "residuals' autocorrelation time (at least 1)"),
        Column("n_effective", "float", "", "fitted points / that autocorrelation time"),
        Column("selected", "bool", "", "lowest qaicc among the ok fits of the target", required=True),
    ),
    always=True,
)


def fits_frame(fits) -> pd.DataFrame:
    """The decay_metrics rows of one set of fits."""
    return fits.to_frame()


@register_stage
@dataclasses.dataclass(frozen=True)
class Decay(Stage):
    """Decay models fitted to the profile; the selected one gives the run's decay length."""

    name = "decay"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = "decay models fitted to the profile with scipy (weighted by standard errors), selected by AICc"
    tables = (DECAY_METRICS,)
    summary = (
        Column("selected_model", "str", "", "the selected decay model (empty if none: the message says why)",
               console=True, heading="model"),
        Column("decay_length", "float", "positions", "decay length of the selected model, from the first fitted "
               "distance and inside the fit range (empty if none, or the selected model is the scale-free log law)",
               interval=True, console=True),
        Column("decay_length_averaged", "float", "positions", "model-averaged decay length over the ok fits with "
               "one, Akaike weights from qaicc (empty when none, or the log law carries most weight)"),
        Column("decay_length_averaged_se", "float", "positions", "its unconditional standard error "
               "(Burnham & Anderson 2002, eq. 4.9)"),
        Column("fit_max_distance", "float", "positions", "last fitted distance of the profile's fits"),
        Column("fit_range_rule", "str", "", "first_zero_crossing or window (decay_metrics.csv)"),
        Column("log_slope", "float", "cosine similarity", "fitted slope b of the log law a - b ln d (empty "
               "unless the log law fit is ok)"),
        Column("log_slope_se", "float", "cosine similarity", "its standard error"),
        Column("log_slope_theory", "float", "cosine similarity", "sinusoidal and rotary runs: 1 / ln(base), base "
               "= sinusoidal base or the effective rope_theta (the continuum limit of a sum of cosines with "
               "log-uniform frequencies: S(k) ≈ 1 - (γ + ln k) / ln base)"),
    )
    uses = frozenset({"fits"})

    models: tuple[str, ...] = setting(tuple(DECAY_MODELS), ListOf(Choice(tuple(DECAY_MODELS)), distinct=True),
                                      "decay models to fit")
    fit_min_distance: int = setting(1, Integer(minimum=0), "smallest distance fitted (distance 0 is 1 by construction)")
    min_aic_gain: float = setting(MIN_AIC_GAIN, Real(minimum=0),
                                  "AIC a model must gain over a constant to be reported (Burnham & Anderson 2002)")
    gof_alpha: float = setting(GOF_ALPHA, Real(minimum=0, maximum=1, open_min=True, open_max=True),
                               "goodness-of-fit gate: a fit is poor_fit when its residuals are less probable than this "
                               "under the profile's noise (anchor blocks as clusters) ...")
    fit_tolerance: float = setting(FIT_TOLERANCE, Real(minimum=0, open_min=True),
                                   "... and its residuals, averaged over 20 bins of ln(1 + distance), exceed this "
                                   "fraction of the profile's range (exact profiles: this alone)")

    def compute(self, ctx: RunContext) -> Output:
        fits = ctx.fits
        best = fits.selected
        note = "" if best else "no decay model fitted: " + ", ".join(sorted({f.status for f in fits.fits}))
        if best is not None and best.decay_model.scale_free:
            note = f"selected {best.model}: scale-free, no decay length (see log_slope)"
        averaged, averaged_se, why = fits.averaged()
        if best is not None and why:
            note = "; ".join(filter(None, [note, f"no model-averaged decay length: {why}"]))
        log = next((f for f in fits.fits if f.model == "log_law" and f.status == "ok"), None)
        return Output(summary={"selected_model": best.model if best else "",
                               "decay_length": best.decay_length if best else np.nan,
                               "decay_length_averaged": averaged, "decay_length_averaged_se": averaged_se,
                               "fit_max_distance": fits.fit_range[1], "fit_range_rule": fits.range_rule,
                               "log_slope": log.params["slope"] if log else np.nan,
                               "log_slope_se": log.stderr["slope"] if log else np.nan,
                               "log_slope_theory": theoretical_log_slope(ctx)},
                      tables={"decay_metrics": fits_frame(fits)}, note=note)


def theoretical_log_slope(ctx) -> float:
    """1 / ln(base) for sinusoidal runs (their ``base``) and rotary runs (``effective_rope_theta`` of
    ``Rotary.resolve``); NaN for other kinds. For frequencies θ_i = base^(−i/m), i < m, the profile
    (1/m) Σ cos(k θ_i) tends to (Ci(k) − Ci(k / base)) / ln base ≈ 1 − (γ + ln k) / ln base for 1 ≪ k ≪ base
    (Ci the cosine integral, γ Euler's constant): a log law of slope 1 / ln base. Scaled RoPE types whose
    frequencies are not log-uniform (llama3, yarn) get the effective base's slope, a reference only."""
    from ..encodings.rotary import Rotary
    from ..encodings.sinusoidal import Sinusoidal

    enc = ctx.encoding
    try:
        if isinstance(enc, Sinusoidal):
            base = float(enc.base)
        elif isinstance(enc, Rotary):
            base = float(enc.resolve(ctx.dim, ctx.n_positions).effective_rope_theta)
        else:
            return np.nan
    except Exception:  # noqa: BLE001 - a reference value, never a reason to fail the run
        return np.nan
    return 1.0 / np.log(base) if base > 1 else np.nan
