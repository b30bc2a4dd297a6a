"""Example third-party encoding for poslab: random Fourier features of the position.

Row p is sqrt(2/D) · cos(ω_j · p + b_j), j = 1..D, with ω_j ~ N(0, 1/length_scale²)
and b_j ~ U[0, 2π) (Rahimi & Recht, "Random Features for Large-Scale Kernel
Machines", NeurIPS 2007). The dot product of two rows approximates the
Gaussian kernel exp(−k² / (2 · length_scale²)) of their distance k, so the
similarity profile is a Gaussian of width ``length_scale``: a decay fit can
be checked against it.

It becomes usable by ``kind = "random_fourier"`` in a study file either by
importing this module (``@register`` runs on import) or, installed as a
package, through the entry point declared in this folder's pyproject.toml.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from poslab.encodings import Encoding, ParameterError, register


@register
@dataclasses.dataclass(frozen=True)
class RandomFourier(Encoding):
    """Random Fourier features of the position (an RBF kernel of width ``length_scale``).

    Parameters
    ----------
    length_scale : float
        Width of the Gaussian kernel, in positions (> 0).
    """

    kind = "random_fourier"
    stochastic = True

    length_scale: float = 32.0

    def _check_params(self):
        if not self.length_scale > 0:
            raise ParameterError(f"random_fourier: length_scale must be > 0, got {self.length_scale}")

    def _generate(self, n_positions, dim, rng):
        omega = rng.normal(0.0, 1.0 / self.length_scale, size=dim)
        phase = rng.uniform(0.0, 2 * np.pi, size=dim)
        positions = np.arange(n_positions)[:, None]
        return np.sqrt(2.0 / dim) * np.cos(positions * omega + phase)
