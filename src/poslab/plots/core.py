"""Figures from poslab's tidy tables, and nothing else.

Like seaborn's figure functions, each function takes a tidy DataFrame and
keyword-only options and returns the :class:`matplotlib.figure.Figure`. They
never fit, never recompute similarities (only means across seeds for
display) and never write files; :func:`save_figure` does that on request.
Figures are plain ``Figure`` objects (no pyplot state), so they are safe to
build in threads and in scripts without a display.
"""

from __future__ import annotations

import math
import re
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path, PurePath

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.colors import to_rgb
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.font_manager import findfont, get_font
from matplotlib.ft2font import LoadFlags
from matplotlib.layout_engine import PlaceHolderLayoutEngine
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.font_manager import FontProperties
from matplotlib.ticker import FixedLocator, LogFormatterSciNotation

from .._figure_settings import FORMATS, MIN_FONT_POINTS, PRINT_DPI, PRINT_FONTS, WIDTHS, FigureSettings
from ..stages.bands import ripple_depth
from ..stages.heatmap import HEATMAPS
from ..stages.profile import PROFILES

__all__ = ["plot_similarity_heatmaps", "plot_decay_curves", "save_figure", "study_figure", "STUDY_FIGURES",
           "FIGURE_TABLES", "FigureLimitWarning", "MAX_PANELS", "MAX_CURVES", "MAX_ROWS", "MAX_GRID_TABLES",
           "FigureSettings", "FORMATS", "WIDTHS", "MIN_FONT_POINTS", "short_labels", "print_figure", "study_colours"]


#: file name -> function(tables, title) returning a Figure, or None to skip (see :func:`study_figure`).
STUDY_FIGURES: dict[str, Callable[[dict[str, pd.DataFrame], str | None], Figure | None]] = {}
#: file name -> names of the tables the figure is drawn from (see :func:`study_figure`).
FIGURE_TABLES: dict[str, tuple[str, ...]] = {}


def study_figure(filename: str, tables: tuple[str, ...]):
    """Decorator: ``draw(tables, title) -> Figure | None`` draws the study figure ``filename`` from the tables.

    ``tables`` names the tables it reads. It returns None when they are
    absent or empty (a study without rotary runs writes no ``inv_freq``);
    ``poslab run`` and ``poslab plot`` then skip the figure. ``poslab plot``
    refuses a folder that lacks a table its study wrote, naming the figures
    drawn from it.
    """
    def register(draw):
        if STUDY_FIGURES.setdefault(filename, draw) is not draw:
            raise ValueError(f"two study figures are named {filename}")
        FIGURE_TABLES[filename] = tuple(tables)
        return draw

    return register


def _split_label(label: str) -> tuple[str, list[str]]:
    """``kind(k=v, k=v)`` → (kind, ["k=v", ...]); commas inside brackets or quotes stay in their item."""
    m = re.fullmatch(r"([^()]+)\((.*)\)", str(label), flags=re.S)
    if not m:
        return str(label), []
    items, depth, start, body = [], 0, 0, m.group(2)
    for i, ch in enumerate(body):
        depth += ch in "[({" and 1 or (-1 if ch in "])}" else 0)
        if ch == "," and depth == 0:
            items.append(body[start:i].strip())
            start = i + 1
    items.append(body[start:].strip())
    joined: list[str] = []  # "mrope_section=24,20,20" (a list written without brackets) stays one item
    for item in items:
        if joined and "=" not in item:
            joined[-1] += "," + item
        elif item:
            joined.append(item)
    return m.group(1), joined


def short_labels(labels) -> tuple[dict, str]:
    """Short run names for a figure: the ``k=v`` parameters every label shares are factored out.

    Labels are ``kind(k=v, ...)`` (:attr:`poslab.encodings.Encoding.label`). With two labels or more, a
    parameter all of them carry with the same value is left out of each name and returned once, for the
    title; when every label is of one kind, the kind too (``rotary(rope_theta=10000, rotary_dim=128,
    rope_type=linear)`` … → ``rope_type=linear`` … and ``"all runs: rotary, rope_theta=10000,
    rotary_dim=128"``; a run left with no parameter is ``"rotary (defaults)"``). A path parameter is named by
    its file's stem (``config=.../llama-3.1-8b.json`` → ``llama-3.1-8b``).

    Returns
    -------
    (dict, str)
        label → short name (distinct labels stay distinct), and the shared parameters' text ("" when none).
    """
    labels = list(dict.fromkeys(labels))
    if len(labels) < 2:
        return {label: str(label) for label in labels}, ""
    split = {label: _split_label(label) for label in labels}
    shared = [item for item in split[labels[0]][1] if all(item in items for _, items in split.values())]
    kinds = {kind for kind, _ in split.values()}
    one_kind = len(kinds) == 1 and any(items for _, items in split.values())
    names = {}
    for label, (kind, items) in split.items():
        rest = [_short_item(item) for item in items if item not in shared]
        names[label] = (", ".join(rest) or f"{kind} (defaults)") if one_kind else \
            f"{kind}({', '.join(rest)})" if rest else kind
    if len(set(names.values())) < len(names):  # factoring out made two names equal: keep the labels
        return {label: str(label) for label in labels}, ""
    shared = ([next(iter(kinds))] if one_kind else []) + shared
    return names, ("all runs: " + ", ".join(shared)) if shared else ""


def _short_item(item: str) -> str:
    """``config=src/poslab/data/configs/llama-3.1-8b.json`` → ``llama-3.1-8b``: a path parameter is named by its file."""
    _, _, value = item.partition("=")
    value = value.strip("'\"")
    return PurePath(value).stem if "/" in value else item


def _title_with(title: str | None, shared: str) -> str | None:
    """The figure title with the parameters every run shares on a line of its own."""
    if not shared:
        return title
    return f"{title}\n{shared}" if title else shared


def print_figure(fig: Figure, settings: "FigureSettings") -> Figure:
    """Lay ``fig`` out at the print width of ``settings`` (its height scaled by the square root of the width
    ratio, so panels keep a readable aspect; never lower for a figure of text rows, ``height_follows_text``). A
    legend to the right moves under the panels at column width,
    and at page width when beside it the panels of a row would get narrower than :data:`MIN_PANEL_INCHES`.
    Panel titles, axis labels and the entries of a legend under the panels are then wrapped to their room
    (:func:`_fit_texts`): :func:`save_figure` writes the figure at this size, so everything must fit inside."""
    w, h = fig.get_size_inches()
    width = settings.inches
    ratio = width / w if getattr(fig, "height_follows_width", False) else math.sqrt(width / w)
    if getattr(fig, "height_follows_text", False):  # rows of text (a forest plot): their height is in points
        ratio = max(1.0, ratio)
    fig.set_size_inches(width, max(1.6, h * ratio) if getattr(fig, "height_follows_width", False)
                        else max(0.42 * width, h * ratio))
    if fig._suptitle is not None:  # a long title wraps at the figure's width
        fig._suptitle.set_wrap(True)
    panels_in_row = max((sum(1 for other in fig.axes if abs(other.get_position().y1 - ax.get_position().y1) < 1e-6)
                         for ax in fig.axes), default=1)
    beside_inches = 0.0
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not getattr(legend, "beside_panels", False):
            continue
        texts = [t.get_text() for t in legend.get_texts()]
        longest = max((len(line) for t in texts for line in t.splitlines()), default=0)
        beside = 0.6 + longest * PRINT_FONTS["legend.fontsize"] * 0.55 / 72  # handle + text at ~0.55 em a character
        if settings.width == "page" and (width - beside) / panels_in_row >= MIN_PANEL_INCHES:
            fig.set_figheight(max(fig.get_figheight(), getattr(fig, "legend_inches", 0)))
            beside_inches = beside
            continue
        handles = legend.legend_handles
        legend.remove()
        ncols = 2 if longest <= 24 or settings.width == "page" else 1
        rows = sum(t.count("\n") + 1 for t in texts) / ncols
        caption = fig._supxlabel.get_text() if fig._supxlabel is not None else ""
        caption_lines = sum(math.ceil(len(line) * 7 * 0.5 / 72 / (width - 0.2) + 1e-9) for line in caption.split("\n")
                            ) if caption else 0  # 7 pt at ~0.5 em a character: the caption is drawn under the legend
        fig.set_size_inches(width, fig.get_figheight() + 0.15 * rows + 0.2 + 0.12 * caption_lines)  # room for both
        fig.legend(handles, texts, loc="outside lower center", ncols=ncols, frameon=False,
                   fontsize=PRINT_FONTS["legend.fontsize"])
    _fit_texts(fig, beside_inches)
    return fig


