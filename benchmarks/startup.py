"""Start-up of the quick commands against ``python -c "import click"`` (issue 16, target: ``--help`` within 3x).

Run from the repository root::

    .venv/bin/python benchmarks/startup.py            # 15 repetitions each
    .venv/bin/python benchmarks/startup.py --repeat 40

Each command runs as its own process (``subprocess.run``, output discarded)
``--repeat`` times, interleaved (one of each, then again), so a burst of load
from other processes hits every command alike; the table gives the minimum
(the least disturbed run) and the median wall time. Bytecode is compiled
first (``compileall``) and the children run without PYTHONDONTWRITEBYTECODE,
as after ``pip install``; the heavy modules each command imports are counted
in the last column (tests/test_startup.py keeps them at none).
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import poslab

POSLAB = str(Path(sys.executable).with_name("poslab"))
COMMANDS = {
    'python -c "import click"': [sys.executable, "-c", "import click"],
    'python -c "import poslab"': [sys.executable, "-c", "import poslab"],
    "poslab --help": [POSLAB, "--help"],
    "poslab --version": [POSLAB, "--version"],
    "python -m poslab --help": [sys.executable, "-m", "poslab", "--help"],
    "poslab encodings": [POSLAB, "encodings"],
    "poslab inspect gpt2": [POSLAB, "inspect", "gpt2"],
}
HEAVY = ("matplotlib", "seaborn", "pandas", "scipy.stats", "scipy.optimize")
# the command's click group itself (poslab.cli.entry would end the process before the count is printed)
COUNT = ("import sys\nfrom poslab.cli import main\n"
         "try: main(sys.argv[1:], prog_name='poslab')\n"
         "except SystemExit: pass\n"
         f"print(sum(any(m == h or m.startswith(h + '.') for h in {HEAVY!r}) for m in sys.modules), file=sys.stderr)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    load = os.getloadavg()[0]
    compileall.compile_dir(Path(poslab.__file__).parent, quiet=1)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeat):
        for name, cmd in COMMANDS.items():
            t = time.perf_counter()
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
            times[name].append(time.perf_counter() - t)
    print(f"# start-up, {os.cpu_count()} CPUs, load average {load:.2f} before, {os.getloadavg()[0]:.2f} after; "
          f"{args.repeat} runs each; poslab from {Path(poslab.__file__).parent}")
    click = min(times['python -c "import click"'])
    print(f"{'command':28} {'min s':>7} {'median s':>9} {'min vs click':>13} {'heavy modules':>14}")
    for name, cmd in COMMANDS.items():
        heavy = ""
        if cmd[0] == POSLAB or cmd[1:3] == ["-m", "poslab"]:
            args_ = cmd[1:] if cmd[0] == POSLAB else cmd[3:]
            done = subprocess.run([sys.executable, "-c", COUNT, *args_], capture_output=True, text=True, env=env)
            heavy = done.stderr.strip().splitlines()[-1]
        print(f"{name:28} {min(times[name]):7.3f} {statistics.median(times[name]):9.3f} "
              f"{min(times[name]) / click:12.1f}x {heavy:>14}")


if __name__ == "__main__":
    main()
