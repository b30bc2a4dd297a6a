"""The results folder: CSV tables, figures and manifest.json, written atomically.

Everything is written into a temporary sibling folder which is renamed into
place only when complete, so an interrupted or failed write never leaves a
half-written results folder; an existing folder is replaced only with
``overwrite=True``.
"""

from __future__ import annotations

import gc
import importlib.metadata
import json
import os
import platform
import select
import signal
import sys
import threading
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path, PurePath

import pandas as pd

from .. import __version__, _signals
from .._atomic import AtomicFolder, check_can_create, friendly_os_error
from .._threads import usable_cpus
from ..stages import TABLES as SCHEMA
from ..stages import build_stages, schema
from .progress import Progress
from .runner import TABLES, StudyResult, free_cpu, old_objects_frozen, short_gil_turns, small_pages

__all__ = ["FigureFailedWarning", "ResultsExistError", "write_results", "read_results", "write_figures", "write_csv",
           "FIGURES"]

#: The figures' names (poslab.plots: matplotlib), bound by :func:`_load_plots` on first use; ``FIGURES``: every
#: study figure's file name in every format.
_PLOT_NAMES = ("FIGURE_TABLES", "STUDY_FIGURES", "save_figure", "FORMATS", "PRINT_DPI", "FigureLimitWarning",
               "FigureSettings", "print_figure", "FIGURES")
_plots_loaded = False


def _load_plots() -> None:
    """Import the figures (poslab.plots and matplotlib, ~0.5 s) on first use, not with this module: ``poslab run``
    imports them in a thread while the analysis runs (:func:`poslab.cli.run`), off the path to the first result."""
    global _plots_loaded, FIGURE_TABLES, STUDY_FIGURES, save_figure, FORMATS, PRINT_DPI, FigureLimitWarning
    global FigureSettings, print_figure, FIGURES
    if _plots_loaded:
        return
    from ..plots import FIGURE_TABLES, STUDY_FIGURES, save_figure
    from ..plots.core import FORMATS, PRINT_DPI, FigureLimitWarning, FigureSettings, print_figure

    FIGURES = tuple(f"{PurePath(name).stem}.{fmt}" for name in STUDY_FIGURES for fmt in FORMATS)
    _plots_loaded = True


def __getattr__(name):
    if name in _PLOT_NAMES:
        _load_plots()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
#: Prefix of a file being rewritten in place (``poslab plot``): written under this name, then renamed.
_FILE_TMP = ".poslab-tmp-"
_KEY_PACKAGES = ("numpy", "scipy", "pandas", "matplotlib", "seaborn", "safetensors", "click", "tqdm")


class ResultsExistError(FileExistsError):
    """The results folder exists and may not be replaced (no overwrite, or not poslab results).

    The message is written in the command's terms (``--overwrite``, ``--out``): :attr:`cli_message` is what
    ``poslab run`` prints; ``str()`` also names the keyword of the Python call, ``--overwrite (overwrite=True)``.
    """

    def __init__(self, message: str):
        self.cli_message = message.replace(" (overwrite=True)", "")  # idempotent: a re-raised (unpickled) one
        super().__init__(self.cli_message.replace("--overwrite", "--overwrite (overwrite=True)"))


def check_writable(out, *, overwrite: bool = False) -> Path:
    """Refuse an existing results folder unless ``overwrite`` (call before any work).

    Even with ``overwrite`` only an empty folder or a poslab results folder
    (a poslab ``manifest.json`` and nothing but poslab's files) is replaced, never the working folder or
    one of its parents.

    Also checks that the folder can be written there: its parents are
    created and a temporary folder is tried beside it, so a read-only
    location, a file in the path or a dangling symbolic link is refused before
    the analysis, with a message naming ``out``.

    Raises
    ------
    ResultsExistError
    OSError
        ``out`` cannot be created or replaced there (the message names it and the reason).
    """
    out = Path(os.path.abspath(out))  # normalise "new/../old": it must name what will be replaced
    if not out.exists():
        return check_can_create(out, what="results folder")
    if not overwrite:
        if out.is_dir() and any(out.iterdir()) and not _is_results_folder(out):
            raise ResultsExistError(f"{out} exists and is not a poslab results folder (it holds other files); "
                                    "choose another --out")
        raise ResultsExistError(f"results folder {out} exists; pass --overwrite to replace it, or choose another --out")
    if not out.is_dir():
        raise ResultsExistError(f"{out} exists and is not a folder; choose another --out")
    if Path.cwd().resolve().is_relative_to(out.resolve()):
        raise ResultsExistError(f"{out} is the current folder or one of its parents; choose another --out")
    if not _is_results_folder(out) and any(out.iterdir()):
        raise ResultsExistError(
            f"{out} is not empty and is not a poslab results folder (it holds files poslab does not write, "
            "or no poslab manifest.json); --overwrite only replaces poslab results. Choose another --out"
        )
    return check_can_create(out, what="results folder")


