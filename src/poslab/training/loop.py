"""The training loop: a character-level LM whose position table is saved at chosen steps (torch)."""

from __future__ import annotations

import contextlib
import json
import math
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .. import __version__
from .config import TrainConfig
from .data import Corpus, load_corpus, sample_starts
from .model import CharTransformer
from .runs import RUN_FILE, RunWriter, check_run_writable

__all__ = ["train"]


@contextlib.contextmanager
def _torch_settings(threads: int):
    """Fixed thread count and deterministic algorithms, restored afterwards (they are process-global)."""
    saved = (torch.get_num_threads(), torch.are_deterministic_algorithms_enabled())
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.set_num_threads(saved[0])
        torch.use_deterministic_algorithms(saved[1])


def _windows(split: np.ndarray, starts: np.ndarray, context_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.from_numpy(split[starts[:, None] + np.arange(context_length + 1)])
    return ids[:, :-1], ids[:, 1:]


def _loss(model, inputs, targets) -> torch.Tensor:
    logits = model(inputs)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@torch.no_grad()
def _evaluate(model, split, starts, config) -> float:
    """Mean cross-entropy (nats per character) over fixed batches."""
    model.eval()
    total = 0.0
    for batch in np.array_split(starts, config.eval_batches):
        total += _loss(model, *_windows(split, batch, config.context_length)).item() * len(batch)
    model.train()
    return total / len(starts)


def _optimizer(model, config: TrainConfig) -> torch.optim.AdamW:
    decay = [p for p in model.parameters() if p.ndim >= 2]
    no_decay = [p for p in model.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": config.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=config.lr, betas=(0.9, 0.99))


def _lr_factor(step: int, config: TrainConfig) -> float:
    """Linear warmup to 1, then cosine decay to 0.1 at the last step."""
    if step < config.warmup_steps:
        return (step + 1) / config.warmup_steps
    span = max(config.steps - config.warmup_steps, 1)
    return 0.1 + 0.45 * (1 + math.cos(math.pi * min(step - config.warmup_steps, span) / span))


def train(config: TrainConfig, out, *, corpus: str | Path = "tinyshakespeare", overwrite: bool = False,
          progress: bool = True) -> dict:
    """Train a :class:`~poslab.training.model.CharTransformer` and write a run folder.

    Parameters
    ----------
    config : TrainConfig
    out : path
        The run folder to create (see :mod:`poslab.training.runs` for its layout).
    corpus : str or path
        A bundled corpus name (``tinyshakespeare``) or a UTF-8 text file; the
        first 90 % of its characters train, the last 10 % validate.
    overwrite : bool
        Replace an existing run folder (only a poslab run folder or an empty one).
    progress : bool
        Show a tqdm bar with the training loss (smoothed) and the last validation loss.

    Returns
    -------
    dict
        The run's ``poslab_train.json`` contents.

    Determinism: for a given config, corpus and torch build the snapshots are
    bit-identical (torch.manual_seed, deterministic algorithms, ``config.threads``
    CPU threads; batches from numpy generators seeded by ``config.seed``).

    Raises
    ------
    RunExistsError
        ``out`` exists (see :func:`poslab.training.runs.check_run_writable`).
    FileNotFoundError, ValueError
        Bad corpus, a corpus too short for the context, or training diverged.
    """
    out = check_run_writable(out, overwrite=overwrite)
    data: Corpus = load_corpus(corpus)
    saved = config.saved_steps()
    rng = np.random.default_rng([config.seed, 0])
    n_eval = config.eval_batches * config.batch_size
    eval_train = sample_starts(data.train, config.context_length, n_eval, np.random.default_rng([config.seed, 1]))
    eval_val = sample_starts(data.val, config.context_length, n_eval, np.random.default_rng([config.seed, 2]))
    losses = []
    started = time.perf_counter()
    with _torch_settings(config.threads), RunWriter(out, overwrite=overwrite) as run:
        torch.manual_seed(config.seed)
        model = CharTransformer(len(data.vocab), config.context_length, config.d_model, config.heads, config.layers)
        optimizer = _optimizer(model, config)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: _lr_factor(step, config))
        bar = tqdm(total=config.steps, desc="train", unit="step", disable=None if progress else True, dynamic_ncols=True)
        smoothed = None
        with bar:
            for step in range(config.steps + 1):
                if step in saved:
                    row = {"step": step, "train_loss": _evaluate(model, data.train, eval_train, config),
                           "val_loss": _evaluate(model, data.val, eval_val, config)}
                    if not all(map(math.isfinite, row.values())):
                        raise ValueError(f"training diverged at step {step} (loss {row}); lower the learning rate")
                    losses.append(row)
                    run.save_snapshot(step, model.position_table())
                    bar.set_postfix(loss=f"{smoothed or row['train_loss']:.3f}", val=f"{row['val_loss']:.3f}")
                if step == config.steps:
                    break
                loss = _loss(model, *_windows(data.train, sample_starts(data.train, config.context_length,
                                                                           config.batch_size, rng), config.context_length))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                schedule.step()
                smoothed = loss.item() if smoothed is None else 0.9 * smoothed + 0.1 * loss.item()
                if not math.isfinite(smoothed):
                    raise ValueError(f"training diverged at step {step + 1} (loss {loss.item()}); lower the learning rate")
                bar.update(1)
                if step % 10 == 0:
                    bar.set_postfix(loss=f"{smoothed:.3f}", val=f"{losses[-1]['val_loss']:.3f}")
        meta = {
            **{("total_steps" if k == "steps" else k): v for k, v in vars(config).items() if k != "snapshot_steps"},
            "vocab_size": len(data.vocab),
            "parameters": sum(p.numel() for p in model.parameters()),
            "model": "decoder-only transformer, learned absolute positions, pre-LN, causal SDPA, GELU MLP 4x, untied head",
            "optimizer": "AdamW betas (0.9, 0.99), grad-norm clip 1.0, linear warmup then cosine to lr/10",
            "corpus": data.name,
            "corpus_sha256": data.sha256,
            "corpus_chars": data.n_chars,
            "split": "first 90 % train, last 10 % validation",
            "loss": "cross-entropy in nats per character on eval_batches fixed batches of each split",
            "losses": losses,
            "final_val_loss": losses[-1]["val_loss"],
            "seconds": round(time.perf_counter() - started, 1),
            "versions": {"poslab": __version__, "torch": torch.__version__, "numpy": np.__version__,
                         "python": platform.python_version()},
            "platform": platform.platform(),
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        run.finish(meta)
    return json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
