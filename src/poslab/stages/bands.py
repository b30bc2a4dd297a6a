"""The model-free summaries of the profile: band widths, e-folding distance, zero crossing, first minimum, integral scale.

They lead ``summary.csv`` (this stage runs before the decay fits): each is a
distance read off the profile without a model, or empty with its status in
``summary_notes`` (:mod:`poslab.analysis.summaries`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import ListOf, Real
from ..analysis.bands import DEFAULT_THRESHOLDS
from ..analysis.summaries import (CONDITIONING_DELTA, CROSSING_Z, ILL_CONDITIONED_SPREAD, MIN_RISE, MIN_RISE_SE,
                                  STATUSES, profile_summaries, summary_settings,
                                  summary_values_many)
from .base import Output, RunContext, Stage, register_stage, setting
from .schema import Column, Family, Table

__all__ = ["Summaries", "SUMMARIES", "BAND_WIDTH", "SUMMARY_COLUMNS"]


def _render(threshold: float) -> str:
    """0.9 -> "0p9", -0.5 -> "m0p5", 0.0 -> "0"."""
    return f"{threshold:g}".replace("-", "m").replace(".", "p")


def _parse(text: str) -> float:
    return float(text.replace("m", "-").replace("p", "."))


_STATUS = ("(empty: see summary_notes; not reached within max_distance, within the noise (S falls to the level but "
           "not crossing_z standard errors below it), or a degenerate profile)")

#: The band widths: one summary column per threshold t, the prefix then t with "-" as m and "." as p
#: (0.9 -> 0p9, -0.5 -> m0p5, 0 -> 0).
BAND_WIDTH = Family("band_width_", "Int64", "positions",
                    "band width at threshold t: first distance at which the mean profile falls below t " + _STATUS,
                    interval=True, beyond_window=True, console=True, heading="width_",
                    placeholder="<t>",
                    render=_render, parse=_parse, setting="thresholds")

#: The summaries after the band widths (their names are poslab.analysis.summaries.SUMMARY_NAMES).
SUMMARY_COLUMNS = (
    Column("e_folding_distance", "Int64", "positions",
           "first distance at which S(k) / S(0) falls below 1/e (the e-folding lag; Box & Jenkins) " + _STATUS,
           interval=True, beyond_window=True, console=True, heading="1/e"),
    Column("zero_crossing", "Int64", "positions",
           "first distance at which the mean profile falls below 0 " + _STATUS,
           interval=True, beyond_window=True, console=True, heading="zero"),
    Column("first_minimum", "Int64", "positions",
           "first local minimum of the mean profile: its lowest point before it first rises back by min_rise and "
           "min_rise_se standard errors " + _STATUS, interval=True, beyond_window=True, console=True,
           heading="minimum"),
    Column("integral_scale", "float", "positions",
           "integral scale: the trapezoidal integral of S(k) / S(0) from 0 to the first zero crossing "
           "(interpolated; Pope 2000 §6.2); empty when S does not cross 0 within max_distance (not defined there) "
           "or its zero crossing is within the noise",
           interval=True, console=True, heading="integral"),
)

SUMMARIES = Table(
    "summaries", "run × summary",
    "The model-free summaries of each run's profile with their status and conditioning "
    "(poslab.analysis.summaries).",
    (
        Column("summary", "str", "", "band_width_<t>, e_folding_distance, zero_crossing, first_minimum, "
               "integral_scale", required=True),
        Column("value", "float", "positions", "the summary (empty unless status is ok)", required=True),
        Column("status", "str", "", "ok; not_reached (within max_distance); undefined (S(0) <= 0); within_noise "
               "(S falls to the noise floor around the level but never crossing_z standard errors below it within "
               "max_distance, or only at distances whose pairs lie in one anchor block; the integral scale: its "
               "zero crossing is); or the profile's degenerate status, which "
               "every summary of it takes: too_few_points, flat (no decay beyond distance 1), rising, no_decay "
               "(oscillates without decaying)", required=True),
        Column("reason", "str", "", "why it is not a number, or why it is ill-conditioned"),
        Column("crossing", "float", "positions", "a crossing interpolated linearly between the last distance at or "
               "above the level and the first below (the integral scale: its zero crossing)"),
        Column("crossing_low", "float", "positions",
               f"the interpolated first crossing of the level + {CONDITIONING_DELTA:g}, also for a crossing not_reached "
               f"(S comes within {CONDITIONING_DELTA:g} of the level inside the window there; empty: not even that; "
               "the integral scale: its zero crossing's)"),
        Column("crossing_high", "float", "positions",
               f"the interpolated first crossing of the level - {CONDITIONING_DELTA:g} (empty: beyond the window, "
               "always so for a crossing not_reached)"),
        Column("slope", "float", "cosine similarity",
               "S(k) - S(k - 1) at the first distance k below the level (per position)"),
        Column("recrossings", "int", "", "times S falls below the level again after coming back above it"),
        Column("ill_conditioned", "bool", "", f"S comes back above the level later in the window and a change of "
               f"±{CONDITIONING_DELTA:g} in the level moves the first crossing by more than "
               f"{ILL_CONDITIONED_SPREAD:.0%} of its value (RoPE's 0.5 crossing)"),
        Column("below_se", "float", "", "how far S falls below the level at or after its first crossing, in "
               "standard errors: the largest (level - S(k)) / se(k) there, se(k)^2 the anchor-block variance "
               "times pairs pooled beyond the crossing, over n_pairs(k); the crossing counts when it exceeds "
               "crossing_z (empty: exact profile, no crossing, first_minimum)"),
        Column("lower_bound", "float", "positions", "integral_scale not_reached on an exact profile (a kernel, a "
               "translation-invariant table): the trapezoidal integral of S(k) / S(0) from 0 to max_distance, a "
               "lower bound of the integral scale (S >= 0 up to its zero crossing beyond the window); empty for "
               "every other row (value stays empty: the integral scale is no number there)"),
    ),
    always=True,
)


@register_stage
@dataclasses.dataclass(frozen=True)
class Summaries(Stage):
    """The model-free summaries: they lead summary.csv, the console summary and the comparison."""

    name = "summaries"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = ("model-free summaries of the profile (band widths, e-folding distance, zero crossing, first "
                   "minimum and its depth, integral scale), each with its status and conditioning")
    tables = (SUMMARIES,)
    summary = (
        BAND_WIDTH, *SUMMARY_COLUMNS,
        Column("first_minimum_similarity", "float", "cosine similarity", "the mean profile at first_minimum"),
        Column("first_minimum_depth", "float", "cosine similarity",
               "how far the profile rises back after first_minimum (to its highest point before falling below it "
               "again, or up to max_distance)"),
        Column("summary_notes", "str", "", "every summary that is not a number, with its status and reason, and "
               "every ill-conditioned one ('; '-separated; empty: all are numbers, well conditioned)"),
    )
    uses = frozenset({"units", "profile"})

    thresholds: tuple[float, ...] = setting(DEFAULT_THRESHOLDS, ListOf(Real(minimum=-1, maximum=1), distinct=True),
                                            "band-width thresholds (cosine similarity levels)")
    min_rise: float = setting(MIN_RISE, Real(minimum=0, open_min=True),
                              "rise after a trough that makes it the first minimum, and tolerance of the flat / "
                              "rising / no-decay tests of a profile (cosine similarity)")
    min_rise_se: float = setting(MIN_RISE_SE, Real(minimum=0),
                                 "... and in standard errors of the two means, max(std, pooled std) / sqrt(n_pairs) "
                                 "(neighbouring distances share positions, so noise reaches many of them; 25 as "
                                 "the envelope's oscillation test)")
    crossing_z: float = setting(CROSSING_Z, Real(minimum=0),
                                "a crossing of a level (band widths, e-folding, zero) counts only if the profile falls "
                                "below the level by more than this many standard errors somewhere at or after its "
                                "first crossing (anchor-block standard errors pooled beyond it); else within_noise. "
                                "Exact profiles: the plain first crossing")

    def compute(self, ctx: RunContext) -> Output:
        s = ctx.summaries
        summary = {name: (s.values[j] if np.isfinite(s.values[j]) else None)
                   if name != "integral_scale" else s.values[j] for j, name in enumerate(s.names)}
        summary |= {"first_minimum_similarity": s.first_minimum_similarity,
                    "first_minimum_depth": s.first_minimum_depth, "summary_notes": s.notes()}
        return Output(summary=summary, tables={"summaries": s.to_frame()})


def ripple_depth(row) -> float | None:
    """How far the profile rises back from a run's first minimum when that minimum is a ripple, else None.

    A ripple: the first minimum of an exact cosine-similarity profile (``profile_method`` kernel, or
    ``ci_method`` exact: an exactly translation-invariant table; ``kernel`` cosine or absent), a dip of a
    finite cosine sum (RoPE at θ = 500000 has one at 34, sinusoidal d = 768 at 787) rather than a length
    scale. ``row``: a summary.csv row (a mapping with ``get``). The console prints it ``34 (ripple, 0.06)``,
    the first-minimum figure marks it apart, and a comparison of first minima says so
    (:mod:`poslab.study.comparison`)."""
    kernel = row.get("kernel")
    exact = row.get("profile_method") == "kernel" or row.get("ci_method") == "exact"
    if not exact or (isinstance(kernel, str) and kernel != "cosine"):
        return None
    try:
        minimum, depth = float(row.get("first_minimum")), float(row.get("first_minimum_depth"))
    except (TypeError, ValueError):
        return None
    return depth if np.isfinite(minimum) and np.isfinite(depth) else None


def profile_standard_errors(profile) -> np.ndarray | None:
    """Standard errors of the profile's means, max(std, pooled std) / sqrt(n_pairs); None when exact (std 0)."""
    ok = np.isfinite(profile.mean_similarity) & (profile.n_pairs > 0)
    n, std = profile.n_pairs[ok].astype(float), profile.std_similarity[ok]
    if not n.size or not np.any(std > 0):
        return None
    pooled = np.sqrt(np.sum(n * std**2) / np.sum(n))  # a std from a few pairs is no measure of noise
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.maximum(profile.std_similarity, pooled) / np.sqrt(profile.n_pairs)


