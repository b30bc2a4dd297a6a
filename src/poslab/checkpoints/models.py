"""A model's weights and ``config.json``, found through :func:`poslab.checkpoints.resolve_model`.

Accepted sources are those of :mod:`poslab.checkpoints.sources`: a
``config.json``, a weights file, a model folder, a Hugging Face cache
snapshot or ``models--ORG--NAME`` folder, or a Hub id ``ORG/NAME[@REV]``.
A Hub id whose weights are not cached is read remotely, header and position
tensor only (:mod:`poslab.checkpoints.hub`), and only when the user set
``HF_HUB_OFFLINE=0`` explicitly (:func:`poslab.checkpoints.sources.downloads_allowed`);
otherwise nothing is downloaded.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from .files import SUPPORTED_SUFFIXES, TensorInfo, list_tensors, load_tensor
from .sources import WEIGHT_FILES, ModelSource, capped, downloads_allowed, link_problem, resolve_model

__all__ = ["Checkpoint", "open_checkpoint", "WEIGHT_FILES"]


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    """A model's weights (on disk, or on the Hub by range reads) and its parsed config.

    Attributes
    ----------
    model : ModelSource
        Where the files are (see :func:`poslab.checkpoints.resolve_model`).
    config : dict or None
        Parsed ``config.json``, if there is one.
    remote : HubWeights or None
        The Hub's safetensors headers, when the weights are read remotely.
    """

    model: ModelSource
    config: dict | None
    remote: object | None = None

    @property
    def path(self) -> str:
        """What the user gave."""
        return self.model.source

    @property
    def weights(self) -> Path | str:
        """The weights file (``*.index.json`` if sharded), or ``hub:ORG/NAME@REV`` when read remotely."""
        if self.model.weights_path is not None:
            return self.model.weights_path
        return f"hub:{self.model.repo_id}@{self.remote.revision}"

    @property
    def weights_name(self) -> str:
        return self.model.weights_path.name if self.model.weights_path is not None else self.weights

    @property
    def config_path(self) -> Path | None:
        return self.model.config_path

    @property
    def what(self) -> str:
        """How the source was read, e.g. "Hugging Face cache snapshot"."""
        return self.model.what + ("" if self.remote is None else ", weights read from the Hub by range requests")

    def tensors(self) -> list[TensorInfo]:
        """Every tensor of the checkpoint (headers only where the format allows)."""
        return self.remote.tensors() if self.remote is not None else list_tensors(self.model.weights_path)

    def read(self, key: str | None) -> np.ndarray:
        """The tensor ``key`` and nothing else (see :func:`poslab.checkpoints.load_tensor`)."""
        if self.remote is not None:
            return self.remote.read(key)
        return load_tensor(self.model.weights_path, key)


def _no_weights(model: ModelSource) -> FileNotFoundError:
    if model.what == "Hub id":
        return FileNotFoundError(
            f"{model.source}: the weights of {model.repo_id} are not in the local cache {model.root}, and poslab "
            f"never downloads unless you set HF_HUB_OFFLINE=0. Download the weights (`hf download {model.repo_id} "
            "model.safetensors`), or set HF_HUB_OFFLINE=0 to read the position tensor alone from the Hub")
    folder = model.config_path.parent if model.config_path is not None else Path(model.source).expanduser()
    if model.what == "Hugging Face cache repo" and model.revision:
        folder = model.root / "snapshots" / model.revision
    held = sorted(folder.iterdir()) if folder.is_dir() else []
    readable = [p.name for p in held if p.name.endswith(SUPPORTED_SUFFIXES) and p.name != "config.json"]
    links = [f"{p.name}: {link_problem(p)}" for p in held if p.is_symlink() and link_problem(p)]
    return FileNotFoundError(
        f"{folder} ({model.what}) holds no weights file poslab reads: expected one of {', '.join(WEIGHT_FILES)}"
        + (f" or a single {'/'.join(SUPPORTED_SUFFIXES)} file (found {', '.join(readable)})" if readable else "")
        + f"; it holds: {capped([p.name for p in held], sep=', ') or 'nothing'}"
        + (f" ({'; '.join(links)})" if links else "")
        + ". Nothing is downloaded: fetch the weights first"
    )


def open_checkpoint(source) -> Checkpoint:
    """Locate the weights and ``config.json`` of ``source``.

    Parameters
    ----------
    source : str, Path or ModelSource
        Anything :func:`poslab.checkpoints.resolve_model` accepts, or its result.

    Returns
    -------
    Checkpoint

    Raises
    ------
    FileNotFoundError
        Nothing at ``source``, or no weights poslab reads (the message lists
        what the folder holds, broken and looping links included).
    SourceError
        A path escaping its folder or cache repo; an unreadable ``config.json``.
    """
    model = source if isinstance(source, ModelSource) else resolve_model(source)
    config = model.read_config()
    if model.weights_path is not None:
        return Checkpoint(model, config)
    if model.what == "Hub id":
        if downloads_allowed():
            from .hub import open_hub_weights

            return Checkpoint(model, config, open_hub_weights(model.repo_id, model.revision))
    raise _no_weights(model)
