"""Name → class registry of encodings, fed by built-ins and the ``poslab.encodings`` entry points.

Modelled on fsspec's ``registry.py`` and xarray's ``backends/plugins.py``:
clashes are refused, a broken third-party plugin is warned about and skipped,
and an unknown kind lists the installed ones.
"""

from __future__ import annotations

import importlib.metadata
import warnings

from .base import Encoding

__all__ = [
    "ENTRY_POINT_GROUP",
    "register",
    "unregister",
    "get_encoding_class",
    "available_encodings",
    "make_encoding",
]

ENTRY_POINT_GROUP = "poslab.encodings"

_REGISTRY: dict[str, type[Encoding]] = {}
_entry_points_loaded = False


def register(cls: type[Encoding]) -> type[Encoding]:
    """Class decorator: add an :class:`Encoding` subclass under ``cls.kind``.

    Raises
    ------
    TypeError
        If ``cls`` is not a dataclass subclass of Encoding with a ``kind``.
    ValueError
        If another class already holds that kind, or a parameter is named
        like an output column (the tables that have it are named).
    """
    if isinstance(cls, type) and cls.__module__.startswith(f"{__package__}."):
        # a built-in: the conformance suite checks its parameters against the output columns
        # (tests/encodings/test_generic.py, every built-in); importing the stages here would load pandas
        # and scipy into every ``import poslab.encodings``, e.g. ``poslab encodings``
        _check_dataclass(cls)
    else:
        check_class(cls)
    stale = [h for h in ("run_info", "run_tables") if any(h in vars(c) for c in cls.__mro__ if c is not object)]
    if stale:  # the hooks of poslab < issue 12: what a study measures is a stage now
        warnings.warn(f"{_qualname(cls)} defines {', '.join(stale)}, which poslab no longer reads: extra summary "
                      "columns and tables come from analysis stages (README, 'Adding an analysis')", UserWarning,
                      stacklevel=2)
    held = _REGISTRY.get(cls.kind)
    if held is not None and held is not cls and _qualname(held) != _qualname(cls):
        raise ValueError(
            f"encoding kind {cls.kind!r} is already registered by {_qualname(held)}; "
            f"choose another kind for {_qualname(cls)} or unregister the old one"
        )
    _REGISTRY[cls.kind] = cls
    return cls


def check_class(cls) -> None:
    """Raise TypeError / ValueError unless ``cls`` can be registered (whatever is registered already).

    A frozen dataclass subclass of :class:`Encoding` with a ``kind``, and no
    parameter named like an output column.
    """
    _check_dataclass(cls)
    clash = {p: tables for p in cls.defaults() if (tables := _column_tables(p))}
    if clash:
        named = "; ".join(f"{p} (a column of {', '.join(f'{t}.csv' for t in tables)})" for p, tables in clash.items())
        raise ValueError(f"{cls.__name__} has parameter(s) named like output columns: {named}. Every parameter "
                         "becomes a key column of every table, so rename them")


def _check_dataclass(cls) -> None:
    """Raise TypeError unless ``cls`` is a frozen dataclass subclass of :class:`Encoding` with a ``kind``."""
    if not (isinstance(cls, type) and issubclass(cls, Encoding)):
        raise TypeError(f"register expects a subclass of poslab.encodings.Encoding, got {cls!r}")
    if not cls.kind or not isinstance(cls.kind, str):
        raise TypeError(f"{cls.__name__} must set a class attribute kind = 'name'")
    if "__dataclass_fields__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} must be decorated with @dataclasses.dataclass(frozen=True)")
    if not cls.__dataclass_params__.frozen:
        raise TypeError(f"{cls.__name__} must be decorated with @dataclasses.dataclass(frozen=True), not frozen=False")


def reserved_columns() -> set[str]:
    """Column names of the output tables, which encoding parameters may not take (families as their pattern,
    e.g. the band widths; see :func:`poslab.stages.reserved_columns`)."""
    from ..stages import reserved_columns as columns

    return set(columns())


def _column_tables(name: str) -> tuple[str, ...]:
    from ..stages import column_tables

    return column_tables(name)


def unregister(kind: str) -> None:
    """Remove ``kind`` from the registry (no error if absent)."""
    _REGISTRY.pop(kind, None)


def _qualname(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def load_entry_points(*, force: bool = False) -> None:
    """Import and register third-party encodings from the ``poslab.encodings`` group.

    A plugin that fails to import, is not an Encoding, or clashes with a
    registered kind raises a ``RuntimeWarning`` and is skipped.
    """
    global _entry_points_loaded
    if _entry_points_loaded and not force:
        return
    _entry_points_loaded = True
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            cls = ep.load()
            if cls.kind != ep.name:
                raise ValueError(f"entry point name {ep.name!r} differs from the class kind {cls.kind!r}")
            register(cls)
        except Exception as exc:  # a broken plugin must not break poslab
            warnings.warn(
                f"skipping poslab encoding plugin {ep.name!r} ({ep.value}): {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=2,
            )


def available_encodings() -> dict[str, type[Encoding]]:
    """Every registered kind → class, built-ins and plugins, sorted by kind."""
    load_entry_points()
    return dict(sorted(_REGISTRY.items()))


def get_encoding_class(kind: str) -> type[Encoding]:
    """Return the class registered as ``kind``.

    Raises
    ------
    KeyError
        If no such kind is installed; the message lists the installed kinds.
    """
    classes = available_encodings()
    try:
        return classes[kind]
    except KeyError:
        raise KeyError(
            f"unknown encoding kind {kind!r}; installed kinds: {', '.join(classes)}. "
            f"Third-party kinds register through the entry-point group {ENTRY_POINT_GROUP!r}"
        ) from None


def make_encoding(kind: str, **params) -> Encoding:
    """Build the encoding ``kind`` with hyperparameters ``params``.

    Raises
    ------
    KeyError
        Unknown kind.
    TypeError
        Unknown parameter name (the message lists the valid ones).
    poslab.encodings.ParameterError
        A required parameter missing (named, with what to write), a wrong type or an invalid value.
    """
    return build(get_encoding_class(kind), **params)


def build(cls: type[Encoding], **params) -> Encoding:
    """``cls(**params)`` with :func:`make_encoding`'s checks and messages (the class need not be registered)."""
    valid = cls.defaults()
    unknown = sorted(set(params) - set(valid))
    if unknown:
        raise TypeError(
            f"{cls.kind or cls.__name__}: unknown parameter(s) {', '.join(unknown)}; valid parameters: "
            + ", ".join(f"{k} ({t})" for k, t in cls.parameter_types().items())
        )
    cls.check_required(params)
    return cls(**params)
