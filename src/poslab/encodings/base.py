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
import functools
import typing
from typing import Any, ClassVar

import numpy as np

from .._validation import (Constraint, ValidationError, check, check_positive_int, check_table, constraint_for,
                           missing_message)

__all__ = ["Encoding", "ParameterError", "TableCost", "parameter"]

if typing.TYPE_CHECKING:
    from .kernel import Kernel


class ParameterError(ValidationError):
    """A hyperparameter has the wrong type or an invalid value."""


def parameter(default=dataclasses.MISSING, *, check: Constraint | None = None, doc: str = ""):
    """A hyperparameter field with an optional constraint beyond its annotation.

    ``length_scale: float = parameter(1.0, check=Real(minimum=1))`` checks the
    value (with the one message style of :mod:`poslab._validation`) when the
    encoding is built; ``doc`` is shown by ``poslab encodings``. Without
    ``check`` the annotation is the constraint.
    """
    metadata = {"check": check, "doc": doc}
    return dataclasses.field(default=default, metadata=metadata)


def _constraint(cls, field: dataclasses.Field, hints) -> Constraint:
    declared = field.metadata.get("check") if field.metadata else None
    return declared if declared is not None else constraint_for(hints.get(field.name, Any))


@functools.lru_cache(maxsize=None)
def _type_hints(cls) -> dict:
    """``typing.get_type_hints`` of an encoding class, once per class: it compiles every annotation, which made
    a 4,000-run grid take seconds to parse."""
    return typing.get_type_hints(cls)


