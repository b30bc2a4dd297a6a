"""Seconds per study figure, as ``poslab run`` writes them: drawn from the tables in memory, laid out at the print
width, saved in the study's formats (``write_figures``' steps, one figure at a time).

    python benchmarks/figures.py [STUDY.toml] [--width page|column] [--repeats 5]

The study runs once in this process (serial), then each figure is drawn and saved ``--repeats`` times into a
temporary folder; the table gives the first time (a figure's first draw in a process: what ``poslab run`` pays,
font and mathtext caches cold for that figure) and the fastest, in CPU seconds of this process (less sensitive
than wall time to other processes on the machine) and wall seconds. Run it with ``PYTHONPATH`` pointing at
another checkout's ``src`` to compare two versions on the same tables.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path, PurePath


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", default=str(Path(__file__).parents[1] / "src" / "poslab" / "studies"
                                                        / "compare_encodings.toml"))
    parser.add_argument("--width", choices=("page", "column"), default=None, help="default: the study's")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import matplotlib

    from poslab.plots import STUDY_FIGURES, save_figure
    from poslab.plots.core import PRINT_DPI, FigureSettings, print_figure
    from poslab.study.results import figure_title
    from poslab.study.runner import run_study
    from poslab.study.spec import load_study

    result = run_study(load_study(args.study), executor="serial", progress=False)
    tables = result.tables()
    title = figure_title(tables["summary"])
    settings = result.spec.figures
    if args.width:
        settings = FigureSettings(formats=settings.formats, width=args.width)
    out = Path(tempfile.mkdtemp(prefix="poslab-figures-"))
    print(f"{PurePath(args.study).name}: {settings.width} width, formats {', '.join(settings.formats)}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'figure':28s} {'first cpu':>9s} {'min cpu':>8s} {'min wall':>8s}  size (in)")
    totals = [0.0, 0.0, 0.0]
    for name, draw in STUDY_FIGURES.items():
        cpu, wall, fig = [], [], None
        for _ in range(args.repeats):
            c0, w0 = time.process_time(), time.perf_counter()
            with warnings.catch_warnings(), matplotlib.rc_context(settings.rc):
                warnings.simplefilter("ignore")
                fig = draw(tables, title)
            if fig is None:
                break
            print_figure(fig, settings)
            with matplotlib.rc_context(settings.rc):
                for fmt in settings.formats:
                    save_figure(fig, out / f"{PurePath(name).stem}.{fmt}", dpi=PRINT_DPI, close=False)
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
        if not cpu:
            continue
        row = (cpu[0], min(cpu), min(wall))
        totals = [t + r for t, r in zip(totals, row)]
        print(f"{name:28s} {row[0]:9.3f} {row[1]:8.3f} {row[2]:8.3f}  {fig.get_figwidth():.2f} x {fig.get_figheight():.2f}")
    print(f"{'all figures':28s} {totals[0]:9.3f} {totals[1]:8.3f} {totals[2]:8.3f}  -> {out}")


if __name__ == "__main__":
    main()
