"""Character-level corpora: reading, vocabulary, 90/10 split and seeded batches (numpy only)."""

from __future__ import annotations

import dataclasses
import hashlib
from importlib import resources
from pathlib import Path

import numpy as np

__all__ = ["BUNDLED_CORPORA", "Corpus", "load_corpus", "sample_starts"]

#: name → file in ``poslab/data/corpora`` (provenance in PROVENANCE.md there).
BUNDLED_CORPORA = {"tinyshakespeare": "tinyshakespeare.txt"}

TRAIN_FRACTION = 0.9


@dataclasses.dataclass(frozen=True)
class Corpus:
    """A text as character ids, split into a training part (first 90 %) and a validation part (last 10 %).

    Attributes
    ----------
    name : str
        Bundled name or the file path given.
    sha256 : str
        Of the file's bytes.
    vocab : str
        Sorted distinct characters; id i is ``vocab[i]``.
    train, val : ndarray of int64
        Character ids of the two splits.
    """

    name: str
    sha256: str
    vocab: str
    train: np.ndarray
    val: np.ndarray

    @property
    def n_chars(self) -> int:
        return len(self.train) + len(self.val)


def load_corpus(corpus: str | Path = "tinyshakespeare") -> Corpus:
    """Read a UTF-8 text (a bundled name or a file path) as character ids.

    Raises
    ------
    FileNotFoundError
        Neither a bundled corpus nor an existing file.
    ValueError
        Not UTF-8 text, or fewer than 2 distinct characters.
    """
    name = str(corpus)
    if name in BUNDLED_CORPORA:
        path = Path(str(resources.files("poslab.data").joinpath("corpora", BUNDLED_CORPORA[name])))
    else:
        path = Path(name).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"train: corpus {name!r} is neither a bundled corpus ({', '.join(BUNDLED_CORPORA)}) nor an existing text file"
            )
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"train: corpus {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    codepoints = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    unique, ids = np.unique(codepoints, return_inverse=True)  # ids index the sorted distinct characters
    vocab = "".join(map(chr, unique))
    if len(vocab) < 2:
        raise ValueError(f"train: corpus {path} has {len(vocab)} distinct characters; a language model needs at least 2")
    ids = ids.astype(np.int64).reshape(-1)
    cut = int(TRAIN_FRACTION * len(ids))
    return Corpus(name=name, sha256=hashlib.sha256(raw).hexdigest(), vocab=vocab, train=ids[:cut], val=ids[cut:])


def sample_starts(split: np.ndarray, context_length: int, batch_size: int, rng: np.random.Generator) -> np.ndarray:
    """Random window starts: ``split[s : s + context_length + 1]`` is one input + target window.

    Raises
    ------
    ValueError
        The split is shorter than one window (``context_length + 1`` characters).
    """
    high = len(split) - context_length
    if high < 1:
        raise ValueError(
            f"train: a split of {len(split)} characters is shorter than one window of context_length + 1 = "
            f"{context_length + 1}; use a longer corpus (the validation split is its last 10 %) or a shorter context"
        )
    return rng.integers(0, high, size=batch_size)