@dataclasses.dataclass(frozen=True)
class TableCost:
    """What generating one table costs, declared before it is built (see :meth:`Encoding.table_cost`).

    Attributes
    ----------
    table_dim : int
        Width of the table produced (columns); 0 for an encoding without a table (a bias).
    peak_bytes : int
        Peak memory while generating it, in bytes, the finished table included.
    """

    table_dim: int
    peak_bytes: int


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
    generates_table : bool
        False for an encoding that has no position table, only a kernel (a
        relative bias: ALiBi, T5 buckets, KERPLE): :meth:`generate` refuses and
        :meth:`kernel` must return one.
    path_params : tuple of str
        Parameters holding file or folder paths: in a study file, relative
        paths that exist beside the study file are resolved against it.
    bundled_params : tuple of str
        Path parameters that also take a bundled name (:func:`poslab.data.bundled_name`): in a
        study file a bare bundled name that also exists beside the study file is refused as ambiguous.
    """

    kind: ClassVar[str] = ""
    stochastic: ClassVar[bool] = False
    keeps_own_dim: ClassVar[bool] = False
    generates_table: ClassVar[bool] = True
    path_params: ClassVar[tuple[str, ...]] = ()
    bundled_params: ClassVar[tuple[str, ...]] = ()

    #: What an omitted (None) parameter means, as ``poslab encodings`` prints it (e.g. rotary's
    #: ``rope_theta``: "from config, else 10000"); parameters not listed show their default.
    unset_defaults: ClassVar[dict[str, str]] = {}

    def __post_init__(self):
        hints = _type_hints(type(self))
        where = self.kind or type(self).__name__
        for field in dataclasses.fields(self):
            value = check(getattr(self, field.name), _constraint(type(self), field, hints), field.name, where=where,
                          error=ParameterError)
            object.__setattr__(self, field.name, value)
        self._check_params()

    @classmethod
    def expand_study_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Study-file shorthands of this kind, expanded before the parameter grid (default: none).

        Called with the ``[[encodings]]`` entry's parameters (without ``kind``
        and ``n_positions``); returns them with shorthands replaced, e.g.
        learned's ``step = "all"`` becomes the list of saved steps. Raise
        ValueError with what to write when a shorthand cannot be expanded.
        """
        return params

    @classmethod
    def check_required(cls, params: dict[str, Any]) -> None:
        """Raise ParameterError naming the first required parameter missing from ``params``, and what to write."""
        hints = _type_hints(cls)
        for field in dataclasses.fields(cls):
            required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
            if required and field.name not in params:
                doc = field.metadata.get("doc", "") if field.metadata else ""
                raise ParameterError(missing_message(cls.kind or cls.__name__, field.name,
                                                     _constraint(cls, field, hints), doc))

    # ----------------------------------------------------------------- hooks
    def _check_params(self) -> None:
        """Check relations between parameters; raise ParameterError. Optional hook."""

    def _check_size(self, n_positions: int, dim: int) -> None:
        """Refuse sizes the encoding cannot produce; raise ValueError. Optional hook."""

    def _check_window(self, n_positions: int, max_distance: int) -> None:
        """Refuse a largest analysed distance the encoding cannot give; raise ValueError. Optional hook
        (FIRE: no key lies farther behind its stated query than the query's own position)."""

    def _generate(self, n_positions: int, dim: int, rng: np.random.Generator | None) -> np.ndarray:
        raise NotImplementedError

    def _kernel(self, n_positions: int, max_distance: int, dim: int) -> Kernel | None:
        """The exact kernel by distance, or None to analyse the table. Optional hook (default None).

        Return a :class:`~poslab.encodings.kernel.Kernel` when what the encoding
        does between two positions depends on their distance alone and is known in
        closed form (sinusoidal, RoPE: the cosine kernel of their pairs; relative
        biases: their attention prior); None when it is not (a learned table, an
        odd-width sinusoidal table). Called with checked sizes.
        """
        return None

    def grid_shape(self, n_positions: int) -> tuple[int, ...] | None:
        """The grid whose points the positions are, or None for positions on a line (the default). Optional hook.

        ``(rows, cols)`` or ``(frames, rows, cols)``: row ``p`` of the table is the
        ``p``-th grid point in C order (for (T, H, W): ``p = (t * H + h) * W + w``).
        The ``grid`` stage (:mod:`poslab.stages.grid`) analyses every run whose
        encoding declares a grid on that grid; ``n_positions`` must be the number
        of grid points (refuse another in :meth:`_check_size`), and the 1-D stages
        do not apply (the flattened index is not a distance).
        """
        return None

    def table_cost(self, n_positions: int, dim: int) -> TableCost:
        """What :meth:`generate` will cost for ``(n_positions, dim)``, without building anything. Optional hook.

        The study checks it against the memory available before any run
        starts (:mod:`poslab.study.budget`). Default: a table of the study's
        ``dim`` and one temporary of its size (2 × 8 × n_positions × dim
        bytes). Override it when the table has its own width or generating
        it needs more (a buffer wider than the window, a file read whole).
        """
        return TableCost(table_dim=int(dim), peak_bytes=16 * int(n_positions) * int(dim))

    # ---------------------------------------------------------------- public
    def check_size(self, n_positions: int, dim: int, *, max_distance: int | None = None) -> None:
        """Raise ValueError if this encoding cannot produce ``(n_positions, dim)``, or be analysed up to
        ``max_distance`` (when given: the largest distance a run of this window analyses, < n_positions).

        Cheap (no table is built), so a study can refuse bad sizes before any work.
        """
        n_positions = check_positive_int(n_positions, "n_positions")
        dim = check_positive_int(dim, "dim")
        self._check_size(n_positions, dim)
        if max_distance is not None:
            self._check_window(n_positions, check_positive_int(max_distance, "max_distance", minimum=0))

    def kernel(self, n_positions: int, max_distance: int, dim: int) -> Kernel | None:
        """The exact kernel by distance when the encoding is translation-invariant; None: analyse the table.

        A run whose encoding has a kernel takes its profile, heatmap, properties
        and intervals from it (``profile_method = kernel`` in ``summary.csv``):
        O(max_distance · pairs) for a cosine kernel, no n × dim table, no FFT.

        Parameters
        ----------
        n_positions : int
            Positions of the window, >= 1 (dynamic and longrope RoPE depend on it).
        max_distance : int
            Largest distance, 0 <= max_distance < n_positions.
        dim : int
            The study's width (as for :meth:`generate`).

        Returns
        -------
        Kernel or None
            Values at key − query = ±0..max_distance per head, on the scale
            ``cosine`` (vector encodings) or ``attention_prior`` (biases);
            see :mod:`poslab.encodings.kernel`.

        Raises
        ------
        ValueError
            Bad sizes, a kernel for other distances, or no kernel from an
            encoding that has no table.
        """
        n_positions = check_positive_int(n_positions, "n_positions")
        dim = check_positive_int(dim, "dim")
        max_distance = check_positive_int(max_distance, "max_distance", minimum=0)
        if max_distance >= n_positions:
            raise ValueError(f"max_distance must be < n_positions = {n_positions}, got {max_distance}")
        self._check_size(n_positions, dim)
        kernel = self._kernel(n_positions, max_distance, dim)
        if kernel is None:
            if not self.generates_table:
                raise ValueError(f"{self.label} has no position table and returned no kernel")
            return None
        if kernel.max_distance != max_distance:
            raise ValueError(f"{self.label} returned a kernel up to distance {kernel.max_distance}, "
                             f"expected {max_distance}")
        return kernel

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
            Bad sizes, a missing ``rng`` for a stochastic encoding, a
            produced table of the wrong shape or with non-finite values, or an
            encoding without a table (``generates_table`` False: a relative bias).
        """
        self.check_size(n_positions, dim)
        if not self.generates_table:
            raise ValueError(f"{self.label} adds a bias to attention logits and has no position table: its kernel "
                             "is analysed instead (Encoding.kernel)")
        if self.stochastic and rng is None:
            raise ValueError(f"{self.kind} is stochastic: pass rng=np.random.default_rng(seed)")
        table = check_table(self._generate(int(n_positions), int(dim), rng), name=f"{self.label} table")
        if table.shape[0] != n_positions:
            raise ValueError(f"{self.label} produced {table.shape[0]} rows, expected n_positions={n_positions}")
        if not self.keeps_own_dim and table.shape[1] != dim:
            raise ValueError(f"{self.label} produced width {table.shape[1]}, expected dim={dim}")
        return table

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
        """What each hyperparameter accepts, in words (its constraint's description)."""
        hints = _type_hints(cls)
        return {f.name: _constraint(cls, f, hints).describe() for f in dataclasses.fields(cls)}

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
