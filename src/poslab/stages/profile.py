"""The similarity profile: mean similarity by distance, with the selected fit and the bootstrap band."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import Boolean, Choice
from .base import Output, RunContext, Stage, register_stage, setting
from .schema import Column, Table

__all__ = ["Profile", "PROFILES"]

PROFILES = Table(
    "profiles", "run × distance",
    "The similarity profile: mean cosine similarity S(k) over the pairs (i, i + k) at each distance.",
    (
        Column("distance", "int", "positions", "distance k = |i - j|, 0..max_distance", required=True),
        Column("mean_similarity", "float", "cosine similarity",
               "mean over i of S[i, i + k] (valid pairs only; empty where none)", required=True),
        Column("std_similarity", "float", "cosine similarity",
               "population standard deviation of the same entries (estimated from 128 anchors above 2048 "
               "positions)", required=True),
        Column("n_pairs", "int", "", "pairs averaged", required=True),
        Column("fitted_similarity", "float", "cosine similarity",
               "the selected decay model at that distance (empty at distances below fit_min_distance or without "
               "one)"),
        Column("mean_similarity_ci_low", "float", "cosine similarity",
               "pointwise anchor-block bootstrap band of the mean, low end (empty without a bootstrap, "
               "and for a run whose ci_method is exact: no sampling variability)"),
        Column("mean_similarity_ci_high", "float", "cosine similarity", "the same band's high end"),
    ),
    keys="short",
    always=True,
)


@register_stage
@dataclasses.dataclass(frozen=True)
class Profile(Stage):
    """The profiles table and the positions excluded from every mean."""

    name = "profile"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = "mean and spread of cosine similarity at every distance, by FFT (the n x n matrix is never formed)"
    tables = (PROFILES,)
    summary = (
        Column("excluded_positions", "str", "positions",
               "';'-separated positions with zero or non-finite vectors, excluded from every mean"),
    )
    uses = frozenset({"profile", "fits", "bootstrap"})

    center: bool = setting(False, Boolean(), "subtract the mean position vector before cosine similarity")
    precision: str = setting("float64", Choice(("float64", "float32")),
                             "arithmetic of the profile's FFTs (float32: faster, mean within ~1e-7 · n / n_pairs)")

    def compute(self, ctx: RunContext) -> Output:
        profile = ctx.profile
        frame = profile.to_frame()
        fitted = ctx.fits.predict(frame["distance"].to_numpy())
        frame["fitted_similarity"] = np.where(frame["distance"] >= ctx.options.fit_min_distance, fitted, np.nan)
        boot = ctx.bootstrap
        low, high = boot.profile_ci if boot and not boot.exact else (np.nan, np.nan)  # exact: no band (ci_method)
        frame["mean_similarity_ci_low"], frame["mean_similarity_ci_high"] = low, high
        return Output(summary={"excluded_positions": ";".join(map(str, profile.excluded_positions))},
                      tables={"profiles": frame})
