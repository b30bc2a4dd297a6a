"""Analysis: pure functions over a position table or a profile; no plotting, no files."""

from .bands import DEFAULT_THRESHOLDS, BandMetrics, band_metrics
from .decay import DECAY_MODELS, DecayFit, DecayFits, DecayModel, fit_decay
from .heatmap import BlockSimilarity, block_similarity
from .profile import SimilarityProfile, similarity_profile
from .similarity import InvalidPositionsWarning, UnitRows, cosine_similarity, unit_rows
from .summaries import ProfileSummaries, profile_summaries, summaries_many

__all__ = [
    "DECAY_MODELS",
    "DEFAULT_THRESHOLDS",
    "BandMetrics",
    "BlockSimilarity",
    "DecayFit",
    "DecayFits",
    "DecayModel",
    "InvalidPositionsWarning",
    "ProfileSummaries",
    "SimilarityProfile",
    "UnitRows",
    "band_metrics",
    "block_similarity",
    "cosine_similarity",
    "fit_decay",
    "profile_summaries",
    "similarity_profile",
    "summaries_many",
    "unit_rows",
]
