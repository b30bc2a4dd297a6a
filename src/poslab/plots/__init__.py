"""Figures from poslab's tidy tables.

:data:`STUDY_FIGURES` maps each study figure's file name to a function
``(tables, title) -> Figure | None`` that draws it from the result tables
alone (None when the tables it needs are absent or empty);
:data:`FIGURE_TABLES` names the tables each is drawn from. A figure joins
them with the :func:`study_figure` decorator in its plot module (drawn in the
order the modules below are imported).
"""

from __future__ import annotations

from .core import FIGURE_TABLES, STUDY_FIGURES, plot_decay_curves, plot_similarity_heatmaps, save_figure, study_figure
from . import grid, rope, uncertainty, training  # noqa: F401,E402  (register their figures, in this order)
from .uncertainty import plot_decay_length_forest

__all__ = ["plot_similarity_heatmaps", "plot_decay_curves", "plot_decay_length_forest", "save_figure", "STUDY_FIGURES",
           "FIGURE_TABLES", "study_figure"]
