"""The model as oracle for learned position tables: tiny random-init transformers models, and the rows they use.

For every model type of the installed transformers whose own modeling module
defines a position table (an ``nn.Embedding`` or ``nn.Parameter`` assigned to an
attribute named like one), :func:`probe` builds a tiny random-init model
(sizes shrunk generically), runs one forward pass on an unpadded input, and
records, for every learned (trainable) position table, which of its rows
reach each token of the output of the module that holds it (by autograd:
row r reaches token j iff d(output[j] · v) / d(table[r]) is non-zero for a
random v). The model is saved with ``save_pretrained`` (safetensors) so
poslab can read the same tensors back.

Test support only (needs torch and transformers).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import re
import warnings

import torch

N_TEXT = 8  # unpadded text length probed

# attribute assignments that may define a learned position table, in a modeling module's source
_DEFINES = re.compile(r"self\.(\w*(?:pos|wpe)\w*)\s*=\s*(?:nn\.)?[\w.]*(?:Embedding|Parameter)\w*\(", re.I)
# runtime: names of position tables (not relative biases, not 2-D layout boxes, not object queries)
_TABLE_NAME = re.compile(r"(^|\.)(wpe|pos_embed|pos_emb|position_embeddings?|positional_embeddings?|embed_positions|"
                         r"positions_embed|position_embedding_table|char_position_embeddings|position_embeds_layer|"
                         r"text_position_embedding|positional_embedding_vlm|pos_embedding)$")
_NOT_TABLE = re.compile(r"relative|rel_pos|pos_bias|bias_table|query_position|(^|\.)[xyhw]_position|row_|col_|"
                        r"temporal|token_type", re.I)

_SHRINK = {
    # widths
    ("hidden_size", "d_model", "n_embd", "embed_dim", "dim", "hidden_dim", "emb_dim", "embedding_size",
     "projection_dim", "text_embed_dim", "vision_embed_dim", "d_embed", "word_embed_proj_dim",
     "projection_size"): 32,
    ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "n_inner", "d_ff", "mlp_dim",
     "intermediate_dim", "decoder_intermediate_size"): 64,
    # depth
    ("num_hidden_layers", "n_layer", "num_layers", "encoder_layers", "decoder_layers", "n_layers",
     "decoder_num_hidden_layers", "num_decoder_layers", "num_encoder_layers"): 1,
    # heads
    ("num_attention_heads", "n_head", "encoder_attention_heads", "decoder_attention_heads", "n_heads",
     "num_heads", "decoder_num_attention_heads"): 4,
    ("num_key_value_heads",): 2,
    ("head_dim", "attention_head_dim", "kv_channels"): 8,
    ("vocab_size", "entity_vocab_size"): 99,
    ("num_latents", "d_latents", "num_self_attends_per_block", "num_blocks"): 1,
}


_SHRINK_DEPTH = next(keys for keys in _SHRINK if "num_hidden_layers" in keys)


def model_types() -> list[str]:
    """Every model type of the installed transformers that has a base model class."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    return sorted(t for t in CONFIG_MAPPING_NAMES if t in MODEL_MAPPING_NAMES)


def defines_position_table(model_type: str) -> bool:
    """Whether a modeling module of the model type's folder assigns an Embedding/Parameter to a position-like name."""
    import pathlib

    from transformers.models.auto.configuration_auto import model_type_to_module_name

    spec = importlib.util.find_spec("transformers.models")
    folder = pathlib.Path(spec.submodule_search_locations[0]) / model_type_to_module_name(model_type).replace(".", "/")
    for file in sorted(folder.glob("modeling_*.py")):
        if any(not _NOT_TABLE.search(m.group(1)) for m in _DEFINES.finditer(file.read_text(encoding="utf-8"))):
            return True
    return False


