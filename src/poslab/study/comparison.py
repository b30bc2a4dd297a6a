"""Compare encodings across a study by their model-free summaries: ranked, with intervals, and which
differences hold at every window.

Built from the result tables alone (``summary``, ``summaries``,
``window_sensitivity``, ``profiles``, ``bootstrap``, ``decay_metrics``), so it
can be recomputed from a results folder.

Per label, each summary (:mod:`poslab.analysis.summaries`) and its interval come from

* **seeds** when the label has several successful runs with different seeds
  (a stochastic encoding): the seeds' profiles are pooled (weighted by pair
  counts) and summarised (a crossing counts beyond the pooled profile's
  noise with the seeds as clusters, :func:`poslab.analysis.bootstrap.block_noise`),
  and seeds are resampled with replacement
  (:func:`poslab.analysis.bootstrap.resample_units`), each resampled pooled
  profile summarised again (:func:`poslab.analysis.summaries.summaries_many`);
  percentile intervals, a resample beyond the window or within the noise
  counted as +inf, not left out (open above when the upper quantile is, as
  a run's in ``summary.csv``; left out, it biased the interval low and never
  left it open);
* **the run** otherwise: its ``summary.csv`` value and interval (the
  anchor-block bootstrap's), or no interval when the run is exact
  (``ci_method = exact``: no sampling variability).

**Window dependence** (``window_dependent``) is judged on what the label
reports, by the rule of :func:`poslab.stages.window.window_dependent`: a
single run keeps its own flag (summary.csv); a label with seeds is judged on
its pooled profile cut to a quarter, half and all of its window, with the
seed-bootstrap interval at each (the same seed resamples, cut:
:func:`_seed_windows`), not on its seeds' flags (flagging the label when any
seed is flagged made false flags grow with the number of seeds: the null
model's 30 seeds flagged three summaries that each seed alone flags in 1-2 of
30).

The label's decay length (the selected fit's; the seeds' pooled fit) is
listed too, as a ``decay_length`` row of ``comparison.csv`` with its
interval and fit standard error, but not ranked or compared: for a profile
without a scale it measures the window (README).

**Verdicts** (:func:`summary_verdict`). Two labels are compared at every
*common window*: each run's summaries are also measured at a quarter and half
of its window (``window_sensitivity.csv``; a label with seeds: its pooled
profile cut to those windows' distances, :func:`_seed_windows`, so at its own
window a pair compares the values ``comparison.csv`` reports, not the mean of
its seeds' rows), so runs analysed over different
windows (a 256-position table against 1024-position ones) meet at the
windows they share instead of being refused. At each common window the
difference has a sign (a summary ``not_reached`` lies beyond the window,
so it is the larger) and, where both labels have an interval there, an
uncertainty. An integral scale ``not_reached`` is different: it integrates S
up to a zero crossing beyond the window, which need not make it larger than
the window or than another label's value. S ≥ 0 over the whole window then,
so for an exact label the integral up to the window (``lower_bound`` of
summaries.csv, and of window_sensitivity.csv at its smaller windows) is a
lower bound of it: it is the larger when the other label's upper end (its
range's or interval's at that window, its value where it has none) lies
below that bound, has no sign otherwise, and ranks by its bound. A sampled
label's has no sign (a bound estimated with noise is no bound: its tail
may stay above 0 by noise alone). The uncertainties:

* an exact label (``ci_method = exact``) has none at any window, except the
  range a ±0.02 change of the level moves a summary over, where that
  change matters: an ill-conditioned crossing's ``crossing_low`` ..
  ``crossing_high`` (as distances, ⌈·⌉; open above when the level − 0.02 is
  not crossed within the window); a crossing ``not_reached`` whose level
  + 0.02 is crossed inside the window, (``crossing_low``, ∞) (the first
  distance below the level + 0.02; at a smaller window too, where the exact
  profile is the same, truncated; else (W + 1, ∞)): "> W" alone would call
  it longer than a value the level's change puts it below (QA: "> 1023"
  against 996 was ``longer`` while S falls below the level + 0.02 at 909);
  an integral scale ending at an ill-conditioned zero crossing, the range
  of the integral up to the zero crossings of ±0.02, bounded from the
  zero crossing's z₋ ≤ z ≤ z₊ by S ≥ 0 before z, S ≥ −0.02 up to z₊ and
  |S| ≤ S(0) = 1 on the cosine scale: [min(max(0, I − (z − z₋)),
  I − 0.02 (z₊ − z)), I + (z₊ − z)] (z₋ .. z₊ themselves are distances, no
  values of the integral); on another kernel scale unknown;
* an estimated single run has its interval at its own window (summary.csv)
  and at each smaller nested window (``window_sensitivity.csv``: the
  anchor-block bootstrap of that window); a label with seeds at each of
  its nested windows, its own included: the seed bootstrap of its pooled
  profile cut to the window (the same resamples at every window);
* two estimated labels at a window where both have replicates of that
  summary (``bootstrap.csv``'s, a label with seeds' seed resamples; their
  own window, or a nested one):
  the percentile interval of the paired replicates' differences (paired by
  index: the resamples are independent, so this draws from the joint
  distribution; Schenker & Gentleman 2001 on why this beats asking whether
  two intervals overlap), else whether the two intervals are disjoint
  (conservative).

A summary ``within_noise`` at a window (the profile falls to the level but
not significantly below it, :mod:`poslab.analysis.summaries`) gives no sign
there (it may lie anywhere from its first crossing to beyond the window),
as two summaries both beyond the window do, and an integral scale beyond
the window whose bound does not settle it (or that has none): the verdict
rests on the other common windows (``noise`` in ``reason``), and is ``not
comparable`` if none is left, its ``reason`` naming the case at each window.

The difference counts (``longer`` / ``shorter``) only if it exceeds its
uncertainty at every common window where the uncertainty is known (at
least one) and keeps its sign at every common window; a sign that changes, or
a difference that exceeds its uncertainty at one window and not at another,
is ``window-dependent``. Two exact labels are judged at their largest common
window alone: their profiles do not depend on the window, so a smaller
window only truncates them and sees less (judged at every window, such
pairs came out ``window-dependent`` with one sign throughout, when a
crossing ``not_reached`` at the smaller window had no ±0.02 range there).
A ``not distinguishable`` between two different exact values says which
ranges overlap, and one with a crossing beyond the window names the range
its level + 0.02 brings it back to.
"""

from __future__ import annotations

import itertools
import math
import warnings
import zlib

import numpy as np
import pandas as pd

