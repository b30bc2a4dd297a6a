"""Run every shipped study at two git revisions and diff every CSV table they write.

A refactor that must not change results (issue 12: "every shipped study produces
the same tables before and after, apart from seconds") is checked with::

    .venv/bin/python scripts/diff_studies.py --before main --after WORKTREE

Each revision is exported with ``git archive`` into a cache folder and run with
this interpreter and ``PYTHONPATH=<export>/src`` (so both use the same
installed dependencies); a revision's results are cached by commit, the
working tree (``WORKTREE``) is always re-run. Tables are compared by name:
same columns (order reported separately), same rows in the same order,
strings equal, numbers equal within ``--rtol`` / ``--atol`` (NaN equals NaN;
``3`` equals ``3.0``, whichever writer wrote it). The timing column
``seconds`` is ignored. Columns a table has only before that the after
study's ``summary.csv`` has (run keys and encoding parameters moved out of a
table with a row per distance: issue 14) are joined back on the run
identifier (``poslab.stages.schema.with_run_columns``) and compared; each
such move is listed as ``MOVED``, not as a difference. Exit status 0 when
every table matches, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
from poslab.stages.schema import RUN_ID, with_run_columns  # noqa: E402  (the after side's join, one mechanism)

CACHE = Path(os.environ.get("POSLAB_DIFF_CACHE", Path(tempfile.gettempdir()) / "poslab-study-diff"))
IGNORED_COLUMNS = {"seconds"}


def _git(*args) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def export(rev: str) -> tuple[Path, str]:
    """Source tree of ``rev`` (a commit-ish, or WORKTREE for the files on disk) and its cache key."""
    if rev == "WORKTREE":
        return ROOT, "worktree"
    sha = _git("rev-parse", rev)
    tree = CACHE / sha / "src-tree"
    if not (tree / "src" / "poslab").is_dir():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    return tree, sha


def run_studies(tree: Path, key: str, studies: list[str], *, fresh: bool) -> Path:
    out = CACHE / key / "results"
    if fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), MPLBACKEND="Agg")
    for name in studies:
        target = out / name
        if (target / "manifest.json").is_file():
            continue
        t0 = time.perf_counter()
        cmd = [sys.executable, "-c", "from poslab.cli import main; main()", "run", str(tree / "studies" / f"{name}.toml"),
               "--out", str(target), "--overwrite", "--no-progress", "--jobs", "1"]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=str(tree))
        print(f"  {key[:12]} {name}: exit {proc.returncode} in {time.perf_counter() - t0:.0f} s", flush=True)
        if not (target / "manifest.json").is_file():
            print(proc.stdout[-2000:], proc.stderr[-4000:], sep="\n")
            raise SystemExit(f"{name} wrote no results at {key}")
    return out


def diff_frames(name: str, a: pd.DataFrame, b: pd.DataFrame, rtol: float, atol: float) -> list[str]:
    problems = []
    ca, cb = [c for c in a.columns if c not in IGNORED_COLUMNS], [c for c in b.columns if c not in IGNORED_COLUMNS]
    if set(ca) != set(cb):
        problems.append(f"{name}: columns only before {sorted(set(ca) - set(cb))}, only after {sorted(set(cb) - set(ca))}")
    elif ca != cb:
        problems.append(f"{name}: same columns, different order")
    if len(a) != len(b):
        return problems + [f"{name}: {len(a)} rows before, {len(b)} after"]
    for col in [c for c in ca if c in cb]:
        x, y = a[col], b[col]
        xn, yn = pd.to_numeric(x, errors="coerce"), pd.to_numeric(y, errors="coerce")
        numeric = (xn.notna() | x.isna()).all() and (yn.notna() | y.isna()).all() and x.dtype != object
        if numeric or (x.dtype.kind in "fiub" and y.dtype.kind in "fiub"):
            xv, yv = xn.to_numpy(dtype=float), yn.to_numpy(dtype=float)
            same = np.isclose(xv, yv, rtol=rtol, atol=atol, equal_nan=True)
            if not same.all():
                bad = np.flatnonzero(~same)
                with np.errstate(all="ignore"):
                    rel = np.nanmax(np.abs(xv[bad] - yv[bad]) / np.maximum(np.abs(xv[bad]), 1e-300))
                problems.append(f"{name}.{col}: {bad.size} values differ (first row {bad[0]}: {xv[bad[0]]!r} vs "
                                f"{yv[bad[0]]!r}; max relative {rel:.3g})")
        else:
            xs, ys = x.fillna("").astype(str), y.fillna("").astype(str)
            bad = np.flatnonzero((xs != ys).to_numpy())
            if bad.size:
                problems.append(f"{name}.{col}: {bad.size} strings differ (first row {bad[0]}: {xs.iloc[bad[0]]!r} vs "
                                f"{ys.iloc[bad[0]]!r})")
    return problems


def moved_columns(name: str, a: pd.DataFrame, b: pd.DataFrame, summary: pd.DataFrame | None,
                  notes: list[str]) -> pd.DataFrame:
    """``b`` with the columns only ``a`` has joined back from the after study's summary on the run identifier,
    in ``a``'s column order, when the summary has them all (else ``b`` unchanged); the move goes to ``notes``."""
    only = [c for c in a.columns if c not in b.columns and c not in IGNORED_COLUMNS]
    if not only or summary is None or not set(RUN_ID) <= set(b.columns) or not set(only) <= set(summary.columns):
        return b
    notes.append(f"{name}: {len(only)} column(s) moved to summary.csv ({', '.join(only)}): compared after joining "
                 "them back on the run identifier")
    joined = with_run_columns(b, summary, only)
    return joined[[c for c in a.columns if c in joined.columns] + [c for c in joined.columns if c not in a.columns]]


