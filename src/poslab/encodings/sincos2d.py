"""The fixed 2-D sin-cos table of MAE-style vision encoders: half the dims per axis.

MAE (He et al. 2022, ``util/pos_embed.py`` ``get_2d_sincos_pos_embed``) and
its descendants encode patch (h, w) of an H × W grid with D/4 frequencies
ω_i = base^(−i/(D/4)), i < D/4, and the columns

    [sin(w ω) | cos(w ω) | sin(h ω) | cos(h ω)]

(MAE's ``meshgrid(w, h)`` makes the half it calls ``emb_h`` encode w;
transformers' ViT-MAE keeps that order for the pretrained weights:
``build_2d_sinusoidal_position_embedding`` then its halves swapped). Every
row has norm √(D/2), and the cosine similarity of two patches is separable:
cos-sim(Δh, Δw) = ½ [f(Δh) + f(Δw)] with f(k) = (1/(D/4)) Σ_i cos(k ω_i) the
1-D sinusoidal profile of D/2 dims.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import Real, Text
from ..analysis.grid import parse_grid_shape
from .axial import check_grid_size, grid_points
from .base import Encoding, parameter
from .registry import register

__all__ = ["Sincos2D", "sincos2d_table"]


def sincos2d_table(coords, dim: int, base: float = 10000.0) -> np.ndarray:
    """MAE's 2-D sin-cos rows for (h, w) coordinates.

    Parameters
    ----------
    coords : array_like of int, shape (n, 2)
        (h, w) of each patch.
    dim : int
        Width D, a multiple of 4.
    base : float
        ω_i = base^(−i/(D/4)).

    Returns
    -------
    ndarray of shape (n, dim), float64: [sin wω | cos wω | sin hω | cos hω].
    """
    if dim % 4:
        raise ValueError(f"sincos2d: dim must be a multiple of 4 (sin and cos of D/4 frequencies per axis), got {dim}")
    q = dim // 4
    omega = base ** (-np.arange(q, dtype=np.float64) / q)
    coords = np.asarray(coords, dtype=np.int64)
    w = coords[:, 1].astype(np.float64)[:, None] * omega
    h = coords[:, 0].astype(np.float64)[:, None] * omega
    return np.concatenate([np.sin(w), np.cos(w), np.sin(h), np.cos(h)], axis=1)


def _is_2d_grid(text: str) -> bool:
    try:
        parse_grid_shape(text, axes=(2,))
    except ValueError:
        return False
    return True


@register
@dataclasses.dataclass(frozen=True)
class Sincos2D(Encoding):
    """MAE's fixed 2-D sin-cos table on an H × W patch grid (half the dims per axis).

    Parameters
    ----------
    grid : str
        ``"HxW"``: the positions are the patches in raster order (required).
    base : float
        Frequency base (10000 in MAE), > 1.

    Notes
    -----
    The study's ``dim`` is the width and must be a multiple of 4. Source: MAE ``util/pos_embed.py``;
    transformers' ``build_2d_sinusoidal_position_embedding`` (ViT-MAE) is the test oracle.
    """

    kind = "sincos2d"

    grid: str = parameter(check=Text("a grid 'HxW' of positive integers, e.g. '14x14'", test=_is_2d_grid), doc='"HxW" patch grid; the positions are its patches in raster order')
    base: float = parameter(10000.0, check=Real(minimum=1, open_min=True))

    def grid_shape(self, n_positions: int) -> tuple[int, int]:
        return parse_grid_shape(self.grid)

    def _check_size(self, n_positions, dim):
        check_grid_size(self.label, self.grid_shape(n_positions), n_positions)
        if dim % 4:
            raise ValueError(f"{self.label}: dim={dim} is not a multiple of 4 (sin and cos of dim/4 frequencies per "
                             "axis); use a dim divisible by 4")

    def _generate(self, n_positions, dim, rng):
        return sincos2d_table(grid_points(self.grid_shape(n_positions), n_positions), dim, self.base)