def _fit_texts(fig: Figure, beside: float = 0.0) -> None:
    """Wrap, at spaces, the texts that would be wider than their room at ``fig``'s size: each panel's title and
    x label to its column's width (the figure's width less ``beside`` inches of legend and a colorbar's room,
    shared by the columns),
    its y label to its row's height, and the entries of a legend under the panels to the figure's width shared
    by its columns. The saved file is the figure's size (:func:`save_figure`): what does not fit is not drawn."""
    width, height = fig.get_size_inches()
    if any(ax.get_subplotspec() is None and ax.get_position().height > ax.get_position().width for ax in fig.axes):
        beside += 0.75  # a colorbar right of the panels, with its ticks and label
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is None:  # a colorbar: laid out beside its panels
            continue
        nrows, ncols = spec.get_gridspec().get_geometry()
        column = (width - beside) * len(spec.colspan) / ncols - 0.15
        row = height * len(spec.rowspan) / nrows - 0.35
        for text, room in ((ax.title, column), (ax.xaxis.label, column), (ax.yaxis.label, row)):
            _wrap_text(text, room)
    for legend in fig.legends:
        room = (width - 0.2) / max(1, legend._ncols) - 0.45  # the handle and its gap: ~0.45 in
        for text in legend.get_texts():
            _wrap_text(text, room)


def _wrap_text(text, inches: float) -> None:
    """Break ``text``'s lines at spaces so that none is wider than ``inches`` (mathtext is left as it is)."""
    label = text.get_text()
    if label and "$" not in label and inches > 0:
        text.set_text(_wrapped(label, text.get_fontproperties(), inches * 72, 72))


#: The narrowest panel (inches at print size) beside a legend; below it the legend goes under the panels.
MIN_PANEL_INCHES = 1.6


def _nonempty(tables: dict[str, pd.DataFrame], name: str) -> bool:
    return name in tables and len(tables[name]) > 0


#: What one figure draws at most, so its size stays bounded whatever the study (a 200-run grid drew a
#: 2080 x 24055 px heatmap figure): heatmap panels (4 x 4), curves in one legend, rows of a forest plot,
#: vision tables (a row of two panels each). Beyond, the first ones in the table's order are drawn
#: (study order; the forest plot: comparison.csv's ranked order), the figure says so and a
#: :class:`FigureLimitWarning` names the table that holds them all.
MAX_PANELS, MAX_CURVES, MAX_ROWS, MAX_GRID_TABLES = 16, 10, 30, 4


class FigureLimitWarning(UserWarning):
    """A figure draws only the first labels of a large study; its tables hold them all."""


def _first(labels: list, limit: int, what: str, where: str) -> tuple[list, str | None]:
    """The first ``limit`` labels, and the note saying what was left out (None when nothing was)."""
    if len(labels) <= limit:
        return labels, None
    return labels[:limit], (f"draws the first {limit} of {len(labels)} {what}; the other {len(labels) - limit} "
                            f"are in {where}")


def _say_left_out(fig: Figure, note: str | None, decimated: bool = False, caption=()) -> Figure:
    """Write ``note`` under the figure and warn with it (``poslab run`` / ``plot`` record it in manifest.json);
    with ``decimated``, say that long curves are drawn decimated (:data:`DECIMATED_NOTE`; no warning: nothing
    is left out); ``caption``: further lines under the figure (what a mark means, a caution)."""
    lines = ([f"This figure {note}."] if note else []) + list(caption) + \
        ([f"Note: {DECIMATED_NOTE}."] if decimated else [])
    if lines:
        # the figure's x "label": inside the figure, with room made for it by the constrained layout
        fig.supxlabel("\n".join(lines), fontsize=7, color="0.25", wrap=True)
    if note:
        warnings.warn(note, FigureLimitWarning, stacklevel=3)
    return fig

_HEATMAP_COLUMNS = HEATMAPS.declared("label", "seed", "row_start", "row_stop", "col_start", "col_stop", "mean_similarity")
_PROFILE_COLUMNS = PROFILES.declared("label", "seed", "distance", "mean_similarity")


def curve_palette(n: int) -> list:
    """``n`` line colours: colour-blind safe (seaborn "colorblind") and mutually distinct up to 6.

    Orange and vermillion, the palette's two oranges, are only both used from
    the 7th curve on (black comes first); beyond 10 curves, "husl".
    """
    if n > 10:
        import seaborn as sns  # only here: its import (~0.15 s, and pyplot's) is not paid for a palette

        return sns.color_palette("husl", n)
    cb = [to_rgb(c) for c in _COLORBLIND]
    return [cb[0], cb[3], cb[2], cb[4], (0.1, 0.1, 0.1), cb[9], cb[1], cb[5], cb[7], cb[8]][:n]


def study_colours(tables: dict[str, pd.DataFrame]) -> dict:
    """label → line colour for every figure of a study: one mapping, so a run keeps its colour in each figure.

    The labels are taken once, in study order, from ``summary`` (every run), else from the first table with a
    ``label`` column; the colours are :func:`curve_palette` of their number (colour-blind safe up to 6, distinct
    up to 10, "husl" beyond). A figure draws each of its labels in this colour whichever subset it shows.
    """
    for name in ("summary", *tables):
        frame = tables.get(name)
        if isinstance(frame, pd.DataFrame) and "label" in frame.columns and len(frame):
            labels = list(pd.unique(frame["label"]))
            return dict(zip(labels, curve_palette(len(labels))))
    return {}


def _label_colours(labels, colours: dict | None) -> dict:
    """``colours`` (a study's :func:`study_colours`) when it names every label, else a palette of ``labels``."""
    if colours and all(label in colours for label in labels):
        return {label: colours[label] for label in labels}
    return dict(zip(labels, curve_palette(len(labels))))


#: seaborn's "colorblind" palette (``seaborn.color_palette("colorblind").as_hex()``, from Okabe & Ito's colours).
_COLORBLIND = ("#0173b2", "#de8f05", "#029e73", "#d55e00", "#cc78bc", "#ca9161", "#fbafe4", "#949494", "#ece133",
               "#56b4e9")


def _check_frame(df, required, name):
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"{name} must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{name} lacks required column(s) {missing}; it has {list(df.columns)}")
    if df.empty:
        raise ValueError(f"{name} is empty: nothing to plot")


