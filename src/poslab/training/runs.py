"""Writing a training-run folder atomically (no torch needed).

A run folder ``RUN_DIR`` holds

- ``poslab_train.json``: ``{"format": "poslab-train-run", "version": 1,
  "steps": [sorted saved steps], ...configuration, corpus, versions...,
  "losses": [{"step", "train_loss", "val_loss"}, ...], "final_val_loss"}``;
- ``positions/step_{STEP:07d}.npy``: the learned position table after STEP
  optimizer steps (step 0 is the initialisation), float32 of shape
  (context_length, d_model).

Everything is written into a hidden temporary sibling
``.RUN_DIR.poslab-tmp-*`` which is renamed to ``RUN_DIR`` only after the last
snapshot and the JSON are on disk, so an error or Ctrl-C never leaves a
half-written run folder (and the partial work is deleted); after a ``kill -9``
the next poslab write into the same parent folder removes it
(:mod:`poslab._atomic`, shared with the results writer). ``poslab.encodings.learned`` reads the
folder (``source = "RUN_DIR"``, ``step = N``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from .._atomic import AtomicFolder, check_can_create
from ..checkpoints.runs import RUN_FILE, RUN_FORMAT, RUN_VERSION, snapshot_path  # the contract, defined beside its reader

__all__ = ["RUN_FILE", "RUN_FORMAT", "RUN_VERSION", "RunExistsError", "RunWriter", "check_run_writable", "snapshot_path"]


class RunExistsError(FileExistsError):
    """The run folder exists and may not be replaced."""


def _is_run_folder(folder: Path) -> bool:
    try:
        meta = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    names = {p.name for p in folder.iterdir()}
    return isinstance(meta, dict) and meta.get("format") == RUN_FORMAT and names <= {RUN_FILE, "positions"}


def check_run_writable(out, *, overwrite: bool = False) -> Path:
    """Refuse an existing ``out`` unless ``overwrite``; call before any work.

    Even with ``overwrite`` only an empty folder or a poslab training-run
    folder (``poslab_train.json`` and ``positions/`` only) is replaced, never
    the working folder or one of its parents.

    Returns
    -------
    Path
        ``out`` made absolute.

    Raises
    ------
    RunExistsError
    OSError
        The folder cannot be created there (read-only, a dangling symbolic link, ...).
    """
    out = Path(os.path.abspath(Path(out).expanduser()))
    if not os.path.lexists(out):
        return check_can_create(out, what="run folder")  # parents are created, as `poslab run --out` does
    if not overwrite:
        raise RunExistsError(f"run folder {out} exists; pass --overwrite to replace it or choose another --out")
    if not out.is_dir():
        raise RunExistsError(f"{out} exists and is not a folder; choose another --out")
    if Path.cwd().resolve().is_relative_to(out.resolve()):
        raise RunExistsError(f"{out} is the current folder or one of its parents; choose another --out")
    if any(out.iterdir()) and not _is_run_folder(out):
        raise RunExistsError(
            f"{out} is not empty and is not a poslab training run (it holds other files, or no {RUN_FILE}); "
            "--overwrite only replaces poslab training runs. Choose another --out"
        )
    return out


class RunWriter:
    """Context manager that builds a run folder in a temporary sibling and renames it into place.

    Usage::

        with RunWriter(out, overwrite=False) as run:
            run.save_snapshot(0, table)           # float32 (context_length, d_model)
            ...
            run.finish(meta)                       # writes poslab_train.json, renames to ``out``

    Leaving the block without :meth:`finish` (an error, Ctrl-C) deletes the
    temporary folder; ``out`` is untouched.

    Raises
    ------
    RunExistsError
        On entry, see :func:`check_run_writable`.
    """

    def __init__(self, out, *, overwrite: bool = False):
        self.out = check_run_writable(out, overwrite=overwrite)
        self.overwrite = overwrite
        self.steps: list[int] = []
        self.shape: tuple[int, int] | None = None
        self._folder: AtomicFolder | None = None
        self._tmp: Path | None = None

    def __enter__(self) -> RunWriter:
        self._folder = AtomicFolder(self.out, what="run folder").__enter__()
        self._tmp = self._folder.path
        (self._tmp / "positions").mkdir()
        return self

    def save_snapshot(self, step: int, table: np.ndarray) -> Path:
        """Write the position table saved at ``step`` (float32, shape (context_length, d_model)).

        Raises
        ------
        ValueError
            Not 2-D, a shape differing from earlier snapshots, a repeated or
            decreasing step, or non-finite values (training diverged: lower the learning rate).
        """
        table = np.asarray(table)
        if table.ndim != 2:
            raise ValueError(f"snapshot at step {step}: expected a 2-D position table, got shape {table.shape}")
        if self.shape is not None and table.shape != self.shape:
            raise ValueError(f"snapshot at step {step}: shape {table.shape} differs from earlier snapshots {self.shape}")
        if self.steps and step <= self.steps[-1]:
            raise ValueError(f"snapshot steps must increase; got {step} after {self.steps[-1]}")
        if not np.all(np.isfinite(table)):
            raise ValueError(f"training diverged: the position table at step {step} is not finite; lower the learning rate")
        with open(snapshot_path(self._tmp, step), "wb") as file:  # inside the temporary folder: atomic with it
            np.save(file, table.astype(np.float32, copy=False))
        self.steps.append(step)
        self.shape = table.shape
        return snapshot_path(self.out, step)

    def finish(self, meta: dict) -> Path:
        """Write ``poslab_train.json`` (``meta`` plus format, version and steps) and rename the folder to ``out``."""
        reserved = {"format", "version", "steps"} & set(meta)
        if reserved:
            raise ValueError(f"run metadata may not set {', '.join(sorted(reserved))}: the writer records them")
        meta = {"format": RUN_FORMAT, "version": RUN_VERSION, "steps": list(self.steps), **meta}
        text = json.dumps(meta, indent=2, allow_nan=False) + "\n"
        (self._tmp / RUN_FILE).write_text(text, encoding="utf-8")
        # an existing out was checked on entry (empty, or an earlier run, and overwrite was given): check again
        self._folder.commit(check=lambda: check_run_writable(self.out, overwrite=self.overwrite))
        self._tmp = None
        return self.out

    def __exit__(self, *exc):
        if self._folder is not None:
            self._folder.__exit__(*exc)
            self._folder = None
        self._tmp = None
        return False
