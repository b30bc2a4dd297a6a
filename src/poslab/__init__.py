"""poslab: comparative studies of positional encodings in transformers.

The core API is importable from here; studies, results and figures live in
:mod:`poslab.study` and :mod:`poslab.plots` (which import matplotlib).
"""

__version__ = "0.1.0"

from .analysis import (  # noqa: E402
    band_metrics,
    block_similarity,
    cosine_similarity,
    fit_decay,
    similarity_profile,
)
from .encodings import Encoding, available_encodings, make_encoding, register  # noqa: E402

__all__ = [
    "Encoding",
    "__version__",
    "available_encodings",
    "band_metrics",
    "block_similarity",
    "cosine_similarity",
    "fit_decay",
    "make_encoding",
    "register",
    "similarity_profile",
]
