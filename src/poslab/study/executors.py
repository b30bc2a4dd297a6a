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
    finish. Each worker uses its share of the CPUs, usable CPUs // workers
    threads (at least 1) for BLAS, scipy.fft and the bootstrap
    (:mod:`poslab._threads`): unlimited, every worker started a thread per
    CPU of each kind, and on 2 CPUs the default study's 2-worker pool was
    slower than one process. (``poslab run`` gives a study of a single run no worker: it runs
    in a thread of its own process, whose main thread waits and acts on
    signals, see ``poslab.cli._in_a_thread``; here, one item still goes to a
    worker, which an interrupted notebook can stop, unlike a thread.) Results travel over one pipe per worker that the main process
    drains as they arrive, so a large result never blocks. Workers exit when
    the main process dies, even by SIGKILL (each watches a pipe that only the
    main process holds open), and are terminated when it stops early (an
    error, Ctrl-C, SIGTERM). :class:`concurrent.futures.ProcessPoolExecutor`
    (and loky) instead mark every pending run as failed once one worker
    dies, and the standard pool could hang in its shutdown.

    Workers are never forked from the calling process: a process with
    threads (scipy.fft's worker pool, a progress bar's monitor, Dask, a
    notebook's earlier analysis) can hang for ever in ``fork()`` (a
    library's at-fork handler waiting for one of its threads) or leave the
    child a lock that no thread will release. They are forks of a fork
    server (multiprocessing's ``forkserver``; ``spawn`` where there is none,
    as on Windows), a fresh interpreter started once per process that
    imports poslab's analysis modules, so only the first worker waits for
    those imports. A worker imports what the pickled runs refer to: poslab,
    the module of each encoding class, and a script's ``__main__`` by path,
    so a script must start its study inside ``if __name__ == "__main__":``
    (unguarded, each worker would start it again and die instead; the
    study then runs in this process, with a warning saying so).
    What exists only in this process does not reach workers: a class
    defined in a notebook or by ``python -c`` (or inside a function), or a
    change made at run time (monkeypatching). A study whose classes workers
    cannot import runs in this process, one run after the other, with a
    warning naming the class and what to do (define it in an importable
    module or register it through the ``poslab.encodings`` entry point);
    ``executor="serial"`` does that on purpose. The check is made before
    any worker starts (the work is pickled once, up front, and a class of an
    interactive ``__main__`` is recognised), and again by each worker, which
    first loads the work and says so before it is given a run.
``dask``
    A Dask cluster through :class:`dask.distributed.Client`: the scheduler at
    ``scheduler`` (e.g. ``tcp://10.0.0.5:8786``), or a
    :class:`~dask.distributed.LocalCluster` of ``jobs`` single-threaded
    worker processes when no address is given (each running BLAS, scipy.fft
    and the bootstrap with its share of the CPUs, as the pool's workers). Needs the optional extra
    ``poslab[dask]``; workers need poslab installed and any table files the
    study reads at the same paths. A run whose worker dies is a failed row
    (``KilledWorker``); on the local cluster it is not retried, on a remote
    scheduler its ``allowed-failures`` setting decides. An address that is
    not one, or a scheduler that cannot be reached, is an OSError saying so.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import io
import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import types
import warnings
from typing import Any, Callable, Iterator, Sequence

from .. import _signals

__all__ = ["EXECUTORS", "Outcome", "WorkerLost", "map_unordered", "default_jobs", "start_fork_server"]

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
    from .._threads import usable_cpus

    return usable_cpus()


def map_unordered(func: Callable, items: Sequence, *, executor: str = "processes", jobs: int | None = None,
                  scheduler: str | None = None) -> Iterator[tuple[int, Outcome]]:
    """Call ``func(item)`` for every item; yield ``(index, Outcome)`` as calls complete.

    Parameters
    ----------
    func : callable
        A function of one argument that a new process can import (a
        module-level function or a :func:`functools.partial` of one) for
        ``processes`` and ``dask``; ``processes`` otherwise runs the calls in
        this process, with a warning (module docstring).
    items : sequence
        Arguments, one call each.
    executor : {"serial", "processes", "dask"}
        Where calls run (module docstring).
    jobs : int, optional
        Worker processes for ``processes`` and a local Dask cluster (default
        :func:`default_jobs`). ``processes`` uses worker processes even for
        one job or one item: a long call in a worker leaves this process free
        to act on Ctrl-C and SIGTERM at once (a call in this process, deep
        in one C routine, would hold them until it returns).
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
    elif executor == "serial" or not items:
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


class _Pickler(pickle.Pickler):
    """A pickler that notes the module and name of every class and function it pickles by reference."""

    def __init__(self, file):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.references: set[tuple[str, str, str]] = set()

    def reducer_override(self, obj):
        if isinstance(obj, (type, types.FunctionType)):
            self.references.add((obj.__module__, obj.__qualname__, "class" if isinstance(obj, type) else "function"))
        return NotImplemented  # pickled as usual


def _dumps(obj, references: set) -> bytes:
    buffer = io.BytesIO()
    pickler = _Pickler(buffer)
    pickler.dump(obj)
    references |= pickler.references
    return buffer.getvalue()


def _interactive(references) -> list[str]:
    """The classes and functions defined in an interactive ``__main__`` (a notebook, the REPL, ``python -c``).

    A new process re-imports a script's ``__main__`` by path (or by module
    name for ``python -m``), as :mod:`multiprocessing`'s spawn does, but an
    interactive session has no file to import: what it defined exists only
    in this process.
    """
    main = sys.modules.get("__main__")
    if getattr(getattr(main, "__spec__", None), "name", None) or os.path.isfile(getattr(main, "__file__", None) or ""):
        return []
    return sorted(f"{what} {name}" for module, name, what in references if module == "__main__")


_GUARD = ("run a study from a script only inside its `if __name__ == \"__main__\":` block (each worker imports the "
          "script; see the error it printed)")
_WHERE_TO_DEFINE = ("define the encoding classes a study uses at the top level of a module that a new Python process "
                    "can import (a .py file you import, or a script's top level outside its "
                    "`if __name__ == \"__main__\":` block) or register them through the poslab.encodings entry point")


def _in_this_process(func, items, indices, why: str, advice: str) -> Iterator[tuple[int, Outcome]]:
    """Run ``items[i]`` for every ``i`` of ``indices`` here, one after the other, saying why the workers could not."""
    warnings.warn(f"{why}; this process runs {len(indices)} run(s) itself, one after the other. To use worker "
                  f"processes, {advice}; executor='serial' (--executor serial) runs here without this warning",
                  UserWarning, stacklevel=3)
    for index in indices:
        yield index, _record(func, items[index])


def _watch_parent() -> None:
    """Exit this worker as soon as the main process is gone, however it died (SIGKILL included).

    :func:`multiprocessing.parent_process`'s sentinel is the read end of a
    pipe whose write end only the main process holds (a process handle on
    Windows): it becomes ready when the main process exits, whichever start
    method made this worker (under forkserver its parent pid is the server's).
    """
    multiprocessing.connection.wait([multiprocessing.parent_process().sentinel])
    os._exit(1)


#: The first message of a worker that has loaded the work (otherwise it sends why it could not).
_READY = b"ready"


def _worker(conn, payload: bytes, threads: int) -> None:
    """One worker: load the pickled function, then receive pickled items and send back encoded Outcomes.

    It uses at most ``threads`` threads (BLAS, scipy.fft, the bootstrap: :func:`poslab._threads.limit_threads`),
    its share of the CPUs. It stops on an empty message or a closed pipe.
    """
    from .._threads import limit_threads

    limit_threads(threads)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # whatever an imported script installed: TERM must kill
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the main process, which stops the workers
    if hasattr(signal, "pthread_sigmask"):  # blocked by the fork server's start (start_fork_server): ignored now
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if os.name == "posix":  # received inheritable: a command an encoding runs must not hold it open
        os.set_inheritable(conn.fileno(), False)
    threading.Thread(target=_watch_parent, daemon=True, name="poslab-parent-watch").start()
    from .runner import small_pages

    with small_pages():  # numpy's new arrays on small pages for the worker's life, as in run_study
        try:
            try:
                func = pickle.loads(payload)
            except Exception as exc:  # a class this process cannot import
                conn.send_bytes(pickle.dumps(f"{type(exc).__name__}: {exc}"))
                return
            conn.send_bytes(_READY)
            while True:
                task = conn.recv_bytes()
                if not task:
                    return
                try:
                    item = pickle.loads(task)
                except Exception as exc:
                    outcome = Outcome(error=RuntimeError(f"this run could not be loaded in the worker process: "
                                                         f"{type(exc).__name__}: {exc}"))
                else:
                    outcome = _record(func, item)
                conn.send_bytes(_encode(outcome))
        except (EOFError, OSError):  # the main process is gone or stopped listening: nothing to report to
            return


#: What every worker imports, loaded once by the fork server: its workers are forks of it, not new interpreters.
#: ``__main__`` (a script, imported by path) is multiprocessing's default; Python versions whose fork server cannot
#: preload it (CPython issue 126631, 3.11 among them) import it in each worker instead.
_PRELOAD = ["__main__", "poslab.study.runner", "scipy.fft", "scipy.optimize", "threadpoolctl"]  # imported lazily by the analysis


def _context():
    """The workers' start method: ``forkserver`` where there is one (POSIX), else ``spawn``; never ``fork``.

    Forking the calling process copies its threads' locks but not its
    threads: a library's thread pool (scipy.fft's ``workers=-1``, OpenMP, a
    progress bar's monitor, Dask's IO loop) can leave a lock held, or an
    at-fork handler waiting on a thread forever, in the caller or the child.
    The fork server is a fresh interpreter, started once, that has imported
    only poslab (and a script's ``__main__``); workers are forks of it.
    """
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(_PRELOAD)
        _start_fork_server()
        return ctx
    return multiprocessing.get_context("spawn")


def start_fork_server() -> None:
    """Start the workers' fork server now, so its imports (~1.3 s, benchmarks/README.md) overlap this process's own
    work instead of delaying the first worker; a no-op where workers are spawned. ``poslab run`` calls it first."""
    _context()


def _start_fork_server() -> None:
    """Start the fork server (once per process) with Ctrl-C ignored, which it keeps through exec and hands on.

    A terminal sends Ctrl-C to the whole process group: the fork server,
    busy with its imports for a second or two, would die with a traceback,
    and its workers too while they start. Only this process acts on it (it
    stops the workers). A Ctrl-C while the server starts is not lost: it is
    blocked meanwhile (a blocked signal is kept pending even while ignored,
    and only the disposition, SIG_IGN, passes through exec), so it is
    delivered to this process's own handler once the server has started
    (tests/faults: the command waited for its runs 1 time in 30 under load).
    The server and its workers inherit the block; the workers lift it
    (:func:`_worker`), their Ctrl-C ignored.
    """
    from multiprocessing import forkserver

    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        return  # signals can only be set here from the main thread (then start() starts the server)
    block = hasattr(signal, "pthread_sigmask")
    if block:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        forkserver.ensure_running()
    finally:
        signal.signal(signal.SIGINT, previous)
        if block:  # a Ctrl-C that came meanwhile reaches the handler now
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@dataclasses.dataclass
class _Slot:
    process: Any
    conn: Any
    ready: bool = False  # has loaded the work
    index: int | None = None  # the item it is running


def _map_processes(func, items, jobs) -> Iterator[tuple[int, Outcome]]:
    """A small supervisor over :mod:`multiprocessing`: it knows which item each worker holds.

    The function and items are pickled here once, up front. Workers start
    from a fork server (spawned where there is none), never by forking this
    process, and each first loads the function. Results come back over one
    pipe per worker which this process drains as soon as they are ready, so
    a large result never blocks a worker. A worker that dies is noticed
    when its pipe closes (only it holds the other end, not the commands it
    runs): its item gets a :class:`WorkerLost` error, a new worker takes its
    place, and the other items go on; the fork server's own death costs
    nothing until a worker must be started, and then it is restarted. A worker that
    cannot start or load the function is not replaced; items no worker is
    left to run run here, with a warning (as do all items when the work
    cannot be pickled or refers to what only an interactive session
    defines). Workers exit when this process dies (they watch it) and are
    terminated when the iteration ends early (an error, Ctrl-C).
    """
    references: set[tuple[str, str, str]] = set()
    try:
        payload = _dumps(func, references)
        tasks = [_dumps(item, references) for item in items]
    except Exception as exc:  # a local class, a lambda, an open file
        yield from _in_this_process(func, items, range(len(items)), f"the study cannot be sent to worker processes "
                                    f"({type(exc).__name__}: {exc})", _WHERE_TO_DEFINE)
        return
    interactive = _interactive(references)
    if interactive:
        yield from _in_this_process(func, items, range(len(items)), f"{', '.join(interactive)} "
                                    f"{'is' if len(interactive) == 1 else 'are'} defined in this interactive session "
                                    "(a notebook, the REPL, python -c), which worker processes cannot import",
                                    _WHERE_TO_DEFINE)
        return
    ctx = _context()
    threads = max(1, default_jobs() // min(jobs, len(items)))  # each worker's share of the CPUs
    pending = collections.deque(range(len(items)))
    slots: list[_Slot] = []
    cannot_start: tuple[str, str] | None = None  # why a worker could not start, and what to do

    def start() -> None:
        nonlocal cannot_start
        mine, theirs = ctx.Pipe(duplex=True)
        process = ctx.Process(target=_worker, args=(theirs, payload, threads), daemon=True, name="poslab-worker")
        with _signals.deferred():  # a Ctrl-C while the worker is launched waits until it is a slot (stopped below)
            try:
                process.start()
            except (OSError, EOFError) as exc:  # the fork server could not be started or reached (or died importing)
                cannot_start = f"a worker process could not be started ({type(exc).__name__}: {exc})", _GUARD
                mine.close()
                return
            finally:
                theirs.close()
            slots.append(_Slot(process, mine))

    def assign(slot: _Slot) -> None:
        if pending:
            slot.index = pending.popleft()
            try:
                slot.conn.send_bytes(tasks[slot.index])
            except (OSError, ValueError):  # the worker died before taking it: noticed when its pipe closes
                pass
        else:
            slot.index = None

    def retire(slot: _Slot) -> None:
        slots.remove(slot)
        slot.conn.close()
        slot.process.join(timeout=5)

    try:
        for _ in range(min(jobs, len(items))):
            start()
        while any(not s.ready or s.index is not None for s in slots):
            watched = [s for s in slots if not s.ready or s.index is not None]
            ready = set(multiprocessing.connection.wait([s.conn for s in watched], timeout=0.25))
            _signals.check()  # a Ctrl-C or SIGTERM that Python dropped is raised here (poslab._signals)
            for slot in watched:
                if slot.conn not in ready:
                    continue
                try:
                    data = slot.conn.recv_bytes()
                except (EOFError, OSError):
                    data = None  # the worker is gone (only it holds the other end), perhaps while sending
                if not slot.ready:
                    if data == _READY:
                        slot.ready = True
                        assign(slot)
                    elif data is not None:  # it could not load the work
                        cannot_start = f"a worker process could not load the study ({pickle.loads(data)})", \
                            _WHERE_TO_DEFINE
                        retire(slot)
                    else:
                        retire(slot)
                        cannot_start = (f"a worker process (pid {slot.process.pid}) "
                                        f"{_describe_exit(slot.process.exitcode)} before it could load the study",
                                        _GUARD)
                    continue
                index = slot.index
                if data is None:  # the worker is gone and its result with it
                    retire(slot)
                    outcome = Outcome(error=WorkerLost(
                        f"the worker process (pid {slot.process.pid}) running this run "
                        f"{_describe_exit(slot.process.exitcode)}; the other runs went on. Run it again, "
                        "with fewer --jobs if memory is short"))
                    if pending and cannot_start is None:
                        start()
                else:
                    try:
                        outcome = pickle.loads(data)
                    except Exception as exc:
                        outcome = Outcome(error=RuntimeError(f"the result of this run could not be read back: "
                                                             f"{type(exc).__name__}: {exc}"))
                    assign(slot)
                yield index, outcome
        if pending:  # no worker is left to run them
            yield from _in_this_process(func, items, list(pending), *cannot_start)
    finally:
        for slot in list(slots):
            if slot.ready and slot.index is None and slot.process.is_alive():
                try:
                    slot.conn.send_bytes(b"")  # stop
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


def _with_threads(func, threads: int, item):
    """``func(item)`` using at most ``threads`` threads in this process (a worker of a local Dask cluster)."""
    from .._threads import limit_threads

    limit_threads(threads)
    return func(item)


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
            if cluster is not None:  # this machine's CPUs, shared between the local workers as in the pool
                func = functools.partial(_with_threads, func, max(1, default_jobs() // jobs))
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
