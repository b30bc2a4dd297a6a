"""Do the default study's pairwise verdicts hold when the study's window changes?

Run from the repository root (about a minute on 2 shared cores)::

    .venv/bin/python benchmarks/verdict_windows.py                 # n_positions 256, 512, 1024
    .venv/bin/python benchmarks/verdict_windows.py --sizes 256 1024

The default study (studies/compare_encodings.toml) is run once per size with ``n_positions`` and
``max_distance`` set to that size (max_distance = size − 1; written as a temporary TOML, everything else
unchanged: the trained table keeps its own 256 positions), by ``poslab.study.runner.run_study`` with the
serial executor. For every pair of labels × summary of ``comparison_pairs.csv`` the verdicts at the sizes are
set side by side and counted: identical at every size (by verdict), reversed (``longer`` at one size and
``shorter`` at another), or different (listed, with the verdict at each size and its reason at each).
Issue 13 asks that they be the same at 256, 512 and 1024 positions, or reported as window-dependent.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import tempfile
import time

import pandas as pd

ROOT = pathlib.Path(__file__).resolve().parents[1]
STUDY = ROOT / "studies" / "compare_encodings.toml"


def study_at(size: int, folder: pathlib.Path) -> pathlib.Path:
    """The default study with n_positions = size and max_distance = size - 1 (a TOML in ``folder``)."""
    text = STUDY.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^n_positions = \d+", f"n_positions = {size}", text, count=1)
    text = re.sub(r"(?m)^max_distance = \d+", f"max_distance = {size - 1}", text, count=1)
    path = folder / f"compare_encodings_{size}.toml"
    path.write_text(text, encoding="utf-8")
    return path


def verdicts(sizes) -> pd.DataFrame:
    """One row per pair of labels × summary: the verdict (and reason) at each size."""
    from poslab.study.runner import run_study
    from poslab.study.spec import load_study

    frames = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            began = time.perf_counter()
            result = run_study(load_study(study_at(size, pathlib.Path(tmp))), progress=False, executor="serial")
            pairs = result.comparison_pairs[["label", "other_label", "summary", "verdict", "reason"]]
            frames.append(pairs.set_index(["label", "other_label", "summary"]).add_suffix(f"_{size}"))
            print(f"n_positions {size}: {len(pairs)} pairs x summaries in {time.perf_counter() - began:.1f} s")
    return pd.concat(frames, axis=1)


def classify(table: pd.DataFrame, sizes) -> pd.Series:
    """identical / reversed / different, per row."""
    columns = [f"verdict_{size}" for size in sizes]

    def kind(row) -> str:
        seen = set(row[columns])
        if len(seen) == 1:
            return "identical"
        if {"longer", "shorter"} <= seen:
            return "reversed"
        return "different"

    return table.apply(kind, axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024])
    args = parser.parse_args()
    sizes = sorted(args.sizes)
    table = verdicts(sizes)
    table["kind"] = classify(table, sizes)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 200)
    print(f"\n{len(table)} pairs x summaries at n_positions {', '.join(map(str, sizes))}:")
    print(table["kind"].value_counts().to_string())
    same = table[table["kind"] == "identical"]
    print("\nidentical, by verdict:")
    print(same[f"verdict_{sizes[-1]}"].value_counts().to_string())
    other = table[table["kind"] != "identical"]
    if len(other):
        print("\nnot identical (verdict at each size; the reason at the smallest size where it differs from the "
              "largest):")
        for index, row in other.iterrows():
            verdicts_ = [row[f"verdict_{size}"] for size in sizes]
            first = next(size for size in sizes if row[f"verdict_{size}"] != row[f"verdict_{sizes[-1]}"])
            print(f"  {' / '.join(map(str, index))}: {' | '.join(verdicts_)} [{row['kind']}]\n"
                  f"      {first}: {row[f'reason_{first}']}")

if __name__ == "__main__":
    main()
