"""The exact fast path of translation-invariant encodings, end to end (issue 14 item 3): the two targets.

1. **one rotary run at 1,048,576 positions** (rope_theta 500000, rotary_dim
   128, the default analysis, figures included); target < 5 s on 2 cores;
2. **a sweep of 100 RoPE configurations at 131,072 positions** (25 values of
   rope_theta from 10^3 to 10^7 × default, linear, yarn and llama3 scaling with
   factor 8); target < 1 minute, ``--jobs 2`` (and ``--executor serial`` to
   compare).

Each is measured twice, in fresh processes:

- **whole process**: ``poslab run STUDY --out DIR --no-progress [--jobs 2]``,
  wall time from the command's start to its exit (interpreter start, imports,
  the fork server and its workers — none for the single run, which runs in a
  thread of poslab's own process — the analysis, every CSV, every figure);
- **in process**: a fresh Python that imports poslab first, then times
  ``run_study`` (the analysis, through the same executor), the CSV tables
  (``poslab.study.results.write_csv``, one per table) and the figures
  (``write_figures``) one after the other, then ``write_results`` (what
  ``poslab run`` does: the figures drawn in a thread while the tables are
  written); the import time is printed apart (issue 16's, not the fast path's).

The fixed cost of a ``poslab run``, whatever its size, is measured the same
way on the same rotary run at 1024 positions (``--only fixed``).

Usage (from the repository root)::

    .venv/bin/python benchmarks/kernel_fast_path.py                 # everything (~8 minutes on 2 CPUs)
    .venv/bin/python benchmarks/kernel_fast_path.py --only one      # the 1M-position run
    .venv/bin/python benchmarks/kernel_fast_path.py --only one --repeat 5  # 5 runs beside a host reference
    .venv/bin/python benchmarks/kernel_fast_path.py --only sweep    # the sweep, --jobs 2 and serial
    .venv/bin/python benchmarks/kernel_fast_path.py --only fixed    # one run at 1024 positions
    .venv/bin/python benchmarks/kernel_fast_path.py --only csv      # the CSV writers on a 1M-row profile table

Prints the load average before each measurement (every timing depends on
what else the machine runs), the peak resident memory of the whole-process
run's largest process, the per-run ``seconds`` of ``summary.csv`` and
``profile_method`` (every run must be ``kernel``). Results go to temporary
folders that are removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def rotary_study(n_positions: int, name: str) -> str:
    return (f'name = "{name}"\nn_positions = {n_positions}\ndim = 128\n\n'
            '[[encodings]]\nkind = "rotary"\nrope_theta = 500000.0\nrotary_dim = 128\n')


def sweep_study() -> str:
    thetas = ", ".join(f"{t:.6g}" for t in np.logspace(3, 7, 25))
    scaling = {
        "default": "",
        "linear": "rope_type = \"linear\"\nfactor = 8.0\n",
        "yarn": "rope_type = \"yarn\"\nfactor = 8.0\noriginal_max_position_embeddings = 8192\n",
        "llama3": "rope_type = \"llama3\"\nfactor = 8.0\noriginal_max_position_embeddings = 8192\n"
                  "low_freq_factor = 1.0\nhigh_freq_factor = 4.0\n",
    }
    entries = "".join(f"\n[[encodings]]\nkind = \"rotary\"\nrotary_dim = 128\nrope_theta = [{thetas}]\n{extra}"
                      for extra in scaling.values())
    return f'name = "rope_sweep"\nn_positions = 131072\ndim = 128\n{entries}'


#: The in-process measurement, run in a fresh interpreter: argv = study file, results folder, executor, jobs.
IN_PROCESS = r"""
import sys, time, warnings
t0 = time.perf_counter()
import poslab.study, poslab.study.results
from poslab.study import load_study, run_study
from poslab.study.results import figure_title, write_csv, write_figures
imported = time.perf_counter() - t0
study, out, executor, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
from pathlib import Path
Path(out).mkdir(parents=True)
warnings.simplefilter("ignore")
t0 = time.perf_counter()
result = run_study(load_study(study), progress=False, executor=executor, jobs=jobs)
analysis = time.perf_counter() - t0
t0 = time.perf_counter()
tables = result.tables()
sizes = []
for name, frame in tables.items():
    write_csv(frame, Path(out) / f"{name}.csv")
    sizes.append((Path(out) / f"{name}.csv").stat().st_size)
