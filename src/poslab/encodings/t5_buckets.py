"""T5 relative position buckets: a learned bias per head and bucket of the relative position.

Reference: Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer" (JMLR 21), section 2.1; the bucket rule is Mesh TensorFlow's
``_relative_position_bucket`` as transformers 5.24 implements it in
``models/t5/modeling_t5.py`` (``T5Attention._relative_position_bucket`` and ``compute_bias``).

For a query at position i and a key at position j the attention logit of head h gets
``bias[bucket(j − i), h]``. With rel = key − query:

- bidirectional (the encoder): half of the buckets are for rel > 0 (offset num_buckets // 2),
  half for rel ≤ 0, and n = |rel|;
- causal (the decoder): n = max(−rel, 0), so every key after the query falls in bucket 0
  (those keys are masked anyway);
- with B the buckets of one direction and max_exact = B // 2: n < max_exact is its own bucket;
  otherwise max_exact + ⌊ln(n / max_exact) / ln(max_distance / max_exact) · (B − max_exact)⌋,
  capped at B − 1, so every n ≥ max_distance shares the last bucket and the bias is constant
  beyond it.

The rule is evaluated in float64. transformers evaluates it in float32; the two differ only
where the float64 value lies within float32 rounding of an integer: over rel in [−1000, 1000]
that happened at one relative position in 3 of 3,996 random (num_buckets, max_distance,
direction) configurations (numpy seed 1, num_buckets 4–299, max_distance up to 3,000; measured
once with transformers 5.24) and never for the published ones (32 / 128, both directions) nor
the others of ``tests/hf/test_t5_buckets.py``.

The bias table comes from a checkpoint, a plain array or the shipped synthetic table
(:func:`poslab.checkpoints.relative.read_t5_bias`). T5 bidirectional buckets are not symmetric:
rel = +k and rel = −k fall in different buckets with different biases.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar, Literal

import numpy as np

from .._validation import AnyOf, Integer, NoneValue
from ..checkpoints.relative import RelativeBias, read_t5_bias
from .base import Encoding, ParameterError, TableCost, parameter
from .kernel import Kernel, attention_prior
from .registry import register

__all__ = ["T5Buckets", "T5Resolution", "relative_position_bucket", "t5_bias"]


def _check_rule(bidirectional: bool, num_buckets: int, max_distance: int) -> None:
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_direction // 2
    if max_exact < 1:
        raise ValueError(f"num_buckets = {num_buckets} is too few for {'bidirectional' if bidirectional else 'causal'} "
                         f"buckets: need at least {4 if bidirectional else 2}")
    if max_distance <= max_exact:
        raise ValueError(f"relative_attention_max_distance = {max_distance} must exceed the exact buckets "
                         f"(max_exact = {max_exact} with {num_buckets} {'bidirectional' if bidirectional else 'causal'}"
                         " buckets): the logarithmic buckets need ln(max_distance / max_exact) > 0")


def relative_position_bucket(relative_position, *, bidirectional: bool = True, num_buckets: int = 32,
                             max_distance: int = 128) -> np.ndarray:
    """T5's bucket of each relative position (key − query).

    Parameters
    ----------
    relative_position : array_like of int
        rel = key position − query position, any shape.
    bidirectional : bool
        True for the encoder (separate buckets for rel > 0), False for the decoder (causal: every
        rel > 0 is bucket 0).
    num_buckets : int
        ``relative_attention_num_buckets`` (32 in T5).
    max_distance : int
        ``relative_attention_max_distance`` (128 in T5): |rel| at or beyond it shares the last bucket.

    Returns
    -------
    ndarray of int64, the shape of ``relative_position``, values in [0, num_buckets).

    Raises
    ------
    TypeError
        Non-integer relative positions.
    ValueError
        Too few buckets, or ``max_distance`` not above the exact buckets (see the module docstring).

    Notes
    -----
    Source: transformers' ``T5Attention._relative_position_bucket`` (from Mesh TensorFlow),
    evaluated in float64; see the module docstring for where float32 differs.
    """
    rel = np.asarray(relative_position)
    if rel.dtype.kind not in "iu":
        raise TypeError(f"relative positions must be integers, got dtype {rel.dtype}")
    _check_rule(bidirectional, int(num_buckets), int(max_distance))
    rel = rel.astype(np.int64)
    if bidirectional:
        per_direction = num_buckets // 2
        offset = np.where(rel > 0, per_direction, 0)
        n = np.abs(rel)
    else:
        per_direction = num_buckets
        offset = 0
        n = np.maximum(-rel, 0)
    max_exact = per_direction // 2
    scaled = np.log(np.maximum(n, max_exact) / max_exact) / math.log(max_distance / max_exact)
    large = np.minimum(max_exact + np.floor(scaled * (per_direction - max_exact)).astype(np.int64), per_direction - 1)
    return offset + np.where(n < max_exact, n, large)


def t5_bias(bias, relative_position, *, bidirectional: bool = True, max_distance: int = 128) -> np.ndarray:
    """The bias each head adds to the attention logit at each relative position.

    Parameters
    ----------
    bias : array_like of shape (num_buckets, n_heads)
        The table (``relative_attention_bias.weight``).
    relative_position : array_like of int, shape S
        rel = key − query.
    bidirectional, max_distance
        See :func:`relative_position_bucket`; ``num_buckets`` is the table's rows.

    Returns
    -------
    ndarray of shape (n_heads, *S), float64: ``bias[bucket(rel), h]``, as transformers'
    ``T5Attention.compute_bias`` (which returns it as (1, n_heads, query, key)).
    """
    bias = np.asarray(bias, dtype=np.float64)
    if bias.ndim != 2:
        raise ValueError(f"bias must have shape (num_buckets, n_heads), got {bias.shape}")
    buckets = relative_position_bucket(relative_position, bidirectional=bidirectional, num_buckets=bias.shape[0],
                                       max_distance=max_distance)
    return np.moveaxis(bias[buckets], -1, 0)


@dataclasses.dataclass(frozen=True)
class T5Resolution:
    """What a :class:`T5Buckets` encoding uses, and where each value came from.

    Attributes
    ----------
    bias : ndarray of shape (num_buckets, n_heads), float64, read-only
    bidirectional : bool
    num_buckets : int
    max_distance : int
        ``relative_attention_max_distance``.
    stored : RelativeBias
        The table as read, with its tensor name, dtype, repo, revision and SHA-256.
    rules : tuple of str
        Every value nobody wrote, with its source (recorded in ``summary.csv``).
    """

    bias: np.ndarray
    bidirectional: bool
    num_buckets: int
    max_distance: int
    stored: RelativeBias
    rules: tuple[str, ...]

    @property
    def n_heads(self) -> int:
        return self.bias.shape[1]

    def bias_by_distance(self, max_distance: int) -> tuple[np.ndarray, np.ndarray]:
        """(forward, backward) biases, each of shape (n_heads, max_distance + 1): at rel = +k and rel = −k."""
        k = np.arange(int(max_distance) + 1)
        kw = dict(bidirectional=self.bidirectional, max_distance=self.max_distance)
        return t5_bias(self.bias, k, **kw), t5_bias(self.bias, -k, **kw)


@register
@dataclasses.dataclass(frozen=True)
class T5Buckets(Encoding):
    """T5 relative position buckets with a bias table from a checkpoint, an array file or the shipped table.

    Parameters
    ----------
    source : str
        ``t5-small-synthetic`` (default; also ``bundled:t5-small-synthetic``): a SYNTHETIC encoder
        table in t5-small's configuration (32 buckets, max_distance 128, 8 heads), shipped because
        no real T5 checkpoint can be downloaded here (``poslab/data/PROVENANCE.md``); a plain array
        file (``.npy``, or an ``.npz`` / ``.safetensors`` holding one array) of shape
        (num_buckets, n_heads); or a T5 / mT5 / UMT5 / Switch Transformers checkpoint: weights
        file, model folder, cache snapshot, Hub id (as ``learned source =``).
    stack : {"encoder", "decoder"} or None
        Which stack's table to read when the checkpoint has both; refused when ambiguous.
    key : str or None
        The tensor to read (UMT5: one block's table).
    relative_attention_max_distance : int or None
        Distance from which all relative positions share the last bucket. None: the config's (a
        checkpoint, the shipped table), else 128 (transformers' T5Config default, recorded).
        A value contradicting the checkpoint's config.json is refused.
    bidirectional : bool or None
        None: from the stack (encoder True, decoder False), else True (recorded). A value
        contradicting the stack is refused.

    Notes
    -----
    The number of buckets is the table's rows; the number of heads its columns. Keys after the
    query are masked in the causal decoder; its buckets put them in bucket 0.
    """

    kind = "t5_buckets"
    generates_table = False
    path_params = ("source",)
    unset_defaults: ClassVar[dict[str, str]] = {
        "stack": "the checkpoint's only stack (two tables: refused)",
        "key": "the table named *.relative_attention_bias.weight",
        "relative_attention_max_distance": "from config.json (or the shipped table), else 128 (T5Config default)",
        "bidirectional": "from the stack: encoder true, decoder false; a plain array true",
    }

    source: str = parameter("t5-small-synthetic", doc="shipped table name, array file, or T5-family checkpoint")
    stack: Literal["encoder", "decoder"] | None = None
    key: str | None = parameter(None, doc="the tensor to read")
    relative_attention_max_distance: int | None = parameter(
        None, check=AnyOf((Integer(minimum=2), NoneValue())), doc="|rel| from which the last bucket is shared")
    bidirectional: bool | None = None

    def _check_params(self):
        self.resolve()

    def stored(self) -> RelativeBias:
        """The bias table as read (memoised per file fingerprint)."""
        try:
            return read_t5_bias(self.source, stack=self.stack, key=self.key)
        except (ValueError, KeyError, FileNotFoundError) as exc:
            text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            if not text.startswith(str(self.source)):  # the reader's message names the file already: once is enough
                text = f"{self.source}: {text}"
            raise ParameterError(f"t5_buckets: source = {text}") from None

    def resolve(self) -> T5Resolution:
        """The table, direction and bucket rule used, with the rules applied.

        Raises
        ------
        ParameterError
            An unreadable or ambiguous source, a value contradicting the checkpoint, a bucket rule
            that cannot be evaluated (too few buckets, max_distance not above the exact buckets).
        """
        st = self.stored()
        rules = []
        if self.bidirectional is None:
            bidirectional = st.stack != "decoder"
            if st.stack is None:
                rules.append("bidirectional=true (no stack named: a plain array is read as an encoder table)")
        else:
            bidirectional = self.bidirectional
            if st.stack is not None and bidirectional != (st.stack == "encoder"):
                raise ParameterError(f"t5_buckets: bidirectional = {str(bidirectional).lower()} contradicts the "
                                     f"{st.stack} table {st.tensor} ({st.stack}s use "
                                     f"{'bidirectional' if st.stack == 'encoder' else 'causal'} buckets); remove it")
        if self.relative_attention_max_distance is None:
            max_distance = st.max_distance if st.max_distance is not None else 128
            if st.max_distance is None:
                rules.append("relative_attention_max_distance=128 (transformers' T5Config default; nothing in the "
                             "source says)")
        else:
            max_distance = self.relative_attention_max_distance
            if st.max_distance is not None and max_distance != st.max_distance:
                raise ParameterError(f"t5_buckets: relative_attention_max_distance = {max_distance} contradicts the "
                                     f"source's {st.max_distance} (its config); remove it")
        num_buckets = st.bias.shape[0]
        try:
            _check_rule(bidirectional, num_buckets, max_distance)
        except ValueError as exc:
            raise ParameterError(f"t5_buckets: {st.tensor}: {exc}") from None
        return T5Resolution(st.bias, bidirectional, num_buckets, max_distance, st, tuple(rules))

    def table_cost(self, n_positions: int, dim: int) -> TableCost:
        """No table: the kernel is (n_heads, max_distance + 1) twice."""
        return TableCost(table_dim=0, peak_bytes=4 * 8 * self.stored().bias.shape[1] * int(n_positions))

    def _kernel(self, n_positions, max_distance, dim):
        """The attention prior exp(b_h(k) − b_h(0)) of every head at rel = ±k (causal: keys before the query only)."""
        r = self.resolve()
        forward, backward = r.bias_by_distance(max_distance)
        backward = attention_prior(backward)
        if r.bidirectional:
            forward, direction = attention_prior(forward), "bidirectional"
        else:  # the decoder's buckets put keys after the query in bucket 0; the causal mask removes them
            forward = np.full_like(backward, np.nan)
            forward[:, 0] = 1.0
            direction = "causal"
        return Kernel("attention_prior", np.arange(max_distance + 1), forward, backward,
                      tuple(str(h) for h in range(r.n_heads)), direction)
