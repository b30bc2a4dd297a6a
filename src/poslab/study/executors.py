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
    ``jobs`` local worker processes under a small supervisor of poslab's own
    (default: the CPUs this process may use). It knows which run each worker
    holds, so a worker that dies (out of memory, ``kill -9``, a crash in
    native code) costs exactly that run, which becomes a :class:`WorkerLost`
    error (a ``failed`` row); a new worker takes its place and the other runs
    finish. Results travel over one pipe per worker that the main process
    drains as they arrive, so a large result never blocks. Workers exit when
    the main process dies, even by SIGKILL (each watches its parent), and
    are terminated when it stops early (an error, Ctrl-C, SIGTERM).
    :class:`concurrent.futures.ProcessPoolExecutor` (and loky) instead mark
    every pending run as failed once one worker dies, and the standard pool
    could hang in its shutdown. Workers are forked on Linux, so encodings
    defined or registered at run time (in a script or a notebook) are
    available to them; elsewhere they are spawned and such encodings must be
    importable.
``dask``
    A Dask cluster through :class:`dask.distributed.Client`: the scheduler at
    ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``), or a
    :class:`~dask.distributed.LocalCluster` of ``jobs`` single-threaded
    worker processes when no address is given. Needs the optional extra
    ``poslab[dask]``; workers need poslab installed and any table files the
    study reads at the same paths. A run whose worker dies is a failed row
    (``KilledWorker``); on the local cluster it is not retried, on a remote
    scheduler its ``allowed-failures`` setting decides. An address that is
    not one, or a scheduler that cannot be reached, is an OSError saying so.
