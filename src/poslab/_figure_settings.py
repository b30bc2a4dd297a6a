"""A study's ``[figures]`` settings (formats, print width) without importing matplotlib: the study file is read
and checked (``poslab run``'s workers, ``poslab inspect``) before any figure is drawn."""

from __future__ import annotations

import dataclasses

__all__ = ["FORMATS", "WIDTHS", "MIN_FONT_POINTS", "PRINT_DPI", "PRINT_FONTS", "FigureSettings"]

#: File formats a study's ``[figures] formats`` may name (vector PDF and SVG for papers, PNG for screens).
FORMATS = ("png", "pdf", "svg")
#: Print width in inches of a study's ``[figures] width``: one column of a two-column journal page, or the page.
WIDTHS = {"column": 3.5, "page": 7.0}
#: Smallest font at print size (points) any figure text has (journals ask for 6-8 pt; tested).
MIN_FONT_POINTS = 7.0
#: Resolution of raster files (PNG): 300 dpi at print size, what journals ask for line art with shading.
PRINT_DPI = 300
#: Font sizes at print size (points) every figure is drawn with (matplotlib rcParams while a figure is drawn).
PRINT_FONTS = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7,
                "ytick.labelsize": 7, "legend.fontsize": 7, "figure.titlesize": 9, "legend.title_fontsize": 7}


@dataclasses.dataclass(frozen=True)
class FigureSettings:
    """A study's ``[figures]`` table: the files written for each figure and the print width they are laid out at.

    Attributes
    ----------
    formats : tuple of str
        File formats (:data:`FORMATS`), each figure written once per format beside the others
        (``decay_curves.png``, ``decay_curves.pdf``).
    width : str
        ``"page"`` (7 in, two journal columns) or ``"column"`` (3.5 in, one column; :data:`WIDTHS`): every
        figure is laid out at that width, fonts at least :data:`MIN_FONT_POINTS` at that size, so it goes into
        a paper at 100 % without scaling.
    """

    formats: tuple[str, ...] = ("png",)
    width: str = "page"

    @property
    def inches(self) -> float:
        return WIDTHS[self.width]

    @property
    def rc(self) -> dict:
        """matplotlib rcParams a figure is drawn with: the print fonts, and the print width as the default size
        (a figure that lays out panels by width reads it)."""
        return {**PRINT_FONTS, "figure.figsize": (self.inches, 0.6 * self.inches)}

    def as_dict(self) -> dict:
        """What manifest.json records (``poslab plot`` redraws with it)."""
        return {"formats": list(self.formats), "width": self.width, "width_inches": self.inches}