class _LabelRows:
    """A table's labels in order of first appearance, and each label's rows, from one factorization of its label
    column. A study's tables hold each run's rows together, so a label's rows are usually one block, taken as a
    slice: no boolean filter of every row per label (a 100-run sweep at 131,072 positions has 13 million profile
    rows, and each filter took every column of them). Rows of a label in several blocks are taken by position."""

    def __init__(self, frame: pd.DataFrame):
        self.frame = frame
        codes, uniques = pd.factorize(frame["label"], sort=False)
        self.present = list(uniques)
        self._code = {label: i for i, label in enumerate(self.present)}
        self._codes = codes
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if len(codes) else np.array([], dtype=int)
        self._blocks: dict[int, list[tuple[int, int]]] = {}
        for start, stop in zip(starts, np.r_[starts[1:], len(codes)]):
            self._blocks.setdefault(int(codes[start]), []).append((int(start), int(stop)))

    def __call__(self, label) -> pd.DataFrame:
        """The rows of ``label`` (none when it is absent), in the table's order."""
        code = self._code.get(label)
        if code is None:
            return self.frame.iloc[:0]
        blocks = self._blocks[code]
        if len(blocks) == 1:
            return self.frame.iloc[blocks[0][0]:blocks[0][1]]
        return self.frame.iloc[np.flatnonzero(self._codes == code)]


def _select_labels(df, labels, name, present=None):
    present = list(pd.unique(df["label"])) if present is None else present
    if labels is None:
        return present
    labels = [labels] if isinstance(labels, str) else list(labels)
    unknown = [lab for lab in labels if lab not in present]
    if unknown:
        raise ValueError(f"labels {unknown} are not in {name}; available: {present}")
    if not labels:
        raise ValueError("labels is empty: nothing to plot")
    return labels


def _pick_seed(sub, seed):
    """Rows of one label for one seed; returns (rows, seed shown or None)."""
    seeds = sorted(int(s) for s in pd.unique(sub["seed"].dropna()))
    if not seeds:  # deterministic encoding: seed is NA
        return sub, None
    if seed == "first":
        chosen = seeds[0]
    elif isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and int(seed) in seeds:
        chosen = int(seed)
    else:
        raise ValueError(f"seed must be 'first' or one of {seeds} for label {sub['label'].iloc[0]!r}, got {seed!r}")
    return sub[sub["seed"].notna() & (sub["seed"] == chosen)], chosen


#: How each kernel scale is named on figures (summary.csv ``kernel``; :mod:`poslab.encodings.kernel`).
SCALE_NAMES = {"cosine": "cosine similarity", "attention_prior": "attention prior exp(b(k) − b(0))",
               "score": "score kernel (xPos)"}


def kernel_scales(summary: pd.DataFrame | None) -> dict:
    """label → kernel scale (``cosine``, ``attention_prior``) from a summary table; {} without one."""
    if summary is None or not {"label", "kernel"} <= set(summary.columns):
        return {}
    known = summary[summary["kernel"].notna() & (summary["kernel"] != "")]
    return dict(zip(known["label"], known["kernel"]))


def _scale_label(scales: dict, labels, default: str = "cosine similarity") -> str:
    """The axis / colorbar label of the scales the shown labels are on (both named when they are mixed)."""
    used = list(dict.fromkeys(scales.get(label, "cosine") for label in labels))
    if used == ["cosine"]:
        return default
    if len(used) == 1:
        return SCALE_NAMES.get(used[0], used[0])
    return " | ".join(u.replace("_", " ") for u in used)  # each panel / legend entry says which


def _with_scale(text: str, label, scales: dict) -> str:
    scale = scales.get(label, "cosine")
    return text if scale == "cosine" else f"{text} [{scale.replace('_', ' ')}]"


def summary_status(row, name: str) -> str | None:
    """Why summary ``name`` of a summary-table ``row`` is not a number (``not_reached``, ``within_noise``,
    ``flat``, ... from ``summary_notes``; ``no selected model`` for a decay length without one), None when it is."""
    value = row.get(name)
    if value is not None and pd.notna(value):
        return None
    notes = row.get("summary_notes")
    notes = notes if isinstance(notes, str) else ""
    m = re.match(r"every summary: (\w+)", notes) or re.search(rf"(?:^|; ){re.escape(name)}: (\w+)", notes)
    if m:
        return m.group(1)
    return "no selected model" if name == "decay_length" else "not a number"


def window_dependent_summaries(row) -> set[str]:
    """The summaries a summary-table ``row`` flags ``window_dependent`` (window_sensitivity.csv)."""
    moved = row.get("window_dependent")
    return set(moved.split(";")) if isinstance(moved, str) and moved else set()


#: What a figure says of a summary flagged window_dependent (the README's caution).
WINDOW_NOTE = ("*: this summary moves by more than 5 % (when resampled, beyond its bootstrap interval too) between "
               "a quarter, half and all of the run's window, or is a number only at a smaller one (window_dependent, "
               "window_sensitivity.csv): it describes this window, not the encoding")


def _block_matrix(rows, label):
    """Pivot block rows to (matrix, extent); missing blocks become NaN."""
    if rows.duplicated(["row_start", "col_start"]).any():
        raise ValueError(f"label {label!r} has several rows for the same block (mix of studies or n_positions?); "
                         "filter the table to one run per label first")
    mat = rows.pivot(index="row_start", columns="col_start", values="mean_similarity").sort_index().sort_index(axis=1)
    extent = (int(rows["col_start"].min()), int(rows["col_stop"].max()),
              int(rows["row_stop"].max()), int(rows["row_start"].min()))
    return mat.to_numpy(dtype=float, na_value=np.nan), extent


