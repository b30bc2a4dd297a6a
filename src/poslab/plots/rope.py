"""RoPE geometry from a study's ``inv_freq`` and ``rope_decay`` tables, and nothing else."""

from __future__ import annotations

import re
import textwrap
from pathlib import PurePath

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from ..stages.rope import INV_FREQ, NOPE_TEMPERATURE, ROPE_DECAY
from ..stages.profile import PROFILES
from .core import (MAX_CURVES, WIDTHS, _check_frame, _finish, _first, _LabelRows, _nonempty, _plot_decimated,
                   _label_colours, _select_labels, _title_with, short_labels, study_colours, study_figure)

__all__ = ["plot_rope_geometry", "rope_figure", "plot_nope_temperature", "nope_temperature_figure",
           "plot_rope_models", "rope_models_figure"]

_FREQ_COLUMNS = INV_FREQ.declared("label", "pair", "wavelength", "scale_factor")
_DECAY_COLUMNS = ROPE_DECAY.declared("label", "distance", "relative_upper_bound")


def plot_rope_geometry(inv_freq: pd.DataFrame, rope_decay: pd.DataFrame, *, labels=None,
                       panel_size=(4.6, 3.6), title=None, colours: dict | None = None) -> Figure:
    """RoFormer's decay bound against distance, and each run's frequencies against pair index.

    Parameters
    ----------
    inv_freq : DataFrame
        One row per run x frequency pair with columns ``label``, ``pair`` (int),
        ``wavelength`` (2π / inv_freq, positions) and ``scale_factor``
        (reference_inv_freq / inv_freq: 1 unchanged, ``factor`` fully interpolated).
    rope_decay : DataFrame
        One row per run x distance with columns ``label``, ``distance`` (int,
        positions) and ``relative_upper_bound`` (Su et al. 2021, section 3.4.3).
    labels : list of str, optional
        Runs to show, in this order. Default: every label of ``inv_freq``.
        At most :data:`~poslab.plots.core.MAX_CURVES` are drawn (the first
        ones; the figure says what was left out).
    panel_size : (float, float)
        Width and height of each of the three panels, in inches.
    title : str, optional
    colours : dict, optional
        label → colour (:func:`~poslab.plots.core.study_colours`: a run's colour in every figure of its study).

    Returns
    -------
    matplotlib.figure.Figure
        Three axes: the bound against distance (log distance, from 1), the
        wavelength against pair index (log), the scale factor against pair
        index (log). One line per run; one legend to the right.
    """
    _check_frame(inv_freq, _FREQ_COLUMNS, "inv_freq")
    _check_frame(rope_decay, _DECAY_COLUMNS, "rope_decay")
    labels, note = _first(_select_labels(inv_freq, labels, "inv_freq"), MAX_CURVES, "rotary labels (study order)",
                          "inv_freq.csv and rope_decay.csv")
    palette = list(_label_colours(labels, colours).values())
    names, shared = short_labels(labels)
    w, h = panel_size
    if matplotlib.rcParams["figure.figsize"][0] <= WIDTHS["column"]:  # one journal column: the panels stacked
        fig = Figure(figsize=(w + 2.4, 3 * h), layout="constrained")
        ax_decay, ax_wave, ax_scale = fig.subplots(3, 1)
        fig.height_follows_width = True
    else:
        fig = Figure(figsize=(3 * w + 2.4, h), layout="constrained")
        ax_decay, ax_wave, ax_scale = fig.subplots(1, 3)
    ax_decay.set_xscale("log")
    handles, decimated = [], False
    decay_rows, freq_rows = _LabelRows(rope_decay), _LabelRows(inv_freq)
    for label, colour in zip(labels, palette):
        d = decay_rows(label)
        d = d[d["distance"] >= 1].sort_values("distance")
        f = freq_rows(label).sort_values("pair")
        decimated |= _plot_decimated(ax_decay, d["distance"], d["relative_upper_bound"], color=colour, lw=0.9,
                                     alpha=0.9)
        ax_wave.plot(f["pair"], f["wavelength"], color=colour, lw=1.4)
        ax_scale.plot(f["pair"], f["scale_factor"], color=colour, lw=1.4)
        handles.append(Line2D([], [], color=colour, lw=1.6,
                              label=textwrap.fill(names[label], 28, break_long_words=False)))
    ax_decay.set_xscale("log")
    ax_decay.set_xlabel("distance (positions)")
    ax_decay.set_ylabel("bound (2/d)·Σ_j |S_j|")
    ax_decay.set_title("RoFormer decay bound")
    ax_wave.set_yscale("log")
    ax_wave.set_xlabel("frequency pair i")
    ax_wave.set_ylabel("wavelength 2π/θ_i")
    ax_wave.set_title("wavelengths used")
    ax_scale.set_yscale("log")
    ax_scale.set_xlabel("frequency pair i")
    ax_scale.set_ylabel("θ_i(default) / θ_i(used)")
    ax_scale.set_title("scale factor per pair")
    return _finish(fig, handles, _title_with(title, shared), note, (ax_decay, ax_wave, ax_scale), decimated)


