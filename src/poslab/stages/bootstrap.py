"""The anchor-block bootstrap: intervals of the decay length, the band widths and the profile."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .._validation import Integer, Real
from ..analysis.bootstrap import BOOTSTRAP_LEVEL, BOOTSTRAP_SEED, MAX_FAILED_FRACTION, N_BLOCKS, N_RESAMPLES
from ..analysis.summaries import SUMMARY_NAMES
from .bands import BAND_WIDTH
from .base import Output, RunContext, Stage, register_stage, setting
from .schema import Column, Table

__all__ = ["Bootstrap", "BOOTSTRAP"]

BOOTSTRAP = Table(
    "bootstrap", "run × window × resample",
    "The anchor-block bootstrap's replicates (resampled blocks of anchor positions, the same blocks at every "
    "distance), behind every interval of summary.csv (the run's window) and of window_sensitivity.csv (its smaller "
    "windows). A run without sampling variability (ci_method exact: a kernel run, an exactly translation-invariant "
    "table) has no rows: each of its resamples would repeat its own estimates.",
    (
        Column("window", "int", "positions", "largest distance of the resampled profile: the run's max_distance, or "
               "a smaller nested window of window_sensitivity.csv (a quarter or half; summaries only)",
               required=True),
        Column("resample", "int", "", "resample index"),
        Column("decay_length", "float", "positions",
               "the selected model refitted to the resampled profile (empty: no model selected, the refit "
               "failed, or a smaller window: not refitted there)"),
        dataclasses.replace(BAND_WIDTH, dtype="float", interval=False, console=False,
                            description="the resample's band width at threshold t (empty: beyond the window, or "
                                        "undefined: no pair at the window's end)"),
        *(Column(name, "float", "positions", f"the resample's {name.replace('_', ' ')} "
                 "(poslab.analysis.summaries; empty: not reached within the window or within the noise, undefined, "
                 "or the resampled profile is degenerate)") for name in SUMMARY_NAMES),
    ),
)


@register_stage
@dataclasses.dataclass(frozen=True)
class Bootstrap(Stage):
    """Percentile intervals from the anchor-block bootstrap, and its replicates."""

    name = "bootstrap"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = ("anchor-block bootstrap: blocks of anchor positions resampled with replacement, band widths "
                   "recomputed and the selected model refitted per resample; percentile intervals")
    tables = (BOOTSTRAP,)
    summary = (
        Column("ci_method", "str", "", "how intervals were obtained: anchor_block; exact (every resample of anchor "
               "blocks gives the same profile: an exactly translation-invariant table has no sampling variability, "
               "so its intervals are left empty; the fit's own uncertainty is decay_length_se in decay_metrics.csv); "
               "or none (n_resamples = 0)"),
        Column("ci_level", "float", "", "level of the intervals"),
        Column("n_resamples", "Int64", "", "bootstrap resamples behind the intervals: 0 for an exact run "
               "(ci_method exact draws none) and with n_resamples = 0"),
        Column("block_length", "Int64", "positions", "anchors per block, from the data: the largest Politis & White "
               "(2004) block length of the lag-product series S[i, i + k] over anchors i, k = 1, 2, 4, ..., clipped "
               "so that there are between 8 and n_blocks blocks"),
        Column("correlation_length", "float", "positions", "the lag products' correlation length Σ|k|γ(k) / Σγ(k) "
               "(largest over those k)"),
        Column("interval_widening", "float", "", "factor every interval was widened by about the replicates' "
               "median: few blocks (Hesterberg 2015's expanded percentile) and blocks not much longer than the "
               "correlation length (Künsch 1989)"),
        Column("n_failed_refits", "Int64", "",
               "resamples whose refit failed (more than max_failed_fraction leave the decay-length interval empty)"),
    )
    uses = frozenset({"bootstrap", "window_analyses"})
    fills_intervals = True

    n_resamples: int = setting(N_RESAMPLES, Integer(minimum=0),
                               "bootstrap resamples behind every confidence interval (0: no intervals)")
    ci_level: float = setting(BOOTSTRAP_LEVEL, Real(minimum=0, maximum=1, open_min=True, open_max=True),
                              "confidence level of the intervals")
    n_blocks: int = setting(N_BLOCKS, Integer(minimum=1),
                            "most anchor blocks per run (block_length >= ceil(n_positions / n_blocks); the block-pair "
                            "spectra cost O(n_blocks · n_positions) memory)")
    bootstrap_seed: int = setting(BOOTSTRAP_SEED, Integer(minimum=0),
                                  "seed of the resampling (with the run's seed: default_rng((bootstrap_seed, seed)))")
    max_failed_fraction: float = setting(MAX_FAILED_FRACTION, Real(minimum=0, maximum=1),
                                         "more failed refits than this fraction leave the decay-length interval empty")

    def compute(self, ctx: RunContext) -> Output:
        boot = ctx.bootstrap
        if boot is None:
            return Output(summary={"ci_method": "none", "n_resamples": 0})
        low, high = boot.decay_length_ci
        summary = {"decay_length_ci_low": low, "decay_length_ci_high": high}
        for t, (low, high) in boot.band_widths_ci.items():
            name = BAND_WIDTH.member(t)
            summary[name + "_ci_low"], summary[name + "_ci_high"] = low, high
        from . import SUMMARY  # the summary.csv schema (built once every stage is registered)

        for name, (low, high) in boot.summaries_ci.items():  # the model-free summaries declared with an interval
            column = SUMMARY.column(name)
            if column is not None and column.interval:
                summary[name + "_ci_low"], summary[name + "_ci_high"] = low, high
        if boot.exact:  # zero width for want of sampling variability is no interval: left empty, "exact"
            summary = dict.fromkeys(summary, np.nan)
        summary |= {"ci_method": "exact" if boot.exact else boot.method, "ci_level": boot.level,
                    "n_resamples": 0 if boot.exact else boot.n_resamples,  # an exact run draws none
                    "block_length": boot.block_length, "n_failed_refits": boot.n_failed,
                    "correlation_length": boot.correlation_length, "interval_widening": boot.widening}
        frames = [pd.DataFrame({"window": w.max_distance, "resample": np.arange(len(next(iter(w.replicates.values())))),
                                **{name: np.where(np.isinf(v), np.nan, v) for name, v in w.replicates.items()}})
                  for w in ctx.window_analyses if w.replicates]  # the smaller windows' (summaries only)
        if not boot.exact:  # an exact run's replicates are n_resamples copies of its estimates: no rows
            frame = pd.DataFrame({"window": ctx.max_distance, "resample": np.arange(boot.n_resamples),
                                  "decay_length": boot.decay_lengths})
            widths = np.where(np.isinf(boot.band_widths), np.nan, boot.band_widths)
            for j, t in enumerate(boot.thresholds):
                frame[BAND_WIDTH.member(t)] = widths[:, j]
            for name, values in boot.summaries.items():
                frame[name] = np.where(np.isinf(values), np.nan, values)
            frames.append(frame)
        if not frames:
            return Output(summary=summary)
        frame = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        return Output(summary=summary, tables={"bootstrap": frame})
