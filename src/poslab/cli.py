"""The ``poslab`` command line: run studies, list encodings, redraw figures.

Exit codes (one convention for every command):

- 0: done;
- 1: done and written, but some runs (their ``summary.csv`` rows say why) or
  figures failed, or poslab hit an internal error;
- 2: usage error or bad input (a bad study file or option, an output
  location that cannot be written, work too large for this machine):
  refused before any work;
- 130: interrupted (Ctrl-C); 128 + N for another signal N (143: SIGTERM).
  Nothing half-written is left behind;
- 141: the reader of stdout went away (``poslab encodings | head``): the
  command ends quietly, as a tool killed by SIGPIPE would.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import signal
import sys
import threading
import textwrap
import time
import warnings
from pathlib import Path

import click

from . import __version__, _signals


#: Environment settings of the ``poslab`` command (its workers inherit them); a value already in the environment
#: wins. Measured on a 2-CPU machine, rotary run at 2^20 positions, 5 interleaved runs each (stop 23): 6.4-9.1 CPU-s
#: without, 6.4-7.8 with, median wall 5.4 -> 5.1 s.
#:
#: - ``OPENBLAS_THREAD_TIMEOUT=4``: an idle OpenBLAS thread sleeps after 2^4 cycles of polling (OpenBLAS default
#:   2^28), so it stops spinning on a CPU that poslab's own threads and the figure worker need.
#: - ``NUMPY_MADVISE_HUGEPAGE=0``: numpy does not ask for transparent huge pages for its arrays; on this kind of
#:   host the kernel's zeroing of fresh 2 MiB pages cost more system time than the pages saved.
#: - ``ARROW_DEFAULT_MEMORY_POOL=system``: pyarrow, which writes the CSV tables, allocates with the C library's
#:   malloc instead of its bundled mimalloc, which reserves a 1 GiB arena with MADV_HUGEPAGE (the same cost).
#:   Rotary run at 2^20 positions (profiles.csv 125 MB), 4 interleaved pairs (2026-12-02): system time 1.17-1.49
#:   -> 1.06-1.14 s.
PROCESS_SETTINGS = {"OPENBLAS_THREAD_TIMEOUT": "4", "NUMPY_MADVISE_HUGEPAGE": "0",
                    "ARROW_DEFAULT_MEMORY_POOL": "system"}


def entry() -> None:
    """The ``poslab`` command (console script, ``python -m poslab``): :func:`main`, then a quick exit.

    Once the command is done, the exit handlers run (worker pools, the fork server, a Dask cluster), the output
    is flushed, and the process ends without the interpreter's teardown of every imported module (0.4-0.7 s
    after a study: pandas, matplotlib and scipy hold many objects; nothing is written then). The normal exit is
    kept whenever it could matter: a thread other than daemons still running, a handler or a flush that fails.
    Tests call :func:`main` (click's runner), never this.

    Before anything loads numpy, the command sets three settings of the process's numerical libraries, unless the
    user's environment already sets them (see :data:`PROCESS_SETTINGS`). None changes a computed value. A Ctrl-C
    or SIGTERM whose exception Python drops (raised inside a ``__del__``) prints no "Exception ignored" traceback:
    the command raises it again and says "interrupted" (:mod:`poslab._signals`).
    """
    for name, value in PROCESS_SETTINGS.items():
        os.environ.setdefault(name, value)
    sys.unraisablehook = _signals.unraisable_hook(sys.unraisablehook)  # a dropped Ctrl-C prints no traceback
    try:
        main(prog_name="poslab")
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_handlers is None or any(t.is_alive() and not t.daemon for t in threading.enumerate()
                                   if t is not threading.main_thread()):
        sys.exit(code)
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): printed, status 1, as Python does
        print(code, file=sys.stderr)
        code = 1
    try:
        run_handlers()
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader of stdout has gone (`poslab ... | head`)
        _discard_stdout()
        os._exit(code or EXIT_BROKEN_PIPE)
    except BaseException:  # Python's own exit reports it as usual
        sys.exit(code)
    os._exit(code)


def _show_warning(message, category, filename, lineno, file=None, line=None):
    click.secho(f"warning: {message}", fg="yellow", err=True)


class _Stopped(SystemExit):
    """A termination signal (SIGTERM, SIGHUP), raised where the main thread is, so every ``finally`` runs."""


def _terminate(signum, frame):
    # SIGTERM becomes SystemExit, so the results writer removes its temporary folder and the workers are stopped
    _signals.raise_signal(_Stopped(128 + signum))


def _interrupt(signum, frame):
    # Ctrl-C: Python's own KeyboardInterrupt, kept in case Python drops it (poslab._signals)
    _signals.raise_signal(KeyboardInterrupt)


#: Exit statuses (module docstring); 141 (128 + SIGPIPE, as a shell reports a tool killed by it): the reader of
#: stdout went away.
EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 1, 2, 130, 141


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that Python's final flush of a closed pipe reports nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


_NOTHING_HALF_WRITTEN = ("nothing half-written was left behind (an unfinished result is not written; an earlier one in "
                         "its folder is kept)")


class BadInput(click.ClickException):
    """Bad input or an unusable output location, refused before any work: exit status 2."""

    exit_code = EXIT_USAGE


def _said(exc: Exception) -> str:
    """The message of ``exc`` for the command line: its ``cli_message`` (the flags, not the Python keywords) if
    it has one (:class:`poslab.study.ResultsExistError`), else ``str(exc)``."""
    return getattr(exc, "cli_message", None) or str(exc)


def _fresh_line() -> str:
    """A newline on a terminal, where the ^C echoed or a progress bar may end the current line; else nothing."""
    try:
        return "\n" if sys.stderr.isatty() else ""
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return ""


def _out_folder(ctx, param, value):
    """``--out`` as a Path; an empty value (which would silently mean the working folder) is refused."""
    if value is None:
        return None
    if not value.strip():
        raise click.BadParameter(f"is empty ({value!r}); give the folder to write to, e.g. --out results/NAME"
                                 + (", or leave --out out for results/<study name>" if ctx.info_name == "run" else ""))
    return Path(value)


class _Group(click.Group):
    """Ctrl-C exits 130 (click's default is 1, which here means "some runs failed"); no traceback ever."""

    def invoke(self, ctx):
        with _signals.command():  # a signal whose exception Python drops is raised again meanwhile
            return self._invoke(ctx)

    def _invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo(f"{_fresh_line()}interrupted; {_NOTHING_HALF_WRITTEN}", err=True)
            ctx.exit(EXIT_INTERRUPTED)
        except BrokenPipeError:  # `poslab encodings | head`: the reader has gone; end quietly, as Unix tools do
            _discard_stdout()
            ctx.exit(EXIT_BROKEN_PIPE)
        except _Stopped as exc:
            click.echo(f"{_fresh_line()}stopped by {signal.Signals(exc.code - 128).name}; {_NOTHING_HALF_WRITTEN}",
                       err=True)
            raise
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:  # a bug: say where, without a traceback
            tb = exc.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            where = f"{Path(tb.tb_frame.f_code.co_filename).name}:{tb.tb_lineno}"
            click.secho(f"error: {type(exc).__name__}: {exc} (internal error at {where}; please report it with "
                        "the command that caused it)", fg="red", err=True)
            ctx.exit(EXIT_FAILED)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="poslab")
def main():
    """Comparative studies of positional encodings in transformers."""
    warnings.showwarning = _show_warning
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _terminate)
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) is \
            signal.default_int_handler:  # Python's own; not one a caller installed, not SIG_IGN
        signal.signal(signal.SIGINT, _interrupt)


