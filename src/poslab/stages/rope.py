"""RoPE geometry of rotary runs: the frequencies used and RoFormer's long-term decay bound."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .base import Output, RunContext, Stage, register_stage
from .schema import Column, Table

__all__ = ["RopeGeometry", "INV_FREQ", "ROPE_DECAY"]

INV_FREQ = Table(
    "inv_freq", "run × frequency pair",
    "The RoPE frequencies a rotary run used, beside the unscaled ones: diff it against your implementation.",
    (
        Column("pair", "int", "", "frequency pair i (dims 2i, 2i+1 interleaved; i, i + d/2 half)"),
        Column("inv_freq", "float", "radians per position", "frequency θ_i used (its rope type applied)"),
        Column("reference_inv_freq", "float", "radians per position", "unscaled default rope_theta^(-2i/rotary_dim)"),
        Column("wavelength", "float", "positions", "2π / inv_freq"),
        Column("scale_factor", "float", "", "reference_inv_freq / inv_freq (1: unchanged; factor: fully scaled)"),
        Column("effective_rope_theta", "float", "", "the base the frequencies come from (dynamic: at n_positions)"),
        Column("attention_scaling", "float", "", "factor transformers multiplies cos and sin by"),
    ),
)

ROPE_DECAY = Table(
    "rope_decay", "run × distance",
    "RoFormer's long-term decay bound (Su et al. 2021, §3.4.3) with the frequencies actually used.",
    (
        Column("distance", "int", "positions", "distance k, 0..n_positions - 1"),
        Column("relative_upper_bound", "float", "", "(1 / (d/2)) · Σ_j |Σ_{l<j} e^{i·k·θ_l}|"),
    ),
)


@register_stage
@dataclasses.dataclass(frozen=True)
class RopeGeometry(Stage):
    """inv_freq and rope_decay of rotary runs, and how their frequencies were resolved (:meth:`Rotary.resolve`)."""

    name = "rope_geometry"
    description = "the RoPE frequencies used per pair, RoFormer's decay bound, and how the rope type was resolved"
    applies_to = "rotary runs"
    tables = (INV_FREQ, ROPE_DECAY)
    summary = (
        Column("effective_rope_type", "str", "", "the Hugging Face rope type applied (inline, config or default)"),
        Column("attention_scaling", "float", "", "factor transformers multiplies cos and sin by (yarn, longrope)"),
        Column("rope_defaults", "str", "", "values nobody wrote, taken from the architecture's or transformers' "
               "defaults: name=value (source), ';'-separated"),
        Column("rope_rules", "str", "", "rules applied beyond reading a value, ';'-separated"),
        Column("rope_length", "Int64", "positions", "the length dynamic and longrope scaling were evaluated at"),
        Column("rope_factors", "str", "", "longrope: short or long factors used"),
    )
    uses = frozenset()

    def applies(self, ctx: RunContext) -> bool:
        from ..encodings.rotary import Rotary

        return isinstance(ctx.encoding, Rotary)

    def compute(self, ctx: RunContext) -> Output:
        from ..encodings.rotary import rope_decay_bound

        r = ctx.encoding.resolve(ctx.dim, ctx.n_positions)
        with np.errstate(divide="ignore", invalid="ignore"):  # proportional: zero-frequency pairs
            wavelength = np.where(r.inv_freq > 0, 2 * np.pi / r.inv_freq, np.inf)
            scale = np.where(r.inv_freq > 0, r.reference_inv_freq / r.inv_freq, np.inf)
        freqs = pd.DataFrame({
            "pair": np.arange(r.rotary_dim // 2),
            "inv_freq": r.inv_freq,
            "reference_inv_freq": r.reference_inv_freq,
            "wavelength": wavelength,
            "scale_factor": scale,
            "effective_rope_theta": r.effective_rope_theta,
            "attention_scaling": r.attention_scaling,
        })
        distance = np.arange(ctx.n_positions)
        decay = pd.DataFrame({"distance": distance, "relative_upper_bound": rope_decay_bound(r.inv_freq, distance)})
        return Output(summary=r.summary(), tables={"inv_freq": freqs, "rope_decay": decay})
