"""The column reference ``docs/tables.md``, generated from the stages' declarations.

Regenerate after changing a stage (a test fails while it is stale)::

    python -m poslab.stages.docs docs/tables.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..analysis.decay import DECAY_MODELS
from . import PIPELINE, RUN_COLUMNS, SUMMARY, TABLES, AnalysisOptions, settings_of
from .schema import DTYPES, RUN_KEYS, Table

__all__ = ["tables_markdown", "main"]

COMMAND = "python -m poslab.stages.docs docs/tables.md"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _column_rows(columns, owner: dict | None = None) -> list[str]:
    head = "| column | type | unit | meaning |" + (" stage |" if owner is not None else "")
    rows = [head, "|---|---|---|---|" + ("---|" if owner is not None else "")]
    for col in columns:
        meaning = col.description
        if col.beyond_window:
            meaning += " (empty: not reached within max_distance)"
        if col.interval:
            meaning += f"; with `{col.title}_ci_low` / `_ci_high`, its confidence interval"
        row = f"| `{col.title}` | {DTYPES[col.dtype]} | {col.unit or '—'} | {_cell(meaning)} |"
        if owner is not None:
            row += f" {owner.get(id(col), '')} |"
        rows.append(row)
    return rows


def _writers(table: Table) -> str:
    names = [f"`{s.name}` ({s.applies_to})" for s in PIPELINE if table in s.tables]
    return ", ".join(names) if names else "the study's comparison (`poslab.study.comparison`)"


def _keys(table: Table) -> str:
    if table.keys == "short":
        return "Keys: `study`, `label`, `kind`, `seed` (the run's identifier; its encoding parameters are in summary.csv)."
    if table.keys == "none":
        return "No key columns."
    return f"Keys: {RUN_KEYS}."


def tables_markdown() -> str:
    """The whole of ``docs/tables.md``."""
    out = [
        "# Output tables",
        "",
        f"<!-- Generated from the declarations in src/poslab/stages by `{COMMAND}`; do not edit. -->",
        "",
        "Every table a study writes to `results/<study>/NAME.csv`, every column with its type, unit and meaning, "
        "the analysis stage that writes it, and the `[analysis]` settings. Distances and widths are in positions; "
        "similarities are cosine similarities (dimensionless, in [−1, 1]). Every run-level table starts with the "
        "run's keys:",
        "",
        *_column_rows(Table("keys", "", "", ()).key_columns()),
        "",
        "Between `kind` and `seed` come the encoding parameters, one column each (empty where a kind lacks one), "
        "so an encoding parameter may not be named like any column below (refused when the kind is registered). "
        "Tables with a row per distance, position, grid point, block or window, and the per-label tables, have only the "
        "four columns above (" + ", ".join(f"`{t.name}`" for t in TABLES.values() if t.keys == "short") + "): "
        "their runs' parameters are in summary.csv once per run; join them on `study`, `label`, `kind`, `seed` "
        "(`poslab.stages.schema.with_run_columns`).",
        "",
        "Every column listed for a table is in it, whatever the settings and whichever stages applied: empty "
        "where nothing was computed (a stage that applies to none of the runs, no intervals with n_resamples = 0 "
        "or an exact run, a decay model not in `models`). Only the encoding parameters and the `band_width_<t>` "
        "columns (one per value of `thresholds`) depend on the study.",
        "",
        "Contents: " + ", ".join(f"[{name}.csv](#{name}csv)" for name in TABLES) + ", [stages](#stages), "
        "[settings](#analysis-settings), [decay models](#decay-models).",
        "",
    ]
    owner = {id(c): "run" for c in RUN_COLUMNS}
    for stage in PIPELINE:
        owner.update({id(c): f"`{stage.name}`" for c in stage.summary})
    owner[id(SUMMARY.columns[-1])] = "run"
    for name, table in TABLES.items():
        out += [f"## {name}.csv", "", f"One row per {table.row}. {table.description}", ""]
        if name != "summary":
            out += [f"Written by {_writers(table)}." + (" Written for every study." if table.always else ""), ""]
        else:
            out += ["Columns of failed runs: the keys and the run columns (`stage` = run); the message says why. "
                    "Interval columns stand together before `ci_method`.", ""]
        out += [_keys(table), ""]
        out += _column_rows(table.columns, owner if name == "summary" else None) + [""]
    out += ["## Stages", "", "In the order they run (`poslab.stages.PIPELINE`).", "",
            "| stage | applies to | what it computes | tables | summary columns |", "|---|---|---|---|---|"]
    for stage in PIPELINE:
        tables = ", ".join(f"`{t.name}`" for t in stage.tables) or "—"
        summary = ", ".join(f"`{c.title}`" for c in stage.summary) or "—"
        out.append(f"| `{stage.name}` | {stage.applies_to} | {_cell(stage.description)} | {tables} | {summary} |")
    out += ["", "## [analysis] settings", "",
            "A study file's `[analysis]` table sets them (all optional); every value is recorded in "
            "manifest.json (`analysis`, and per stage under `stages`).", "",
            "| setting | default | accepts | meaning | stage |", "|---|---|---|---|---|"]
    defaults = AnalysisOptions()
    for stage in PIPELINE:
        for f in settings_of(stage):
            value = getattr(defaults, f.name)
            shown = list(value) if isinstance(value, tuple) else value
            out.append(f"| `{f.name}` | `{shown!r}` | {_cell(f.metadata['check'].describe())} | "
                       f"{_cell(f.metadata['doc'])} | `{stage.name}` |")
    out += ["", "## Decay models", "",
            "`decay_length` is the first distance at which the fitted curve has covered 1 − 1/e of the way from "
            "its value at distance 0 to its asymptote. Parameters and their units (the `decay_metrics` columns):",
            "", "| model | formula | decay_length | parameters |", "|---|---|---|---|"]
    for model in DECAY_MODELS.values():
        params = ", ".join(f"`{p.name}` ({p.unit or 'dimensionless'})" for p in model.parameters)
        out.append(f"| `{model.name}` | {_cell(model.formula)} | {_cell(model.length_rule)} | {params} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    """Write the reference to the path given (default: print it)."""
    argv = sys.argv[1:] if argv is None else argv
    text = tables_markdown()
    if not argv:
        sys.stdout.write(text)
    else:
        Path(argv[0]).write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
