"""Executors: map one function over a study's runs, in this process, a local process pool or on Dask.

Every executor yields ``(index, outcome)`` pairs as work completes, in any
order; the runner puts results back in run order, so tables do not depend on
the executor. A run carries its own seed, so its numbers do not either.
Warnings raised while a run executes are recorded where it ran and re-issued
in the calling process (with their category), so a warning from a worker is
reported like one from a serial run.

Executors
---------
``serial``
    One run after the other in this process.
``processes`` (default)
    A local :class:`concurrent.futures.ProcessPoolExecutor` with ``jobs``
    workers (default: the CPUs this process may use). Workers are forked on
    Linux, so encodings defined or registered at run time (in a script or a
    notebook) are available to them; elsewhere they are spawned and such
    encodings must be importable.
``dask``
    A Dask cluster through :class:`dask.distributed.Client`: the scheduler at
    ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``), or a
    :class:`~dask.distributed.LocalCluster` of ``jobs`` single-threaded
    worker processes when no address is given. Needs the optional extra
    ``poslab[dask]``; workers need poslab installed and any table files the
    study reads at the same paths.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import multiprocessing
import os
import sys
import warnings
from typing import Any, Callable, Iterator, Sequence

__all__ = ["EXECUTORS", "Outcome", "map_unordered", "default_jobs"]

#: Names accepted by ``run_study(executor=...)`` and ``poslab run --executor``.
EXECUTORS = ("serial", "processes", "dask")


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What one call produced: its value or the exception it raised, and the warnings it issued.

    Attributes
    ----------
    value : object
        The function's return value (None if it raised).
    error : BaseException or None
        The exception, if the call (or the executor running it) failed.
    warnings : tuple of (type, str)
        Category and message of each warning, in the order issued.
    """

    value: Any = None
    error: BaseException | None = None
    warnings: tuple[tuple[type, str], ...] = ()

    def reissue(self) -> None:
        """Issue the recorded warnings again in the calling process."""
        for category, message in self.warnings:
            warnings.warn(message, category, stacklevel=2)


def _record(func: Callable, item) -> Outcome:
    """Call ``func(item)`` where the work runs, recording its warnings and any exception."""
    value, error = None, None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = func(item)
        except Exception as exc:
            error = exc
    return Outcome(value=value, error=error, warnings=tuple((w.category, str(w.message)) for w in caught))


def default_jobs() -> int:
    """Number of CPUs this process may use (``os.sched_getaffinity`` where available)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def map_unordered(func: Callable, items: Sequence, *, executor: str = "processes", jobs: int | None = None,
                  scheduler: str | None = None) -> Iterator[tuple[int, Outcome]]:
    """Call ``func(item)`` for every item; yield ``(index, Outcome)`` as calls complete.

    Parameters
    ----------
    func : callable
        A picklable function of one argument (a module-level function or a
        :func:`functools.partial` of one) for ``processes`` and ``dask``.
    items : sequence
        Arguments, one call each.
    executor : {"serial", "processes", "dask"}
        Where calls run (module docstring).
    jobs : int, optional
        Worker processes for ``processes`` and a local Dask cluster (default
        :func:`default_jobs`). ``processes`` with one job, or one item, runs
        serially in this process.
    scheduler : str, optional
        Address of a running Dask scheduler; only with ``executor="dask"``.

    Yields
    ------
    (int, Outcome)
        The item's index and what its call produced. An exception in a call
        (or a lost worker) becomes ``Outcome.error``; it never stops the others.

    Raises
    ------
    ValueError
        Unknown executor, ``jobs`` < 1, or ``scheduler`` without ``executor="dask"``.
    ImportError
        ``executor="dask"`` without the ``poslab[dask]`` extra installed.
    OSError
        The Dask scheduler at ``scheduler`` cannot be reached.
    """
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}; got {executor!r}")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a positive integer, got {jobs!r}")
    if scheduler is not None and executor != "dask":
        raise ValueError(f"a scheduler address needs executor='dask', got executor={executor!r}")
    jobs = jobs or default_jobs()
    if executor == "dask":
        yield from _map_dask(func, items, jobs, scheduler)
    elif executor == "serial" or jobs == 1 or len(items) <= 1:
        for index, item in enumerate(items):
            yield index, _record(func, item)
    else:
        yield from _map_processes(func, items, jobs)


def _map_processes(func, items, jobs) -> Iterator[tuple[int, Outcome]]:
    method = "fork" if sys.platform.startswith("linux") else "spawn"
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=min(jobs, len(items)),
                                                  mp_context=multiprocessing.get_context(method))
    try:
        futures = {pool.submit(_record, func, item): index for index, item in enumerate(items)}
        for future in concurrent.futures.as_completed(futures):
            try:
                yield futures[future], future.result()
            except Exception as exc:  # the call raised, or its worker died (BrokenProcessPool)
                yield futures[future], Outcome(error=exc)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _map_dask(func, items, jobs, scheduler) -> Iterator[tuple[int, Outcome]]:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise ImportError(
            "executor 'dask' needs Dask's distributed scheduler: install the extra with "
            "pip install 'poslab[dask]'"
        ) from None
    cluster = None
    try:
        if scheduler is None:
            cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=":0")
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout="10s")
            except OSError as exc:
                raise OSError(f"cannot reach the Dask scheduler at {scheduler}: {exc}. Start one with "
                              "`dask scheduler` and workers with `dask worker ADDRESS`, or omit --scheduler "
                              "for a local cluster") from None
        try:
            futures = client.map(_record, [func] * len(items), items, pure=False)
            index = {future.key: i for i, future in enumerate(futures)}
            for future in as_completed(futures):
                try:
                    yield index[future.key], future.result()
                except Exception as exc:  # a lost worker, or an error outside the recorded call
                    yield index[future.key], Outcome(error=exc)
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()
