"""Choose a checkpoint's learned position table from ``config.json`` ``model_type`` and tensor names.

:data:`FAMILIES` maps each supported model type (91 with transformers 5.24) to its position
tables: tensor names (matched on a '.' boundary after any prefix; the longest match wins), the
config section and keys that count the positions or give the patch grid, and the family's rule
for the row of position 0, as transformers' modeling code uses it:

- position p is row p (GPT-2, BERT, CLIP text, Whisper decoder, LED, ...);
- position p is row pad_token_id + 1 + p, rows = max_position_embeddings (RoBERTa and the
  families that copy its embeddings: CamemBERT, XLM-R(-XL), MPNet, Longformer, ESM, ...);
- position p is row 2 + p, rows = max_position_embeddings + 2 (OPT, BART, mBART, BioGPT, ...);
- vision: ``prefix`` rows (CLS, distillation; an int or a config key), the patch grid
  (image_size / patch_size, or AST's frequency x time grid) in raster order, then any
  trailing rows (YOLOS detection tokens).

The offset is computed from the table and the config (rows minus the configured positions,
rows minus the grid) and checked against the family's rule: a mismatch is an error naming
both (case C8). Fixed sinusoidal tables (Whisper's encoder, DistilBERT / XLM with their
sinusoidal flag) are recognised and never taken as learned. Integer buffers are never taken.
Several possible tables are refused with the candidates listed (choose with ``key``).

No silent guesses: an unknown ``model_type`` or a checkpoint without ``config.json`` yields a
candidate whose offset is unknown (``learned`` then requires ``offset``); only a plain array
(a ``.npy``, one array of a ``.npz``, a single-tensor file without config) follows the stated
rule "row p is position p". ``tests/hf/test_learned_matrix.py`` checks every family against
the forward pass of a tiny model built by the installed transformers, and the defaults here
against its config classes.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np

from .files import FLOAT_DTYPES, TensorInfo, tensor_list
from .models import Checkpoint, open_checkpoint
from .sources import quoted

__all__ = ["FAMILIES", "Candidate", "Selection", "select_position_table", "load_position_table"]


@dataclasses.dataclass(frozen=True)
class Slot:
    """Where a family keeps one position table and how its rows map to positions."""

    suffixes: tuple[str, ...]          # tensor name, matched on a '.' boundary after any prefix (longest wins)
    what: str                          # e.g. "decoder positions"
    role: str = "learned"              # or "sinusoidal" (a fixed table: recognised, never chosen automatically)
    section: str | None = None         # nested config holding the keys ("vision_config", "text_config")
    length_keys: tuple[str, ...] = ("max_position_embeddings",)
    length_default: int | None = None  # transformers' default when the key is absent from config.json
    offset: int | str = 0              # row of position 0: an int (rows − length must equal it) or "padding"
    pad_default: int | None = 1        # "padding": transformers' pad_token_id default
    prefix_tokens: int | str | None = None  # vision: rows before the patch grid (an int or a config key)
    prefix_default: int = 0            # when prefix_tokens names a config key absent from config.json
    suffix_key: str | None = None      # vision: config key counting rows after the grid (YOLOS detection tokens)
    grid: str = "image"                # vision: "image" (image_size / patch_size) or "spectrogram" (AST)
    image_default: tuple[int, int] = (224, 16)  # transformers' default image_size, patch_size
    sinusoidal_flag: str | None = None  # config key that makes the table sinusoidal (DistilBERT, XLM)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    slots: tuple[Slot, ...]


def _text(suffixes, what="positions", **kw) -> Slot:
    return Slot(tuple(suffixes) if isinstance(suffixes, (list, tuple)) else (suffixes,), what, **kw)


def _vision(suffixes, prefix, what="patch positions", **kw) -> Slot:
    return Slot(tuple(suffixes) if isinstance(suffixes, (list, tuple)) else (suffixes,), what, prefix_tokens=prefix,
                **kw)


_BERT = "embeddings.position_embeddings.weight"
_VIT = "embeddings.position_embeddings"          # an nn.Parameter (1, prefix + patches, dim)
_CLIPV = "embeddings.position_embedding.weight"  # an nn.Embedding (prefix + patches, dim)


def _bert(name, default=512, **kw):
    return Family(name, (_text(_BERT, length_default=default, **kw),))


def _roberta(name, default=512, pad=1):
    return Family(name, (_text(_BERT, offset="padding", length_default=default, pad_default=pad),))


def _seq2seq(name, offset, default, enc_keys=("max_position_embeddings",), dec_keys=("max_position_embeddings",),
             enc_default=None):
    return Family(name, (
        _text("encoder.embed_positions.weight", "encoder positions", offset=offset, length_keys=enc_keys,
              length_default=enc_default or default),
        _text("decoder.embed_positions.weight", "decoder positions", offset=offset, length_keys=dec_keys,
              length_default=default)))


def _dual(name, text: Slot, vision: Slot):
    return Family(name, (text, vision))


def _clip_like(name, text_default, prefix, image_default, text_suffix="text_model." + _CLIPV,
               vision_suffix="vision_model." + _CLIPV, vision_section="vision_config", **text_kw):
    return _dual(name, _text(text_suffix, "text positions", section="text_config", length_default=text_default,
                             **text_kw),
                 _vision(vision_suffix, prefix, "vision patch positions", section=vision_section,
                         image_default=image_default))


#: model_type -> where its learned position tables are and how rows map to positions. Defaults are
#: transformers' config-class defaults; tests/hf/test_learned_matrix.py checks every entry against the
#: forward pass of a tiny model built by the installed transformers, and the defaults against its config classes.
FAMILIES: dict[str, Family] = {
    # GPT-style decoders: position p is row p
    "gpt2": Family("GPT-2", (_text("wpe.weight", length_keys=("n_positions", "max_position_embeddings"),
                                   length_default=1024),)),
    "gpt_bigcode": Family("GPTBigCode", (_text("wpe.weight", length_keys=("n_positions", "max_position_embeddings"),
                                               length_default=1024),)),
    "gpt_neo": Family("GPT-Neo", (_text("wpe.weight", length_default=2048),)),
    "imagegpt": Family("ImageGPT", (_text("wpe.weight", length_keys=("n_positions", "max_position_embeddings"),
                                          length_default=1024),)),
    "openai-gpt": Family("GPT-1", (_text("positions_embed.weight", length_keys=("n_positions", "max_position_embeddings"),
                                         length_default=512),)),
    # BERT-style encoders: position p is row p
    **{t: _bert(n) for t, n in [("bert", "BERT"), ("albert", "ALBERT"), ("bert-generation", "BertGeneration"),
                                ("convbert", "ConvBERT"), ("electra", "ELECTRA"), ("ernie", "ERNIE"),
                                ("fnet", "FNet"), ("layoutlm", "LayoutLM"), ("megatron-bert", "Megatron-BERT"),
                                ("mobilebert", "MobileBERT"), ("rembert", "RemBERT"), ("roc_bert", "RoCBert"),
                                ("splinter", "Splinter"), ("squeezebert", "SqueezeBERT"),
                                ("visual_bert", "VisualBERT"), ("deberta", "DeBERTa"), ("deberta-v2", "DeBERTa-v2")]},
    "big_bird": _bert("BigBird", 4096),
    "tapas": _bert("TAPAS", 1024),
    "distilbert": _bert("DistilBERT", sinusoidal_flag="sinusoidal_pos_embds"),
    "canine": Family("CANINE", (_text("char_embeddings.char_position_embeddings.weight", length_keys=("num_hash_buckets",),
                                      length_default=16384),)),  # rows = hash buckets; position p is row p
    "xlm": Family("XLM", (_text("position_embeddings.weight", length_default=512, sinusoidal_flag="sinusoidal_embeddings"),)),
    "flaubert": Family("FlauBERT", (_text("position_embeddings.weight", length_default=512,
                                          sinusoidal_flag="sinusoidal_embeddings"),)),
    # RoBERTa-style: positions start after the padding row, at pad_token_id + 1
    **{t: _roberta(n) for t, n in [("roberta", "RoBERTa"), ("xlm-roberta", "XLM-RoBERTa"), ("camembert", "CamemBERT"),
                                   ("roberta-prelayernorm", "RoBERTa-PreLayerNorm"),
                                   ("data2vec-text", "Data2VecText"), ("xmod", "X-MOD"), ("mpnet", "MPNet"),
                                   ("ibert", "I-BERT"), ("luke", "LUKE")]},
    "longformer": _roberta("Longformer"),
    "xlm-roberta-xl": _roberta("XLM-RoBERTa-XL", 514),
    "markuplm": _roberta("MarkupLM", 512, pad=0),
    "esm": _roberta("ESM", 1026, pad=None),
    # OPT/BART-style: the table has 2 extra rows before position 0 (rows = max_position_embeddings + 2)
    "opt": Family("OPT", (_text("decoder.embed_positions.weight", "decoder positions", offset=2, length_default=2048),)),
    "biogpt": Family("BioGPT", (_text("embed_positions.weight", offset=2, length_default=1024),)),
    **{t: Family(n, (_text(_BERT, offset=2, length_default=d),)) for t, n, d in
       [("nystromformer", "Nyströmformer", 510), ("mra", "MRA", 512), ("yoso", "YOSO", 4096)]},
    **{t: _seq2seq(n, 2, 1024) for t, n in [("bart", "BART"), ("mbart", "mBART"), ("plbart", "PLBart"),
                                            ("mvp", "MVP")]},
    # encoder-decoders whose position p is row p
    "blenderbot": _seq2seq("Blenderbot", 0, 128),
    "blenderbot-small": _seq2seq("Blenderbot-small", 0, 512),
    "bigbird_pegasus": _seq2seq("BigBirdPegasus", 0, 4096),
    "led": _seq2seq("LED", 0, 1024, enc_keys=("max_encoder_position_embeddings",),
                    dec_keys=("max_decoder_position_embeddings",), enc_default=16384),
    "whisper": Family("Whisper", (
        _text(("decoder.embed_positions.weight", "decoder.positional_embedding"), "decoder positions",
              length_keys=("max_target_positions",), length_default=448),
        _text(("encoder.embed_positions.weight", "encoder.positional_embedding"), "encoder positions",
              role="sinusoidal", length_keys=("max_source_positions",), length_default=1500),
    )),
    # vision transformers: prefix rows (CLS, distillation), then the patch grid in raster order
    **{t: Family(n, (_vision(_VIT, p),)) for t, n, p in
       [("vit", "ViT", 1), ("deit", "DeiT", 2), ("vit_msn", "ViT-MSN", 1),
        ("dinov2_with_registers", "DINOv2 with registers", 1), ("ijepa", "I-JEPA", 0)]},
    "dinov2": Family("DINOv2", (_vision(_VIT, 1, image_default=(224, 14)),)),
    "dpt": Family("DPT", (_vision(_VIT, 1, image_default=(384, 16)),)),
    **{t: Family(n, (_vision(_VIT, 1, image_default=((448, 448), (14, 14))),)) for t, n in
       [("internvl_vision", "InternVL vision"), ("qianfan_ocr_vision", "Qianfan-OCR vision")]},
    "yolos": Family("YOLOS", (_vision(_VIT, 1, suffix_key="num_detection_tokens", image_default=((512, 864), 16)),)),
    "mgp-str": Family("MGP-STR", (_vision("embeddings.pos_embed", 1, image_default=((32, 128), 4)),)),
    "pixio": Family("Pixio", (_vision(_VIT, "n_cls_tokens", prefix_default=8, image_default=(256, 16)),)),
    "audio-spectrogram-transformer": Family("Audio Spectrogram Transformer", (
        _vision(_VIT, 2, "spectrogram patch positions (frequency x time)", grid="spectrogram"),)),
    **{t: Family(n, (_vision(_CLIPV, p, image_default=d),)) for t, n, p, d in
       [("clip_vision_model", "CLIP vision", 1, (224, 32)), ("chinese_clip_vision_model", "Chinese-CLIP vision", 1, (224, 32)),
        ("siglip_vision_model", "SigLIP vision", 0, (224, 16)), ("aimv2_vision_model", "AIMv2 vision", 0, (224, 14)),
        ("idefics3_vision", "Idefics3 vision", 0, (224, 32)), ("smolvlm_vision", "SmolVLM vision", 0, (224, 32)),
        ("granite_docling_vision", "Granite-Docling vision", 0, (512, 16))]},
    # two towers (or a text model with a vision encoder): choose one with key
    "clip": _clip_like("CLIP", 77, 1, (224, 32)),
    "clipseg": _clip_like("CLIPSeg", 77, 1, (224, 32)),
    "metaclip_2": _clip_like("MetaCLIP 2", 77, 1, (224, 32)),
    "owlvit": _clip_like("OWL-ViT", 16, 1, (768, 32)),
    "owlv2": _clip_like("OWLv2", 16, 1, (768, 16)),
    "siglip": _clip_like("SigLIP", 64, 0, (224, 16)),
    "aimv2": _clip_like("AIMv2", 77, 0, (224, 14)),
    "clip_text_model": Family("CLIP text", (_text(_CLIPV, "text positions", length_default=77),)),
    "tipsv2": Family("TIPSv2", (_vision(("vision_encoder.pos_embed", "vision_model." + _VIT), 1, "vision patch positions",
                                        section="vision_config", image_default=(448, 14)),)),
    "tipsv2_vision_model": Family("TIPSv2 vision", (_vision(("pos_embed", _VIT), 1, image_default=(448, 14)),)),
    "chinese_clip": _dual("Chinese-CLIP", _text("text_model." + _BERT, "text positions", section="text_config",
                                                length_default=512),
                          _vision("vision_model." + _CLIPV, 1, "vision patch positions", section="vision_config",
                                  image_default=(224, 32))),
    "altclip": _dual("AltCLIP", _text("text_model.roberta." + _BERT, "text positions", section="text_config",
                                      offset="padding", length_default=514),
                     _vision("vision_model." + _CLIPV, 1, "vision patch positions", section="vision_config",
                             image_default=(224, 32))),
    "git": _dual("GIT", _text(_BERT, "text positions", length_default=1024),
                 _vision("image_encoder.vision_model." + _CLIPV, 1, "image patch positions", section="vision_config",
                         image_default=(224, 16))),
    "blip": _dual("BLIP", _text("text_model." + _BERT, "text positions", section="text_config", length_default=512),
                  _vision("vision_model.embeddings.position_embedding", 1, "vision patch positions",
                          section="vision_config", image_default=(384, 16))),
    "flava": _dual("FLAVA", _text("text_model." + _BERT, "text positions", section="text_config", length_default=512),
                   _vision("image_model." + _VIT, 1, "image patch positions", section="image_config",
                           image_default=(224, 16))),
    "groupvit": _dual("GroupViT", _text("text_model." + _CLIPV, "text positions", section="text_config",
                                        length_default=77),
                      _vision("vision_model." + _VIT, 0, "vision patch positions", section="vision_config",
                              image_default=(224, 16))),
}

_PREFIX_NAMES = {0: "none", 1: "CLS", 2: "CLS + distillation"}
#: the stated generic rule for a plain array without config.json (a .npy, one array of a .npz, a single-tensor file)
_PLAIN_RULE = "a plain table without config: row p is position p (offset 0 unless offset is given)"

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
    rule : str
        The convention applied (family rule, a generic rule, or the user's offset), as recorded in summary.csv.
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
    rule: str = ""

    @property
    def key(self) -> str | None:
        return self.tensor.key

    @property
    def usable(self) -> bool:
        return self.role in ("learned", "name match", "single table") and not self.problem

    def describe(self) -> str:
        t = self.tensor
        parts = [f"{t.key if t.key is not None else '<array>'}  {t.shape}  {t.dtype}"]
        if self.role not in ("integer buffer", "not a table"):
            parts.append(f"offset {self.offset}" if self.offset is not None else
                         "offset 0 unless set" if self.rule else "offset ?")
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
    scheme : str or None
        The position scheme of a known architecture that has no learned absolute table (RoPE,
        ALiBi, T5 buckets), when that is why nothing was chosen; its tensors are then not offered.
    """

    checkpoint: Checkpoint
    model_type: str | None
    candidates: tuple[Candidate, ...]
    chosen: Candidate | None
    reason: str
    tensors: tuple[TensorInfo, ...] = ()
    scheme: str | None = None

    def require(self) -> Candidate:
        """The chosen candidate, or ValueError saying why there is none (candidates, else tensors, listed)."""
        if self.chosen is None:
            if self.candidates:
                listed = "Candidates:" + "".join(f"\n  {c.describe()}" for c in self.candidates)
            elif self.scheme is not None:  # none of its tensors is a position table: listing them invites a wrong key
                raise ValueError(f"{self.checkpoint.path}: {self.reason}")
            elif len(self.tensors) == 1 and self.reason.endswith(_not_a_table_advice(self.tensors[0])):
                raise ValueError(f"{self.checkpoint.path}: {self.reason}")  # it already says what the file holds
            else:
                listed = f"It holds {tensor_list(self.tensors)}"
            raise ValueError(f"{self.checkpoint.path}: {self.reason}. {listed}")
        return self.chosen


