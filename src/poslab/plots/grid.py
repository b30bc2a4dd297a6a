"""Figures of positions on a grid (vision tables, M-RoPE, axial RoPE, 2-D sin-cos), from the ``grid_profiles`` and
``grid_maps`` tables."""

from __future__ import annotations

import re
import textwrap

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ..stages.grid import GRID_MAPS, GRID_PROFILES
from .core import MAX_CURVES, MAX_GRID_TABLES, WIDTHS, _first, _say_left_out, _title_with, short_labels, study_figure
from .core import _check_frame as _check

__all__ = ["plot_grid_profiles", "plot_grid_axes", "grid_figure", "grid_axes_figure"]

_PROFILE_COLUMNS = GRID_PROFILES.declared("label", "metric", "distance", "mean_similarity")
_MAP_COLUMNS = GRID_MAPS.declared("label", "row", "col", "reference_row", "reference_col", "similarity")
_AXES = {"along_frame": "t (frames)", "along_column": "h (rows)", "along_row": "w (columns)"}
# Euclidean distances are many and sparse (one point per distinct √(Δr² + Δc²)): points, not a line.
_STYLE = {"euclidean": ("none", "."), "manhattan": ("-", "s"), "along_row": ("--", None), "along_column": (":", None),
          "along_frame": ("-.", "^")}


