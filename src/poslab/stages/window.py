"""Window sensitivity: each run's headline summaries at nested windows, and which of them move.

What "window" means. A run analyses ``n_positions`` positions up to distance
``max_distance``. Its nested windows are the fractions f = 1/4, 1/2 and 1 of
it: the first ⌊n_positions · f⌋ positions of the run's table, up to distance
⌊(max_distance + 1) · f⌋ − 1 (at most the positions − 1): exactly what the
same study would measure with ``n_positions`` (and ``max_distance``) scaled by
f, from the same table (an encoding whose table depends on n_positions, as
dynamic and longrope RoPE, is not regenerated). For a translation-invariant
table this is the full profile truncated at the smaller distance (its
summaries are window-independent wherever they are reached); for a learned
table the smaller window also averages fewer positions, which is how GPT-2's
band widths move with n_positions.

A summary is ``window_dependent`` when, between two windows at which it is a
number, it moves by more than :data:`WINDOW_TOLERANCE` (5 %) of the larger
value and by more than one position, and, for a sampled table with bootstrap
intervals, by more than its sampling noise: one window's value lies outside
the other window's bootstrap interval (an interval open above has no upper
end; without resamples the tolerances alone decide, as for an exact run); or
when it is a number at a smaller window and not at a larger one, unless the
smaller window's own interval is open above (its resamples do not all reach
it within that window either: the two windows agree that it may not be
reached, e.g. the null model's zero crossing, a noise dip at a quarter of
the window, 62 [48, >], and ``within_noise`` at the whole). 5 %: about the
half-width of the 95 % interval of GPT-2's 0.5 band width at 1024 positions
([92, 101] around 97); one position, because the crossings are integers.
The intervals: a fixed 5 % alone flagged moves that are pure noise, e.g. the
null model's 1/e distance at a quarter, half and all of 1024 positions, 32
[26, 40], 33 [29, 39] and 34, each inside the others' intervals. (Two 95 %
intervals of nested, positively correlated windows: a value outside the
other's interval is a strong hint, not a formal test at 5 %.) An exact run
(a kernel, a translation-invariant table) has no sampling noise: any move
beyond the tolerances is real. A summary reached only at the larger windows
is not flagged (a larger window sees farther: that is what ``not_reached``
means).

**Intervals at every window.** A sampled table's summaries get bootstrap
intervals at each smaller window too (``value_ci_low`` / ``_ci_high``; the
run's own window: summary.csv's): the window's positions are cut into anchor
blocks of a data-driven length (:func:`poslab.analysis.bootstrap.choose_block_length`
on the window's rows), resampled with the run's generator seed
(``default_rng((bootstrap_seed, seed))``, the draws a study of that many
positions makes), and every resampled profile is summarised with the
window's own standard errors (:func:`poslab.stages.bands.summariser`), widened
as the run's (:func:`poslab.analysis.bootstrap.interval_widening`). Their
replicates are rows of bootstrap.csv with that ``window``, so the comparison
judges a difference at every common window from paired replicates. No refit
of the decay models there (the decay length is not compared). The window's
mean profile is its anchor-block sums totalled over the blocks (the same
Σ_i S[i, i + k] as the run's whole-table FFT gives, by FFTs of blocks: equal
to ~1e-16 relative, so no second FFT of the window's rows). Cost: the
window's anchor-block sums and n_resamples summaries of its profile, about
(1/4 + 1/2) of the run's own summaries' bootstrap.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pandas as pd

from .base import Output, RunContext, Stage, register_stage
from .schema import Column, Table

__all__ = ["WindowSensitivity", "WINDOW_SENSITIVITY", "WINDOW_FRACTIONS", "WINDOW_TOLERANCE", "nested_windows",
           "window_dependent", "WindowAnalysis", "window_analyses"]

#: Fractions of the run's window analysed.
WINDOW_FRACTIONS = (0.25, 0.5, 1.0)
#: Relative move beyond which a summary is window-dependent (and by more than one position).
WINDOW_TOLERANCE = 0.05
#: The summaries whose window dependence is checked (the band widths are added per threshold).
_HEADLINE = ("e_folding_distance", "zero_crossing", "first_minimum", "integral_scale")

WINDOW_SENSITIVITY = Table(
    "window_sensitivity", "run × window × summary",
    "Each run's model-free summaries at nested windows (a quarter, half and all of its positions and distances).",
    (
        Column("fraction", "float", "", "fraction of the run's window: 0.25, 0.5 or 1", required=True),
        Column("window_positions", "int", "positions", "positions analysed: the first n_positions · fraction of "
               "the run's table", required=True),
        Column("window", "int", "positions", "largest distance analysed: (max_distance + 1) · fraction - 1",
               required=True),
        Column("summary", "str", "", "the summary (summary.csv's column name)", required=True),
        Column("value", "float", "positions", "its value at this window (empty unless status is ok); with its "
               "anchor-block bootstrap interval at this window for a sampled table at a smaller window (the run's "
               "own window: summary.csv; exact runs: none; high end empty: beyond the window)", interval=True),
        Column("status", "str", "", "ok, not_reached, undefined, within_noise or the profile's degenerate status"),
        Column("ill_conditioned", "bool", "", "the crossing is ill-conditioned at this window (summaries.csv)"),
        Column("lower_bound", "float", "positions", "integral_scale not_reached at this window on an exact profile: "
               "the integral of S(k) / S(0) up to this window, a lower bound of the integral scale (summaries.csv "
               "lower_bound); empty otherwise"),
    ),
    keys="short",
)


def nested_windows(n_positions: int, max_distance: int) -> list[tuple[float, int, int]]:
    """(fraction, positions, max distance) of each nested window, smallest first: the run's own, and the smaller
    ones with at least 3 positions and distances up to at least 2 (distinct from each other)."""
    out = []
    for f in WINDOW_FRACTIONS[:-1]:
        n = int(math.floor(n_positions * f))
        d = min(n - 1, int(math.floor((max_distance + 1) * f)) - 1)
        if n >= 3 and d >= 2 and (n, d) != (n_positions, max_distance) and (not out or (n, d) != out[-1][1:]):
            out.append((f, n, d))
    return [*out, (1.0, n_positions, max_distance)]


def window_dependent(frame: pd.DataFrame) -> list[str]:
    """The summaries of one run's window_sensitivity rows that move with the window (module docstring).

    ``frame`` has the columns ``summary``, ``window``, ``value``, ``status`` and, for a sampled table,
    ``value_ci_low`` / ``value_ci_high`` (a missing low end: no interval, as for an exact run; a missing high
    end with a low end: open above)."""
    moved = []
    for name, rows in frame.groupby("summary", sort=False):
        rows = rows.sort_values("window")
        values, ok = rows["value"].to_numpy(dtype=float), (rows["status"] == "ok").to_numpy()
        low = rows["value_ci_low"].to_numpy(dtype=float) if "value_ci_low" in rows else np.full(len(rows), np.nan)
        high = rows["value_ci_high"].to_numpy(dtype=float) if "value_ci_high" in rows else np.full(len(rows), np.nan)

        def outside(v, i):  # v outside window i's interval; None: window i has no interval
            if not np.isfinite(low[i]):
                return None
            return bool(v < low[i] or (np.isfinite(high[i]) and v > high[i]))

        def open_above(i):  # window i's own interval is open above: the number may as well not be reached there
            return bool(np.isfinite(low[i]) and not np.isfinite(high[i]))

        for a in range(len(rows)):
            for b in range(a + 1, len(rows)):
                if ok[a] and not ok[b] and not open_above(a):
                    moved.append(name)
                    break
                if ok[a] and ok[b]:
                    diff = abs(values[b] - values[a])
                    if diff > 1 and diff > WINDOW_TOLERANCE * max(abs(values[a]), abs(values[b])):
                        beyond = [x for x in (outside(values[b], a), outside(values[a], b)) if x is not None]
                        if not beyond or any(beyond):  # exact (no intervals), or beyond the sampling noise
                            moved.append(name)
                            break
            if moved and moved[-1] == name:
                break
    return moved


def _truncated(profile, n_positions: int, max_distance: int):
    """An exact (kernel) profile over a smaller window: its first distances, pairs counted for n_positions."""
    keep = profile.distance <= max_distance
    n_pairs = n_positions - profile.distance[keep]
    return dataclasses.replace(profile, distance=profile.distance[keep], mean_similarity=profile.mean_similarity[keep],
                               std_similarity=profile.std_similarity[keep], n_pairs=n_pairs, std_pairs=n_pairs,
                               n_positions=n_positions)


@dataclasses.dataclass(frozen=True)
class WindowAnalysis:
    """One nested window of a run: its profile's summaries and, for a sampled table, their bootstrap.

    Attributes
    ----------
    fraction : float
    n_positions, max_distance : int
        The window (positions analysed, largest distance).
    summaries : poslab.analysis.summaries.ProfileSummaries
    replicates : dict of name -> ndarray of shape (n_resamples,)
        Every summary of each resampled profile (+inf: beyond the window or within the noise; NaN: undefined);
        empty for the run's own window (the run's bootstrap has them), exact runs and n_resamples = 0.
    intervals : dict of name -> (low, high)
        Percentile intervals of ``replicates`` (high NaN: open above).
    exact : bool
        No sampling variability (kernel runs; an exactly translation-invariant table).
    block_length : int or None
    """

    fraction: float
    n_positions: int
    max_distance: int
    summaries: object
    replicates: dict = dataclasses.field(default_factory=dict)
    intervals: dict = dataclasses.field(default_factory=dict)
    exact: bool = False
    block_length: int | None = None


def window_analyses(ctx: RunContext) -> list[WindowAnalysis]:
    """The run's nested windows, smallest first (module docstring); the last is the run's own (its summaries)."""
    from ..analysis.bootstrap import (_resample_weights, anchor_block_sums, block_standard_errors, choose_block_length,
                                      interval_widening, summary_interval, summary_replicates)
    from ..analysis.profile import _similarity_profile
    from ..analysis.similarity import UnitRows, unit_rows
    from .bands import run_summaries, summariser

    o = ctx.options
    out = []
    for f, n, d in nested_windows(ctx.n_positions, ctx.max_distance):
        if f == 1:
            out.append(WindowAnalysis(f, n, d, ctx.summaries, exact=ctx.kernel is not None))
            continue
        if ctx.kernel is not None:  # translation invariant: the window's profile is the kernel's, truncated
            out.append(WindowAnalysis(f, n, d, run_summaries(_truncated(ctx.profile, n, d), o), exact=True))
            continue
        units = ctx.units
        with ctx.step(f"window {n} positions", o.n_resamples or None, "resamples") as step:
            if o.center:  # centred on the window's own mean, as a study of n positions would be
                units = unit_rows(ctx.table[:n], center=True)
            else:
                units = UnitRows(units.vectors[:n], units.valid[:n], units.center)
            length, correlation = ctx.block_lengths[n, d] if (n, d) in ctx.block_lengths \
                else choose_block_length(units, d, max_blocks=o.n_blocks)
            blocks = ctx.window_blocks.pop((n, d), None) or anchor_block_sums(units, d, length)  # made beside the run's
            profile = _similarity_profile(units, d, precision=o.precision,  # the mean: the blocks' sums, totalled
                                          lag_sums=(blocks.sums.sum(axis=0), blocks.counts.sum(axis=0)))
            noise_se = block_standard_errors(blocks)
            summaries = run_summaries(profile, o, noise_se)
            exact = not np.nanmax(noise_se, initial=0.0) > 1e-12
            if exact or not o.n_resamples:
                out.append(WindowAnalysis(f, n, d, summaries, exact=exact, block_length=length))
                continue
            rng = np.random.default_rng((o.bootstrap_seed, 0 if ctx.seed is None else int(ctx.seed)))
            weights = _resample_weights(blocks.sums.shape[0], o.n_resamples, rng)
            replicates = summary_replicates(profile.distance.astype(float), blocks.sums, blocks.counts, weights,
                                            summariser(profile, o, noise_se), progress=step)
        widen = interval_widening(blocks.sums.shape[0], o.ci_level, correlation, length)
        intervals = {name: summary_interval(v, o.ci_level, widen) for name, v in replicates.items()}
        noisy = {name for name, status in zip(summaries.names, summaries.status) if status == "within_noise"}
        intervals = {name: (low, math.nan) if name in noisy else (low, high) for name, (low, high) in intervals.items()}
        out.append(WindowAnalysis(f, n, d, summaries, replicates, intervals, False, length))
    return out


@register_stage
@dataclasses.dataclass(frozen=True)
class WindowSensitivity(Stage):
    """The summaries at a quarter, half and all of the run's window, and which of them move."""

    name = "window_sensitivity"
    positions = "line"  # measured along the sequence (|i - j|), which a grid's flattened index is not
    description = ("the model-free summaries at nested windows (the first quarter, half and all of the run's "
                   "positions and distances), and which move by more than 5 % and beyond their noise")
    tables = (WINDOW_SENSITIVITY,)
    summary = (
        Column("window_dependent", "str", "", "the summaries that move by more than 5 % (and one position) between "
               "the nested windows and, for a sampled table, beyond the other window's bootstrap interval, or are "
               "reached at a smaller window (sampled: with an interval closed above) and not at a larger; "
               "';'-separated (empty: none)"),
    )
    uses = frozenset({"units", "profile"})

    def compute(self, ctx: RunContext) -> Output:
        frames = []
        for w in ctx.window_analyses:
            s = w.summaries
            low, high = zip(*(w.intervals.get(name, (math.nan, math.nan)) for name in s.names))
            frames.append(pd.DataFrame({
                "fraction": w.fraction, "window_positions": w.n_positions, "window": w.max_distance,
                "summary": list(s.names), "value": s.values, "value_ci_low": low, "value_ci_high": high,
                "status": list(s.status), "ill_conditioned": s.ill_conditioned,
                "lower_bound": s.lower_bound}))
        frame = pd.concat(frames, ignore_index=True)
        return Output(summary={"window_dependent": ";".join(window_dependent(_with_own_intervals(frame, ctx)))},
                      tables={"window_sensitivity": frame})


def _with_own_intervals(frame: pd.DataFrame, ctx: RunContext) -> pd.DataFrame:
    """``frame`` with the run's own window's rows given the run's bootstrap intervals (summary.csv's, which the
    table leaves to summary.csv), for :func:`window_dependent`; unchanged without them (an exact run, no
    resamples). The run's bootstrap is made by then (the profile stage's band needs it)."""
    from ..analysis.summaries import threshold_name

    boot = ctx.bootstrap if ctx.options.n_resamples else None
    if boot is None or boot.exact:
        return frame
    own = {threshold_name(t): ci for t, ci in boot.band_widths_ci.items()} | dict(boot.summaries_ci)
    frame = frame.copy()
    rows = frame["window"] == ctx.max_distance
    for column, end in (("value_ci_low", 0), ("value_ci_high", 1)):
        frame.loc[rows, column] = frame.loc[rows, "summary"].map(lambda n: own.get(n, (np.nan, np.nan))[end])
    return frame
