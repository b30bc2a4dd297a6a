"""Choose a checkpoint's learned position table from ``config.json`` ``model_type`` and tensor names.

For every supported family (:data:`FAMILIES`) we know which tensors are
position tables (matched after any prefix such as ``transformer.``,
``model.``, ``bert.``, ``roberta.``, ``vision_model.``), which config key
counts the positions, and which row holds position 0 in transformers' code:

- gpt2, gpt_neo, openai-gpt: ``wpe.weight`` / ``positions_embed.weight``;
  offset 0 = rows − n_positions (max_position_embeddings).
- bert, distilbert: ``embeddings.position_embeddings.weight``; offset 0.
  DistilBERT with ``sinusoidal_pos_embds`` has a fixed sinusoidal table.
- roberta, xlm-roberta: the same name; positions start at padding_idx + 1 =
  pad_token_id + 1, and rows = max_position_embeddings (514 for 512 positions).
- opt: ``decoder.embed_positions.weight``; offset 2 = rows − max_position_embeddings.
- bart: ``encoder.`` and ``decoder.embed_positions.weight``, offset 2 each
  (two learned tables: choose one with ``key``).
- whisper: the decoder's ``embed_positions.weight`` (or OpenAI's
  ``decoder.positional_embedding``) is learned, offset 0 = rows −
  max_target_positions; the encoder's is sinusoidal (fixed): recognised,
  never taken as learned.
- vit, deit: ``embeddings.position_embeddings`` of shape (1, prefix + N, d),
  prefix 1 (CLS) or 2 (CLS + distillation), then the image_size / patch_size grid.
- clip, siglip (and their ``_vision_model`` types):
  ``vision_model.embeddings.position_embedding.weight`` (N + prefix, d),
  prefix 1 (CLS) or 0, grid from ``vision_config``; full models also hold a
  text table (``text_model...``), so they need ``key``.

The offset is always computed from the table and the config (rows minus the
configured number of positions, or rows minus the patch grid) and then
checked against the family's convention: a mismatch is an error naming both
(case C8). Integer buffers (``position_ids``) are never taken. Several
possible tables, or none, are refused with the candidates listed; nothing is
guessed. Without a config (or with an unknown ``model_type``) a tensor is
taken only if it is the file's only tensor, or the only float tensor named
like a position table.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np

from .files import FLOAT_DTYPES, TensorInfo, load_tensor
from .models import Checkpoint, open_checkpoint

__all__ = ["FAMILIES", "Candidate", "Selection", "select_position_table", "load_position_table"]


@dataclasses.dataclass(frozen=True)
class Slot:
    """Where a family keeps one position table and how its rows map to positions."""

    suffixes: tuple[str, ...]          # tensor name, matched on a '.' boundary after any prefix
    what: str                          # e.g. "decoder positions"
    role: str = "learned"              # or "sinusoidal" (a fixed table: recognised, never chosen automatically)
    section: str | None = None         # nested config holding the keys ("vision_config", "text_config")
    length_keys: tuple[str, ...] = ("max_position_embeddings",)
    length_default: int | None = None  # transformers' default when the key is absent from config.json
    offset: int | str = 0              # row of position 0; "padding": pad_token_id + 1 (RoBERTa)
    prefix_tokens: int | None = None   # vision: rows before the patch grid (None: a text table)
    image_default: tuple[int, int] = (224, 16)  # transformers' default image_size, patch_size
    sinusoidal_flag: str | None = None  # config key that makes the table sinusoidal (DistilBERT)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    slots: tuple[Slot, ...]


def _text(suffixes, what="positions", **kw) -> Slot:
    return Slot(tuple(suffixes) if isinstance(suffixes, (list, tuple)) else (suffixes,), what, **kw)


_BERT = "embeddings.position_embeddings.weight"
_ROBERTA = _text(_BERT, offset="padding", length_default=512)
_CLIP_VISION = "vision_model.embeddings.position_embedding.weight"
_CLIP_TEXT = "text_model.embeddings.position_embedding.weight"

#: model_type -> where its position tables are (defaults are transformers' config defaults).
FAMILIES: dict[str, Family] = {
    "gpt2": Family("GPT-2", (_text("wpe.weight", length_keys=("n_positions", "max_position_embeddings"),
                                   length_default=1024),)),
    "gpt_neo": Family("GPT-Neo", (_text("wpe.weight", length_default=2048),)),
    "openai-gpt": Family("GPT-1", (_text("positions_embed.weight", length_keys=("n_positions", "max_position_embeddings"),
                                         length_default=512),)),
    "bert": Family("BERT", (_text(_BERT, length_default=512),)),
    "distilbert": Family("DistilBERT", (_text(_BERT, length_default=512, sinusoidal_flag="sinusoidal_pos_embds"),)),
    "roberta": Family("RoBERTa", (_ROBERTA,)),
    "xlm-roberta": Family("XLM-RoBERTa", (_ROBERTA,)),
    "opt": Family("OPT", (_text("decoder.embed_positions.weight", "decoder positions", offset=2, length_default=2048),)),
    "bart": Family("BART", (_text("encoder.embed_positions.weight", "encoder positions", offset=2, length_default=1024),
                            _text("decoder.embed_positions.weight", "decoder positions", offset=2, length_default=1024))),
    "whisper": Family("Whisper", (
        _text(("decoder.embed_positions.weight", "decoder.positional_embedding"), "decoder positions",
              length_keys=("max_target_positions",), length_default=448),
        _text(("encoder.embed_positions.weight", "encoder.positional_embedding"), "encoder positions",
              role="sinusoidal", length_keys=("max_source_positions",), length_default=1500),
    )),
    "vit": Family("ViT", (Slot(("embeddings.position_embeddings",), "patch positions", prefix_tokens=1),)),
    "deit": Family("DeiT", (Slot(("embeddings.position_embeddings",), "patch positions", prefix_tokens=2),)),
    "clip": Family("CLIP", (
        Slot((_CLIP_VISION,), "vision patch positions", section="vision_config", prefix_tokens=1, image_default=(224, 32)),
        _text(_CLIP_TEXT, "text positions", section="text_config", length_default=77),
    )),
    "clip_vision_model": Family("CLIP vision", (
        Slot((_CLIP_VISION,), "vision patch positions", prefix_tokens=1, image_default=(224, 32)),)),
    "siglip": Family("SigLIP", (
        Slot((_CLIP_VISION,), "vision patch positions", section="vision_config", prefix_tokens=0),
        _text(_CLIP_TEXT, "text positions", section="text_config", length_default=64),
    )),
    "siglip_vision_model": Family("SigLIP vision", (
        Slot((_CLIP_VISION,), "vision patch positions", prefix_tokens=0),)),
}

_PREFIX_NAMES = {0: "none", 1: "CLS", 2: "CLS + distillation"}

#: names that look like a position table (used without a known model_type, and to list candidates).
POSITION_NAME = re.compile(
    r"(^|[._])(wpe|pos_embed|pos_embedding|pos_emb|position_embed|positions_embed|embed_positions|"
    r"position_embeddings?|positional_embeddings?)(\.weight)?$",
    re.IGNORECASE,
)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A tensor that may be a position table, with what poslab makes of it.

    Attributes
    ----------
    tensor : TensorInfo
    role : str
        ``learned``, ``sinusoidal`` (a fixed table), ``name match`` (no
        family rule: named like a position table), ``integer buffer`` or
        ``not a table`` (shape).
    what : str
        Family and part, e.g. "OPT decoder positions".
    offset : int or None
        Row holding position 0 (for vision tables: the number of prefix
        tokens); None when no rule determines it.
    n_positions : int or None
        Positions the table holds (rows − offset), or None.
    grid : tuple of int or None
        (rows, cols) of the patch grid, vision tables only.
    prefix_tokens : int or None
        Rows before the patch grid (CLS, distillation), vision tables only.
    reason : str
        How offset and grid were derived from the table and the config.
    problem : str
        Why the tensor cannot be used as stated (empty if it can).
    """

    tensor: TensorInfo
    role: str
    what: str = ""
    offset: int | None = None
    n_positions: int | None = None
    grid: tuple[int, int] | None = None
    prefix_tokens: int | None = None
    reason: str = ""
    problem: str = ""

    @property
    def key(self) -> str | None:
        return self.tensor.key

    @property
    def usable(self) -> bool:
        return self.role in ("learned", "name match") and not self.problem

    def describe(self) -> str:
        t = self.tensor
        parts = [f"{t.key if t.key is not None else '<array>'}  {t.shape}  {t.dtype}"]
        if self.role not in ("integer buffer", "not a table"):
            parts.append(f"offset {self.offset}" if self.offset is not None else "offset ?")
        if self.grid:
            parts.append(f"grid {self.grid[0]}x{self.grid[1]}, prefix tokens {self.prefix_tokens}")
        parts.append(f"{self.role}{': ' + self.what if self.what else ''}")
        if self.problem:
            parts.append(f"PROBLEM: {self.problem}")
        return "  ".join(parts)


