"""How many threads one process's analysis may use: the CPUs it may run on, or its share of them in a pool.

A worker of a pool of ``w`` processes on ``c`` usable CPUs gets ``max(1, c // w)`` threads
(:func:`limit_threads`, called by :mod:`poslab.study.executors` in each worker): without a limit each worker
would start as many BLAS threads (OpenBLAS, MKL), FFT workers (scipy.fft) and bootstrap threads as there are
CPUs, ``w`` times too many, and on a small machine the workers then wait for each other's threads (the default
study on 2 CPUs: its 2-worker pool was slower than one process, benchmarks/README.md, stop 22).
"""

from __future__ import annotations

import functools
import os

__all__ = ["analysis_threads", "limit_threads", "one_blas_thread", "usable_cpus"]

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


def one_blas_thread(function):
    """``function`` run with BLAS on one thread (threadpoolctl), whatever this process's limit.

    For small products in a loop beside elementwise work (the bootstrap's resampled profiles, ``weights @ sums``:
    n_resamples × n_units by n_units × a chunk of distances): a second BLAS thread saved little and then spun,
    waiting for the next product, while the calling thread did the elementwise work (quantiles, summaries) —
    13.3 against 8.3 CPU-s for the bootstrap of a 2^20-position run (2 CPUs, load 4). One thread also makes the
    products' last bits the same whatever the pool's thread limit (BLAS's edge kernels depend on how a product
    is split between threads: 1e-19 in profile_ci).
    """

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=1, user_api="blas"):
            return function(*args, **kwargs)

    return wrapper