def _is_results_folder(folder: Path) -> bool:
    """True if ``folder`` holds only poslab outputs, with a poslab manifest."""
    try:
        meta = json.loads((folder / "manifest.json").read_text())
        names = {p.name for p in folder.iterdir()}
    except (OSError, ValueError):
        return False
    if not (isinstance(meta, dict) and {"study", "versions", "tables"} <= set(meta)):
        return False
    listed = [str(n) for n in (meta.get("tables") or []) + (meta.get("figures") or []) if isinstance(n, str)]
    known = {f"{t}.csv" for t in TABLES} | set(listed) | {"manifest.json"}
    if not names <= known | {f"{_FILE_TMP}{n}" for n in known}:  # a figure the manifest does not list
        _load_plots()
        known |= set(FIGURES)
    known |= {f"{_FILE_TMP}{n}" for n in known}  # a `poslab plot` killed while writing one file
    return names <= known


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "poslab": __version__}
    for name in _KEY_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def manifest(result: StudyResult, written_figures: list[str] | None = None,
             failed_figures: dict[str, str] | None = None, figures_left_out: dict[str, str] | None = None) -> dict:
    """What ``manifest.json`` records: study file, versions, platform, seeds, timings, figures (failed ones, and
    what a figure of a large study left out)."""
    spec = result.spec
    return {
        "study": spec.name,
        "study_file": spec.source,
        "study_text": spec.text,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": _versions(),
        "platform": {"system": platform.platform(), "machine": platform.machine(), "processor": platform.processor()},
        "n_positions": spec.n_positions,
        "dim": spec.dim,
        "max_distance": spec.max_distance,
        "seeds": list(spec.seeds),
        "analysis": spec.analysis.as_dict(),
        "stages": [{"name": stage.name, "settings": list(stage.settings())} for stage in build_stages(spec.analysis)],
        "runs": [{"label": r.label, "kind": r.encoding.kind, "params": r.encoding.params(), "seed": r.seed,
                  "n_positions": r.n_positions, "max_distance": r.max_distance} for r in spec.runs()],
        "failed_runs": result.summary.loc[result.summary["status"] != "ok", ["label", "seed", "message"]]
        .astype(object).where(lambda f: f.notna(), None).to_dict("records"),
        "timings_seconds": result.timings,
        "tables": [f"{t}.csv" for t in result.tables()],
        "figure_settings": spec.figures.as_dict(),
        "figures": written_figures or [],
        "failed_figures": failed_figures or {},
        "figures_left_out": figures_left_out or {},
    }


class FigureFailedWarning(UserWarning):
    """A figure could not be drawn; the tables it would show are written all the same."""


def write_figures(tables: dict[str, pd.DataFrame], folder, *, title: str | None = None,
                  failed: dict[str, str] | None = None, left_out: dict[str, str] | None = None,
                  progress: Progress | None = None, settings: FigureSettings | None = None,
                  stop: threading.Event | None = None, worker: _FigureWorker | None = None) -> list[Path]:
    """Draw the study figures from the tables alone into ``folder``.

    Each figure is drawn on its own: one that raises is skipped with a
    :class:`FigureFailedWarning` naming it (and recorded in ``failed``,
    file name -> message), the others are still drawn. Each file is written
    under a temporary name and renamed, so a failure never leaves half a PNG.
    A figure of a large study draws only its first labels
    (:data:`poslab.plots.core.MAX_PANELS` and friends): a
    :class:`~poslab.plots.core.FigureLimitWarning` names it, and ``left_out``
    (file name -> what was left out and which table holds it) records it.
    ``progress`` shows the figures as they are drawn (:mod:`poslab.study.progress`).

    ``settings`` (the study's ``[figures]``; default PNG at page width) picks the
    print width every figure is laid out at and the formats each is written in
    (``decay_curves.png`` beside ``decay_curves.pdf``).

    ``stop``, once set, ends the drawing after the figure under way (:func:`write_results` draws in a thread).
    ``worker`` (:func:`write_results` only): a :class:`_FigureWorker` drawing some of the figures in a second
    process; each figure is drawn by whichever of the two takes it first.

    Returns the written paths: none when no run succeeded (nothing to draw).
    The progress counts drawn figures out of those whose tables have rows
    (:data:`~poslab.plots.FIGURE_TABLES`): ``figures: 5/5``, or ``4/5`` when one failed.
    """
    _load_plots()
    progress = progress if progress is not None else Progress(False)
    with progress.task("figures", total=len(drawable(tables)), unit="figures") as task:
        return _draw_figures(tables, Path(folder), title, failed, left_out, task, settings or FigureSettings(), stop,
                             worker)


