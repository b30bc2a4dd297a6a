"""A null model with known truth: Gaussian noise smoothed along positions.

Its expected similarity profile is known in closed form, so decay fits and
their confidence intervals can be checked against the truth.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .base import Encoding, ParameterError, TableCost
from .registry import register

__all__ = ["SmoothedRandom"]

#: Kernel half-width in units of ``length_scale`` (scipy's default ``truncate``).
TRUNCATE = 4.0

#: The largest ``length_scale`` allowed, in windows (n_positions): beyond it the expected profile stays above
#: exp(−1/64) = 0.984 across the whole window, i.e. it no longer decays there, and the noise drawn grows with σ.
MAX_WINDOWS = 4

#: Bytes of one FFT temporary per block of columns (the filter works a block of columns at a time).
_BLOCK_BYTES = 2**25


@register
@dataclasses.dataclass(frozen=True)
class SmoothedRandom(Encoding):
    """I.i.d. N(0, 1) noise filtered along positions with a Gaussian kernel, seeded per run.

    Each of the ``dim`` columns is white noise z[p] filtered along the
    position axis p with the kernel of :func:`scipy.ndimage.gaussian_filter1d`
    (g(m) ∝ exp(−m² / (2 σ²)), σ = ``length_scale`` positions, normalised to sum 1,
    cut at |m| ≤ r = round(4 σ), scipy's ``truncate = 4``): x[p] = Σ_{|m| ≤ r} g(m) z[p − m].
    The sum is computed in the Fourier domain (the linear convolution as a
    product of real FFTs of length ≥ n_positions + 4r, so nothing wraps
    around), which costs O((n + 4r) log(n + 4r)) per column whatever σ,
    where the direct sum of scipy costs O((n + 2r) · 2r). It is the same
    sum: the tables equal ``gaussian_filter1d``'s on the same noise to
    rounding (≲ 1e-15), and every seed draws the same noise as before.

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

    Cost: the noise is n_positions + 2r rows of ``dim`` float64, so σ is
    limited to ``MAX_WINDOWS`` (4) × n_positions (at most about 33 windows
    of noise): a larger σ is refused before any work (the expected profile
    would stay above 0.984 across the window). :meth:`table_cost` declares
    the peak memory, which the study checks up front.

    Parameters
    ----------
    length_scale : float
        σ, the kernel's standard deviation in positions (>= 1, <= 4 × n_positions).
    """

    kind = "smoothed_random"
    stochastic = True

    length_scale: float = 16.0

    def _check_params(self) -> None:
        if self.length_scale < 1.0:
            raise ParameterError(
                f"smoothed_random: parameter 'length_scale' must be >= 1 position, got {self.length_scale!r} "
                "(below 1 the sampled Gaussian kernel no longer has the closed-form profile)")

    def _check_size(self, n_positions, dim):
        if self.length_scale > MAX_WINDOWS * n_positions:
            raise ParameterError(
                f"smoothed_random: length_scale = {self.length_scale:.10g} positions is more than {MAX_WINDOWS} × "
                f"n_positions = {MAX_WINDOWS * n_positions}: over a window of {n_positions} positions its expected "
                f"profile exp(−k²/(4σ²)) would not fall below 0.984, and the noise drawn grows with σ. Write "
                f"length_scale <= {MAX_WINDOWS * n_positions}, or a larger n_positions")

    def _sizes(self, n_positions: int) -> tuple[int, int]:
        """(rows of noise drawn, FFT length): n + 2r rows; a real-FFT size >= n + 4r, so no sum wraps around."""
        import scipy.fft  # here, not at import: poslab.encodings loads without scipy

        rows = n_positions + 2 * self.radius
        return rows, scipy.fft.next_fast_len(rows + 2 * self.radius, real=True)

    def table_cost(self, n_positions, dim):
        """The noise (n + 2r rows), the table, the kernel's spectrum and two FFT temporaries of one block of columns."""
        rows, length = self._sizes(n_positions)
        block = self._block(length, dim)
        return TableCost(table_dim=int(dim),
                         peak_bytes=8 * rows * dim + 8 * n_positions * dim + 16 * length + 2 * 8 * length * block)

    @staticmethod
    def _block(length: int, dim: int) -> int:
        return max(1, min(dim, _BLOCK_BYTES // (8 * length)))

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

    def smoothing_kernel(self) -> np.ndarray:
        """g(m) for m = −r..r, shape (2r + 1,): exp(−m² / (2σ²)) normalised to sum 1 (scipy's Gaussian kernel)."""
        m = np.arange(-self.radius, self.radius + 1, dtype=float)
        g = np.exp(-0.5 * (m / self.length_scale) ** 2)
        return g / g.sum()

    def _generate(self, n_positions, dim, rng):
        import scipy.fft

        r = self.radius
        rows, length = self._sizes(n_positions)
        noise = rng.standard_normal((rows, dim))
        spectrum = scipy.fft.rfft(self.smoothing_kernel(), length)[:, None]
        table = np.empty((n_positions, dim))
        block = self._block(length, dim)
        for start in range(0, dim, block):  # the full linear convolution's rows 2r .. 2r + n − 1 are x[r .. r + n − 1]
            cols = slice(start, start + block)
            full = scipy.fft.irfft(scipy.fft.rfft(noise[:, cols], length, axis=0) * spectrum, length, axis=0)
            table[:, cols] = full[2 * r : 2 * r + n_positions]
        return table
