"""Position-table snapshots saved by a poslab training run.

A run folder ``RUN_DIR`` holds

- ``poslab_train.json``: a JSON object with at least
  ``{"format": "poslab-train-run", "version": 1, "steps": [sorted ints], ...}``;
- ``positions/step_{STEP:07d}.npy``: the learned position table after STEP
  optimiser steps, float32 of shape (context_length, d_model).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

__all__ = ["RUN_FILE", "RUN_FORMAT", "RUN_VERSION", "TrainingRun", "is_training_run", "open_training_run",
           "snapshot_path"]

RUN_FILE = "poslab_train.json"
RUN_FORMAT = "poslab-train-run"
RUN_VERSION = 1


def snapshot_path(run_dir, step: int) -> Path:
    """``run_dir / "positions" / "step_{step:07d}.npy"``: where a run saves its table at ``step``."""
    return Path(run_dir) / "positions" / f"step_{step:07d}.npy"


@dataclasses.dataclass(frozen=True)
class TrainingRun:
    """A training-run folder.

    Attributes
    ----------
    path : Path
    steps : tuple of int
        Saved steps, ascending.
    meta : dict
        The whole ``poslab_train.json``.
    """

    path: Path
    steps: tuple[int, ...]
    meta: dict

    def snapshot(self, step: int) -> Path:
        """Path of the table saved at ``step``.

        Raises
        ------
        KeyError
            ``step`` was not saved; the message lists the saved steps.
        FileNotFoundError
            ``poslab_train.json`` lists the step but its file is missing.
        """
        if step not in self.steps:
            raise KeyError(f"training run {self.path} has no step {step}; saved steps: {_show(self.steps)}")
        path = snapshot_path(self.path, step)
        if not path.is_file():
            raise FileNotFoundError(f"{self.path / RUN_FILE} lists step {step} but {path} is missing")
        return path


def _show(steps) -> str:
    steps = list(steps)
    return ", ".join(map(str, steps)) if len(steps) <= 30 else ", ".join(map(str, steps[:30])) + f", ... ({len(steps)} in all)"


def is_training_run(path) -> bool:
    """True if ``path`` is a folder holding ``poslab_train.json``."""
    path = Path(path).expanduser()
    return path.is_dir() and (path / RUN_FILE).is_file()


def open_training_run(path) -> TrainingRun:
    """Read and check a run folder's ``poslab_train.json``.

    Raises
    ------
    ValueError
        Not valid JSON, wrong ``format`` / ``version``, or ``steps`` not a
        sorted list of distinct non-negative integers.
    """
    path = Path(path).expanduser()
    file = path / RUN_FILE
    try:
        meta = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {file}: {exc}") from None
    if not isinstance(meta, dict) or meta.get("format") != RUN_FORMAT:
        raise ValueError(f"{file}: expected a JSON object with \"format\": \"{RUN_FORMAT}\"")
    if meta.get("version") != RUN_VERSION:
        raise ValueError(f"{file}: version {meta.get('version')!r} is not supported (this poslab reads version {RUN_VERSION})")
    steps = meta.get("steps")
    if (not isinstance(steps, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in steps)
            or steps != sorted(set(steps))):
        raise ValueError(f"{file}: \"steps\" must be a sorted list of distinct non-negative integers, got {steps!r}")
    return TrainingRun(path, tuple(steps), meta)