@study_figure("rope_geometry.png", tables=("inv_freq", "rope_decay"))
def rope_figure(tables: dict[str, pd.DataFrame], title: str | None = None) -> Figure | None:
    """The study figure ``rope_geometry.png``: None unless the study has rotary runs."""
    if not all(name in tables and len(tables[name]) for name in ("inv_freq", "rope_decay")):
        return None
    return plot_rope_geometry(tables["inv_freq"], tables["rope_decay"], title=title, colours=study_colours(tables))


_NOPE_COLUMNS = NOPE_TEMPERATURE.declared("label", "layer_group", "position", "query_scale")


def plot_nope_temperature(nope_temperature: pd.DataFrame, *, labels=None, size=(5.6, 3.6), title=None,
                          colours: dict | None = None) -> Figure:
    """Llama 4's query temperature on layers without RoPE against position (a step curve, log position).

    Parameters
    ----------
    nope_temperature : DataFrame
        One row per run x position where the scale changes, with columns ``label``, ``layer_group``,
        ``position`` (int, positions) and ``query_scale`` (1 + attn_scale·ln(⌊(p + 1)/floor_scale⌋ + 1)).
    labels : list of str, optional
        Runs to show (default: every label; at most :data:`~poslab.plots.core.MAX_CURVES`).
    size : (float, float)
        Figure width and height in inches (before the legend).
    title : str, optional
    colours : dict, optional
        label → colour (:func:`~poslab.plots.core.study_colours`).

    Returns
    -------
    matplotlib.figure.Figure
    """
    _check_frame(nope_temperature, _NOPE_COLUMNS, "nope_temperature")
    labels, note = _first(_select_labels(nope_temperature, labels, "nope_temperature"), MAX_CURVES,
                          "rotary labels (study order)", "nope_temperature.csv")
    palette = list(_label_colours(labels, colours).values())
    fig = Figure(figsize=(size[0] + 2.4, size[1]), layout="constrained")
    ax = fig.subplots()
    handles = []
    for label, colour in zip(labels, palette):
        rows = nope_temperature[nope_temperature["label"] == label].sort_values("position")
        ax.step(rows["position"] + 1, rows["query_scale"], where="post", color=colour, lw=1.4)
        name = re.sub(r"config=([^,)]+)", lambda m: "config=" + PurePath(m.group(1)).stem, str(label))  # the file
        handles.append(Line2D([], [], color=colour, lw=1.6, label=textwrap.fill(name, 40, break_long_words=False)))
    ax.set_xscale("log")
    ax.set_xlabel("position p + 1")
    ax.set_ylabel("query scale on layers without RoPE")
    ax.set_title("NoPE query temperature (no positional geometry: only this)")
    return _finish(fig, handles, title, note, (ax,))


@study_figure("nope_temperature.png", tables=("nope_temperature",))
def nope_temperature_figure(tables: dict[str, pd.DataFrame], title: str | None = None) -> Figure | None:
    """The study figure ``nope_temperature.png``: None unless a rotary run's model has layers with a NoPE temperature."""
    if "nope_temperature" not in tables or not len(tables["nope_temperature"]):
        return None
    return plot_nope_temperature(tables["nope_temperature"], title=title, colours=study_colours(tables))


def _short_label(row) -> str:
    """``config stem · layer type · context N`` of a rotary run read from a config (the figure's legend)."""
    name = PurePath(str(row["config"])).name.removesuffix(".json")
    if name == "config":  # a model folder's config.json: the folder names the model
        name = PurePath(str(row["config"])).parent.name
    layer = row.get("layer_type")
    context = row.get("context_length")
    return name + (f" · {layer}" if isinstance(layer, str) and layer else "") \
        + (f" · context {int(context)}" if pd.notna(context) else "")


_MODEL_COLUMNS = PROFILES.declared("label", "distance", "mean_similarity")


