"""Band widths: how far the similarity band around the diagonal reaches, at each threshold."""

from __future__ import annotations

import dataclasses

from .._validation import ListOf, Real
from ..analysis.bands import DEFAULT_THRESHOLDS
from .base import Output, RunContext, Stage, register_stage, setting
from .schema import Column, Family, Table

__all__ = ["Bands", "BANDS", "BAND_WIDTH"]


def _render(threshold: float) -> str:
    """0.9 -> "0p9", -0.5 -> "m0p5", 0.0 -> "0"."""
    return f"{threshold:g}".replace("-", "m").replace(".", "p")


def _parse(text: str) -> float:
    return float(text.replace("m", "-").replace("p", "."))


#: The band widths: one summary column per threshold t, the prefix then t with "-" as m and "." as p
#: (0.9 -> 0p9, -0.5 -> m0p5, 0 -> 0).
BAND_WIDTH = Family("band_width_", "Int64", "positions",
                    "band width at threshold t: first distance at which the mean profile falls below t",
                    interval=True, beyond_window=True, console=True, heading="width_",
                    placeholder="<t>",
                    render=_render, parse=_parse, setting="thresholds")

BANDS = Table(
    "bands", "run × threshold",
    "How far the similarity band around the diagonal reaches.",
    (
        Column("threshold", "float", "cosine similarity", "similarity level t", required=True),
        Column("width", "Int64", "positions", "first distance at which the mean profile falls below t",
               required=True, beyond_window=True),
        Column("recrosses", "bool", "", "the profile rises back above t later (as sinusoidal profiles do)"),
        Column("crossings", "int", "", "number of downward crossings of t"),
    ),
    always=True,
)


@register_stage
@dataclasses.dataclass(frozen=True)
class Bands(Stage):
    """Band widths at each threshold, with re-crossings."""

    name = "bands"
    description = "first crossing of each similarity threshold by the profile, and re-crossings"
    tables = (BANDS,)
    summary = (BAND_WIDTH,)
    uses = frozenset({"bands"})

    thresholds: tuple[float, ...] = setting(DEFAULT_THRESHOLDS, ListOf(Real(minimum=-1, maximum=1), distinct=True),
                                            "band-width thresholds (cosine similarity levels)")

    def compute(self, ctx: RunContext) -> Output:
        frame = ctx.bands.to_frame()
        return Output(summary={BAND_WIDTH.member(t): w for t, w in zip(frame["threshold"], frame["width"])},
                      tables={"bands": frame})
