"""How many threads one process's analysis may use: the CPUs it may run on, or its share of them in a pool.

A worker of a pool of ``w`` processes on ``c`` usable CPUs gets ``max(1, c // w)`` threads
(:func:`limit_threads`, called by :mod:`poslab.study.executors` in each worker): without a limit each worker
would start as many BLAS threads (OpenBLAS, MKL), FFT workers (scipy.fft) and bootstrap threads as there are
CPUs, ``w`` times too many, and on a small machine the workers then wait for each other's threads (the default
study on 2 CPUs: its 2-worker pool was slower than one process, COORDINATION.md of 2026-12-02).
"""

from __future__ import annotations

import os

__all__ = ["analysis_threads", "limit_threads", "usable_cpus"]

_limit: int | None = None


def usable_cpus() -> int:
    """Number of CPUs this process may use (``os.sched_getaffinity`` where available)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def analysis_threads() -> int:
    """Threads an analysis function may use here: scipy.fft's ``workers`` and the bootstrap's thread pool
    (the limit set by :func:`limit_threads`, else :func:`usable_cpus`)."""
    return _limit or usable_cpus()


def limit_threads(threads: int) -> None:
    """Use at most ``threads`` threads in this process from now on: for :func:`analysis_threads` and for the
    BLAS and OpenMP libraries already loaded (through threadpoolctl).

    Parameters
    ----------
    threads : int
        At least 1.
    """
    global _limit
    from threadpoolctl import threadpool_limits

    _limit = max(1, int(threads))
    threadpool_limits(limits=_limit)