def plot_grid_profiles(grid_profiles: pd.DataFrame, grid_maps: pd.DataFrame | None = None, *,
                       title: str | None = None, panel_size: float = 3.6) -> Figure:
    """Similarity against distance on the grid, one row of panels per run with a grid.

    Parameters
    ----------
    grid_profiles : DataFrame
        Columns ``label``, ``metric`` (euclidean, manhattan, along_row,
        along_column, along_frame), ``distance`` (grid steps), ``mean_similarity``.
    grid_maps : DataFrame, optional
        Columns ``label``, ``row``, ``col``, ``reference_row``,
        ``reference_col``, ``similarity`` (and ``frame``, ``reference_frame``
        for 3-D grids): drawn beside each profile as the centre point's
        similarity map (reference marked with a cross; a 3-D grid shows the
        centre frame).
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
    labels, note = _first(list(pd.unique(grid_profiles["label"])), MAX_GRID_TABLES, "runs with a grid (study order)",
                          "grid_profiles.csv and grid_maps.csv")
    names, shared = short_labels(labels)
    title = _title_with(title, shared)
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
        ax.set_xlabel("distance on the grid (grid steps)")
        ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", integer=True))
        ax.set_ylabel("mean cosine similarity")
        ax.set_title(textwrap.fill(names[label], 36, break_long_words=False))
        ax.axhline(0.0, color="0.7", lw=0.6)
        ax.legend(fontsize=7)
        if grid_maps is not None:
            ax = ax_row[1]
            m = grid_maps[grid_maps["label"] == label]
            if "frame" in m and m["frame"].notna().any():  # a 3-D grid: the centre point's frame
                m = m[m["frame"] == m["reference_frame"]]
            if m.empty:
                ax.set_axis_off()
                continue
            mat = m.pivot(index="row", columns="col", values="similarity").sort_index().sort_index(axis=1)
            image = ax.imshow(mat.to_numpy(dtype=float, na_value=np.nan), cmap="RdBu_r", vmin=-1.0, vmax=1.0,
                              origin="upper")
            ref = m.iloc[0]
            ax.plot([ref["reference_col"]], [ref["reference_row"]], marker="x", color="k")
            where = f"({ref['reference_row']}, {ref['reference_col']})"
            if "reference_frame" in m and pd.notna(ref["reference_frame"]):
                where = f"(t={ref['reference_frame']}, {ref['reference_row']}, {ref['reference_col']}), its frame"
            ax.set_title(f"similarity to {where}", fontsize=9)
            ax.set_xlabel("column")
            ax.set_ylabel("row")
            for axis in (ax.xaxis, ax.yaxis):  # rows and columns are whole numbers
                axis.set_major_locator(MaxNLocator(nbins="auto", integer=True))
    if image is not None:
        fig.colorbar(image, ax=list(axes[:, 1]), shrink=0.8, label="cosine similarity")
    if title:
        fig.suptitle(title)
    return _say_left_out(fig, note)


@study_figure("grid_profiles.png", tables=("grid_profiles", "grid_maps"))
def grid_figure(tables: dict[str, pd.DataFrame], title: str | None = None) -> Figure | None:
    """The study figure ``grid_profiles.png`` (None when no run has a grid)."""
    profiles = tables.get("grid_profiles")
    if profiles is None or len(profiles) == 0:
        return None
    maps = tables.get("grid_maps")
    return plot_grid_profiles(profiles, maps if maps is not None and len(maps) else None, title=_grid_title(title))


def _grid_title(title: str | None) -> str | None:
    """The study title for a grid figure: its "distances up to N" are distances in the sequence (positions), not the
    grid distances these panels draw (grid steps), and it says so."""
    return re.sub(r"\bdistances up to (\d+)", r"sequence distances up to \1 (panels: grid steps)", title) if title \
        else title


def plot_grid_axes(grid_profiles: pd.DataFrame, *, title: str | None = None, panel_size: float = 3.6) -> Figure:
    """Similarity along each grid axis, one panel per axis, one line per run: the runs compared axis by axis.

    Parameters
    ----------
    grid_profiles : DataFrame
        Columns ``label``, ``metric``, ``distance``, ``mean_similarity``; the
        ``along_frame`` (t), ``along_column`` (h) and ``along_row`` (w) rows are drawn.
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        At most :data:`~poslab.plots.core.MAX_CURVES` runs (the first ones; the figure says what was left out).
    """
    _check(grid_profiles, _PROFILE_COLUMNS, "grid_profiles")
    axes_present = [m for m in _AXES if (grid_profiles["metric"] == m).any()]
    labels, note = _first(list(pd.unique(grid_profiles["label"])), MAX_CURVES, "runs with a grid (study order)",
                          "grid_profiles.csv")
    names, shared = short_labels(labels)
    title = _title_with(title, shared)
    if matplotlib.rcParams["figure.figsize"][0] <= WIDTHS["column"]:  # one journal column: the panels stacked
        fig = Figure(figsize=(panel_size * 1.3, panel_size * 0.6 * len(axes_present) + 1.2 + (0.4 if title else 0.0)),
                     layout="constrained")
        axs = fig.subplots(len(axes_present), 1, squeeze=False, sharey=True)[:, 0]
        fig.height_follows_width = True
    else:
        fig = Figure(figsize=(panel_size * 1.3 * len(axes_present), panel_size + 1.2 + (0.4 if title else 0.0)),
                     layout="constrained")
        axs = fig.subplots(1, len(axes_present), squeeze=False, sharey=True)[0]
    for ax, metric in zip(axs, axes_present):
        for label in labels:
            rows = grid_profiles[(grid_profiles["label"] == label) & (grid_profiles["metric"] == metric)]
            if rows.empty:
                continue
            rows = rows.sort_values("distance")
            ax.plot(rows["distance"], rows["mean_similarity"], marker="o", markersize=3, label=names[label])
        ax.set_xlabel(f"distance along {_AXES[metric]}")
        ax.xaxis.set_major_locator(MaxNLocator(nbins="auto", integer=True))  # grid steps
        ax.set_title(f"pairs differing in {_AXES[metric].split()[0]} only", fontsize=9)
        ax.axhline(0.0, color="0.7", lw=0.6)
    axs[0].set_ylabel("mean cosine similarity")
    handles, names = axs[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, names, loc="outside lower center", fontsize=7, ncols=1)
    if title:
        fig.suptitle(title)
    return _say_left_out(fig, note)


@study_figure("grid_axes.png", tables=("grid_profiles",))
def grid_axes_figure(tables: dict[str, pd.DataFrame], title: str | None = None) -> Figure | None:
    """The study figure ``grid_axes.png``: runs compared along each axis (None when no run has a grid)."""
    profiles = tables.get("grid_profiles")
    if profiles is None or len(profiles) == 0:
        return None
    return plot_grid_axes(profiles, title=_grid_title(title))