def drawable(tables: dict[str, pd.DataFrame]) -> list[str]:
    """The study figures whose tables are all there with rows (the others draw nothing: :func:`study_figure`)."""
    _load_plots()
    return [name for name, needs in FIGURE_TABLES.items()
            if all(tables.get(t) is not None and len(tables[t]) for t in needs)]


def _draw_figures(tables, folder: Path, title, failed, left_out, task, settings: FigureSettings,
                  stop: threading.Event | None = None, worker: _FigureWorker | None = None) -> list[Path]:
    expected = set(drawable(tables))
    drawn_by: dict[str, list[Path] | None] = {}  # file name -> its written paths, None: nothing to draw, []: failed

    def account(item, filename, drawn):
        drawn_by[filename] = drawn
        item.counted = bool(drawn)  # a failed figure is not counted: "4/5"
        if (drawn is None) == (filename in expected):  # nothing to draw after all, or drawn unexpectedly
            task.set_total(task.total + (1 if drawn is not None else -1))

    slowest = 0.0  # seconds, the longest figure drawn here: how long the worker may go without a report

    def draw_here(filename):
        nonlocal slowest
        start = time.perf_counter()
        with task.item(filename) as item:
            account(item, filename, _draw_figure(filename, STUDY_FIGURES[filename], tables, folder, title, failed,
                                                 left_out, settings, abandoned=stopped))
        slowest = max(slowest, time.perf_counter() - start)

    def drawn_there(reports):  # the figures the worker has drawn meanwhile
        for report in reports:
            with task.item(report["figure"]) as item:
                account(item, report["figure"], _replay(report, folder, failed, left_out))

    def stopped():
        return stop is not None and stop.is_set()

    if worker is None:
        for filename in STUDY_FIGURES:
            if stopped():
                break
            draw_here(filename)
    else:
        try:
            while not stopped() and (filename := worker.take()) is not None:
                draw_here(filename)
                drawn_there(worker.reports(block=False))
            patience = max(WORKER_PATIENCE[0], WORKER_PATIENCE[1] * slowest)
            drawn_there(worker.reports(block=True, stop=stop, patience=patience))  # until it has exited (or hung)
        finally:
            worker.kill()  # at once if this thread raised; else it has exited already
            worker.close()
        lost = [name for name in STUDY_FIGURES if name not in drawn_by]
        if lost and not stopped():  # the worker died: what it had taken is drawn here, and said
            warnings.warn(f"the figure worker process ended ({worker.status}) before drawing {', '.join(lost)}; "
                          "drawn in this process instead", RuntimeWarning, stacklevel=2)
            for filename in lost:
                if stopped():
                    break
                draw_here(filename)
    return [path for name in STUDY_FIGURES for path in drawn_by.get(name) or []]  # in the figures' order


def _replay(report: dict, folder: Path, failed, left_out) -> list[Path] | None:
    """A figure the worker drew, as if drawn here: its warnings given again, its failure and "left out" note
    recorded; its written paths (None: nothing to draw; []: it failed)."""
    categories = {c.__name__: c for c in (FigureFailedWarning, FigureLimitWarning, UserWarning, RuntimeWarning,
                                          FutureWarning, DeprecationWarning)}
    for category, message in report["warnings"]:
        warnings.warn(message, categories.get(category, UserWarning), stacklevel=3)
    if report["failed"] is not None and failed is not None:
        failed[report["figure"]] = report["failed"]
    if report["left_out"] is not None and left_out is not None:
        left_out[report["figure"]] = report["left_out"]
    return None if report["drawn"] is None else [folder / name for name in report["drawn"]]


#: How long the figure worker may go without reporting a figure, once this process has drawn its share, before
#: it is taken for hung and killed (its figures are then drawn here, with a warning): the larger of a floor
#: (seconds) and a multiple of the slowest figure drawn in this process.
WORKER_PATIENCE = (60.0, 10.0)


