"""How a learned position table's band forms over training, from a study's ``summary`` table alone."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..stages import SUMMARY
from ..stages.bands import BAND_WIDTH
from .core import MAX_CURVES, _check_frame, _first, _say_left_out, study_figure

__all__ = ["plot_band_emergence", "emergence_figure"]


def _threshold_label(column: str) -> str:
    return f"{BAND_WIDTH.value_of(column):g}"


def _interval_bars(ax, rows: pd.DataFrame, column: str, color) -> None:
    """Vertical bars from ``<column>_ci_low`` to ``_ci_high`` where both are present (bootstrap intervals)."""
    low, high = f"{column}_ci_low", f"{column}_ci_high"
    if low not in rows or high not in rows:
        return
    lo, hi = pd.to_numeric(rows[low], errors="coerce"), pd.to_numeric(rows[high], errors="coerce")
    have = lo.notna() & hi.notna()
    if have.any():
        ax.vlines(pd.to_numeric(rows["step"])[have], lo[have], hi[have], color=color, lw=2, alpha=0.4)


def plot_band_emergence(summary: pd.DataFrame, *, panel_size=(4.6, 3.6), title=None) -> Figure:
    """Decay length and band widths of training-run snapshots against training step.

    Parameters
    ----------
    summary : DataFrame
        A study's ``summary`` table (one row per run) with columns ``label``,
        ``status``, ``step`` (training step; empty for runs that are not
        training snapshots), ``decay_length`` and the band widths (positions).
        Rows with a step are drawn as curves, one per training run
        (``source``); every other ``ok`` run (sinusoidal, random, a real table)
        is drawn as a dashed horizontal reference line, averaged over seeds.
    panel_size : (float, float)
        Inches per panel.
    title : str, optional

    Returns
    -------
    Figure
        Two panels: ``decay_length`` and the band width at every
        threshold, both in positions, against step (symlog axis: step 0 is
        the initialisation), with their bootstrap intervals as bars where the
        summary has ``<column>_ci_low`` / ``_ci_high``. Missing values (no selected decay model, no
        crossing within max_distance) are simply not drawn. At most
        :data:`~poslab.plots.core.MAX_CURVES` curves per panel and reference lines: the first training runs
        and reference labels (the figure says what was left out).

    Raises
    ------
    ValueError
        Required columns missing, or no ``ok`` row has a step.
    """
    _check_frame(summary, ("label", *SUMMARY.declared("status", "decay_length"), "step"), "summary")
    ok = summary[summary["status"] == "ok"]
    steps = ok[ok["step"].notna()]
    if steps.empty:
        raise ValueError("summary has no successful training-snapshot runs (rows with a step): nothing to plot")
    widths = [c for c in summary.columns if BAND_WIDTH.matches(c)]  # not their _ci_ columns
    others = ok[ok["step"].isna()]
    notes = []
    if "source" in steps.columns:  # one curve per source and threshold in the band panel: at most MAX_CURVES
        sources, note = _first(list(pd.unique(steps["source"])), max(1, MAX_CURVES // max(1, len(widths))),
                               "training runs (sources, study order)", "summary.csv")
        notes.append(note)
        groups = steps[steps["source"].isin(sources)].groupby("source", sort=False)
    else:
        groups = [(None, steps)]
    references, note = _first(list(pd.unique(others["label"])), MAX_CURVES, "reference labels (study order)",
                              "summary.csv")
    notes.append(note)
    others = others[others["label"].isin(references)]
    fig = Figure(figsize=(panel_size[0] * 2, panel_size[1]), layout="constrained")
    ax_decay, ax_band = fig.subplots(1, 2, sharex=True)
    colors = iter(f"C{i}" for i in range(10))
    for source, rows in groups:
        rows = rows.sort_values("step")
        name = "" if source is None or steps["source"].nunique() == 1 else f"{Path(str(source)).name}: "
        ax_decay.plot(rows["step"], rows["decay_length"], "o-", color="k", label=f"{name}decay length")
        _interval_bars(ax_decay, rows, "decay_length", "k")
        for col in widths:
            color = next(colors, None)
            ax_band.plot(rows["step"], rows[col], "o-", label=f"{name}width at {_threshold_label(col)}", color=color)
            _interval_bars(ax_band, rows, col, color)
    for label, rows in others.groupby("label", sort=False):
        short = textwrap.shorten(str(label), 40)
        value = pd.to_numeric(rows["decay_length"], errors="coerce").mean()
        if np.isfinite(value):
            ax_decay.axhline(value, ls="--", lw=1, color="0.5")
            ax_decay.annotate(short, (1, value), xycoords=("axes fraction", "data"), ha="right", va="bottom",
                              fontsize=7, color="0.35")
    ax_decay.set(ylabel="decay length (positions)", title="decay length")
    ax_band.set(ylabel="band width (positions)", title="band width (first crossing)", yscale="log")
    positive = pd.to_numeric(steps["step"]).loc[lambda v: v > 0]
    linthresh = float(positive.min()) if len(positive) else 1.0  # linear from 0 to the first saved step
    for ax in (ax_decay, ax_band):
        ax.set_xscale("symlog", linthresh=linthresh)
        ax.set_xlim(left=0)
        ax.set_xlabel("training step")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title)
    return _say_left_out(fig, "; it ".join(n for n in notes if n) or None)


@study_figure("band_emergence.png", tables=("summary",))
def emergence_figure(tables: dict[str, pd.DataFrame], title: str | None = None) -> Figure | None:
    """The study figure ``band_emergence.png``: None unless the summary has successful training-snapshot runs."""
    summary = tables.get("summary")
    if summary is None or "step" not in summary.columns or "status" not in summary.columns:
        return None
    if not ((summary["status"] == "ok") & summary["step"].notna()).any():
        return None
    return plot_band_emergence(summary, title=title)
