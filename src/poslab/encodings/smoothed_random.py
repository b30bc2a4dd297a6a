"""A null model with known truth: Gaussian noise smoothed along positions.

Its expected similarity profile is known in closed form, so decay fits and
their confidence intervals can be checked against the truth.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.ndimage import gaussian_filter1d

from .base import Encoding, ParameterError
from .registry import register

__all__ = ["SmoothedRandom"]

#: Kernel half-width in units of ``length_scale`` (scipy's default ``truncate``).
TRUNCATE = 4.0


@register
@dataclasses.dataclass(frozen=True)
class SmoothedRandom(Encoding):
    """I.i.d. N(0, 1) noise filtered along positions with a Gaussian kernel, seeded per run.

    Each of the ``dim`` columns is white noise z[p] filtered along the
    position axis p with :func:`scipy.ndimage.gaussian_filter1d` (kernel
    g(m) ∝ exp(−m² / (2 σ²)), σ = ``length_scale`` positions, normalised to sum 1,
    cut at |m| ≤ r = round(4 σ), scipy's ``truncate = 4``).

    Expected similarity profile
    ---------------------------
    A filtered white noise x = g * z has autocorrelation
    ρ(k) = Σ_m g(m) g(m + k) / Σ_m g(m)²; for the continuous Gaussian kernel
    this is exactly ::

        ρ(k) = exp(−k² / (4 σ²))            (k = distance in positions)

    (the kernel convolved with itself is a Gaussian of variance 2σ²). The
    cosine similarity of rows i and i + k is the uncentred sample correlation
    of ``dim`` independent pairs with correlation ρ(k); by the delta method
    E[S[i, i+k]] = ρ(k) · (1 − (1 − ρ(k)²) / (2 dim)) + O(dim⁻²) and its
    variance per pair is (1 − ρ(k)²)² / dim + O(dim⁻²). So for large dim the
    expected profile is ρ(k) (bias at most 0.19 / dim, 2.5e-4 at dim 768), a
    Gaussian decay with amplitude 1, asymptote 0, the ``gaussian`` model's
    sigma = √2 σ, and **decay length 2 σ** (ρ = 1/e at k = 2σ).

    Discretisation and truncation: for σ ≥ 1 the sampled, truncated kernel's
    autocorrelation differs from exp(−k² / (4σ²)) by less than 2e-4 at every
    k (checked numerically; ρ is exactly 0 beyond k = 2r); for σ < 1 the
    sampled kernel is too coarse (0.1 at σ = 0.5), so σ ≥ 1 is required.

    Boundaries: no boundary mode is used at all. The noise is drawn for
    n_positions + 2r positions, filtered, and the middle n_positions are kept,
    so every kept value sees a full kernel of genuine noise and the table is
    exactly stationary: E[S[i, i+k]] depends on k only (scipy's default
    ``mode="reflect"`` would correlate the first and last r positions with
    their mirror images, and ``"wrap"`` would make positions 0 and
    n_positions − 1 neighbours, so the profile would rise again near the
    largest distances).

    Parameters
    ----------
    length_scale : float
        σ, the kernel's standard deviation in positions (>= 1).
    """

    kind = "smoothed_random"
    stochastic = True

    length_scale: float = 16.0

    def _check_params(self) -> None:
        if self.length_scale < 1.0:
            raise ParameterError(
                f"smoothed_random: parameter 'length_scale' must be >= 1 position, got {self.length_scale!r} "
                "(below 1 the sampled Gaussian kernel no longer has the closed-form profile)")

    @property
    def radius(self) -> int:
        """Kernel half-width r in positions, as scipy computes it: int(4 σ + 0.5)."""
        return int(TRUNCATE * self.length_scale + 0.5)

    @property
    def decay_length(self) -> float:
        """The expected profile's decay length, 2 σ positions (large-dim limit)."""
        return 2.0 * self.length_scale

    def expected_similarity(self, distance) -> np.ndarray:
        """Closed-form expected profile exp(−k² / (4σ²)) at ``distance`` k (positions, any shape)."""
        k = np.asarray(distance, dtype=float)
        return np.exp(-(k**2) / (4.0 * self.length_scale**2))

    def _generate(self, n_positions, dim, rng):
        r = self.radius
        noise = rng.standard_normal((n_positions + 2 * r, dim))
        smooth = gaussian_filter1d(noise, self.length_scale, axis=0, mode="constant", truncate=TRUNCATE)
        return np.ascontiguousarray(smooth[r : r + n_positions])