@main.command()
@click.argument("study", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--out", type=click.Path(file_okay=False), callback=_out_folder,
              help="Results folder [default: results/<study name>].")
@click.option("--overwrite", is_flag=True, help="Replace an existing poslab results folder.")
@click.option("--progress/--no-progress", default=True,
              help="Show where the study is on stderr: a bar on a terminal, one line per stage on a pipe or in CI.")
@click.option("--executor", type=click.Choice(["processes", "serial", "dask"]), default="processes", show_default=True,
              help="Where runs execute: a local process pool, this process, or a Dask cluster.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None,
              help="Worker processes (pool or local Dask cluster) [default: usable CPUs].")
@click.option("--scheduler", metavar="ADDRESS", default=None,
              help="Dask scheduler address, e.g. tcp://10.0.0.5:8786 (with --executor dask; default: a local cluster).")
@click.option("--force", is_flag=True,
              help="Skip the up-front limits: more than 10000 runs or 10^6 pairs to compare, or more memory than is available.")
def run(study, out, overwrite, progress, executor, jobs, scheduler, force):
    """Run STUDY (a TOML file; default: the packaged compare_encodings study).

    Everything is checked before any work (the study, the output location,
    the number of runs and the memory the largest runs need). Exit status: 0
    done; 1 written, but some runs or figures failed (summary.csv and
    manifest.json say why); 2 bad input, refused before any work; 130
    interrupted.
    """
    from .study.executors import default_jobs, start_fork_server  # the standard library only

    if executor == "processes" and not _one_run(study):  # first: its imports run on another CPU while this
        start_fork_server()  # process imports its own (pandas, the analysis)
    import pandas as pd

    from .study import default_study_path, load_study, run_study, write_results
    from .study.budget import ResourceError, check_resources
    from .study.progress import Progress
    from .study.results import FigureFailedWarning, ResultsExistError, check_writable
    from .study.spec import MAX_RUNS, StudyError

    if scheduler is not None and executor != "dask":
        raise click.UsageError("--scheduler needs --executor dask")
    path = study or default_study_path()
    try:
        spec = load_study(path, max_runs=None if force else MAX_RUNS)
        out = out or Path("results") / spec.name
        check_writable(out, overwrite=overwrite)
        runs = spec.runs()
        workers = 1 if executor == "serial" else min(jobs or default_jobs(), len(runs))
        if not force and scheduler is None:  # a remote cluster's memory is not this machine's
            check_resources(spec, workers=workers)
    except (StudyError, ResourceError, ResultsExistError, OSError) as exc:
        raise BadInput(_said(exc)) from None
    started = time.perf_counter()
    threading.Thread(target=_import_figures, name="poslab-import-figures", daemon=True).start()
    click.echo(f"study {spec.name}: {len(runs)} run{'' if len(runs) == 1 else 's'}, {_sizes(spec, runs)} -> {out}", err=True)
    try:
        progress = Progress(progress)  # on stderr; results and the summary go to stdout
        if executor == "processes" and len(runs) == 1:  # no worker to start, nothing to send back (_in_a_thread)
            result = _in_a_thread(lambda: run_study(spec, progress=progress, executor="serial"))
        else:
            result = run_study(spec, progress=progress, executor=executor, jobs=jobs, scheduler=scheduler)
    except (ImportError, OSError) as exc:  # no poslab[dask], or no scheduler at that address
        raise BadInput(str(exc)) from None
    failed = result.summary[result.summary["status"] != "ok"]
    for _, row in failed.iterrows():
        seed = "" if pd.isna(row["seed"]) else f" seed {row['seed']}"
        click.secho(f"run failed: {row['label']}{seed}: {row['message']}", fg="red", err=True)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            written = write_results(result, out, overwrite=overwrite, progress=progress)
    except ResultsExistError as exc:
        raise BadInput(_said(exc)) from None
    except OSError as exc:  # the disk filled up, the folder became read-only: the old result is untouched
        raise click.ClickException(f"{exc}; the analysis was not saved (any earlier result in {out} is intact)") \
            from None
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    bad_figures = [w for w in caught if issubclass(w.category, FigureFailedWarning)]
    click.echo(_summary_text(result.summary))
    click.echo(f"wrote {written} in {time.perf_counter() - started:.1f} s "
               f"(analysis {result.timings['total']:.1f} s, the rest tables and figures)")
    problems = []
    if len(failed):
        problems.append(f"{len(failed)} of {len(result.summary)} runs failed; see {out / 'summary.csv'}")
    if bad_figures:
        problems.append(f"{len(bad_figures)} figure(s) could not be drawn; the tables are written "
                        f"(see {out / 'manifest.json'}, failed_figures)")
    if problems:
        raise click.ClickException("; ".join(problems))


