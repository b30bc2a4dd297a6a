"""One place for checking what users hand to poslab, with one message style.

Every refusal reads ``WHERE: NAME must be EXPECTED, got GIVEN; WHAT TO DO``:
where the value came from (a study file and its entry, an encoding kind,
``poslab train``), the parameter's name, what was expected, what was given,
and, when it helps, what to write instead. Study files, encoding parameters,
analysis options and training options all go through :func:`check` with a
*constraint* object that both checks a value and describes what it accepts
(so the same text appears in error messages, ``poslab encodings`` and the
generated docs).

Modelled on scikit-learn's ``utils/_param_validation.py`` (constraint objects
such as ``Interval`` and ``StrOptions`` that check and describe themselves)
and ``utils/validation.py`` ``check_array`` (dtype, ndim and finiteness of
arrays in one function).

Examples
--------
>>> check(0, Integer(minimum=1), "heatmap_bins", where="s.toml: [analysis]")
Traceback (most recent call last):
...
poslab._validation.ValidationError: s.toml: [analysis]: heatmap_bins must be an integer >= 1, got 0
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import types
import typing
from typing import Any, Literal

import numpy as np

__all__ = [
    "ValidationError", "Constraint", "Integer", "Real", "Boolean", "Text", "Choice", "ListOf", "AnyOf", "NoneValue",
    "Anything", "check", "problem", "constraint_for", "example_for", "missing_message",
    "check_table", "check_positive_int",
]


class ValidationError(ValueError):
    """A value poslab refuses; the message names where it came from, what was expected, what was given and the fix."""


class _Mismatch(Exception):
    """Raised by a constraint that does not accept a value (caught by :func:`check`)."""

    def __init__(self, type_error: bool = False):
        super().__init__()
        self.type_error = type_error


def _given(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def problem(where: str, name: str, expected: str, value: Any = dataclasses.MISSING, fix: str = "") -> str:
    """The one message style: ``WHERE: NAME must be EXPECTED, got GIVEN; FIX``.

    Parameters
    ----------
    where : str
        Where the value came from (``"studies/x.toml: [[encodings]] entry 2 (kind = 'rotary')"``,
        ``"sinusoidal"``, ``"poslab train"``); empty to leave it out.
    name : str
        The parameter's name as the user wrote it.
    expected : str
        What is accepted (``"an integer >= 1"``); a constraint's :meth:`Constraint.describe`.
    value : optional
        What was given (its ``repr``); left out when not given.
    fix : str
        What to write instead, when that is not obvious from ``expected``.
    """
    text = f"{where}: " if where else ""
    text += f"{name} must be {expected}"
    if value is not dataclasses.MISSING:
        text += f", got {_given(value)}"
    if fix:
        text += f"; {fix}"
    return text


class Constraint:
    """What a value may be. :meth:`convert` returns the accepted value (e.g. an int as float) or raises."""

    def describe(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def convert(self, value):  # pragma: no cover - abstract
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__}: {self.describe()}>"


def _bound_text(minimum, maximum, open_min, open_max) -> str:
    if minimum is not None and maximum is not None:
        return f"in {'(' if open_min else '['}{minimum:g}, {maximum:g}{')' if open_max else ']'}"
    if minimum is not None:
        return f"{'>' if open_min else '>='} {minimum:g}"
    if maximum is not None:
        return f"{'<' if open_max else '<='} {maximum:g}"
    return ""


def _in_bounds(value, minimum, maximum, open_min, open_max) -> bool:
    if minimum is not None and (value < minimum or (open_min and value == minimum)):
        return False
    if maximum is not None and (value > maximum or (open_max and value == maximum)):
        return False
    return True


@dataclasses.dataclass(frozen=True, repr=False)
class Integer(Constraint):
    """An integer (not a bool), optionally within bounds."""

    minimum: int | None = None
    maximum: int | None = None

    def describe(self) -> str:
        bounds = _bound_text(self.minimum, self.maximum, False, False)
        return "an integer" + (f" {bounds}" if bounds else "")

    def convert(self, value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
            raise _Mismatch(type_error=True)
        if not _in_bounds(value, self.minimum, self.maximum, False, False):
            raise _Mismatch()
        return int(value)


@dataclasses.dataclass(frozen=True, repr=False)
class Real(Constraint):
    """A finite real number (ints accepted, stored as float), optionally within open or closed bounds."""

    minimum: float | None = None
    maximum: float | None = None
    open_min: bool = False
    open_max: bool = False

    def describe(self) -> str:
        bounds = _bound_text(self.minimum, self.maximum, self.open_min, self.open_max)
        return "a finite number" + (f" {bounds}" if bounds else "")

    def convert(self, value):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise _Mismatch(type_error=True)
        if not math.isfinite(value) or not _in_bounds(value, self.minimum, self.maximum, self.open_min, self.open_max):
            raise _Mismatch()
        return float(value)


@dataclasses.dataclass(frozen=True, repr=False)
class Boolean(Constraint):
    """``true`` or ``false`` (no 0/1, no strings)."""

    def describe(self) -> str:
        return "true or false"

    def convert(self, value):
        if not isinstance(value, (bool, np.bool_)):
            raise _Mismatch(type_error=True)
        return bool(value)


@dataclasses.dataclass(frozen=True, repr=False)
class Text(Constraint):
    """A string; ``what`` describes it (default ``"a string"``), ``test`` may refuse some."""

    what: str = "a string"
    test: typing.Callable[[str], bool] | None = None

    def describe(self) -> str:
        return self.what

    def convert(self, value):
        if not isinstance(value, str):
            raise _Mismatch(type_error=True)
        if self.test is not None and not self.test(value):
            raise _Mismatch()
        return value


@dataclasses.dataclass(frozen=True, repr=False)
class Choice(Constraint):
    """One of a few values (of the same type as the choices: ``1`` is not ``True``)."""

    choices: tuple

    def describe(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.choices)

    def convert(self, value):
        for choice in self.choices:
            if type(value) is type(choice) and value == choice:
                return choice
        raise _Mismatch()


@dataclasses.dataclass(frozen=True, repr=False)
class NoneValue(Constraint):
    """None (an omitted optional value)."""

    def describe(self) -> str:
        return "omitted (None)"

    def convert(self, value):
        if value is not None:
            raise _Mismatch(type_error=True)
        return None


@dataclasses.dataclass(frozen=True, repr=False)
class Anything(Constraint):
    """Any value, taken as given (unannotated parameters)."""

    def describe(self) -> str:
        return "any value"

    def convert(self, value):
        return value


@dataclasses.dataclass(frozen=True, repr=False)
class AnyOf(Constraint):
    """The first of several constraints that accepts the value."""

    options: tuple[Constraint, ...]

    def describe(self) -> str:
        text = " or ".join(c.describe() for c in self.options if not isinstance(c, NoneValue))
        return text + ", or omitted (None)" if any(isinstance(c, NoneValue) for c in self.options) else text

    def convert(self, value):
        type_error = True
        for option in self.options:
            try:
                return option.convert(value)
            except _Mismatch as exc:
                type_error &= exc.type_error
        raise _Mismatch(type_error)


@dataclasses.dataclass(frozen=True, repr=False)
class ListOf(Constraint):
    """A list (a TOML array) of items, converted to a tuple.

    ``min_length`` items at least; ``distinct`` refuses repeats.
    """

    item: Constraint
    min_length: int = 1
    distinct: bool = False

    def describe(self) -> str:
        size = "a non-empty list" if self.min_length == 1 else "a list" if self.min_length == 0 else \
            f"a list of at least {self.min_length} items"
        item = self.item.describe()
        return f"{size} of {'distinct ' if self.distinct else ''}values, each {item}"

    def convert(self, value):
        if not isinstance(value, (list, tuple)):
            raise _Mismatch(type_error=True)
        if len(value) < self.min_length:
            raise _Mismatch()
        out = tuple(self.item.convert(v) for v in value)
        if self.distinct and len(set(out)) != len(out):
            raise _Mismatch()
        return out


def check(value, constraint: Constraint, name: str, *, where: str = "", fix: str = "",
          error: type[Exception] = ValidationError):
    """Return ``value`` converted by ``constraint``, or raise ``error`` with the one message style.

    Parameters
    ----------
    value
        What the user gave.
    constraint : Constraint
        What is accepted.
    name : str
        The parameter's name, as the user wrote it.
    where : str
        Where it came from (file and entry, encoding kind, command).
    fix : str
        What to write instead, appended to the message.
    error : exception class
        Raised on refusal (default :class:`ValidationError`; e.g. ``ParameterError``, ``StudyError``).

    Raises
    ------
    error
        ``WHERE: NAME must be EXPECTED, got GIVEN; FIX``.
    """
    try:
        return constraint.convert(value)
    except _Mismatch:
        raise error(problem(where, name, constraint.describe(), value, fix)) from None


def constraint_for(annotation) -> Constraint:
    """The constraint an annotation stands for: ``int``, ``float``, ``str``, ``bool``,
    ``Literal[...]``, ``X | None`` (anything else: :class:`Anything`)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return AnyOf(tuple(constraint_for(a) for a in typing.get_args(annotation)))
    if origin is Literal:
        return Choice(typing.get_args(annotation))
    simple = {int: Integer(), float: Real(), str: Text(), bool: Boolean(), type(None): NoneValue()}
    return simple.get(annotation, Anything())


