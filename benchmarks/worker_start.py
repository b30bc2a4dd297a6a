"""What starting worker processes costs: the fork server's start, then each map's workers.

Run from the repository root::

    .venv/bin/python benchmarks/worker_start.py              # 3 fresh processes, 11 maps each
    .venv/bin/python benchmarks/worker_start.py --maps 21

Each fresh Python process imports ``poslab.study.runner`` (what ``poslab
run`` has imported before its workers start), then times ``map_unordered(abs,
[0, 1], executor="processes", jobs=2)`` ``--maps`` times: every map starts two
workers, runs two trivial calls and stops the workers. The first map of a
process also starts multiprocessing's fork server, which imports what workers
need (``poslab.study.executors._PRELOAD``); later maps only fork it. Printed
per process: the first map, and the median (min, max) of the others.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

CHILD = """
import statistics, sys, time
import poslab.study.runner  # noqa: F401
from poslab.study.executors import map_unordered

if __name__ == "__main__":
    times = []
    for _ in range(int(sys.argv[1])):
        t = time.perf_counter()
        list(map_unordered(abs, [0, 1], executor="processes", jobs=2))
        times.append(1000 * (time.perf_counter() - t))
    later = times[1:]
    print(f"first map {times[0]:.0f} ms; later maps median {statistics.median(later):.0f} ms "
          f"(min {min(later):.0f}, max {max(later):.0f})")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=3, help="fresh Python processes (default 3)")
    parser.add_argument("--maps", type=int, default=11, help="maps per process (default 11)")
    args = parser.parse_args()
    print(f"# {os.cpu_count()} CPUs, Python {sys.version.split()[0]}, load average {os.getloadavg()[0]:.2f}")
    for _ in range(args.processes):
        out = subprocess.run([sys.executable, "-c", CHILD, str(args.maps)], check=True, text=True,
                             stdout=subprocess.PIPE).stdout
        print(out.strip())


if __name__ == "__main__":
    main()