def _table_rows(shape) -> int | None:
    if len(shape) == 2:
        return shape[0]
    if len(shape) == 3 and shape[0] == 1:
        return shape[1]
    return None


def _matches(name: str | None, suffix: str) -> bool:
    return name is not None and (name == suffix or name.endswith("." + suffix))


def _positive(value, what) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"config {what} = {quoted(value)}: expected a positive integer")
    return value


def _pair(value, what) -> tuple[int, int]:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        return _positive(value[0], what), _positive(value[1], what)
    if isinstance(value, int) and not isinstance(value, bool):
        return _positive(value, what), value
    raise ValueError(f"config {what} = {quoted(value)}: expected a positive integer or [height, width]")


def _grid(slot: Slot, cfg: dict, where: str) -> tuple[tuple[int, int], str]:
    """(rows, cols) of the patch grid from the config, and how it was computed."""
    if slot.grid == "spectrogram":  # AST: (num_mel_bins − patch)/frequency_stride + 1 by (max_length − patch)/time_stride + 1
        get = {k: _positive(cfg.get(k, d), f"{where}{k}") for k, d in
               [("num_mel_bins", 128), ("max_length", 1024), ("patch_size", 16), ("frequency_stride", 10),
                ("time_stride", 10)]}
        f = (get["num_mel_bins"] - get["patch_size"]) // get["frequency_stride"] + 1
        t = (get["max_length"] - get["patch_size"]) // get["time_stride"] + 1
        return (f, t), (f"{f} frequency x {t} time patches from {where}num_mel_bins {get['num_mel_bins']}, max_length "
                        f"{get['max_length']}, patch_size {get['patch_size']}, strides {get['frequency_stride']}/"
                        f"{get['time_stride']}")
    defaulted = [k for k in ("image_size", "patch_size") if k not in cfg]
    image = _pair(cfg.get("image_size", slot.image_default[0]), f"{where}image_size")
    patch = _pair(cfg.get("patch_size", slot.image_default[1]), f"{where}patch_size")
    grid = (image[0] // patch[0], image[1] // patch[1])
    if min(grid) < 1:
        raise ValueError(f"config {where}patch_size {patch} is larger than {where}image_size {image}: no patch fits")
    return grid, (f"{grid[0]}x{grid[1]} patches = {where}image_size {cfg.get('image_size', slot.image_default[0])} / "
                  f"patch_size {cfg.get('patch_size', slot.image_default[1])}"
                  + (f" ({' and '.join(defaulted)} not in config: transformers' default)" if defaulted else ""))


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
    try:
        if slot.prefix_tokens is not None:
            return _vision_candidate(info, family, slot, cfg, where, rows, role, what)
        return _text_candidate(info, family, slot, cfg, where, rows, role, what)
    except ValueError as exc:
        return Candidate(info, role, what, problem=str(exc))


def _vision_candidate(info, family, slot, cfg, where, rows, role, what) -> Candidate:
    grid, how = _grid(slot, cfg, where)
    cells = grid[0] * grid[1]
    if isinstance(slot.prefix_tokens, str):
        prefix = cfg.get(slot.prefix_tokens, slot.prefix_default)
        prefix = prefix if isinstance(prefix, int) and not isinstance(prefix, bool) and prefix >= 0 else None
        prefix_how = f"{where}{slot.prefix_tokens} = {prefix}"
        if prefix is None:
            raise ValueError(f"config {where}{slot.prefix_tokens} is not a non-negative integer")
    else:
        prefix, prefix_how = slot.prefix_tokens, _PREFIX_NAMES.get(slot.prefix_tokens, str(slot.prefix_tokens))
    suffix = 0
    if slot.suffix_key:
        suffix = cfg.get(slot.suffix_key, 100)
        suffix = suffix if isinstance(suffix, int) and not isinstance(suffix, bool) and suffix >= 0 else None
        if suffix is None:
            raise ValueError(f"config {where}{slot.suffix_key} is not a non-negative integer")
    offset = rows - cells - suffix
    rule = (f"{family.name}: {prefix} prefix row(s) ({prefix_how}), then the patch grid in raster order"
            + (f", then {suffix} row(s) of {where}{slot.suffix_key}" if suffix else ""))
    reason = f"{rows} rows = {offset} prefix row(s) + {how}" + (f" + {suffix} {slot.suffix_key}" if suffix else "")
    problem = "" if offset == prefix else (
        f"{rows} rows − {grid[0]}x{grid[1]} = {cells} patches{f' − {suffix} {slot.suffix_key}' if suffix else ''} "
        f"leaves {offset} prefix row(s), but {family.name} has {prefix} ({prefix_how}); check image_size and "
        "patch_size in config.json")
    return Candidate(info, role, what, prefix, cells, grid, prefix, reason, problem, rule)


def _text_candidate(info, family, slot, cfg, where, rows, role, what) -> Candidate:
    key = next((k for k in slot.length_keys if k in cfg), None)
    length = cfg[key] if key else slot.length_default
    source = f"{where}{key}" if key else f"{where}{slot.length_keys[0]} (not in config: transformers' default)"
    if not isinstance(length, int) or isinstance(length, bool) or length < 1:
        raise ValueError(f"config {source} = {quoted(length)} is not a positive integer")
    if slot.offset == "padding":
        pad = cfg.get("pad_token_id", slot.pad_default)
        if not isinstance(pad, int) or isinstance(pad, bool) or pad < 0:
            raise ValueError(f"config {where}pad_token_id = {quoted(pad)} is not a non-negative integer; "
                             f"{family.name} positions start at pad_token_id + 1")
        offset = pad + 1
        rule = f"{family.name}: position p is row pad_token_id + 1 + p (transformers' padding_idx + 1)"
        reason = (f"positions start at padding_idx + 1 = pad_token_id {pad} + 1 = {offset}"
                  f"{'' if 'pad_token_id' in cfg else f' (pad_token_id not in config: default {pad})'}; "
                  f"{rows} rows = {source} {length}, so {rows - offset} positions")
        problem = "" if rows == length else (
            f"{rows} rows but {source} = {length}; {family.name} tables have exactly max_position_embeddings rows "
            f"(the first {offset} before position 0)")
        return Candidate(info, role, what, offset, rows - offset, reason=reason, problem=problem, rule=rule)
    offset = rows - length
    rule = f"{family.name}: position p is row {slot.offset} + p" + (
        f" (rows = {slot.length_keys[0]} + {slot.offset})" if slot.offset else "")
    reason = f"offset {offset} = {rows} rows − {source} {length} ({family.name} uses {slot.offset})"
    problem = "" if offset == slot.offset else (
        f"{rows} rows − {source} {length} = offset {offset}, but {family.name} uses offset {slot.offset}; "
        "check the config and the tensor")
    return Candidate(info, role, what, offset, length if offset >= 0 else None, reason=reason, problem=problem,
                     rule=rule)


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
    return Candidate(info, "name match", "no family rule: offset unknown, set offset",
                     reason="named like a position table")


def _slot_of(info: TensorInfo, family: Family | None) -> Slot | None:
    """The family slot whose tensor name matches ``info`` best (the longest matching suffix), or None."""
    if family is None or info.key is None:
        return None
    best = [(len(x), slot) for slot in family.slots for x in slot.suffixes if _matches(info.key, x)]
    return max(best, key=lambda t: t[0])[1] if best else None


def _explicit(info: TensorInfo, family: Family | None, config: dict) -> Candidate:
    slot = _slot_of(info, family)
    if slot is not None:
        return _from_slot(info, family, slot, config)
    cand = _by_name(info)
    return cand if cand.problem else Candidate(info, "name match", "chosen with key: offset unknown, set offset",
                                               reason="given as key")


def _is_table(info: TensorInfo) -> bool:
    """A float (rows, dim) or (1, rows, dim) tensor with at least one row and one column."""
    return info.dtype in FLOAT_DTYPES and _table_rows(info.shape) is not None and 0 not in info.shape


def _not_a_table_advice(info: TensorInfo) -> str:
    """What a file's single array that is not a float (rows, dim) table holds, and what to save instead."""
    held = "it holds " + (f"one tensor {info.key!r}, " if info.key is not None else "")
    if info.dtype not in FLOAT_DTYPES:
        return (f"{held}an array {info.shape} of dtype {info.dtype}, not floats; a position table must be floats "
                "(positions x dim): save table.astype('float32')")
    if 0 in info.shape:
        return (f"{held}an empty array of shape {info.shape}; a position table must have a row per position "
                "(positions x dim): save the whole table")
    if len(info.shape) == 0:
        return f"{held}a single number (shape ()); a position table must be 2-D (positions x dim): save the whole table"
    if len(info.shape) == 1:
        return (f"{held}a 1-D array of shape {info.shape}; a position table must be 2-D (positions x dim): save it "
                "so, e.g. numpy.save(path, table.reshape(n_positions, dim))")
    return (f"{held}a {len(info.shape)}-D array of shape {info.shape}; a position table must be 2-D (positions x dim) "
            "or (1, positions, dim), e.g. table.reshape(-1, dim) if its leading axes are positions")


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
        slot = _slot_of(info, family)
        if slot is not None:
            mine.append(_from_slot(info, family, slot, config))
            candidates.append(mine[-1])
        elif info.key is not None and (POSITION_NAME.search(info.key) or info.key.endswith("position_ids")):
            candidates.append(_by_name(info))

    def done(chosen, reason, scheme=None):
        return Selection(ckpt, model_type, tuple(candidates), chosen, reason, tuple(tensors), scheme)

    if key is not None:
        info = next((i for i in tensors if i.key == key), None)
        if info is None:
            listed = ("position candidates: " + "; ".join(str(c.tensor) for c in candidates) if candidates
                      else f"it holds {tensor_list(tensors)}")
            raise KeyError(f"no tensor {key!r} in {ckpt.weights_name}; {listed}")
        cand = _explicit(info, family, config)
        if cand.role == "name match" and ckpt.config is None and str(ckpt.weights_name).endswith((".npy", ".npz")):
            cand = dataclasses.replace(cand, role="single table", what="an array chosen with key", rule=_PLAIN_RULE)
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
        f"model_type {model_type!r} is not a family poslab knows" if model_type
        else "config.json has no model_type")
    floats = [i for i in tensors if _is_table(i)]
    if len(tensors) == 1 and not floats:  # the file's only array: what it holds says it all (no "no config.json")
        return done(None, _not_a_table_advice(tensors[0]) if ckpt.config is None else
                    f"{why}; {_not_a_table_advice(tensors[0])}")
    if len(tensors) == 1 and ckpt.config is None:
        cand = Candidate(floats[0], "single table", "the file's only array", None,
                         reason="the only array in the file, and no config.json",
                         rule=_PLAIN_RULE)
        if cand.tensor not in [c.tensor for c in candidates]:
            candidates.append(cand)
        return done(cand, f"{why}; the file holds this one table: {cand.rule}")
    if len(tensors) == 1:
        cand = Candidate(floats[0], "name match", "the file's only tensor: offset unknown, set offset",
                         reason="the only tensor in the file")
        if cand.tensor not in [c.tensor for c in candidates]:
            candidates.append(cand)
        return done(cand, f"{why}; the file holds this one tensor, but which row holds position 0 is unknown")
    usable = [c for c in candidates if c.usable]
    plain = ckpt.config is None and str(ckpt.weights_name).endswith((".npy", ".npz"))  # a chosen array: _PLAIN_RULE
    give = "" if plain else " (and give offset = ROW OF POSITION 0)"
    if len(usable) == 1:
        return done(usable[0], f"{why}; the only float tensor named like a position table, but which row holds "
                               "position 0 is unknown")
    if usable:
        return done(None, f"{why}; {len(usable)} float tensors are named like a position table: ambiguous, "
                          f"choose one with key = NAME{give}")
    scheme = _scheme_without_table(model_type) if ckpt.config is not None else None
    if scheme is not None:
        what, advice = scheme
        return done(None, f"{model_type} uses {what}: it has no learned position table; {advice}".replace(
            "SOURCE", f'"{ckpt.model.source}"'), what)
    return done(None, f"{why}; no float tensor is named like a position table; choose one with key = NAME{give}")


