"""Block-averaged similarity matrices, the data of the heatmap figures."""

from __future__ import annotations

import dataclasses

from .._validation import Integer
from ..analysis.heatmap import _block_similarity, kernel_block_means
from .base import Output, RunContext, Stage, register_stage, setting
from .schema import Column, Table

__all__ = ["Heatmap", "HEATMAPS"]

HEATMAPS = Table(
    "heatmaps", "run × block pair",
    "The cosine-similarity matrix (kernel runs: the kernel's n × n Toeplitz matrix, on its scale) averaged over "
    "blocks of positions (never formed: block sums of unit vectors, or prefix sums of the kernel).",
    (
        Column("row_start", "int", "positions", "first position of the row block", required=True),
        Column("row_stop", "int", "positions", "end of the row block (half-open)", required=True),
        Column("col_start", "int", "positions", "first position of the column block", required=True),
        Column("col_stop", "int", "positions", "end of the column block (half-open)", required=True),
        Column("mean_similarity", "float", "cosine similarity", "mean of S over the block pair (kernel runs: of the "
               "kernel on its scale, summary.csv's kernel column; empty where a causal kernel covers no entry)",
               required=True),
    ),
    keys="short",
    always=True,
)


@register_stage
@dataclasses.dataclass(frozen=True)
class Heatmap(Stage):
    """The heatmaps table: S averaged over heatmap_bins x heatmap_bins blocks."""

    name = "heatmap"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = "the similarity matrix averaged over blocks, in O(n · dim) (kernel runs: from the kernel, O(n))"
    tables = (HEATMAPS,)
    uses = frozenset({"units"})
    kernel_only = True  # a kernel run's compute reads ctx.kernel and ctx.encoding alone

    heatmap_bins: int = setting(128, Integer(minimum=2),
                                "blocks per axis of the stored heatmaps (at most n_positions; a shorter entry uses "
                                "as many as it has positions)")

    def compute(self, ctx: RunContext) -> Output:
        if ctx.kernel is None:
            return Output(tables={"heatmaps": _block_similarity(ctx.units, self.heatmap_bins).to_frame()})
        n = ctx.n_positions
        kernel = ctx.kernel if ctx.kernel.max_distance == n - 1 else ctx.encoding.kernel(n, n - 1, ctx.dim)
        return Output(tables={"heatmaps": kernel_block_means(kernel, n, self.heatmap_bins).to_frame()})
