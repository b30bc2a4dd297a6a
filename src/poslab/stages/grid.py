"""Positions that are points of a grid, analysed on the grid: one stage for every encoding that declares one.

An encoding declares its grid with :meth:`poslab.encodings.Encoding.grid_shape`
(a vision table's patch grid, the (t, h, w) grid of an M-RoPE, axial RoPE or
2-D sin-cos run); rows are the grid points in C order and the window is the
whole grid (a shorter one is refused when the study is read). This stage groups
pairs by their displacement on the grid. The flattened row index is not a
distance, so the 1-D stages (``positions = "line"``: profile, summaries, fits,
bands, bootstrap, window sensitivity, properties, heatmap) do not apply to
these runs: their columns are empty and ``not_applicable`` says so
(:meth:`poslab.stages.Stage.not_applicable`).
"""

from __future__ import annotations

import dataclasses

from ..analysis.grid import grid_similarity
from .base import Output, RunContext, Stage, register_stage
from .schema import Column, Table

__all__ = ["Grid", "AxisFrequencies", "GRID_PROFILES", "GRID_MAPS", "GRID_DISPLACEMENTS", "AXIS_FREQ"]

GRID_PROFILES = Table(
    "grid_profiles", "run × metric × distance",
    "Runs whose positions are points of a grid (vision tables, M-RoPE, axial RoPE, 2-D sin-cos): similarity "
    "against distance on the grid, pairs grouped by metric (the flattened index's neighbours wrap across rows).",
    (
        Column("metric", "str", "", "euclidean sqrt(Σ d²) over every axis, manhattan Σ |d|, along_row (same row "
               "and frame, |dw|), along_column (same column and frame, |dh|), along_frame (3-D grids: same (h, w), "
               "|dt|)"),
        Column("distance", "float", "grid steps", "distance on the grid (patches; frames for along_frame)"),
        Column("mean_similarity", "float", "cosine similarity", "mean over the pairs of points at that distance"),
        Column("std_similarity", "float", "cosine similarity", "their population standard deviation"),
        Column("n_pairs", "int", "", "unordered pairs of valid points averaged"),
    ),
    keys="short",
)

GRID_DISPLACEMENTS = Table(
    "grid_displacements", "run × displacement",
    "Similarity jointly by displacement (dt, dh, dw) on the grid; each unordered pair once, under the "
    "displacement whose first non-zero component is positive (d and -d hold the same pairs).",
    (
        Column("dt", "Int64", "frames", "displacement along t (empty for 2-D grids)"),
        Column("dh", "int", "rows", "displacement along h (rows)"),
        Column("dw", "int", "columns", "displacement along w (columns)"),
        Column("mean_similarity", "float", "cosine similarity", "mean over the pairs at that displacement"),
        Column("std_similarity", "float", "cosine similarity", "their population standard deviation (0 for an "
               "encoding whose similarity depends on the displacement alone)"),
        Column("n_pairs", "int", "", "unordered pairs of valid points averaged"),
    ),
    keys="short",
)

GRID_MAPS = Table(
    "grid_maps", "run × grid point",
    "Similarity of every grid point to the centre point.",
    (
        Column("frame", "Int64", "frames", "frame t of the point (empty for 2-D grids)"),
        Column("row", "int", "patches", "row h of the point"),
        Column("col", "int", "patches", "column w of the point"),
        Column("reference_frame", "Int64", "frames", "frame of the centre point (frames // 2; empty for 2-D grids)"),
        Column("reference_row", "int", "patches", "row of the centre point (rows // 2)"),
        Column("reference_col", "int", "patches", "column of the centre point (cols // 2)"),
        Column("similarity", "float", "cosine similarity", "similarity to the centre point (empty: excluded point)"),
    ),
    keys="short",
)


def _grid(ctx: RunContext):
    return ctx.encoding.grid_shape(ctx.n_positions)