def _scheme_without_table(model_type: str | None) -> tuple[str, str] | None:
    """(scheme, what to write) for a known architecture without a learned absolute table, else None.

    Read from what :mod:`poslab.encodings.model_config` knows of transformers' architectures (rotary
    model_types, refused rotary variants, the well-known schemes without RoPE); no second list here.
    """
    from ..encodings.model_config import NO_ROPE_SCHEMES, REFUSED_ARCHITECTURES, architectures

    if model_type in REFUSED_ARCHITECTURES:
        return REFUSED_ARCHITECTURES[model_type], "poslab does not analyse it"
    if model_type in architectures():
        return "RoPE (rotary embeddings)", 'use kind = "rotary" with config = SOURCE'
    scheme = NO_ROPE_SCHEMES.get(model_type)
    from .relative import T5_MODEL_TYPES

    if scheme is not None and model_type in T5_MODEL_TYPES:
        return scheme, 'use kind = "t5_buckets" with source = SOURCE and stack = "encoder" or "decoder"'
    if scheme is not None and "learned absolute" not in scheme:
        return scheme, "nothing in poslab analyses it yet"
    return None


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
    rev = f" {ck.model.repo_id}@{ck.model.revision}" if ck.model.repo_id and ck.model.revision else ""
    head = [f"{ck.path}: {ck.what}{rev}, weights {ck.weights_name}"
            + (f", config.json model_type {selection.model_type!r}" if ck.config is not None else ", no config.json")]
    if selection.candidates:
        head.append("candidate position tensors (* = used):")
        head += [f"  {'*' if c == selection.chosen else ' '} {c.describe()}" for c in selection.candidates]
    else:
        head.append(f"candidate position tensors: none; {ck.weights_name} holds {tensor_list(selection.tensors)}")
    if selection.chosen is not None:
        c = selection.chosen
        head.append(f"used: {c.key if c.key is not None else '<array>'} — {selection.reason}")
        if c.offset is None and c.rule:
            head.append(f"rows: position 0 at row 0 unless offset is given — rule: {c.rule}")
        elif c.offset is None:
            head.append("rows: unknown — no rule applies; give offset = ROW OF POSITION 0 (0 for GPT-2/BERT-style "
                        "tables, pad_token_id + 1 for RoBERTa-style, 2 for OPT/BART-style; check the model's code), "
                        "and grid = \"RxC\" for a vision table")
        else:
            rows = f"rows: position 0 at row {c.offset}" + (
                f", {c.prefix_tokens} prefix row(s), patch grid {c.grid[0]}x{c.grid[1]}" if c.grid else "")
            head.append(f"{rows} — rule: {c.rule or c.reason}")
    else:
        head.append(f"used: none — {selection.reason}")
    return "\n".join(head)
