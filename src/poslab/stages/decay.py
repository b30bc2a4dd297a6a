"""Decay models fitted to the profile (the upper envelope of an oscillating one: stages/envelope.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .._validation import Choice, Integer, ListOf, Real
from ..analysis.decay import DECAY_MODELS, MIN_AIC_GAIN, PARAMETERS
from .base import Output, RunContext, Stage, register_stage, setting
from .schema import Column, Table

__all__ = ["Decay", "DECAY_METRICS", "fits_frame"]

_STATUS = ("ok, or why there are no numbers: too_few_points, flat, rising, not_converged, not_identifiable, "
           "at_bound, out_of_range, no_better_than_constant, failed")


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
        Column("aicc", "float", "", "AIC with the small-sample correction (Hurvich & Tsai 1989)"),
        Column("bic", "float", "", "Bayesian information criterion"),
        Column("akaike_weight", "float", "", "Akaike weight among the ok fits of the target"),
        Column("decay_length", "float", "positions",
               "distance at which the fitted curve has covered 1 - 1/e of the way from its value at 0 to its "
               "asymptote", required=True),
        Column("decay_length_se", "float", "positions", "delta-method standard error of the decay length"),
        Column("decay_length_ci_low", "float", "positions", "Wald interval of the decay length, low end"),
        Column("decay_length_ci_high", "float", "positions", "Wald interval of the decay length, high end"),
        Column("ci_level", "float", "", "level of the Wald intervals"),
        Column("n_points", "int", "", "fitted points (bins beyond 4096 distances)"),
        Column("selected", "bool", "", "lowest AICc among the ok fits of the target", required=True),
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
    description = "decay models fitted to the profile with scipy (weighted by standard errors), selected by AICc"
    tables = (DECAY_METRICS,)
    summary = (
        Column("selected_model", "str", "", "the selected decay model (empty if none: the message says why)",
               console=True, heading="model"),
        Column("decay_length", "float", "positions", "decay length of the selected model (empty if none)",
               interval=True, console=True),
    )
    uses = frozenset({"fits"})

    models: tuple[str, ...] = setting(tuple(DECAY_MODELS), ListOf(Choice(tuple(DECAY_MODELS)), distinct=True),
                                      "decay models to fit")
    fit_min_distance: int = setting(1, Integer(minimum=0), "smallest distance fitted (distance 0 is 1 by construction)")
    min_aic_gain: float = setting(MIN_AIC_GAIN, Real(minimum=0),
                                  "AIC a model must gain over a constant to be reported (Burnham & Anderson 2002)")

    def compute(self, ctx: RunContext) -> Output:
        fits = ctx.fits
        best = fits.selected
        note = "" if best else "no decay model fitted: " + ", ".join(sorted({f.status for f in fits.fits}))
        return Output(summary={"selected_model": best.model if best else "",
                               "decay_length": best.decay_length if best else np.nan},
                      tables={"decay_metrics": fits_frame(fits)}, note=note)