def _sizes(spec, runs) -> str:
    """The run header's positions and width, true of every run: a range when entries set their own n_positions;
    the study's dim and the kinds that keep their own width (a learned table, rotary_dim), or no dim when no run
    uses it (relative biases: ALiBi, T5 buckets, KERPLE, FIRE)."""
    lengths = sorted({run.n_positions for run in runs})
    text = f"{lengths[0]} positions" if len(lengths) == 1 else f"{lengths[0]}-{lengths[-1]} positions (per entry)"
    users = [run.encoding for run in runs if run.encoding.generates_table or run.encoding.keeps_own_dim]
    own = list(dict.fromkeys(enc.kind for enc in users if enc.keeps_own_dim))
    if users and all(enc.keeps_own_dim for enc in users):
        return f"{text}, each run's own width ({', '.join(own)})"
    if own:
        return f"{text}, dim {spec.dim} ({', '.join(own)}: {'its' if len(own) == 1 else 'their'} own width)"
    return f"{text}, dim {spec.dim}" if users else text


def _import_figures() -> None:
    """Import scipy.fft and scipy.special (~0.25 s; the profiles, fits and intervals), the fits' optimiser
    (scipy.optimize, ~0.1 s) and the figures (matplotlib, ~0.5 s) while the analysis runs: the runs are in worker
    processes, or in a thread that mostly waits on numpy (which lets go of the GIL). scipy.fft first: a run that
    needs it meanwhile waits for this import instead of starting its own. A failure is left for the analysis,
    the fits or the figures to report."""
    try:
        import scipy.fft  # noqa: F401  (the analysis imports scipy.fft and scipy.special on first use)
        import scipy.optimize  # noqa: F401  (the first fit would wait for it otherwise)

        from .study.results import _load_plots

        _load_plots()
    except Exception:
        pass


