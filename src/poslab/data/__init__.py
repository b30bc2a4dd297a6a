"""Bundled real position tables; provenance and licences in ``PROVENANCE.md`` beside this file."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

__all__ = ["BUNDLED_TABLES", "BUNDLED_GRIDS", "BUNDLED_RUNS", "BUNDLED_PREFIX", "bundled_name", "bundled_path",
           "bundled_run_path"]

#: name → (file, description). Every file is a float32 ``.npy`` of shape (positions, dim).
BUNDLED_TABLES: dict[str, tuple[str, str]] = {
    "gpt2": ("gpt2_wpe.npy", "GPT-2 small `wpe`, 1024 x 768"),
    "gpt1": ("gpt1_positions_embed.npy", "GPT-1 (openai-gpt) `positions_embed`, 512 x 768"),
    "whisper-tiny": ("whisper_tiny_decoder_positional_embedding.npy", "Whisper tiny decoder, 448 x 384"),
    "whisper-base": ("whisper_base_decoder_positional_embedding.npy", "Whisper base decoder, 448 x 512"),
    "whisper-small": ("whisper_small_decoder_positional_embedding.npy", "Whisper small decoder, 448 x 768"),
    "siglip-so400m": (
        "siglip_so400m_p14_384_tinyllava_position_embedding.npy",
        "SigLIP so400m/14@384 vision tower, 729 (27 x 27 patches) x 1152",
    ),
    "trained-char-lm": (
        "trained_char_lm/positions/step_0001500.npy",
        "char-level LM trained here (poslab train, tinyshakespeare, step 1500), 256 x 128",
    ),
}

#: name -> (rows, cols) patch grid of the bundled vision tables (no prefix token: row r * cols + c is patch (r, c)).
BUNDLED_GRIDS: dict[str, tuple[int, int]] = {"siglip-so400m": (27, 27)}


#: name -> folder of a bundled ``poslab train`` run (its saved steps; the table of the name is its last step).
BUNDLED_RUNS: dict[str, str] = {"trained-char-lm": "trained_char_lm"}


#: ``bundled:NAME`` names the bundled table NAME and can never be a path.
BUNDLED_PREFIX = "bundled:"


def bundled_name(source, folder=None) -> str | None:
    """The bundled table ``source`` names, or None when it names a path or a Hub id.

    The one rule, for ``learned source =``, ``poslab inspect`` and the Python API:
    ``bundled:NAME`` always names the bundled table NAME; a bare ``NAME`` (``gpt2``) names it
    only when no file or folder ``NAME`` exists in ``folder`` (default: the working folder; a
    study file also checks its own folder), and is refused as ambiguous when one does; anything
    else (``./gpt2``, any name with a path separator) is a path or a Hub id.

    Parameters
    ----------
    source : str or Path
        What the user wrote.
    folder : str or Path, optional
        Where a relative path would be looked for; default the working folder.

    Raises
    ------
    ValueError
        ``bundled:NAME`` with NAME not bundled, or a bare bundled name that is also a path in
        ``folder``; the message names both readings and what to write for each.
    """
    if not isinstance(source, str):
        return None
    if source.startswith(BUNDLED_PREFIX):
        name = source[len(BUNDLED_PREFIX):]
        if name not in BUNDLED_TABLES:
            raise ValueError(f"{source!r}: no bundled table {name!r}; bundled tables: {', '.join(BUNDLED_TABLES)}")
        return name
    if source not in BUNDLED_TABLES:
        return None
    local = Path(folder if folder is not None else ".") / source
    if local.exists() or local.is_symlink():
        what = "folder" if local.is_dir() else "file"
        raise ValueError(
            f"{source!r} is both the bundled table {source} ({BUNDLED_TABLES[source][1]}) and the {what} "
            f"{os.path.abspath(local)}; poslab does not guess which. Write \"./{source}\" for the {what}, or "
            f"\"{BUNDLED_PREFIX}{source}\" for the bundled table")
    return source


def bundled_run_path(name: str) -> Path:
    """Folder of the bundled training run ``name`` (``poslab_train.json`` + ``positions/``).

    Raises
    ------
    KeyError
        If ``name`` is not a bundled run; the message lists them.
    """
    try:
        folder = BUNDLED_RUNS[name]
    except KeyError:
        raise KeyError(f"no bundled training run {name!r}; bundled runs: {', '.join(BUNDLED_RUNS)}") from None
    return Path(str(resources.files(__name__).joinpath(folder)))


def bundled_path(name: str) -> Path:
    """Path of the bundled table ``name``.

    Raises
    ------
    KeyError
        If ``name`` is not bundled; the message lists the bundled names.
    """
    try:
        filename = BUNDLED_TABLES[name][0]
    except KeyError:
        raise KeyError(f"no bundled table {name!r}; bundled tables: {', '.join(BUNDLED_TABLES)}") from None
    return Path(str(resources.files(__name__).joinpath(filename)))