class _FigureWorker:
    """A process forked from this one that draws study figures beside it (:func:`write_results`, on Linux with a
    CPU free: :meth:`usable`).

    Forked, it shares the tables in memory (nothing is copied or pickled) and matplotlib already imported. The
    figures to draw are bytes in a pipe, one per figure: each process reads one at a time, so a figure is drawn by
    exactly one of them and the faster takes more. The worker writes its figures into the same folder, each under
    a temporary name renamed when complete (:func:`_draw_figure`), and reports each on a second pipe (the file
    names written, failure, "left out" note, warnings: JSON, one line a figure), which :func:`_draw_figures`
    reads between its own figures and finally until the worker exits. A worker that dies leaves its figures
    undone: they are drawn in this process, with a warning. It exits with this process (``PR_SET_PDEATHSIG``),
    dies at once on Ctrl-C or SIGTERM (default handlers) and is killed by :meth:`kill` on any error here, before
    the temporary folder is removed.
    """

    def __init__(self, tables, folder: Path, title, settings: FigureSettings):
        self.names = list(STUDY_FIGURES)
        todo_r, todo_w = os.pipe()
        os.write(todo_w, bytes(range(len(self.names))))
        os.set_blocking(todo_r, False)  # shared with the worker: an empty pipe means every figure is taken
        done_r, done_w = os.pipe()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # the worker: never returns
            code = 1
            try:
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(sig, signal.SIG_DFL)
                gc.freeze()  # collections leave the objects shared with this process alone (no copy on write)
                os.close(todo_w)
                os.close(done_r)
                _die_with_parent()
                if os.getppid() == parent:
                    _work(self.names, todo_r, done_w, tables, folder, title, settings, parent)
                code = 0
            finally:
                os._exit(code)
        os.close(todo_w)
        os.close(done_w)
        self.pid, self.todo, self.done = pid, todo_r, done_r
        self.buffer = b""
        self.heard = time.monotonic()  # when the worker last reported (or started)
        self.status: str | None = None  # how the worker ended, once it has
        self.lock = threading.Lock()

    def take(self) -> str | None:
        """The next figure to draw here; None when every figure is taken."""
        try:
            byte = os.read(self.todo, 1)
        except (BlockingIOError, OSError):
            return None
        return self.names[byte[0]] if byte else None

    def reports(self, *, block: bool, stop: threading.Event | None = None,
                patience: float | None = None) -> list[dict]:
        """The worker's reports received so far; with ``block``, every report until it exits (or ``stop``).

        A worker that has sent nothing for ``patience`` seconds since the later of its last report and this
        call (blocking only) is taken for hung (a lock held by another thread at the fork, say) and killed; the
        figures it had taken are then drawn here.
        """
        out, waiting_since = [], time.monotonic()
        while self.status is None:
            ready, _, _ = select.select([self.done], [], [], 0.25 if block else 0)
            if ready:
                chunk = os.read(self.done, 1 << 16)
                self.heard = time.monotonic()
                if not chunk:  # the worker has exited (or died)
                    self._reap()
                    break
                self.buffer += chunk
                *lines, self.buffer = self.buffer.split(b"\n")
                out.extend(json.loads(line) for line in lines)
            elif not block or (stop is not None and stop.is_set()):
                break
            elif patience is not None and time.monotonic() - max(self.heard, waiting_since) > patience:
                self._reap(kill=True)
                if self.status.startswith("killed"):  # not an exit that came just before the kill
                    self.status = f"killed: no figure reported for {patience:.0f} s"
        return out

    def _reap(self, kill: bool = False) -> None:
        with self.lock:
            if self.status is not None:
                return
            if kill:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            try:
                _, code = os.waitpid(self.pid, 0)
                self.status = (f"exit status {os.waitstatus_to_exitcode(code)}" if os.WIFEXITED(code)
                               else f"killed by {signal.Signals(os.WTERMSIG(code)).name}")
            except ChildProcessError:
                self.status = "gone"

    def close(self) -> None:
        """Close the pipes (by the thread that reads them: a number closed under it could name another file)."""
        for fd in (self.todo, self.done):
            try:
                os.close(fd)
            except OSError:
                pass

    def kill(self) -> None:
        """End the worker now and wait for it: no figure file appears after this returns."""
        self._reap(kill=True)

    @staticmethod
    def usable(tables) -> bool:
        """A worker pays: fork with a parent-death signal (Linux), a CPU free for it (2 CPUs or more, and other
        work keeping at most CPUs - 1.5 of them busy now, :func:`~poslab.study.runner.free_cpu`: on a machine already busy the
        worker only adds its ~0.3 s of start and copy-on-write, benchmarks/README.md), 2 figures or more to draw,
        and the caller is the main thread (the worker dies with the thread that forked it)."""
        if not (sys.platform.startswith("linux") and threading.current_thread() is threading.main_thread()
                and len(drawable(tables)) >= 2 and len(STUDY_FIGURES) < 256):  # a figure is a byte in the pipe
            return False
        return free_cpu()


