"""Figures from poslab's tidy tables.

:data:`STUDY_FIGURES` maps each study figure's file name to a function
``(tables, title) -> Figure | None`` that draws it from the result tables
alone (None when the tables it needs are absent or empty). A module that adds
a table adds its figure here.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from matplotlib.figure import Figure

from .core import plot_decay_curves, plot_similarity_heatmaps, save_figure
from .grid import grid_figure
from .rope import rope_figure
from .training import emergence_figure
from .uncertainty import forest_figure, plot_decay_length_forest

__all__ = ["plot_similarity_heatmaps", "plot_decay_curves", "plot_decay_length_forest", "save_figure", "STUDY_FIGURES"]


def _nonempty(tables: dict[str, pd.DataFrame], name: str) -> bool:
    return name in tables and len(tables[name]) > 0


def _heatmaps(tables, title):
    return plot_similarity_heatmaps(tables["heatmaps"], title=title) if _nonempty(tables, "heatmaps") else None


def _decay(tables, title):
    if not _nonempty(tables, "profiles"):
        return None
    return plot_decay_curves(tables["profiles"], summary=tables.get("summary"), title=title)


#: file name -> function(tables, title) returning a Figure, or None to skip.
STUDY_FIGURES: dict[str, Callable[[dict[str, pd.DataFrame], str | None], Figure | None]] = {
    "similarity_heatmaps.png": _heatmaps,
    "decay_curves.png": _decay,
    "grid_profiles.png": grid_figure,  # vision tables on their patch grid (learned runs with a grid)
    "rope_geometry.png": rope_figure,  # rotary runs: RoFormer decay bound and frequencies per pair
    "decay_lengths.png": forest_figure,  # comparison: decay lengths with bootstrap intervals
    "band_emergence.png": emergence_figure,  # learned runs with a training step: band against step
}
