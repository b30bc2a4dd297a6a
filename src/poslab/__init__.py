"""poslab: comparative studies of positional encodings in transformers.

The core API is importable from here; studies, results and figures live in
:mod:`poslab.study` and :mod:`poslab.plots` (which import matplotlib).

Every name is imported on first use (PEP 562 module ``__getattr__``), so
``import poslab`` and the command line's ``--help`` stay fast: neither loads
pandas, scipy.stats, scipy.optimize or matplotlib until a function that needs
them is called.
"""

from ._lazy import lazy_exports

__version__ = "0.1.0"

#: Public name -> the subpackage that defines it.
_EXPORTS = {
    "band_metrics": "analysis",
    "block_similarity": "analysis",
    "cosine_similarity": "analysis",
    "fit_decay": "analysis",
    "similarity_profile": "analysis",
    "Encoding": "encodings",
    "available_encodings": "encodings",
    "make_encoding": "encodings",
    "register": "encodings",
}

__all__ = sorted([*_EXPORTS, "__version__"])


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
