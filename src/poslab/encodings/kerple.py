"""KERPLE: kernelized relative positional embedding (Chi, Fan, Ramadge & Rudnicky, NeurIPS 2022).

KERPLE adds to the attention logit of query i and key j a conditionally
positive definite kernel of the distance k = |i − j|, one per head, with two
learned parameters p, a > 0 (the paper's r₁, r₂):

``log``
    b(k) = −p·log(1 + a·k): on the ``attention_prior`` scale
    (:mod:`poslab.encodings.kernel`) exp(b(k) − b(0)) = (1 + a·k)^(−p), a power law.
``power``
    b(k) = −p·k^a with 0 < a ≤ 2 (conditionally positive definite only up to 2,
    the paper's Prop. 1): the prior exp(−p·k^a), a stretched exponential (a = 1:
    ALiBi with slope p).

The authors' implementation (chijames/KERPLE, its ``ParallelKerpleLog`` and
``ParallelKerplePower`` modules) draws
p ~ U(0, 2) and a ~ U(0, 1) per head and clamps both to ≥ 1e-2; the models are
causal (GPT-NeoX) decoders, so ``direction`` defaults to ``causal``. A study grids
over ``p`` and ``a`` (a list in the study file is one run per value).
"""

from __future__ import annotations

import dataclasses
from typing import Literal

import numpy as np

from .._validation import Real
from .base import Encoding, ParameterError, TableCost, parameter
from .kernel import Kernel, attention_prior
from .registry import register

__all__ = ["Kerple", "kerple_bias"]


def kerple_bias(distance, *, variant: str, p: float, a: float) -> np.ndarray:
    """KERPLE's bias at distances k (module docstring), in logit units.

    Parameters
    ----------
    distance : array_like of int, shape (m,)
        k = |i − j| >= 0, positions.
    variant : {"log", "power"}
    p, a : float
        The head's parameters (> 0; ``power``: a <= 2).

    Returns
    -------
    ndarray of shape (m,), float64; 0 at distance 0.
    """
    k = np.asarray(distance, dtype=np.float64)
    if variant == "log":
        return -p * np.log1p(a * k)
    if variant == "power":
        return -p * k**a
    raise ValueError(f"variant must be 'log' or 'power', got {variant!r}")


@register
@dataclasses.dataclass(frozen=True)
class Kerple(Encoding):
    """KERPLE's log or power kernel as an attention prior (module docstring; Chi et al. 2022).

    Parameters
    ----------
    variant : {"log", "power"}
        −p·log(1 + a·k) or −p·k^a.
    p : float
        Scale of the bias (r₁), > 0 (the reference clamps it to >= 0.01).
    a : float
        ``log``: the distance scale inside the logarithm; ``power``: the exponent, in (0, 2] (r₂).
    direction : {"causal", "bidirectional"}
        Keys covered: causal decoders (the paper's models) or both sides.
    """

    kind = "kerple"
    generates_table = False

    variant: Literal["log", "power"] = "log"
    p: float = parameter(1.0, check=Real(minimum=0, open_min=True), doc="scale of the bias (r1)")
    a: float = parameter(1.0, check=Real(minimum=0, open_min=True),
                         doc="log: distance scale; power: exponent in (0, 2] (r2)")
    direction: Literal["causal", "bidirectional"] = "causal"

    def _check_params(self):
        if self.variant == "power" and self.a > 2:
            raise ParameterError(f"kerple: the power kernel needs 0 < a <= 2 (conditionally positive definite, Chi "
                                 f"et al. 2022, Prop. 1), got a = {self.a}")

    def table_cost(self, n_positions, dim):
        return TableCost(table_dim=0, peak_bytes=4 * 8 * int(n_positions))

    def _kernel(self, n_positions, max_distance, dim):
        k = np.arange(max_distance + 1)
        backward = attention_prior(kerple_bias(k, variant=self.variant, p=self.p, a=self.a))[None, :]
        forward = backward
        if self.direction == "causal":
            forward = np.full_like(backward, np.nan)
            forward[:, 0] = 1.0
        return Kernel("attention_prior", k, forward, backward, heads=("0",), direction=self.direction,
                      head_parameters={"p": (self.p,), "a": (self.a,)})
