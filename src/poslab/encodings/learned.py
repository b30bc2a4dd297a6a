"""Learned absolute position tables: bundled real ones (GPT-2, GPT-1, Whisper) or a user's file."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np

from .._validation import check_table
from ..checkpoints.files import load_tensor
from ..data import BUNDLED_TABLES, bundled_path
from .base import Encoding, ParameterError
from .registry import register

__all__ = ["Learned", "load_learned_table"]


@functools.lru_cache(maxsize=16)
def _load_cached(path: str, key: str | None, mtime_ns: int) -> np.ndarray:
    table = check_table(load_tensor(path, key), name=f"{Path(path).name}[{key}]" if key else Path(path).name)
    table.flags.writeable = False
    return table


def load_learned_table(source: str, key: str | None = None) -> np.ndarray:
    """The full learned table named by ``source`` (bundled name or file path), float64.

    Returns
    -------
    ndarray of shape (rows, table_dim), read-only float64 (float16/float32
    files are upcast exactly).

    Raises
    ------
    FileNotFoundError
        ``source`` is neither a bundled name nor an existing file.
    KeyError, ValueError
        See :func:`poslab.checkpoints.load_tensor` and :func:`poslab._validation.check_table`.
    """
    if source in BUNDLED_TABLES:
        if key is not None:
            raise ValueError(f"learned: bundled table {source!r} holds one tensor; remove key={key!r}")
        path = bundled_path(source)
    else:
        path = Path(source).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"learned: source {source!r} is neither a bundled table ({', '.join(BUNDLED_TABLES)}) "
                "nor an existing .npy/.npz/.safetensors file"
            )
    return _load_cached(str(path.resolve()), key, path.stat().st_mtime_ns)


@register
@dataclasses.dataclass(frozen=True)
class Learned(Encoding):
    """A learned absolute position table, read from bundled data or a file.

    Parameters
    ----------
    source : str
        A bundled table — ``gpt2`` (GPT-2 small ``wpe``, 1024 × 768),
        ``gpt1`` (512 × 768), ``whisper-tiny`` / ``whisper-base`` /
        ``whisper-small`` (decoder, 448 × 384/512/768), ``siglip-so400m``
        (729 × 1152, a flattened 27 × 27 patch grid) — or a path to a
        ``.npy``, ``.npz`` or ``.safetensors`` file.
    key : str or None
        Tensor name inside a ``.npz``/``.safetensors`` file holding several.
    offset : int
        Row that holds position 0 (OPT/BART use 2, RoBERTa padding_idx + 1).

    The table keeps its own width (``table_dim``); the study's ``dim`` is
    ignored. Positions 0..n_positions−1 are rows offset..offset+n_positions−1;
    asking for more rows than the table has is an error, never a truncation.
    Provenance of the bundled tables: ``poslab/data/PROVENANCE.md``.
    """

    kind = "learned"
    path_params = ("source",)
    keeps_own_dim = True

    source: str
    key: str | None = None
    offset: int = 0

    def _check_params(self):
        if self.offset < 0:
            raise ParameterError(f"learned: offset must be >= 0, got {self.offset}")

    def table(self) -> np.ndarray:
        """The whole stored table, shape (rows, table_dim), float64, read-only."""
        return load_learned_table(self.source, self.key)

    def _check_size(self, n_positions, dim):
        rows = self.table().shape[0]
        if self.offset + n_positions > rows:
            raise ValueError(
                f"learned({self.source}): n_positions={n_positions} with offset={self.offset} needs "
                f"{self.offset + n_positions} rows, but the table has {rows} "
                f"(at most {rows - self.offset} positions); lower n_positions"
            )

    def _generate(self, n_positions, dim, rng):
        return np.array(self.table()[self.offset : self.offset + n_positions])
