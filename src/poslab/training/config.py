"""The settings of one training run (no torch needed)."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["TrainConfig", "default_snapshot_steps", "parse_steps"]


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of a character-level decoder-only transformer run.

    Attributes
    ----------
    layers, d_model, heads : int
        Transformer blocks, model width, attention heads (``d_model % heads == 0``).
    context_length : int
        Positions seen by the model; the learned position table has this many rows.
    batch_size : int
        Sequences per optimizer step.
    steps : int
        Optimizer steps (AdamW updates).
    lr : float
        Peak learning rate: linear warmup over ``warmup_steps``, then cosine decay to ``lr / 10``.
    warmup_steps : int
        Steps of linear warmup.
    weight_decay : float
        AdamW decoupled weight decay on every matrix (embeddings included; not on biases or LayerNorm).
    seed : int
        Seeds initialisation, batch order and the fixed evaluation batches.
    eval_batches : int
        Fixed batches (from each split) on which train and val loss are measured at every snapshot.
    snapshot_steps : tuple of int or None
        Steps at which the position table and the losses are saved; None: about 12
        log-spaced steps from 0 to ``steps``. Step 0 (initialisation) and the last step are always saved.
    threads : int
        torch CPU threads (fixed, since results may depend on it; recorded).
    """

    layers: int = 2
    d_model: int = 128
    heads: int = 4
    context_length: int = 256
    batch_size: int = 32
    steps: int = 1500
    lr: float = 3e-3
    warmup_steps: int = 100
    weight_decay: float = 0.1
    seed: int = 0
    eval_batches: int = 8
    snapshot_steps: tuple[int, ...] | None = None
    threads: int = 1

    def __post_init__(self):
        for name in ("layers", "d_model", "heads", "context_length", "batch_size", "steps", "eval_batches", "threads"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"train: {name} must be a positive integer, got {value!r}")
        if self.context_length < 2:
            raise ValueError(f"train: context_length must be >= 2, got {self.context_length}")
        if self.d_model % self.heads:
            raise ValueError(f"train: d_model ({self.d_model}) must be a multiple of heads ({self.heads})")
        for name in ("warmup_steps", "seed"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"train: {name} must be a non-negative integer, got {value!r}")
        if not (self.lr > 0 and np.isfinite(self.lr)):
            raise ValueError(f"train: lr must be a positive number, got {self.lr!r}")
        if not (self.weight_decay >= 0 and np.isfinite(self.weight_decay)):
            raise ValueError(f"train: weight_decay must be >= 0, got {self.weight_decay!r}")
        if self.snapshot_steps is not None:
            bad = [s for s in self.snapshot_steps if isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= self.steps]
            if bad:
                raise ValueError(f"train: snapshot steps must be integers in 0..steps={self.steps}, got {bad}")

    def saved_steps(self) -> list[int]:
        """Sorted distinct steps whose snapshot is written, always with 0 and ``steps``."""
        chosen = default_snapshot_steps(self.steps) if self.snapshot_steps is None else self.snapshot_steps
        return sorted({0, self.steps, *chosen})


def default_snapshot_steps(steps: int, count: int = 12) -> list[int]:
    """About ``count`` log-spaced steps in 0..steps (0 and ``steps`` included), rounded to integers."""
    if steps < 1:
        return [0]
    inner = np.unique(np.round(np.geomspace(1, steps, count - 1)).astype(int))
    return sorted({0, *map(int, inner), steps})


def parse_steps(text: str) -> tuple[int, ...]:
    """``"0,50,100"`` → (0, 50, 100).

    Raises
    ------
    ValueError
        A part is not a non-negative integer.
    """
    try:
        steps = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"snapshot steps must be comma-separated integers like '0,50,100', got {text!r}") from None
    if not steps or any(s < 0 for s in steps):
        raise ValueError(f"snapshot steps must be non-negative integers like '0,50,100', got {text!r}")
    return steps
