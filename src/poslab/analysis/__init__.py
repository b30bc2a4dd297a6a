"""Analysis: pure functions over a position table or a profile; no plotting, no files.

The names below are imported on first use (PEP 562 module ``__getattr__``),
so ``import poslab.analysis`` loads neither pandas nor scipy until a function
that needs them is used.
"""

from .._lazy import lazy_exports

#: Public name -> the submodule that defines it.
_EXPORTS = {
    "DEFAULT_THRESHOLDS": "bands",
    "BandMetrics": "bands",
    "band_metrics": "bands",
    "DECAY_MODELS": "decay",
    "DecayFit": "decay",
    "DecayFits": "decay",
    "DecayModel": "decay",
    "fit_decay": "decay",
    "BlockSimilarity": "heatmap",
    "block_similarity": "heatmap",
    "SimilarityProfile": "profile",
    "similarity_profile": "profile",
    "InvalidPositionsWarning": "similarity",
    "UnitRows": "similarity",
    "cosine_similarity": "similarity",
    "unit_rows": "similarity",
    "ProfileSummaries": "summaries",
    "profile_summaries": "summaries",
    "summaries_many": "summaries",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
