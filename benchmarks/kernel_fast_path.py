"""The exact fast path of translation-invariant encodings, end to end through ``poslab run`` (issue 14 item 3).

Two measurements, each one ``poslab run`` in a fresh process (wall time from
the command's start to its exit: interpreter start, the analysis, every CSV
and every figure), run one after the other:

1. **one rotary run at 1,048,576 positions** (rope_theta 500000, rotary_dim
   128, the default analysis: 200 resamples, figures included); target < 5 s
   on 2 cores;
2. **a sweep of 100 RoPE configurations at 131,072 positions** (25 values of
   rope_theta from 10^3 to 10^7 × default, linear, yarn and llama3 scaling with
   factor 8), ``--jobs 2``; target < 1 minute.

Usage (from the repository root)::

    .venv/bin/python benchmarks/kernel_fast_path.py            # both
    .venv/bin/python benchmarks/kernel_fast_path.py --only one  # the 1M-position run only

Prints the wall time, the peak resident memory of the largest process
(``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss``), the per-run ``seconds``
of ``summary.csv`` and ``profile_method`` (every run must be ``kernel``).
Results go to a temporary folder that is removed afterwards.
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

ONE = """
name = "rotary_1m"
n_positions = 1048576
dim = 128

[[encodings]]
kind = "rotary"
rope_theta = 500000.0
rotary_dim = 128
"""


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


def measure(name: str, study: str, extra: list[str]) -> None:
    import pandas as pd

    folder = Path(tempfile.mkdtemp(prefix="poslab-bench-"))
    try:
        (folder / "study.toml").write_text(study)
        poslab = Path(sys.executable).with_name("poslab")
        command = [str(poslab), "run", str(folder / "study.toml"), "--out", str(folder / "out"), "--no-progress",
                   *extra]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        wall = time.perf_counter() - start
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB -> GiB
        if done.returncode:
            print(done.stdout[-2000:], done.stderr[-2000:])
            raise SystemExit(f"{name}: poslab run exited with {done.returncode}")
        summary = pd.read_csv(folder / "out" / "summary.csv")
        methods = summary["profile_method"].value_counts().to_dict()
        written = sorted(p.name for p in (folder / "out").iterdir())
        print(f"## {name}: {len(summary)} run(s), profile_method {methods}")
        print(f"   command: poslab run STUDY --out DIR --no-progress {' '.join(extra)}")
        print(f"   wall time {wall:.2f} s end to end; peak RSS of the largest process {peak:.2f} GiB")
        print(f"   per-run seconds (summary.csv): median {summary['seconds'].median():.3f}, "
              f"max {summary['seconds'].max():.3f}")
        print(f"   written: {', '.join(written)}")
        print("   console: " + done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("one", "sweep"))
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(f"# {os.cpu_count()} CPUs, load average {load:.2f}, numpy {np.__version__}")
    if args.only in (None, "one"):
        measure("rotary, 1,048,576 positions", ONE, [])
    if args.only in (None, "sweep"):
        measure("100 RoPE configurations, 131,072 positions", sweep_study(), ["--jobs", "2"])


if __name__ == "__main__":
    main()
