"""Coverage of poslab's decay-length intervals on the null model, whose true decay length is known.

Run from the repository root (about 25 s on 2 cores)::

    .venv/bin/python benchmarks/null_coverage.py                 # 80 seeds, sigma 8, n 256, dim 64
    .venv/bin/python benchmarks/null_coverage.py --seeds 200 --sigma 16

``smoothed_random`` with ``length_scale`` sigma has expected profile exp(-k^2 / (4 sigma^2)) and so
decay length 2 sigma (its docstring). One study, one run per seed, analysed by ``poslab run``; printed:
how often the per-run 95 % anchor-block interval (summary.csv) and the 95 % Wald interval of the
selected fit (decay_metrics.csv, decay_length +- z * decay_length_se) contain 2 sigma, the spread of the
estimates across seeds, and the interval across seeds of comparison.csv.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd
from scipy import stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=80)
    parser.add_argument("--sigma", type=float, default=8.0)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--dim", type=int, default=64)
    args = parser.parse_args()
    truth = 2 * args.sigma
    with tempfile.TemporaryDirectory() as tmp:
        study = Path(tmp) / "null.toml"
        study.write_text(f'name = "null_coverage"\nn_positions = {args.n}\ndim = {args.dim}\n'
                         f"seeds = {list(range(args.seeds))}\n[analysis]\n"
                         'models = ["gaussian", "exponential"]\n[[encodings]]\nkind = "smoothed_random"\n'
                         f"length_scale = {args.sigma}\n")
        out = Path(tmp) / "out"
        subprocess.run([str(Path(sys.executable).with_name("poslab")), "run", str(study), "--out", str(out), "--no-progress"],
                       check=True, stdout=subprocess.DEVNULL)
        summary = pd.read_csv(out / "summary.csv")
        fits = pd.read_csv(out / "decay_metrics.csv")
        comparison = pd.read_csv(out / "comparison.csv")
    fits = fits[(fits["target"] == "profile") & fits["selected"]]
    z = stats.norm.ppf(0.975)
    block = ((summary["decay_length_ci_low"] <= truth) & (truth <= summary["decay_length_ci_high"])).sum()
    wald = ((fits["decay_length"] - truth).abs() <= z * fits["decay_length_se"]).sum()
    width = (summary["decay_length_ci_high"] - summary["decay_length_ci_low"]).mean()
    print(f"null model: smoothed_random sigma {args.sigma:g} (true decay length {truth:g}), n {args.n}, "
          f"dim {args.dim}, {len(summary)} seeds")
    print(f"estimates: mean {summary['decay_length'].mean():.3f}, sd across seeds "
          f"{summary['decay_length'].std():.3f}")
    print(f"95 % anchor-block intervals cover the truth in {block} / {len(summary)} runs "
          f"({block / len(summary):.0%}; mean width {width:.2f})")
    print(f"95 % Wald intervals cover the truth in {wald} / {len(fits)} runs ({wald / len(fits):.0%}; "
          f"median decay_length_se {fits['decay_length_se'].median():.3f})")
    row = comparison.iloc[0]
    print(f"interval across seeds (comparison.csv): {row['decay_length']:.3f} "
          f"[{row['decay_length_ci_low']:.3f}, {row['decay_length_ci_high']:.3f}]")


if __name__ == "__main__":
    main()
