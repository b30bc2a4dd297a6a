"""Bundled real position tables; provenance and licences in ``PROVENANCE.md`` beside this file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["BUNDLED_TABLES", "BUNDLED_GRIDS", "BUNDLED_RUNS", "bundled_path", "bundled_run_path"]

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
