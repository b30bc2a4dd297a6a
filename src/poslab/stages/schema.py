"""The output schema, declared once: columns and tables with their dtype, unit and meaning.

Every table poslab writes is declared here or by the stage that writes it
(:mod:`poslab.stages`), as a :class:`Table` of :class:`Column` objects.
Everything else is derived from these declarations: the names an encoding
parameter may not take (:func:`poslab.stages.reserved_columns`), the results
reader's dtypes and required columns (:func:`cast`, :func:`required`), the
order of a table's columns (:func:`order`), the console summary of ``poslab
run`` (``console`` columns) and the column reference ``docs/tables.md``
(:mod:`poslab.stages.docs`).

Every table starts with the run's keys (:data:`RUN_KEYS`: ``study``,
``label``, ``kind``, one column per encoding parameter, ``seed``), or only
its identifier (:data:`RUN_ID`: ``study``, ``label``, ``kind``, ``seed``) in
tables with a row per distance, position, grid point or block and in the
per-label tables (``keys="short"``): their runs' parameters are in
``summary.csv`` once per run, and :func:`with_run_columns` joins them on.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

__all__ = ["Column", "Family", "Table", "KEYS", "RUN_KEYS", "RUN_ID", "DTYPES", "UNITS", "cast", "order", "finalize",
           "declared_names", "required", "undeclared", "interval_names", "with_run_columns"]

#: Column dtypes and what they mean in a CSV: ``Int64`` is an integer that may be empty.
DTYPES = {
    "int": "integer",
    "Int64": "integer, may be empty",
    "float": "number, may be empty (NaN)",
    "str": "text",
    "bool": "true / false",
}

#: Units used in the schema (an empty unit: dimensionless).
UNITS = ("positions", "patches", "cosine similarity", "radians per position", "seconds", "")

_INTERVAL_SUFFIXES = ("_ci_low", "_ci_high")


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of an output table.

    Attributes
    ----------
    name : str
        Column name (snake_case).
    dtype : {"int", "Int64", "float", "str", "bool"}
        ``Int64``: an integer that may be empty; ``float`` may be NaN.
    unit : str
        ``positions``, ``cosine similarity``, ``seconds``, ... (empty: dimensionless).
    description : str
        One line: what the value is.
    interval : bool
        Followed by ``<name>_ci_low`` and ``<name>_ci_high`` (its confidence
        interval) when intervals are computed.
    required : bool
        The results reader refuses a table without it.
    beyond_window : bool
        An empty value means "not reached within max_distance" (shown as
        ``> max_distance`` in the console).
    console : bool
        Shown in the console summary of ``poslab run`` (summary columns).
    heading : str
        Its short heading in the console (default: the name; a family's
        members add their suffix).
    """

    name: str
    dtype: str
    unit: str
    description: str
    interval: bool = False
    required: bool = False
    beyond_window: bool = False
    console: bool = False
    heading: str = ""

    def __post_init__(self):
        if self.dtype not in DTYPES:
            raise ValueError(f"column {self.name}: dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if not self.heading:
            object.__setattr__(self, "heading", self.name)

    @property
    def title(self) -> str:
        """The name as documented (a family shows its placeholder)."""
        return self.name

    def matches(self, name: str) -> bool:
        """True if ``name`` is this column (for a family: one of its members)."""
        return name == self.name

    def names(self) -> tuple[str, ...]:
        """This column's name, then its interval columns if it has them."""
        return (self.name, *interval_names(self.name)) if self.interval else (self.name,)


@dataclasses.dataclass(frozen=True)
class Family(Column):
    """A family of columns, one per value of a setting (e.g. one band width per threshold).

    ``name`` is the prefix; a member is ``prefix + render(value)``; ``parse``
    inverts ``render`` (None for a name that is not a member); ``setting`` is
    the ``[analysis]`` setting whose values are the members (``thresholds``).
    """

    setting: str = ""
    placeholder: str = "<value>"
    render: Callable[[Any], str] = str
    parse: Callable[[str], Any] = str

    @property
    def title(self) -> str:
        return self.name + self.placeholder

    def member(self, value) -> str:
        """The column name for ``value``."""
        return self.name + self.render(value)

    def value_of(self, name: str):
        """The value a member column stands for, or None if ``name`` is not a member."""
        if not name.startswith(self.name):
            return None
        rest = name[len(self.name):]
        try:
            value = self.parse(rest)
        except (TypeError, ValueError):
            return None
        return value if self.render(value) == rest else None

    def matches(self, name: str) -> bool:
        return self.value_of(name) is not None

    def names(self) -> tuple[str, ...]:
        return (self.title, *interval_names(self.title)) if self.interval else (self.title,)


def interval_names(name: str) -> tuple[str, str]:
    """``<name>_ci_low``, ``<name>_ci_high``."""
    return tuple(name + s for s in _INTERVAL_SUFFIXES)


#: Keys of every run-level table: the run's identity.
KEYS = (
    Column("study", "str", "", "study name (the results folder's name by default)", required=True),
    Column("label", "str", "", "the encoding: its kind plus sorted non-default parameters, e.g. "
           "rotary(rope_theta=500000, rotary_dim=128)", required=True),
    Column("kind", "str", "", "encoding kind (poslab encodings lists them)", required=True),
    Column("seed", "Int64", "", "the run's seed (empty for deterministic encodings)", required=True),
)
#: Where the encoding parameters go in the keys of full-key tables: one column each, between kind and seed.
RUN_KEYS = "study, label, kind, <one column per encoding parameter>, seed"
#: The columns that identify a run (labels are unique in a study; a stochastic encoding has a run per seed): the
#: only keys of short-key tables, and what :func:`with_run_columns` joins on.
RUN_ID = tuple(c.name for c in KEYS)


@dataclasses.dataclass(frozen=True)
class Table:
    """An output table: ``<name>.csv``, one row per ``row``.

    Attributes
    ----------
    name : str
    row : str
        What one row is, e.g. ``"run × distance"``.
    description : str
    columns : tuple of Column
        After the keys, in order.
    keys : {"run", "short", "none"}
        ``run``: the full keys (study, label, kind, parameters, seed);
        ``short``: the run's identifier :data:`RUN_ID` only (tables with a
        row per distance, position, grid point or block, whose parameters
        would repeat on every row; per-label tables): the parameters are in
        ``summary.csv`` (:func:`with_run_columns`); ``none``: the columns
        say it all.
    always : bool
        Written even when empty (the results reader requires it).
    interval_slot : str, optional
        The interval columns of the table all stand just before this column
        (the summary: before ``ci_method``); default: each after its column.
    """

    name: str
    row: str
    description: str
    columns: tuple[Column, ...]
    keys: str = "run"
    always: bool = False
    interval_slot: str | None = None

    def column(self, name: str) -> Column | None:
        """The declaration of column ``name`` (a key, a column, a family member or an interval column)."""
        for col in (*self.key_columns(), *self.columns):
            if col.matches(name):
                return col
            if col.interval and name.endswith(_INTERVAL_SUFFIXES):
                base = name.removesuffix("_ci_low").removesuffix("_ci_high")
                if col.matches(base):
                    return col
        return None

    def key_columns(self) -> tuple[Column, ...]:
        return () if self.keys == "none" else KEYS

    def declared(self, *names: str) -> tuple[str, ...]:
        """``names``, checked to be columns of this table (for figures that read them)."""
        unknown = [n for n in names if self.column(n) is None]
        if unknown:
            raise KeyError(f"{self.name} declares no column(s) {', '.join(unknown)}")
        return names


def order(frame: pd.DataFrame, table: Table, parameters: Iterable[str] = ()) -> pd.DataFrame:
    """``frame`` with its columns in the declared order.

    Keys first (encoding parameters before ``seed``), then the declared
    columns; the members of a family keep their order. Interval columns
    follow their column, or, when the table has an ``interval_slot``, all
    stand together just before that column, in the order of their columns.
    Undeclared columns (refused by the runner) go last.
    """
    parameters = [p for p in parameters if p in frame.columns]
    slots: dict[str, float] = {}
    position = 0
    for col in table.key_columns():
        if col.name == "seed":
            for p in parameters:
                slots.setdefault(p, position)
                position += 1
        slots[col.name] = position
        position += 1
    declared = {id(c): position + i for i, c in enumerate(table.columns)}
    where = {name: i for i, name in enumerate(frame.columns)}
    interval_slot = None
    if table.interval_slot is not None:
        interval_slot = declared[id(table.column(table.interval_slot))] - 0.5

    def key(name: str) -> tuple:
        if name in slots:
            return (slots[name], 0, 0, 0)
        for col in table.columns:
            if col.matches(name):
                return (declared[id(col)], 0, 0, 0)
        if name.endswith(_INTERVAL_SUFFIXES):
            stem = name.removesuffix("_ci_low").removesuffix("_ci_high")
            side = 0 if name.endswith("_ci_low") else 1
            for col in table.columns:
                if col.interval and col.matches(stem):
                    if interval_slot is not None:
                        return (interval_slot, key(stem)[0], where.get(stem, math.inf), side)
                    return (declared[id(col)], 1, where.get(stem, math.inf), side)
        return (math.inf, 0, 0, 0)

    columns = sorted(frame.columns, key=key)  # stable: a family's members keep their order
    return frame if list(frame.columns) == columns else frame[columns]


def undeclared(frame: pd.DataFrame, table: Table, parameters: Iterable[str] = ()) -> list[str]:
    """Columns of ``frame`` that ``table`` does not declare (encoding parameters are keys)."""
    params = set(parameters)
    return [c for c in frame.columns if c not in params and table.column(c) is None]


def required(table: Table) -> tuple[str, ...]:
    """Columns the results reader requires: the keys and the columns declared ``required``."""
    return tuple(c.name for c in (*table.key_columns(), *table.columns) if c.required and not isinstance(c, Family))


def cast(frame: pd.DataFrame, table: Table, *, where: str = "") -> pd.DataFrame:
    """Give the columns of a table read from CSV their declared dtypes (in place; returns ``frame``).

    ``Int64`` columns become nullable integers; ``str`` columns text with
    empty cells as ""; other columns keep what pandas read.

    Raises
    ------
    ValueError
        A numeric column holds text (an edited table), naming ``where``, the column and the row.
    """
    for name in frame.columns:
        col = table.column(name)
        if col is None:
            continue
        member = name == col.name or (isinstance(col, Family) and col.matches(name))
        numeric = col.dtype in ("int", "Int64", "float") or not member  # interval columns are numbers
        if numeric and len(frame) and not pd.api.types.is_numeric_dtype(frame[name]) and col.dtype != "bool":
            values = pd.to_numeric(frame[name], errors="coerce")
            bad = frame[name][values.isna() & frame[name].notna()]
            if len(bad):
                raise ValueError(f"{where or table.name}: column {name} must hold numbers, but row "
                                 f"{bad.index[0] + 2} holds {bad.iloc[0]!r}; the table was edited. Run the study "
                                 "again to rewrite it")
        if member and (col.dtype == "Int64" or (col.dtype == "int" and frame[name].isna().any())):
            frame[name] = _nullable_int(frame[name])
        elif (col.dtype == "float" or not member) and pd.api.types.is_integer_dtype(frame[name]):
            frame[name] = frame[name].astype(float)  # a float column whose values are all integral, written as such
        elif member and col.dtype == "str":
            frame[name] = frame[name].astype(object).fillna("").astype(str)
    return frame


def declared_names(table: Table, parameters: Iterable[str] = (), settings=None) -> list[str]:
    """Every column ``table`` has, whatever its runs computed: keys (encoding parameters before ``seed`` in
    full-key tables), declared columns, a family's members for the values of its setting in ``settings``
    (an AnalysisOptions; none without it), and every interval column."""
    names = [c.name for c in table.key_columns()]
    if table.keys == "run" and "seed" in names:
        names[names.index("seed"):names.index("seed")] = list(parameters)
    for col in table.columns:
        members = [col.name]
        if isinstance(col, Family):
            members = [col.member(v) for v in (getattr(settings, col.setting, ()) if col.setting else ())]
        for name in members:
            names += [name, *interval_names(name)] if col.interval else [name]
    return names


def finalize(frames: list[pd.DataFrame], table: Table, parameters: Iterable[str] = (), settings=None) -> pd.DataFrame:
    """One table from the runs' rows: concatenated, columns in the declared order, integer columns that may
    be empty as nullable integers (``Int64``).

    Every column of :func:`declared_names` is there, empty where no run computed it (a stage that applies
    to none of the runs, no bootstrap with ``n_resamples = 0``, a decay model not fitted), so a table's
    columns depend on the settings' values (``thresholds``) and the encodings' parameters only, never on
    which stages computed something. No rows: the columns, and no rows."""
    parameters = list(parameters)
    frames = [f for f in frames if len(f)]
    out = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    missing = [n for n in declared_names(table, parameters, settings) if n not in out.columns]
    if missing:
        out = pd.concat([out, pd.DataFrame(float("nan"), index=out.index, columns=missing)], axis=1)
    out = order(out, table, parameters)
    for name in out.columns:
        col = table.column(name)
        if col is None or not (name == col.name or isinstance(col, Family) and col.matches(name)):
            continue  # undeclared (parameters) or an interval column: as computed
        if col.dtype == "Int64" and out[name].dtype != "Int64":
            out[name] = _nullable_int(out[name])
        elif col.dtype == "str" and out[name].isna().any():
            out[name] = out[name].astype(object).where(out[name].notna(), "")  # as read back from CSV
    return out


def with_run_columns(frame: pd.DataFrame, summary: pd.DataFrame, columns: Iterable[str]) -> pd.DataFrame:
    """``frame`` with ``columns`` of its runs' ``summary.csv`` rows joined on (how a short-key table gets its
    runs' encoding parameters, or any summary column, back).

    Parameters
    ----------
    frame : DataFrame
        A table with the run identifier columns :data:`RUN_ID` (``study``, ``label``, ``kind``, ``seed``).
    summary : DataFrame
        The study's ``summary`` table (one row per run).
    columns : iterable of str
        Summary columns to add (those ``frame`` already has are left as they are; a name the summary lacks is
        added empty: a parameter no run of the study has).

    Returns
    -------
    DataFrame
        A new frame: ``frame``'s rows in their order, its columns, then ``columns``. A row whose run is not in
        ``summary`` gets empty values.

    Raises
    ------
    ValueError
        ``summary`` has several rows for one run (several studies mixed: filter to one first).
    """
    names = [c for c in dict.fromkeys(columns) if c not in frame.columns]
    if not names:
        return frame
    on = [k for k in RUN_ID if k in frame.columns and k in summary.columns]
    if "label" not in on:
        raise ValueError(f"cannot join run columns: frame or summary lacks the run identifier label "
                         f"(frame has {list(frame.columns)[:6]}..., summary {list(summary.columns)[:6]}...)")
    present = [c for c in names if c in summary.columns]
    runs = summary[on + present].drop_duplicates()
    if runs.duplicated(on).any():
        raise ValueError("summary has several rows for one run (" + ", ".join(on) + "), e.g. from several "
                         "studies; filter it to one study first")
    keys = frame[on].reset_index(drop=True)
    joined = keys.merge(runs, on=on, how="left", sort=False)
    out = pd.concat([frame.reset_index(drop=True), joined[present]], axis=1)
    out = out.assign(**{c: float("nan") for c in names if c not in present})[[*frame.columns, *names]]
    out.index = frame.index
    return out


def _nullable_int(series: pd.Series) -> pd.Series:
    values = pd.to_numeric(series, errors="coerce")
    return values.astype("Int64")


def family_members(columns: Iterable[str], family: Family) -> list[str]:
    """Members of ``family`` among ``columns``, in their order (not their interval columns)."""
    return [c for c in columns if family.matches(c)]


def snake_case(name: str) -> bool:
    """True for a snake_case column name."""
    return re.fullmatch(r"[a-z][a-z0-9_]*", name) is not None