def _one_run(study) -> bool:
    """Whether the study file surely has a single run, read from its TOML alone (before the imports that
    :func:`poslab.study.load_study` needs): one ``[[encodings]]`` entry without a list in it (a list may expand to
    several runs) and at most one seed. Then ``poslab run`` starts no fork server, since that run executes in this
    process (:func:`_in_a_thread`); on a busy 2-CPU machine the server's imports cost the run ~1-2 s of CPU. Unsure
    (the default study, a file that does not parse: load_study reports it): False, and the server is started as
    for any study of several runs. Only the start-up time depends on it."""
    import tomllib

    if study is None:
        return False
    try:
        data = tomllib.loads(Path(study).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False
    entries, seeds = data.get("encodings"), data.get("seeds", [0])
    return (isinstance(entries, list) and len(entries) == 1 and isinstance(entries[0], dict)
            and not any(isinstance(v, list) for v in entries[0].values()) and isinstance(seeds, list) and len(seeds) <= 1)


def _in_a_thread(call):
    """``call()`` in a thread of this process while the main thread waits for it; its value, or its exception.

    How ``poslab run`` runs a study of one run: a worker process would cost
    a process start and its imports and send the run's tables back through
    a pipe (at 10^6 distances ~60 MiB to pickle), for nothing, since this
    process waits anyway. What the worker gave is kept: Ctrl-C and SIGTERM
    act at once while the run is deep in one long numpy or scipy call,
    because their Python handlers run in the main thread, which only waits
    (CPython runs signal handlers in the main thread alone, and numpy's and
    scipy's long loops release the GIL); the exception they raise unwinds
    the command, which exits with 130 or 143 with nothing written (the
    results folder is only made once the analysis has finished), and the
    daemon thread ends with the process. Not kept: a C routine that holds
    the GIL for minutes delays Ctrl-C until it returns, and a run that
    crashes the interpreter (a segfault in native code, the out-of-memory
    killer) ends the command instead of being a failed row (the memory
    check before any work refuses runs larger than the machine, see
    poslab.study.budget); ``--jobs 1`` with several runs, or any study of
    several runs, still uses worker processes.
    """
    import threading

    outcome = {}

    def target():
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the main thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name="poslab-run", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.25)  # the main thread wakes up for a signal's handler, which raises here
        _signals.check()  # or raises it again here, if Python dropped it (poslab._signals)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _interval(value, low, high, fmt) -> str:
    """'v [low, high]' with empty parts for missing values; a missing high end means beyond the window."""
    import pandas as pd

    if pd.isna(value):
        return "-"
    text = fmt.format(value)
    if low in (None,) or pd.isna(low):
        return text
    return f"{text} [{fmt.format(low)}, {'>' if pd.isna(high) else fmt.format(high)}]"


