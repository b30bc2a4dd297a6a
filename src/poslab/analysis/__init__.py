"""Analysis: pure functions over a position table or a profile; no plotting, no files."""

from .bands import DEFAULT_THRESHOLDS, BandMetrics, band_metrics
from .decay import DECAY_MODELS, DecayFit, DecayFits, DecayModel, fit_decay
from .heatmap import BlockSimilarity, block_similarity
from .profile import SimilarityProfile, similarity_profile
from .similarity import InvalidPositionsWarning, UnitRows, cosine_similarity, unit_rows

__all__ = [
    "DECAY_MODELS",
    "DEFAULT_THRESHOLDS",
    "BandMetrics",
    "BlockSimilarity",
    "DecayFit",
    "DecayFits",
    "DecayModel",
    "InvalidPositionsWarning",
    "SimilarityProfile",
    "UnitRows",
    "band_metrics",
    "block_similarity",
    "cosine_similarity",
    "fit_decay",
    "similarity_profile",
    "unit_rows",
]
