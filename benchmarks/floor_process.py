"""The floor of a whole analysis process on one table: what any tool that writes a tidy table and one figure pays.

Run by ``benchmarks/run.py`` as method (f), timed from outside like ``poslab run`` (e)::

    python benchmarks/floor_process.py TABLE.npy OUT_FOLDER

It starts the interpreter, imports what a tool with tidy tables and figures needs (numpy, pandas, pyarrow's
CSV writer, scipy.fft, matplotlib with the Agg backend), reads the table, computes the mean similarity profile
by one FFT autocorrelation of the unit rows (the (d) method of run.py), writes it as one CSV and draws it as one
300-dpi PNG line plot. Nothing else: no standard deviation, fits, bootstrap, properties, heatmap or window
sensitivity, one figure instead of poslab's three to five. The time of (e) minus this is what poslab's analyses
and figures cost beyond the floor.
"""

import sys
from pathlib import Path

import matplotlib
import numpy as np
import pandas  # noqa: F401  (a tidy-table tool imports it)
import pyarrow as pa
import pyarrow.csv as pacsv
import scipy.fft

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(table_path: str, out: str) -> None:
    x = np.load(table_path)
    u = x / np.linalg.norm(x, axis=1, keepdims=True)
    n = len(u)
    size = scipy.fft.next_fast_len(2 * n)  # no wrap-around
    spectrum = scipy.fft.rfft(u, size, axis=0)
    mean = scipy.fft.irfft((spectrum.real ** 2 + spectrum.imag ** 2).sum(axis=1), size)[:n]
    mean /= n - np.arange(n)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    pacsv.write_csv(pa.table({"distance": np.arange(n), "mean_similarity": mean}), str(folder / "profile.csv"))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.plot(np.arange(n), mean)
    ax.set(xlabel="distance (positions)", ylabel="mean cosine similarity")
    fig.savefig(folder / "profile.png", dpi=300)


if __name__ == "__main__":
    main(*sys.argv[1:3])
