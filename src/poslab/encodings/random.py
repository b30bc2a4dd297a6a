"""The no-structure baseline: i.i.d. random position vectors."""

from __future__ import annotations

import dataclasses
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
            return rng.standard_normal((n_positions, dim))
        return rng.uniform(-1.0, 1.0, size=(n_positions, dim))
