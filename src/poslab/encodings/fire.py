"""FIRE: Functional Interpolation for Relative Positions (Li et al. 2023, arXiv 2310.04418, ICLR 2024).

A learned function of the normalised distance, per head h, added to the attention logit of a
query at position i and a key at position j ≤ i (FIRE is used in causal decoders):

    b_h(i, j) = f_θ(ψ(i − j) / ψ(max(L, i))),   ψ(x) = log(c·x + 1),

f_θ an MLP 1 → width (ReLU) → n_heads, c > 0 and the threshold L learned. There is no official
code; the formula, the layer shapes and eps follow the paper (section 3.2, eq. 4) and the port in
mcleish7/arithmetic (``cramming/architectures/embeddings.py``, class ``FIRE``: ψ of |c·(i − j)|,
L = |L_multiplier · init_L|, eps = 1e-6 added to the denominator).

**Weights file** (``weights = PATH``): a ``.npz`` (or ``.safetensors``) with the arrays of that
module's ``state_dict`` (save it with ``np.savez(PATH, **{k: v.numpy() for k, v in
fire.state_dict().items()})``):

=================  ==================  ============================================
name               shape               meaning
=================  ==================  ============================================
``mlp.0.weight``   (width, 1)          first layer weight
``mlp.0.bias``     (width,)            first layer bias
``mlp.2.weight``   (n_heads, width)    output layer weight
``mlp.2.bias``     (n_heads,)          output layer bias
``c``              () or (1,)          log-transform scale c (0.1 at initialisation)
``init_L``         () or (1,)          threshold L before its multiplier (512)
``L_multiplier``   () or (1,)          learned multiplier of L (1 at initialisation)
=================  ==================  ============================================

Any other array in the file is refused (named), as is a missing one.

**How poslab analyses it.** FIRE depends on the query position i, not only on the distance:
for i ≤ L the normaliser is ψ(L) and b depends on i − j alone (translation invariant), beyond L
it stretches with i. poslab reports the kernel of one stated query, ``query_position`` (default:
the last position of the window, n_positions − 1, which sees every distance 0 .. n_positions − 1
behind it), as an attention prior exp(b_h(k) − b_h(0)) over keys k positions before it, and
records the query position used and whether the window lies within the translation-invariant
range (n_positions − 1 ≤ L). :func:`fire_bias` gives the full (n_heads, n, n) matrix for anyone
who wants it over a window.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np

from .._validation import AnyOf, Integer, NoneValue
from ..checkpoints.files import list_tensors, load_tensor
from .base import Encoding, ParameterError, TableCost, parameter
from .kernel import Kernel, attention_prior
from .registry import register

__all__ = ["Fire", "FireWeights", "read_fire_weights", "fire_bias", "FIRE_ARRAYS"]

#: name -> shape rule of the weights file (see the module docstring).
FIRE_ARRAYS = ("mlp.0.weight", "mlp.0.bias", "mlp.2.weight", "mlp.2.bias", "c", "init_L", "L_multiplier")
FIRE_EPS = 1e-6


@dataclasses.dataclass(frozen=True)
class FireWeights:
    """FIRE's MLP and scalars, float64.

    Attributes
    ----------
    w1 : ndarray of shape (width, 1)
    b1 : ndarray of shape (width,)
    w2 : ndarray of shape (n_heads, width)
    b2 : ndarray of shape (n_heads,)
    c : float
        Log-transform scale, > 0.
    threshold : float
        L = |L_multiplier · init_L|.
    """

    w1: np.ndarray
    b1: np.ndarray
    w2: np.ndarray
    b2: np.ndarray
    c: float
    threshold: float

    @property
    def n_heads(self) -> int:
        return self.w2.shape[0]

    def mlp(self, x) -> np.ndarray:
        """f_θ(x) for inputs of any shape S: returns (n_heads, *S)."""
        x = np.asarray(x, dtype=np.float64)
        hidden = np.maximum(x[..., None] * self.w1[:, 0] + self.b1, 0.0)  # (*S, width)
        return np.moveaxis(hidden @ self.w2.T + self.b2, -1, 0)


def read_fire_weights(path) -> FireWeights:
    """Read FIRE's weights from a ``.npz`` / ``.safetensors`` file (format: module docstring).

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        A missing, extra or wrongly shaped array, non-finite values, c ≤ 0 or L = 0.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"fire: weights file {path} does not exist (a .npz with {', '.join(FIRE_ARRAYS)})")
    names = {i.key for i in list_tensors(path)}
    missing, extra = [n for n in FIRE_ARRAYS if n not in names], sorted(names - set(FIRE_ARRAYS) - {None})
    if missing or extra:
        raise ValueError(f"fire: {path.name} must hold exactly the arrays {', '.join(FIRE_ARRAYS)} (FIRE's "
                         f"state_dict); missing: {', '.join(missing) or 'none'}; not understood: "
                         f"{', '.join(extra) or 'none'}")
    arrays = {n: np.asarray(load_tensor(path, n), dtype=np.float64) for n in FIRE_ARRAYS}
    for name, arr in arrays.items():
        if not np.isfinite(arr).all():
            raise ValueError(f"fire: {path.name}[{name}] holds non-finite values")
    w1, b1, w2, b2 = (arrays[n] for n in FIRE_ARRAYS[:4])
    width = b1.shape[0] if b1.ndim == 1 else -1
    shapes_ok = (w1.shape == (width, 1) and b1.ndim == 1 and w2.ndim == 2 and w2.shape[1] == width
                 and b2.shape == (w2.shape[0],) and w2.shape[0] >= 1)
    if not shapes_ok:
        raise ValueError(f"fire: {path.name}: shapes mlp.0.weight {w1.shape}, mlp.0.bias {b1.shape}, mlp.2.weight "
                         f"{w2.shape}, mlp.2.bias {b2.shape}; expected (width, 1), (width,), (n_heads, width), "
                         "(n_heads,)")
    scalars = {}
    for name in FIRE_ARRAYS[4:]:
        if arrays[name].size != 1:
            raise ValueError(f"fire: {path.name}[{name}] has shape {arrays[name].shape}; expected a scalar")
        scalars[name] = float(arrays[name].reshape(()))
    if scalars["c"] <= 0:
        raise ValueError(f"fire: {path.name}[c] = {scalars['c']}; FIRE's ψ(x) = log(c·x + 1) needs c > 0")
    threshold = abs(scalars["L_multiplier"] * scalars["init_L"])
    if threshold == 0:
        raise ValueError(f"fire: {path.name}: the threshold L = |L_multiplier · init_L| is 0")
    return FireWeights(w1, b1, w2, b2, scalars["c"], threshold)


