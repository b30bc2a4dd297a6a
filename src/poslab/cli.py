"""The ``poslab`` command line: run studies, list encodings, redraw figures."""

from __future__ import annotations

import dataclasses
import signal
import sys
import time
import warnings
from pathlib import Path

import click

from . import __version__


def _show_warning(message, category, filename, lineno, file=None, line=None):
    click.secho(f"warning: {message}", fg="yellow", err=True)


def _terminate(signum, frame):
    # SIGTERM becomes SystemExit, so the results writer removes its temporary folder
    sys.exit(128 + signum)


@click.group()
@click.version_option(__version__, prog_name="poslab")
def main():
    """Comparative studies of positional encodings in transformers."""
    warnings.showwarning = _show_warning
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)


@main.command()
@click.argument("study", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), help="Results folder [default: results/<study name>].")
@click.option("--overwrite", is_flag=True, help="Replace an existing poslab results folder.")
@click.option("--progress/--no-progress", default=True, help="Show a progress bar (on a terminal).")
@click.option("--executor", type=click.Choice(["processes", "serial", "dask"]), default="processes", show_default=True,
              help="Where runs execute: a local process pool, this process, or a Dask cluster.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Worker processes (pool or local Dask cluster) [default: usable CPUs].")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (with --executor dask; default: a local cluster).")
def run(study, out, overwrite, progress, executor, jobs, scheduler):
    """Run STUDY (a TOML file; default: the packaged compare_encodings study).

    Exits with status 1 if any run failed (its row in summary.csv says why;
    the other runs are still written).
    """
    import pandas as pd

    from .study import default_study_path, load_study, run_study, write_results
    from .study.results import ResultsExistError, check_writable
    from .study.spec import StudyError

    path = study or default_study_path()
    try:
        spec = load_study(path)
        out = out or Path("results") / spec.name
        check_writable(out, overwrite=overwrite)
    except (StudyError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    started = time.perf_counter()
    runs = spec.runs()
    click.echo(f"study {spec.name}: {len(runs)} runs, {spec.n_positions} positions, dim {spec.dim} -> {out}", err=True)
    if scheduler is not None and executor != "dask":
        raise click.UsageError("--scheduler needs --executor dask")
    try:
        result = run_study(spec, progress=progress, executor=executor, jobs=jobs, scheduler=scheduler)
    except (ImportError, OSError) as exc:  # no poslab[dask], or no scheduler at that address
        raise click.ClickException(str(exc)) from None
    failed = result.summary[result.summary["status"] != "ok"]
    for _, row in failed.iterrows():
        seed = "" if pd.isna(row["seed"]) else f" seed {row['seed']}"
        click.secho(f"run failed: {row['label']}{seed}: {row['message']}", fg="red", err=True)
    try:
        written = write_results(result, out, overwrite=overwrite)
    except (ResultsExistError, OSError) as exc:
        raise click.ClickException(str(exc)) from None
    cols = ["label", "seed", "status", "selected_model", "decay_length"] + [
        c for c in result.summary.columns if c.startswith("band_width_")
    ]
    click.echo(result.summary[[c for c in cols if c in result.summary.columns]].to_string(index=False))
    click.echo(f"wrote {written} in {time.perf_counter() - started:.1f} s "
               f"(analysis {result.timings['total']:.1f} s, the rest tables and figures)")
    if len(failed):
        raise click.ClickException(f"{len(failed)} of {len(result.summary)} runs failed; see {out / 'summary.csv'}")


@main.command()
def encodings():
    """List every registered encoding kind with its parameters and defaults."""
    from .data import BUNDLED_TABLES
    from .encodings import available_encodings

    for kind, cls in available_encodings().items():
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        stochastic = "  [stochastic: one run per seed]" if cls.stochastic else ""
        click.echo(f"{kind}  ({cls.__module__}.{cls.__qualname__}){stochastic}")
        click.echo(f"    {doc}")
        types = cls.parameter_types()
        for name, default in cls.defaults().items():
            shown = "required" if default is dataclasses.MISSING else f"default {default!r}"
            click.echo(f"    {name}: {types[name]}, {shown}")
        if kind == "learned":
            click.echo("    bundled sources: " + "; ".join(f"{k} ({v[1]})" for k, v in BUNDLED_TABLES.items()))


@main.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path))
def plot(results):
    """Redraw the figures of a finished RESULTS folder from its CSV tables."""
    from .study import read_results, write_figures

    from .study.results import figure_title

    try:
        tables = read_results(results)
        written = write_figures(tables, results, title=figure_title(tables["summary"]))
    except (OSError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    if not written:
        raise click.ClickException(f"no run in {results} succeeded: there is nothing to draw (see summary.csv)")
    click.echo("redrew " + ", ".join(str(p) for p in written))
