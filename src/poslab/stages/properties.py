"""Properties of position tables from the literature: monotonicity, translation invariance, symmetry, locality."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

from .._threads import analysis_threads
from .._validation import Integer, Real
from ..analysis.properties import LOCALITY_REACH, LOCALITY_TAU, kernel_properties, monotonicity, table_properties
from .base import Output, RunContext, Stage, register_stage, setting
from .schema import Column, Table

__all__ = ["Properties", "PROPERTIES"]

PROPERTIES = Table(
    "properties", "run × metric",
    "Properties from the literature (Wang et al., ICLR 2021; Chen et al., Findings of EMNLP 2023); definitions in "
    "poslab.analysis.properties.",
    (
        Column("metric", "str", "", "monotonicity_discordance (fraction of distance pairs n < m with S(x, x+m) >= "
               "S(x, x+n): violations of Wang et al.'s monotonicity; 0 strictly decreasing, 0.5 random), "
               "monotonicity_spearman (mean per-anchor Spearman rho of S against distance), "
               "translation_variance_ratio (within-diagonal / total sum of squares of S; 0: translation invariant), "
               "symmetry (Chen et al.'s row-mirror symmetry of the attention-like transform; 1: symmetric), "
               "locality (Chen et al.'s locality of the same transform; 1: each position attends to itself only)"),
        Column("value", "float", "", "the metric's value (dimensionless)"),
        Column("n_anchors", "int", "", "anchor positions it used"),
        Column("anchor_step", "int", "positions", "spacing of the anchors (1: every position)"),
        Column("window", "Int64", "positions", "largest distance it looks at: max_distance for monotonicity and "
               "translation invariance, the reach of the transform for symmetry and locality"),
        Column("transform", "str", "", "the attention-like transform symmetry and locality are computed on, with "
               "its parameters, e.g. softmax(S / 0.1) over |i - j| <= 64"),
        Column("reference", "str", "", "where the metric comes from"),
    ),
)


@register_stage
@dataclasses.dataclass(frozen=True)
class Properties(Stage):
    """The properties table."""

    name = "properties"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = "monotonicity, translation invariance, symmetry and locality of the similarity matrix"
    tables = (PROPERTIES,)
    uses = frozenset({"units", "profile"})
    kernel_only = True  # a kernel run's compute reads ctx.kernel and ctx.encoding alone

    locality_tau: float = setting(LOCALITY_TAU, Real(minimum=0, open_min=True),
                                  "temperature tau of the attention-like transform softmax(S / tau) of symmetry "
                                  "and locality (cosine similarity)")
    locality_reach: int = setting(LOCALITY_REACH, Integer(minimum=1),
                                  "keys on each side each position attends to in that transform (positions; only "
                                  "anchors with the whole reach inside the table are used, so the value does not "
                                  "depend on n_positions)")

    def compute(self, ctx: RunContext) -> Output:
        if ctx.kernel is not None:  # exact, from the Toeplitz kernel: no table needed
            return Output(tables={"properties": run_kernel_properties(ctx.kernel, ctx.n_positions, ctx.max_distance,
                                                                      self.locality_tau, self.locality_reach)})
        units, ranked = ctx.units, None
        if analysis_threads() > 1:  # monotonicity needs no profile: ranked (in threads: numpy's sorts release the
            # GIL) while the profile, which this stage is the first to ask for, is computed. The BLAS threads are
            # left as they are: their number can change the last bit of a product, and so a tie
            with ThreadPoolExecutor(1) as pool:
                future = pool.submit(monotonicity, units, ctx.max_distance)  # table_properties' anchors
                ctx.profile  # computed (and cached) here, beside the ranking
                ranked = future.result()
        props = table_properties(units, ctx.profile, tau=self.locality_tau, reach=self.locality_reach, ranked=ranked)
        return Output(tables={"properties": props.to_frame()})


def run_kernel_properties(kernel, n_positions: int, max_distance: int, tau: float, reach: int):
    """The properties of a run's kernel: of the mean over heads of its forward and backward kernels.

    A cosine kernel is transformed as a table's similarities, softmax(S / tau). An attention prior
    p = exp(b - b(0)) is already what a bias does to attention: its transform is softmax(log p) = p normalised
    (tau 1, recorded). A causal kernel has no forward keys: monotonicity is read backward (key - query = -k),
    and symmetry (left against right keys) is not defined (no row).
    """
    import numpy as np

    forward = np.nanmean(kernel.forward, axis=0) if kernel.direction != "causal" else None
    backward = np.nanmean(kernel.backward, axis=0)
    if kernel.scale == "attention_prior":
        with np.errstate(divide="ignore"):
            to_logit = np.log
        tau, what = 1.0, "softmax(log prior)"
    else:
        to_logit, what = (lambda x: x), None
    if forward is None:  # causal: the keys before the query only
        props = kernel_properties(to_logit(backward), to_logit(backward), n_positions=n_positions,
                                  max_distance=max_distance, tau=tau, reach=reach)
        frame = props.to_frame()
        frame = frame[frame["metric"] != "symmetry"].reset_index(drop=True)
        frame["transform"] = frame["transform"].str.replace("|i - j|", "i - j (causal: keys before the query)",
                                                            regex=False)
    else:
        frame = kernel_properties(to_logit(forward), to_logit(backward), n_positions=n_positions,
                                  max_distance=max_distance, tau=tau, reach=reach).to_frame()
    if what:
        frame["transform"] = frame["transform"].str.replace("softmax(S / 1)", what, regex=False)
    return frame
