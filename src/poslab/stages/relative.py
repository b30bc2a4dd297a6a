"""What a T5-bucket or FIRE run read, and the rules it applied (values nobody wrote, the query FIRE is read at)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .base import Output, RunContext, Stage, register_stage
from .schema import Column

__all__ = ["BiasSource"]


def _kinds():
    """The bias kinds read from a file (imported here: poslab.encodings registers against the stages)."""
    from ..encodings.fire import Fire
    from ..encodings.t5_buckets import T5Buckets

    return T5Buckets, Fire


@register_stage
@dataclasses.dataclass(frozen=True)
class BiasSource(Stage):
    """The bias table or weights a t5_buckets or fire run read, and the rules behind its kernel."""

    name = "bias_source"
    description = "the bias tensor or weights file of a T5-bucket or FIRE run, and the rules its kernel follows"
    applies_to = "t5_buckets and fire runs"
    summary = (
        Column("bias_tensor", "str", "", "t5_buckets: the tensor (or file) the bias table was read from; fire: the "
               "weights file"),
        Column("bias_rules", "str", "", "t5_buckets: direction, buckets and relative_attention_max_distance with "
               "their source, and every value nobody wrote; fire: the threshold L and whether the window's queries "
               "share its normaliser"),
        Column("kernel_query", "Int64", "positions", "fire: the query position whose kernel is reported (keys "
               "0 .. kernel_query behind it)"),
    )
    uses = frozenset()

    def applies(self, ctx: RunContext) -> bool:
        return isinstance(ctx.encoding, _kinds())

    def compute(self, ctx: RunContext) -> Output:
        t5, _ = _kinds()
        enc = ctx.encoding
        if isinstance(enc, t5):
            r = enc.resolve()
            st = r.stored
            where = "config.json" if st.model_type else ("the shipped table" if st.reason.startswith("shipped")
                                                         else "given" if enc.relative_attention_max_distance else "")
            rules = [f"{'bidirectional' if r.bidirectional else 'causal'} buckets"
                     + (f" ({st.stack} table)" if st.stack else ""),
                     f"{r.num_buckets} buckets (the table's rows), {r.n_heads} heads",
                     f"relative_attention_max_distance={r.max_distance}" + (f" ({where})" if where else ""),
                     *r.rules]
            return Output(summary={"bias_tensor": st.tensor, "bias_rules": "; ".join(rules)})
        w = enc.read()
        query = enc.query(ctx.n_positions)
        shared = enc.invariant_within(ctx.n_positions)
        rules = [f"query {query}" + (" (the last of the window)" if enc.query_position is None else " (given)"),
                 f"threshold L={w.threshold:g}, c={w.c:g}",
                 "every query of the window has the normaliser psi(L): the bias depends on the distance alone" if shared
                 else "queries beyond L have their own normaliser psi(i): the kernel is that of this query only"]
        return Output(summary={"bias_tensor": Path(enc.weights).name, "bias_rules": "; ".join(rules),
                               "kernel_query": query})
