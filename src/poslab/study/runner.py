"""Run a study: every run through the analysis pipeline, into tidy tables.

A failed run becomes a ``summary`` row with ``status = "failed"`` and the
error message; the study goes on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import math
import os
import sys
import threading
import time
import warnings

import numpy as np
import pandas as pd

from ..analysis import BandMetrics, BlockSimilarity, DecayFits, SimilarityProfile
from ..analysis.bootstrap import BootstrapResult
from ..analysis.heatmap import _block_similarity
from .._threads import usable_cpus
from ..analysis.properties import Properties, table_properties
from ..stages import SUMMARY, TABLES as SCHEMA, RunContext, build_stages
from ..stages.schema import RUN_ID, finalize, undeclared
from .comparison import compare_runs
from .executors import map_unordered
from .progress import Progress
from .spec import AnalysisOptions, Run, StudySpec

__all__ = ["RunAnalysis", "StudyResult", "add_keys", "analyse_table", "execute_run", "run_study", "TABLES"]

#: The tables written for every study, even when empty, in the order they are written.
TABLES = tuple(name for name, table in SCHEMA.items() if table.always)


@dataclasses.dataclass(frozen=True)
class RunAnalysis:
    """Everything the pipeline measures on one table."""

    profile: SimilarityProfile
    bands: BandMetrics
    fits: DecayFits
    blocks: BlockSimilarity
    table_dim: int
    envelope_fits: DecayFits | None = None
    bootstrap: BootstrapResult | None = None
    properties: Properties | None = None


def analyse_table(table, *, max_distance: int, options: AnalysisOptions = AnalysisOptions(),
                  seed: int | None = None) -> RunAnalysis:
    """Profile, band metrics, decay fits, bootstrap intervals, properties and block heatmap of one table.

    The values the stages of a study run compute from (:class:`poslab.stages.RunContext`), without the tables.

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
    max_distance : int
        Largest distance of the profile (< n_positions).
    options : AnalysisOptions
        The analysis settings (a study's ``[analysis]``; defaults: 200
        resamples at 0.95, every decay model, ...).
    seed : int, optional
        The run's seed: the anchor-block bootstrap uses
        ``default_rng((options.bootstrap_seed, seed or 0))``, so results are reproducible.

    Returns
    -------
    RunAnalysis
        ``envelope_fits`` is set when the profile oscillates
        (:func:`poslab.analysis.decay.oscillates`) and has a decay to fit;
        ``bootstrap`` is None when ``n_resamples`` is 0.

    Notes
    -----
    Cost at n positions, dim d, up to distance n − 1: the profile's FFTs
    O(d · n log n), the anchor-block sums O(d · n · (log(n / 32) + 32)), the
    fits on at most 4096 points (bins beyond, see
    :mod:`poslab.analysis.decay`), the resamples O(n_resamples · n) time in
    chunks of distances (:func:`poslab.analysis.bootstrap.bootstrap_units`) and the
    properties O(d · n · 64)-ish with their entry budget
    (:mod:`poslab.analysis.properties`). Measured at n = 131072, dim 128:
    ~7-8 s and 0.7 GiB peak per run (benchmarks/README.md, benchmarks/pipeline.py).
    """
    table = np.asarray(table)
    ctx = RunContext(None, n_positions=len(table), max_distance=max_distance, dim=np.shape(table)[1],
                     options=options, seed=seed, table=table)
    blocks = _block_similarity(ctx.units, options.heatmap_bins)
    props = table_properties(ctx.units, ctx.profile)
    return RunAnalysis(ctx.profile, ctx.bands, ctx.fits, blocks, ctx.table_dim, ctx.envelope_fits, ctx.bootstrap,
                       props)


@dataclasses.dataclass(frozen=True)
class StudyResult:
    """The tables of a finished study plus what the manifest records.

    Attributes
    ----------
    spec : StudySpec
    frames : dict of pandas.DataFrame
        Every table by name: the common ones (:data:`TABLES`: ``summary``,
        ``profiles``, ``decay_metrics``, ``bands``, ``heatmaps``, also
        reachable as attributes) and those stages add for some runs (e.g.
        ``inv_freq``). docs/tables.md describes every column.
    timings : dict
        Seconds per run label/seed and in total.
    """

    spec: StudySpec
    frames: dict
    timings: dict

    def __getattr__(self, name):
        frames = self.__dict__.get("frames", {})
        if name in frames:
            return frames[name]
        raise AttributeError(name)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Tables to write: the common ones always, the others when they have rows."""
        return {name: frame for name, frame in self.frames.items() if name in TABLES or len(frame)}