def plot_rope_models(profiles: pd.DataFrame, rope_decay: pd.DataFrame, summary: pd.DataFrame, *, labels=None,
                     panel_size=(4.8, 3.6), title=None) -> Figure:
    """Rotary runs read from model configs, one curve per model and layer type: the similarity profile and
    RoFormer's decay bound relative to its value at distance 0, against distance.

    Parameters
    ----------
    profiles : DataFrame
        ``profiles.csv`` rows: ``label``, ``distance`` (int, positions), ``mean_similarity`` (cosine
        similarity of position vectors at that distance).
    rope_decay : DataFrame
        ``rope_decay.csv`` rows: ``label``, ``distance``, ``relative_upper_bound``.
    summary : DataFrame
        ``summary.csv``: its ``label``, ``config`` and ``layer_type`` (optional) columns say which runs were
        read from a config and name them (the profiles carry only the run's identifier).
    labels : list of str, optional
        Runs to show (default: every run of ``summary`` with a config; at most
        :data:`~poslab.plots.core.MAX_CURVES`, the first ones).
    panel_size : (float, float)
    title : str, optional

    Returns
    -------
    matplotlib.figure.Figure
        Two axes sharing the distance axis (log, from 1), each curve drawn over its run's window
        (a sliding-window layer type stops at its window). Legend: config file name · layer type.
        Profiles longer than :data:`~poslab.plots.core.MAX_DRAWN_POINTS` are drawn from their decimated
        curve (:func:`~poslab.plots.core.drawn_points`).
    """
    _check_frame(profiles, _MODEL_COLUMNS, "profiles")
    _check_frame(rope_decay, _DECAY_COLUMNS, "rope_decay")
    _check_frame(summary, ("label", "config"), "summary")
    runs = summary[summary["config"].notna() & (summary["config"].astype(str) != "")].drop_duplicates("label")
    labels, note = _first(_select_labels(runs, labels, "summary (runs with a config)"), MAX_CURVES,
                          "rotary runs read from a config (study order)", "profiles.csv and rope_decay.csv")
    names = {row["label"]: _short_label(row) for _, row in runs.iterrows()}
    palette = list(_label_colours(labels, study_colours({"summary": summary})).values())
    w, h = panel_size
    if matplotlib.rcParams["figure.figsize"][0] <= WIDTHS["column"]:  # one journal column: the panels stacked
        fig = Figure(figsize=(w + 2.4, 2 * h), layout="constrained")
        ax_s, ax_b = fig.subplots(2, 1, sharex=True)
        fig.height_follows_width = True
    else:
        fig = Figure(figsize=(2 * w + 3.2, h), layout="constrained")
        ax_s, ax_b = fig.subplots(1, 2, sharex=True)
    ax_s.set_xscale("log")  # before drawing: the decimation bins geometrically on a log axis
    handles, decimated = [], False
    profile_rows, decay_rows = _LabelRows(profiles), _LabelRows(rope_decay)
    for label, colour in zip(labels, palette):
        p = profile_rows(label)
        p = p[p["distance"] >= 1].sort_values("distance")
        b = decay_rows(label).sort_values("distance")
        decimated |= _plot_decimated(ax_s, p["distance"], p["mean_similarity"], color=colour, lw=1.0, alpha=0.9)
        if len(b):
            at0 = b["relative_upper_bound"].iloc[0] if b["distance"].iloc[0] == 0 else np.nan
            b = b[b["distance"] >= 1]
            decimated |= _plot_decimated(ax_b, b["distance"], b["relative_upper_bound"] / at0, color=colour, lw=0.9,
                                         alpha=0.9)
        handles.append(Line2D([], [], color=colour, lw=1.6, label=names[label]))
    ax_s.set_xscale("log")
    ax_s.set_xlabel("distance (positions)")
    ax_s.set_ylabel("mean cosine similarity")
    ax_s.set_title("similarity profile")
    ax_s.axhline(0, color="0.6", lw=0.6)
    ax_b.set_xlabel("distance (positions)")
    ax_b.set_ylabel("bound / bound at distance 0")
    ax_b.set_title("RoFormer long-term decay bound, relative")
    return _finish(fig, handles, title, note, (ax_s, ax_b), decimated)


@study_figure("rope_models.png", tables=("profiles", "rope_decay", "summary"))
def rope_models_figure(tables: dict[str, pd.DataFrame], title: str | None = None) -> Figure | None:
    """The study figure ``rope_models.png``: None unless the study has rotary runs read from a config."""
    summary = tables.get("summary")
    if summary is None or "config" not in summary.columns or not _nonempty(tables, "profiles") \
            or not _nonempty(tables, "rope_decay"):
        return None
    if not (summary["config"].notna() & (summary["config"].astype(str) != "")).any():
        return None
    return plot_rope_models(tables["profiles"], tables["rope_decay"], summary, title=title)
