"""Every learned position table of the installed transformers, read by poslab exactly as the model uses it.

For each model type whose modeling code defines a position table
(:func:`learned_oracle.defines_position_table`), a tiny random-init model is
built, run once, and saved with ``save_pretrained`` (safetensors) to a folder
and to the Hugging Face cache layout (blobs/, snapshots/REV, refs/main). For
every learned table the model has, poslab must read exactly the rows the
forward pass uses for positions 0..n−1 (text) or its prefix rows and patch
grid in raster order (vision), or the model type must be listed in REFUSED
(poslab refuses it, and the test checks that it does) or NOT_BUILT (the
generic tiny build or input cannot run it), each with its reason. Anything
else fails, so a new transformers release that adds an architecture shows up
here.
"""

from __future__ import annotations

import collections
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from poslab.checkpoints import select_position_table  # noqa: E402
from poslab.checkpoints.positions import FAMILIES  # noqa: E402
from poslab.encodings import make_encoding  # noqa: E402
from poslab.stages import run_stage  # noqa: E402

from ..checkpoints.conftest import write_cache  # noqa: E402
from .learned_oracle import N_TEXT, defines_position_table, model_types, probe  # noqa: E402

# ---------------------------------------------------------------------------------------------------------
#: model types with a learned position table that poslab refuses (no family rule), and why.
REFUSED: dict[str, str] = {
    "fsmt": "its tables hold fixed sinusoids (SinusoidalPositionalEmbedding stored as parameters), positions from "
            "padding_idx + 1: not learned; analyse with kind = \"sinusoidal\", or key + offset",
    "hiera": "hierarchical: patch tokens are unrolled into mask units and pooled; no single grid order per stage",
    "pvt": "one table per pyramid stage, each with its own width and grid; give key, offset = 0 and grid",
    "sam3_lite_text_text_model": "a (1, 1, positions, dim) table read with a strided layout; not (rows, dim)",
    "sam3_vision_model": "its pretraining grid (e.g. 42 x 42) is tiled / cropped to the input grid, not read row by row",
    "sam3_vit_model": "its pretraining grid (e.g. 42 x 42) is tiled / cropped to the input grid, not read row by row",
    "sam_hq_vision_model": "a (1, H, W, dim) grid tensor added to (H, W) patch maps; not (rows, dim)",
    "sam_vision_model": "a (1, H, W, dim) grid tensor added to (H, W) patch maps; not (rows, dim)",
    "timesformer": "video: every frame reuses the spatial rows (CLS + patches) and a separate time table is added",
    "vilt": "image patches are sampled and the table interpolated per image (max_image_length); rows are not "
            "used one per patch",
    "vitdet": "its table (pretrain_image_size grid plus a CLS row) is resized to the input grid; rows mix",
    "vivit": "video tubelets: a 3-D (time x rows x cols) grid; poslab's grids are 2-D",
}