def shrink(config, image_size: int = 32, patch_size: int = 8):
    """Shrink a config (and its sub-configs) in place to a tiny CPU model."""
    for sub in _subconfigs(config):
        shrink(sub, image_size, patch_size)
    depth = {k: getattr(config, k) for k in _SHRINK_DEPTH if isinstance(getattr(config, k, None), int)}
    for keys, value in _SHRINK.items():
        for k in keys:
            if isinstance(getattr(config, k, None), int) and not isinstance(getattr(config, k), bool):
                setattr(config, k, value)
    for k in ("max_position_embeddings", "n_positions", "max_target_positions", "max_source_positions",
              "n_ctx", "max_text_len", "max_encoder_position_embeddings", "max_decoder_position_embeddings"):
        if isinstance(getattr(config, k, None), int) and getattr(config, k) > 40:
            setattr(config, k, 40)
    if isinstance(getattr(config, "image_size", None), (int, list, tuple)):
        config.image_size = image_size if isinstance(config.image_size, int) else [image_size, image_size]
    if isinstance(getattr(config, "patch_size", None), (int, list, tuple)):
        config.patch_size = patch_size if isinstance(config.patch_size, int) else [patch_size, patch_size]
    vocab = getattr(config, "vocab_size", 0)
    if hasattr(config, "vocab_size") and vocab is None:
        config.vocab_size = vocab = 99
    if isinstance(vocab, int) and vocab:  # special token ids inside the shrunk vocabulary
        for k, v in list(vars(config).items()):
            if k.endswith("_token_id") and isinstance(v, int) and v >= vocab:
                setattr(config, k, {"pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2}.get(k, 3))
    if isinstance(getattr(config, "max_length", None), int) and hasattr(config, "num_mel_bins"):
        config.max_length, config.num_mel_bins = 32, 16  # spectrogram transformers: time x frequency
    for k, v in list(vars(config).items()):  # per-layer lists (layer_types, attention_layers) follow the depth
        if isinstance(v, list) and v and len(v) in depth.values() and not k.startswith("_") and "size" not in k:
            setattr(config, k, v[:1])
    if hasattr(config, "attention_types"):  # GPT-Neo: [[kinds, repeats]] expands to one kind per layer
        config.attention_types = [[["global"], 1]]
    if hasattr(config, "attention_window"):  # Longformer / LED pad inputs to a multiple of the window
        aw = config.attention_window
        config.attention_window = [4] * len(aw) if isinstance(aw, (list, tuple)) else 4
    if hasattr(config, "pad_token_id") and config.pad_token_id is None and hasattr(config, "position_embedding_type"):
        config.pad_token_id = 1  # ESM's default config has none; its checkpoints use 1
    if getattr(config, "num_key_value_heads", None) and getattr(config, "num_attention_heads", None):
        config.num_key_value_heads = 2 if config.num_attention_heads % 2 == 0 else config.num_attention_heads
    return config


def _subconfigs(config):
    from transformers import PretrainedConfig

    return [v for k, v in vars(config).items() if isinstance(v, PretrainedConfig)]


@dataclasses.dataclass
class TableUse:
    """A learned position table of a tiny model and the rows that reach each token of its owner's output."""

    name: str               # parameter name in the model (state_dict key before save_pretrained renames)
    shape: tuple
    owner: str              # module whose output was probed
    rows: list              # rows[j]: sorted table rows (flattened over leading 1-dims) reaching token j
    n_tokens: int


@dataclasses.dataclass
class Probe:
    model_type: str
    model: object = None
    tables: list = dataclasses.field(default_factory=list)
    error: str = ""
    stage: str = ""


def learned_tables(model) -> dict[str, torch.nn.Parameter]:
    """Trainable parameters of ``model`` that are position tables (by name), name -> parameter."""
    out = {}
    for name, mod in model.named_modules():
        if isinstance(mod, torch.nn.Embedding) and _TABLE_NAME.search(name) and not _NOT_TABLE.search(name):
            if mod.weight.requires_grad:
                out[f"{name}.weight"] = mod.weight
    for name, p in model.named_parameters():
        if name in out or not p.requires_grad or p.ndim < 2:
            continue
        if _TABLE_NAME.search(name.removesuffix(".weight")) and not _NOT_TABLE.search(name):
            out[name] = p
    return out


def _inputs(model, config, n: int):
    sig = inspect.signature(model.forward).parameters
    cfgs = [config, *_subconfigs(config)]
    pad = next((c.pad_token_id for c in cfgs if isinstance(getattr(c, "pad_token_id", None), int)), None)
    vocab = min(c.vocab_size for c in cfgs if isinstance(getattr(c, "vocab_size", None), int)) \
        if any(isinstance(getattr(c, "vocab_size", None), int) for c in cfgs) else 99
    ids = torch.arange(n) % (vocab - 5) + 4  # avoids ids 0..3 (pad / bos / eos / unk in most tokenizers)
    if pad is not None:
        ids[ids == pad] = pad + 1 if pad + 1 < vocab else 4
    ids = ids[None]
    kw = {}
    if "input_ids" in sig:
        kw["input_ids"] = ids
    if "decoder_input_ids" in sig:
        kw["decoder_input_ids"] = ids
    if "pixel_values" in sig:
        vis = next((c for c in cfgs if hasattr(c, "image_size")), config)
        size = vis.image_size if isinstance(vis.image_size, int) else vis.image_size[0]
        ch = getattr(vis, "num_channels", 3)
        kw["pixel_values"] = torch.randn(1, ch, size, size)
    if "input_features" in sig and isinstance(getattr(config, "max_source_positions", None), int):
        kw["input_features"] = torch.randn(1, config.num_mel_bins, 2 * config.max_source_positions)  # Whisper
    if "input_values" in sig and isinstance(getattr(config, "max_length", None), int):
        kw["input_values"] = torch.randn(1, config.max_length, config.num_mel_bins)  # spectrogram transformers
    if "pixel_values" in kw and any(isinstance(getattr(c, "num_frames", None), int) for c in cfgs):
        frames = next(c.num_frames for c in cfgs if isinstance(getattr(c, "num_frames", None), int))
        kw["pixel_values"] = kw["pixel_values"][:, None].expand(1, frames, *kw["pixel_values"].shape[1:])
    if hasattr(model, "set_default_language") and getattr(config, "languages", None):
        model.set_default_language(config.languages[0])  # X-MOD adapters
    if "attention_mask" in sig and "input_ids" in kw:
        kw["attention_mask"] = torch.ones_like(ids)
    return kw


def probe(model_type: str, n: int = N_TEXT) -> Probe:
    """Build a tiny ``model_type`` model, run one forward pass, record which table rows reach which tokens."""
    from transformers import AutoConfig, AutoModel

    out = Probe(model_type)
    torch.manual_seed(0)
    try:
        out.stage = "config"
        config = shrink(AutoConfig.for_model(model_type))
        out.stage = "build"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = AutoModel.from_config(config).eval()
        out.model = model
    except Exception as exc:  # noqa: BLE001 - recorded, the test decides
        out.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        return out
    tables = learned_tables(model)
    if not tables:
        out.stage = "no table"
        return out
    owners = {}
    for name, p in tables.items():
        owner_name = name.removesuffix(".weight") if name.endswith(".weight") else name.rpartition(".")[0]
        owners[name] = owner_name
    captured: dict[str, list] = {}
    handles = []
    mods = dict(model.named_modules())
    for name, owner in owners.items():
        mod = mods[owner]

        def hook(module, args, output, owner=owner):
            t = output
            while not torch.is_tensor(t) and t is not None:  # tuples, ModelOutputs: their first tensor
                values = list(t.values()) if hasattr(t, "values") else list(t) if isinstance(t, (tuple, list)) else []
                t = next((v for v in values if torch.is_tensor(v) or isinstance(v, (tuple, list, dict))), None)
            if torch.is_tensor(t) and t.requires_grad and owner not in captured:
                captured[owner] = t
        handles.append(mod.register_forward_hook(hook))
    try:
        out.stage = "forward"
        with torch.enable_grad():
            model(**_inputs(model, config, n))
    except Exception as exc:  # noqa: BLE001
        out.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        return out
    finally:
        for h in handles:
            h.remove()
    for name, p in tables.items():
        t = captured.get(owners[name])
        if t is None:
            out.tables.append(TableUse(name, tuple(p.shape), owners[name], [], 0))
            continue
        t = t.reshape(-1, t.shape[-2], t.shape[-1])[0] if t.ndim >= 3 else t
        gen = torch.Generator().manual_seed(1)
        rows = []
        for j in range(t.shape[0]):
            v = torch.randn(t.shape[-1], generator=gen)
            (g,) = torch.autograd.grad((t[j] * v).sum(), p, retain_graph=True, allow_unused=True)
            if g is None:
                rows.append([])
                continue
            g = g.reshape(-1, g.shape[-1]) if g.ndim >= 2 else g.reshape(-1, 1)
            rows.append(torch.nonzero(g.abs().sum(-1) > 0).flatten().tolist())
        out.tables.append(TableUse(name, tuple(p.shape), owners[name], rows, t.shape[0]))
    out.stage = "done"
    return out
