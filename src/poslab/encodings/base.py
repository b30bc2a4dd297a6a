"""The encoding base class: a frozen dataclass of hyperparameters that generates a table.

Every encoding is a frozen dataclass whose fields are its hyperparameters
(keyword arguments with defaults). The public :meth:`Encoding.generate`
validates the arguments and the produced table; a subclass implements the one
private hook :meth:`Encoding._generate`. Field values are checked against
their annotations when the object is built, so a study file with a wrong type
or an invalid choice fails before any work.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np

from .._validation import check_positive_int, check_table

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Encoding", "ParameterError"]


class ParameterError(ValueError):
    """A hyperparameter has the wrong type or an invalid value."""


def _describe(tp) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "None (omit it)"
    return getattr(tp, "__name__", str(tp))


def _coerce(value, tp):
    """Return ``value`` converted to annotation ``tp`` or raise TypeError/ValueError."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(tp):
            try:
                return _coerce(value, arg)
            except (TypeError, ValueError):
                continue
        raise TypeError(f"expected {_describe(tp)}, got {value!r}")
    if origin is Literal:
        choices = typing.get_args(tp)
        if value not in choices or type(value) is not type(choices[0]):
            raise ValueError(f"expected {_describe(tp)}, got {value!r}")
        return value
    if tp is type(None):
        if value is not None:
            raise TypeError(f"expected None, got {value!r}")
        return None
    if tp is bool:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"expected bool (true/false), got {value!r}")
        return bool(value)
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            raise TypeError(f"expected int, got {value!r}")
        return int(value)
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"expected float, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"expected a finite float, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise TypeError(f"expected str, got {value!r}")
        return value
    return value  # unannotated or exotic types are taken as given


@dataclasses.dataclass(frozen=True)
class Encoding:
    """Base class of every positional encoding generator.

    Subclasses are frozen dataclasses declared with ``@register`` (see
    :mod:`poslab.encodings.registry`); their fields are the hyperparameters,
    all with defaults, annotated with ``int``, ``float``, ``str``, ``bool``,
    ``Literal[...]`` or ``X | None`` so that values can be checked.

    Class attributes
    ----------------
    kind : str
        Registry name, used as ``kind`` in study files and tables.
    stochastic : bool
        True if the table depends on the random generator; such encodings run
        once per study seed, deterministic ones once.
    keeps_own_dim : bool
        True if the table width is a property of the encoding (a learned
        table, a rotary table of ``rotary_dim``) rather than the study's ``dim``.
    path_params : tuple of str
        Parameters holding file or folder paths: in a study file, relative
        paths that exist beside the study file are resolved against it.
    """

    kind: ClassVar[str] = ""
    stochastic: ClassVar[bool] = False
    keeps_own_dim: ClassVar[bool] = False
    path_params: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            try:
                value = _coerce(value, hints.get(field.name, Any))
            except (TypeError, ValueError) as exc:
                raise ParameterError(
                    f"{self.kind or type(self).__name__}: parameter {field.name!r} {exc}"
                ) from None
            object.__setattr__(self, field.name, value)
        self._check_params()

    # ----------------------------------------------------------------- hooks
    def _check_params(self) -> None:
        """Check relations between parameters; raise ParameterError. Optional hook."""

    def _check_size(self, n_positions: int, dim: int) -> None:
        """Refuse sizes the encoding cannot produce; raise ValueError. Optional hook."""

    def _generate(self, n_positions: int, dim: int, rng: np.random.Generator | None) -> np.ndarray:
        raise NotImplementedError

    # ---------------------------------------------------------------- public
    def check_size(self, n_positions: int, dim: int) -> None:
        """Raise ValueError if this encoding cannot produce ``(n_positions, dim)``.

        Cheap (no table is built), so a study can refuse bad sizes before any work.
        """
        n_positions = check_positive_int(n_positions, "n_positions")
        dim = check_positive_int(dim, "dim")
        self._check_size(n_positions, dim)

    def generate(self, n_positions: int, dim: int, *, rng: np.random.Generator | None = None) -> np.ndarray:
        """Build the position table.

        Parameters
        ----------
        n_positions : int
            Number of positions (rows), >= 1. Row ``p`` is position ``p``.
        dim : int
            Embedding width requested by the study. Encodings with
            ``keeps_own_dim`` return their own width instead (a learned table,
            a rotary table of ``rotary_dim``).
        rng : numpy.random.Generator, optional
            Required by stochastic encodings.

        Returns
        -------
        ndarray of shape (n_positions, table_dim), float64, all finite.

        Raises
        ------
        ValueError
            Bad sizes, a missing ``rng`` for a stochastic encoding, or a
            produced table of the wrong shape or with non-finite values.
        """
        self.check_size(n_positions, dim)
        if self.stochastic and rng is None:
            raise ValueError(f"{self.kind} is stochastic: pass rng=np.random.default_rng(seed)")
        table = check_table(self._generate(int(n_positions), int(dim), rng), name=f"{self.label} table")
        if table.shape[0] != n_positions:
            raise ValueError(f"{self.label} produced {table.shape[0]} rows, expected n_positions={n_positions}")
        if not self.keeps_own_dim and table.shape[1] != dim:
            raise ValueError(f"{self.label} produced width {table.shape[1]}, expected dim={dim}")
        return table

    def run_info(self, n_positions: int) -> dict[str, Any]:
        """Extra ``summary`` columns describing how this run's table was obtained.

        Called after :meth:`generate` for the same ``n_positions``. Examples:
        the tensor a learned table came from and its original dtype; the
        length a dynamic RoPE scaling was evaluated at. Default: none.

        Returns
        -------
        dict mapping column name to a scalar.
        """
        return {}

    def run_tables(self, table: np.ndarray, n_positions: int) -> dict[str, pd.DataFrame]:
        """Extra per-run tables this kind reports beside the common analysis.

        Parameters
        ----------
        table : ndarray of shape (n_positions, table_dim)
            The table :meth:`generate` returned for this run.
        n_positions : int

        Returns
        -------
        dict mapping table name (written as ``NAME.csv``) to a DataFrame; the
        runner prepends the run's key columns (study, label, kind, parameters,
        seed). Default: none. Examples: ``inv_freq`` for rotary encodings.
        """
        return {}

    def params(self) -> dict[str, Any]:
        """Flat dict of every hyperparameter, the columns recorded in every output row."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def defaults(cls) -> dict[str, Any]:
        """Default value of each hyperparameter (``dataclasses.MISSING`` if required)."""
        out = {}
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
            else:
                out[f.name] = dataclasses.MISSING
        return out

    @classmethod
    def parameter_types(cls) -> dict[str, str]:
        """Human-readable annotation of each hyperparameter."""
        hints = typing.get_type_hints(cls)
        return {f.name: _describe(hints.get(f.name, Any)) for f in dataclasses.fields(cls)}

    @property
    def label(self) -> str:
        """Deterministic table key: kind plus sorted non-default ``k=v``.

        Integral floats print without ".0". Examples: ``sinusoidal``,
        ``rotary(rope_theta=500000, rotary_dim=128)``.
        """
        defaults = self.defaults()
        items = [
            f"{k}={_fmt(v)}"
            for k, v in sorted(self.params().items())
            if defaults.get(k, dataclasses.MISSING) is dataclasses.MISSING or v != defaults[k]
        ]
        return f"{self.kind}({', '.join(items)})" if items else self.kind


def _fmt(v) -> str:
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e16:
        return str(int(v))
    return str(v)
