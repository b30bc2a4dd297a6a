"""Properties of position tables from the literature: monotonicity, translation invariance, symmetry, locality."""

from __future__ import annotations

import dataclasses

from ..analysis.properties import table_properties
from .base import Output, RunContext, Stage, register_stage
from .schema import Column, Table

__all__ = ["Properties", "PROPERTIES"]

PROPERTIES = Table(
    "properties", "run × metric",
    "Properties from the literature (Wang et al., ICLR 2021; Chen et al., Findings of EMNLP 2023).",
    (
        Column("metric", "str", "", "monotonicity_spearman, monotonicity_violation_rate, translation_variance_ratio, "
               "symmetry_deviation, locality"),
        Column("value", "float", "", "the metric's value (dimensionless)"),
        Column("n_anchors", "int", "", "anchor positions it used"),
        Column("anchor_step", "int", "positions", "spacing of the anchors (1: every position)"),
        Column("reference", "str", "", "where the metric comes from"),
    ),
)


@register_stage
@dataclasses.dataclass(frozen=True)
class Properties(Stage):
    """The properties table."""

    name = "properties"
    description = "monotonicity, translation invariance, symmetry and locality of the similarity matrix"
    tables = (PROPERTIES,)
    uses = frozenset({"units", "profile"})

    def applies(self, ctx: RunContext) -> bool:
        return getattr(ctx.encoding, "generates_table", True)  # until the kernel variant (helper S)

    def compute(self, ctx: RunContext) -> Output:
        return Output(tables={"properties": table_properties(ctx.units, ctx.profile).to_frame()})