def _summary_text(summary) -> str:
    """The summary as a short console table: the columns the schema marks ``console``, with their intervals.

    The model-free summaries come first (stage order). Text is shown as it
    is ("-" when empty); a number of a run that failed is "-". An empty
    summary shows why: ``> max_distance`` when it is not reached within the
    window, or the profile's degenerate status (``flat``, ``rising``,
    ``no_decay``, ``too_few_points``: no summary of that profile is a number),
    or ``noise`` when it is ``within_noise`` (the profile falls to the level
    but not beyond its noise; explained under the table); an empty integral
    scale (no zero crossing within the window) is "-". A
    number of a run whose ``ci_method`` is ``exact`` (no sampling variability,
    no interval) is followed by "(exact)", explained under the table, never
    by a bracket; its first minimum, a dip of an exact cosine sum, by
    "(ripple, depth)" (the README's table; comparison_pairs.csv's note),
    unless the crossing is ``ill_conditioned`` (``summary_notes``):
    then "(ill-conditioned: low–high)" follows the number (an exact run) or its
    interval, the range the crossing moves over when the level changes by
    ±0.02, as in the README; a summary the run flags
    ``window_dependent`` is followed by "*". A 1-D summary of a run on a grid
    (``not_applicable``) is "n/a". An interval whose high end is empty is
    printed ``[low, >]`` (open above). Each marker that appears in the table
    is explained under it, and only those.
    """
    import pandas as pd

    from .analysis.summaries import DEGENERATE
    from .stages import PIPELINE, SUMMARY
    from .stages.bands import ripple_depth
    from .stages.base import NOT_APPLICABLE_GRID

    shown = [(name, col) for col in SUMMARY.columns if col.console for name in summary.columns if col.matches(name)]
    exact = summary["ci_method"].eq("exact") if "ci_method" in summary else pd.Series(False, index=summary.index)
    line = {col.name for stage in PIPELINE if stage.positions == "line" for col in stage.summary}
    rows, seen = [], set()  # the markers printed, each explained under the table
    for i, r in summary.iterrows():
        row = {"label": r["label"], "seed": "" if pd.isna(r["seed"]) else int(r["seed"])}
        grid = isinstance(r.get("not_applicable"), str) and NOT_APPLICABLE_GRID in r["not_applicable"]
        notes = r.get("summary_notes")
        notes = notes if isinstance(notes, str) else ""
        degenerate = next((d for d in DEGENERATE if notes.startswith(f"every summary: {d} ")), "")
        ripple = ripple_depth(r)  # a first minimum that is a ripple of an exact cosine sum, or None
        moved = r.get("window_dependent")
        moved = set(moved.split(";")) if isinstance(moved, str) and moved else set()
        for name, col in shown:
            heading, value = col.heading + name.removeprefix(col.name), r[name]
            fmt = "{:.0f}" if col.dtype in ("int", "Int64") else "{:.1f}"
            if grid and col.name in line and r["status"] == "ok":  # a 1-D summary of a run on a grid
                text = "n/a"
            elif col.dtype == "str":
                text = value if isinstance(value, str) and value else "-"
            elif col.name in ("n_positions", "max_distance"):  # the run's window, ok or failed
                text = fmt.format(value)
            elif r["status"] != "ok":
                text = "-"
            elif pd.isna(value) and degenerate and col.beyond_window:
                text = degenerate
                seen.add(degenerate)
            elif pd.isna(value) and f"{name}: within_noise" in notes:  # falls to the level, not beyond its noise
                text = "noise"
                seen.add("noise")
            elif pd.isna(value) and col.beyond_window:  # never reached within the window
                text = f"> {r['max_distance']}"
                seen.add("beyond")
            elif pd.isna(value):
                text = "-"
            elif (ill := _ill_conditioned(notes, name)) is not None:  # its range, after the interval if sampled
                text = fmt.format(value) if exact[i] or not col.interval else \
                    _interval(value, r.get(name + "_ci_low"), r.get(name + "_ci_high"), fmt)
                text += f" (ill-conditioned{ill})"
                seen.add("ends" if ill.startswith(": ends at") else "ill")
                if text.count(", >]"):
                    seen.add("open")
            elif name == "first_minimum" and ripple is not None:  # as comparison_pairs.csv says
                text = f"{fmt.format(value)} (ripple, {ripple:.2f})"
                seen.add("ripple")
            elif col.interval and exact[i]:
                text = f"{fmt.format(value)} (exact)"
                seen.add("exact")
            elif col.interval:
                text = _interval(value, r.get(name + "_ci_low"), r.get(name + "_ci_high"), fmt)
                if text.endswith(", >]"):
                    seen.add("open")
            else:
                text = fmt.format(value)
            if text == "n/a":
                seen.add("n/a")
            if text == "-" and not (col.dtype == "str" and r["status"] == "ok"):
                seen.add("-")
            if name in moved and text != "-":
                text += "*"
                seen.add("*")
            row[heading] = text
        rows.append(row)
    table = _wrap_table(pd.DataFrame(rows))
    notes = [textwrap.fill(note, _WIDTH, subsequent_indent="  ", break_long_words=False)
             for marker, note in _FOOTNOTES.items() if marker in seen]  # the notes under the table, each wrapped
    return "\n".join([table, *notes])