def _keys(spec: StudySpec, run: Run, param_names: list[str]) -> dict:
    params = run.encoding.params()
    keys = {"study": spec.name, "label": run.label, "kind": run.encoding.kind}
    keys.update({p: params.get(p) for p in param_names})
    keys["seed"] = run.seed
    return keys


def _key_column(name: str, value, n: int):
    """``value`` repeated ``n`` times, with the dtype pandas gives the scalar broadcast over ``n`` rows; the seed
    as the nullable integers its table declares (schema ``KEYS``: ``Int64``, empty for a deterministic encoding).

    Text is repeated by Arrow (one buffer copy) instead of pandas' broadcast of a Python string (about half the
    time at 10^6 rows), the same ``str`` column. The seed is made ``Int64`` here rather than by
    :func:`~poslab.stages.schema.finalize`, which would convert 10^6 Python ``None`` one by one (~0.1 s)."""
    if name == "seed" and (value is None or isinstance(value, (int, np.integer))):
        return pd.arrays.IntegerArray(np.full(n, 0 if value is None else value, dtype=np.int64),
                                      np.full(n, value is None))
    if isinstance(value, str):
        dtype = _text_dtype()
        if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow":
            import pyarrow as pa

            return pd.array(pa.repeat(pa.scalar(value, pa.large_string()), n), dtype=dtype)
    return value  # numbers and None: broadcast by pandas, already fast


@functools.cache
def _text_dtype():
    """The dtype pandas gives a text scalar broadcast over rows (pandas 3: ``str``, Arrow-backed when pyarrow is
    installed); looked up once, not once per key column (~0.5 ms each, a few hundred per study)."""
    return pd.Series(["text"]).dtype


def _with_keys(frame: pd.DataFrame, keys: dict) -> pd.DataFrame:
    """``frame`` after columns holding the run's ``keys`` (name -> scalar) on every row (a new frame: ``frame``
    is left as it was); one concatenation, not one insertion per key (half the time)."""
    n = len(frame)
    front = pd.DataFrame({name: _key_column(name, value, n) for name, value in keys.items()},
                         index=pd.RangeIndex(n))
    return pd.concat([front, frame.reset_index(drop=True)], axis=1)


class _ProcessWide:
    """A process-wide interpreter setting made on the first of nested or concurrent entries and undone on the last
    exit: ``make()`` applies it and returns what ``undo`` needs, or None to leave the process alone."""

    def __init__(self, make, undo):
        self._make, self._undo = make, undo
        self._lock = threading.Lock()
        self._depth, self._state = 0, None

    @contextlib.contextmanager
    def __call__(self):
        with self._lock:
            if self._depth == 0:
                self._state = self._make()
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._state is not None:
                    self._undo(self._state)
                    self._state = None


def _freeze():
    if gc.get_freeze_count():  # the process froze objects itself (a server before forking): left alone
        return None
    gc.freeze()
    return True


