"""Find a model's weights and ``config.json`` on disk: a file, a Hugging Face model folder or cache snapshot.

Accepted paths (nothing is ever downloaded):

- a weights file (see :mod:`poslab.checkpoints.files`); a ``config.json``
  in the same folder is used if present;
- a Hugging Face model folder: ``config.json`` plus ``model.safetensors``,
  ``model.safetensors.index.json`` (sharded), ``pytorch_model.bin`` or
  ``pytorch_model.bin.index.json`` (first present wins, in that order);
- a snapshot of the local Hugging Face cache,
  ``models--ORG--NAME/snapshots/REV/`` (its files are symlinks into
  ``../../blobs``), or the ``models--ORG--NAME`` folder itself, whose
  ``refs/main`` names the snapshot.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from .files import SUPPORTED_SUFFIXES, TensorInfo, list_tensors

__all__ = ["Checkpoint", "open_checkpoint", "WEIGHT_FILES"]

#: weights file names of a Hugging Face model folder, in order of preference.
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A model's weights file and config found on disk.

    Attributes
    ----------
    path : Path
        What the user gave.
    weights : Path
        The file holding the tensors (an ``*.index.json`` for a sharded checkpoint).
    config : dict or None
        Parsed ``config.json``, if there is one.
    config_path : Path or None
    what : str
        How ``path`` was read, e.g. "Hugging Face cache snapshot".
    """

    path: Path
    weights: Path
    config: dict | None
    config_path: Path | None
    what: str

    def tensors(self) -> list[TensorInfo]:
        """Every tensor of the checkpoint (headers only where the format allows)."""
        return list_tensors(self.weights)


def _snapshot_of_cache_repo(folder: Path) -> Path:
    snapshots = folder / "snapshots"
    ref = folder / "refs" / "main"
    if ref.is_file():
        rev = ref.read_text(encoding="utf-8").strip()
        if (snapshots / rev).is_dir():
            return snapshots / rev
        raise FileNotFoundError(f"{ref} names snapshot {rev}, which is not in {snapshots}; nothing is downloaded")
    revs = sorted(p.name for p in snapshots.iterdir() if p.is_dir()) if snapshots.is_dir() else []
    if len(revs) == 1:
        return snapshots / revs[0]
    raise ValueError(
        f"{folder} is a Hugging Face cache folder without refs/main and with {len(revs)} snapshots "
        f"({', '.join(revs) or 'none'}); pass one snapshot folder, {snapshots}/REV"
    )


def _read_config(path: Path) -> dict:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read {path}: {exc}; expected a model's config.json") from None
    if not isinstance(config, dict):
        raise ValueError(f"{path} is not a JSON object; expected a model's config.json")
    return config


def open_checkpoint(path) -> Checkpoint:
    """Locate the weights file and ``config.json`` for ``path``.

    Parameters
    ----------
    path : str or Path
        A weights file, a Hugging Face model folder, a cache snapshot
        folder or a cache ``models--ORG--NAME`` folder.

    Returns
    -------
    Checkpoint

    Raises
    ------
    FileNotFoundError
        Nothing at ``path``, or a folder without any weights file poslab reads
        (the message lists what the folder holds).
    ValueError
        An unreadable ``config.json`` or an ambiguous cache folder.
    """
    path = Path(path).expanduser()
    if path.is_file():
        config_path = path.parent / "config.json"
        config = _read_config(config_path) if config_path.is_file() and path.name != "config.json" else None
        return Checkpoint(path, path, config, config_path if config is not None else None, "file")
    if not path.is_dir():
        raise FileNotFoundError(f"no such file or folder: {path}")
    folder, what = path, "model folder"
    if path.name.startswith("models--") and (path / "snapshots").is_dir():
        folder, what = _snapshot_of_cache_repo(path), "Hugging Face cache snapshot"
    elif path.parent.name == "snapshots" and path.parent.parent.name.startswith("models--"):
        what = "Hugging Face cache snapshot"
    config_path = folder / "config.json"
    config = _read_config(config_path) if config_path.is_file() else None
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            return Checkpoint(path, folder / name, config, config_path if config is not None else None, what)
    readable = sorted(p.name for p in folder.iterdir()
                      if p.is_file() and any(p.name.endswith(s) for s in SUPPORTED_SUFFIXES) and p.name != "config.json")
    if len(readable) == 1:
        return Checkpoint(path, folder / readable[0], config, config_path if config is not None else None, what)
    held = sorted(p.name for p in folder.iterdir())
    broken = [p.name for p in folder.iterdir() if p.is_symlink() and not p.exists()]
    raise FileNotFoundError(
        f"{folder} ({what}) holds no weights file poslab reads: expected one of {', '.join(WEIGHT_FILES)}"
        + (f" or a single {'/'.join(SUPPORTED_SUFFIXES)} file (found {', '.join(readable)})" if readable else "")
        + f"; it holds: {', '.join(held) or 'nothing'}"
        + (f" (broken links, blobs not downloaded: {', '.join(broken)})" if broken else "")
        + ". Nothing is downloaded: fetch the weights first"
    )
