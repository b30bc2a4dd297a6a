"""Coverage of poslab's intervals on the null model, whose expected profile is known in closed form.

Run from the repository root, once (about 10 minutes on 2 shared cores at the defaults)::

    .venv/bin/python benchmarks/null_coverage.py                       # sigma 4, 16, 32; 100 seeds; n 1024; dim 128
    .venv/bin/python benchmarks/null_coverage.py --sigmas 16 --seeds 20   # a quick look

``smoothed_random`` with ``length_scale`` σ has columns that are stationary Gaussian processes with
correlation ρ(k) = exp(−k² / (4σ²)) (its docstring); the cosine similarity of two rows of ``dim`` such
columns has the exact expectation (for pairs of i.i.d. bivariate normal coordinates with correlation ρ)

    E[S](k) = ρ · (2 / dim) · (Γ((dim + 1) / 2) / Γ(dim / 2))² · ₂F₁(1/2, 1/2; dim / 2 + 1; ρ²)

(checked against Monte Carlo in tests/analysis/test_bootstrap.py), so every estimand has a known truth:
the decay length (the 1/e fall of E[S] from the first fitted distance, 1), each band width (the first
integer distance where E[S] < t) and every model-free summary, computed by poslab's own function
(``poslab.analysis.summaries``) on E[S]; a summary E[S] does not reach within the window (its zero
crossing, hence its integral scale; a first minimum) has no finite truth: an interval covers it when it is
open above (or every replicate lies beyond the window). The truth depends on dim only through the factor
above (< 0.2 % at dim 128), so dim is kept small for speed. One run per σ and seed, through the run
pipeline (:class:`poslab.stages.RunContext`, default [analysis] settings: the intervals summary.csv gets);
printed per σ: how often each 95 % interval contains the truth, how often there is none, how many are open
above, how many estimates are ``within_noise``, and the Wald interval of the selected fit (decay_metrics.csv).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd
from scipy import optimize, special


def expected_similarity(k, sigma: float, dim: int) -> np.ndarray:
    """E[S](k) of smoothed_random (module docstring), k in positions (any shape, real)."""
    rho = np.exp(-np.asarray(k, dtype=float) ** 2 / (4 * sigma**2))
    factor = math.exp(2 * (special.gammaln((dim + 1) / 2) - special.gammaln(dim / 2))) * 2 / dim
    return rho * factor * special.hyp2f1(0.5, 0.5, dim / 2 + 1, rho**2)


def truths(sigma: float, dim: int, n: int, thresholds=(0.9, 0.5, 0.0), start: float = 1.0) -> dict:
    """Every estimand's true value (NaN: not reached within the window, no finite truth)."""
    k = np.arange(n, dtype=float)
    e = expected_similarity(k, sigma, dim)
    level = expected_similarity(start, sigma, dim) / math.e
    out = {"decay_length": optimize.brentq(lambda x: expected_similarity(start + x, sigma, dim) - level, 0, n) }
    for t in thresholds:
        below = np.flatnonzero(e[1:] < t)
        out[f"band_width_{_member(t)}"] = float(below[0] + 1) if below.size else math.nan
    for name, value in _summary_truths(k, e, thresholds).items():
        out.setdefault(name, value)
    return out


def _summary_truths(distance, similarity, thresholds) -> dict:
    """The model-free summaries of the expected profile, by poslab's own function (NaN: not reached)."""
    from poslab.analysis.summaries import SUMMARY_NAMES, summaries_many

    result = summaries_many(distance, similarity[None, :], thresholds=thresholds)
    return {name: float(result.column(name)[0]) for name in SUMMARY_NAMES}


def _member(t: float) -> str:
    from poslab.stages.bands import BAND_WIDTH

    return BAND_WIDTH.member(t)[len("band_width_"):]