#: Leave the objects that exist on entry out of the garbage collector's full collections until exit.
#:
#: A full collection visits every tracked object: after ``poslab run``'s imports (pandas, scipy, matplotlib)
#: about 150,000 of them, 0.15-0.25 s a collection on a 2-CPU machine, which the allocations of a run at 10^6
#: distances and of its figures trigger two or three times (holding the GIL). Frozen (:func:`gc.freeze`), those
#: objects are skipped; objects made meanwhile are collected as usual, so a run's own reference cycles are
#: freed; on exit they are unfrozen (:func:`gc.unfreeze`), and an object that became garbage meanwhile is
#: collected by the next full collection. Nested and concurrent uses freeze once, unfreeze on the last exit;
#: a process that froze objects itself (``gc.get_freeze_count()``) is left alone.
old_objects_frozen = _ProcessWide(_freeze, lambda _: gc.unfreeze())

#: Seconds a thread may hold the GIL while another waits for it (:func:`short_gil_turns`; Python's default 0.005).
GIL_TURN = 0.0005


def _shorten_turns() -> float:
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(GIL_TURN, before))
    return before


#: Let a thread that waits for the GIL get it after :data:`GIL_TURN` seconds instead of Python's 5 ms, until exit.
#:
#: A thread that calls numpy many times (the kernel properties' ~500 calls of ~1 ms each, beside the later
#: stages) needs the GIL again after every call; a thread running Python code meanwhile (the decay fits, the
#: figures' import, a figure) keeps it for the switch interval, up to 5 ms, each time: the properties took
#: 2-3x their CPU time in wall time and the main thread waited for them. Nothing computed depends on it (only
#: when threads take turns). Nested and concurrent uses set it once and restore it on the last exit.
short_gil_turns = _ProcessWide(_shorten_turns, sys.setswitchinterval)


def _madvise_hugepage():
    try:
        from numpy._core import multiarray  # numpy >= 2
    except ImportError:  # pragma: no cover - numpy 1.26
        from numpy.core import multiarray
    return multiarray._set_madvise_hugepage


def _small_pages():
    return True if _madvise_hugepage()(False) else None  # numpy's setting before; None if it was off already


#: Let numpy's new arrays be backed by small (4 KiB) pages, not transparent huge pages, until exit.
#:
#: numpy asks the kernel for huge pages for every array of 4 MiB or more (``madvise(MADV_HUGEPAGE)``, the same as
#: ``NUMPY_MADVISE_HUGEPAGE=0`` switches off). Where the kernel then compacts memory to find them when a page is
#: first touched (transparent_hugepage/defrag ``madvise``, a common default) that costs more than it saves: on a
#: 2-CPU VM ~4 CPU-s of system time per GiB touched for the first time against ~0.55 with small pages, and a run of
#: 2^20 positions x dim 128 touches a few GiB (system time 20 against 5-6 s under load; the 1 GiB random table
#: alone 7 against 3 CPU-s), its user time no higher (benchmarks/README.md). Nothing computed depends on it.
small_pages = _ProcessWide(_small_pages, lambda _: _madvise_hugepage()(True))


def free_cpu() -> bool:
    """Whether a second CPU is free for this process now: 2 usable CPUs or more, and other work keeping at most
    CPUs - 1.5 of them busy (:func:`_busy_cpus`). Work put beside the main thread (a run's kernel-only stages,
    the figure worker) only pays then: on a busy machine it adds its memory and switching and gains nothing."""
    cpus = usable_cpus()
    return cpus >= 2 and _busy_cpus() <= cpus - 1.5


def _busy_cpus(samples: int = 5) -> float:
    """How many CPUs other processes keep busy now: the runnable threads in ``/proc/loadavg`` (its fourth field,
    ``running/total``) less this process's own (``/proc/self/task/*/stat``, state R: e.g. ``poslab run``'s
    thread importing the figures, and this reading thread), averaged over a few samples a millisecond apart.

    An instant count rather than the load average: the load average of the last minute still holds the work of
    an earlier run that has ended (back-to-back ``poslab run`` commands would each find the machine busy with
    their predecessor). Unreadable: every CPU counted busy (nothing beside).
    """
    counts = []
    for i in range(samples):
        try:
            with open("/proc/loadavg") as f:
                running = int(f.read().split()[3].split("/")[0])
            counts.append(max(running - _own_running(), 0))
        except (OSError, IndexError, ValueError):
            return math.inf
        if i + 1 < samples:
            time.sleep(0.001)
    return sum(counts) / len(counts)


