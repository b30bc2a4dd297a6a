"""``poslab inspect``: what poslab finds in a checkpoint, and which table it would analyse."""

from __future__ import annotations

from pathlib import Path

from .positions import describe_selection, select_position_table
from .runs import is_training_run, open_training_run

__all__ = ["inspect_source"]


def inspect_source(path, key: str | None = None) -> str:
    """Describe the candidate position tensors of ``path`` and the one poslab would use.

    Parameters
    ----------
    path : str or Path
        A weights file, a Hugging Face model folder or cache snapshot, or a
        poslab training-run folder.
    key : str, optional
        Check this tensor instead of choosing automatically.

    Returns
    -------
    str
        One line per candidate (name, shape, dtype, detected offset, grid,
        role) and a final ``used: ...`` line saying which and why, or why none.

    Raises
    ------
    FileNotFoundError, KeyError, ValueError, ImportError
        The path cannot be read (see :func:`poslab.checkpoints.select_position_table`).
    """
    if is_training_run(path):
        run = open_training_run(path)
        lines = [f"{Path(path)}: poslab training run, {len(run.steps)} saved step(s)"]
        for step in run.steps:
            file = run.path / "positions" / f"step_{step:07d}.npy"
            lines.append(f"  step {step}: {file.relative_to(run.path)}" + ("" if file.is_file() else "  MISSING"))
        lines.append('used: the table of the step given as step = N (or step = "all" in a study file: every step)')
        return "\n".join(lines)
    return describe_selection(select_position_table(path, key))