from ..analysis import fit_decay
from ..analysis.bootstrap import (BOOTSTRAP_LEVEL, BOOTSTRAP_SEED, MAX_FAILED_FRACTION, N_RESAMPLES, AnchorBlocks,
                                  block_standard_errors, bootstrap_units, min_replicates, percentile_interval,
                                  resample_units)
from ..analysis.decay import MIN_AIC_GAIN
from ..analysis.summaries import CONDITIONING_DELTA, STATUSES, profile_summaries, summaries_many, summary_names
from ..stages.bands import ripple_depth
from ..stages.window import nested_windows, window_dependent
from .spec import StudyWarning

__all__ = ["compare_runs", "summary_verdict", "seed_bootstrap"]

_INTEGER = ("integral_scale",)  # the summaries that are not integer distances
#: Summaries not bounded below by the window when not reached there: an integral scale integrates S up to a zero
#: crossing beyond the window, which may still be a value below the window (or below another label's value); an
#: exact label's is bounded below by its integral up to the window (``lower_bound``), a sampled label's not at all.
_UNBOUNDED = ("integral_scale",)


def seed_bootstrap(profiles: pd.DataFrame, *, models, fit_min_distance: int = 1, thresholds=(0.9, 0.5),
                   n_resamples: int = N_RESAMPLES, level: float = BOOTSTRAP_LEVEL, seed: int = BOOTSTRAP_SEED,
                   min_aic_gain: float = MIN_AIC_GAIN, max_failed_fraction: float = MAX_FAILED_FRACTION):
    """Pooled fit and seed-bootstrap replicates of one label's runs.

    Parameters
    ----------
    profiles : DataFrame
        The ``profiles`` rows of one label: columns ``seed``, ``distance``,
        ``mean_similarity``, ``std_similarity``, ``n_pairs``; at least 2 seeds,
        each with the same distances.
    models : sequence of str
        Decay models to fit.
    fit_min_distance : int
        Smallest distance fitted (positions).
    thresholds : sequence of float
        Band-width thresholds.
    n_resamples, level, seed, max_failed_fraction
        Bootstrap settings; the generator is ``default_rng(seed)``.
    min_aic_gain : float
        Decay-fit setting (:func:`poslab.analysis.fit_decay`).

    Returns
    -------
    fits : DecayFits
        Fits of the pooled profile.
    result : BootstrapResult
        ``method = "seed"``.
    distance, pooled : ndarray of shape (n_distances,)
        Distances (positions) and the pooled mean profile.

    Raises
    ------
    ValueError
        Fewer than 2 seeds, or seeds with different distances.
    """
    distance, pooled, pooled_std, sums, counts = _pool_seeds(profiles)
    use = distance >= fit_min_distance
    fits = fit_decay(distance[use], pooled[use], n_pairs=counts.sum(0)[use], std=pooled_std[use], models=models,
                     min_aic_gain=min_aic_gain)
    result = bootstrap_units(distance, sums, counts, n_resamples, np.random.default_rng(seed), fits=fits,
                             thresholds=thresholds, level=level, method="seed", max_failed_fraction=max_failed_fraction)
    return fits, result, distance, pooled