def run_sigma(sigma: float, seeds: int, n: int, dim: int, resamples: int) -> pd.DataFrame:
    """One row per seed: every estimate, status and interval of poslab's run pipeline (default settings)."""
    from poslab.encodings import make_encoding
    from poslab.stages import AnalysisOptions, RunContext

    options = AnalysisOptions(n_resamples=resamples, thresholds=(0.9, 0.5, 0.0))  # the 0.0 width: a crossing of 0
    encoding = make_encoding("smoothed_random", length_scale=sigma)
    rows = []
    for seed in range(seeds):
        table = encoding.generate(n, dim, rng=np.random.default_rng(seed))  # as a study's run with this seed
        ctx = RunContext(None, n_positions=n, max_distance=n - 1, dim=dim, options=options, seed=seed, table=table)
        best, boot, summaries = ctx.fits.selected, ctx.bootstrap, ctx.summaries
        row = {"seed": seed, "selected_model": best.model if best else None,
               "selected_status": best.status if best else None,
               "decay_length": best.decay_length if best else math.nan,
               "wald_ci_low": best.decay_length_ci[0] if best else math.nan,
               "wald_ci_high": best.decay_length_ci[1] if best else math.nan,
               "decay_length_ci_low": boot.decay_length_ci[0], "decay_length_ci_high": boot.decay_length_ci[1],
               "block_length": boot.block_length, "interval_widening": boot.widening}
        for name, value, status in zip(summaries.names, summaries.values, summaries.status):
            row |= {name: value, f"{name}_status": status}
        for j, (t, (low, high)) in enumerate(boot.band_widths_ci.items()):
            name = f"band_width_{_member(t)}"
            row |= {f"{name}_ci_low": low, f"{name}_ci_high": high,
                    f"{name}_beyond": _beyond(boot.band_widths[:, j])}
        for name, (low, high) in boot.summaries_ci.items():
            row |= {f"{name}_ci_low": low, f"{name}_ci_high": high,
                    f"{name}_beyond": _beyond(boot.summaries[name])}
        rows.append(row)
    return pd.DataFrame(rows).set_index("seed")


def _beyond(replicates, level: float = 0.95) -> bool:
    """The interval lies beyond the window: even its lower end, the (1 − level) / 2 quantile of the replicates
    (NaN, undefined, left out; +inf beyond the window), is +inf. summary.csv then has no numbers for it."""
    r = np.asarray(replicates, dtype=float)
    r = r[~np.isnan(r)]
    low = np.quantile(np.where(np.isposinf(r), 1e300, r), (1 - level) / 2, method="inverted_cdf") if r.size else 0.0
    return bool(low >= 1e300)


def coverage(summary: pd.DataFrame, truth: dict) -> list[dict]:
    """Per estimand: runs with an interval, runs whose interval contains the truth, and how.

    A truth not reached within the window (NaN) is covered by an interval open above (high end empty: the upper
    quantile of the replicates lies beyond the window, or the estimate is within the noise) and by an interval that
    lies beyond the window altogether (its lower quantile is beyond it too: (max_distance, inf), written as no
    numbers in summary.csv).
    """
    rows = []
    for name, value in truth.items():
        if f"{name}_ci_low" not in summary:
            continue
        low, high = summary[f"{name}_ci_low"], summary[f"{name}_ci_high"]
        beyond = summary.get(f"{name}_beyond", pd.Series(False, index=summary.index)).astype(bool)
        has = low.notna() | beyond
        if math.isnan(value):  # not reached within the window: an interval covers it when open above
            covered = (has & high.isna()).sum()
        else:
            covered = (low.notna() & (low <= value) & (high.isna() | (value <= high))).sum()
        status = summary.get(f"{name}_status", pd.Series("", index=summary.index))
        rows.append({"estimand": name, "truth": value, "runs": len(summary), "with_interval": int(has.sum()),
                     "covered": int(covered), "coverage": covered / max(int(has.sum()), 1),
                     "open_above": int((low.notna() & high.isna()).sum()), "beyond": int(beyond.sum()),
                     "within_noise": int((status == "within_noise").sum()),
                     "median_estimate": summary[name].median() if name in summary else math.nan,
                     "median_width": float((high - low).median())})
    value = truth["decay_length"]
    has = summary["wald_ci_low"].notna()
    covered = (has & (summary["wald_ci_low"] <= value) & (value <= summary["wald_ci_high"])).sum()
    rows.append({"estimand": "decay_length (Wald)", "truth": value, "runs": len(summary),
                 "with_interval": int(has.sum()), "covered": int(covered), "coverage": covered / max(int(has.sum()), 1),
                 "open_above": 0, "beyond": 0, "within_noise": 0,
                 "median_estimate": summary["decay_length"].median(),
                 "median_width": float((summary["wald_ci_high"] - summary["wald_ci_low"]).median())})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sigmas", type=float, nargs="+", default=[4.0, 16.0, 32.0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--resamples", type=int, default=200)
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    for sigma in args.sigmas:
        began = time.perf_counter()
        summary = run_sigma(sigma, args.seeds, args.n, args.dim, args.resamples)
        table = pd.DataFrame(coverage(summary, truths(sigma, args.dim, args.n)))
        print(f"\nsmoothed_random sigma {sigma:g}: n {args.n}, dim {args.dim}, {args.seeds} seeds, "
              f"{args.resamples} resamples, ({time.perf_counter() - began:.0f} s)")
        print(f"selected models: {summary['selected_model'].fillna('none').value_counts().to_dict()}; "
              f"block_length median {summary['block_length'].median():g} "
              f"[{summary['block_length'].min():g}, {summary['block_length'].max():g}], interval_widening median "
              f"{summary['interval_widening'].median():.3f}")
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
