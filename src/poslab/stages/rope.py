"""RoPE geometry of rotary runs: the frequencies used, RoFormer's long-term decay bound, and the model's layers.

A rotary run read from a model's config also records the model's per-layer inventory
(``rope_layers``: every layer type, its layers and its RoPE, the one analysed, the layers
without RoPE) and, for Llama 4's layers without RoPE, their query temperature by position
(``nope_temperature``).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from .base import Output, RunContext, Stage, register_stage
from .schema import Column, Table

__all__ = ["RopeGeometry", "RopeLayers", "INV_FREQ", "ROPE_DECAY", "ROPE_LAYERS", "NOPE_TEMPERATURE"]

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

#: rope_decay has a row at every distance below this, then at as many geometrically spaced distances.
BOUND_DENSE = 4096

ROPE_DECAY = Table(
    "rope_decay", "run × distance",
    "RoFormer's long-term decay bound (Su et al. 2021, §3.4.3) with the frequencies actually used.",
    (
        Column("distance", "int", "positions", f"distance k: every distance 0..n_positions - 1 up to "
               f"{2 * BOUND_DENSE} positions; beyond, every distance 0..{BOUND_DENSE - 1}, then {BOUND_DENSE} "
               "geometrically spaced distances up to n_positions - 1 (included): at most "
               f"{2 * BOUND_DENSE} rows per run at any length"),
        Column("relative_upper_bound", "float", "", "(1 / (d/2)) · Σ_j |Σ_{l<j} e^{i·k·θ_l}|"),
    ),
    keys="short",
)


def bound_distances(n_positions: int) -> np.ndarray:
    """The distances rope_decay has a row at (int64, increasing, unique): every one up to 2 · BOUND_DENSE
    positions; beyond, 0 .. BOUND_DENSE - 1, then BOUND_DENSE geometrically spaced distances up to n_positions - 1."""
    if n_positions <= 2 * BOUND_DENSE:
        return np.arange(n_positions, dtype=np.int64)
    dense = np.arange(BOUND_DENSE, dtype=np.int64)
    far = np.geomspace(BOUND_DENSE, n_positions - 1, BOUND_DENSE).round().astype(np.int64)
    return np.unique(np.concatenate([dense, far, [n_positions - 1]]))


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
        distance = bound_distances(ctx.n_positions)
        decay = pd.DataFrame({"distance": distance, "relative_upper_bound": rope_decay_bound(r.inv_freq, distance)})
        return Output(summary=r.summary(), tables={"inv_freq": freqs, "rope_decay": decay})


ROPE_LAYERS = Table(
    "rope_layers", "run × layer type of its model",
    "The model's layers by layer type (from its config.json, as transformers builds them): which layers, "
    "their RoPE or why they have none, and which one the run analysed.",
    (
        Column("layer_group", "str", "", "layer type (layer_types); 'TYPE (no RoPE)' for layers of a type that "
               "skip RoPE while others apply it; 'all' without a layer pattern"),
        Column("n_layers", "int", "", "how many layers"),
        Column("layers", "str", "", "their indices (0-based), as ranges"),
        Column("analysed", "bool", "", "this run analysed this layer type's RoPE"),
        Column("has_rope", "bool", "", "the layers rotate queries and keys (false: no positional geometry)"),
        Column("rope", "str", "", "rope type, base, widths and scaling parameters; empty without RoPE"),
        Column("no_rope", "str", "", "why the layers have no RoPE; empty with RoPE"),
        Column("attention_window", "Int64", "positions", "sliding_window / attention_chunk_size of these layers "
               "when the config gives one: larger distances never meet in them"),
    ),
)

NOPE_TEMPERATURE = Table(
    "nope_temperature", "run × position",
    "Llama 4's query temperature on its layers without RoPE (attn_temperature_tuning): queries at position p are "
    "multiplied by 1 + attn_scale·ln(⌊(p + 1) / floor_scale⌋ + 1); one row where it changes, over the model's "
    "context (max(n_positions, max_position_embeddings)).",
    (
        Column("layer_group", "str", "", "the layer type without RoPE"),
        Column("position", "int", "positions", "p: the first position with this scale (and the last position)"),
        Column("query_scale", "float", "", "factor on the queries at position p (1 below p + 1 = floor_scale)"),
    ),
    keys="short",
)

#: Rows of nope_temperature at most (beyond: log-spaced steps, first and last kept).
MAX_TEMPERATURE_ROWS = 4096


def _ranges(layers) -> str:
    from ..checkpoints.inspect import _ranges as ranges

    return ranges(list(layers))


def temperature_rows(temperature, last_position: int) -> tuple[np.ndarray, np.ndarray]:
    """(position, query_scale) where the scale changes, from 0 to ``last_position`` (int64, float64)."""
    steps = np.arange(1, (last_position + 1) // temperature.floor_scale + 1, dtype=np.int64)
    if steps.size > MAX_TEMPERATURE_ROWS:
        keep = np.unique(np.geomspace(1, steps[-1], MAX_TEMPERATURE_ROWS).astype(np.int64))
        steps = np.union1d(keep, steps[-1:])
    position = np.unique(np.concatenate([[0], steps * temperature.floor_scale - 1, [last_position]]))
    return position, temperature.scale(position)


@register_stage
@dataclasses.dataclass(frozen=True)
class RopeLayers(Stage):
    """The model's per-layer RoPE inventory for a rotary run read from a config (:func:`read_rope_inventory`)."""

    name = "rope_layers"
    description = ("the model's layers by layer type and the RoPE of each (the one analysed), the layers without "
                   "RoPE, and Llama 4's query temperature on them")
    applies_to = "rotary runs with a config"
    tables = (ROPE_LAYERS, NOPE_TEMPERATURE)
    summary = (
        Column("rope_layer_group", "str", "", "the layer type whose RoPE the run analysed (rotary with a config)"),
        Column("rope_layers_analysed", "Int64", "", "how many of the model's layers apply the RoPE analysed"),
        Column("nope_layers", "Int64", "", "how many of the model's layers apply no RoPE (no positional geometry)"),
    )
    uses = frozenset()

    def applies(self, ctx: RunContext) -> bool:
        from ..encodings.rotary import Rotary

        return isinstance(ctx.encoding, Rotary) and ctx.encoding.config is not None

    def compute(self, ctx: RunContext) -> Output:
        from ..encodings.model_config import read_rope_inventory

        inv = read_rope_inventory(ctx.encoding.config)
        chosen = ctx.encoding.read_config()
        rows, nope_rows = [], []
        for g in inv.groups:
            analysed = g.rope is not None and (g.rope is chosen or g.rope.same_rope(chosen)) and (
                ctx.encoding.layer_type is None or ctx.encoding.layer_type in (g.name, g.layer_type))
            rows.append({"layer_group": g.name, "n_layers": g.count, "layers": _ranges(g.layers),
                         "analysed": bool(analysed), "has_rope": g.rope is not None,
                         "rope": g.rope.describe() if g.rope is not None else None, "no_rope": g.no_rope,
                         "attention_window": g.attention_window[1] if g.attention_window else None})
            if g.temperature is not None:
                last = max(ctx.n_positions, chosen.max_position_embeddings or 0) - 1
                position, scale = temperature_rows(g.temperature, last)
                nope_rows.append(pd.DataFrame({"layer_group": g.name, "position": position, "query_scale": scale}))
        layers = pd.DataFrame(rows).astype({"attention_window": "Int64"})
        tables = {"rope_layers": layers}
        if nope_rows:
            tables["nope_temperature"] = pd.concat(nope_rows, ignore_index=True)
        summary = {"rope_layer_group": ", ".join(layers.loc[layers["analysed"], "layer_group"]) or None,
                   "rope_layers_analysed": int(layers.loc[layers["analysed"], "n_layers"].sum()),
                   "nope_layers": int(layers.loc[~layers["has_rope"], "n_layers"].sum())}
        return Output(summary=summary, tables=tables)