@register_stage
@dataclasses.dataclass(frozen=True)
class Grid(Stage):
    """Runs whose positions are points of a 2-D or 3-D grid, analysed on the whole grid, on the raw vectors.

    The run's window is the whole grid (encodings refuse another ``n_positions`` when the study is
    read: the first n points of a grid are a few rows and a partial one, neither a grid nor a line).
    """

    name = "grid"
    description = ("similarity against displacement and distance on the grid, and the centre point's similarity "
                   "map (runs whose positions are points of a grid; their window is the whole grid)")
    applies_to = "runs whose encoding declares a grid (Encoding.grid_shape): vision tables, M-RoPE, axial RoPE, 2-D sin-cos"
    tables = (GRID_PROFILES, GRID_DISPLACEMENTS, GRID_MAPS)
    uses = frozenset()

    def applies(self, ctx: RunContext) -> bool:
        return ctx.positions == "grid"

    def compute(self, ctx: RunContext) -> Output:
        result = grid_similarity(ctx.table, tuple(_grid(ctx)))
        return Output(tables={"grid_profiles": result.to_frame(), "grid_displacements": result.displacement_frame(),
                              "grid_maps": result.map_frame()})


AXIS_FREQ = Table(
    "axis_freq", "run × frequency pair",
    "Multi-axis RoPE runs (mrope, axial_rope): the frequency of every pair and the grid axis it turns with.",
    (
        Column("pair", "int", "", "frequency pair i (dims 2i, 2i+1 interleaved; i, i + d/2 half)"),
        Column("axis", "str", "", "the axis pair i turns with: t, h or w (text tokens: all three are the position)"),
        Column("inv_freq", "float", "radians per grid step", "frequency θ_i used"),
        Column("wavelength", "float", "grid steps", "2π / inv_freq"),
    ),
)


def _axes(ctx: RunContext):
    """The run's AxesResolution, or None (imported here: poslab.encodings registers against the stages)."""
    from ..encodings.axial import AxialRope
    from ..encodings.mrope import MRope

    enc = ctx.encoding
    if isinstance(enc, MRope):
        return enc.resolve(ctx.dim, ctx.n_positions)
    if isinstance(enc, AxialRope):
        return enc.resolve()
    return None


@register_stage
@dataclasses.dataclass(frozen=True)
class AxisFrequencies(Stage):
    """Which frequency pairs turn with which axis in M-RoPE and axial RoPE runs, and where the values came from."""

    name = "axis_frequencies"
    description = "the frequency of every pair and the axis (t, h, w) it turns with, and how they were resolved"
    applies_to = "mrope and axial_rope runs"
    tables = (AXIS_FREQ,)
    summary = (
        Column("axis_layout", "str", "", "how pairs are given to axes: chunked, interleaved (M-RoPE) or axial"),
        Column("axis_pairs", "str", "", "the pairs of each axis, e.g. 't: 16 pairs (0-15); h: 24 pairs (16-39); ...'"),
        Column("axis_sources", "str", "", "where each value came from: name=source, ';'-separated"),
        Column("axis_rules", "str", "", "rules applied beyond reading a value, ';'-separated"),
    )
    uses = frozenset()

    def applies(self, ctx: RunContext) -> bool:
        return _axes(ctx) is not None

    def compute(self, ctx: RunContext) -> Output:
        import numpy as np
        import pandas as pd

        r = _axes(ctx)
        names = np.array(r.axes)[r.axis]
        table = pd.DataFrame({"pair": np.arange(len(r.inv_freq)), "axis": names, "inv_freq": r.inv_freq,
                              "wavelength": 2 * np.pi / np.asarray(r.inv_freq)})
        return Output(summary={"axis_layout": r.layout, "axis_pairs": r.describe(),
                               "axis_sources": "; ".join(f"{k}={v}" for k, v in r.sources.items()) or None,
                               "axis_rules": "; ".join(r.rules) or None},
                      tables={"axis_freq": table})