def plot_similarity_heatmaps(heatmaps: pd.DataFrame, *, labels=None, seed="first", ncols=None,
                             cmap="RdBu_r", panel_size=3.2, title=None, scales: dict | None = None) -> Figure:
    """Block-averaged cosine-similarity matrices, one panel per encoding.

    Parameters
    ----------
    heatmaps : DataFrame
        One row per run x block with columns ``label`` (str), ``seed`` (Int64,
        NA for deterministic encodings), ``row_start``, ``row_stop``,
        ``col_start``, ``col_stop`` (int positions; the block covers
        [start, stop)) and ``mean_similarity`` (float in [-1, 1]). Blocks form
        a regular, near-uniform grid per run, as from
        ``np.linspace(0, n_positions, bins + 1).astype(int)``.
    labels : list of str, optional
        Labels to show, in this order. Default: all, in order of appearance.
        At most :data:`MAX_PANELS` are drawn (the first ones; the figure
        says what was left out, with a :class:`FigureLimitWarning`).
    seed : "first" or int
        Seed shown for stochastic encodings: ``"first"`` is the smallest.
    ncols : int, optional
        Panels per row. Default: all in one row up to 4, then wrap.
    cmap : str or Colormap
        Diverging colormap; the scale is fixed to [-1, 1] for every panel.
    panel_size : float
        Width and height of one panel in inches.
    title : str, optional
        Figure title.
    scales : dict, optional
        label → kernel scale (:func:`kernel_scales` of the summary table): a
        panel on another scale than ``cosine`` (a bias's attention prior) says
        so in its title, and the colorbar names every scale shown.

    Returns
    -------
    matplotlib.figure.Figure
        One ``imshow`` image per label (``extent`` in positions, origin at the
        top left) and one shared colorbar labelled "cosine similarity" (or the scales shown).
        Near-uniform blocks are drawn as equal cells.
    """
    _check_frame(heatmaps, _HEATMAP_COLUMNS, "heatmaps")
    by_label = _LabelRows(heatmaps)
    labels, note = _first(_select_labels(heatmaps, labels, "heatmaps", by_label.present), MAX_PANELS,
                          "labels' heatmaps (study order)",
                          "heatmaps.csv")
    n = len(labels)
    # at most 4 panels a row, rows as even as can be (5 panels: 3 + 2, larger than 4 + 1); 2 when drawn for one
    # journal column (FigureSettings.rc: figure.figsize)
    most = 4 if matplotlib.rcParams["figure.figsize"][0] > WIDTHS["column"] else 2
    ncols = min(n, math.ceil(n / math.ceil(n / most))) if ncols is None else max(1, min(int(ncols), n))
    nrows = math.ceil(n / ncols)
    fig = Figure(figsize=(panel_size * ncols + 1.0, panel_size * nrows + (0.4 if title else 0.0)),
                 layout="constrained")
    grid = fig.add_gridspec(nrows, ncols)
    axes = [fig.add_subplot(grid[k // ncols, k % ncols]) for k in range(n)]  # no empty panel made and removed
    cmap = matplotlib.colormaps.get_cmap(cmap).with_extremes(bad="0.85")
    # a panel title's line: its column at print width, less the tick labels' room (the title is centred on the
    # panel, right of its column's centre); a parameter longer than that breaks after "=" or ","
    room = (matplotlib.rcParams["figure.figsize"][0] - 0.9) / ncols - 0.15
    title_font = FontProperties(size=PRINT_FONTS["axes.titlesize"])  # the size at print (FigureSettings.rc)
    names, shared = short_labels(labels)
    image, sizes, title_lines, unshown = None, [], [0] * nrows, []
    for k, (ax, label) in enumerate(zip(axes, labels)):
        rows, shown = _pick_seed(by_label(label), seed)
        mat, extent = _block_matrix(rows, label)
        sizes.append(_block_size(rows))
        image = ax.imshow(mat, cmap=cmap, vmin=-1.0, vmax=1.0, extent=extent, origin="upper",
                          aspect="equal", interpolation="nearest")
        text = _with_scale(names[label] if shown is None else f"{names[label]}, seed {shown}", label, scales or {})
        if shown is not None and (others := sorted(set(by_label(label)["seed"].dropna().astype(int)) - {shown})):
            unshown.append(f"{names[label]}: seed{'s' if len(others) > 1 else ''} {', '.join(map(str, others))} "
                           "not shown (heatmaps.csv holds them)")
        ax.set_title(_wrapped(text, title_font, room * 72, 72) + f"\n{sizes[-1]} block means")
        title_lines[k // ncols] = max(title_lines[k // ncols], ax.get_title().count("\n") + 1)
        ax.xaxis.set_major_locator(FixedLocator(_end_ticks(extent[0], extent[1])))  # 0, the middle, the end
        ax.yaxis.set_major_locator(FixedLocator(_end_ticks(extent[3], extent[2])))
        ax.tick_params(labelsize=7)
        if k + ncols >= n:  # no panel below
            ax.set_xlabel("position j")
        if k % ncols == 0:
            ax.set_ylabel("position i")
    if matplotlib.rcParams["figure.figsize"][0] <= WIDTHS["column"]:  # one column: the width to the panels
        cbar = fig.colorbar(image, ax=axes, location="bottom", shrink=0.8, aspect=30)
    else:
        cbar = fig.colorbar(image, ax=axes, shrink=0.9 if nrows > 1 else 0.8, pad=0.02)
    cbar.set_label(_scale_label(scales or {}, labels))
    cbar.set_ticks([-1.0, -0.5, 0.0, 0.5, 1.0])  # five labels fit under a one-column figure's panels
    title = _title_with(title, shared)
    if title:
        fig.suptitle(title)
    # room for the panels' titles beyond two lines, at print size (the figure is scaled to the print width); in one
    # column (colorbar under the panels), each row's square panel as wide as its column allows (less the ticks)
    printed = matplotlib.rcParams["figure.figsize"][0]
    scale = printed / fig.get_figwidth()
    if printed <= WIDTHS["column"]:
        side = (printed - 0.4) / ncols - 0.6
        fig.set_figheight((nrows * (side + 0.5) + sum(title_lines) * 0.15 + 0.6 + (0.5 if title else 0.0)
                           + 0.8) / scale)  # rows, their titles, the colorbar, the title, the caption
    else:
        fig.set_figheight(fig.get_figheight() + sum(max(0, lines - 2) for lines in title_lines) * 0.16 / scale)
    fig.height_follows_width = True  # square panels: print_figure scales the height with the width
    caption = ["Each cell is the mean over a block of position pairs (its size above each panel). A diagonal "
               "block's mean includes "
               "its off-diagonal pairs (i ≠ j), so it is below 1 even though every position's similarity to itself "
               "is 1 (a random table's diagonal blocks: about 1 / block side), not weak self-similarity."]
    return _say_left_out(fig, note, caption=caption + [f"{line}." for line in unshown])


def _end_ticks(start: int, stop: int) -> list[int]:
    """Ticks of a heatmap axis from ``start`` to ``stop`` (positions): both ends and the middle (0, 512, 1024)."""
    return sorted({int(start), int(round((start + stop) / 2)), int(stop)})


def _block_size(rows) -> str:
    """"8 × 8" (the blocks' side in positions; "≈8 × 8" when the grid is near-uniform, sides differing by one)."""
    sides = np.concatenate([(rows["row_stop"] - rows["row_start"]).to_numpy(), (rows["col_stop"] - rows["col_start"]).to_numpy()])
    lo, hi = int(sides.min()), int(sides.max())
    return f"{lo} × {lo}" if lo == hi else f"≈{round(float(np.median(sides)))} × {round(float(np.median(sides)))}"


def _seed_summary(rows, label, fit_limit=None):
    """One label's rows: per distance the mean and sd across its seeds (display only), and the bootstrap band of a
    single run (that run's rows as they are: no grouping of 10^6 distances, no copy of the other columns).

    ``fit_limit`` (an array, one value per row; :func:`_fit_limits`) empties ``fitted_similarity`` beyond it.
    Raises ValueError when a run has several rows at one distance (several studies mixed)."""
    bands = {f"ci_{side}": f"mean_similarity_ci_{side}" for side in ("low", "high")}
    if rows["seed"].nunique(dropna=False) <= 1:  # one run
        distance = rows["distance"].to_numpy()
        order = None if np.all(distance[1:] > distance[:-1]) else np.argsort(distance, kind="stable")
        if order is not None:  # a study's profiles are sorted: no sort of 10^6 rows
            distance = distance[order]
            if np.any(np.diff(distance) == 0):
                raise ValueError(f"profiles has several rows per (label, seed, distance) for {label!r}, e.g. from "
                                 "several studies; filter it to one study (or give the runs distinct labels) first")

        def column(name, limit=None):
            if name not in rows:
                return np.full(len(distance), np.nan)
            values = rows[name].to_numpy(dtype=float, copy=True)
            if limit is not None:
                values[rows["distance"].to_numpy(dtype=float) > limit] = np.nan
            return values if order is None else values[order]

        mean = column("mean_similarity")
        # copy=False: the columns as made here, not stacked into one block (a copy of 10^6 rows x 6)
        return pd.DataFrame({"distance": distance, "mean": mean, "sd": np.full(len(distance), np.nan),
                             "n_seeds": np.isfinite(mean).astype(int), "fit": column("fitted_similarity", fit_limit),
                             **{name: column(col) for name, col in bands.items()}}, copy=False)
    if fit_limit is not None and "fitted_similarity" in rows:
        fitted = rows["fitted_similarity"].to_numpy(dtype=float, copy=True)
        fitted[rows["distance"].to_numpy(dtype=float) > fit_limit] = np.nan
        rows = rows.assign(fitted_similarity=fitted)
    if rows.duplicated(["seed", "distance"]).any():
        raise ValueError(f"profiles has several rows per (label, seed, distance) for {label!r}, e.g. from several "
                         "studies; filter it to one study (or give the runs distinct labels) first")
    g = rows.groupby("distance", sort=True)
    out = g["mean_similarity"].agg(mean="mean", sd="std", n_seeds="count")
    if "fitted_similarity" in rows:  # where every seed's fit is (each is drawn only over its fitted distances)
        fit = g["fitted_similarity"]
        out["fit"] = fit.mean().where(fit.count() == g.size())
    else:
        out["fit"] = np.nan
    for name, col in bands.items():
        out[name] = g[col].first() if col in rows else np.nan
    return out.reset_index()


def _decay_marks(summary, labels):
    """label -> (decay_length, ci_low, ci_high, level) for labels with one ok run and a decay length."""
    if summary is None or not {"label", "decay_length"} <= set(summary.columns):
        return {}
    ok = summary[summary["status"] == "ok"] if "status" in summary.columns else summary
    marks = {}
    for label in labels:
        rows = ok[ok["label"] == label]
        if len(rows) != 1 or not np.isfinite(float(rows["decay_length"].iloc[0])):
            continue
        row = rows.iloc[0]
        marks[label] = (float(row["decay_length"]), float(row.get("decay_length_ci_low", np.nan)),
                        float(row.get("decay_length_ci_high", np.nan)), row.get("ci_level", np.nan),
                        "decay_length" in window_dependent_summaries(row))
    return marks


#: Curves with more points than this are drawn decimated (:func:`drawn_points`); the tables keep every point.
MAX_DRAWN_POINTS = 8192
#: What a figure with a decimated curve says under itself.
DECIMATED_NOTE = (f"curves of more than {MAX_DRAWN_POINTS} distances are drawn decimated: every distance up to "
                  f"{MAX_DRAWN_POINTS // 4}, then the lowest and highest point of each of {3 * MAX_DRAWN_POINTS // 8} "
                  "bins (geometric on a log axis); the CSV tables hold every distance")


def drawn_points(x, y, *, log: bool = False, limit: int = MAX_DRAWN_POINTS) -> np.ndarray:
    """Indices of the points of a long curve that are drawn (decimation for figures only; tables keep every point).

    Parameters
    ----------
    x : ndarray of shape (n,)
        Increasing abscissae (distances, positions).
    y : ndarray of shape (n,)
        The curve; NaN points are never chosen as extremes.
    log : bool
        The axis is logarithmic: bins are geometric in x (equal widths on screen).
    limit : int
        At most about this many points are drawn.

    Returns
    -------
    ndarray of int, increasing
        Every index when ``n <= limit``. Otherwise the first ``limit // 4`` points (the start of a curve, where
        a log axis spreads the distances), then, over the rest of x cut into ``3 * limit // 8`` bins (geometric
        on a log axis, equal on a linear one), the lowest and the highest point of each bin, and the last point:
        every extreme of the curve is drawn (its ripples' envelope is kept), at most ``limit + 1`` points.
        O(n), no sort.
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    n = x.size
    if n <= limit:
        return np.arange(n)
    head = limit // 4
    n_bins = 3 * limit // 8
    lo, hi = x[head], x[-1]
    if log and lo > 0 and hi > lo:
        edges = np.geomspace(lo, hi, n_bins + 1)
    else:
        edges = np.linspace(lo, hi, n_bins + 1)
    # x increases: bin b is the run of points from the first at or beyond its left edge (the edges found in x,
    # not x in the edges: O(bins log n)); the lowest and highest finite point of each bin, the first reaching it
    bounds = np.unique(np.r_[head, head + np.searchsorted(x[head:], edges[1:n_bins], side="left"), n])
    starts, lengths = bounds[:-1], np.diff(bounds)
    keep = [np.arange(head), [n - 1]]
    segment = np.repeat(np.arange(starts.size), lengths)
    for reduce in (np.fmin, np.fmax):  # NaN points are never the extreme (all-NaN bins give none)
        extreme = reduce.reduceat(y, starts)
        hit = np.flatnonzero(y[head:] == extreme[segment]) + head
        first = np.r_[True, segment[hit[1:] - head] != segment[hit[:-1] - head]] if hit.size else hit.astype(bool)
        keep.append(hit[first])
    return np.unique(np.concatenate(keep))


def _plot_decimated(ax, x, y, **style):
    """``ax.plot`` of the points :func:`drawn_points` keeps (log axis: geometric bins); True if it dropped any."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = drawn_points(x, y, log=ax.get_xscale() == "log")
    ax.plot(x[keep], y[keep], **style)
    return keep.size < x.size


def plot_decay_curves(profiles: pd.DataFrame, *, summary: pd.DataFrame | None = None, labels=None, min_distance=1,
                      panel_size=(6.0, 4.2), title=None, colours: dict | None = None) -> Figure:
    """Similarity profiles against distance, on a linear and a log distance axis.

    Parameters
    ----------
    profiles : DataFrame
        One row per run x distance with columns ``label``, ``seed`` (Int64, NA
        for deterministic encodings), ``distance`` (int, positions) and
        ``mean_similarity``; optionally ``fitted_similarity`` (the selected
        decay model at that distance, NaN where none was selected). Other
        columns (``study``, ``kind``, parameters, ``std_similarity``, ...)
        are ignored. At most one row per (label, seed, distance). With
        ``mean_similarity_ci_low`` / ``_ci_high`` (the anchor-block bootstrap
        band), labels with one run show it shaded.
    summary : DataFrame, optional
        The ``summary`` table: for labels with one ok run, ``decay_length``
        and ``decay_length_ci_low`` / ``_ci_high`` are marked on the profile
        (a diamond with a horizontal interval bar); its ``kernel`` column names
        the scale of each label (a bias's attention prior is marked in the legend
        and the y axis names every scale shown); its ``fit_max_distance`` (per
        run) ends each run's dashed fit: a fit is drawn only over the distances
        it was fitted on (``fitted_similarity`` extrapolates beyond them).
    labels : list of str, optional
        Labels to show, in this order. Default: all, in order of appearance.
        At most :data:`MAX_CURVES` are drawn (the first ones; the figure says
        what was left out, with a :class:`FigureLimitWarning`).
    min_distance : int
        Smallest distance drawn (the log panel starts at ``max(1, min_distance)``).
    panel_size : (float, float)
        Width and height of each of the two panels, in inches.
    title : str, optional
        Figure title.
    colours : dict, optional
        label → colour (:func:`study_colours`: the same colour for a run in every figure of a study).

    Returns
    -------
    matplotlib.figure.Figure
        Two axes sharing y. Solid line: mean over seeds; shaded band: +-1 sd
        across seeds (labels with several seeds) or the bootstrap band (one
        run); dashed line: mean selected fit over the distances every run of
        the label fitted; diamond: decay length with its interval (an arrow
        to the panel's edge when it is open above). One legend to the right
        of the panels.
    """
    _check_frame(profiles, _PROFILE_COLUMNS, "profiles")
    by_label = _LabelRows(profiles)
    labels, note = _first(_select_labels(profiles, labels, "profiles", by_label.present), MAX_CURVES,
                          "labels' profiles (study order)",
                          "profiles.csv (decay lengths: summary.csv, comparison.csv)")
    marks = _decay_marks(summary, labels)
    scales = kernel_scales(summary)
    per_label = {}
    for label in labels:
        rows = by_label(label)
        per_label[label] = _seed_summary(rows, label, _fit_limits(rows, summary))
    names, shared = short_labels(labels)
    colours = _label_colours(labels, colours)
    w, h = panel_size
    fig = Figure(figsize=(2 * w + 2.2, h), layout="constrained")
    ax_lin, ax_log = fig.subplots(1, 2, sharey=True)
    starts = {ax_lin: min_distance, ax_log: max(1, min_distance)}
    handles, any_band, any_fit, any_ci, decimated, starred, any_open = [], False, False, False, False, False, False
    for label in labels:
        s = per_label[label]
        colour = colours[label]
        for ax, start in starts.items():
            d = s.iloc[int(np.searchsorted(s["distance"].to_numpy(), start)):]  # sorted by distance: a slice
            full_x, full_y = d["distance"].to_numpy(dtype=float), d["mean"].to_numpy(dtype=float)
            keep = drawn_points(full_x, full_y, log=ax is ax_log)  # long profiles: what a pixel shows
            decimated |= keep.size < len(d)
            d = d.iloc[keep]
            x = d["distance"].to_numpy(dtype=float)
            ax.plot(x, d["mean"].to_numpy(dtype=float), color=colour, lw=1.6, ls="-", label=label)
            if (d["n_seeds"] > 1).any():
                sd = d["sd"].to_numpy(dtype=float)
                if np.nanmax(sd, initial=0.0) > 0:  # a band of zero width is not drawn, nor in the legend
                    ax.fill_between(x, d["mean"] - sd, d["mean"] + sd, color=colour, alpha=0.2, lw=0)
                    any_band = True
            elif d["ci_low"].notna().any() and (d["ci_high"] > d["ci_low"]).any():
                ax.fill_between(x, d["ci_low"].to_numpy(dtype=float), d["ci_high"].to_numpy(dtype=float),
                                color=colour, alpha=0.3, lw=0)
                any_ci = True
            if label in marks:
                length, low, high = marks[label][:3]
                y_at = float(np.interp(length, full_x, full_y))
                if np.isfinite(low) and np.isfinite(high):  # the interval as drawn from its ends: a point estimate
                    # may lie outside its own percentile interval (a biased statistic), never a negative error bar
                    ax.plot([low, high], [y_at, y_at], color=colour, lw=1.5, marker="|", ms=6, zorder=5)
                elif np.isfinite(low):  # open above (high NaN): a bar from its low end to the panel's edge, an arrow
                    _open_interval(ax, low, y_at, colour, lw=1.0)
                    any_open = True
                # white face, the curve's colour as edge: visible on its own curve whatever the colour
                ax.plot([length], [y_at], "D", ms=5.5, mfc="white", mec=colour, mew=1.6, zorder=6)
            if d["fit"].notna().any():
                ax.plot(x, d["fit"].to_numpy(dtype=float), color=colour, lw=1.2, ls="--",
                        label=f"{label} (selected fit)")
                any_fit = True
        star = "*" if label in marks and marks[label][4] else ""
        starred |= bool(star)
        handles.append(Line2D([], [], color=colour, lw=1.6,
                              label=textwrap.fill(_with_scale(names[label], label, scales) + star, 32,
                                                  break_long_words=False)))
    for ax in (ax_lin, ax_log):
        ax.axhline(0.0, color="0.6", lw=0.8, zorder=0)
        ax.set_xlabel("distance (positions)")
        ax.grid(alpha=0.25, lw=0.5)
    ax_log.set_xscale("log")
    ax_lin.set_ylabel(_scale_label(scales, labels, "mean cosine similarity"))
    ax_lin.set_title("linear distance")
    ax_log.set_title("log distance")
    if any_fit:
        handles.append(Line2D([], [], color="0.3", lw=1.2, ls="--", label="selected fit (dashed, fitted range)"))
    if any_band:
        handles.append(Patch(color="0.3", alpha=0.2, label="±1 sd across seeds"))
    if any_ci:
        handles.append(Patch(color="0.3", alpha=0.3, label="bootstrap band (anchor blocks)"))
    if marks:
        level = next((m[3] for m in marks.values() if isinstance(m[3], float) and np.isfinite(m[3])), None)
        handles.append(Line2D([], [], color="0.3", marker="D", ms=5.5, mfc="white", mec="0.3", mew=1.6, lw=1.5,
                              label="decay length" + (f", {level:.0%} interval" if level else "")))
    caption = _hidden_curves(per_label, labels, names) + ([WINDOW_NOTE.replace("this summary", "the decay length")]
                                                        if starred else [])
    if any_open:
        caption.append("An arrow to the panel's edge: the decay length's interval is open above (the data do not "
                       "bound it within the window).")
    return _finish(fig, handles, _title_with(title, shared), note, decimated=decimated, caption=caption)


def _fit_limits(rows: pd.DataFrame, summary: pd.DataFrame | None) -> np.ndarray | None:
    """Per row of one label's profile rows, the largest distance its run's fit was fitted on (summary
    ``fit_max_distance``; inf for a run without one), or None when no run has one.

    The profiles table holds the selected model at every distance; a fit describes only the distances it was
    fitted on (e.g. up to the first zero crossing), so a figure draws it there only (:func:`_seed_summary`)."""
    if "fitted_similarity" not in rows or summary is None or not {"label", "fit_max_distance"} <= set(summary.columns) \
            or not len(rows):
        return None
    runs = summary[summary["label"] == rows["label"].iloc[0]]
    if not len(runs):
        return None
    seed = rows["seed"] if "seed" in rows else pd.Series(np.nan, index=rows.index)
    limit = np.full(len(rows), np.inf)
    for _, run in runs.iterrows():
        end = pd.to_numeric(pd.Series([run["fit_max_distance"]]), errors="coerce").iloc[0]
        if pd.isna(end):
            continue
        same = seed.isna().to_numpy() if pd.isna(run.get("seed")) else (seed == run["seed"]).fillna(False).to_numpy()
        limit[same] = float(end)
    return limit


def _open_interval(ax, low: float, y: float, colour, **style) -> None:
    """An interval open above on ``ax``: a bar from ``low`` (data) to the axes' right edge, ending in an arrow."""
    ax.annotate("", xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(low, y), textcoords="data",
                arrowprops=dict(arrowstyle="-|>", color=colour, lw=style.get("lw", 1.5), shrinkA=0, shrinkB=0,
                                mutation_scale=8), zorder=5)


def _hidden_curves(per_label: dict, labels, names) -> list[str]:
    """Caption lines naming curves hidden under a later one (identical profiles: only the last is visible)."""
    def curve(label):  # made when compared only: a label alone, or of its own length, is never copied
        return per_label[label][["distance", "mean"]].to_numpy(dtype=float)

    lines = []
    for i, label in enumerate(labels):
        same = next((other for other in labels[:i] if len(per_label[other]) == len(per_label[label])
                     and np.allclose(curve(other), curve(label), rtol=0, atol=1e-9, equal_nan=True)), None)
        if same is not None:
            lines.append(f"{names[same]} lies under {names[label]} (drawn after it): their profiles are identical")
    return lines


def _finish(fig, handles, title, note, grid_axes=(), decimated: bool = False, caption=()) -> Figure:
    """The common end of a legend-right figure: light grids, the legend outside right, the title, the left-out
    note (and the decimation note, and the ``caption`` lines)."""
    for ax in grid_axes:
        ax.grid(alpha=0.25, lw=0.5, which="both")
    side = max(fig.axes, key=lambda ax: ax.get_position().x1)  # the rightmost panel: the legend to its right,
    # aligned with the panels' top (a figure legend "outside right" would run into a long title)
    legend = side.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.03, 1.0), borderaxespad=0.0,
                         frameon=False)
    legend.beside_panels = True  # print_figure moves it under the panels at column width
    lines = sum(t.get_text().count("\n") + 1 for t in legend.get_texts())
    size = legend.get_texts()[0].get_fontsize() if lines else 0
    fig.legend_inches = lines * size * 1.5 / 72 + 0.6  # a legend taller than the panels would collapse them
    if fig.legend_inches > fig.get_figheight():
        fig.set_figheight(fig.legend_inches)
    if title:
        fig.suptitle(title)
    return _say_left_out(fig, note, decimated, caption)


def save_figure(fig, path, *, dpi=150, close: bool = True) -> None:
    """Write ``fig`` to ``path`` at its own size and close it (unless ``close`` is False: another format follows).

    The file is the figure's size exactly (a figure laid out by :func:`print_figure` at 3.5 in is 3.5 in
    wide): its layout engine (constrained layout) fits every text and legend inside, so the canvas is not
    cropped or grown to its contents (``bbox_inches="tight"`` drew every figure twice and made a 3.5 in figure
    3.6-4.2 in). The layout is computed at the first save and kept for the next ones (the figure's layout
    engine is set to none), so a second format draws the same positions without laying it out again.

    Parameters
    ----------
    fig : matplotlib.figure.Figure
        Figure returned by a poslab plot function (or any Figure).
    path : str or os.PathLike
        Output file; the suffix picks the format (``.png``, ``.svg``,
        ``.pdf``, ...), PNG when there is none. Parent folders are created.
    dpi : float
        Resolution for raster formats.
    close : bool
        Close a pyplot-managed figure afterwards.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = path.suffix[1:].lower() if path.suffix else "png"
    _lay_out(fig, dpi)
    # PNG: zlib level 1 instead of 6 (~40 % less time encoding, files ~10-20 % larger; the pixels are the same)
    fig.savefig(path, dpi=dpi, format=fmt, **({"pil_kwargs": {"compress_level": 1}} if fmt == "png" else {}))
    pyplot = sys.modules.get("matplotlib.pyplot")  # only pyplot-managed figures need closing
    if close and pyplot is not None:
        pyplot.close(fig)


def _lay_out(fig: Figure, dpi: float) -> None:
    """Run ``fig``'s layout engine once, at ``dpi`` on an Agg canvas, and keep its positions (the engine removed).

    ``savefig`` with a layout engine draws the whole figure twice: once without rendering, to lay it out,
    then for the file. Laid out here, the file is drawn once, and a second format keeps the same positions."""
    engine = fig.get_layout_engine()
    if engine is None or isinstance(engine, PlaceHolderLayoutEngine):  # none, or laid out already
        return

    old_dpi = fig.dpi
    fig.set_dpi(dpi)
    try:
        if type(fig.canvas) is not FigureCanvasAgg:
            FigureCanvasAgg(fig)  # a Figure() has a base canvas, without the renderer text is measured with
        for ax in fig.axes:  # log axes' labels as text, not mathtext (parsing each "$10^{k}$" took ~30 ms)
            for axis in (ax.xaxis, ax.yaxis):
                for get, put in ((axis.get_major_formatter, axis.set_major_formatter),
                                 (axis.get_minor_formatter, axis.set_minor_formatter)):
                    if type(formatter := get()) is LogFormatterSciNotation:
                        put(_LogFormatterText(formatter._base, labelOnlyBase=formatter.labelOnlyBase,
                                              minor_thresholds=formatter.minor_thresholds))
        for text in (fig._suptitle, fig._supxlabel):
            if text is not None and text.get_wrap() and not text.get_usetex() and "$" not in text.get_text():
                # wrapped once here: matplotlib re-wraps a wrapped text, measuring it word by word, each time
                # the text is measured (~15 times a layout)
                text.set_text(_wrapped(text.get_text(), text.get_fontproperties(),
                                       fig.bbox.width - 2 * WRAP_MARGIN_INCHES * fig.dpi, fig.dpi))
                text.set_wrap(False)
        _caption_under_legend(fig)
        engine.execute(fig)
    finally:
        fig.set_dpi(old_dpi)
    # no engine at all: with one, even a placeholder, savefig draws the figure once without rendering first
    auto = matplotlib.rcParams["figure.autolayout"] or matplotlib.rcParams["figure.constrained_layout.use"]
    fig.set_layout_engine("none" if auto else None)


def _caption_under_legend(fig: Figure) -> None:
    """A legend under the panels (:func:`print_figure`) and a caption (:func:`_say_left_out`) share the figure's
    bottom margin, where the constrained layout puts both (the margin is the larger of the two, not their sum):
    the caption gets blank lines above it for the legend's height, and the legend is anchored on them."""
    caption = fig._supxlabel
    legends = [legend for legend in fig.legends if legend._outside_loc == "lower" and legend._bbox_to_anchor is None]
    if caption is None or not caption.get_text().strip() or not legends:
        return
    renderer = fig.canvas.get_renderer()
    legend = legends[0]
    text = caption.get_text()
    lines = text.count("\n") + 1
    caption_px = caption.get_window_extent(renderer).height
    legend_px = legend.get_window_extent(renderer).height
    gap_px = 4 * fig.dpi / 72
    caption.set_text("\n" * math.ceil((legend_px + gap_px) / (caption_px / lines)) + text)
    pad_px = matplotlib.rcParams["figure.constrained_layout.h_pad"] * fig.dpi  # where the layout puts the caption
    legend.set_loc("lower center")
    legend.set_bbox_to_anchor((0.5, (pad_px + caption_px + gap_px) / fig.bbox.height), transform=fig.transFigure)


class _LogFormatterText(LogFormatterSciNotation):
    """matplotlib's log-axis labels (``10⁻¹``, ``10³``, ``2×10⁰``) written with Unicode superscripts instead of
    mathtext: the same labels, without parsing a mathtext expression per label (the first parse of each took
    ~30 ms). A label of another form is left as matplotlib writes it."""

    def __call__(self, x, pos=None):
        label = super().__call__(x, pos)
        if m := _MATH_POWER.fullmatch(label):
            sign, coeff, base, exponent = m.groups()
            return f"{'−' if sign else ''}{coeff + '×' if coeff else ''}{base}{exponent.translate(_SUPERSCRIPTS)}"
        if m := _MATH_NUMBER.fullmatch(label):
            return m.group(1).replace("-", "−")
        return label


_SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_MATH_POWER = re.compile(r"\$\\mathdefault\{(-?)(?:([\d.]+)\\times)?(\d+)\^\{(-?\d+)\}\}\$")
_MATH_NUMBER = re.compile(r"\$\\mathdefault\{(-?[\d.]+)\}\$")

#: Room (inches) kept on each side of a figure's title and caption when they are wrapped at the figure's width.
WRAP_MARGIN_INCHES = 0.08


def _wrapped(text: str, prop, width: float, dpi: float) -> str:
    """``text`` with its lines broken at spaces so that each is at most ``width`` pixels wide at ``dpi``.

    Greedy, like matplotlib's ``Text(wrap=True)``, but measured from the font's advance widths (unhinted, no
    kerning: within ~1 % of the drawn width at 300 dpi; 2 % is allowed for) instead of laying out every
    candidate line. A word wider than ``width`` is broken after a "=", "_", "/" or "," (a parameter's name, a
    path), and otherwise stays whole on its own line."""
    font = get_font(findfont(prop))
    font.set_size(prop.get_size_in_points(), dpi)
    advance = {}

    def measure(part: str) -> float:
        for ch in part:
            if ch not in advance:
                glyph = font.load_char(ord(ch), flags=LoadFlags.NO_HINTING) if font.get_char_index(ord(ch)) else None
                advance[ch] = glyph.linearHoriAdvance / 65536 if glyph else 0.6 * prop.get_size_in_points() * dpi / 72
        return 1.02 * sum(advance[ch] for ch in part)

    lines = []
    for paragraph in text.split("\n"):
        line = ""
        words = []  # (text, what joins it to the word before on a line)
        for word in paragraph.split(" "):  # a word wider than the room is broken after "=", "_", "/" or ","
            joint = " "
            while measure(word) > width and (cut := _break_at(word, lambda part: measure(part) <= width)):
                words.append((word[:cut], joint))
                word, joint = word[cut:], ""
            words.append((word, joint))
        for word, joint in words:
            candidate = f"{line}{joint}{word}" if line else word
            if line and measure(candidate) > width:
                lines.append(line)
                line = word
            else:
                line = candidate
        lines.append(line)
    return "\n".join(lines)


def _break_at(word: str, fits) -> int:
    """The last place after a "=", "_", "/" or "," where the start of ``word`` still ``fits`` (0: none)."""
    cuts = [i + 1 for i, ch in enumerate(word[:-1]) if ch in "=_/,"]
    return max((cut for cut in cuts if fits(word[:cut])), default=0)


@study_figure("similarity_heatmaps.png", tables=("heatmaps", "summary"))
def heatmaps_figure(tables, title=None):
    """The block-averaged similarity matrices of every run, each on its kernel's scale (None without heatmaps)."""
    if not _nonempty(tables, "heatmaps"):
        return None
    return plot_similarity_heatmaps(tables["heatmaps"], title=title, scales=kernel_scales(tables.get("summary")))


@study_figure("decay_curves.png", tables=("profiles", "summary"))
def decay_figure(tables, title=None):
    """The similarity profiles with their selected fits and decay lengths (None without profiles)."""
    if not _nonempty(tables, "profiles"):
        return None
    return plot_decay_curves(tables["profiles"], summary=tables.get("summary"), title=title,
                             colours=study_colours(tables))


#: first_minimum.png shows distances up to this many times the farthest first minimum drawn (at least
#: FIRST_MINIMUM_ZOOM_MIN, at most the window): the minimum, the rise after it and the fall before it.
FIRST_MINIMUM_ZOOM = 4.0
FIRST_MINIMUM_ZOOM_MIN = 64.0


@study_figure("first_minimum.png", tables=("profiles", "summary"))
def first_minimum_figure(tables, title=None):
    """The profiles with each run's first minimum marked (None when no run has one within its window)."""
    summary = tables.get("summary")
    if not _nonempty(tables, "profiles") or summary is None or "first_minimum" not in summary:
        return None
    marks = summary[summary["first_minimum"].notna()]
    if marks.empty:
        return None
    shown, note = _first(list(pd.unique(marks["label"])), MAX_CURVES, "labels with a first minimum (study order)",
                         "summary.csv (first_minimum) and profiles.csv")
    marks = marks[marks["label"].isin(shown)]
    names, shared = short_labels(shown)
    fig = Figure(figsize=(6.0, 3.4), layout="constrained")
    ax = fig.subplots()
    colours = _label_colours(shown, study_colours(tables))
    decimated, handles, unshown, kinds = False, [], [], set()
    by_label = _LabelRows(tables["profiles"])
    # the distances shown: up to FIRST_MINIMUM_ZOOM times the farthest first minimum, not a whole window that
    # hides a minimum at 34 among 10^6 distances (the decay curves show every distance)
    window = float(tables["profiles"]["distance"].max())
    shown_up_to = min(window, max(FIRST_MINIMUM_ZOOM * float(marks["first_minimum"].max()), FIRST_MINIMUM_ZOOM_MIN))
    for label, runs in marks.groupby("label", sort=False):
        colour = colours[label]
        run = runs.iloc[0]  # the first seed of a stochastic encoding
        rows = by_label(label)
        seeds = sorted(int(x) for x in pd.unique(summary.loc[summary["label"] == label, "seed"].dropna()))
        if len(seeds) > 1:  # the other seeds are not drawn: the figure says so
            others = [str(x) for x in seeds if x != int(run["seed"])]
            unshown.append(f"{names[label]}: seed {int(run['seed'])} shown, seed{'s' if len(others) > 1 else ''} "
                           f"{', '.join(others)} not shown")
        this_run = (rows["seed"].isna() if pd.isna(run["seed"]) else rows["seed"] == run["seed"]).fillna(False).to_numpy(bool)
        this_run = this_run & (rows["distance"] <= shown_up_to).to_numpy(bool)
        if not this_run.all():  # no filter (a copy of every column) when the label has one run within the range
            rows = rows[this_run]
        keep = drawn_points(rows["distance"].to_numpy(dtype=float), rows["mean_similarity"].to_numpy(dtype=float))
        decimated |= keep.size < len(rows)
        rows = rows.iloc[keep]  # long profiles: decimated
        ax.plot(rows["distance"], rows["mean_similarity"], color=colour, lw=1.4)
        ripple = ripple_depth(run) is not None  # a dip of an exact cosine sum: marked apart, not as a trough
        kinds.add(ripple)
        ax.plot([run["first_minimum"]], [run["first_minimum_similarity"]], "o" if ripple else "v",
                ms=6 if ripple else 7, mfc="white", mec=colour, mew=1.6, zorder=5)
        handles.append(Line2D([], [], color=colour, lw=1.6, label=textwrap.fill(names[label], 32,
                                                                                 break_long_words=False)))
    if False in kinds:
        handles.append(Line2D([], [], ls="", marker="v", ms=7, mfc="white", mec="0.3", mew=1.6, label="first minimum"))
    if True in kinds:
        handles.append(Line2D([], [], ls="", marker="o", ms=6, mfc="white", mec="0.3", mew=1.6,
                              label="first minimum, a ripple of an\nexact cosine sum: not a length\nscale"))
    ax.set(xlabel="distance (positions)", ylabel="mean cosine similarity", title="first minimum of the profile")
    ax.grid(alpha=0.25, lw=0.5)
    if shown_up_to < window:
        unshown.append(f"Distances up to {shown_up_to:.0f} shown ({FIRST_MINIMUM_ZOOM:g}x the farthest first minimum); "
                       f"the profiles go on to {window:.0f} (decay_curves.png)")
    # the legend beside the panel (under it at column width, print_figure): never over a curve or a triangle
    return _finish(fig, handles, _title_with(title, shared), note, decimated=decimated,
                   caption=[f"{line}." for line in unshown])
