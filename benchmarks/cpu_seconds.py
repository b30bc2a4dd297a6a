"""Wall time and CPU seconds of a command and of every process it starts, the fork server's workers included.

``/usr/bin/time`` counts only the children its command waited for: ``poslab run``'s fork server outlives its
wait and its workers are the server's children, so their CPU was invisible. This script makes itself a child
subreaper (Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): orphans, such as the fork server when ``poslab`` exits,
are re-parented to it and reaped here, and the server has reaped its workers, so ``RUSAGE_CHILDREN`` holds the
CPU of the whole tree. On a 2-CPU machine shared with other work, wall times say little; CPU seconds say how
much work a command did (inflated too under load by threads that spin while they wait, e.g. OpenBLAS's).

Usage (Linux)::

    .venv/bin/python benchmarks/cpu_seconds.py poslab run --out /tmp/x --overwrite --no-progress

Prints one line: wall, CPU (user, sys), the console's ``wrote ... in`` part when there is one, the load average.
"""

from __future__ import annotations

import ctypes
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    if ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("prctl(PR_SET_CHILD_SUBREAPER) failed: Linux only")
    start = time.perf_counter()
    done = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    while True:  # the orphans re-parented here (the fork server)
        try:
            os.wait()
        except ChildProcessError:
            break
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    wrote = [line for line in done.stdout.splitlines() if line.startswith("wrote ")]
    said = wrote[0][wrote[0].find(" in ") + 4:] if wrote else f"exit {done.returncode}"
    print(f"wall {wall:.2f} s, cpu {usage.ru_utime + usage.ru_stime:.2f} s (user {usage.ru_utime:.2f}, sys "
          f"{usage.ru_stime:.2f}); {said}; load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
