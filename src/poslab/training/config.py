"""The settings of one training run (no torch needed)."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import Integer, ListOf, Real, ValidationError, check, problem

__all__ = ["TrainConfig", "default_snapshot_steps", "parse_steps"]

_WHERE = "train"


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
        positive, counts = Integer(minimum=1), Integer(minimum=0)
        for name in ("layers", "d_model", "heads", "batch_size", "steps", "eval_batches", "threads"):
            check(getattr(self, name), positive, name, where=_WHERE)
        check(self.context_length, Integer(minimum=2), "context_length", where=_WHERE)
        for name in ("warmup_steps", "seed"):
            check(getattr(self, name), counts, name, where=_WHERE)
        object.__setattr__(self, "lr", check(self.lr, Real(minimum=0, open_min=True), "lr", where=_WHERE))
        object.__setattr__(self, "weight_decay", check(self.weight_decay, Real(minimum=0), "weight_decay", where=_WHERE))
        if self.d_model % self.heads:
            raise ValidationError(problem(_WHERE, "d_model", f"a multiple of heads ({self.heads})", self.d_model))
        if self.snapshot_steps is not None:
            steps = ListOf(Integer(minimum=0, maximum=self.steps), min_length=0)
            object.__setattr__(self, "snapshot_steps", check(list(self.snapshot_steps), steps, "snapshot steps",
                                                             where=_WHERE))

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
