"""Analysis as declared stages: one schema per stage; the per-run pipeline is a loop over them.

:data:`PIPELINE` lists the built-in stages in the order they run. Each
declares its tables and ``summary.csv`` columns (:mod:`poslab.stages.schema`)
and its settings (the study file's ``[analysis]`` options); from these
declarations come :class:`AnalysisOptions`, the summary table
(:data:`SUMMARY`), every table by name (:data:`TABLES`), the names an
encoding parameter may not take (:func:`reserved_columns`) and the column
reference ``docs/tables.md`` (:mod:`poslab.stages.docs`).

Order: the stage modules are imported below in pipeline order, and within a
module stages run in the order they are defined (each registers itself with
:func:`register_stage`). Stages without summary columns that read the unit
rows (heatmap, properties) run first, so the rows can be freed before the
bootstrap's resamples; the others run in the order of their summary columns.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._validation import ValidationError, check
from .base import Output, RunContext, Stage, register_stage, registered_stages, setting, settings_of
from .schema import Column, Family, Table
# the built-in stages, in pipeline order (importing a module registers its stages)
from .heatmap import HEATMAPS  # noqa: E402
from .properties import PROPERTIES  # noqa: E402
from .kernel import KERNEL_HEADS  # noqa: E402
from .profile import PROFILES  # noqa: E402
from .bands import BAND_WIDTH, SUMMARIES  # noqa: E402
from .window import WINDOW_SENSITIVITY  # noqa: E402
from .decay import DECAY_METRICS  # noqa: E402
from .bootstrap import BOOTSTRAP  # noqa: E402
from . import envelope  # noqa: E402,F401
from . import source  # noqa: E402,F401
from . import relative  # noqa: E402,F401
from . import learned  # noqa: E402,F401
from .grid import GRID_DISPLACEMENTS, GRID_MAPS, GRID_PROFILES  # noqa: E402
from .rope import INV_FREQ, ROPE_DECAY  # noqa: E402
from .comparison import COMPARISON, COMPARISON_PAIRS  # noqa: E402

__all__ = [
    "PIPELINE", "SUMMARY", "TABLES", "RUN_COLUMNS", "AnalysisOptions", "Stage", "Output", "RunContext", "Column",
    "Family", "Table", "setting", "register_stage", "build_stages", "run_stage", "reserved_columns", "column_tables",
    "parse_options",
    "BAND_WIDTH", "SUMMARIES", "WINDOW_SENSITIVITY", "BOOTSTRAP", "COMPARISON", "COMPARISON_PAIRS",
    "DECAY_METRICS", "GRID_DISPLACEMENTS", "GRID_MAPS", "GRID_PROFILES", "HEATMAPS", "INV_FREQ", "KERNEL_HEADS",
    "PROFILES", "PROPERTIES", "ROPE_DECAY",
]

#: The stages, in the order they run.
PIPELINE: tuple[type[Stage], ...] = registered_stages()

#: Columns of every ``summary.csv`` row, ok or failed, before the stages' columns (``seconds`` comes last).
RUN_COLUMNS = (
    Column("n_positions", "int", "positions", "positions analysed: the study's, or the entry's own n_positions",
           required=True, console=True, heading="n"),
    Column("max_distance", "int", "positions", "largest distance analysed (the run's window)", required=True),
    Column("table_dim", "Int64", "", "width of the analysed table"),
    Column("center", "bool", "", "whether the mean position vector was subtracted first"),
    Column("status", "str", "", "ok or failed", required=True, console=True),
    Column("not_applicable", "str", "", "stages whose analysis does not apply to the run's positions, and why: "
           "'not_applicable: multi-axis positions; see grid tables (heatmap, properties, profile, ...)' for a run "
           "on a grid (those stages' columns and tables are empty: the grid stage analyses it); empty on a line"),
    Column("message", "str", "", "the error of a failed run; notes of an ok one (e.g. why no decay model was "
           "selected)"),
)
SECONDS = Column("seconds", "float", "seconds", "time the run took: generation and every stage")

#: ``summary.csv``: one row per run.
SUMMARY = Table(
    "summary", "run", "Each run's window and status, and every stage's headline numbers.",
    (*RUN_COLUMNS, *(c for stage in PIPELINE for c in stage.summary), SECONDS),
    always=True, interval_slot="ci_method",
)


def _tables() -> dict[str, Table]:
    """summary, the tables written for every study (``always``), the other stage tables, the comparison's."""
    out = {"summary": SUMMARY}
    declared = [t for stage in PIPELINE for t in stage.tables]
    for table in sorted(declared, key=lambda t: not t.always):  # stable: pipeline order within each group
        if out.setdefault(table.name, table) is not table:
            raise ValueError(f"two tables are named {table.name}")
    out.update(comparison=COMPARISON, comparison_pairs=COMPARISON_PAIRS)
    return out


