"""``write_results`` with and without the forked figure worker, interleaved, on one study's results in memory.

    PYTHONPATH=src .venv/bin/python benchmarks/figure_worker.py [STUDY.toml] [--pairs 3]

The study runs once in this process (serial); then ``write_results`` writes its tables and figures into a temporary
folder, alternately with the figures drawn in a thread only and with the forked worker beside it (forced, whatever
the load: ``poslab.study.results._FigureWorker.usable``). Prints, for each, the wall time, the CPU seconds of this
process and of the worker (``RUSAGE_CHILDREN``), and the load average: the worker pays when the larger of the two
CPU times (the critical path) is shorter than the thread's and a core is free for it.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
import warnings
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", nargs="?", default=str(Path(__file__).parents[1] / "src" / "poslab" / "studies"
                                                        / "compare_encodings.toml"))
    parser.add_argument("--pairs", type=int, default=3)
    args = parser.parse_args()

    from poslab.study import results
    from poslab.study.runner import run_study
    from poslab.study.spec import load_study

    result = run_study(load_study(args.study), executor="serial", progress=False)
    warnings.simplefilter("ignore")
    scratch = Path(tempfile.mkdtemp(prefix="poslab-figure-worker-"))
    try:
        results.write_results(result, scratch / "warm")  # imports, fonts, caches
        print(f"{Path(args.study).name}: {os.cpu_count()} CPUs")
        for mode in ("thread", "worker") * args.pairs:
            results._FigureWorker.usable = staticmethod(lambda tables, on=(mode == "worker"): on)
            out = scratch / mode
            c0, t0 = time.process_time(), time.perf_counter()
            k0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            results.write_results(result, out)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            k1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            worker = k1.ru_utime + k1.ru_stime - k0.ru_utime - k0.ru_stime
            print(f"{mode:7} wall {wall:5.2f} s   CPU poslab {cpu:5.2f} s + worker {max(worker, 0.0):5.2f} s   "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
            shutil.rmtree(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
