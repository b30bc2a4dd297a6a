"""Learned tables: where the analysed rows came from, and vision tables on their 2-D patch grid."""

from __future__ import annotations

import dataclasses

from ..analysis.grid import grid_similarity
from .base import Output, RunContext, Stage, register_stage
from .schema import Column, Table

__all__ = ["LearnedSource", "Grid", "GRID_PROFILES", "GRID_MAPS"]


def _learned(ctx: RunContext):
    """The run's Learned encoding, or None (imported here: poslab.encodings registers against the stages)."""
    from ..encodings.learned import Learned

    return ctx.encoding if isinstance(ctx.encoding, Learned) else None


@register_stage
@dataclasses.dataclass(frozen=True)
class LearnedSource(Stage):
    """Which stored tensor and rows a learned run analysed."""

    name = "learned_source"
    description = "the tensor, dtype, row of position 0 and patch grid of a learned table"
    applies_to = "learned runs"
    summary = (
        Column("tensor", "str", "", "tensor name (or file name) the table was read from"),
        Column("source_dtype", "str", "", "dtype as stored (bfloat16 and float16 are upcast exactly)"),
        Column("row_offset", "Int64", "", "row of position 0 in the stored table"),
        Column("grid_shape", "str", "patches", "ROWSxCOLS patch grid of a vision table (empty for text tables)"),
        Column("prefix_tokens", "Int64", "", "rows before the patch grid (vision tables)"),
        Column("position_rule", "str", "", "how rows map to positions: the source's rule, or the offset given"),
    )
    uses = frozenset()

    def applies(self, ctx: RunContext) -> bool:
        return _learned(ctx) is not None

    def compute(self, ctx: RunContext) -> Output:
        enc = _learned(ctx)
        stored = enc.stored()
        offset, grid = enc._layout()
        return Output(summary={"tensor": stored.tensor, "source_dtype": stored.source_dtype, "row_offset": offset,
                               "grid_shape": f"{grid[0]}x{grid[1]}" if grid else None,
                               "prefix_tokens": offset if grid else None, "position_rule": enc.position_rule()})


GRID_PROFILES = Table(
    "grid_profiles", "run × metric × distance",
    "Vision tables on their patch grid: similarity against distance on the grid, pairs grouped four ways "
    "(the flattened index's neighbours wrap across rows).",
    (
        Column("metric", "str", "", "euclidean sqrt(dr² + dc²), manhattan |dr| + |dc|, along_row (same row, |dc|), "
               "along_column (same column, |dr|)"),
        Column("distance", "float", "patches", "distance on the grid"),
        Column("mean_similarity", "float", "cosine similarity", "mean over the pairs of patches at that distance"),
        Column("std_similarity", "float", "cosine similarity", "their population standard deviation"),
        Column("n_pairs", "int", "", "unordered pairs of valid patches averaged"),
    ),
)

GRID_MAPS = Table(
    "grid_maps", "run × patch",
    "Similarity of every patch to the centre patch.",
    (
        Column("row", "int", "patches", "patch row"),
        Column("col", "int", "patches", "patch column"),
        Column("reference_row", "int", "patches", "row of the centre patch (rows // 2)"),
        Column("reference_col", "int", "patches", "column of the centre patch (cols // 2)"),
        Column("similarity", "float", "cosine similarity", "similarity to the centre patch (empty: excluded patch)"),
    ),
)


@register_stage
@dataclasses.dataclass(frozen=True)
class Grid(Stage):
    """Vision tables analysed on their whole 2-D patch grid, on the raw vectors.

    Only when the run's window is the whole grid (n_positions = ROWS·COLS): the first n patches of a
    shorter window are a few grid rows and a partial one, not the grid, so the grid tables are left
    empty for that run and ``grid_skipped`` says why (its 1-D profile covers the n patches asked for).
    """

    name = "grid"
    description = ("similarity against distance on the 2-D patch grid, and the centre patch's similarity map "
                   "(runs whose window is the whole grid)")
    applies_to = "learned runs with a patch grid (vision tables)"
    tables = (GRID_PROFILES, GRID_MAPS)
    summary = (
        Column("grid_skipped", "str", "", "why grid_profiles / grid_maps hold no rows for this vision run (a "
               "window shorter than the grid); empty when the whole grid was analysed"),
    )
    uses = frozenset()

    def applies(self, ctx: RunContext) -> bool:
        enc = _learned(ctx)
        return enc is not None and enc._layout()[1] is not None

    def compute(self, ctx: RunContext) -> Output:
        enc = _learned(ctx)
        _, grid = enc._layout()
        n = grid[0] * grid[1]
        if ctx.n_positions < n:
            full, rest = divmod(ctx.n_positions, grid[1])
            why = (f"n_positions = {ctx.n_positions} covers {ctx.n_positions} of the {n} patches of the "
                   f"{grid[0]}x{grid[1]} grid ({full} full row(s)" + (f" and {rest} patch(es)" if rest else "")
                   + f"); the grid tables need the whole grid: n_positions = {n}")
            return Output(summary={"grid_skipped": why})
        result = grid_similarity(ctx.table, grid)
        return Output(summary={"grid_skipped": None},
                      tables={"grid_profiles": result.to_frame(), "grid_maps": result.map_frame()})
