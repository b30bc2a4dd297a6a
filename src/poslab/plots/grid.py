"""Figure of vision position tables on their patch grid, from the ``grid_profiles`` and ``grid_maps`` tables."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..stages.learned import GRID_MAPS, GRID_PROFILES
from .core import MAX_GRID_TABLES, _first, _say_left_out, study_figure
from .core import _check_frame as _check

__all__ = ["plot_grid_profiles", "grid_figure"]

_PROFILE_COLUMNS = GRID_PROFILES.declared("label", "metric", "distance", "mean_similarity")
_MAP_COLUMNS = GRID_MAPS.declared("label", "row", "col", "reference_row", "reference_col", "similarity")
# Euclidean distances are many and sparse (one point per distinct √(Δr² + Δc²)): points, not a line.
_STYLE = {"euclidean": ("none", "."), "manhattan": ("-", "s"), "along_row": ("--", None), "along_column": (":", None)}


def plot_grid_profiles(grid_profiles: pd.DataFrame, grid_maps: pd.DataFrame | None = None, *,
                       title: str | None = None, panel_size: float = 3.6) -> Figure:
    """Similarity against distance on the patch grid, one row of panels per vision table.

    Parameters
    ----------
    grid_profiles : DataFrame
        Columns ``label``, ``metric`` (euclidean, manhattan, along_row,
        along_column), ``distance`` (patches), ``mean_similarity``.
    grid_maps : DataFrame, optional
        Columns ``label``, ``row``, ``col``, ``reference_row``,
        ``reference_col``, ``similarity``: drawn beside each profile as the
        centre patch's similarity map (reference patch marked with a cross).
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Left: mean cosine similarity against grid distance, a line per metric.
        Right (with ``grid_maps``): the map, colour range [−1, 1]. At most
        :data:`~poslab.plots.core.MAX_GRID_TABLES` tables (the first ones;
        the figure says what was left out).
    """
    _check(grid_profiles, _PROFILE_COLUMNS, "grid_profiles")
    if grid_maps is not None:
        _check(grid_maps, _MAP_COLUMNS, "grid_maps")
    labels, note = _first(list(pd.unique(grid_profiles["label"])), MAX_GRID_TABLES, "vision tables (study order)",
                          "grid_profiles.csv and grid_maps.csv")
    ncols = 2 if grid_maps is not None else 1
    fig = Figure(figsize=(panel_size * 1.5 * ncols, panel_size * len(labels) + (0.4 if title else 0.0)),
                 layout="constrained")
    axes = fig.subplots(len(labels), ncols, squeeze=False)
    image = None
    for ax_row, label in zip(axes, labels):
        ax = ax_row[0]
        sub = grid_profiles[grid_profiles["label"] == label]
        for metric, rows in sub.groupby("metric", sort=False):
            rows = rows.sort_values("distance")
            ls, marker = _STYLE.get(metric, ("-", None))
            ax.plot(rows["distance"], rows["mean_similarity"], ls=ls, marker=marker, markersize=3, label=metric)
        ax.set_xlabel("distance on the patch grid (patches)")
        ax.set_ylabel("mean cosine similarity")
        ax.set_title(label, fontsize=9)
        ax.axhline(0.0, color="0.7", lw=0.6)
        ax.legend(fontsize=7)
        if grid_maps is not None:
            ax = ax_row[1]
            m = grid_maps[grid_maps["label"] == label]
            if m.empty:
                ax.set_axis_off()
                continue
            mat = m.pivot(index="row", columns="col", values="similarity").sort_index().sort_index(axis=1)
            image = ax.imshow(mat.to_numpy(dtype=float, na_value=np.nan), cmap="RdBu_r", vmin=-1.0, vmax=1.0,
                              origin="upper")
            ref = m.iloc[0]
            ax.plot([ref["reference_col"]], [ref["reference_row"]], marker="x", color="k")
            ax.set_title(f"similarity to patch ({ref['reference_row']}, {ref['reference_col']})", fontsize=9)
            ax.set_xlabel("column")
            ax.set_ylabel("row")
    if image is not None:
        fig.colorbar(image, ax=list(axes[:, 1]), shrink=0.8, label="cosine similarity")
    if title:
        fig.suptitle(title)
    return _say_left_out(fig, note)


@study_figure("grid_profiles.png", tables=("grid_profiles", "grid_maps"))
def grid_figure(tables: dict[str, pd.DataFrame], title: str | None = None) -> Figure | None:
    """The study figure ``grid_profiles.png`` (None when no run has a patch grid)."""
    profiles = tables.get("grid_profiles")
    if profiles is None or len(profiles) == 0:
        return None
    maps = tables.get("grid_maps")
    return plot_grid_profiles(profiles, maps if maps is not None and len(maps) else None, title=title)