csv = time.perf_counter() - t0
t0 = time.perf_counter()
figures = write_figures(tables, out, title=figure_title(tables["summary"]))
drawn = time.perf_counter() - t0
rows = {n: len(f) for n, f in tables.items() if len(f) >= 10000}
from poslab.study.results import write_results
t0 = time.perf_counter()
write_results(result, Path(out) / "folder")  # what poslab run does: the figures drawn while the tables are written
together = time.perf_counter() - t0
print(f"   in process: imports {imported:.2f} s (issue 16, apart); analysis {analysis:.2f} s; CSV {csv:.2f} s "
      f"({len(tables)} tables, {sum(sizes) / 2**20:.0f} MiB; rows of the large ones: {rows}); figures {drawn:.2f} s "
      f"({len(figures)}); analysis + CSV + figures = {analysis + csv + drawn:.2f} s; write_results (figures in a "
      f"thread beside the CSV) {together:.2f} s")
"""


def load() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def whole_process(name: str, study: str, extra: list[str]) -> None:
    import pandas as pd

    folder = Path(tempfile.mkdtemp(prefix="poslab-bench-"))
    try:
        (folder / "study.toml").write_text(study)
        poslab = Path(sys.executable).with_name("poslab")
        command = [str(poslab), "run", str(folder / "study.toml"), "--out", str(folder / "out"), "--no-progress",
                   *extra]
        print(f"## {name}: poslab run STUDY --out DIR --no-progress {' '.join(extra)}   ({load()})", flush=True)
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB -> GiB, largest child so far
        if done.returncode:
            print(done.stdout[-2000:], done.stderr[-2000:])
            raise SystemExit(f"{name}: poslab run exited with {done.returncode}")
        summary = pd.read_csv(folder / "out" / "summary.csv")
        methods = summary["profile_method"].value_counts().to_dict()
        print(f"   whole process: wall time {wall:.2f} s end to end; {len(summary)} run(s), profile_method {methods}; "
              f"per-run seconds median {summary['seconds'].median():.3f}, max {summary['seconds'].max():.3f}; "
              f"peak RSS of the largest process so far {peak:.2f} GiB")
        print("   console: " + done.stdout.strip().splitlines()[-1], flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def in_process(study: str, executor: str = "processes", jobs: int = 2) -> None:
    folder = Path(tempfile.mkdtemp(prefix="poslab-bench-"))
    try:
        (folder / "study.toml").write_text(study)
        done = subprocess.run([sys.executable, "-c", IN_PROCESS, str(folder / "study.toml"), str(folder / "out"),
                               executor, str(jobs)], capture_output=True, text=True)
        if done.returncode:
            print(done.stdout[-2000:], done.stderr[-2000:])
            raise SystemExit(f"in-process measurement exited with {done.returncode}")
        print(done.stdout.rstrip(), f"  ({load()})", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


#: The host's speed, measured beside target (a) (``--only one --repeat N``): a process that imports what any tool
#: with tidy tables and figures imports (numpy, pandas, pyarrow's CSV writer, scipy's optimiser, matplotlib's
#: Figure and Agg canvas) and does nothing else. Its time follows the host's drifts in Python work (20-50 % within
#: an hour on the 2-CPU machine of benchmarks/README.md), so the ratio of the run to it is what a change moves.
REFERENCE = ("import numpy, pandas, pyarrow.csv, scipy.optimize, matplotlib.figure, "
             "matplotlib.backends.backend_agg")


def target_a_pairs(repeat: int) -> None:
    """Target (a), ``repeat`` times, each run beside the host reference (:data:`REFERENCE`): interleaved pairs,
    wall times and their ratio, then the medians."""
    folder = Path(tempfile.mkdtemp(prefix="poslab-bench-"))
    try:
        (folder / "study.toml").write_text(rotary_study(1048576, "rotary_1m"))
        poslab = Path(sys.executable).with_name("poslab")
        command = [str(poslab), "run", str(folder / "study.toml"), "--out", str(folder / "out"), "--no-progress",
                   "--overwrite"]
        print(f"## target (a) in {repeat} interleaved pairs with the host reference ({REFERENCE}; {load()})")
        runs, references = [], []
        for i in range(repeat):
            start = time.perf_counter()
            subprocess.run([sys.executable, "-c", REFERENCE], check=True)
            references.append(time.perf_counter() - start)
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            runs.append(time.perf_counter() - start)
            print(f"   pair {i + 1}: reference {references[-1]:.2f} s, rotary run {runs[-1]:.2f} s "
                  f"(ratio {runs[-1] / references[-1]:.2f})", flush=True)
        print(f"   median: reference {np.median(references):.2f} s, rotary run {np.median(runs):.2f} s, ratio "
              f"{np.median(np.array(runs) / np.array(references)):.2f}; runs under 5 s: "
              f"{sum(r < 5 for r in runs)} of {repeat}   ({load()})")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def csv_writers() -> None:
    """DataFrame.to_csv against poslab's writer (pyarrow) on a profiles table of 1,048,576 distances (short keys)."""
    import pandas as pd

    from poslab.study.results import write_csv

    n = 1048576
    rng = np.random.default_rng(0)
    d = np.arange(n)
    frame = pd.DataFrame({"study": "rotary_1m", "label": "rotary(rope_theta=500000, rotary_dim=128)",
                          "kind": "rotary", "seed": pd.array([pd.NA] * n, dtype="Int64"), "distance": d,
                          "mean_similarity": np.cos(d * 1e-3) * rng.random(n), "std_similarity": 0.0,
                          "n_pairs": n - d, "fitted_similarity": rng.random(n), "mean_similarity_ci_low": np.nan,
                          "mean_similarity_ci_high": np.nan})
    folder = Path(tempfile.mkdtemp(prefix="poslab-bench-"))
    try:
        print(f"## CSV writers, profiles.csv of {n:,} rows x {frame.shape[1]} columns   ({load()})")
        for name, write in (("DataFrame.to_csv", lambda path: frame.to_csv(path, index=False)),
                            ("poslab write_csv (pyarrow)", lambda path: write_csv(frame, path))):
            start = time.perf_counter()
            write(folder / "t.csv")
            seconds = time.perf_counter() - start
            back = pd.read_csv(folder / "t.csv")
            exact = all(np.array_equal(back[c].to_numpy(float), frame[c].to_numpy(float), equal_nan=True)
                        for c in ("mean_similarity", "fitted_similarity", "std_similarity"))
            print(f"   {name}: {seconds:.2f} s, {(folder / 't.csv').stat().st_size / 2**20:.0f} MiB, floats read "
                  f"back exactly: {exact}", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("one", "sweep", "fixed", "csv"))
    parser.add_argument("--repeat", type=int, default=0,
                        help="with --only one: that many interleaved pairs of target (a) and the host reference "
                             "instead of the single measurement")
    args = parser.parse_args()
    print(f"# {os.cpu_count()} CPUs, {load()}, Python {sys.version.split()[0]}, numpy {np.__version__}")
    if args.only in (None, "csv"):
        csv_writers()
    if args.only in (None, "fixed"):
        study = rotary_study(1024, "rotary_1k")
        whole_process("fixed cost: one rotary run at 1,024 positions", study, [])
        in_process(study)
    if args.only == "one" and args.repeat > 0:
        target_a_pairs(args.repeat)
    elif args.only in (None, "one"):
        study = rotary_study(1048576, "rotary_1m")
        whole_process("target (a): one rotary run at 1,048,576 positions", study, [])
        in_process(study)  # run_study through a worker (poslab run itself runs a single run in its own process)
        in_process(study, "serial", 1)  # the analysis alone, without the worker's start: what poslab run does
    if args.only in (None, "sweep"):
        whole_process("target (b): 100 RoPE configurations at 131,072 positions", sweep_study(), ["--jobs", "2"])
        in_process(sweep_study(), "processes", 2)
        whole_process("(b) the same, in one process", sweep_study(), ["--executor", "serial"])


if __name__ == "__main__":
    main()
