"""What a run read: the Hub repo and snapshot commit of its checkpoint or config, and its learned table's SHA-256."""

from __future__ import annotations

import dataclasses

from .base import Output, RunContext, Stage, register_stage
from .schema import Column

__all__ = ["ModelRevision"]


def _model_encodings():
    """The kinds that read a model (imported here: poslab.encodings registers against the stages)."""
    from ..encodings.learned import Learned
    from ..encodings.rotary import Rotary
    from ..encodings.t5_buckets import T5Buckets

    return Learned, Rotary, T5Buckets


@register_stage
@dataclasses.dataclass(frozen=True)
class ModelRevision(Stage):
    """The Hugging Face repo and snapshot commit behind a learned table or a rotary config, and the table's SHA-256."""

    name = "model_revision"
    description = ("the Hugging Face repo and snapshot commit a learned table, rotary config or T5 bias table was "
                   "read from, and the table's fingerprint")
    applies_to = "learned, rotary and t5_buckets runs"
    summary = (
        Column("source_repo", "str", "", "ORG/NAME of the Hugging Face repo the learned table, rotary config or T5 "
               "bias table was read from (a Hub id or a cache entry); empty for plain files and folders, bundled "
               "tables, runs"),
        Column("source_revision", "str", "", "the snapshot commit read (what refs/main or @REVISION pointed to); "
               "empty when source_repo is"),
        Column("table_sha256", "str", "", "SHA-256 of the stored learned table's or T5 bias table's values (every "
               "row, as little-endian float64 in C order): the same table gives the same fingerprint, whatever file or format it came "
               "from; empty for rotary runs"),
    )
    uses = frozenset()

    def applies(self, ctx: RunContext) -> bool:
        return isinstance(ctx.encoding, _model_encodings())

    def compute(self, ctx: RunContext) -> Output:
        from ..checkpoints.sources import snapshot_of

        learned, _, t5 = _model_encodings()
        if isinstance(ctx.encoding, (learned, t5)):
            stored = ctx.encoding.stored()
            repo, revision, sha = stored.repo_id, stored.revision, stored.sha256
        else:  # the config.json actually read lies in its snapshot when it came from the cache or the Hub
            config = ctx.encoding.read_config()
            repo, revision = (snapshot_of(config.path) if config is not None else None) or (None, None)
            sha = None
        return Output(summary={"source_repo": repo, "source_revision": revision, "table_sha256": sha})