def example_for(constraint: Constraint) -> str:
    """A value to show in "write NAME = ..." advice, in TOML."""
    if isinstance(constraint, AnyOf):
        options = [c for c in constraint.options if not isinstance(c, NoneValue)]
        return example_for(options[0]) if options else '"..."'
    if isinstance(constraint, Choice):
        return _toml(constraint.choices[0])
    if isinstance(constraint, Integer):
        return str(max(constraint.minimum or 1, 1) if constraint.maximum is None else constraint.minimum or 0)
    if isinstance(constraint, Real):
        return "1.0" if constraint.minimum is None or constraint.minimum < 1 else f"{constraint.minimum + 1:g}"
    if isinstance(constraint, Boolean):
        return "true"
    if isinstance(constraint, ListOf):
        return f"[{example_for(constraint.item)}]"
    return '"..."'


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def missing_message(where: str, name: str, constraint: Constraint, what: str = "") -> str:
    """``WHERE: NAME is required (EXPECTED); write NAME = EXAMPLE`` for a required value that was not given."""
    text = f"{where}: " if where else ""
    text += f"{name} is required ({what or constraint.describe()}); write {name} = {example_for(constraint)}"
    return text


def check_positive_int(value, name: str, *, minimum: int = 1) -> int:
    """Return ``value`` as ``int`` if it is an integer ``>= minimum``.

    Raises
    ------
    TypeError
        If ``value`` is not an integer (bools are refused too).
    ValueError
        If ``value < minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} of type {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def check_table(table, *, name: str = "table", allow_nonfinite: bool = False) -> np.ndarray:
    """Return a position table as a C-contiguous float64 array of shape (n_positions, dim).

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
        Real-valued position vectors, one row per position.
    name : str
        What to call the array in error messages.
    allow_nonfinite : bool
        If False (default), NaN or inf anywhere is an error. The analysis
        functions pass True and handle such rows themselves (they are
        reported and excluded).

    Raises
    ------
    ValueError
        If the array is not 2-D, is empty, is complex or (unless allowed)
        holds non-finite values.
    """
    arr = np.asarray(table)
    if arr.dtype.kind == "c":
        raise ValueError(f"{name} must be real-valued, got complex dtype {arr.dtype}")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D of shape (n_positions, dim), got shape {arr.shape}; "
            "reshape it (a vision table of shape (1, N, d) is table[0])"
        )
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{name} must have at least one position and one dim, got shape {arr.shape}")
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    if not allow_nonfinite and not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr).all(axis=1))
        raise ValueError(
            f"{name} holds NaN or inf in {bad.size} row(s), first positions {bad[:10].tolist()}; "
            "fix the source table or drop those positions"
        )
    return arr