def _die_with_parent() -> None:
    """Have the kernel kill this process when the thread that forked it ends (Linux ``prctl(PR_SET_PDEATHSIG)``)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def _work(names, todo: int, done: int, tables, folder: Path, title, settings, parent: int) -> None:
    """The figure worker's loop: take a figure, draw it, report it; until none is left or this process's parent
    has gone."""
    while os.getppid() == parent:
        try:
            byte = os.read(todo, 1)
        except BlockingIOError:
            return
        if not byte:
            return
        filename = names[byte[0]]
        failed, left_out = {}, {}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            drawn = _draw_figure(filename, STUDY_FIGURES[filename], tables, folder, title, failed, left_out,
                                 settings)
        report = {"figure": filename, "drawn": None if drawn is None else [path.name for path in drawn],
                  "failed": failed.get(filename), "left_out": left_out.get(filename),
                  "warnings": [(w.category.__name__, str(w.message)) for w in caught]}
        data = (json.dumps(report) + "\n").encode()
        while data:
            data = data[os.write(done, data):]


class _Drawing:
    """The study figures drawn in a thread while the main thread writes the tables (:func:`write_results`), and,
    where it pays, in a forked worker process too (:class:`_FigureWorker`).

    Matplotlib is used from this one thread only (figures are
    :class:`~matplotlib.figure.Figure` objects, no pyplot); the tables are
    only read. :meth:`result` waits for it (a signal's handler still runs
    in the waiting main thread) and returns the written paths or raises what
    the drawing raised outside a figure; :meth:`stop` kills the worker and ends the thread after the
    figure under way. Drawn in the calling thread when the caller is not the
    main thread (a notebook's worker thread, a server): nothing to overlap
    there that is worth a second thread.
    """

    def __init__(self, tables, folder: Path, title, failed, left_out, progress: Progress, settings):
        self.args = tables, folder, title, failed, left_out
        self.progress, self.settings = progress, settings
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.worker: _FigureWorker | None = None
        self.written: list[Path] = []
        self.error: BaseException | None = None

    def _run(self) -> None:
        tables, folder, title, failed, left_out = self.args
        try:
            self.written = write_figures(tables, folder, title=title, failed=failed, left_out=left_out,
                                         progress=self.progress, settings=self.settings, stop=self.stopping,
                                         worker=self.worker)
        except BaseException as exc:  # handed to the main thread
            self.error = exc

    def start_once(self) -> None:
        if self.thread is None and threading.current_thread() is threading.main_thread():
            tables, folder, title, _, _ = self.args
            if _FigureWorker.usable(tables):  # forked before this process starts a thread of its own
                self.worker = _FigureWorker(tables, folder, title, self.settings)
            self.thread = threading.Thread(target=self._run, name="poslab-figures", daemon=True)
            self.thread.start()

    def result(self) -> list[Path]:
        if self.thread is None:  # not the main thread: drawn here
            self._run()
        else:
            while self.thread.is_alive():
                self.thread.join(0.25)
                _signals.check()  # a Ctrl-C Python dropped is raised here (poslab._signals)
        if self.worker is not None:
            self.worker.kill()  # exited already, unless the drawing raised
        if self.error is not None:
            raise self.error
        return self.written

    def stop(self, wait: bool) -> None:
        self.stopping.set()
        if self.worker is not None:
            self.worker.kill()  # no figure file may appear in the temporary folder while it is removed
        if wait and self.thread is not None:
            self.thread.join()


def _draw_figure(filename, draw, tables, folder: Path, title, failed, left_out, settings,
                 abandoned=lambda: False) -> list[Path] | None:
    """Draw one figure into its files; the written paths, None when it has nothing to draw, [] when it failed.

    ``abandoned()`` true once the drawing was stopped (an error or Ctrl-C while the tables were written, and the
    temporary folder removed): a figure that then fails is not warned about, in whatever code runs by then."""
    _load_plots()
    import matplotlib

    paths = [folder / f"{PurePath(filename).stem}.{fmt}" for fmt in settings.formats]
    tmps = [path.with_name(f"{_FILE_TMP}{path.name}") for path in paths]  # the suffix picks the format
    try:
        with warnings.catch_warnings(record=True) as caught, matplotlib.rc_context(settings.rc):
            warnings.simplefilter("always")
            fig = draw(tables, title)
        for w in caught:  # passed on; a figure's "left out" note names the figure
            if issubclass(w.category, FigureLimitWarning):
                if left_out is not None:
                    left_out[filename] = str(w.message)
                warnings.warn(f"{filename} {w.message}", FigureLimitWarning, stacklevel=2)
            else:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        if fig is None:
            return None
        print_figure(fig, settings)
        with matplotlib.rc_context(settings.rc):
            for tmp in tmps:
                save_figure(fig, tmp, dpi=PRINT_DPI, close=False)
        for tmp, path in zip(tmps, paths):
            os.replace(tmp, path)
    except Exception as exc:  # a figure never costs the tables, nor the other figures
        for tmp in tmps:
            tmp.unlink(missing_ok=True)
        message = f"{type(exc).__name__}: {exc}"
        if abandoned():
            return []
        if failed is not None:
            failed[filename] = message
        warnings.warn(f"figure {filename} could not be drawn ({message}); the tables are written. "
                      "Redraw it with `poslab plot` once fixed", FigureFailedWarning, stacklevel=2)
        return []
    return paths


def _arrow_column(series: pd.Series):
    """One column as Arrow sees it: numbers, booleans and text as they are; an object column (encoding parameters:
    numbers, text, None mixed) as the text Python's ``str`` gives each value (what pandas writes), empty for NA."""
    import pyarrow as pa

    if series.dtype != object:
        return pa.array(series, from_pandas=True)
    values = [None if v is None or v is pd.NA or (isinstance(v, float) and v != v) else str(v)
              for v in series.to_numpy()]
    return pa.array(values, type=pa.string())


def write_csv(frame: pd.DataFrame, path) -> None:
    """Write one table as CSV (comma-separated, a header line, no index) with pyarrow's multi-threaded writer.

    Numbers keep full precision: each float is written as the shortest decimal that reads back to the same
    float64 (``read_results`` gives the same numbers, tested), integers as integers (a float with an integral
    value as ``3``, read back as a float through the declared dtype), NaN and NA as empty fields, booleans as
    ``true`` / ``false``, text in double quotes (RFC 4180). ~10x faster than ``DataFrame.to_csv``, which formats
    every float in Python (measured in benchmarks/README.md: 1,048,576 profile rows in ~0.9 s instead of ~8 s).
    """
    import pyarrow as pa
    import pyarrow.csv as pacsv

    table = pa.table({name: _arrow_column(frame[name]) for name in frame.columns})
    if table.num_rows < _CSV_SPLIT_ROWS or usable_cpus() < 2:
        pacsv.write_csv(table, str(path))
        return
    # a long table (10^6 profile rows): its second half is formatted by a second thread into a file beside (Arrow's
    # writer lets go of the GIL), then appended by the kernel (copy_file_range); each row's text does not depend
    # on the others, so the file is the one write_csv writes in one piece (tested)
    half = table.num_rows // 2
    rest = Path(path).with_name(f"{_FILE_TMP}rest-{Path(path).name}")
    from concurrent.futures import ThreadPoolExecutor

    try:
        with ThreadPoolExecutor(1, thread_name_prefix="poslab-csv") as pool:
            second = pool.submit(pacsv.write_csv, table.slice(half), str(rest),
                                 write_options=pacsv.WriteOptions(include_header=False))
            pacsv.write_csv(table.slice(0, half), str(path))
            second.result()
        with open(path, "ab") as out, open(rest, "rb") as src:
            _append(src, out)
    finally:
        rest.unlink(missing_ok=True)


def _append(src, out) -> None:
    """Append the file ``src`` to ``out`` (both open binary), by the kernel where it can."""
    out.flush()
    size = os.fstat(src.fileno()).st_size
    done = 0
    try:
        while done < size:
            n = os.copy_file_range(src.fileno(), out.fileno(), size - done)
            if n == 0:
                break
            done += n
    except (AttributeError, OSError):  # no copy_file_range here (another OS, a file system without it)
        src.seek(done)
        out.seek(0, os.SEEK_END)
        import shutil

        shutil.copyfileobj(src, out, 1 << 20)


#: Rows from which a table's CSV is written by two threads (:func:`write_csv`).
_CSV_SPLIT_ROWS = 1 << 19


def figure_title(summary: pd.DataFrame) -> str | None:
    """"study: n positions, distances up to max_distance" from the summary table (its successful runs: the ones a
    figure draws; all of them when none succeeded)."""
    if not len(summary):
        return None
    drawn = summary[summary["status"] == "ok"] if "status" in summary else summary
    summary = drawn if len(drawn) else summary  # a failed run draws no curve: its window is not named
    first = summary.iloc[0]
    if summary["n_positions"].nunique() > 1:  # some entries analyse a shorter window
        return (f"{first['study']}: up to {summary['n_positions'].max()} positions, distances up to "
                f"{summary['max_distance'].max()} (shorter windows: {', '.join(map(str, sorted(summary['n_positions'].unique())[:-1]))})")
    return f"{first['study']}: {first['n_positions']} positions, distances up to {first['max_distance']}"


def write_results(result: StudyResult, out, *, overwrite: bool = False, progress: Progress | None = None) -> Path:
    """Write the tables, figures and manifest of ``result`` to the folder ``out``.

    The figures are drawn from the tables in memory, in a second thread, while this one writes the CSV tables
    (from ``summary.csv`` on): at 10^6 distances the ~0.6 s of CSV, and for a 100-run sweep its ~12 s, hide behind
    the figures. Where a CPU is free (Linux), a forked worker process draws some of the figures at the same time
    (:class:`_FigureWorker`: whichever of the two takes a figure first draws it; a worker that dies costs nothing
    but a warning, its figures are drawn here). A figure that fails is recorded and never costs a table; an
    error, Ctrl-C or SIGTERM kills the worker, stops the drawing and removes the temporary folder.

    Parameters
    ----------
    result : StudyResult
    out : str or Path
        The results folder (created; its parent too).
    overwrite : bool
        Replace an existing folder. Without it an existing folder is an error.
    progress : Progress, optional
        Shows the tables and the figures as they are written (:mod:`poslab.study.progress`).

    Returns
    -------
    Path of the written folder.

    Raises
    ------
    ResultsExistError
        ``out`` exists and ``overwrite`` is False, or it is not a poslab
        results folder (see :func:`check_writable`). Nothing is written.
    """
    _load_plots()
    out = check_writable(out, overwrite=overwrite)
    # full collections skip the tables and the modules' objects; numpy's new arrays on small pages (runner.py)
    with old_objects_frozen(), short_gil_turns(), small_pages():
        return _write_results(result, out, overwrite, progress)


def _write_results(result: StudyResult, out: Path, overwrite: bool, progress: Progress | None) -> Path:
    tables = result.tables()
    progress = progress if progress is not None else Progress(False)
    failed: dict[str, str] = {}
    left_out: dict[str, str] = {}
    with AtomicFolder(out, what="results folder") as folder:
        drawing = _Drawing(tables, folder.path, figure_title(tables["summary"]), failed, left_out, progress,
                           result.spec.figures)
        try:
            # the figures are drawn in a thread while this one writes the tables (Arrow's CSV writer releases the
            # GIL), from summary.csv on; a figure never costs a table, whatever it raises
            for name, frame in progress.iterate("tables", tables.items(), unit="tables",
                                                label=lambda t: f"{t[0]}.csv"):
                write_csv(frame, folder.path / f"{name}.csv")
                drawing.start_once()
            drawing.start_once()
            figures = drawing.result()
            meta = manifest(result, [p.name for p in figures], failed, left_out)
            (folder.path / "manifest.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
        except OSError as exc:  # a full disk, a file size limit: name the user's folder, not the temporary
            drawing.stop(wait=True)  # no figure file may appear in the temporary folder while it is removed
            raise friendly_os_error(exc, out, "results folder") from None
        except BaseException:
            drawing.stop(wait=not isinstance(sys.exc_info()[1], (KeyboardInterrupt, SystemExit)))  # Ctrl-C: at once
            raise
        # again just before the swap: the folder may have appeared meanwhile
        folder.commit(check=lambda: check_writable(out, overwrite=overwrite))
    return out


def read_manifest(folder) -> dict:
    """The ``manifest.json`` of a results folder.

    Raises
    ------
    FileNotFoundError
        No manifest.json: not a poslab results folder.
    ValueError
        It is not valid JSON, or not a poslab manifest (the message says what to do).
    """
    path = Path(folder) / "manifest.json"
    if not path.is_file():
        try:  # results/ itself, say: name the results folders inside it
            inside = sorted(p.name for p in Path(folder).iterdir() if (p / "manifest.json").is_file())
        except OSError:
            inside = []
        hint = (f"; the results folders in it are {', '.join(inside[:3])}{', ...' if len(inside) > 3 else ''}"
                if inside else "")
        raise FileNotFoundError(f"{folder} is not a poslab results folder (no manifest.json){hint}; give the folder "
                                "poslab run wrote (--out, default results/<study name>)")
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path} is not UTF-8 text ({exc.reason}); run the study again to rewrite it") from None
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); it was edited or truncated: run the study again "
                         "to rewrite it") from None
    if not isinstance(meta, dict) or not {"study", "tables"} <= set(meta):
        raise ValueError(f"{path} is not a poslab manifest (no study / tables entries); run the study again")
    return meta


