"""Figures of uncertainty: decay lengths with their confidence intervals (a forest plot)."""

from __future__ import annotations

import textwrap
from statistics import NormalDist

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from ..stages.comparison import COMPARISON
from .core import MAX_ROWS, WINDOW_NOTE, _first, _say_left_out, _title_with, short_labels, study_figure

__all__ = ["plot_decay_length_forest", "forest_figure"]

_COLUMNS = ("label", "decay_length", "decay_length_ci_low", "decay_length_ci_high", "ci_method")
_DECAY_ROWS = COMPARISON.declared("summary", "value", "value_ci_low", "value_ci_high", "max_distance")


def _decay_lengths(comparison: pd.DataFrame) -> pd.DataFrame:
    """comparison.csv's decay_length rows (one per label), as the forest plot reads them: longest first per window."""
    if "summary" not in comparison:
        return comparison
    rows = comparison[comparison["summary"] == "decay_length"].rename(columns={
        "value": "decay_length", "value_ci_low": "decay_length_ci_low", "value_ci_high": "decay_length_ci_high"})
    return rows.sort_values(["max_distance", "decay_length", "label"], ascending=[False, False, True],
                            na_position="last", kind="stable")


def plot_decay_length_forest(comparison: pd.DataFrame, *, title=None, width: float = 7.0) -> Figure:
    """Forest plot: one row per encoding, its decay length and confidence interval.

    Parameters
    ----------
    comparison : DataFrame
        The ``comparison`` table: columns ``label``, ``decay_length``,
        ``decay_length_ci_low``, ``decay_length_ci_high`` (positions),
        ``ci_method`` (``anchor_block`` | ``seed`` | ``exact`` | ``none``), optionally ``n_runs`` (more than
        one: the pooled seeds' decay length), ``rank``,
        ``ci_level``, ``fit_se`` (drawn as the fit's Wald interval) and
        ``selected_model``. Rows are drawn top to bottom in
        the table's order (ranked: longest first).
    title : str, optional
    width : float
        Figure width in inches (height grows with the number of rows, at
        most :data:`~poslab.plots.core.MAX_ROWS`: the first ones, and the
        figure says what was left out).

    Returns
    -------
    matplotlib.figure.Figure
        One axes: a point at each decay length with a thick bar over its
        bootstrap interval (an arrow to the axes' right edge when the interval
        is open above; none without one: ``n_resamples = 0``, an exact
        profile, too few seeds; filled marker: a run's decay length, open: the
        pooled seeds') and a thin grey bar just under it over its fit's Wald
        interval (± z ``fit_se``, z the normal quantile of ``ci_level``);
        labels without a decay length are listed with the reason ("no decay
        length: ...", or "log law: scale-free" when the selected model is the
        log law, which has none) inside the axes. The caption under the figure
        names only the marks that are drawn.

    Raises
    ------
    ValueError
        Missing columns or an empty table.
    """
    comparison = _decay_lengths(comparison)
    missing = [c for c in _COLUMNS if c not in comparison.columns]
    if missing:
        raise ValueError(f"comparison lacks column(s) {missing}; it has {list(comparison.columns)}")
    if comparison.empty:
        raise ValueError("comparison is empty: nothing to plot")
    keep, note = _first(list(range(len(comparison))), MAX_ROWS, "labels of comparison.csv (its ranked order)",
                        "comparison.csv")
    comparison = comparison.iloc[keep]
    n = len(comparison)
    names, shared = short_labels(comparison["label"])
    moved = (comparison["window_dependent"].fillna("").astype(str).str.lower().isin(("yes", "true"))
             if "window_dependent" in comparison else pd.Series(False, index=comparison.index)).to_numpy()
    labels = [textwrap.fill(names[lab] + ("*" if star else "") + (
        f" ({m})" if "selected_model" in comparison and isinstance(m, str) and m and m != "none" else ""), 36,
        break_long_words=False) for lab, m, star in zip(comparison["label"],
                                                         comparison.get("selected_model", [""] * n), moved)]
    if "max_distance" in comparison and comparison["max_distance"].nunique() > 1:  # say which window each is from
        labels = [f"{lab}\n[distances up to {md}]" for lab, md in zip(labels, comparison["max_distance"])]
    if "kernel" in comparison and (comparison["kernel"].fillna("cosine") != "cosine").any():  # say which scale
        labels = [lab if k == "cosine" else f"{lab}\n[{str(k).replace('_', ' ')}]"
                  for lab, k in zip(labels, comparison["kernel"].fillna("cosine"))]
    rows = max((lab.count("\n") + 1 for lab in labels), default=1)  # text lines per row: rows never overlap
    fig = Figure(figsize=(width, 0.9 + max(0.45, 0.16 * rows) * n), layout="constrained")
    fig.height_follows_text = True  # print_figure: a narrower print does not squeeze the rows onto each other
    ax = fig.add_subplot()
    y = np.arange(n)[::-1]
    values = comparison["decay_length"].to_numpy(dtype=float)
    low = comparison["decay_length_ci_low"].to_numpy(dtype=float)
    high = comparison["decay_length_ci_high"].to_numpy(dtype=float)
    level = comparison["ci_level"].dropna().iloc[0] if "ci_level" in comparison and comparison["ci_level"].notna().any() \
        else None
    # the normal quantile from the standard library: scipy.stats's ppf to 1e-15, without its 0.4 s import
    z = NormalDist().inv_cdf((1 + (level or 0.95)) / 2)
    drawn = set()  # the marks drawn: the caption names these only
    for yi, (_, row), v, lo, hi in zip(y, comparison.iterrows(), values, low, high):
        if not np.isfinite(v):  # why there is no number (status): never drawn as one
            ax.text(0.03, yi, _no_decay_length(row), va="center", ha="left", fontsize=7, color="0.4",
                    transform=ax.get_yaxis_transform())
            continue
        # the pooled seeds' (open marker), also without a seed bootstrap (n_resamples = 0: ci_method none)
        seed = row["ci_method"] == "seed" or bool(pd.notna(row.get("n_runs")) and row.get("n_runs", 1) > 1)
        fit_se = float(row.get("fit_se", np.nan))
        if np.isfinite(fit_se) and fit_se > 0:  # thin, just under the row: the fit's own (Wald) interval
            ax.plot([v - z * fit_se, v + z * fit_se], [yi - 0.22] * 2, color="0.5", lw=1.0, zorder=1,
                    solid_capstyle="butt")
            drawn.add("fit")
        if np.isfinite(lo) and np.isfinite(hi):
            ax.plot([lo, hi], [yi, yi], color="C0", lw=2.0, solid_capstyle="butt")
            drawn.add("bar")
        elif np.isfinite(lo):  # open above: the bar runs to the axes' edge, an arrow
            ax.annotate("", xy=(1.0, yi), xycoords=("axes fraction", "data"), xytext=(lo, yi), textcoords="data",
                        arrowprops=dict(arrowstyle="-|>", color="C0", lw=2.0, shrinkA=0, shrinkB=0,
                                        mutation_scale=9))
            drawn.add("open")
        else:  # no interval drawn: say why (its ci_method) rather than name one
            drawn.add(("none", row["ci_method"] if isinstance(row["ci_method"], str) else "none"))
        ax.plot([v], [yi], marker="o", ms=7, color="C0", mfc="white" if seed else "C0")
        drawn.add(("seed" if seed else "dot", bool(np.isfinite(lo))))
    ax.set_yticks(y, labels, fontsize=7)
    ax.set_ylim(-0.7, n - 0.3)
    pct = f"{level:.0%} " if level else "95% "
    ax.set_xlabel("decay length (positions)")
    why = {"none": "n_resamples = 0", "exact": "exact profile, no sampling variability", "seed": "too few seeds"}
    missing = sorted({why.get(d[1], "none available") for d in drawn if isinstance(d, tuple) and d[0] == "none"})
    marks = {("dot", True): "filled dot: decay length (anchor-block bootstrap interval)",
             ("dot", False): "filled dot: decay length",
             ("seed", True): "open dot: decay length of the pooled seeds (interval from resampled seeds)",
             ("seed", False): "open dot: decay length of the pooled seeds",
             "bar": f"thick bar: {pct}bootstrap interval",
             "open": "arrow to the right edge: interval open above (not bounded within the window)",
             "fit": f"thin grey bar under a dot: {pct}fit (Wald) interval, ±{z:.2f} delta-method standard errors",
             "none": "a dot without a thick bar: no bootstrap interval (" + "; ".join(missing) + ")"}
    if ("dot", True) in drawn:  # one text per marker: the interval where one is drawn
        drawn.discard(("dot", False))
    if ("seed", True) in drawn:
        drawn.discard(("seed", False))
    drawn |= {"none"} if missing else set()
    key = "; ".join(text for mark, text in marks.items() if mark in drawn)
    key = key[:1].upper() + key[1:] + "." if key else ""
    ax.grid(axis="x", alpha=0.3, lw=0.5)
    title = _title_with(title, shared)
    if title:
        fig.suptitle(title)
    return _say_left_out(fig, note, caption=[key] * bool(key) + ([WINDOW_NOTE.replace("this summary", "the decay length")]
                                                     if moved.any() else []))


def _no_decay_length(row) -> str:
    """Why a comparison row has no decay length, as the forest plot writes it beside the row."""
    if row.get("selected_model") == "log_law":  # a·ln(k) + b: scale-free, it defines no length
        return "log law (scale-free):\nno decay length"
    status = row.get("status")
    why = str(status).replace("_", " ") if isinstance(status, str) and status not in ("", "ok", "none") else \
        "no selected model"
    if why == "not reached" and "max_distance" in row:
        why = f"not reached within {row['max_distance']}"
    return f"no decay length:\n{why}"


@study_figure("decay_lengths.png", tables=("comparison",))
def forest_figure(tables: dict[str, pd.DataFrame], title=None) -> Figure | None:
    """STUDY_FIGURES entry: the forest plot of the ``comparison`` table (None when absent or empty)."""
    comparison = tables.get("comparison")
    if comparison is None or comparison.empty:
        return None
    return plot_decay_length_forest(comparison, title=title) if len(_decay_lengths(comparison)) else None
