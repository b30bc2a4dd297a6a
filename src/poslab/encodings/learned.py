"""Learned absolute position tables: bundled real ones, a user's file, a model folder or a training run."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from .._validation import AnyOf, Integer, NoneValue, check_table
from ..analysis.grid import parse_grid
from ..checkpoints.files import list_tensors, load_tensor
from ..checkpoints.positions import load_position_table, select_position_table
from ..checkpoints.runs import RUN_FILE, is_training_run, open_training_run
from ..checkpoints.sources import looks_like_path, missing_path, parse_hub_id, resolve_model
from ..data import BUNDLED_GRIDS, BUNDLED_RUNS, BUNDLED_TABLES, bundled_name, bundled_path, bundled_run_path
from .base import Encoding, ParameterError, TableCost, parameter
from .registry import register

__all__ = ["Learned", "LearnedTable", "load_learned", "load_learned_table", "table_sha256"]


@dataclasses.dataclass(frozen=True)
class LearnedTable:
    """A stored learned table and where it came from.

    Attributes
    ----------
    table : ndarray of shape (rows, table_dim)
        Every stored row (prefix and padding rows included), float64, read-only.
    tensor : str
        Tensor name, or file name for single-array files.
    source_dtype : str
        dtype as stored (``bfloat16``, ``float16``, ``float32``...).
    offset : int or None
        Row of position 0 detected from the model's config and family; None
        when nothing determines it (bundled tables, plain files).
    grid : tuple of int or None
        (rows, cols) patch grid of a vision table.
    prefix_tokens : int or None
        Rows before the patch grid (vision tables).
    reason : str
        How the tensor, offset and grid were chosen.
    rule : str
        The convention that maps rows to positions: a family's (``offset`` detected, a different
        ``offset`` is an error), or a stated generic rule with ``offset`` None (row p is position p
        unless ``offset`` is given). Empty when none applies: ``offset`` must then be given.
    repo_id, revision : str or None
        The Hugging Face repo ``ORG/NAME`` and the snapshot commit read, for a Hub id or a cache
        entry (see :func:`poslab.checkpoints.resolve_model`); None for other sources.
    sha256 : str
        Fingerprint of the stored values (:func:`table_sha256`), whatever the source.
    """

    table: np.ndarray
    tensor: str
    source_dtype: str
    offset: int | None = None
    grid: tuple[int, int] | None = None
    prefix_tokens: int | None = None
    reason: str = ""
    rule: str = ""
    repo_id: str | None = None
    revision: str | None = None
    sha256: str = ""

    def __post_init__(self):
        if not self.sha256:
            object.__setattr__(self, "sha256", table_sha256(self.table))


def table_sha256(table) -> str:
    """SHA-256 (hex) of a table's values as little-endian float64 in C order, every stored row.

    The same stored values give the same fingerprint whatever the file format or dtype they
    were stored in (float16, bfloat16 and float32 widen to float64 exactly); recompute it with
    ``hashlib.sha256(numpy.asarray(table, "<f8").tobytes()).hexdigest()``.
    """
    return hashlib.sha256(np.ascontiguousarray(table, dtype="<f8").tobytes()).hexdigest()


def _fingerprint(path: Path) -> tuple:
    """Modification times and sizes of ``path`` (a file, or the files up to three levels inside a folder)."""
    if path.is_file():  # and the config.json beside it, which chooses the tensor and its offset
        return tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size)
                     for p in (path, path.parent / "config.json") if p.is_file())
    out = []
    for root, dirs, files in os.walk(path, followlinks=False):
        depth = len(Path(root).relative_to(path).parts)
        dirs[:] = [] if depth >= 3 else sorted(d for d in dirs if d != "blobs")
        for name in sorted(files):
            try:
                st = (Path(root) / name).stat()
            except OSError:  # a broken symlink: reported when read
                continue
            out.append((str(Path(root, name).relative_to(path)), st.st_mtime_ns, st.st_size))
    return tuple(out)


def _readonly(arr, name) -> np.ndarray:
    # non-finite rows are refused only where they are analysed (Learned._check_size checks the window)
    table = check_table(arr, name=name, allow_nonfinite=True)
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=16)
def _load_cached(source: str, key: str | None, step: int | None, fingerprint: tuple) -> LearnedTable:
    if source in BUNDLED_TABLES:
        path = bundled_path(source)
        grid = BUNDLED_GRIDS.get(source)
        return LearnedTable(_readonly(np.load(path, allow_pickle=False), source), path.name,
                            list_tensors(path)[0].dtype, None, grid, 0 if grid else None, "bundled table",
                            "bundled table: row p is position p" + (" (patches in raster order)" if grid else ""))
    path = Path(source)
    if path.exists() and is_training_run(path):
        run = open_training_run(path)
        if step is None:
            raise ValueError(f"learned: {source} is a training run ({RUN_FILE}); choose step = one of "
                             f"{', '.join(map(str, run.steps))} (or step = \"all\" in a study file)")
        if key is not None:
            raise ValueError(f"learned: a training-run snapshot holds one table; remove key={key!r}")
        file = run.snapshot(step)
        name = str(file.relative_to(run.path))
        return LearnedTable(_readonly(load_tensor(file), f"{source} {name}"), name, list_tensors(file)[0].dtype,
                            None, None, None, f"training run step {step}", "poslab training run: row p is position p")
    if step is not None:
        raise ValueError(f"learned: step = {step} is only for training-run folders (holding {RUN_FILE}); "
                         f"{source} is not one")
    selection = select_position_table(source, key)
    chosen = selection.require()
    table = _readonly(load_position_table(selection), f"{path.name}[{chosen.key}]" if chosen.key else path.name)
    tensor = chosen.key if chosen.key is not None else selection.checkpoint.weights_name
    model = selection.checkpoint.model
    return LearnedTable(table, tensor, chosen.tensor.dtype, chosen.offset, chosen.grid, chosen.prefix_tokens,
                        selection.reason, chosen.rule, model.repo_id, model.revision)


def load_learned(source: str, key: str | None = None, step: int | None = None) -> LearnedTable:
    """The learned table named by ``source``, with where it came from.

    Parameters
    ----------
    source : str
        A bundled table name (``gpt2``; ``bundled:gpt2`` always means the bundled table, and a
        bare name that also exists as a path is refused as ambiguous, see
        :func:`poslab.data.bundled_name`), a weights file, a Hugging Face model folder,
        a local cache snapshot (``models--ORG--NAME/snapshots/REV``, or the
        ``models--ORG--NAME`` folder) or a poslab training-run folder.
    key : str, optional
        Tensor name; default: chosen from ``config.json`` and tensor names
        (see :mod:`poslab.checkpoints.positions`).
    step : int, optional
        Training step, for training-run folders only.

    Returns
    -------
    LearnedTable

    Raises
    ------
    FileNotFoundError
        ``source`` is neither a bundled name nor an existing file or folder.
    KeyError, ValueError, ImportError
        A bare bundled name that is also a path (ambiguous: write ``./NAME`` or ``bundled:NAME``);
        unknown key or step, an ambiguous or missing position table (the
        candidates are listed), an offset mismatch, an unreadable file.
    """
    try:
        name = bundled_name(source)
    except ValueError as exc:
        raise ValueError(f"learned: source = {exc}") from None
    if name in BUNDLED_RUNS and step is not None:  # a saved step of a bundled training run
        run = bundled_run_path(name)
        return _load_cached(str(run), key, step, _fingerprint(run))
    if name is not None:
        if key is not None:
            raise ValueError(f"learned: bundled table {name!r} holds one tensor; remove key={key!r}")
        if step is not None:
            raise ValueError(f"learned: step is only for training runs ({', '.join(BUNDLED_RUNS)} or a "
                             f"run folder); {name!r} is a bundled table")
        return _load_cached(name, None, None, ())
    path = Path(source).expanduser()
    if not path.exists() and not path.is_symlink():
        if looks_like_path(source):
            raise FileNotFoundError(f"learned: source = {missing_path(source, path)}")
        if parse_hub_id(source) is None:
            raise FileNotFoundError(
                f"learned: source {source!r} is neither a bundled table ({', '.join(BUNDLED_TABLES)}) "
                "nor an existing file or folder (.npy/.npz/.safetensors/.bin, a model folder, a cache snapshot, "
                "a training run) nor a Hub id (ORG/NAME, optionally @REVISION)")
        try:
            model = resolve_model(source)  # a Hub id: its cache snapshot, else the Hub
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"learned: {exc}") from None
        local = model.weights_path.parent if model.weights_path is not None else None
        fingerprint = (model.repo_id, model.revision) + (_fingerprint(local) if local is not None else ())
        return _load_cached(source, key, step, fingerprint)
    return _load_cached(str(path.absolute()), key, step, _fingerprint(path))


def load_learned_table(source: str, key: str | None = None) -> np.ndarray:
    """The full stored table named by ``source``, shape (rows, table_dim), read-only float64.

    See :func:`load_learned`.
    """
    return load_learned(source, key).table


@register
@dataclasses.dataclass(frozen=True)
class Learned(Encoding):
    """A learned absolute position table, read from bundled data, a checkpoint or a training run.

    Parameters
    ----------
    source : str
        A bundled table — ``gpt2`` (GPT-2 small ``wpe``, 1024 × 768),
        ``gpt1`` (512 × 768), ``whisper-tiny`` / ``whisper-base`` /
        ``whisper-small`` (decoder, 448 × 384/512/768), ``siglip-so400m``
        (729 × 1152, a 27 × 27 patch grid), also written ``bundled:gpt2``;
        a bare name that also exists as a file or folder is refused as
        ambiguous (write ``./gpt2`` for the folder) — or a path: a ``.npy``,
        ``.npz``, ``.safetensors`` or PyTorch ``.bin``/``.pt`` file (the last
        only with torch installed, through ``torch.load(weights_only=True)``),
        a ``config.json``, a Hugging Face model folder or cache snapshot, a
        Hub id ``ORG/NAME[@REVISION]`` (from the local cache; nothing is
        downloaded unless ``HF_HUB_OFFLINE=0`` is set, see
        :func:`poslab.checkpoints.resolve_model`), or a poslab training-run
        folder. A source written like a file (``.npy``, ``.safetensors``, ...,
        or ``./``...) is always a path, refused at once when missing.
    key : str or None
        Tensor name. Default: chosen from ``config.json`` ``model_type`` and
        the tensor names; ambiguity is an error listing the candidates.
    offset : int or None
        Row that holds position 0 (for a vision table: the number of prefix
        rows). Default: from the family's rule and the config (OPT/BART 2 =
        rows − max_position_embeddings; RoBERTa-style pad_token_id + 1;
        vision: CLS / distillation rows), see
        :data:`poslab.checkpoints.FAMILIES`; 0 for plain arrays and bundled
        tables (a stated rule). Required for an unknown family, and for a
        tensor chosen with ``key`` from a checkpoint without config.json (a
        lone tensor, ``.npy`` or ``.npz`` array follows row p = position p).
        An offset contradicting the detected one, or past the table, is an
        error naming both.
    grid : str or None
        ``"ROWSxCOLS"`` patch grid of a vision table whose rows
        offset..offset + ROWS·COLS − 1 are patches in raster order. Default:
        from the model's config (image_size / patch_size) or the bundled
        table; None for text tables.
    step : int or None
        Training step (>= 0), for a training-run ``source`` (required for a
        run folder; the bundled ``trained-char-lm`` without ``step`` is its
        last step). In a study file also a list of steps (one run each), or
        ``step = "all"``: every saved step.

    Positions 0..n_positions−1 are rows offset..offset+n_positions−1 (for
    a vision table, the patches in raster order); asking for more rows than
    the table has is an error, never a truncation. A vision table is
    analysed on its 2-D patch grid (``grid_profiles``, ``grid_displacements``,
    ``grid_maps``), whole: ``n_positions`` is its number of patches, and the
    1-D stages, whose distance |i − j| the raster index is not, do not apply
    (``not_applicable``). The table keeps its own width (``table_dim``); the
    study's ``dim`` is ignored.
    Provenance of the bundled tables: ``poslab/data/PROVENANCE.md``.
    """

    kind = "learned"
    path_params = ("source",)
    bundled_params = ("source",)
    keeps_own_dim = True

    #: What an omitted (None) parameter means, as ``poslab encodings`` prints it.
    unset_defaults: ClassVar[dict[str, str]] = {
        "key": "chosen from config.json model_type and the tensor names (`poslab inspect SOURCE` lists them)",
        "offset": "the model family's rule; 0 for plain arrays and bundled tables; an unknown family needs it",
        "grid": "from the model's config (image_size / patch_size) or the bundled table; none for text tables",
        "step": "none (a training-run folder needs one; the bundled trained-char-lm is then its last step)",
    }

    source: str
    key: str | None = parameter(None, doc="the tensor to read")
    offset: int | None = parameter(None, check=AnyOf((Integer(minimum=0), NoneValue())),
                                   doc="row of position 0 (for a vision table: the prefix rows before the grid)")
    grid: str | None = parameter(None, doc='"ROWSxCOLS" patch grid of a vision table, e.g. "27x27" (patches in '
                                           "raster order after offset rows)")
    step: int | None = parameter(None, check=AnyOf((Integer(minimum=0), NoneValue())),
                                 doc='a saved step of a training-run source; in a study file also a list of '
                                     'steps, or "all" for every saved step')

    def _check_params(self):
        if self.grid is not None:
            try:
                parse_grid(self.grid)
            except ValueError as exc:
                raise ParameterError(f"learned: {exc}") from None

    @classmethod
    def expand_study_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Study-file shorthand: ``step = "all"`` becomes the list of saved steps of the training run.

        Raises
        ------
        ValueError
            ``step = "all"`` without a single training-run ``source``.
        """
        if params.get("step") != "all":
            return params
        source = params.get("source")
        if bundled_name(source) in BUNDLED_RUNS:
            source = bundled_run_path(bundled_name(source))
        if not isinstance(source, (str, Path)) or not is_training_run(source):
            raise ValueError(f'step = "all" needs source = one training-run folder (holding {RUN_FILE}); '
                             f"got source = {source!r}")
        steps = open_training_run(source).steps
        if not steps:
            raise ValueError(f"training run {source} has no saved steps")
        return {**params, "step": list(steps)}

    def stored(self) -> LearnedTable:
        """The stored table with its origin (see :func:`load_learned`); reading is memoised per file fingerprint."""
        return load_learned(self.source, self.key, self.step)

    def table(self) -> np.ndarray:
        """The whole stored table, shape (rows, table_dim), float64, read-only."""
        return self.stored().table

    def _layout(self) -> tuple[int, tuple[int, int] | None]:
        """(offset used, grid used), checked against what the source says."""
        st = self.stored()
        name = f"learned({self.source})"
        rows = len(st.table)
        if self.offset is not None and self.offset >= rows:
            raise ValueError(f"{name}: offset = {self.offset} is past the end of {st.tensor}, which has {rows} rows "
                             f"(offsets 0..{rows - 1}); give the row that holds position 0")
        if self.offset is not None and st.offset is not None and self.offset != st.offset:
            raise ValueError(
                f"{name}: offset = {self.offset} given, but {st.tensor} has position 0 at row {st.offset} "
                f"({st.reason}); remove offset to use the detected {st.offset}"
            )
        if self.offset is None and st.offset is None and not st.rule:
            raise ValueError(
                f"{name}: which row of {st.tensor} {st.table.shape} holds position 0 is unknown ({st.reason}); "
                "poslab does not guess. Write offset = ROW OF POSITION 0 in the entry (0 for GPT-2/BERT-style "
                "tables, pad_token_id + 1 for RoBERTa-style, 2 for OPT/BART-style; check the model's code), and "
                'grid = "RxC" for a vision table; `poslab inspect` lists what was found')
        offset = self.offset if self.offset is not None else (st.offset or 0)  # a stated rule's default: row 0
        grid = parse_grid(self.grid) if self.grid is not None else st.grid
        if self.grid is not None and st.grid is not None and grid != st.grid:
            raise ValueError(f"{name}: grid = {self.grid!r} given, but the source's grid is "
                             f"{st.grid[0]}x{st.grid[1]}; remove grid")
        if grid is not None and offset + grid[0] * grid[1] > rows:
            raise ValueError(f"{name}: a {grid[0]}x{grid[1]} grid from row {offset} needs "
                             f"{offset + grid[0] * grid[1]} rows, but the table has {rows}")
        return offset, grid

    def grid_shape(self, n_positions: int) -> tuple[int, int] | None:
        """The patch grid (rows, cols) of a vision table, None for a text table (see :meth:`Encoding.grid_shape`)."""
        return self._layout()[1]

    def position_rule(self) -> str:
        """How rows map to positions in this run: the source's rule, or the offset given."""
        st = self.stored()
        if self.offset is not None and st.offset is None:
            return f"offset = {self.offset} given"
        if st.offset is None and st.rule:
            return st.rule
        return st.rule or st.reason

    def _check_size(self, n_positions, dim):
        rows = len(self.table())
        offset, grid = self._layout()
        patches = grid[0] * grid[1] if grid is not None else None
        if patches is not None and n_positions != patches:
            raise ValueError(
                f"learned({self.source}): n_positions={n_positions}, but the positions of this vision table are the "
                f"{patches} patches of its {grid[0]}x{grid[1]} grid (rows {offset}..{offset + patches - 1}; "
                f"other rows are not patches), and a grid is analysed whole, on the grid; set n_positions = "
                f"{patches} (in a study, the entry's own n_positions)")
        if offset + n_positions > rows:
            raise ValueError(
                f"learned({self.source}): n_positions={n_positions} with offset={offset} needs "
                f"{offset + n_positions} rows, but the table has {rows} "
                f"(at most {rows - offset} positions); lower n_positions"
            )
        # the analysed rows must be finite: checked with the size (a study refuses it before any work), not in a run
        window = self.table()[offset : offset + n_positions]
        bad = np.flatnonzero(~np.isfinite(window).all(axis=1))
        if bad.size == n_positions and not np.isfinite(self.table()).all(axis=1).any():
            raise ValueError(f"{self.label}: the stored table holds no finite row (each of its {rows} rows holds NaN "
                             "or inf), so there is nothing to analyse; fix the source table")
        if bad.size:
            raise ValueError(
                f"{self.label}: the stored table holds NaN or inf at {bad.size} analysed position(s) "
                f"(first: {bad[:10].tolist()}); fix the source table, or analyse a window without them "
                f"(a smaller n_positions for this entry, or a larger offset)")

    def table_cost(self, n_positions, dim):
        """The stored table's own width; it is read whole (memoised), then the window is copied."""
        stored = self.table()
        return TableCost(table_dim=int(stored.shape[1]),
                         peak_bytes=int(stored.nbytes) + 8 * int(n_positions) * int(stored.shape[1]))

    def _generate(self, n_positions, dim, rng):
        offset, _ = self._layout()
        return np.array(self.table()[offset : offset + n_positions])  # finite: checked with the size
