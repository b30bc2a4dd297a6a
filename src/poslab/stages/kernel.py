"""Which path a run's profile took (kernel or table), on which scale, and the kernel head by head.

A run whose encoding has an exact kernel (:meth:`poslab.encodings.Encoding.kernel`:
sinusoidal of even width, every RoPE variant, relative biases) is analysed from
it; ``summary.csv`` records ``profile_method`` and the ``kernel`` scale of every
run, so runs are compared on one scale only (:mod:`poslab.encodings.kernel`
says why there are two). The per-head table holds each head's reach; the run's
row summarises it across heads (median and range), and the run's profile is the
mean over heads (:meth:`poslab.encodings.kernel.Kernel.profile`, where the rule
is argued).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from ..analysis.summaries import DEGENERATE, STATUSES, summaries_many
from .base import Output, RunContext, Stage, register_stage
from .schema import Column, Table

__all__ = ["KernelHeads", "KERNEL_HEADS", "REACH_LEVELS"]

#: The per-head reach levels: first distance below 1/e (the e-folding distance) and below 1/2, defined on both
#: scales; computed by :func:`poslab.analysis.summaries.summaries_many` (helper S's model-free summaries).
REACH_LEVELS = {"1e": 1 / math.e, "half": 0.5}
_SUMMARY_OF = {"1e": "e_folding_distance", "half": "band_width_0p5"}

KERNEL_HEADS = Table(
    "kernel_heads", "run × head",
    "Kernel runs, head by head: how far each head's kernel reaches (a vector encoding is one head, 'all').",
    (
        Column("head", "str", "", "head label (ALiBi / KERPLE: 0 .. n_heads - 1; 'all' for a vector encoding)",
               required=True),
        Column("head_parameters", "str", "", "the head's parameters behind its kernel, e.g. slope=0.0625 "
               "(';'-separated; empty when none)"),
        Column("below_1e", "Int64", "positions", "first distance at which the head's kernel (averaged over the "
               "directions it covers) falls below 1/e", beyond_window=True),
        Column("below_half", "Int64", "positions", "first distance at which it falls below 1/2", beyond_window=True),
        Column("value_at_max_distance", "float", "", "the head's kernel at max_distance, on the run's scale"),
        Column("summary_status", "str", "", "ok, or why the head's kernel has no reach: flat, rising, no_decay, "
               "too_few_points (poslab.analysis.summaries); an empty below_* with ok is beyond max_distance"),
    ),
)


def _reach_columns():
    for name, level in (("1e", "1/e"), ("half", "1/2")):
        yield Column(f"heads_below_{name}_median", "float", "positions",
                     f"median over heads of the first distance at which a head's kernel falls below {level} "
                     "(kernel runs; empty: the median head stays above it within max_distance)", beyond_window=True)
        yield Column(f"heads_below_{name}_min", "Int64", "positions", f"the head falling below {level} first",
                     beyond_window=True)
        yield Column(f"heads_below_{name}_max", "Int64", "positions",
                     f"the head falling below {level} last (empty: some head stays above it within max_distance)",
                     beyond_window=True)


@register_stage
@dataclasses.dataclass(frozen=True)
class KernelHeads(Stage):
    """profile_method and kernel of every run; for kernel runs the per-head table and its summary across heads."""

    name = "kernel"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = ("where the profile comes from (the exact kernel or the table), on which scale, and each head's "
                   "reach")
    tables = (KERNEL_HEADS,)
    summary = (
        Column("profile_method", "str", "", "kernel (exact, from the encoding's kernel by distance: no table, no FFT, "
               "no sampling variability) or table (cosine similarity of the generated table's rows, by FFT)"),
        Column("kernel", "str", "", "the scale of the profile: cosine (cosine similarity of position vectors), "
               "attention_prior (a bias b_h as exp(b_h(k) - b_h(0)): 1 at distance 0, in (0, 1] for a decaying bias) "
               "or score (xPos: the score of equal content at distance k relative to distance 0); runs are ranked "
               "against runs of the same scale only"),
        Column("kernel_direction", "str", "", "keys the kernel covers: bidirectional, or causal (keys at or before "
               "the query); empty for table runs"),
        Column("kernel_n_heads", "Int64", "", "heads of the kernel (the profile is their mean); empty for table runs"),
        *_reach_columns(),
    )
    uses = frozenset({"kernel"})

    def compute(self, ctx: RunContext) -> Output:
        kernel = ctx.kernel
        if kernel is None:
            return Output(summary={"profile_method": "table", "kernel": "cosine"})
        values = kernel.per_head()
        found = summaries_many(kernel.distance, values, thresholds=(0.5,))
        codes = found.status.max(axis=1)  # a degenerate status is every summary's; not_reached is a value's own
        degenerate = np.isin(np.asarray(STATUSES)[codes], DEGENERATE)
        reach = np.stack([np.where(np.isnan(found.column(_SUMMARY_OF[name])) & ~degenerate, np.inf,
                                   found.column(_SUMMARY_OF[name])) for name in REACH_LEVELS], axis=1)
        summary = {"profile_method": "kernel", "kernel": kernel.scale, "kernel_direction": kernel.direction,
                   "kernel_n_heads": kernel.n_heads}
        for j, name in enumerate(REACH_LEVELS):  # over the heads with a reach (inf: beyond the window)
            r = reach[~np.isnan(reach[:, j]), j]
            if not r.size:
                continue
            median = float(np.median(r))
            summary[f"heads_below_{name}_median"] = median if np.isfinite(median) else np.nan
            summary[f"heads_below_{name}_min"] = _int_or_none(r.min())
            summary[f"heads_below_{name}_max"] = _int_or_none(r.max())
        params = [";".join(f"{k}={v[h]:.6g}" for k, v in kernel.head_parameters.items()) or None
                  for h in range(kernel.n_heads)]
        frame = pd.DataFrame({
            "head": list(kernel.heads),
            "head_parameters": params,
            "below_1e": pd.array([_int_or_none(v) for v in reach[:, 0]], dtype="Int64"),
            "below_half": pd.array([_int_or_none(v) for v in reach[:, 1]], dtype="Int64"),
            "value_at_max_distance": values[:, -1],
            "summary_status": np.where(degenerate, np.asarray(STATUSES)[codes], "ok"),
        })
        notes = list(kernel.notes)
        if ctx.options.center and kernel.scale != "cosine":
            notes.append("center does not apply to a bias kernel (it has no position vectors)")
        return Output(summary=summary, tables={"kernel_heads": frame}, note="; ".join(notes))


def _int_or_none(value):
    return int(value) if np.isfinite(value) else None  # inf: beyond the window; NaN: no reach (degenerate)