def _pool_seeds(profiles: pd.DataFrame):
    """distance, pooled mean, pooled per-pair std, and the seeds' sums and counts (seeds × distances)."""
    seeds = sorted(pd.unique(profiles["seed"].dropna()))
    if len(seeds) < 2:
        raise ValueError(f"the seed bootstrap needs at least 2 seeds, got {seeds}")
    frames = [profiles[profiles["seed"] == s].sort_values("distance") for s in seeds]
    distance = frames[0]["distance"].to_numpy(dtype=float)
    if any(not np.array_equal(f["distance"].to_numpy(dtype=float), distance) for f in frames):
        raise ValueError("the seeds' profiles cover different distances; they cannot be pooled")
    mean = np.stack([f["mean_similarity"].to_numpy(dtype=float) for f in frames])
    std = np.stack([f["std_similarity"].to_numpy(dtype=float) for f in frames])
    n = np.stack([f["n_pairs"].to_numpy(dtype=float) for f in frames])
    ok = np.isfinite(mean) & (n > 0)
    sums, counts = np.where(ok, mean * n, 0.0), np.where(ok, n, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = sums.sum(0) / counts.sum(0)
        # pooled per-pair std: within-seed plus between-seed spread
        pooled_std = np.sqrt(np.where(ok, n * (std**2 + (mean - pooled) ** 2), 0.0).sum(0) / counts.sum(0))
    return distance, pooled, pooled_std, sums, counts


def _by_label(frame) -> dict:
    """The rows of a results table grouped by label (one pass, not one filter per label); empty when absent."""
    if frame is None or not len(frame) or "label" not in frame:
        return {}
    return dict(tuple(frame.groupby("label", sort=False)))


def _of_labels(frame, labels) -> pd.DataFrame | None:
    """The rows of ``frame`` whose label is one of ``labels`` (None when there are none)."""
    if frame is None or not len(labels) or "label" not in frame:
        return None
    return frame[frame["label"].isin(labels)]


def _of_seed(frame: pd.DataFrame, seed) -> pd.DataFrame:
    return frame[(frame["seed"] == seed) if pd.notna(seed) else frame["seed"].isna()]


def _run_fits(metrics, seed) -> pd.DataFrame:
    """The profile fits of one run in ``decay_metrics`` (no rows when absent)."""
    if metrics is None or not len(metrics):
        return pd.DataFrame(columns=["model", "status", "selected", "decay_length_se"])
    mine = _of_seed(metrics, seed)
    return mine[mine["target"] == "profile"] if "target" in mine else mine


def _fit_se(fits: pd.DataFrame) -> float:
    """decay_length_se of the selected fit among one run's profile fits (NaN if none)."""
    if "decay_length_se" not in fits or "selected" not in fits:
        return math.nan
    chosen = fits[fits["selected"].astype(bool)]
    return float(chosen["decay_length_se"].iloc[0]) if len(chosen) else math.nan


def _label_seed(label: str) -> int:
    return zlib.crc32(label.encode("utf-8"))


def _number(value) -> float:
    return float(value) if value is not None and pd.notna(value) else math.nan


def summary_verdict(a: dict, b: dict, name: str, *, level: float = BOOTSTRAP_LEVEL) -> dict:
    """The verdict on label ``a``'s summary ``name`` against ``b``'s, at every common window (module docstring).

    Parameters
    ----------
    a, b : dict
        Per label: ``label``; ``windows``: {max_distance: {summary: (value, status)}} (every window analysed,
        the label's own included); ``max_distance`` (its own window); ``exact`` (bool: no sampling
        variability); ``interval``: {summary: (low, high)} at its own window (NaN: none; high NaN with low
        finite: beyond the window); ``conditioning``: {summary: (low, high)} of ill-conditioned crossings (and
        integral scales: :func:`_conditioning_range`); an exact label's ``crossing_low``: {summary: the first
        distance below the level + 0.02, ⌈crossing_low⌉} (optional: the range of a crossing ``not_reached``),
        ``lower_bound``: {summary: bound} at its own window and ``window_bounds``: {window: {summary: bound}}
        (optional: an unreached integral scale's lower bound);
        ``replicates``: {summary: ndarray} at its own window (optional); ``window_intervals``:
        {window: {summary: (low, high)}} and ``window_replicates``: {window: {summary: ndarray}} at its smaller
        nested windows (optional: a sampled single run's, from window_sensitivity.csv and bootstrap.csv; a label
        with seeds', from its seed bootstrap, :func:`_seed_windows`).
    name : str
        The summary.
    level : float
        Level of the interval of paired replicate differences.

    Returns
    -------
    dict
        ``window``, ``windows``, ``value``, ``other_value``, ``difference``, ``difference_ci_low`` /
        ``_ci_high``, ``exceeds_uncertainty``, ``verdict``, ``reason``.
    """
    common = sorted(set(a["windows"]) & set(b["windows"]))
    out = {"window": max(common) if common else pd.NA, "windows": ";".join(map(str, common)),
           "value": math.nan, "other_value": math.nan, "difference": math.nan, "difference_ci_low": math.nan,
           "difference_ci_high": math.nan, "exceeds_uncertainty": False}
    if a.get("kernel", "cosine") != b.get("kernel", "cosine"):
        return out | {"verdict": "different kernels", "reason": (
            f"{a['label']} is measured as {a.get('kernel', 'cosine')}, {b['label']} as {b.get('kernel', 'cosine')}: "
            "a level of one is not a level of the other, so their summaries are not compared")}
    if not common:
        return out | {"verdict": "not comparable", "reason": (
            f"no common window: {a['label']} was analysed up to {sorted(a['windows'])} and {b['label']} up to "
            f"{sorted(b['windows'])}")}
    signs, exceeds, shown, unsigned = {}, {}, [], {}
    for w in common:
        (va, sa), (vb, sb) = a["windows"][w].get(name, (math.nan, "undefined")), \
            b["windows"][w].get(name, (math.nan, "undefined"))
        bad = [f"{r['label']} is {s} at window {w}" for r, s in ((a, sa), (b, sb))
               if s not in ("ok", "not_reached", "within_noise")]
        if bad:
            reason = "; ".join(bad) + ": the summary is no number there"
            return out | {"verdict": "not comparable", "reason": reason}
        shown.append(f"{w}: {_show(va, sa, w, name, _bound_at(a, name, w))} vs "
                     f"{_show(vb, sb, w, name, _bound_at(b, name, w))}")
        if w == max(common):
            out |= {"value": va, "other_value": vb, "difference": va - vb}
        signs[w], why = _sign_at(a, b, name, w, va, sa, vb, sb)
        if signs[w] is None:  # no sign known at this window
            unsigned[w] = why
            continue
        ia, ib = _interval_at(a, name, w, va, sa), _interval_at(b, name, w, vb, sb)
        if ia is None or ib is None:
            exceeds[w] = None
            continue
        reps_a, reps_b = _replicates_at(a, name, w), _replicates_at(b, name, w)
        if (not (a["exact"] or b["exact"]) and reps_a is not None and reps_b is not None
                and min(reps_a.size, reps_b.size)):
            m = min(reps_a.size, reps_b.size)
            with np.errstate(invalid="ignore"):  # both beyond the window (inf - inf): no difference known, NaN
                diff = reps_a[:m] - reps_b[:m]
            low, high = percentile_interval(diff, level)
            out |= {"difference_ci_low": low, "difference_ci_high": high}
            diff = diff[~np.isnan(diff)]
            if diff.size >= min_replicates(level):  # ends beyond the window (±inf) still have a sign
                q_low, q_high = np.quantile(diff, [(1 - level) / 2, (1 + level) / 2], method="inverted_cdf")
                exceeds[w] = bool(q_low > 0 or q_high < 0)
            else:
                exceeds[w] = None
        else:
            exceeds[w] = bool(ia[1] < ib[0] or ib[1] < ia[0])
    values = "; ".join(shown)
    if a["exact"] and b["exact"] and len(common) > 1:  # smaller windows are truncations: judged at the largest
        last = max(common)
        signs, exceeds = {last: signs.get(last)}, {last: exceeds.get(last)}
        unsigned = {w: why for w, why in unsigned.items() if w == last}
        values += f"; both exact: judged at {last}, where both see the farthest"
    known = {w: sg for w, sg in signs.items() if sg is not None}
    if not known:
        cases = {}  # the same case at several windows, said once
        for w in sorted(unsigned):
            cases.setdefault(unsigned[w], []).append(str(w))
        return out | {"verdict": "not comparable", "reason": "no sign at any common window: " + "; ".join(
            f"{why} at window{'s' if len(ws) > 1 else ''} {', '.join(ws)}" for why, ws in cases.items())
            + f" ({values})"}
    if len(set(known.values()) - {0}) > 1:
        return out | {"verdict": "window-dependent", "reason": f"the sign of the difference changes with the window "
                                                               f"({values})"}
    judged = {w: e for w, e in exceeds.items() if e is not None}
    if not judged:
        missing = [f"{r['label']} has none at window {', '.join(map(str, gaps))}" for r in (a, b)
                   if (gaps := [w for w in common if _interval_at(r, name, w, 0.0, "ok") is None])]
        return out | {"verdict": "not comparable", "reason": "no interval of the difference at any common window: "
                      + "; ".join(missing) + " (no bootstrap there: n_resamples = 0, or a label with too few "
                      f"seeds for a seed interval) ({values})"}
    yes = [w for w, e in judged.items() if e]
    no = [w for w, e in judged.items() if not e]
    if yes and no:
        return out | {"verdict": "window-dependent", "reason": f"the difference exceeds its uncertainty at window(s) "
                                                               f"{', '.join(map(str, yes))} but not at "
                                                               f"{', '.join(map(str, no))} ({values})"}
    if yes and 0 not in known.values():
        unjudged = [w for w in known if w not in judged]
        extra = f"; the same sign at {', '.join(map(str, unjudged))} (no interval there)" if unjudged else ""
        longer = next(iter(set(known.values()))) > 0
        return out | {"exceeds_uncertainty": True, "verdict": "longer" if longer else "shorter",
                      "reason": f"exceeds its uncertainty at window(s) {', '.join(map(str, yes))}{extra} ({values})"}
    if yes:  # exceeds where judged, but equal at another window
        return out | {"verdict": "window-dependent", "reason": f"exceeds its uncertainty at window(s) "
                                                               f"{', '.join(map(str, yes))} but the two are equal "
                                                               f"at another ({values})"}
    return out | {"verdict": "not distinguishable", "reason": f"within its uncertainty at window(s) "
                                                              f"{', '.join(map(str, no))} ({values})"
                                                              f"{_conditioning_note(a, b, name, out)}"
                                                              f"{_beyond_note(a, b, name, no)}"}


def _sign_at(a: dict, b: dict, name: str, w: int, va: float, sa: str, vb: float, sb: str) -> tuple[int | None, str]:
    """The sign of a's summary minus b's at window ``w`` (statuses ok, not_reached or within_noise), or None and
    why no sign is known there (without the window, which the verdict's reason adds, grouping equal texts).

    A summary ``not_reached`` lies beyond the window, so it is the larger; not an integral scale, which integrates S
    up to a zero crossing beyond the window: it is larger than its lower bound (an exact label's at that window,
    :func:`_bound_at`) and so larger than the other label's value only when the other's upper end (its range's or
    interval's at ``w``: :func:`_interval_at`; its value where it has none) lies below that bound. Otherwise it may
    lie either side: no sign."""
    noisy = [r["label"] for r, st in ((a, sa), (b, sb)) if st == "within_noise"]
    if noisy:
        return None, f"{' and '.join(noisy)} {'is' if len(noisy) == 1 else 'are'} within the noise"
    if sa == sb == "not_reached":
        what = "both zero crossings of the integral scales lie" if name in _UNBOUNDED else "both lie"
        return None, f"{what} beyond the window"
    if name in _UNBOUNDED and "not_reached" in (sa, sb):
        (r, o, vo, so, sign) = (a, b, vb, sb, 1) if sa == "not_reached" else (b, a, va, sa, -1)
        bound = _bound_at(r, name, w)
        if bound is None:
            why = ("none for a sampled label: a bound estimated with noise is no bound" if not r["exact"] else
                   "none recorded: lower_bound is empty")
            return None, (f"{r['label']}'s integral scale has its zero crossing beyond the window and no lower bound "
                          f"({why}), so it may lie either side of {o['label']}'s {vo:g}")
        io = _interval_at(o, name, w, vo, so)
        upper = io[1] if io is not None else vo
        if upper < bound:
            return sign, ""
        end = "" if upper == vo else " (the upper end of its interval open above)" if math.isinf(upper) \
            else f" (up to {upper:g}, the upper end of its {'range' if o['exact'] else 'interval'})"
        return None, (f"{r['label']}'s integral scale, beyond its lower bound {bound:g} (the integral up to the "
                      f"window), may lie either side of {o['label']}'s {vo:g}{end}: the bound does not settle it")
    return (1 if sa == "not_reached" else -1 if sb == "not_reached" else int(np.sign(va - vb))), ""


def _bound_at(label: dict, name: str, window: int) -> float | None:
    """An exact label's lower bound of its integral scale ``not_reached`` at a window (``lower_bound`` of
    window_sensitivity.csv at that window, or of summaries.csv at its own: the integral of S / S(0) up to the
    window), or None: none recorded (a sampled label, another summary, results written before the column)."""
    if name not in _UNBOUNDED or not label["exact"]:
        return None
    bound = label.get("window_bounds", {}).get(window, {}).get(name)
    if bound is None and window == label["max_distance"]:
        bound = label.get("lower_bound", {}).get(name)
    return float(bound) if bound is not None and np.isfinite(bound) else None


def _beyond_note(a: dict, b: dict, name: str, windows) -> str:
    """Why a crossing beyond the window is not distinguishable from the other label's: an exact label's crossing
    ``not_reached`` at a judged window has the range (crossing_low, inf) when S falls below the level + 0.02 inside
    that window (:func:`_interval_at`), and that range holds (or meets) the other's value."""
    notes = []
    for r, o in ((a, b), (b, a)):
        for w in windows:
            low = _beyond_low(r, name, w)
            if low is None:
                continue
            vo, so = o["windows"][w].get(name, (math.nan, "undefined"))
            io = _interval_at(o, name, w, vo, so) if so in ("ok", "not_reached") else None
            other = f"{o['label']}'s {_show(vo, so, w, name)}" + (
                f" ({'range' if o['exact'] else 'interval'} {io[0]:g}-{io[1]:g})"
                if io is not None and so == "ok" and io != (vo, vo) else "")
            notes.append(f"{r['label']}'s crossing lies beyond window {w}, but a change of +{CONDITIONING_DELTA:g} in "
                         f"the level brings it back to {low:g} (crossing_low), so its range, {low:g} to beyond the "
                         f"window, meets {other}")
    return "; " + "; ".join(notes) if notes else ""


def _beyond_low(label: dict, name: str, window: int) -> int | None:
    """The low end of an exact label's crossing ``not_reached`` at a window, where S falls below the level + 0.02
    inside that window: the first distance below it, ⌈crossing_low⌉ (the ill-conditioned ranges' convention), or
    None. An exact profile at a smaller window is its truncation, so a crossing_low of the own window within the
    smaller window is the smaller window's too."""
    if not label["exact"] or name in _UNBOUNDED:
        return None
    if label["windows"].get(window, {}).get(name, (math.nan, ""))[1] != "not_reached":
        return None
    low = label.get("crossing_low", {}).get(name)
    return int(low) if low is not None and np.isfinite(low) and low <= window else None


def _conditioning_note(a: dict, b: dict, name: str, out: dict) -> str:
    """Why two different exact values are not distinguishable: the ranges a ±0.02 change of the level moves their
    ill-conditioned crossings over overlap (the only uncertainty an exact label has)."""
    if not (a["exact"] and b["exact"]) or not (np.isfinite(out["difference"]) and out["difference"] != 0):
        return ""
    ranges = [f"{r['label']}'s over {_range_text(low, high)}" for r in (a, b)
              if (rng := r.get("conditioning", {}).get(name)) is not None for low, high in [rng]]
    if not ranges:
        return ""
    overlap = "and these overlap" if len(ranges) == 2 else "which holds the other's value"
    what = ("integral scales ending at ill-conditioned zero crossings: the range bounds the integral up to the "
            "crossings of ±0.02, README" if name in _UNBOUNDED else "ill-conditioned crossings")
    return ("; both are exact and differ, but a change of ±0.02 in the level moves " + " and ".join(ranges)
            + f" ({what}), {overlap}")


def _range_text(low: float, high: float) -> str:
    if not (np.isfinite(low) or np.isfinite(high)):
        return "an unknown range (S / S(0) is not bounded by 1 on its kernel's scale)"
    return f"{low:g}-" + (f"{high:g}" if np.isfinite(high) else "beyond the window")


def _ripple_note(a: dict, b: dict) -> str:
    """A note on a first minimum that is a dip of an exact cosine sum (sinusoidal, RoPE): a ripple, not a scale.

    The profile of such a table is S(k) = sum_i w_i cos(k theta_i) / sum_i w_i: its first local minimum is where
    the sum of its cosines first dips, however shallow the dip, and no sampling noise hides it. The difference is
    exact (the verdict stands) but says where the ripples lie, not which encoding forgets position sooner; the
    band widths and the crossings compare that (README, "What the numbers say").
    """
    dips = [f"{r['label']}'s first minimum is a dip of an exact cosine sum (it rises back {r['ripple']:.2g})"
            for r in (a, b) if "ripple" in r]
    if not dips:
        return ""
    return "; " + " and ".join(dips) + ": a ripple, not a length scale (compare the band widths for that: README, \"Uncertainty, properties and comparison\")"


def _show(value, status, window, name=None, bound=None) -> str:
    """A summary at a window as ``reason`` prints it: the value, ``> W`` beyond the window, ``noise``; an integral
    scale beyond the window ``> B (integral up to W)`` with an exact label's lower bound B, else ``crossing > W``."""
    if status == "not_reached":
        if name in _UNBOUNDED:
            return f"> {bound:g} (integral up to {window})" if bound is not None else f"crossing > {window}"
        return f"> {window}"
    return "noise" if status == "within_noise" else f"{value:g}"


def _replicates_at(label: dict, name: str, window: int):
    """A label's bootstrap replicates of a summary at a window (own: ``replicates``; nested:
    ``window_replicates``), or None."""
    if window == label["max_distance"]:
        return label.get("replicates", {}).get(name)
    return label.get("window_replicates", {}).get(window, {}).get(name)


def _interval_at(label: dict, name: str, window: int, value: float, status: str):
    """(low, high) of a label's summary at a window, or None when unknown there (module docstring)."""
    own = window == label["max_distance"]
    # a sampled label's "beyond the window" is certain only where its resamples are beyond it too: with a bootstrap
    # there (n_resamples = 0 gives none, and a noisy profile may be "not reached" by chance)
    bootstrapped = bool(label.get("replicates")) if own else window in label.get("window_intervals", {})
    if status == "not_reached":
        if name in _UNBOUNDED:  # beyond an exact label's lower bound (_sign_at), else unknown
            bound = _bound_at(label, name, window)
            return (bound, math.inf) if bound is not None else None
        if label["exact"]:  # beyond the window, or back to crossing_low with the level + 0.02 (module docstring)
            low = _beyond_low(label, name, window)
            return (float(low) if low is not None else window + 1.0, math.inf)
        return (window + 1.0, math.inf) if bootstrapped else None
    if label["exact"]:
        return label.get("conditioning", {}).get(name, (value, value))
    intervals = label.get("interval", {}) if own else label.get("window_intervals", {}).get(window, {})
    low, high = intervals.get(name, (math.nan, math.nan))
    if not np.isfinite(low):
        return None
    return low, high if np.isfinite(high) else math.inf


def _conditioning_range(row, kernel: str) -> tuple[float, float]:
    """The range a ±0.02 change of the level moves an exact label's ill-conditioned summary over (a summaries.csv
    row with ``ill_conditioned``; module docstring).

    A crossing: its first distances below the level + 0.02 and - 0.02, ⌈crossing_low⌉ .. ⌈crossing_high⌉ (the
    band widths' integer convention); the upper end +inf when the level - 0.02 is not crossed within the window
    (crossing_high empty). An integral scale I = ∫₀^z S / S(0) takes the conditioning of its zero crossing z
    (``crossing``; z₋ = crossing_low, z₊ = crossing_high): the level's change moves the end of the integral to z₋ or
    z₊, and since S ≥ 0 on [0, z], S ≥ -0.02 on [z, z₊] and |S(k)| ≤ S(0) = 1 on the cosine scale
    (Cauchy-Schwarz), I(z₋) ∈ [max(0, I - (z - z₋)), I] and I(z₊) ∈ [I - 0.02 (z₊ - z), I + (z₊ - z)], so
    the range is [min(max(0, I - (z - z₋)), I - 0.02 (z₊ - z)), I + (z₊ - z)], not z₋ .. z₊ (distances, which are
    no values of the integral: phi-3.5's 628 would lie outside its "range" 1573-2284). On another kernel scale
    S(k) / S(0) is not bounded by 1: the range is unknown, (-inf, inf)."""
    low, high = float(row.crossing_low), _number(row.crossing_high)
    if row.summary not in _UNBOUNDED:
        return math.ceil(low), math.ceil(high) if np.isfinite(high) else math.inf
    if kernel != "cosine":
        return -math.inf, math.inf
    value, z = float(row.value), float(row.crossing)
    if not np.isfinite(high):
        return min(max(0.0, value - (z - low)), value), math.inf
    return min(max(0.0, value - (z - low)), value - CONDITIONING_DELTA * (high - z)), value + (high - z)


def _window_bootstrap(windows: pd.DataFrame | None, boot: pd.DataFrame | None, seed, own: int) -> tuple[dict, dict]:
    """One run's intervals ({window: {summary: (low, high)}}, from window_sensitivity.csv) and replicates
    ({window: {summary: ndarray}}, from bootstrap.csv) at its smaller windows."""
    intervals, replicates = {}, {}
    if windows is not None and len(windows) and "value_ci_low" in windows:
        mine = _of_seed(windows, seed)
        for r in mine[mine["window"] != own].itertuples(index=False):
            if pd.notna(r.value_ci_low):
                intervals.setdefault(int(r.window), {})[r.summary] = (float(r.value_ci_low), _number(r.value_ci_high))
    if boot is not None and len(boot) and "window" in boot:
        mine = _of_seed(boot, seed)
        for window, rows in mine[mine["window"] != own].groupby("window"):
            rows = rows.sort_values("resample")
            # empty: beyond the window or within the noise (+inf), unless the summary is undefined there
            replicates[int(window)] = {name: _beyond(rows[name]) for name in rows.columns
                                       if name in intervals.get(int(window), {})}
    return intervals, replicates


def _window_bounds(frame: pd.DataFrame | None, seed) -> dict:
    """{window: {summary: lower_bound}} of one exact run's window_sensitivity rows that have one."""
    if frame is None or not len(frame) or "lower_bound" not in frame:
        return {}
    mine = _of_seed(frame, seed)
    mine = mine[mine["lower_bound"].notna()]
    return {int(w): dict(zip(rows["summary"], rows["lower_bound"].astype(float))) for w, rows in mine.groupby("window")}


def _beyond(column: pd.Series) -> np.ndarray:
    """Replicates from bootstrap.csv, an empty one beyond the window (+inf: not reached there or within the noise;
    the rarer undefined or degenerate resample, also empty, is counted so too, which widens the difference's
    interval rather than narrowing it)."""
    return np.where(column.isna(), np.inf, column.to_numpy(dtype=float))


def _seed_windows(distance, pooled, means, noise: dict, options, level: float, n_positions: int,
                  max_distance: int, *, own) -> tuple[pd.DataFrame, dict]:
    """A label with seeds at its nested windows: what comparison.csv reports for it, what its window flag
    (:func:`poslab.stages.window.window_dependent`) reads and what the pairs' verdicts compare.

    At each nested window of ``n_positions`` and ``max_distance`` (:func:`poslab.stages.window.nested_windows`:
    a quarter, half and all of it) the seeds' pooled profile, truncated to the window's distances (the seeds'
    profiles in profiles.csv average every position; a run's own nested windows average its first
    ``n_positions`` · fraction positions, which only its tables hold), is
    summarised with the seeds as clusters of its noise (``noise``, truncated too), and so is every seed resample
    of it (``means``, truncated: the same resamples at every window). A resample beyond the window or within the
    noise is +inf (beyond any bound, not left out: leaving it out biased the interval low and never left it open
    above), one that is undefined there NaN (left out). The interval is these replicates' percentile interval at
    ``level`` (:func:`poslab.analysis.bootstrap.percentile_interval`: the high end NaN when the upper quantile is
    +inf, open above, as summary.csv's), given where the pooled summary is a number.

    Parameters
    ----------
    distance, pooled : ndarray of shape (n_distances,)
        Distances 0 .. max_distance (positions) and the pooled mean profile (:func:`_pool_seeds`).
    means : ndarray of shape (n_resamples, n_distances) or None
        Seed-resampled pooled profiles (:func:`poslab.analysis.bootstrap.resample_units`); None: no interval
        (n_resamples = 0, or too few seeds), so the window rule's tolerances alone decide.
    noise : dict
        ``noise_se`` and ``n_pairs`` of shape (n_distances,) and ``crossing_z``
        (:func:`poslab.analysis.summaries.profile_summaries`).
    options : AnalysisOptions
        thresholds, min_rise, min_rise_se.
    level : float
        Interval level.
    n_positions, max_distance : int
        The label's window (positions analysed, largest distance).
    own : (ProfileSummaries, SummaryArrays or None)
        The summaries already made at the label's own window (the pooled profile's and its resamples').

    Returns
    -------
    frame : DataFrame
        Columns ``summary``, ``window`` (positions), ``value`` (positions), ``status``, ``value_ci_low`` /
        ``value_ci_high`` (NaN: none; only the high end NaN: open above).
    replicates : dict
        {window: {summary: ndarray of shape (n_resamples,)}}: the resamples' summaries at each window (+inf beyond
        it or within the noise, NaN undefined), in resample order at every window (paired by index with another
        label's); empty when ``means`` is None.
    """
    beyond_codes = [STATUSES.index("not_reached"), STATUSES.index("within_noise")]
    settings = {"thresholds": options.thresholds, "min_rise": options.min_rise, "min_rise_se": options.min_rise_se,
                "crossing_z": noise["crossing_z"]}
    frames, replicates = [], {}
    for _, _, window in nested_windows(n_positions, max_distance):
        if window >= max_distance:
            s, reps = own
        else:
            keep = distance <= window
            cut = settings | {"noise_se": noise["noise_se"][keep], "n_pairs": noise["n_pairs"][keep]}
            s = profile_summaries(distance[keep], pooled[keep], **cut)
            reps = summaries_many(distance[keep], means[:, keep], **cut) if means is not None else None
        low, high = np.full(len(s.names), math.nan), np.full(len(s.names), math.nan)
        if reps is not None:
            values = np.where(np.isin(reps.status, beyond_codes), np.inf, reps.values)
            replicates[window] = {name: values[:, j] for j, name in enumerate(reps.names)}
            for j, name in enumerate(s.names):
                if s.status[j] == "ok":
                    low[j], high[j] = percentile_interval(values[:, j], level, integer=name not in _INTEGER)
        frames.append(pd.DataFrame({"summary": list(s.names), "window": window, "value": s.values,
                                    "status": list(s.status), "value_ci_low": low, "value_ci_high": high}))
    return pd.concat(frames, ignore_index=True), replicates


def _seed_label(frame: pd.DataFrame, replicates: dict, max_distance: int) -> dict:
    """The keys :func:`summary_verdict` reads of a label with seeds, from :func:`_seed_windows`: ``windows``,
    ``interval`` and ``replicates`` at its own window, ``window_intervals`` and ``window_replicates`` at the
    smaller ones (a window the seed bootstrap ran at is a key even without a finite interval there: a summary
    ``not_reached`` at it is then beyond it, (W + 1, inf), as at a single run's own window)."""
    out = {"windows": {}, "interval": {}, "replicates": replicates.get(max_distance, {}), "window_intervals": {},
           "window_replicates": {w: reps for w, reps in replicates.items() if w != max_distance}}
    for w in replicates:
        if w != max_distance:
            out["window_intervals"][w] = {}
    for r in frame.itertuples(index=False):
        window = int(r.window)
        out["windows"].setdefault(window, {})[r.summary] = (float(r.value), r.status)
        if window == max_distance:
            out["interval"][r.summary] = (float(r.value_ci_low), float(r.value_ci_high))
        elif np.isfinite(r.value_ci_low) and window in out["window_intervals"]:
            out["window_intervals"][window][r.summary] = (float(r.value_ci_low), _number(r.value_ci_high))
    return out


def _window_rows(frame: pd.DataFrame | None, seed) -> dict:
    """{window: {summary: (value, status)}} from one run's window_sensitivity rows (a label with seeds:
    :func:`_seed_label`)."""
    if frame is None or not len(frame):
        return {}
    out = {}
    for r in _of_seed(frame, seed).itertuples(index=False):
        out.setdefault(int(r.window), {})[r.summary] = (float(r.value) if r.status == "ok" else math.nan, r.status)
    return out


def compare_runs(tables: dict[str, pd.DataFrame], spec) -> dict[str, pd.DataFrame]:
    """The ``comparison`` and ``comparison_pairs`` tables of a study (module docstring).

    Parameters
    ----------
    tables : dict of DataFrame
        The study's tables; uses ``summary``, ``summaries``, ``window_sensitivity``, ``profiles``,
        ``bootstrap`` and ``decay_metrics``.
    spec : StudySpec
        Gives the analysis options (models, fit_min_distance, thresholds, min_rise).

    Returns
    -------
    dict with ``comparison`` (one row per label × summary) and ``comparison_pairs`` (one row per pair of
    labels × summary); empty dict when no run on a line succeeded. Runs on a grid have no 1-D summaries
    (``summary.csv`` ``not_applicable``; their grid tables compare them) and are left out.
    """
    summary = tables.get("summary", pd.DataFrame())
    if not len(summary) or "status" not in summary:
        return {}
    on_line = summary["not_applicable"].isna() | summary["not_applicable"].eq("") \
        if "not_applicable" in summary else True
    ok = summary[(summary["status"] == "ok") & on_line]
    if not len(ok):
        return {}
    options = spec.analysis
    names = summary_names(options.thresholds)
    n_resamples, level = int(options.n_resamples), float(options.ci_level)
    boot, metrics, summaries, windows = (
        _by_label(tables.get(name)) for name in ("bootstrap", "decay_metrics", "summaries", "window_sensitivity"))
    # only a label with several seeds pools its runs' profiles (the largest table: a row per run and distance)
    seeded = ok["seed"].notna().groupby(ok["label"], sort=False).sum()
    profiles = _by_label(_of_labels(tables.get("profiles"), seeded.index[seeded >= 2]))
    rows, labels, kinds = [], [], {}
    for label, runs in ok.groupby("label", sort=False):
        kinds[label] = runs["kind"].iloc[0]
        base = {"study": spec.name, "label": label, "kind": runs["kind"].iloc[0], "seed": pd.NA, "n_runs": len(runs),
                "max_distance": int(runs["max_distance"].max())}
        base["kernel"] = runs["kernel"].iloc[0] if "kernel" in runs and isinstance(runs["kernel"].iloc[0], str) \
            else "cosine"
        info = {"label": label, "max_distance": base["max_distance"], "kernel": base["kernel"], "interval": {},
                "conditioning": {}, "crossing_low": {}, "lower_bound": {},
                "replicates": {}, "windows": {}, "exact": False}
        seeds = runs["seed"].dropna()
        values, statuses = {}, {}
        if len(seeds) >= 2:
            fits, result, distance, pooled = seed_bootstrap(
                profiles[label], models=options.models, fit_min_distance=options.fit_min_distance,
                thresholds=options.thresholds, n_resamples=n_resamples, level=level, seed=_label_seed(label),
                min_aic_gain=options.min_aic_gain, max_failed_fraction=options.max_failed_fraction)
            enough = math.comb(2 * len(seeds) - 1, len(seeds)) >= min_replicates(level)
            _, _, _, sums, counts = _pool_seeds(profiles[label])
            # the pooled profile's noise with the seeds as independent clusters: a crossing counts beyond it
            noise = {"noise_se": block_standard_errors(AnchorBlocks(sums, counts, 1)), "n_pairs": counts.sum(0),
                     "crossing_z": options.crossing_z}
            s = profile_summaries(distance, pooled, thresholds=options.thresholds, min_rise=options.min_rise,
                                  min_rise_se=options.min_rise_se, **noise)
            values = dict(zip(s.names, s.values))
            statuses = dict(zip(s.names, s.status))
            means = reps = None
            if enough and n_resamples:
                means, _ = resample_units(sums, counts, n_resamples, np.random.default_rng(_label_seed(label)))
                reps = summaries_many(distance, means, thresholds=options.thresholds, min_rise=options.min_rise,
                                      min_rise_se=options.min_rise_se, **noise)
            elif n_resamples and "ok" in statuses.values():
                need = next(n for n in itertools.count(len(seeds)) if math.comb(2 * n - 1, n) >= min_replicates(level))
                warnings.warn(f"{label}: {len(seeds)} seeds have only {math.comb(2 * len(seeds) - 1, len(seeds))} "
                              f"distinct seed resamples, too few for an interval across seeds at ci_level = "
                              f"{level!r}; comparison.csv leaves its intervals empty (each run's own intervals in "
                              f"summary.csv stand). Use at least {need} seeds", StudyWarning, stacklevel=2)
            best = fits.selected
            decay = {"value": best.decay_length if best else math.nan, "status": "ok" if best else "none",
                     "selected_model": best.model if best else "none",
                     "fit_se": best.decay_length_se if best else math.nan,
                     "value_ci_low": result.decay_length_ci[0] if enough and n_resamples else math.nan,
                     "value_ci_high": result.decay_length_ci[1] if enough and n_resamples else math.nan}
            method = {"ci_method": "seed" if n_resamples else "none", "ci_level": level, "n_resamples": n_resamples}
            n_positions = int(runs["n_positions"].max()) if "n_positions" in runs else base["max_distance"] + 1
            # the pooled profile and its resamples at each nested window: the values, intervals and replicates
            # comparison.csv reports (its own window), the verdicts compare and the window flag reads
            frame, replicates = _seed_windows(distance, pooled, means, noise, options, level, n_positions,
                                              base["max_distance"], own=(s, reps))
            info |= _seed_label(frame, replicates, base["max_distance"])
            dependent = set(window_dependent(frame))
        else:
            run = runs.iloc[0]
            info["exact"] = run.get("ci_method") == "exact"
            info["windows"] = _window_rows(windows.get(label), run["seed"])
            if (depth := ripple_depth(run)) is not None:
                info["ripple"] = depth  # an exact cosine sum's first dip
            mine = summaries.get(label)
            mine = _of_seed(mine, run["seed"]) if mine is not None else None
            for name in names:
                values[name] = _number(run.get(name))
                statuses[name] = "ok" if np.isfinite(values[name]) else "undefined"
                info["interval"][name] = (_number(run.get(name + "_ci_low")), _number(run.get(name + "_ci_high")))
            if mine is not None and len(mine):
                for r in mine.itertuples(index=False):
                    statuses[r.summary] = r.status
                    if bool(r.ill_conditioned) and np.isfinite(r.crossing_low):
                        info["conditioning"][r.summary] = _conditioning_range(r, base["kernel"])
                    if not info["exact"]:  # the ±0.02 range of a crossing beyond the window, the integral's bound:
                        continue  # an exact label's (a sampled one's intervals cover both)
                    if r.summary not in _UNBOUNDED and np.isfinite(r.crossing_low):
                        info["crossing_low"][r.summary] = math.ceil(r.crossing_low)
                    bound = _number(getattr(r, "lower_bound", math.nan))
                    if r.summary in _UNBOUNDED and r.status == "not_reached" and np.isfinite(bound):
                        info["lower_bound"][r.summary] = bound
            if label in boot:
                reps = _of_seed(boot[label], run["seed"])
                if "window" in reps:  # the run's own window (the smaller ones: window_replicates)
                    reps = reps[reps["window"] == int(run["max_distance"])]
                reps = reps.sort_values("resample")
                info["replicates"] = {name: _beyond(reps[name]) for name in names if name in reps}
            if info["exact"]:
                info["window_bounds"] = _window_bounds(windows.get(label), run["seed"])
            info["window_intervals"], info["window_replicates"] = _window_bootstrap(
                windows.get(label), boot.get(label), run["seed"], int(run["max_distance"]))
            fits = _run_fits(metrics.get(label), run["seed"])
            decay = {"value": _number(run.get("decay_length")),
                     "selected_model": run.get("selected_model") or "none", "fit_se": _fit_se(fits),
                     "value_ci_low": _number(run.get("decay_length_ci_low")),
                     "value_ci_high": _number(run.get("decay_length_ci_high"))}
            decay["status"] = "ok" if np.isfinite(decay["value"]) else "none"
            method = {"ci_method": run.get("ci_method", "none"), "ci_level": run.get("ci_level", level),
                      "n_resamples": run.get("n_resamples", 0)}
            # the run's own flag (summary.csv, window_sensitivity.csv)
            dependent = set(str(runs.get("window_dependent", pd.Series([""])).fillna("").str.cat(sep=";")).split(";"))
        own = info["windows"].setdefault(info["max_distance"], {})
        for name in names:
            own.setdefault(name, (values[name], statuses[name]))
        for name in names:
            low, high = info["interval"].get(name, (math.nan, math.nan))
            rows.append(base | method | {"summary": name, "selected_model": "", "fit_se": math.nan, "value": values[name], "value_ci_low": low,
                                         "value_ci_high": high, "status": statuses[name],
                                         "window_dependent": "yes" if name in dependent else "no"})
        rows.append(base | method | decay | {"summary": "decay_length", "window_dependent": ""})
        labels.append(info)
    comparison = pd.DataFrame(rows)
    ranked = comparison["summary"] != "decay_length"
    # not reached ranks first (beyond the window), except an integral scale: by its lower bound where an exact
    # label has one (its worst place by value: the verdicts' rank range says how much higher it may lie), else not
    unbounded = comparison["summary"].isin(_UNBOUNDED) & (comparison["status"] == "not_reached")
    bounds = {(info["label"], name): b for info in labels for name, b in info["lower_bound"].items()}
    bound = pd.Series([bounds.get(k, math.nan) for k in zip(comparison["label"], comparison["summary"])],
                      index=comparison.index, dtype=float)
    key = np.where(comparison["status"] == "not_reached", np.where(unbounded, bound, np.inf),
                   comparison["value"].astype(float))
    bounded = ~unbounded | bound.notna()
    key = pd.Series(np.where(comparison["status"].isin(["ok", "not_reached"]) & ranked & bounded, key, np.nan),
                    index=comparison.index)
    comparison.insert(5, "rank", key.groupby([comparison["summary"], comparison["max_distance"],
                                              comparison["kernel"]]).rank(ascending=False, method="min")
                      .astype("Int64"))
    comparison["seed"] = comparison["seed"].astype("Int64")
    order = {name: i for i, name in enumerate((*names, "decay_length"))}
    comparison = comparison.assign(_order=comparison["summary"].map(order)).sort_values(
        ["_order", "max_distance", "kernel", "rank", "label"], ascending=[True, False, False, True, True],
        na_position="last", kind="stable").drop(columns="_order").reset_index(drop=True)
    pairs = []
    for a, b in itertools.combinations(labels, 2):
        kind_a, kind_b = kinds[a["label"]], kinds[b["label"]]
        for name in names:
            verdict = summary_verdict(a, b, name, level=level)
            if name == "first_minimum":
                verdict["reason"] += _ripple_note(a, b)
            pairs.append({"study": spec.name, "label": a["label"], "kind": kind_a, "seed": pd.NA,
                          "other_label": b["label"], "other_kind": kind_b, "summary": name, **verdict,
                          "ci_level": level})
    columns = ["study", "label", "kind", "seed", "other_label", "other_kind", "summary", "window", "windows", "value",
               "other_value", "difference", "difference_ci_low", "difference_ci_high", "ci_level",
               "exceeds_uncertainty", "verdict", "reason"]
    pairs = pd.DataFrame(pairs, columns=columns)
    pairs["seed"] = pairs["seed"].astype("Int64")
    pairs["window"] = pairs["window"].astype("Int64")
    best, worst = _rank_range(comparison, pairs)
    comparison.insert(6, "rank_best", best)
    comparison.insert(7, "rank_worst", worst)
    return {"comparison": comparison, "comparison_pairs": pairs}


def _rank_range(comparison: pd.DataFrame, pairs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(rank_best, rank_worst) of each ranked comparison row: the ranks its pairs' verdicts leave open.

    Within a rank group (the same summary, max_distance and kernel), a label's best rank is 1 + the labels
    established as ``longer`` than it, its worst the group's size - the labels it is established as ``longer``
    than; the other labels of the group (``not distinguishable``, ``window-dependent``, ``not comparable``) may
    lie on either side. The rank by value lies in between (a ``longer`` verdict implies the larger value at the
    common largest window, which is the group's own; an unreached integral scale ranks by its lower bound, and is
    established longer than a label only when that label's value lies below the bound, never shorter than one). A
    label alone in its group has none."""
    over = {}  # (summary, label) -> labels established as longer than it
    under = {}  # (summary, label) -> labels it is established as longer than
    for r in pairs[pairs["verdict"].isin(["longer", "shorter"])].itertuples(index=False):
        big, small = (r.label, r.other_label) if r.verdict == "longer" else (r.other_label, r.label)
        over.setdefault((r.summary, small), set()).add(big)
        under.setdefault((r.summary, big), set()).add(small)
    ranked = comparison["rank"].notna()
    group = comparison[ranked].groupby(["summary", "max_distance", "kernel"])["label"].agg(set)
    best, worst = pd.Series(pd.NA, index=comparison.index, dtype="Int64"), \
        pd.Series(pd.NA, index=comparison.index, dtype="Int64")
    for i, row in comparison[ranked].iterrows():
        members = group[row["summary"], row["max_distance"], row["kernel"]]
        if len(members) == 1:  # alone in its group: compared with no one there, so no place is established
            continue
        key = (row["summary"], row["label"])
        best[i] = 1 + len(over.get(key, set()) & members)
        worst[i] = len(members) - len(under.get(key, set()) & members)
    return best, worst