@dataclasses.dataclass(frozen=True)
class Selection:
    """The candidates of a checkpoint and the position table chosen (or why none).

    Attributes
    ----------
    checkpoint : Checkpoint
    model_type : str or None
    candidates : tuple of Candidate
    chosen : Candidate or None
    reason : str
        Why ``chosen`` was taken, or why nothing was.
    """

    checkpoint: Checkpoint
    model_type: str | None
    candidates: tuple[Candidate, ...]
    chosen: Candidate | None
    reason: str
    tensors: tuple[TensorInfo, ...] = ()

    def require(self) -> Candidate:
        """The chosen candidate, or ValueError saying why there is none (candidates, else tensors, listed)."""
        if self.chosen is None:
            if self.candidates:
                listed = "Candidates:" + "".join(f"\n  {c.describe()}" for c in self.candidates)
            else:
                listed = f"It holds {_some(self.tensors)}"
            raise ValueError(f"{self.checkpoint.path}: {self.reason}. {listed}")
        return self.chosen


def _some(tensors, limit=40) -> str:
    shown = "; ".join(str(i) for i in tensors[:limit])
    return shown + (f"; ... ({len(tensors)} in all)" if len(tensors) > limit else "")


def _table_rows(shape) -> int | None:
    if len(shape) == 2:
        return shape[0]
    if len(shape) == 3 and shape[0] == 1:
        return shape[1]
    return None


