"""Sinusoidal position encodings (Vaswani et al., 2017, "Attention Is All You Need", §3.5)."""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from .base import Encoding, ParameterError
from .registry import register

__all__ = ["Sinusoidal", "sinusoidal_frequencies"]


def sinusoidal_frequencies(dim: int, *, base: float = 10000.0, spacing: str = "vaswani") -> np.ndarray:
    """Angular frequencies ω_i of a sinusoidal table, in radians per position.

    Parameters
    ----------
    dim : int
        Table width. There are ``ceil(dim / 2)`` frequencies: for odd ``dim``
        the last frequency has a sine column and no cosine column.
    base : float
        The wavelength scale (10000 in the paper).
    spacing : {"vaswani", "tensor2tensor"}
        ``vaswani``: ω_i = base^(−2i/dim), the paper's PE(pos, 2i) = sin(pos / base^(2i/d)).
        ``tensor2tensor``: ω_i = exp(−i · ln(base) / (n_freq − 1)) with
        n_freq = ceil(dim/2) (i.e. i/(d/2 − 1) for even d), as in tensor2tensor's
        ``get_timing_signal_1d``; the lowest frequency is exactly 1/base.

    Returns
    -------
    ndarray of shape (ceil(dim / 2),), float64, decreasing from 1.
    """
    n_freq = (dim + 1) // 2
    i = np.arange(n_freq, dtype=np.float64)
    if spacing == "vaswani":
        return base ** (-2.0 * i / dim)
    if spacing == "tensor2tensor":
        return np.exp(-i * np.log(base) / max(n_freq - 1, 1))
    raise ValueError(f"spacing must be 'vaswani' or 'tensor2tensor', got {spacing!r}")


@register
@dataclasses.dataclass(frozen=True)
class Sinusoidal(Encoding):
    """Fixed sinusoidal position table.

    Row ``p`` holds sin(p·ω_i) and cos(p·ω_i) for the frequencies of
    :func:`sinusoidal_frequencies`. For even ``dim`` the cosine similarity
    between positions at distance k is (2/d)·Σ_i cos(k·ω_i), independent of
    the layout; for odd ``dim`` the row norm varies with p, so similarity is
    computed from the vectors.

    Parameters
    ----------
    base : float
        Wavelength scale, > 1 (default 10000).
    layout : {"interleaved", "concatenated"}
        ``interleaved``: [sin ω_0, cos ω_0, sin ω_1, ...] as in the paper's
        PE(pos, 2i), PE(pos, 2i+1). ``concatenated``: [all sines, all cosines]
        as in tensor2tensor and many reimplementations.
    spacing : {"vaswani", "tensor2tensor"}
        Frequency spacing, see :func:`sinusoidal_frequencies`.
    """

    kind = "sinusoidal"

    base: float = 10000.0
    layout: Literal["interleaved", "concatenated"] = "interleaved"
    spacing: Literal["vaswani", "tensor2tensor"] = "vaswani"

    def _check_params(self):
        if not self.base > 1:
            raise ParameterError(f"sinusoidal: base must be > 1, got {self.base}")

    def _generate(self, n_positions, dim, rng):
        omega = sinusoidal_frequencies(dim, base=self.base, spacing=self.spacing)
        angles = np.arange(n_positions, dtype=np.int64)[:, None] * omega[None, :]
        sin, cos = np.sin(angles), np.cos(angles[:, : dim // 2])
        if self.layout == "concatenated":
            return np.concatenate([sin, cos], axis=1)
        table = np.empty((n_positions, dim))
        table[:, 0::2] = sin
        table[:, 1::2] = cos
        return table

    def _kernel(self, n_positions, max_distance, dim):
        """The exact cosine kernel (2/d)·Σ_i cos(k·ω_i) for even ``dim``; None for odd ``dim``.

        Every row is the pairs (sin pω_i, cos pω_i) of unit norm, whatever the
        layout or spacing (:func:`poslab.encodings.kernel.cosine_kernel`). An odd
        width has a lone sine column, so row norms vary with p and the
        similarity depends on p: the table is analysed (case C1).
        """
        if dim % 2:
            return None
        from .kernel import Kernel, cosine_kernel

        values = cosine_kernel(sinusoidal_frequencies(dim, base=self.base, spacing=self.spacing), max_distance)
        row = values[None, :]
        return Kernel("cosine", np.arange(max_distance + 1), row, row)