#: model types the generic tiny build / generic input cannot run, and why (not built here, so not checked).
NOT_BUILT: dict[str, str] = {
    # its config does not shrink generically (per-stage or per-layer sizes, required fields, or no base model for AutoModel)
    **dict.fromkeys(['autoformer', 'bridgetower', 'cohere_compass', 'cohere_compass_text', 'deepseek_ocr2', 'donut-swin', 'dots3_note', 'dots3_note_text', 'embedding_gemma2', 'embedding_gemma2_text', 'ernie4_5_vl_moe', 'evolla', 'florence2', 'gemma4', 'gemma4_text', 'gemma4_unified', 'gemma4_unified_text', 'glm_image', 'hunyuan_vl', 'hunyuan_vl_text', 'informer', 'lfm2_moe', 'mask2former', 'maskformer', 'maskformer-swin', 'moonshine_streaming', 'muse_spark', 'muse_spark_text', 'musicgen', 'musicgen_melody', 'perceiver', 'prophetnet', 'swin2sr', 'swinv2', 'time_series_transformer'], 'its config does not shrink generically (per-stage or per-layer sizes, required fields, or no base model for AutoModel)'),
    # the generically shrunk sizes do not fit together in its forward pass (sub-model widths or shapes fixed elsewhere)
    **dict.fromkeys(['align', 'bark', 'blip-2', 'clap', 'clvp', 'cohere_asr', 'decision_transformer', 'granite_docling', 'kosmos-2', 'lilt', 'llama4', 'lw_detr', 'molmo2', 'radio', 'rf_detr', 'sam', 'sam2', 'sam2_hiera_det_model', 'sam2_vision_model', 'sam3', 'sam3_lite_text', 'sam_hq', 'xclip'], 'the generically shrunk sizes do not fit together in its forward pass (sub-model widths or shapes fixed elsewhere)'),
    # its forward needs model-specific inputs (grid_thw patch lists, video frames, prompts, boxes or visual features) that the generic input does not build
    **dict.fromkeys(['bros', 'cohere_compass_vision', 'edgetam_video', 'glm4v', 'glm4v_moe', 'glm4v_moe_vision', 'glm4v_vision', 'glm_image_vision', 'instructblip', 'instructblipvideo', 'lxmert', 'minicpm_ocr_vision', 'minicpmv4_7_vision', 'paddleocr_vl', 'qwen3_5_moe_vision', 'qwen3_5_vision', 'qwen3_vl_moe_vision', 'qwen3_vl_vision', 'qwen4_exp_vision', 'sam2_video', 'sam3_tracker_video', 'seggpt', 'videoprism', 'videoprism_vision_model'], 'its forward needs model-specific inputs (grid_thw patch lists, video frames, prompts, boxes or visual features) that the generic input does not build'),
    # needs a library that is not a test dependency (timm, natten, detectron2 or torchaudio)
    **dict.fromkeys(['conditional_detr', 'deformable_detr', 'detr', 'edgetam', 'edgetam_vision_model', 'layoutlmv2'], 'needs a library that is not a test dependency (timm, natten, detectron2 or torchaudio)'),
    # no fixed image_size in its config (variable-resolution vision tower or a composite config): no generic image input
    **dict.fromkeys(['cosmos3_edge', 'cosmos3_edge_vision', 'gemma4_vision', 'hunyuan_vl_vision', 'hy_v4_vl', 'hy_v4_vl_vision', 'inkling2', 'inkling2_vision', 'kimi_k25', 'kimi_k25_vision', 'layoutlmv3', 'muse_glimmer', 'muse_glimmer_vision', 'muse_spark_vision', 'qwen3_5', 'qwen3_5_moe', 'qwen3_omni_moe_thinker', 'qwen3_vl', 'qwen3_vl_moe', 'qwen4_exp', 'siglip2', 'siglip2_vision_model', 'tvp', 'unlimited_ocr'], 'no fixed image_size in its config (variable-resolution vision tower or a composite config): no generic image input'),
    # multimodal model: its input needs the processor's image placeholder tokens / image layout
    **dict.fromkeys(['got_ocr2', 'idefics2', 'idefics3', 'internvl', 'janus', 'ovis2', 'qianfan_ocr', 'smolvlm', 'step3p7'], "multimodal model: its input needs the processor's image placeholder tokens / image layout"),
    # its config does not shrink generically (per-stage or per-layer sizes, required fields, or no base model for AutoModel)
    **dict.fromkeys(['granite4_vision'], "its config does not shrink generically (per-stage or per-layer sizes, required fields, or no base model for AutoModel)"),
    # its forward needs model-specific inputs (grid_thw patch lists, video frames, prompts, boxes or visual features) that the generic input does not build
    **dict.fromkeys(['minicpm_ocr', 'minicpmv4_6', 'minicpmv4_7'], 'its forward needs model-specific inputs (grid_thw patch lists, video frames, prompts, boxes or visual features) that the generic input does not build'),
}
# ---------------------------------------------------------------------------------------------------------


def _source(enc, n_positions):
    """The learned_source stage's summary columns of a run."""
    return run_stage("learned_source", enc, n_positions).summary


def _tup(x):
    return tuple(_tup(v) for v in x) if isinstance(x, (list, tuple)) else x


def _key_of(state: dict, param) -> str | None:
    """The checkpoint key holding exactly ``param``'s values (save_pretrained may rename or prefix keys)."""
    want = param.detach().numpy()
    hits = [k for k, v in state.items() if v.shape == want.shape and np.array_equal(v, want)]
    return hits[0] if len(hits) == 1 else (min(hits, key=len) if hits else None)