def _own_running() -> int:
    """This process's runnable threads (at least 1: the caller)."""
    own = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat") as f:
                own += f.read().rsplit(")", 1)[1].split()[0] == "R"
        except (OSError, IndexError):
            continue
    return max(own, 1)


class StageOutputError(RuntimeError):
    """A stage wrote a table or column its declaration does not have (a bug in the stage)."""


def _check_output(stage, out) -> None:
    """Refuse what a stage did not declare: the schema is the truth about every table."""
    extra = [c for c in out.summary if not stage.may_write(c, SUMMARY)]
    if extra:
        raise StageOutputError(f"stage {stage.name} wrote summary column(s) {', '.join(extra)} it does not "
                               "declare; add them to its summary")
    declared = {t.name: t for t in stage.tables}
    for name, frame in out.tables.items():
        if name not in declared:
            raise StageOutputError(f"stage {stage.name} wrote a table {name} it does not declare; add it to its tables")
        extra = undeclared(frame, declared[name])
        if extra:
            raise StageOutputError(f"stage {stage.name} wrote column(s) {', '.join(extra)} of {name} that its "
                                   "declaration lacks")


class _Beside:
    """A stage computed in a daemon thread beside the later stages (:attr:`poslab.stages.Stage.kernel_only`)."""

    def __init__(self, stage, ctx: RunContext):
        self.out, self.error, self.seconds = None, None, 0.0
        self.thread = threading.Thread(target=self._compute, args=(stage, ctx), name=f"poslab-{stage.name}",
                                       daemon=True)  # never holds up the end of the process (Ctrl-C)
        self.thread.start()

    def _compute(self, stage, ctx) -> None:
        start = time.perf_counter()
        try:
            self.out = stage.compute(ctx)
        except BaseException as exc:  # raised again by result(), in the run's thread
            self.error = exc
        self.seconds = time.perf_counter() - start

    def result(self):
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.out


