"""Compare encodings across a study: decay lengths ranked with intervals, and which
differences exceed the uncertainty.

Built from the result tables alone (``summary``, ``profiles``, ``bootstrap``),
so it can be recomputed from a results folder.

Per encoding label, the interval comes from

* **seeds** when the label has several successful runs with different seeds
  (a stochastic encoding): the profiles of the seeds are pooled (weighted by
  pair counts) and fitted, and seeds are resampled with replacement
  (:func:`poslab.analysis.bootstrap.bootstrap_units`); the selected model is
  refitted on every resample;
* **anchor blocks** otherwise: the run's own bootstrap replicates
  (``bootstrap.csv``, written by the runner).

Differences. For two labels A and B the difference L_A − L_B must exceed
two uncertainties:

* **sampling** (positions or seeds): the bootstrap distribution of L_A − L_B
  pairs the r-th replicate of A with the r-th of B (their resamples are
  independent, so this is a draw from the joint distribution); its
  percentile interval at the study's level must exclude 0. This is
  preferred to asking whether the two intervals overlap: non-overlap of two
  95 % intervals is a test at about the 0.6 % level for equal standard
  errors, far more conservative than intended (Schenker & Gentleman 2001,
  *The American Statistician* 55(3):182–186);
* **fit**: the Wald interval (L_A − L_B) ± z · sqrt(se_A² + se_B²), with
  se the delta-method standard error of each selected fit
  (``decay_length_se`` in ``decay_metrics.csv``), must exclude 0 too. A
  deterministic, exactly translation-invariant table (sinusoidal, RoPE) has
  no sampling uncertainty at all (a zero-width bootstrap interval), but its
  decay length still describes a curve that misfits the profile; without
  this check two such encodings would always "differ".

When both labels are exact (``ci_method = exact``: no sampling variability on
either side) the paired replicates are constant and their "interval" would
have zero width: it is left empty, and the verdict rests on the fit interval
alone (``reason`` says so).

``exceeds_uncertainty`` is True only when every interval of the difference excludes 0.
"""

from __future__ import annotations

import itertools
import math
import warnings
import zlib

import numpy as np
import pandas as pd
from scipy import stats

from ..analysis import fit_decay
from ..analysis.bootstrap import (BOOTSTRAP_LEVEL, BOOTSTRAP_SEED, MAX_FAILED_FRACTION, N_RESAMPLES,
                                  bootstrap_units, min_replicates, percentile_interval)
from ..analysis.decay import MIN_AIC_GAIN
from .spec import StudyWarning

__all__ = ["compare_runs", "pair_verdict", "seed_bootstrap"]


