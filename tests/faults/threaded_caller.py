"""A caller with threads of its own runs studies on worker processes (run as a script by test_processes.py).

Before any worker starts, this process has what a notebook or a long
script has after some analysis: scipy.fft's worker pool (``workers=-1``,
as poslab's profile and bootstrap call it), a thread waiting on an event (a
progress bar's monitor) and a thread pool. Forking such a process can hang
for ever: pocketfft's at-fork handler joins its pool's threads, and one
that never wakes up blocks ``fork()``. That happened rarely, so here any
fork of this process fails at once instead: ``os.register_at_fork`` exits
with status 99, and with glibc a C-level at-fork handler (where pocketfft's
is) aborts. Two studies then run with the process executor (the second
starts workers again), and a map in which a worker is killed, so that a
replacement starts. Prints ``ok``.
"""

from __future__ import annotations

import concurrent.futures
import ctypes
import os
import signal
import threading

import numpy as np
import scipy.fft

from poslab.study import parse_study, run_study
from poslab.study.executors import WorkerLost, map_unordered

STUDY = {"name": "threads", "n_positions": 64, "dim": 8, "seeds": [0], "analysis": {"n_resamples": 40},
         "encodings": [{"kind": "random"}, {"kind": "sinusoidal"}, {"kind": "rotary"}]}


def die_on_one(x):
    if x == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return x


def main():
    scipy.fft.rfft(np.random.default_rng(0).normal(size=(64, 4096)), axis=1, workers=-1)
    stop = threading.Event()
    threading.Thread(target=stop.wait, daemon=True, name="monitor").start()
    pool = concurrent.futures.ThreadPoolExecutor(2)
    pool.submit(stop.wait)
    os.register_at_fork(before=lambda: os._exit(99))
    libc = ctypes.CDLL(None)
    if hasattr(libc, "__register_atfork"):  # glibc: what pthread_atfork registers
        libc.__register_atfork(libc.abort, None, None, None)
    spec = parse_study(STUDY)
    for _ in range(2):
        result = run_study(spec, progress=False, executor="processes", jobs=2)
        assert (result.summary["status"] == "ok").all(), result.summary
    out = dict(map_unordered(die_on_one, list(range(6)), executor="processes", jobs=2))
    assert isinstance(out[1].error, WorkerLost), out[1]
    assert all(out[i].value == i for i in (0, 2, 3, 4, 5)), out
    stop.set()
    pool.shutdown()
    print("ok")


if __name__ == "__main__":
    main()
