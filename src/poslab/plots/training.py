"""How a learned position table's band forms over training, from a study's ``summary`` table alone."""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..stages import SUMMARY
from ..stages.bands import BAND_WIDTH
from .core import MAX_CURVES, WIDTHS, WINDOW_NOTE, _check_frame, _first, _say_left_out, study_figure, summary_status
from .core import window_dependent_summaries

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
    if matplotlib.rcParams["figure.figsize"][0] <= WIDTHS["column"]:  # one journal column: the panels stacked
        fig = Figure(figsize=(panel_size[0], panel_size[1] * 2), layout="constrained")
        ax_decay, ax_band = fig.subplots(2, 1, sharex=True)
        fig.height_follows_width = True
    else:
        fig = Figure(figsize=(panel_size[0] * 2, panel_size[1]), layout="constrained")
        ax_decay, ax_band = fig.subplots(1, 2, sharex=True)
    colors = iter(f"C{i}" for i in range(10))
    missing, starred = [], False
    for source, rows in groups:
        rows = rows.sort_values("step")
        name = "" if source is None or steps["source"].nunique() == 1 else f"{Path(str(source)).name}: "
        moved = rows.apply(lambda r: "decay_length" in window_dependent_summaries(r), axis=1)
        ax_decay.plot(rows["step"], rows["decay_length"], "o-", color="k", label=f"{name}decay length")
        if moved.any():  # a window-dependent value: an open marker, starred in the legend
            ax_decay.plot(rows["step"][moved], rows["decay_length"][moved], "o", mfc="white", mec="k",
                          label="depends on the window")
            starred = True
        _interval_bars(ax_decay, rows, "decay_length", "k")
        missing += [(step, summary_status(row, "decay_length")) for step, (_, row) in zip(rows["step"], rows.iterrows())
                    if pd.isna(row["decay_length"])]
        for col in widths:
            color = next(colors, None)
            ax_band.plot(rows["step"], rows[col], "o-", label=f"{name}width at {_threshold_label(col)}", color=color)
            moved = rows.apply(lambda r, c=col: c in window_dependent_summaries(r), axis=1)
            if moved.any():
                ax_band.plot(rows["step"][moved], rows[col][moved], "o", mfc="white", mec=color, zorder=3)
                starred = True
            _interval_bars(ax_band, rows, col, color)
    if missing:  # a step without a decay length says why, at the bottom of the panel (never as a number)
        ax_decay.plot([s for s, _ in missing], [0.03] * len(missing), "x", color="0.4",
                      transform=ax_decay.get_xaxis_transform(), clip_on=False, label="no decay length (below)")
        for step, why in missing:
            ax_decay.annotate(str(why).replace("_", " "), (step, 0.06), xycoords=("data", "axes fraction"),
                              rotation=90, ha="center", va="bottom", fontsize=7, color="0.4")
    references = []
    for label, rows in others.groupby("label", sort=False):
        value = pd.to_numeric(rows["decay_length"], errors="coerce").mean()
        if np.isfinite(value):
            ax_decay.axhline(value, ls="--", lw=1, color="0.5")
            ax_decay.annotate(textwrap.shorten(str(label), 40), (0.98, value), xycoords=("axes fraction", "data"),
                              ha="right", va="bottom", fontsize=7, color="0.35")
        else:
            references.append(f"{textwrap.shorten(str(label), 40)}: "
                              f"{str(summary_status(rows.iloc[0], 'decay_length')).replace('_', ' ')}")
    ax_decay.set(ylabel="decay length (positions)", title="decay length")
    ax_band.set(ylabel="band width (positions)", title="band width (first crossing)", yscale="log")
    all_steps = pd.to_numeric(steps["step"])
    positive = all_steps.loc[lambda v: v > 0]
    linthresh = float(positive.min()) if len(positive) else 1.0  # linear from 0 to the first saved step
    for ax in (ax_decay, ax_band):
        ax.set_xscale("symlog", linthresh=linthresh)
        # room on both sides: a marker at step 0 or at the last step is never cut in half
        ax.set_xlim(-0.3 * linthresh, float(all_steps.max()) * 1.5 if all_steps.max() > 0 else linthresh)
        ax.set_xlabel("training step")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    ax_decay.margins(y=0.15)
    if title:
        fig.suptitle(title)
    caption = ([f"Reference runs without a decay length: {'; '.join(references)}."] if references else []) + \
        (["Open markers: " + WINDOW_NOTE.removeprefix("*: ")] if starred else [])
    return _say_left_out(fig, "; it ".join(n for n in notes if n) or None, caption=caption)


@study_figure("band_emergence.png", tables=("summary",))
def emergence_figure(tables: dict[str, pd.DataFrame], title: str | None = None) -> Figure | None:
    """The study figure ``band_emergence.png``: None unless the summary has successful training-snapshot runs."""
    summary = tables.get("summary")
    if summary is None or "step" not in summary.columns or "status" not in summary.columns:
        return None
    if not ((summary["status"] == "ok") & summary["step"].notna()).any():
        return None
    return plot_band_emergence(summary, title=title)