def figure_settings(meta: dict, where: str = "manifest.json") -> FigureSettings:
    """The ``[figures]`` settings a results folder was drawn with (its manifest's ``figure_settings``; the defaults
    for a folder written before they were recorded). Raises ValueError naming the bad value."""
    _load_plots()
    from .spec import parse_figures

    raw = meta.get("figure_settings")
    if raw is None:
        return FigureSettings()
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: figure_settings must be a table of formats and width, got {raw!r}; run the "
                         "study again to rewrite it")
    return parse_figures({k: v for k, v in raw.items() if k != "width_inches"}, f"{where}: figure_settings")


def record_figures(folder, figures: list[str], failed: dict[str, str], left_out: dict[str, str] | None = None) -> None:
    """Rewrite the ``figures``, ``failed_figures`` and ``figures_left_out`` entries of manifest.json atomically."""
    path = Path(folder) / "manifest.json"
    meta = read_manifest(folder)
    meta["figures"], meta["failed_figures"], meta["figures_left_out"] = list(figures), dict(failed), dict(left_out or {})
    tmp = path.with_name(f"{_FILE_TMP}manifest.json")
    try:
        tmp.write_text(json.dumps(meta, indent=2, default=str) + "\n", encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_results(folder) -> dict[str, pd.DataFrame]:
    """Read the CSV tables of a results folder back, with their dtypes.

    Returns
    -------
    dict mapping table name (``summary``, ``profiles``, ``decay_metrics``,
    ``bands``, ``heatmaps``) to DataFrame.

    Raises
    ------
    FileNotFoundError
        ``folder`` is not a poslab results folder, or lacks a table its study
        wrote (the message names it and the figures drawn from it).
    ValueError
        manifest.json is broken, or a table cannot be parsed, lacks its key
        columns or holds text where numbers belong.
    """
    folder = Path(folder)
    listed = read_manifest(folder).get("tables") or []
    extra = [Path(n).stem for n in listed if isinstance(n, str) and n.endswith(".csv") and Path(n).stem not in TABLES]
    missing = [name for name in (*TABLES, *extra) if not (folder / f"{name}.csv").is_file()]
    if missing:  # every table the study wrote, whichever figure reads it: one rule (README, poslab plot)
        _load_plots()  # to name the figures drawn from each
        def lacks(name):
            figures = [f for f, needs in FIGURE_TABLES.items() if name in needs]
            return f"{name}.csv" + (f" ({', '.join(figures)} {'is' if len(figures) == 1 else 'are'} drawn from it)"
                                    if figures else "")
        raise FileNotFoundError(f"results folder {folder} lacks {'; '.join(map(lacks, missing))}, which its study "
                                "wrote (manifest.json lists it): restore it, or run the study again")
    out = {}
    for name in (*TABLES, *extra):
        path = folder / f"{name}.csv"
        try:
            frame = pd.read_csv(path, low_memory=False)
        except (ValueError, pd.errors.ParserError) as exc:
            raise ValueError(f"cannot read {path}: {exc}; run the study again") from None
        table = SCHEMA.get(name)
        lacking = [c for c in (schema.required(table) if table else schema.RUN_ID)
                   if c not in frame.columns]
        if lacking and len(frame):  # a study whose runs all failed has empty tables
            raise ValueError(f"{path} lacks column(s) {', '.join(lacking)}; it is not a poslab table. Run the study again")
        if table is not None:
            schema.cast(frame, table, where=str(path))
        elif "seed" in frame.columns:
            frame["seed"] = frame["seed"].astype("Int64")
        out[name] = frame
    return out