def run_summaries(profile, options, noise_se=None):
    """The summaries of one run's profile with the study's settings (RunContext.summaries); ``noise_se``: the
    anchor-block standard errors (None: exact)."""
    return profile_summaries(profile.distance, profile.mean_similarity, thresholds=options.thresholds,
                             se=profile_standard_errors(profile), min_rise=options.min_rise,
                             min_rise_se=options.min_rise_se, noise_se=noise_se, n_pairs=profile.n_pairs,
                             crossing_z=options.crossing_z)


def summariser(profile, options, noise_se=None):
    """The model-free summaries of resampled profiles (rows) of ``profile``, for bootstrap intervals.

    Returns ``summarise(distance, profiles) -> {name: ndarray of shape (n_rows,)}`` for every summary
    (:func:`poslab.analysis.summaries.summary_names`): the values and statuses of
    :func:`~poslab.analysis.summaries.summaries_many` (computed by
    :func:`~poslab.analysis.summaries.summary_values_many`, settings prepared once) with the settings of the run's
    own summaries (thresholds, ``min_rise``, ``min_rise_se``, ``crossing_z``, the profile's
    standard errors of the mean as ``se`` and its anchor-block ``noise_se``), so each replicate is the summary the
    run reports, of a resampled profile. Values: the distance; +inf where not reached within the window or within
    the noise (beyond what the window confirms); NaN where undefined or the resampled profile is degenerate.
    """
    se = profile_standard_errors(profile)
    beyond = (STATUSES.index("not_reached"), STATUSES.index("within_noise"))
    settings = []  # prepared once for the distances of the calls (the profile's)

    def summarise(distance, profiles) -> dict:
        if not settings or not np.array_equal(settings[0].d, distance):
            settings[:] = [summary_settings(distance, thresholds=options.thresholds, se=se, min_rise=options.min_rise,
                                            min_rise_se=options.min_rise_se, noise_se=noise_se,
                                            n_pairs=profile.n_pairs, crossing_z=options.crossing_z)]
        names, values, status = summary_values_many(settings[0], profiles)
        return {name: np.where(np.isin(status[:, j], beyond), np.inf, values[:, j]) for j, name in enumerate(names)}

    return summarise
