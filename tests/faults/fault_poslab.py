"""``poslab`` with one extra encoding, ``fault``, for the fault-injection tests (run as a script).

``kind = "fault"`` is a stochastic Gaussian table that, before producing it,
writes ``started-<seed>-<pid>`` into ``$POSLAB_FAULT_DIR`` (so a test knows
which worker holds which run) and sleeps ``sleep`` seconds; with ``stuck = true`` it then
enters one C call that runs for minutes and never checks for signals (a
Gaussian filter of σ = 10⁵ over a million positions), as a huge
smoothed_random once did. With
``POSLAB_FAULT_SLOW_FIGURE=1`` drawing ``decay_curves.png`` writes
``drawing`` there and sleeps, so a test can kill the process while it writes
its results folder; the figures are then drawn by this process and a forked figure worker at once,
whatever the machine's load.
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

from poslab.encodings import Encoding, register


@register
@dataclasses.dataclass(frozen=True)
class Fault(Encoding):
    """A Gaussian table produced slowly, announcing which process produces it."""

    kind = "fault"
    stochastic = True

    sleep: float = 0.0
    stuck: bool = False

    def _generate(self, n_positions, dim, rng):
        seed = int(rng.integers(1 << 30))
        folder = Path(os.environ["POSLAB_FAULT_DIR"])
        (folder / f"started-{seed}-{os.getpid()}").touch()
        time.sleep(self.sleep)
        if self.stuck:
            from scipy.ndimage import gaussian_filter1d

            gaussian_filter1d(np.zeros(1 << 20), 1e5)
        return rng.normal(size=(n_positions, dim))


if os.environ.get("POSLAB_FAULT_SLOW_FIGURE"):
    from poslab.plots import STUDY_FIGURES

    def _slow(tables, title):
        (Path(os.environ["POSLAB_FAULT_DIR"]) / "drawing").touch()
        time.sleep(60)

    STUDY_FIGURES["decay_curves.png"] = _slow

    # and the figures drawn by a forked worker too, whatever the machine's load (poslab.study.results._FigureWorker)
    from poslab.study import results

    results._FigureWorker.usable = staticmethod(lambda tables: True)


if __name__ == "__main__":
    import signal

    from poslab.cli import entry

    # Ctrl-C as from a terminal, even when the test session runs as a background job (which ignores SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.argv[0] = "poslab"
    entry()  # as the console script does
