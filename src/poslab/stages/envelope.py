"""Decay models fitted to the upper envelope of an oscillating profile (its own stage: after the bootstrap)."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import Real
from ..analysis.decay import OSCILLATION_MIN_DEPTH, OSCILLATION_MIN_SE
from .base import Output, RunContext, Stage, register_stage, setting
from .decay import DECAY_METRICS, fits_frame
from .schema import Column

__all__ = ["Envelope"]


@register_stage
@dataclasses.dataclass(frozen=True)
class Envelope(Stage):
    """Decay models fitted to the upper envelope of an oscillating profile."""

    name = "envelope"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = ("decay models fitted to the upper envelope of an oscillating profile (sinusoidal, RoPE, GPT-2's "
                   "helix), as decay_metrics rows with target = envelope")
    tables = (DECAY_METRICS,)
    summary = (
        Column("envelope_decay_length", "float", "positions",
               "decay length of the envelope's selected model (empty when the profile does not oscillate)"),
    )
    uses = frozenset({"envelope_fits"})

    oscillation_min_depth: float = setting(OSCILLATION_MIN_DEPTH, Real(minimum=0),
                                           "a profile oscillates when it rises back by more than this fraction of "
                                           "its range, and by more than oscillation_min_se")
    oscillation_min_se: float = setting(OSCILLATION_MIN_SE, Real(minimum=0),
                                        "... median standard errors (a heuristic: a noisy tail is no oscillation)")

    def compute(self, ctx: RunContext) -> Output:
        envelope = ctx.envelope_fits
        best = envelope.selected if envelope is not None else None
        tables = {"decay_metrics": fits_frame(envelope)} if envelope is not None else {}
        return Output(summary={"envelope_decay_length": best.decay_length if best else np.nan}, tables=tables)