def execute_run(spec: StudySpec, run: Run, param_names: list[str], progress: Progress | None = None, *,
                keyed: bool = True, beside: bool = False) -> dict[str, pd.DataFrame]:
    """Generate one run's table and run every stage of the pipeline on it; return its rows of every table.

    Never raises for a failing encoding or stage: the run then has only a
    ``summary`` row with ``status = "failed"`` and the error message.
    A plain function of plain data, so any executor can run it.

    ``keyed=False`` leaves the run's keys out of every table but ``summary``
    (:func:`add_keys` puts them in): a worker process then sends back only
    what the run computed, not ~10^6 copies of its label (at 10^6 distances,
    80 of 140 MiB and most of the time to pickle them).

    ``progress`` (in this process only) shows the run's stages as they go, with the costly steps inside them
    (:class:`poslab.study.progress.Progress`): the run is a task whose items are its encoding and its stages.

    ``beside`` (a study of one run, nothing else to keep the CPUs busy): the stages that a kernel run computes
    from its kernel alone (:attr:`poslab.stages.Stage.kernel_only`: the block heatmap, the properties) run in a
    second thread beside the later stages; their rows and the run's tables are the same, in the same order, and
    their progress lines come after the last stage's, with the seconds they took beside it.
    """
    keys = _keys(spec, run, param_names)
    t0 = time.perf_counter()
    row = dict(keys, n_positions=run.n_positions, max_distance=run.max_distance, table_dim=pd.NA,
               center=spec.analysis.center, status="ok", message="")
    name = run.label if run.seed is None else f"{run.label} seed {run.seed}"
    ctx = RunContext(run.encoding, n_positions=run.n_positions, max_distance=run.max_distance, dim=spec.dim,
                     options=spec.analysis, seed=run.seed)
    stages = build_stages(spec.analysis)
    if progress is not None and progress.enabled:
        ctx.progress = progress
    else:
        progress = Progress(False)
    outputs, not_applicable, aside = [], {}, []
    try:
        with warnings.catch_warnings(record=True) as caught, \
                progress.task(name, total=len(stages) + 1, unit="stages", each=True) as task:
            warnings.simplefilter("always")
            try:
                with task.item("encoding"):
                    if ctx.kernel is None:  # generated first: a failing encoding fails the run before any stage
                        ctx.table
                for i, stage in enumerate(stages):
                    ctx.pending = stages[i:]
                    why = stage.not_applicable(ctx)
                    if why is not None:  # its columns stay empty; the row says which stages and why
                        not_applicable.setdefault(why, []).append(stage.name)
                        task.advance()
                    elif not stage.applies(ctx):
                        task.advance()
                    elif beside and stage.kernel_only and ctx.kernel is not None:
                        aside.append((len(outputs), stage, _Beside(stage, ctx)))
                        outputs.append(None)  # its place: the rows keep the stage order
                    else:
                        with task.item(stage.name):
                            out = stage.compute(ctx)
                        _check_output(stage, out)
                        outputs.append(out)
                for index, stage, job in aside:
                    with task.item(stage.name):
                        outputs[index] = job.result()
                        task.detail(f"beside the later stages {job.seconds:.1f} s")
                    _check_output(stage, outputs[index])
            finally:
                for _, _, job in aside:  # a failed stage: the others end before the run's row is made
                    job.thread.join()
    except Exception as exc:  # a failed run is a row, not a crash
        row.update(status="failed", message=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - t0)
        return {"summary": pd.DataFrame([row])}
    finally:
        for w in caught:  # say which run a warning comes from
            warnings.warn(f"{name}: {w.message}", w.category, stacklevel=2)
    row["table_dim"] = pd.NA if ctx.table_dim is None else ctx.table_dim
    tables: dict[str, list[pd.DataFrame]] = {}
    notes = []
    for out in outputs:
        row.update(out.summary)
        notes += [out.note] if out.note else []
        for table, frame in out.tables.items():
            tables.setdefault(table, []).append(frame)
    skipped = [f"{why} ({', '.join(names)})" for why, names in not_applicable.items()]
    notes += skipped
    row["not_applicable"] = "; ".join(skipped) or None
    row["message"] = "; ".join(notes)
    row["seconds"] = time.perf_counter() - t0
    result = {"summary": pd.DataFrame([row])}
    for table, frames in tables.items():
        result[table] = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    return add_keys(result, spec, run, param_names) if keyed else result


def add_keys(frames: dict[str, pd.DataFrame], spec: StudySpec, run: Run, param_names: list[str]
             ) -> dict[str, pd.DataFrame]:
    """The tables of :func:`execute_run` ``(keyed=False)`` with the run's keys in front of every one but ``summary``
    (which has them): the run identifier in tables by distance, position or block, every key in the others."""
    keys = _keys(spec, run, param_names)
    short = {k: keys[k] for k in RUN_ID}  # tables by distance, position, block: the parameters are in summary
    return {table: frame if table == "summary" else
            _with_keys(frame, short if SCHEMA[table].keys == "short" else keys) for table, frame in frames.items()}


def _lost_run(spec: StudySpec, run: Run, param_names: list[str], error: BaseException) -> dict[str, pd.DataFrame]:
    """The ``failed`` summary row of a run whose executor lost it (a worker died, a result could not be sent)."""
    row = dict(_keys(spec, run, param_names), n_positions=run.n_positions, max_distance=run.max_distance,
               table_dim=pd.NA, center=spec.analysis.center, status="failed",
               message=f"{type(error).__name__}: {error}", seconds=np.nan)
    return {"summary": pd.DataFrame([row])}


