"""Model selection, model averaging and the goodness-of-fit gate on tables with realistic, correlated noise.

Run from the repository root, once (about 5 minutes on 2 shared cores at the defaults)::

    .venv/bin/python benchmarks/model_selection.py                 # 4 models x 50 tables, n 1024, dim 128
    .venv/bin/python benchmarks/model_selection.py --tables 10     # a quick look

Each table's ``dim`` columns are independent stationary Gaussian processes over positions with a known
correlation ρ(k) (circulant embedding: Dietrich & Newsam 1997; Wood & Chan 1994), so its profile has the
noise of a real table (neighbouring distances share positions) and the exact expectation
E[S](k) = ρ(k) · (2 / dim) · (Γ((dim + 1) / 2) / Γ(dim / 2))² · ₂F₁(1/2, 1/2; dim / 2 + 1; ρ(k)²)
(benchmarks/null_coverage.py). Four correlations, one per decay model:

    exponential            ρ = exp(−k / 20)
    gaussian               ρ = exp(−k² / (2 · 15²))
    power_law              ρ = (1 + k)^(−0.5)
    stretched_exponential  ρ = exp(−(k / 10)^0.5)

(each a valid correlation: completely monotone in k, or Gaussian). Every table is analysed by poslab's own
run pipeline (``poslab.study.analyse_table``, default settings: fit range, gate, QAICc, 200 resamples).
The true decay length is the 1/e fall of E[S] from distance 1. Printed per model: how often the true model
is selected, how often the model-averaged decay length lies within 20 % of the truth, either of the two
(issue 13's check), how often the true model's own fit is gated ``poor_fit`` (the gate's false alarms), and
coverage of the selected fit's bootstrap and Wald intervals.
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import pandas as pd
from scipy import optimize
from scipy import special

CORRELATIONS = {
    "exponential": lambda k: np.exp(-k / 20.0),
    "gaussian": lambda k: np.exp(-(k**2) / (2 * 15.0**2)),
    "power_law": lambda k: (1.0 + k) ** -0.5,
    "stretched_exponential": lambda k: np.exp(-np.sqrt(k / 10.0)),
}


def expected_cosine(rho, dim: int):
    factor = math.exp(2 * (special.gammaln((dim + 1) / 2) - special.gammaln(dim / 2))) * 2 / dim
    return rho * factor * special.hyp2f1(0.5, 0.5, dim / 2 + 1, rho**2)


def gaussian_process_table(correlation, n: int, dim: int, rng) -> np.ndarray:
    """dim independent stationary Gaussian processes of n positions with correlation ρ(k), by circulant
    embedding of length 2m = 4n; negative eigenvalues (none for these ρ beyond rounding) are set to 0. The
    real part of FFT(sqrt(λ / size) · (z1 + i z2)) has covariance exactly the circulant's (Dietrich & Newsam 1997)."""
    m = 2 * n
    k = np.arange(m + 1, dtype=float)
    c = correlation(np.concatenate([k, k[-2:0:-1]]))
    lam = np.clip(np.fft.fft(c).real, 0.0, None)  # eigenvalues of the circulant (c is real and symmetric)
    size = c.size
    z = rng.standard_normal((size, dim)) + 1j * rng.standard_normal((size, dim))
    x = np.fft.fft(np.sqrt(lam / size)[:, None] * z, axis=0)
    return x.real[:n]


def true_decay_length(correlation, dim: int, n: int, start: float = 1.0) -> float:
    def e(x):
        return expected_cosine(correlation(np.asarray(x, dtype=float)), dim)

    level = e(start) / math.e
    return float(optimize.brentq(lambda x: e(start + x) - level, 0.0, 50.0 * n))


def main() -> None:
    from poslab.study.runner import analyse_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--n", type=int, default=1024)
    parser.add_argument("--dim", type=int, default=128)
    args = parser.parse_args()
    rows = []
    for name, correlation in CORRELATIONS.items():
        truth = true_decay_length(correlation, args.dim, args.n)
        began = time.perf_counter()
        for seed in range(args.tables):
            table = gaussian_process_table(correlation, args.n, args.dim, np.random.default_rng(seed))
            run = analyse_table(table, max_distance=args.n - 1, seed=seed)
            fits = run.fits
            best = fits.selected
            own = next(f for f in fits.fits if f.model == name)
            averaged, averaged_se, _ = fits.averaged()
            low, high = run.bootstrap.decay_length_ci
            rows.append({
                "model": name, "seed": seed, "truth": truth, "selected": best.model if best else "none",
                "decay_length": best.decay_length if best else math.nan, "averaged": averaged,
                "averaged_se": averaged_se, "own_status": own.status, "own_misfit": own.misfit,
                "boot_covers": low <= truth <= high if np.isfinite(low) and np.isfinite(high) else False,
                "wald_covers": best is not None and best.decay_length_ci[0] <= truth <= best.decay_length_ci[1],
                "averaged_covers": abs(averaged - truth) <= 1.96 * averaged_se if np.isfinite(averaged) else False,
                "fit_max_distance": fits.fit_range[1],
            })
        print(f"{name}: {args.tables} tables in {time.perf_counter() - began:.0f} s", flush=True)
    frame = pd.DataFrame(rows)
    frame["right_model"] = frame["selected"] == frame["model"]
    frame["averaged_within_20"] = (frame["averaged"] - frame["truth"]).abs() <= 0.2 * frame["truth"]
    frame["either"] = frame["right_model"] | frame["averaged_within_20"]
    frame["own_poor_fit"] = frame["own_status"] == "poor_fit"
    table = frame.groupby("model", sort=False).agg(
        truth=("truth", "first"), right_model=("right_model", "mean"), averaged_within_20=("averaged_within_20", "mean"),
        either=("either", "mean"), own_poor_fit=("own_poor_fit", "mean"), own_misfit_median=("own_misfit", "median"),
        boot_covers=("boot_covers", "mean"), wald_covers=("wald_covers", "mean"),
        averaged_covers=("averaged_covers", "mean"), averaged_median=("averaged", "median"))
    pd.set_option("display.width", 220)
    print(f"\n{args.tables} tables per model, n {args.n}, dim {args.dim} (rates are fractions of the tables)")
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    print("\nselected models:")
    print(pd.crosstab(frame["model"], frame["selected"]).to_string())
    print("\nstatus of the true model's own fit:")
    print(pd.crosstab(frame["model"], frame["own_status"]).to_string())


if __name__ == "__main__":
    main()