#: The console summary's markers and what each means, in the order they are explained under the table.
_FOOTNOTES = {
    "exact": ("(exact): the table is exactly translation invariant, or the run is a kernel computed exactly by "
              "distance, so resampling positions changes nothing: no sampling variability and no interval "
              "(ci_method exact); the fit's own uncertainty is decay_length_se in decay_metrics.csv"),
    "ripple": ("(ripple, d): the first minimum of an exact cosine sum (a translation-invariant table, a RoPE "
               "kernel), from which S rises back by d (first_minimum_depth): a ripple of the cosine sum, not a "
               "length scale; compare the band widths for that (comparison_pairs.csv says so too)"),
    "ill": ("(ill-conditioned: a–b): the profile comes back above the level later on, and a change of ±0.02 in "
            "the level moves the crossing from a to b (summaries.csv ill_conditioned, crossing_low/_high)"),
    "ends": ("ends at a–b: an integral scale \"(ill-conditioned: ends at a–b)\" is integrated up to an "
             "ill-conditioned zero crossing, which a change of ±0.02 in the level moves from a to b (the range of "
             "the crossing, not of the integral)"),
    "open": "[low, >]: the interval is open above: the data give no upper end within the window",
    "*": ("*: changes with the window: between a quarter, half and all of the run's window it moves by more "
          "than 5 % (when resampled, also beyond its bootstrap interval), or it is a number at a smaller window "
          "(when resampled, with an interval closed above) and not at a larger (window_sensitivity.csv)"),
    "beyond": "> N: not reached within the window, up to distance N (status not_reached)",
    "flat": "flat: no decay beyond distance 1, so no summary of the profile is a number",
    "rising": "rising: the profile rises with distance, so no summary of it is a number",
    "no_decay": "no_decay: the profile oscillates without decaying, so no summary of it is a number",
    "too_few_points": "too_few_points: too few distances to summarise the profile",
    "noise": ("noise: the profile falls to the level but never by more than crossing_z standard errors below "
              "it within the window, or only at the window's last distances, whose pairs lie in one anchor block "
              "(no standard error) (status within_noise, summary_notes): a dip of the noise, not a crossing; "
              "an integral scale shows noise when its zero crossing does"),
    "n/a": ("n/a: positions on a grid (t, h, w or h, w), whose flattened index is not a distance: the 1-D "
            "analyses and their figures do not apply (summary.csv not_applicable); see grid_profiles.csv, "
            "grid_displacements.csv, grid_maps.csv, grid_profiles.png and grid_axes.png"),
    "-": "-: no value: the run failed, or it is not defined for this profile (summary.csv summary_notes)",
}


def _ill_conditioned(notes: str, name: str) -> str | None:
    """': a–b' (the range of an ill-conditioned crossing, from ``summary_notes``; ': ends at a–b' for a summary
    that ends at such a crossing, the integral scale), '' without a range, or None."""
    import re

    match = re.search(rf"(?:^|; ){re.escape(name)}: ill_conditioned( \((it ends at )?[^;]*?from ([-\d.e+]+) to "
                      r"([-\d.e+]+)\))?", notes)
    if match is None:
        return None
    if match.group(3) is None:
        return ""
    ends = "ends at " if match.group(2) else ""  # the integral scale: the range of the crossing it ends at, not its own
    return f": {ends}{float(match.group(3)):.0f}–{float(match.group(4)):.0f}"


#: Console width the summary table is wrapped to.
_WIDTH = 80


def _wrap_table(frame, width: int = _WIDTH) -> str:
    """A text table in blocks of columns at most ``width`` wide, each repeating the run column; labels longer
    than 24 characters are numbered, with a key of the full labels above the table."""
    import pandas as pd

    key = []
    if frame["label"].map(len).max() > 24:
        numbers = {label: i + 1 for i, label in enumerate(dict.fromkeys(frame["label"]))}
        key = [textwrap.fill(f"{n:>2}  {label}", width, subsequent_indent="    ", break_long_words=False)
               for label, n in numbers.items()]
        frame = frame.assign(label=frame["label"].map(numbers)).rename(columns={"label": "run"})
    ids = [c for c in frame.columns[:2]]

    def text(columns):  # as printed: pandas' own padding decides the width
        return pd.DataFrame(frame[ids + columns]).to_string(index=False)

    tables, block = [], []
    for column in frame.columns[2:]:
        if block and max(map(len, text(block + [column]).splitlines())) > width:
            tables.append(text(block))
            block = []
        block.append(column)
    tables.append(text(block))
    return "\n".join(key + ([""] if key else []) + ["\n\n".join(tables)])