def seed_bootstrap(profiles: pd.DataFrame, *, models, fit_min_distance: int = 1, thresholds=(0.9, 0.5, 0.0),
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
    use = distance >= fit_min_distance
    fits = fit_decay(distance[use], pooled[use], n_pairs=counts.sum(0)[use], std=pooled_std[use], models=models,
                     min_aic_gain=min_aic_gain)
    result = bootstrap_units(distance, sums, counts, n_resamples, np.random.default_rng(seed), fits=fits,
                             thresholds=thresholds, level=level, method="seed", max_failed_fraction=max_failed_fraction)
    return fits, result, distance, pooled


def _by_label(frame) -> dict:
    """The rows of a results table grouped by label (one pass, not one filter per label); empty when absent."""
    if frame is None or not len(frame) or "label" not in frame:
        return {}
    return dict(tuple(frame.groupby("label", sort=False)))


def _run_fits(metrics, label, seed) -> pd.DataFrame:
    """The profile fits of one run in ``decay_metrics`` (no rows when absent)."""
    if metrics is None or not len(metrics) or "label" not in metrics:
        return pd.DataFrame(columns=["model", "status", "selected", "decay_length_se"])
    mine = metrics[(metrics["label"] == label) & ((metrics["seed"] == seed) if pd.notna(seed) else metrics["seed"].isna())]
    return mine[mine["target"] == "profile"] if "target" in mine else mine


def _fit_se(fits: pd.DataFrame) -> float:
    """decay_length_se of the selected fit among one run's profile fits (NaN if none)."""
    if "decay_length_se" not in fits or "selected" not in fits:
        return math.nan
    chosen = fits[fits["selected"].astype(bool)]
    return float(chosen["decay_length_se"].iloc[0]) if len(chosen) else math.nan


def _why_no_decay_length(statuses) -> str:
    """Why a label has no decay length, from the statuses of its decay fits ("flat for every model", ...)."""
    statuses = [str(s) for s in statuses if isinstance(s, str) and s]
    if not statuses:
        return "no decay model was fitted"
    counts = pd.Series(statuses).value_counts(sort=False)
    if len(counts) == 1:
        return f"no decay model accepted: {counts.index[0]} for every model"
    return "no decay model accepted: " + ", ".join(f"{status} ({n} models)" if n > 1 else status
                                                   for status, n in counts.items())


def pair_verdict(a: dict, b: dict, *, difference_ci, fit_difference_ci) -> tuple[str, str]:
    """The verdict on ``a["decay_length"] - b["decay_length"]`` and its reason, checked in this order.

    1. ``not comparable``: a label has no decay length (the reason is ``why``,
       e.g. "flat for every model", or ``out_of_range``: not reached within
       the fitted distances); the difference is not defined.
    2. ``different kernels``: both have one, on different scales
       (``kernel``: cosine similarity vs a bias's attention prior,
       :mod:`poslab.encodings.kernel`). ``different windows``: both have one,
       but were analysed up to a different ``max_distance``; a decay length
       depends on the window.
    3. ``not comparable``: an interval of the difference is missing (no
       bootstrap, too few seeds, refits failed, no fit standard error). Both
       labels exact (``ci_method``): there is no sampling variability, so no
       bootstrap interval is needed (``difference_ci`` is ignored).
    4. ``longer`` / ``shorter``: the bootstrap and the fit interval of the
       difference both lie above / below 0 (both exact: the fit interval
       alone); else ``not distinguishable``.

    Parameters
    ----------
    a, b : dict
        Rows of ``comparison``: ``label``, ``decay_length``, ``max_distance``,
        ``fit_se``, ``ci_method``; ``why`` (text: why there is no decay length) and
        ``no_interval`` (text: why no replicates are there, or empty).
    difference_ci, fit_difference_ci : (float, float)
        Bootstrap (paired replicates) and fit (Wald) interval of the difference (positions; NaN: none).

    Returns
    -------
    (verdict, reason) : (str, str)
    """
    missing = [f"{r['label']} has no decay length ({r.get('why') or 'no decay model selected'})"
               for r in (a, b) if not np.isfinite(r["decay_length"])]
    if missing:
        return "not comparable", "; ".join(missing)
    if a.get("kernel", "cosine") != b.get("kernel", "cosine"):
        return "different kernels", (f"{a['label']} is measured as {a.get('kernel')}, {b['label']} as {b.get('kernel')}"
                                     ": decay lengths on different scales are not ranked (compare the distances "
                                     "below 1/e and 1/2 instead)")
    if a["max_distance"] != b["max_distance"]:
        return "different windows", (f"analysed up to distance {a['max_distance']} and {b['max_distance']}: a decay "
                                     "length depends on the window, compare band widths instead")
    low, high = difference_ci
    fit_low, fit_high = fit_difference_ci
    if _both_exact(a, b):
        if not (np.isfinite(fit_low) and np.isfinite(fit_high)):
            gaps = [r["label"] for r in (a, b) if not np.isfinite(r["fit_se"])]
            return "not comparable", f"both are exact (no sampling variability) and there is no fit interval of " \
                                     f"the difference (no standard error of the decay length of " \
                                     f"{' and '.join(gaps) or 'either label'})"
        exact = "both are exact (no sampling variability, no bootstrap interval): the fit interval of the difference"
        if fit_low > 0:
            return "longer", f"{exact} lies above 0"
        if fit_high < 0:
            return "shorter", f"{exact} lies below 0"
        return "not distinguishable", f"{exact} includes 0"
    if not (np.isfinite(low) and np.isfinite(high)):
        gaps = [f"{r['label']}: {r['no_interval']}" for r in (a, b) if r.get("no_interval")]
        return "not comparable", "no bootstrap interval of the difference (" + (
            "; ".join(gaps) if gaps else "the paired replicates have no finite percentile interval") + ")"
    if not (np.isfinite(fit_low) and np.isfinite(fit_high)):
        gaps = [r["label"] for r in (a, b) if not np.isfinite(r["fit_se"])]
        return "not comparable", f"no fit interval of the difference (no standard error of the decay length of " \
                                 f"{' and '.join(gaps) or 'either label'})"
    if low > 0 and fit_low > 0:
        return "longer", "the bootstrap and the fit interval of the difference both lie above 0"
    if high < 0 and fit_high < 0:
        return "shorter", "the bootstrap and the fit interval of the difference both lie below 0"
    inside = [name for name, (lo, hi) in (("bootstrap", (low, high)), ("fit", (fit_low, fit_high))) if lo <= 0 <= hi]
    if len(inside) == 2:
        return "not distinguishable", "the bootstrap and the fit interval of the difference both include 0"
    if inside:
        return "not distinguishable", f"the {inside[0]} interval of the difference includes 0"
    return "not distinguishable", "the bootstrap and the fit interval of the difference lie on opposite sides of 0"


def _both_exact(a: dict, b: dict) -> bool:
    """Both labels' runs are exactly translation invariant: no sampling variability on either side."""
    return a.get("ci_method") == "exact" and b.get("ci_method") == "exact"


def _notes(notes: pd.DataFrame, label: str) -> dict:
    row = notes.loc[label]
    return {k: (v if isinstance(v, str) else "") for k, v in row.items()}


def _label_seed(label: str) -> int:
    return zlib.crc32(label.encode("utf-8"))


def compare_runs(tables: dict[str, pd.DataFrame], spec) -> dict[str, pd.DataFrame]:
    """The ``comparison`` and ``comparison_pairs`` tables of a study.

    Parameters
    ----------
    tables : dict of DataFrame
        The study's tables; uses ``summary``, ``profiles`` and ``bootstrap``.
    spec : StudySpec
        Gives the analysis options (models, fit_min_distance, thresholds).

    Returns
    -------
    dict with ``comparison`` (one row per label: ``rank`` by decay length
    among the labels analysed over the same window (``max_distance``),
    1 = longest; labels of different windows are never ranked against each
    other; ``n_runs``; ``selected_model``; ``decay_length`` and
    ``decay_length_ci_low`` / ``_ci_high``; ``fit_se`` (delta-method
    standard error of the selected fit); ``ci_method``, ``ci_level``,
    ``n_resamples``) and ``comparison_pairs`` (one row per pair of labels:
    ``label`` and ``other_label``, their decay lengths, ``difference``
    = decay_length − other_decay_length with its bootstrap interval
    ``difference_ci_low`` / ``_ci_high`` (empty when both labels are exact) and its fit interval
    ``fit_difference_ci_low`` / ``_ci_high``, ``exceeds_uncertainty`` (both
    intervals exclude 0; both exact: the fit interval), ``verdict`` and ``reason`` (:func:`pair_verdict`)).
    Empty dict when no run succeeded.
    """
    summary = tables.get("summary", pd.DataFrame())
    if not len(summary) or "status" not in summary or not (summary["status"] == "ok").any():
        return {}
    options = spec.analysis
    n_resamples, level = int(options.n_resamples), float(options.ci_level)
    ok = summary[summary["status"] == "ok"]
    profiles, boot, metrics = (_by_label(tables.get(name)) for name in ("profiles", "bootstrap", "decay_metrics"))
    rows, replicates = [], {}
    for label, runs in ok.groupby("label", sort=False):
        row = {"study": spec.name, "label": label, "kind": runs["kind"].iloc[0], "seed": pd.NA, "n_runs": len(runs),
               "max_distance": int(runs["max_distance"].max()),
               "kernel": runs["kernel"].iloc[0] if "kernel" in runs else "cosine"}
        seeds = runs["seed"].dropna()
        if len(seeds) >= 2:
            fits, result, _, _ = seed_bootstrap(
                profiles[label], models=options.models,
                fit_min_distance=options.fit_min_distance, thresholds=options.thresholds,
                n_resamples=n_resamples, level=level, seed=_label_seed(label), min_aic_gain=options.min_aic_gain,
                max_failed_fraction=options.max_failed_fraction)
            best = fits.selected
            # k seeds have only C(2k - 1, k) distinct resamples (3 for 2 seeds, 10 for 3): too few for an
            # interval at this level leaves it empty (with a warning), never a confident-looking one
            enough = math.comb(2 * len(seeds) - 1, len(seeds)) >= min_replicates(level)
            row |= {"selected_model": best.model if best else "none",
                    "decay_length": best.decay_length if best else math.nan,
                    "why": _why_no_decay_length(f.status for f in fits.fits),
                    "fit_se": best.decay_length_se if best else math.nan,
                    "decay_length_ci_low": result.decay_length_ci[0] if enough else math.nan,
                    "decay_length_ci_high": result.decay_length_ci[1] if enough else math.nan,
                    "ci_method": "seed" if n_resamples else "none", "ci_level": level, "n_resamples": n_resamples}
            if not n_resamples:
                row["no_interval"] = "no bootstrap (n_resamples = 0)"
            elif not enough:
                row["no_interval"] = f"{len(seeds)} seeds are too few for an interval across seeds"
            elif best is not None and not np.isfinite(result.decay_length_ci).all():
                row["no_interval"] = "too many of its bootstrap refits failed"
            if enough:
                replicates[label] = result.decay_lengths
            elif best is not None and n_resamples:  # an interval was left empty: say so where it happens
                need = next(n for n in itertools.count(len(seeds)) if math.comb(2 * n - 1, n) >= min_replicates(level))
                warnings.warn(f"{label}: {len(seeds)} seeds have only {math.comb(2 * len(seeds) - 1, len(seeds))} "
                              f"distinct seed resamples, too few for an interval across seeds at ci_level = "
                              f"{level!r}; comparison.csv leaves its decay-length interval empty (each run's own "
                              f"interval in summary.csv stands). Use at least {need} seeds", StudyWarning, stacklevel=2)
        else:
            run = runs.iloc[0]
            fits = _run_fits(metrics.get(label), label, run["seed"])
            row |= {"selected_model": run.get("selected_model") or "none", "decay_length": run.get("decay_length"),
                    "fit_se": _fit_se(fits), "why": _why_no_decay_length(fits["status"]),
                    "decay_length_ci_low": run.get("decay_length_ci_low", math.nan),
                    "decay_length_ci_high": run.get("decay_length_ci_high", math.nan),
                    "ci_method": run.get("ci_method", "none"), "ci_level": run.get("ci_level", level),
                    "n_resamples": run.get("n_resamples", 0)}
            if label in boot:
                mine = boot[label]
                mine = mine[(mine["seed"] == run["seed"]) if pd.notna(run["seed"]) else mine["seed"].isna()]
                replicates[label] = mine.sort_values("resample")["decay_length"].to_numpy(dtype=float)
            if not int(row["n_resamples"] if pd.notna(row["n_resamples"]) else 0):
                row["no_interval"] = "no bootstrap (n_resamples = 0)"
            elif label in replicates and np.isnan(replicates[label]).sum() > options.max_failed_fraction * \
                    replicates[label].size:
                row["no_interval"] = "too many of its bootstrap refits failed"
        rows.append(row)
    comparison = pd.DataFrame(rows)
    notes = comparison.reindex(columns=["label", "why", "no_interval"]).set_index("label")  # for the verdicts only
    comparison = comparison.drop(columns=["why", "no_interval"], errors="ignore")
    comparison["decay_length"] = comparison["decay_length"].astype(float)
    # decay lengths depend on the analysed window (README): labels are ranked only against those analysed over
    # the same one (rank 1 = longest within its max_distance), the longest window first
    # ... and on the same kernel scale (cosine similarity, or a bias's attention prior)
    order = comparison.groupby(["max_distance", "kernel"])["decay_length"].rank(ascending=False, method="min")
    comparison.insert(4, "rank", order.astype("Int64"))
    comparison = comparison.sort_values(["max_distance", "kernel", "rank", "label"],
                                        ascending=[False, False, True, True], na_position="last",
                                        kind="stable").reset_index(drop=True)
    comparison["seed"] = comparison["seed"].astype("Int64")
    pairs = []
    z = float(stats.norm.ppf((1 + level) / 2))
    for a, b in itertools.combinations(comparison.to_dict("records"), 2):
        ra, rb = replicates.get(a["label"]), replicates.get(b["label"])
        diff = a["decay_length"] - b["decay_length"]
        low = high = math.nan
        # both exact: the paired replicates are constant, a zero-width "interval" that is none (left empty)
        if np.isfinite(diff) and ra is not None and rb is not None and min(ra.size, rb.size) and not _both_exact(a, b):
            m = min(ra.size, rb.size)
            low, high = percentile_interval(ra[:m] - rb[:m], level)
        half = z * math.hypot(a["fit_se"], b["fit_se"])
        fit_low, fit_high = diff - half, diff + half
        verdict, reason = pair_verdict({**a, **_notes(notes, a["label"])}, {**b, **_notes(notes, b["label"])},
                                       difference_ci=(low, high), fit_difference_ci=(fit_low, fit_high))
        exceeds = verdict in ("longer", "shorter")
        pairs.append({"study": spec.name, "label": a["label"], "kind": a["kind"], "seed": pd.NA,
                      "other_label": b["label"], "other_kind": b["kind"], "decay_length": a["decay_length"],
                      "other_decay_length": b["decay_length"], "difference": diff, "difference_ci_low": low,
                      "difference_ci_high": high, "fit_difference_ci_low": fit_low,
                      "fit_difference_ci_high": fit_high, "ci_level": level, "exceeds_uncertainty": exceeds,
                      "verdict": verdict, "reason": reason})
    pairs = pd.DataFrame(pairs, columns=["study", "label", "kind", "seed", "other_label", "other_kind",
                                         "decay_length", "other_decay_length", "difference", "difference_ci_low",
                                         "difference_ci_high", "fit_difference_ci_low", "fit_difference_ci_high",
                                         "ci_level", "exceeds_uncertainty", "verdict", "reason"])
    pairs["seed"] = pairs["seed"].astype("Int64")
    return {"comparison": comparison, "comparison_pairs": pairs}
