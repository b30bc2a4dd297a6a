"""What progress reporting costs: ``poslab run`` whole process with and without it, and how often it reports.

Run from the repository root::

    .venv/bin/python benchmarks/progress_overhead.py              # the default study and a 1,048,576-position RoPE run
    .venv/bin/python benchmarks/progress_overhead.py --repeats 5

Each case runs ``poslab run`` in a fresh process, alternately with progress (stderr a pipe: plain lines; ``--bar``
adds a pseudo-terminal through ``script``, a tqdm bar) and with ``--no-progress``, ``--repeats`` times each; it
prints the median and the fastest wall time of each and their difference. Then, in this process, one
131072-position random run (``execute_run``, 200 resamples, its stages shown) counts the reports made (items,
steps, counts) and times one report, so the cost is known apart from the machine's noise.
"""

from __future__ import annotations

import argparse
import io
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROPE = """
name = "rope1m"
n_positions = 1048576
dim = 128
seeds = [0]

[[encodings]]
kind = "rotary"
rope_theta = 500000
rotary_dim = 128
"""

RANDOM = """
name = "random131k"
n_positions = 131072
dim = 128
seeds = [0]

[[encodings]]
kind = "random"
"""


def _poslab(args, tty: bool) -> float:
    command = [sys.executable, "-c", "from poslab.cli import main; main()", "run", *map(str, args)]
    if tty:  # a pseudo-terminal 120 columns wide: tqdm draws its bar
        command = ["script", "-qc", "stty cols 120 rows 40; " + shlex.join(command), "/dev/null"]
    t = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def _case(name, study, extra, repeats, modes, folder):
    times = {mode: [] for mode in modes}
    for _ in range(repeats):
        for mode in modes:  # alternated, so a change of the machine's load hits both
            args = [*([] if study is None else [study]), "--out", folder / name, "--overwrite", *extra]
            args += ["--no-progress"] if mode == "off" else []
            times[mode].append(_poslab(args, tty=mode == "bar"))
    print(f"{name}: {repeats} runs each, whole process")
    for mode, ts in times.items():
        print(f"  progress {mode:5s}  median {statistics.median(ts):6.2f} s  fastest {min(ts):6.2f} s")
    for mode in modes:
        if mode != "off":
            d = statistics.median(times[mode]) - statistics.median(times["off"])
            print(f"  {mode} - off: {d:+.2f} s median ({100 * d / statistics.median(times['off']):+.1f} %), "
                  f"{min(times[mode]) - min(times['off']):+.2f} s fastest")


def _reports() -> None:
    from poslab.study.progress import Progress
    from poslab.study.runner import execute_run
    from poslab.study.spec import parse_study

    spec = parse_study(tomllib.loads(RANDOM))
    run = spec.runs()[0]
    calls = [0]
    changed = Progress._changed

    def counted(self, count=False):
        calls[0] += 1
        changed(self, count)

    Progress._changed = counted
    out = io.StringIO()
    t = time.perf_counter()
    execute_run(spec, run, list(run.encoding.params()), progress=Progress(file=out, style="lines"))
    total = time.perf_counter() - t
    Progress._changed = changed
    p = Progress(file=io.StringIO(), style="lines")
    with p.task("t", total=10, each=True) as task, task.item("x"), p.step("s", 10, "resamples") as step:
        n = 100_000
        t0 = time.perf_counter()
        for i in range(n):
            step("refits", i)
        per = (time.perf_counter() - t0) / n
    print(f"random 131072 x 128, one run in this process: {total:.1f} s, {calls[0]} reports "
          f"({len(out.getvalue().splitlines())} lines); one report {per * 1e6:.1f} us "
          f"-> {calls[0] * per * 1e3:.2f} ms in all")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bar", action="store_true", help="also through a pseudo-terminal (a tqdm bar)")
    args = parser.parse_args()
    modes = ("lines", "off") + (("bar",) if args.bar and shutil.which("script") else ())
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "rope1m.toml").write_text(ROPE)
        _case("default study (processes)", None, [], args.repeats, modes, folder)
        _case("rope 1048576 x 128, one run (serial: its stages shown)", folder / "rope1m.toml",
              ["--executor", "serial"], args.repeats, modes, folder)
    _reports()


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    main()