def _check_table(source: str, key: str, use, weights: np.ndarray) -> str:
    """'' if poslab reads exactly the rows the forward pass used, else what differs."""
    try:
        enc = make_encoding("learned", source=source, key=key)
        info = _source(enc, 1)
    except (ValueError, KeyError, FileNotFoundError) as exc:
        return f"refused: {str(exc).splitlines()[0][:300]}"
    flat = weights.reshape(-1, weights.shape[-1]).astype(np.float64)
    rows = use.rows
    if any(len(r) > 1 for r in rows):
        return f"the model mixes several rows per token (interpolation?); poslab claims offset {info['row_offset']}"
    if info["grid_shape"] is None:  # text: tokens 0..n-1 are positions 0..n-1
        n = min(N_TEXT, len(rows))
        used = [r[0] if r else None for r in rows[:n]]
        if None in used:
            return f"tokens 0..{n - 1} did not all use a row: {used}"
        got = enc.generate(n, 1)
        if not np.array_equal(got, flat[used]):
            return f"poslab offset {info['row_offset']} reads other rows than the model's {used}"
        return ""
    gh, gw = (int(x) for x in info["grid_shape"].split("x"))
    offset, cells = info["row_offset"], gh * gw
    order = [r[0] for r in rows if len(r) == 1]
    patches = [r for r in order if offset <= r < offset + cells]
    if patches != list(range(offset, offset + cells)):
        return (f"poslab: prefix {offset}, grid {gh}x{gw}; the model's tokens use rows {order[:40]}"
                f"{'...' if len(order) > 40 else ''}")
    prefix_used = sorted(r for r in order if r < offset)
    if prefix_used != list(range(offset)):
        return f"poslab says {offset} prefix row(s); the model's non-patch tokens use rows {prefix_used}"
    if not np.array_equal(enc.generate(cells, 1), flat[offset : offset + cells]):
        return "grid rows differ"
    return ""


@pytest.fixture(scope="session")
def matrix(tmp_path_factory):
    """model_type -> dict(status, detail per table, seconds); built once per session."""
    from safetensors.numpy import load_file

    transformers.logging.set_verbosity_error()
    from huggingface_hub.utils import disable_progress_bars

    disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()
    root = tmp_path_factory.mktemp("hf_matrix")
    out, start = {}, time.perf_counter()
    enumerated = model_types()
    candidates = [t for t in enumerated if defines_position_table(t)]
    for model_type in candidates:
        if model_type in NOT_BUILT:
            continue
        p = probe(model_type)
        if p.error or p.model is None:
            out[model_type] = {"status": "not built", "detail": f"{p.stage}: {p.error}"}
            continue
        if not p.tables:
            out[model_type] = {"status": "no learned table"}
            continue
        folder = root / "folders" / model_type
        try:
            p.model.save_pretrained(folder)
        except Exception as exc:  # noqa: BLE001 - recorded
            out[model_type] = {"status": "not built", "detail": f"save_pretrained: {type(exc).__name__}: {exc}"[:300]}
            continue
        cache = write_cache(root / "hub", f"tiny/{model_type}", folder)
        state = {}
        for f in sorted(folder.glob("*.safetensors")):
            state.update(load_file(str(f)))
        tables = {}
        for use in p.tables:
            key = _key_of(state, dict(p.model.named_parameters())[use.name])
            if key is None:
                tables[use.name] = ("no checkpoint key", None)
                continue
            if use.n_tokens == 0:
                tables[key] = ("not used by the forward pass", None)
                continue
            weights = state[key]
            problems = {src: _check_table(str(src), key, use, weights) for src in (folder, cache)}
            tables[key] = (problems[folder] or problems[cache], use)
        try:
            auto = select_position_table(folder)
            chosen = auto.chosen.key if auto.chosen is not None else None
        except (ValueError, KeyError, FileNotFoundError) as exc:
            chosen, auto = None, exc
        out[model_type] = {"status": "built", "tables": tables, "auto": chosen,
                           "auto_reason": getattr(auto, "reason", str(auto))}
        del p
    out["__meta__"] = {"enumerated": len(enumerated), "candidates": len(candidates),
                       "not_built": len([t for t in candidates if t in NOT_BUILT]),
                       "seconds": time.perf_counter() - start,
                       "transformers": transformers.__version__}
    return out