@main.command()
@click.argument("kinds", nargs=-1)
def encodings(kinds):
    """List every registered encoding kind (or the KINDS named) with its parameters and defaults."""
    from .data import BUNDLED_TABLES
    from .encodings import available_encodings

    available = available_encodings()
    unknown = [k for k in kinds if k not in available]
    if unknown:
        raise BadInput(f"unknown kind(s) {', '.join(map(repr, unknown))}; registered kinds: {', '.join(available)}")
    click.echo("In a study file's [[encodings]] entry any parameter may also be a list (one run per value), and "
               "n_positions = N (an integer >= 2, at most the study's n_positions) analyses positions 0..N-1 only.")
    for kind, cls in available.items():
        if kinds and kind not in kinds:
            continue
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        stochastic = "  [stochastic: one run per seed]" if cls.stochastic else ""
        click.echo(f"{kind}  ({cls.__module__}.{cls.__qualname__}){stochastic}")
        click.echo(f"    {doc}")
        types = cls.parameter_types()
        unset = cls.unset_defaults
        docs = {f.name: f.metadata.get("doc", "") for f in dataclasses.fields(cls)}
        for name, default in cls.defaults().items():
            shown = ("required" if default is dataclasses.MISSING else f"default: {unset[name]}"
                     if default is None and name in unset else f"default {default!r}")
            click.echo(f"    {name}: {types[name]}, {shown}" + (f" — {docs[name]}" if docs.get(name) else ""))
        if kind == "learned":
            click.echo("    source is a bundled table, a weights file (.safetensors, .npy, .npz, .bin, .pt), a config.json, "
                       "a model folder, a Hugging Face cache snapshot or models--ORG--NAME folder, a Hub id "
                       "ORG/NAME[@REVISION], or a poslab training-run folder")
            click.echo("    bundled sources: " + "; ".join(f"{k} ({v[1]})" for k, v in BUNDLED_TABLES.items()))
            click.echo('    a bundled name that is also a file or folder is refused: write "./NAME" for the path, '
                       '"bundled:NAME" for the bundled table')