def _psi(x, c):
    return np.log(np.abs(c * np.asarray(x, dtype=np.float64)) + 1.0)


def fire_bias(weights: FireWeights, query_positions, key_positions) -> np.ndarray:
    """b_h(i, j) = f_θ(ψ(i − j) / (ψ(max(L, i)) + eps)) for every query i and key j.

    Parameters
    ----------
    weights : FireWeights
    query_positions, key_positions : array_like of int, shapes (q,) and (k,)

    Returns
    -------
    ndarray of shape (n_heads, q, k), float64. Causal models mask keys after the query (j > i);
    their values here follow the formula (ψ of |i − j|).
    """
    i = np.asarray(query_positions, dtype=np.float64)
    j = np.asarray(key_positions, dtype=np.float64)
    normaliser = _psi(np.maximum(i, weights.threshold), weights.c)[:, None] + FIRE_EPS
    return weights.mlp(_psi(i[:, None] - j[None, :], weights.c) / normaliser)


@register
@dataclasses.dataclass(frozen=True)
class Fire(Encoding):
    """FIRE (Li et al. 2023) with given MLP weights, analysed at one stated query position.

    Parameters
    ----------
    weights : str
        A ``.npz`` (or ``.safetensors``) holding FIRE's state_dict (format: module docstring).
    query_position : int or None
        The query whose kernel is reported: keys 0 .. query_position behind it. None: the last
        position of the window, n_positions − 1.
    """

    kind = "fire"
    generates_table = False
    path_params = ("weights",)
    unset_defaults = {"query_position": "the last position of the window, n_positions - 1"}

    weights: str = parameter(doc="a .npz holding FIRE's state_dict: mlp.0.weight, mlp.0.bias, mlp.2.weight, "
                                 "mlp.2.bias, c, init_L, L_multiplier")
    query_position: int | None = parameter(None, check=AnyOf((Integer(minimum=0), NoneValue())),
                                           doc="the query whose kernel is reported")

    def _check_params(self):
        self.read()

    def read(self) -> FireWeights:
        """The weights (read once per file state)."""
        path = Path(self.weights).expanduser()
        stamp = (path.stat().st_mtime_ns, path.stat().st_size) if path.is_file() else None
        try:
            return _read_cached(str(path.absolute()), stamp)
        except (ValueError, FileNotFoundError) as exc:
            raise ParameterError(f"fire: weights = {self.weights!r}: {str(exc).removeprefix('fire: ')}") from None

    def query(self, n_positions: int) -> int:
        """The query position used in a window of ``n_positions``."""
        return int(n_positions) - 1 if self.query_position is None else self.query_position

    def _check_size(self, n_positions, dim):
        if self.query_position is not None and self.query_position >= n_positions:
            raise ValueError(f"fire: query_position = {self.query_position} lies outside the window of "
                             f"n_positions = {n_positions}; give one below it (or omit it: the last position)")

    def _check_window(self, n_positions, max_distance):
        i = self.query(n_positions)
        if max_distance > i:
            raise ValueError(f"fire: query_position = {i} and max_distance = {max_distance}: the run analyses keys "
                             f"up to {max_distance} positions behind the query, but none lies more than {i} behind "
                             f"it; give query_position >= {max_distance} (or leave it out: the last position, "
                             f"{int(n_positions) - 1}), or max_distance <= {i}")

    def bias_by_distance(self, n_positions: int, max_distance: int) -> np.ndarray:
        """b_h(i, i − k) for the stated query i and k = 0 .. max_distance, shape (n_heads, max_distance + 1).

        Raises
        ------
        ValueError
            ``max_distance`` beyond the query (no key lies that far behind it).
        """
        i = self.query(n_positions)
        if max_distance > i:
            raise ValueError(f"fire: max_distance = {max_distance} reaches past position 0 from the query at {i}; "
                             f"analyse at most max_distance = {i}, or a later query_position")
        k = np.arange(int(max_distance) + 1)
        return fire_bias(self.read(), [i], i - k)[:, 0, :]

    def table_cost(self, n_positions: int, dim: int) -> TableCost:
        """No table: the MLP's hidden layer over the distances, and the kernel."""
        w = self.read()
        return TableCost(table_dim=0, peak_bytes=8 * (w.w1.shape[0] + 4 * w.n_heads) * int(n_positions))

    def invariant_within(self, n_positions: int) -> bool:
        """Whether every query of the window has the same normaliser ψ(L) (n_positions − 1 ≤ L), so that the
        bias depends on the distance alone there."""
        return int(n_positions) - 1 <= self.read().threshold

    def _kernel(self, n_positions, max_distance, dim):
        """The attention prior exp(b_h(i, i − k) − b_h(i, i)) at the stated query i; causal."""
        backward = attention_prior(self.bias_by_distance(n_positions, max_distance))
        forward = np.full_like(backward, np.nan)
        forward[:, 0] = 1.0
        return Kernel("attention_prior", np.arange(max_distance + 1), forward, backward,
                      tuple(str(h) for h in range(backward.shape[0])), "causal")


@functools.lru_cache(maxsize=8)
def _read_cached(path: str, stamp) -> FireWeights:
    return read_fire_weights(path)
