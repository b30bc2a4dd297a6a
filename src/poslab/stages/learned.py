"""Learned tables: where the analysed rows came from (their patch grid is analysed by :mod:`.grid`)."""

from __future__ import annotations

import dataclasses

from .base import Output, RunContext, Stage, register_stage
from .schema import Column, Table

__all__ = ["LearnedSource"]


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