#: Every table poslab writes, by name (per run: the stages'; per study: the comparison's).
TABLES: dict[str, Table] = _tables()


def reserved_columns() -> dict[str, tuple[str, ...]]:
    """Every output column name (a family as its documented pattern) → the tables that have it.

    Encoding parameters become key columns of every table, so a parameter
    named like any of these is refused at registration
    (:func:`poslab.encodings.register`); use :func:`column_tables` to test a name.
    """
    out: dict[str, list[str]] = {}
    for table in TABLES.values():
        for col in (*table.key_columns(), *table.columns):
            for name in col.names():
                out.setdefault(name, [])
                if table.name not in out[name]:
                    out[name].append(table.name)
    return {k: tuple(v) for k, v in out.items()}


def column_tables(name: str) -> tuple[str, ...]:
    """The tables that have (or may have) a column ``name``: a key, a declared column, a family member."""
    return tuple(t.name for t in TABLES.values() if t.column(name) is not None)


def _options_class():
    fields, owners = [], {}
    for stage in PIPELINE:
        for f in settings_of(stage):
            if f.name in owners:
                raise ValueError(f"setting {f.name} is declared by both {owners[f.name]} and {stage.name}")
            owners[f.name] = stage.name
            fields.append((f.name, f.type, dataclasses.field(default=f.default, metadata=f.metadata)))

    def __post_init__(self):
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, check(getattr(self, f.name), f.metadata["check"], f.name,
                                                   where="[analysis]"))

    def replace(self, **changes) -> Any:
        """A copy with some settings changed (checked)."""
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Every setting and its value (tuples as lists), as manifest.json records them."""
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), tuple) else v
                for f in dataclasses.fields(self)}

    doc = ["Every setting of the analysis: the study file's ``[analysis]`` options, one per stage setting.",
           "", "Attributes", "----------"]
    for stage in PIPELINE:
        for f in settings_of(stage):
            doc += [f"{f.name} : {f.metadata['check'].describe()}",
                    f"    {f.metadata['doc']} (stage {stage.name}; default {f.default!r})"]
    cls = dataclasses.make_dataclass(
        "AnalysisOptions", fields, frozen=True,
        namespace={"__post_init__": __post_init__, "replace": replace, "as_dict": as_dict,
                   "__doc__": "\n".join(doc), "OWNERS": owners})
    cls.__module__ = __name__  # picklable: process-pool workers find it as poslab.stages.AnalysisOptions
    return cls


#: The analysis settings of a study (its ``[analysis]`` table): every stage's settings, checked when built.
AnalysisOptions = _options_class()


def build_stages(options) -> tuple[Stage, ...]:
    """The pipeline's stages with their settings from ``options``."""
    return tuple(stage(**{f.name: getattr(options, f.name) for f in settings_of(stage)}) for stage in PIPELINE)


def parse_options(raw: dict, *, where: str) -> Any:
    """AnalysisOptions from a study file's ``[analysis]`` table (unknown keys and bad values refused).

    Raises
    ------
    ValidationError
        ``WHERE: [analysis]: NAME must be ..., got ...``, or an unknown option with the valid ones listed.
    """
    if not isinstance(raw, dict):
        raise ValidationError(f"{where}: [analysis] must be a table, got {raw!r}")
    valid = [f.name for f in dataclasses.fields(AnalysisOptions)]
    unknown = sorted(set(raw) - set(valid))
    if unknown:
        raise ValidationError(f"{where}: unknown [analysis] option(s) {', '.join(unknown)}; valid: {', '.join(valid)}")
    try:
        return AnalysisOptions(**raw)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc}") from None


def run_stage(name: str, encoding, n_positions: int, dim: int = 1, *, options=None, seed: int | None = None):
    """One stage's output for one encoding, outside a study (for scripts and tests).

    Parameters
    ----------
    name : str
        A stage of :data:`PIPELINE` (``learned_source``, ``grid``, ``bands``, ...).
    encoding : Encoding
    n_positions, dim : int
        The run's size (the study's dim; encodings keeping their own width ignore it).
    options : AnalysisOptions, optional
        Default: every setting's default.
    seed : int, optional
        The run's seed (stochastic encodings need one).

    Returns
    -------
    Output or None
        None when the stage does not apply to this run (nor to its positions: a 1-D stage on a grid run).
    """
    options = AnalysisOptions() if options is None else options
    stages = {s.name: s for s in build_stages(options)}
    if name not in stages:
        raise KeyError(f"unknown stage {name!r}; stages: {', '.join(stages)}")
    ctx = RunContext(encoding, n_positions=n_positions, max_distance=n_positions - 1, dim=dim, options=options,
                     seed=seed)
    stage = stages[name]
    return stage.compute(ctx) if stage.not_applicable(ctx) is None and stage.applies(ctx) else None