"""

from __future__ import annotations

import collections
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import time
import warnings
from typing import Any, Callable, Iterator, Sequence

__all__ = ["EXECUTORS", "Outcome", "WorkerLost", "map_unordered", "default_jobs"]

#: Names accepted by ``run_study(executor=...)`` and ``poslab run --executor``.
EXECUTORS = ("serial", "processes", "dask")

#: How often a worker checks that the process that started it is still alive (seconds).
_PARENT_POLL_SECONDS = 0.2


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


class WorkerLost(RuntimeError):
    """The worker process running a call died before returning (killed, out of memory, crashed)."""


def _describe_exit(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (the out-of-memory killer, or kill -9)" if -exitcode == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with status {exitcode}"


def _encode(outcome: Outcome) -> bytes:
    """Pickle an outcome for the trip to the parent; an error or value that cannot make it becomes a plain error."""
    if outcome.error is not None:
        try:
            pickle.loads(pickle.dumps(outcome.error))  # custom exceptions may pickle but not unpickle
        except Exception:
            outcome = dataclasses.replace(outcome, error=RuntimeError(f"{type(outcome.error).__name__}: {outcome.error}"))
    try:
        return pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        return pickle.dumps(Outcome(error=RuntimeError(f"the result could not be sent to the main process: "
                                                       f"{type(exc).__name__}: {exc}"), warnings=outcome.warnings))


def _watch_parent(parent_pid: int) -> None:
    """Exit this worker as soon as the process that started it is gone (it was killed, even by SIGKILL)."""
    while os.getppid() == parent_pid:
        time.sleep(_PARENT_POLL_SECONDS)
    os._exit(1)


def _worker(conn, func, parent_pid: int, inherited) -> None:
    """One worker: receive ``(index, item)``, send back the encoded Outcome; stop on None or a closed pipe."""
    for other in inherited:  # the main process's ends of the other workers' pipes: not ours to hold open
        other.close()
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the CLI's handler is inherited on fork: TERM must kill
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the main process, which stops the workers
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True, name="poslab-parent-watch").start()
    while True:
        try:
            task = conn.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        conn.send_bytes(_encode(_record(func, task)))


@dataclasses.dataclass
class _Slot:
    process: Any
    conn: Any
    index: int | None = None  # the item it is running


def _map_processes(func, items, jobs) -> Iterator[tuple[int, Outcome]]:
    """A small supervisor over :mod:`multiprocessing`: it knows which item each worker holds.

    Results come back over one pipe per worker which this process drains as
    soon as they are ready, so a large result never blocks a worker. A worker
    that dies is noticed through its process sentinel: its item gets a
    :class:`WorkerLost` error, a new worker takes its place, and the other
    items go on. Workers exit when this process dies (they watch their parent)
    and are terminated when the iteration ends early (an error, Ctrl-C).
    """
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    pending = collections.deque(enumerate(items))
    slots: list[_Slot] = []
    n_workers = min(jobs, len(items))

    def start() -> _Slot:
        mine, theirs = ctx.Pipe(duplex=True)
        inherited = [s.conn for s in slots] if ctx.get_start_method() == "fork" else []
        process = ctx.Process(target=_worker, args=(theirs, func, os.getpid(), inherited), daemon=True,
                              name="poslab-worker")
        process.start()
        theirs.close()
        slot = _Slot(process, mine)
        slots.append(slot)
        return slot

    def assign(slot: _Slot) -> None:
        if pending:
            slot.index, item = pending.popleft()
            try:
                slot.conn.send(item)
            except (OSError, ValueError):  # the worker died before taking it: noticed by its sentinel
                pass
        else:
            slot.index = None

    def retire(slot: _Slot) -> None:
        slots.remove(slot)
        slot.conn.close()
        slot.process.join(timeout=5)

    try:
        for _ in range(n_workers):
            assign(start())
        while any(s.index is not None for s in slots):
            busy = [s for s in slots if s.index is not None]
            ready = set(multiprocessing.connection.wait([s.conn for s in busy] + [s.process.sentinel for s in busy]))
            for slot in busy:
                outcome = None
                if slot.conn in ready or (slot.process.sentinel in ready and slot.conn.poll()):
                    try:
                        data = slot.conn.recv_bytes()
                    except (EOFError, OSError):
                        data = None  # died while sending: lost like any other death
                    if data is not None:
                        try:
                            outcome = pickle.loads(data)
                        except Exception as exc:
                            outcome = Outcome(error=RuntimeError(f"the result of this run could not be read back: "
                                                                 f"{type(exc).__name__}: {exc}"))
                elif slot.process.sentinel not in ready:
                    continue
                index = slot.index
                if outcome is None:  # the worker is gone and its result with it
                    slot.process.join(timeout=5)
                    outcome = Outcome(error=WorkerLost(
                        f"the worker process (pid {slot.process.pid}) running this run "
                        f"{_describe_exit(slot.process.exitcode)}; the other runs went on. Run it again, "
                        "with fewer --jobs if memory is short"))
                    retire(slot)
                    if pending:
                        assign(start())
                else:
                    assign(slot)
                yield index, outcome
    finally:
        for slot in list(slots):
            if slot.index is None and slot.process.is_alive():
                try:
                    slot.conn.send(None)
                except (OSError, ValueError):
                    pass
            else:
                slot.process.terminate()
        for slot in list(slots):
            slot.process.join(timeout=2)
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(timeout=2)
            slot.conn.close()


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
            import dask

            # as with the process pool, a run whose worker dies is a failed row, not retried on the next
            # worker (Dask's default retries it 3 times: an out-of-memory run would kill 4 workers); a worker
            # holds one run at a time, so its death costs no queued neighbour
            with dask.config.set({"distributed.scheduler.allowed-failures": 0,
                                  "distributed.scheduler.worker-saturation": 1.0}):
                cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=":0")
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout="10s")
            except (ValueError, TypeError) as exc:  # not an address at all
                raise OSError(f"--scheduler {scheduler!r} is not a Dask scheduler address ({exc}); write one like "
                              "tcp://10.0.0.5:8786, or omit --scheduler for a local cluster") from None
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
