"""Train a small character-level transformer and save its learned position table at chosen steps.

Needs the optional extra ``poslab[train]`` (torch) for :func:`train`; the
configuration, corpus and run-folder modules import without torch.

See :mod:`poslab.training.runs` for the run-folder layout that
``poslab.encodings.learned`` reads (``source = "RUN_DIR"``, ``step = N``).
"""

from __future__ import annotations

from .config import TrainConfig, default_snapshot_steps, parse_steps
from .data import BUNDLED_CORPORA, load_corpus
from .runs import RUN_FILE, RunExistsError, RunWriter, check_run_writable

__all__ = [
    "BUNDLED_CORPORA",
    "RUN_FILE",
    "RunExistsError",
    "RunWriter",
    "TrainConfig",
    "check_run_writable",
    "default_snapshot_steps",
    "load_corpus",
    "parse_steps",
    "require_torch",
    "train",
]

INSTALL_HINT = "pip install 'poslab[train]'"


def require_torch():
    """Import torch, or raise ImportError saying how to install it."""
    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"poslab train needs PyTorch, which is not installed ({exc}); install it with {INSTALL_HINT}") from None
    return torch


def train(*args, **kwargs):
    """Run :func:`poslab.training.loop.train` (imports torch on first use; see there for parameters)."""
    require_torch()
    from .loop import train as _train

    return _train(*args, **kwargs)