def _summary(matrix) -> collections.Counter:
    c = collections.Counter()
    for t, r in matrix.items():
        if t == "__meta__":
            continue
        if r["status"] == "built":
            uses = [(problem, use) for problem, use in r["tables"].values() if use is not None]
            ok = all(problem == "" for problem, _ in uses)
            c["no table used in the forward pass" if not uses else "refused" if t in REFUSED
              else "handled" if ok and t in FAMILIES else "PROBLEM"] += 1
        else:
            c[r["status"]] += 1
    return c


def test_every_learned_table_is_read_as_the_model_uses_it_or_listed(matrix):
    problems = []
    for model_type, r in matrix.items():
        if model_type == "__meta__":
            continue
        if r["status"] == "not built":
            problems.append(f"{model_type}: cannot be built/run small ({r['detail']}); fix the generic build in "
                            "learned_oracle.py or list it in NOT_BUILT with the reason")
            continue
        if r["status"] != "built":
            continue
        learned = {k: v for k, v in r["tables"].items() if v[1] is not None}
        wrong = {k: why for k, (why, _) in learned.items() if why}
        if model_type in REFUSED:
            accepted = [k for k, why in wrong.items() if not why.startswith("refused")] + \
                       [k for k in learned if k not in wrong]
            if accepted:
                problems.append(f"{model_type} is listed in REFUSED ({REFUSED[model_type]}) but poslab reads "
                                f"{accepted} without refusing")
            continue
        for k, why in wrong.items():
            problems.append(f"{model_type} [{k}]: {why}")
        if model_type not in FAMILIES and learned:
            problems.append(f"{model_type}: has learned table(s) {list(learned)} but no family rule; add it to "
                            "FAMILIES or list it in REFUSED with the reason")
    meta = matrix["__meta__"]
    print(f"\ntransformers {meta['transformers']}: {meta['enumerated']} model types with a base model, "
          f"{meta['candidates']} define a position-like table, {meta['not_built']} listed NOT_BUILT; built: "
          f"{dict(_summary(matrix))}; {meta['seconds']:.1f} s")
    assert not problems, "\n".join(problems)


def test_automatic_choice_is_one_learned_table_or_a_refusal(matrix):
    """Without key, poslab takes the model's only learned table, or refuses (ambiguous) when there are several."""
    problems = []
    for model_type, r in matrix.items():
        if model_type == "__meta__" or r.get("status") != "built" or model_type not in FAMILIES:
            continue
        learned = [k for k, v in r["tables"].items() if v[1] is not None]
        if len(learned) == 1 and r["auto"] != learned[0]:
            problems.append(f"{model_type}: one learned table {learned[0]}, poslab chose {r['auto']} "
                            f"({r['auto_reason'][:200]})")
        if len(learned) > 1 and r["auto"] is not None:
            problems.append(f"{model_type}: {len(learned)} learned tables, poslab chose {r['auto']} without key")
    assert not problems, "\n".join(problems)


def test_family_defaults_are_transformers_config_defaults():
    """Length / pad / image defaults of the hand table equal the installed config classes' defaults."""
    from transformers import AutoConfig

    problems = []
    for model_type, family in FAMILIES.items():
        try:
            config = AutoConfig.for_model(model_type)
        except (ValueError, KeyError):
            problems.append(f"{model_type}: not a model type of transformers {transformers.__version__}")
            continue
        for slot in family.slots:
            cfg = getattr(config, slot.section) if slot.section else config
            if isinstance(cfg, dict):
                cfg = type(config).sub_configs[slot.section](**cfg)
            if slot.prefix_tokens is None:
                key = next((k for k in slot.length_keys if hasattr(cfg, k)), None)
                if key is None or getattr(cfg, key) != slot.length_default:
                    problems.append(f"{model_type} {slot.what}: default {slot.length_keys} = {slot.length_default}, "
                                    f"transformers {getattr(cfg, key, None) if key else 'has no such key'}")
                if slot.offset == "padding" and getattr(cfg, "pad_token_id", None) != slot.pad_default:
                    problems.append(f"{model_type}: pad_token_id default {slot.pad_default}, transformers "
                                    f"{getattr(cfg, 'pad_token_id', None)}")
            elif slot.grid == "image":
                image, patch = getattr(cfg, "image_size", None), getattr(cfg, "patch_size", None)
                if _tup((image, patch)) != _tup(slot.image_default):
                    problems.append(f"{model_type} {slot.what}: image/patch default {slot.image_default}, "
                                    f"transformers {(image, patch)}")
    assert not problems, "\n".join(problems)
