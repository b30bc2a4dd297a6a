"""The properties stage's two large paths, in process (issue 14 item 3 target (a), issue 16's 2^20 run).

1. **kernel**: ``run_kernel_properties`` of one rotary kernel at 1,048,576
   positions (rope_theta 500000, rotary_dim 128, every distance): Wang et al.'s
   monotonicity by prefix dominance counts (``_dominance``), symmetry, locality;
2. **table**: ``monotonicity`` of a random 1,048,576 × 128 table (unit rows,
   seed 0, every distance; 32 anchors of 2^20 distances: the forward products
   of S, ranks, inversion counts, Spearman sums).

The kernel (or table) is built first and not timed; each timed call is repeated
``--repeat`` times and the minimum printed, wall and CPU, with the load average
and the values (they must not move between two revisions). Compare two
revisions by running this file with each one's ``src`` on ``PYTHONPATH``,
interleaved::

    PYTHONPATH=/work/main/src .venv/bin/python benchmarks/properties_speed.py kernel
    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/properties_speed.py kernel
    PYTHONPATH=$PWD/src .venv/bin/python benchmarks/properties_speed.py table --repeat 1   # ~1 GiB table

Results: ``benchmarks/README.md``, "Properties: the kernel path's dominance counts".
"""

from __future__ import annotations

import argparse
import os
import time


def _timed(call, repeat):
    walls, cpus, value = [], [], None
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        value = call()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return min(walls), min(cpus), value


def kernel(repeat: int):
    from poslab.encodings import make_encoding
    from poslab.stages.properties import run_kernel_properties

    n = 2**20
    encoding = make_encoding("rotary", rope_theta=500000.0, rotary_dim=128)
    rotary_kernel = encoding.kernel(n, n - 1, 128)
    wall, cpu, frame = _timed(lambda: run_kernel_properties(rotary_kernel, n, n - 1, 0.1, 64), repeat)
    return wall, cpu, dict(zip(frame["metric"], frame["value"].map(repr)))


def table(repeat: int):
    import numpy as np

    from poslab.analysis import unit_rows
    from poslab.analysis.properties import anchor_positions, monotonicity

    n = 2**20
    units = unit_rows(np.random.default_rng(0).normal(size=(n, 128)))
    anchors, _ = anchor_positions(n)
    wall, cpu, (rho, discordance) = _timed(lambda: monotonicity(units, n - 1, anchors), repeat)
    return wall, cpu, {"monotonicity_spearman": repr(rho), "monotonicity_discordance": repr(discordance)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", choices=("kernel", "table"))
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    import poslab

    wall, cpu, values = {"kernel": kernel, "table": table}[args.path](args.repeat)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"{args.path}: min of {args.repeat}: wall {wall:.3f} s, cpu {cpu:.3f} s  (load average {load}; "
          f"poslab from {os.path.dirname(poslab.__file__)})")
    for name, value in values.items():
        print(f"    {name} = {value}")


if __name__ == "__main__":
    main()