@main.command()
@click.argument("results", type=click.Path(exists=True, file_okay=False, path_type=Path))
def plot(results):
    """Redraw the figures of a finished RESULTS folder from its CSV tables.

    It needs every table the study wrote (manifest.json lists them): a missing
    one is refused, naming the file and the figures drawn from it, and the
    folder is left as it was. Afterwards every figure in the folder is drawn
    from the current tables: one they no longer draw, or that fails, is
    removed (and named). Exit status 1 if a figure failed, 2 if a table is
    missing or cannot be read.
    """
    from .study import read_results, write_figures
    from .study.results import FIGURES, figure_settings, figure_title, read_manifest, record_figures

    try:
        settings = figure_settings(read_manifest(results), str(results / "manifest.json"))  # refused before anything
        tables = read_results(results)
    except (OSError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    failed: dict[str, str] = {}
    left_out: dict[str, str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = write_figures(tables, results, title=figure_title(tables["summary"]), failed=failed,
                                left_out=left_out, settings=settings)
    for w in caught:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    stale = [name for name in FIGURES if name not in {p.name for p in written} and (results / name).exists()]
    for name in stale:  # drawn from tables that are gone, or a failed figure: never left looking current
        (results / name).unlink()
    try:
        record_figures(results, [p.name for p in written], failed, left_out)
    except OSError as exc:
        raise click.ClickException(f"cannot update {results / 'manifest.json'}: {exc}") from None
    if stale:
        click.echo("removed stale " + ", ".join(stale), err=True)
    if failed:
        raise click.ClickException(f"{len(failed)} figure(s) could not be drawn: {', '.join(failed)}")
    if not written:
        raise click.ClickException(f"no run in {results} succeeded: there is nothing to draw (see summary.csv)")
    click.echo("redrew " + ", ".join(str(p) for p in written))


@main.command()
@click.argument("source")
@click.option("--key", help="Check this tensor instead of choosing one.")
def inspect(source, key):
    """List the position tensors of SOURCE and say which one `learned` would use, and why.

    SOURCE: anything `learned source = ...` accepts: a bundled name (gpt2 or bundled:gpt2; a bare name that is
    also a path here is refused: write ./gpt2 for the path), a weights file or
    config.json, a Hugging Face model folder, cache snapshot or models--ORG--NAME folder, a Hub id
    ORG/NAME[@REVISION], or a training-run folder. Runs the checks a study entry `learned source =
    SOURCE` runs, and exits 2 with the study's message whenever that entry would be refused.
    """
    from .checkpoints import inspect_source
    from .checkpoints.inspect import NoTableError

    try:
        click.echo(inspect_source(source, key))
    except NoTableError as exc:  # the report, then why: exit 2 like any refused input
        click.echo(exc.report)
        raise BadInput(f"no position table would be used: {exc.reason}") from None
    except (OSError, KeyError, ValueError, ImportError) as exc:
        raise BadInput(exc.args[0] if isinstance(exc, KeyError) else str(exc)) from None


@main.command()
@click.option("--out", required=True, type=click.Path(file_okay=False), callback=_out_folder,
              help="Run folder to create.")
@click.option("--corpus", default="tinyshakespeare", show_default=True, help="Bundled corpus name or a UTF-8 text file.")
@click.option("--steps", default=1500, show_default=True, type=click.IntRange(min=1), help="Optimizer steps.")
@click.option("--layers", default=2, show_default=True, type=click.IntRange(min=1))
@click.option("--d-model", default=128, show_default=True, type=click.IntRange(min=1), help="Model width (position table columns).")
@click.option("--heads", default=4, show_default=True, type=click.IntRange(min=1))
@click.option("--context-length", default=256, show_default=True, type=click.IntRange(min=2), help="Positions (table rows).")
@click.option("--batch-size", default=32, show_default=True, type=click.IntRange(min=1))
@click.option("--lr", default=3e-3, show_default=True, type=click.FloatRange(min=0, min_open=True), help="Peak learning rate.")
@click.option("--warmup-steps", default=100, show_default=True, type=click.IntRange(min=0))
@click.option("--weight-decay", default=0.1, show_default=True, type=click.FloatRange(min=0))
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0))
@click.option("--eval-batches", default=8, show_default=True, type=click.IntRange(min=1), help="Fixed batches per split for train/val loss.")
@click.option("--snapshots", help="Comma-separated steps to save, e.g. '0,50,100' [default: about 12 log-spaced steps]; 0 and the last step are always saved.")
@click.option("--threads", default=1, show_default=True, type=click.IntRange(min=1), help="torch CPU threads (results may depend on it).")
@click.option("--overwrite", is_flag=True, help="Replace an existing poslab run folder.")
@click.option("--progress/--no-progress", default=True, help="Show a progress bar with the loss.")
def train(out, corpus, steps, layers, d_model, heads, context_length, batch_size, lr, warmup_steps, weight_decay, seed,
          eval_batches, snapshots, threads, overwrite, progress):
    """Train a small character-level transformer and save its learned position table at chosen steps.

    The defaults train the bundled trained-char-lm run (about 11 CPU-minutes on one thread).
    Writes OUT/poslab_train.json (settings, losses) and OUT/positions/step_NNNNNNN.npy; a study reads
    them with kind = "learned", source = "OUT", step = N (or step = "all"). Needs torch: pip install 'poslab[train]'.
    """
    from .training import RunExistsError, TrainConfig, check_run_writable, load_corpus, parse_steps, require_torch
    from .training import train as run_training

    try:  # everything a user can get wrong, before any training
        require_torch()
        config = TrainConfig(layers=layers, d_model=d_model, heads=heads, context_length=context_length,
                             batch_size=batch_size, steps=steps, lr=lr, warmup_steps=warmup_steps,
                             weight_decay=weight_decay, seed=seed, eval_batches=eval_batches, threads=threads,
                             snapshot_steps=parse_steps(snapshots) if snapshots else None)
        load_corpus(corpus)
        check_run_writable(out, overwrite=overwrite)
    except (ImportError, RunExistsError, OSError, ValueError) as exc:
        raise BadInput(str(exc)) from None
    try:
        meta = run_training(config, out, corpus=corpus, overwrite=overwrite, progress=progress)
    except (RunExistsError, OSError, ValueError) as exc:  # diverged, disk full: nothing half-written is left
        raise click.ClickException(str(exc)) from None
    for row in meta["losses"]:
        click.echo(f"step {row['step']:>7}  train_loss {row['train_loss']:.4f}  val_loss {row['val_loss']:.4f}")
    click.echo(f"wrote {out} ({len(meta['steps'])} snapshots) in {meta['seconds']:.0f} s; final val loss {meta['final_val_loss']:.4f}")