def _matches(name: str | None, suffix: str) -> bool:
    return name is not None and (name == suffix or name.endswith("." + suffix))


def _pair(value, what) -> tuple[int, int]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return int(value[0]), int(value[1])
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    raise ValueError(f"config {what} must be an integer or [height, width], got {value!r}")


def _from_slot(info: TensorInfo, family: Family, slot: Slot, config: dict) -> Candidate:
    """Offset, positions and grid of ``info`` under ``slot``, checked against the family's convention."""
    what = f"{family.name} {slot.what}"
    rows = _table_rows(info.shape)
    if info.dtype not in FLOAT_DTYPES:
        return _bad_dtype(info, what)
    if rows is None:
        return Candidate(info, "not a table", what, problem=f"shape {info.shape} is not (rows, dim) or (1, rows, dim)")
    cfg = config.get(slot.section, {}) if slot.section else config
    cfg = cfg if isinstance(cfg, dict) else {}
    where = f"{slot.section}." if slot.section else ""
    role = slot.role
    if slot.sinusoidal_flag and cfg.get(slot.sinusoidal_flag):
        role = "sinusoidal"
        what += f" ({slot.sinusoidal_flag} = true)"
    if slot.prefix_tokens is not None:  # a vision table: prefix tokens, then the patch grid
        defaulted = [k for k in ("image_size", "patch_size") if k not in cfg]
        image = _pair(cfg.get("image_size", slot.image_default[0]), f"{where}image_size")
        patch = _pair(cfg.get("patch_size", slot.image_default[1]), f"{where}patch_size")
        grid = (image[0] // patch[0], image[1] // patch[1])
        cells = grid[0] * grid[1]
        offset = rows - cells
        reason = (f"{rows} rows = {offset} prefix row(s) + {grid[0]}x{grid[1]} patches "
                  f"({where}image_size {cfg.get('image_size', slot.image_default[0])} / "
                  f"patch_size {cfg.get('patch_size', slot.image_default[1])}"
                  + (f"; {' and '.join(defaulted)} not in config: transformers' default" if defaulted else "") + ")")
        problem = ""
        if offset != slot.prefix_tokens:
            problem = (f"{rows} rows − {grid[0]}x{grid[1]} = {cells} patches leaves {offset} prefix row(s), but "
                       f"{family.name} has {slot.prefix_tokens} ({_PREFIX_NAMES.get(slot.prefix_tokens)}); "
                       "check image_size and patch_size in config.json")
        return Candidate(info, role, what, offset, cells, grid, slot.prefix_tokens, reason, problem)
    key = next((k for k in slot.length_keys if k in cfg), None)
    length = cfg[key] if key else slot.length_default
    source = f"{where}{key}" if key else f"{where}{slot.length_keys[0]} (not in config: transformers' default)"
    if not isinstance(length, int) or isinstance(length, bool):
        return Candidate(info, role, what, problem=f"config {source} = {length!r} is not an integer")
    if slot.offset == "padding":
        pad = cfg.get("pad_token_id", 1)
        if not isinstance(pad, int) or isinstance(pad, bool):
            return Candidate(info, role, what, problem=f"config {where}pad_token_id = {pad!r} is not an integer; "
                                                       f"{family.name} positions start at pad_token_id + 1")
        offset = pad + 1
        reason = (f"positions start at padding_idx + 1 = pad_token_id {pad} + 1 = {offset}"
                  f"{'' if 'pad_token_id' in cfg else ' (pad_token_id not in config: default 1)'}; "
                  f"{rows} rows = {source} {length}, so {rows - offset} positions")
        problem = "" if rows == length else (
            f"{rows} rows but {source} = {length}; {family.name} tables have exactly max_position_embeddings rows "
            f"(the first {offset} before position 0)")
        return Candidate(info, role, what, offset, rows - offset, reason=reason, problem=problem)
    offset = rows - length
    reason = f"offset {offset} = {rows} rows − {source} {length} ({family.name} uses {slot.offset})"
    problem = "" if offset == slot.offset else (
        f"{rows} rows − {source} {length} = offset {offset}, but {family.name} uses offset {slot.offset}; "
        "check the config and the tensor")
    return Candidate(info, role, what, offset, length if offset >= 0 else None, reason=reason, problem=problem)


def _bad_dtype(info: TensorInfo, what: str = "") -> Candidate:
    if "int" in info.dtype or info.dtype == "bool":
        return Candidate(info, "integer buffer", what, problem=f"dtype {info.dtype} is not a float table")
    return Candidate(info, "not a table", what, problem=f"dtype {info.dtype} has no numpy equivalent; "
                                                       "save the tensor as float32")


def _by_name(info: TensorInfo) -> Candidate:
    if info.dtype not in FLOAT_DTYPES:
        return _bad_dtype(info)
    rows = _table_rows(info.shape)
    if rows is None:
        return Candidate(info, "not a table", problem=f"shape {info.shape} is not (rows, dim) or (1, rows, dim)")
    return Candidate(info, "name match", "no family rule: offset unknown, 0 unless set", reason="named like a position table")


def _explicit(info: TensorInfo, family: Family | None, config: dict) -> Candidate:
    if family is not None:
        for slot in family.slots:
            if any(_matches(info.key, s) for s in slot.suffixes):
                return _from_slot(info, family, slot, config)
    cand = _by_name(info)
    return cand if cand.problem else Candidate(info, "name match", "chosen with key: offset unknown, 0 unless set",
                                               reason="given as key")


def select_position_table(path, key: str | None = None) -> Selection:
    """Find the position tensors of a checkpoint and choose the one to analyse.

    Parameters
    ----------
    path : str or Path
        A weights file, a Hugging Face model folder or cache snapshot (see
        :func:`poslab.checkpoints.open_checkpoint`).
    key : str, optional
        Tensor to use. Its offset and grid still come from the family rules
        when the model type is known.

    Returns
    -------
    Selection
        ``chosen`` is None (and ``reason`` says why) when nothing or several
        tables qualify; :meth:`Selection.require` turns that into an error.

    Raises
    ------
    KeyError
        ``key`` is not in the checkpoint (the message lists the candidates).
    FileNotFoundError, ValueError, ImportError
        From :func:`poslab.checkpoints.open_checkpoint` and reading the file.
    """
    ckpt = open_checkpoint(path)
    tensors = ckpt.tensors()
    config = ckpt.config or {}
    model_type = config.get("model_type") if isinstance(config.get("model_type"), str) else None
    family = FAMILIES.get(model_type) if model_type else None
    candidates: list[Candidate] = []
    mine: list[Candidate] = []  # matched by the family's rules
    for info in tensors:
        slot = next((s for s in family.slots if any(_matches(info.key, x) for x in s.suffixes)), None) if family else None
        if slot is not None:
            mine.append(_from_slot(info, family, slot, config))
            candidates.append(mine[-1])
        elif info.key is not None and (POSITION_NAME.search(info.key) or info.key.endswith("position_ids")):
            candidates.append(_by_name(info))

    def done(chosen, reason):
        return Selection(ckpt, model_type, tuple(candidates), chosen, reason, tuple(tensors))

    if key is not None:
        info = next((i for i in tensors if i.key == key), None)
        if info is None:
            listed = ("position candidates: " + "; ".join(str(c.tensor) for c in candidates) if candidates
                      else f"it holds: {_some(tensors)}")
            raise KeyError(f"no tensor {key!r} in {ckpt.weights_name}; {listed}")
        cand = _explicit(info, family, config)
        if cand.problem:
            raise ValueError(f"{ckpt.path}: key {key!r} cannot be used: {cand.problem}")
        if cand not in candidates:
            candidates.append(cand)
        return done(cand, f"key = {key!r} given" + (f"; {cand.reason}" if cand.reason else ""))
    if family is not None:
        learned = [c for c in mine if c.role == "learned"]
        if len(learned) == 1:
            c = learned[0]
            if c.problem:
                raise ValueError(f"{ckpt.path}: {c.key} {c.tensor.shape}: {c.problem}")
            others = [o for o in mine if o is not c and o.role == "sinusoidal"]
            note = "".join(f"; {o.key} is the {o.what}, a fixed sinusoidal table, not learned" for o in others)
            return done(c, f"model_type {model_type!r}: the {c.what} table; {c.reason}{note}")
        if len(learned) > 1:
            return done(None, f"model_type {model_type!r} has {len(learned)} learned position tables "
                              f"({', '.join(c.what for c in learned)}); ambiguous: choose one with key = NAME")
        fixed = [c for c in mine if c.role == "sinusoidal"]
        if fixed:
            return done(None, f"model_type {model_type!r}: the only position table, {fixed[0].key}, is "
                              f"sinusoidal (fixed), not learned; pass key = {fixed[0].key!r} to analyse it anyway")
        names = ", ".join(s for slot in family.slots for s in slot.suffixes)
        return done(None, f"model_type {model_type!r}: no float tensor named {names} (with any prefix)")
    why = "no config.json" if ckpt.config is None else (
        f"model_type {model_type!r} is not a known family ({', '.join(FAMILIES)})" if model_type
        else "config.json has no model_type")
    floats = [i for i in tensors if i.dtype in FLOAT_DTYPES and _table_rows(i.shape) is not None]
    if len(tensors) == 1 and floats:
        cand = Candidate(floats[0], "name match", "the file's only tensor: offset unknown, 0 unless set",
                         reason="the only tensor in the file")
        if cand.tensor not in [c.tensor for c in candidates]:
            candidates.append(cand)
        return done(cand, f"{why}; the file holds this one tensor")
    usable = [c for c in candidates if c.usable]
    if len(usable) == 1:
        return done(usable[0], f"{why}; the only float tensor named like a position table (offset unknown: 0 "
                               "unless set)")
    if usable:
        return done(None, f"{why}; {len(usable)} float tensors are named like a position table: ambiguous, "
                          "choose one with key = NAME")
    return done(None, f"{why}; no float tensor is named like a position table; choose one with key = NAME")


def load_position_table(selection: Selection) -> np.ndarray:
    """Read the chosen table of ``selection`` (and only it), shape (rows, dim).

    A vision table stored as (1, rows, dim) is returned as (rows, dim).
    bfloat16 comes back as float32 (exact); other dtypes as stored.

    Raises
    ------
    ValueError
        Nothing was chosen (see :meth:`Selection.require`).
    """
    cand = selection.require()
    arr = selection.checkpoint.read(cand.key)
    return arr[0] if arr.ndim == 3 else arr


def describe_selection(selection: Selection) -> str:
    """Human-readable report for ``poslab inspect``."""
    ck = selection.checkpoint
    head = [f"{ck.path}: {ck.what}, weights {ck.weights_name}"
            + (f", config.json model_type {selection.model_type!r}" if ck.config is not None else ", no config.json")]
    if selection.candidates:
        head.append("candidate position tensors (* = used):")
        head += [f"  {'*' if c == selection.chosen else ' '} {c.describe()}" for c in selection.candidates]
    else:
        head.append("candidate position tensors: none")
    if selection.chosen is not None:
        head.append(f"used: {selection.chosen.key if selection.chosen.key is not None else '<array>'} — {selection.reason}")
    else:
        head.append(f"used: none — {selection.reason}")
    return "\n".join(head)
