"""The no-structure baseline: i.i.d. random position vectors."""

from __future__ import annotations

import dataclasses
import mmap
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np

from .base import Encoding
from .registry import register

__all__ = ["RandomEncoding"]


@register
@dataclasses.dataclass(frozen=True)
class RandomEncoding(Encoding):
    """I.i.d. random position table, seeded per run.

    Beyond distance 0 the expected cosine similarity is 0 and its spread
    across pairs is about 1/√dim (for the Gaussian exactly: the cosine of two
    independent isotropic vectors has variance 1/dim).

    Parameters
    ----------
    distribution : {"gaussian", "uniform"}
        ``gaussian``: N(0, 1) entries. ``uniform``: U[−1, 1) entries.
    """

    kind = "random"
    stochastic = True

    distribution: Literal["gaussian", "uniform"] = "gaussian"

    def _generate(self, n_positions, dim, rng):
        if self.distribution == "gaussian":
            return _filled(rng.standard_normal, (n_positions, dim))
        return rng.uniform(-1.0, 1.0, size=(n_positions, dim))


#: Rows of a table generated at once by :func:`_filled` (entries: 32 MiB of float64).
_FILL_ENTRIES = 2**22


def _filled(fill, shape) -> np.ndarray:
    """A new float64 array of ``shape`` filled by ``fill(out=...)`` run after run of rows, in order: the same
    draws as one call (the generator's stream continues from run to run). A large array's pages are first touched
    by a second thread a run ahead of the draws (the kernel's work of mapping fresh memory, ~0.5-4 CPU-s per GiB on
    a small VM, beside the single-threaded generator instead of before each draw)."""
    out = np.empty(shape)
    rows = max(1, _FILL_ENTRIES // max(1, shape[1]))
    starts = range(0, shape[0], rows)
    if len(starts) < 2:
        fill(out=out)
        return out
    flat = out.reshape(len(out), -1)
    page = max(1, mmap.PAGESIZE // out.itemsize)

    def touch(r0):  # one write per page of rows not yet drawn into
        flat[r0:r0 + rows].reshape(-1)[::page] = 0.0

    with ThreadPoolExecutor(1) as pool:
        touched = [pool.submit(touch, r0) for r0 in starts]
        for r0, done in zip(starts, touched):
            done.result()
            fill(out=out[r0:r0 + rows])
    return out
