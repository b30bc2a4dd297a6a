"""``poslab inspect``: what poslab finds in a source, and which table it would analyse (or why none)."""

from __future__ import annotations

from pathlib import Path

from ..data import BUNDLED_GRIDS, BUNDLED_RUNS, BUNDLED_TABLES, bundled_path
from .files import list_tensors
from .positions import describe_selection, select_position_table
from .runs import is_training_run, open_training_run

__all__ = ["inspect_source", "NoTableError"]


class NoTableError(ValueError):
    """No position table would be used; ``report`` is the full inspection, ``reason`` says why."""

    def __init__(self, report: str, reason: str):
        super().__init__(reason)
        self.report, self.reason = report, reason


def _bundled(name: str) -> str:
    path = bundled_path(name)
    info = list_tensors(path)[0]
    grid = BUNDLED_GRIDS.get(name)
    lines = [f"{name}: bundled table {path.name} {info.shape} {info.dtype} — {BUNDLED_TABLES[name][1]}"]
    if grid:
        lines.append(f"used: the whole table, offset 0, grid {grid[0]}x{grid[1]} (patches in raster order), "
                     "prefix tokens 0 — rule: bundled table (provenance in poslab/data/PROVENANCE.md)")
    else:
        lines.append("used: the whole table, position p = row p (offset 0) — rule: bundled table "
                     "(provenance in poslab/data/PROVENANCE.md)")
    if name in BUNDLED_RUNS:
        lines.append(f'(also a training run: step = N or step = "all" analyses its saved steps)')
    return "\n".join(lines)


def inspect_source(source, key: str | None = None) -> str:
    """Describe the candidate position tensors of ``source`` and the one poslab would use.

    Parameters
    ----------
    source : str or Path
        Anything ``learned`` accepts as ``source``: a bundled name, a weights
        file or ``config.json``, a model folder, a cache snapshot or
        ``models--ORG--NAME`` folder, a Hub id, or a training-run folder.
    key : str, optional
        Check this tensor instead of choosing automatically.

    Returns
    -------
    str
        One line per candidate (name, shape, dtype, offset, grid, prefix
        tokens, role) and a final ``used: ...`` line saying which and by
        which rule.

    Raises
    ------
    NoTableError
        Nothing would be used (ambiguous, refused, none found); carries the
        report and the reason.
    FileNotFoundError, KeyError, ValueError, ImportError
        The source cannot be read (see :func:`poslab.checkpoints.select_position_table`).
    """
    text = str(source)
    if text in BUNDLED_TABLES and not Path(text).exists():
        if key is not None:
            raise ValueError(f"bundled table {text!r} holds one tensor; remove --key")
        return _bundled(text)
    if Path(text).exists() and is_training_run(text):
        run = open_training_run(text)
        lines = [f"{Path(text)}: poslab training run, {len(run.steps)} saved step(s)"]
        for step in run.steps:
            file = run.path / "positions" / f"step_{step:07d}.npy"
            lines.append(f"  step {step}: {file.relative_to(run.path)}" + ("" if file.is_file() else "  MISSING"))
        lines.append('used: the table of the step given as step = N (or step = "all" in a study file: every step)')
        return "\n".join(lines)
    selection = select_position_table(text, key)
    report = describe_selection(selection)
    if selection.chosen is None:
        raise NoTableError(report, selection.reason)
    return report