def run_study(spec: StudySpec, *, progress: bool | Progress = True, executor: str = "processes",
              jobs: int | None = None, scheduler: str | None = None) -> StudyResult:
    """Run every run of ``spec`` and collect the tables.

    The tables are the same whichever executor ran the runs: results are put
    back in run order, each run draws from its own seed, warnings from
    workers are re-issued here (prefixed with the run), and a run whose
    worker failed becomes a ``failed`` summary row.

    Parameters
    ----------
    spec : StudySpec
    progress : bool or Progress
        Report on stderr where the study is (:mod:`poslab.study.progress`: a
        bar on a terminal, plain lines on a pipe or with ``CI`` set): the
        runs as they complete, or, for a study of one run executing in this
        process, its stages with the steps inside them (runs in worker
        processes report only when they finish); then the cross-run
        comparison. False: nothing.
    executor : {"processes", "serial", "dask"}
        A local process pool (default), this process, or a Dask cluster; see
        :mod:`poslab.study.executors`.
    jobs : int, optional
        Worker processes of the pool or of a local Dask cluster (default: the
        usable CPUs; even 1 runs in a worker process, so Ctrl-C and SIGTERM act at once).
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``) for
        ``executor="dask"``; a local cluster is started when omitted.

    Returns
    -------
    StudyResult
    """
    # full collections skip the imported modules' objects; numpy's new arrays on small pages
    with old_objects_frozen(), short_gil_turns(), small_pages():
        return _run_study(spec, progress, executor, jobs, scheduler)


def _run_study(spec: StudySpec, progress, executor: str, jobs: int | None, scheduler: str | None) -> StudyResult:
    runs = spec.runs()
    param_names: list[str] = []
    for enc in spec.encodings:
        param_names += [p for p in enc.params() if p not in param_names]
    start = time.perf_counter()
    outcomes = [None] * len(runs)
    progress = progress if isinstance(progress, Progress) else Progress(bool(progress))
    beside = len(runs) == 1 and free_cpu()  # one run, a CPU free: its kernel-only stages in a second thread
    if len(runs) == 1 and executor == "serial" and progress.enabled:  # in this process: its stages, as they go
        work = functools.partial(execute_run, spec, param_names=param_names, progress=progress, keyed=False,
                                 beside=beside)
        for index, outcome in map_unordered(work, runs, executor=executor):
            outcomes[index] = outcome
    else:
        work = functools.partial(execute_run, spec, param_names=param_names, keyed=False, beside=beside)
        with progress.task("runs", total=len(runs), unit="runs") as task:
            for index, outcome in map_unordered(work, runs, executor=executor, jobs=jobs, scheduler=scheduler):
                outcomes[index] = outcome
                run = runs[index]
                task.advance(item=run.label if run.seed is None else f"{run.label} seed {run.seed}")
    collected: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
    timings: dict[str, float] = {}
    for run, outcome in zip(runs, outcomes):  # in run order, whatever order they completed in
        outcome.reissue()  # the run's warnings (already prefixed with its name), here in this process
        frames = add_keys(outcome.value, spec, run, param_names) if outcome.error is None \
            else _lost_run(spec, run, param_names, outcome.error)
        for name, frame in frames.items():
            collected.setdefault(name, []).append(frame)
        timings[run.label if run.seed is None else f"{run.label} [seed {run.seed}]"] = float(
            frames["summary"]["seconds"].iloc[0])
    timings["total"] = time.perf_counter() - start
    with progress.task("comparison"):
        tables = {name: finalize(frames, SCHEMA[name], param_names, spec.analysis)
                  for name, frames in collected.items()}
        tables.update(compare_runs(tables, spec))  # cross-run: seed bootstrap, comparison tables
    return StudyResult(spec=spec, frames=tables, timings=timings)