def diff_results(before: Path, after: Path, studies: list[str], rtol: float, atol: float,
                 notes: list[str] | None = None) -> tuple[int, list[str]]:
    notes = [] if notes is None else notes
    problems, compared = [], 0
    for study in studies:
        fa, fb = sorted(p.name for p in (before / study).glob("*.csv")), sorted(p.name for p in (after / study).glob("*.csv"))
        if fa != fb:
            problems.append(f"{study}: tables only before {sorted(set(fa) - set(fb))}, only after {sorted(set(fb) - set(fa))}")
        summary = pd.read_csv(after / study / "summary.csv", low_memory=False) if "summary.csv" in fb else None
        for csv in sorted(set(fa) & set(fb)):
            a = pd.read_csv(before / study / csv, low_memory=False)
            b = pd.read_csv(after / study / csv, low_memory=False)
            b = moved_columns(f"{study}/{csv}", a, b, summary, notes)
            problems += diff_frames(f"{study}/{csv}", a, b, rtol, atol)
            compared += 1
        ma = json.loads((before / study / "manifest.json").read_text())
        mb = json.loads((after / study / "manifest.json").read_text())
        for key in ("tables", "figures"):
            if sorted(ma.get(key) or []) != sorted(mb.get(key) or []):
                problems.append(f"{study}/manifest.json {key}: {ma.get(key)} before, {mb.get(key)} after")
    return compared, problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git revision (default main)")
    parser.add_argument("--after", default="WORKTREE", help="git revision, or WORKTREE (default)")
    parser.add_argument("--studies", nargs="*", help="study names (default: every studies/*.toml of --after)")
    parser.add_argument("--rtol", type=float, default=1e-9)
    parser.add_argument("--atol", type=float, default=1e-12)
    args = parser.parse_args(argv)
    tree_b, key_b = export(args.before)
    tree_a, key_a = export(args.after)
    studies = args.studies or sorted(p.stem for p in (tree_a / "studies").glob("*.toml"))
    print(f"before {args.before} ({key_b[:12]}), after {args.after} ({key_a[:12]}): {', '.join(studies)}", flush=True)
    before = run_studies(tree_b, key_b, studies, fresh=False)
    after = run_studies(tree_a, key_a, studies, fresh=key_a == "worktree")
    notes: list[str] = []
    compared, problems = diff_results(before, after, studies, args.rtol, args.atol, notes)
    for n in notes:
        print("MOVED", n)
    for p in problems:
        print("DIFF", p)
    print(f"{compared} tables compared in {len(studies)} studies (rtol {args.rtol:g}, atol {args.atol:g}, "
          f"ignoring {', '.join(sorted(IGNORED_COLUMNS))}): {'identical' if not problems else f'{len(problems)} differences'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
