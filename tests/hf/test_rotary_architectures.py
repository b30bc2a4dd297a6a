"""Every rotary architecture of the installed transformers: poslab reads its config.json as the model does.

The oracle is the model's own rotary module: for each architecture enumerated from
transformers (``_rotary_oracle.rotary_cases``), configs are written the ways published
models write them (only the keys that differ from the class defaults; everything, as
``save_pretrained`` does; with other sizes), read back by the config class (what the model
reads), and the rotary module's cos / sin tables at positions 0..n−1 must equal
attention_scaling·(cos, sin)(m·inv_freq) with poslab's frequencies and attention scaling.
An architecture poslab refuses must be listed in ``REFUSED`` with the reason its message
gives; any other is a failure, so a new transformers release that adds one fails here.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from poslab.encodings import make_encoding  # noqa: E402
from poslab.encodings.base import ParameterError  # noqa: E402
from poslab.encodings.model_config import REFUSED_ARCHITECTURES, read_rope_inventory  # noqa: E402

_spec = importlib.util.spec_from_file_location("_rotary_oracle", Path(__file__).with_name("_rotary_oracle.py"))
oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oracle)

N = 64  # positions 0..63; float32 angles up to 63 rad are good to ~1e-5
ATOL = 5e-5

_AXIAL = "rope_type 'axial': a 2-D RoPE"
#: Architectures poslab refuses, each with (a fragment of) the reason its message gives.
REFUSED = {
    **dict.fromkeys((
        "cohere_compass_vision", "dots3_note_vision_encoder", "edgetam_video", "ernie4_5_vl_moe_vision",
        "exaone4_5_vision", "gemma4_vision", "glm4v_moe_vision", "glm4v_vision", "glm5_next_vision",
        "glm_ocr_vision", "inkling2_vision", "kimi_k25_vision", "lfm3_vl_vision", "minimax_m3_vl_vision",
        "mlcd_vision_model", "muse_glimmer_vision", "muse_spark_vision", "paddleocr_vl_vision", "pixtral",
        "qwen2_5_omni_vision_encoder", "qwen2_5_vl_vision", "qwen2_vl_vision", "qwen3_5_moe_vision",
        "qwen3_5_vision", "qwen3_omni_moe_vision_encoder", "qwen3_vl_moe_vision", "qwen3_vl_vision",
        "qwen4_exp_vision", "sam2_video", "sam3_tracker_video", "sam3_vit_model", "step3p5_vision",
        "video_llama_3_vision"), _AXIAL),
    **REFUSED_ARCHITECTURES,
}
#: Rotary modules no config.json can name (their config class has no model_type of its own), and why.
UNNAMED = {
    "cohere_compass": "CohereCompassRotaryEmbedding reads per-layer-type RoPE (rope_parameters['full_attention']) "
                      "of cohere_compass_text, which poslab refuses",
    "esmfold2": "RoPE over atom reference positions (ESMFold 2's structure module), not token positions",
    "evolla": "the SaProt protein encoder inside evolla (no model_type of its own); evolla's language model is read",
}
#: Switches whose class default is not RoPE: the default is refused naming the scheme, the switched config is read.
SWITCH_ON = {"esm": {"position_embedding_type": "rotary"}, "wav2vec2-conformer": {"position_embeddings_type": "rotary"},
             "wav2vec2-bert": {"position_embeddings_type": "rotary"},
             "seamless_m4t": {"position_embeddings_type": "rotary"}}
#: transformers' default configs whose rotated width is odd (no real model: a head of 42 or 73 dims).
ODD_DEFAULTS = {"glm4_moe": 21, "glm4v_moe_text": 21, "qwen3_omni_moe_text": 73}
#: Values that make transformers' own rotary module run where its class defaults do not.
OVERRIDES = {
    # the modules split 32 pairs by mrope_section [8, 12, 12] (a module default); the class default rotates 64
    "glm4v_text": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}},
    "glm_image_text": {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5}},
}
# Variants: name -> (how the config is written, keyword arguments for the config class).
VARIANTS = ("defaults", "saved", "resized", "head80")


def minimal_json(cfg) -> dict:
    """The keys that differ from the class defaults, plus model_type: how older published configs look."""
    full, base = cfg.to_dict(), type(cfg)().to_dict()
    out = {k: v for k, v in full.items() if k not in base or base[k] != v or k == "model_type"}
    out["model_type"] = cfg.model_type
    out.pop("transformers_version", None)
    return out


def build(cfg_cls, model_type, variant):
    kwargs = {**OVERRIDES.get(model_type, {}), **SWITCH_ON.get(model_type, {})}
    base = cfg_cls(**kwargs)
    if variant == "resized":  # hidden size and heads from the file, not the class defaults
        kwargs.update(hidden_size=2 * base.hidden_size, num_attention_heads=2 * base.num_attention_heads)
    elif variant == "head80":  # a head width of 80 where it is derived
        kwargs.update(hidden_size=320, num_attention_heads=4)
    return cfg_cls(**kwargs)


def write(cfg, folder: Path, variant: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    if variant == "saved":
        cfg.save_pretrained(folder)
    else:
        (folder / "config.json").write_text(json.dumps(minimal_json(cfg)))
    return folder


def compare(rot_cls, cfg_cls, folder: Path, model_type: str, variant: str):
    """(error, layout) of poslab against the rotary module the model builds from the file."""
    r = make_encoding("rotary", config=str(folder)).resolve(4096, N)
    try:
        rot = rot_cls(cfg_cls.from_pretrained(folder))
    except (RuntimeError, ValueError) as exc:  # transformers' own module cannot be built from these sizes
        assert variant in ("resized", "head80"), f"{model_type} {variant}: {exc}"
        return 0.0, "not built"
    try:
        first, second = oracle.module_tables(rot, N)
    except (RuntimeError, TypeError, IndexError, ValueError) as exc:
        # transformers cannot run this config for text tokens (an M-RoPE section that does not fit): compare
        # the frequencies the module holds instead
        held = oracle.module_frequencies(rot)
        assert held is not None, f"{model_type} {variant}: module cannot run ({exc}) and holds no inv_freq"
        inv, attention = held
        assert inv.shape == r.inv_freq.shape, f"{model_type} {variant}: {inv.shape} pairs vs poslab {r.inv_freq.shape}"
        return max(float(np.abs(inv - r.inv_freq).max() / np.abs(r.inv_freq).max()),
                   abs(attention - r.attention_scaling)), "module inv_freq"
    err, layout = oracle.match_layout(first, second, r.inv_freq, r.attention_scaling)
    held = oracle.module_frequencies(rot)
    if held is not None:  # the module's own frequencies, where it keeps them (in its own pair order: sorted)
        np.testing.assert_allclose(np.sort(held[0]), np.sort(r.inv_freq), rtol=2e-6, atol=0,
                                   err_msg=f"{model_type} {variant}")
        assert held[1] == pytest.approx(r.attention_scaling, rel=1e-6)
    return err, layout


CASES = oracle.rotary_cases()
TABLE = json.loads(oracle.TABLE.read_text(encoding="utf-8"))
#: Architectures with a RoPE per layer type (transformers 5 ``rope_parameters`` keyed by layer type).
PER_LAYER = sorted(mt for mt, entry in TABLE["architectures"].items() if "per_layer_type" in entry)


def compare_layers(rot_cls, cfg_cls, folder: Path, model_type: str, variant: str) -> int:
    """Per-layer-type RoPE: the inventory's layer pattern is the model's ``layer_types``, and each layer type's
    cos / sin (and inv_freq, attention scaling) equal its rotary module's for that type. Returns the types checked."""
    inv = read_rope_inventory(folder)
    model_cfg = cfg_cls.from_pretrained(folder)
    assert [inv.group(name).layer_type for name in inv.layer_pattern] == list(model_cfg.layer_types), \
        f"{model_type} {variant}: layer pattern"
    rot = rot_cls(model_cfg)
    checked = 0
    for g in inv.groups:
        held = oracle.module_frequencies(rot, g.layer_type)
        if g.rope is None:  # the module builds no table for it
            assert held is None, f"{model_type} {variant}: {g.name} has a rotary table in transformers"
            continue
        r = make_encoding("rotary", config=str(folder), layer_type=g.name).resolve(4096, N)
        first, second = oracle.module_tables(rot, N, g.layer_type)
        err, layout = oracle.match_layout(first, second, r.inv_freq, r.attention_scaling)
        assert err < ATOL, f"{model_type} {variant} {g.name}: max difference {err:.3g} ({layout})"
        np.testing.assert_allclose(held[0], r.inv_freq, rtol=2e-6, atol=0, err_msg=f"{model_type} {g.name}")
        assert held[1] == pytest.approx(r.attention_scaling, rel=1e-6)
        checked += 1
    return checked


def test_enumeration_is_complete():
    """Every rotary module is a case, named or listed as unnameable; the refused list has no stale entries."""
    named = {mt for mt, *_ in CASES if mt}
    unnamed = {mod for mt, _cfg, _rot, mod in CASES if not mt}
    assert unnamed == set(UNNAMED), f"rotary modules without a nameable config: {sorted(unnamed)}"
    stale = set(REFUSED) - named - {"cohere_compass_text"}  # read by the unnameable cohere_compass module only
    assert not stale, f"REFUSED lists architectures transformers no longer has: {stale}"
    assert len(named) >= 200  # transformers 5.24: 232 (see the README)


@pytest.mark.parametrize("model_type, cfg_cls, rot_cls, mod", [c for c in CASES if c[0]],
                         ids=[f"{c[0]}-{c[2].__name__}" for c in CASES if c[0]])
def test_architecture(tmp_path, model_type, cfg_cls, rot_cls, mod):
    oracle.quiet()
    if model_type in REFUSED:
        folder = write(cfg_cls(), tmp_path / "defaults", "defaults")
        with pytest.raises(ParameterError, match=re.escape(REFUSED[model_type][:60])):
            make_encoding("rotary", config=str(folder))
        return
    if model_type in SWITCH_ON:  # the class default is another scheme: refused, naming it
        folder = tmp_path / "switched-off"
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
        with pytest.raises(ParameterError, match="not RoPE"):
            make_encoding("rotary", config=str(folder))
    checked = 0
    for variant in VARIANTS:
        try:
            cfg = build(cfg_cls, model_type, variant)
        except Exception:  # noqa: BLE001 - the class validates its sizes (a shared expert width, ...): skip
            assert variant in ("resized", "head80"), f"{model_type}: class defaults do not build"
            continue
        folder = write(cfg, tmp_path / variant, variant)
        if model_type in ODD_DEFAULTS and variant in ("defaults", "saved", "resized"):
            with pytest.raises(ValueError, match=f"rotary_dim comes out as {ODD_DEFAULTS[model_type]} .* odd"):
                make_encoding("rotary", config=str(folder)).resolve(4096, N)
            continue
        if model_type in PER_LAYER:
            checked += compare_layers(rot_cls, cfg_cls, folder, model_type, variant) > 0
            continue
        err, layout = compare(rot_cls, cfg_cls, folder, model_type, variant)
        assert err < ATOL, f"{model_type} {variant}: max difference {err:.3g} ({layout})"
        checked += 1
    assert checked >= 1


def test_architecture_table_is_current():
    """hf_rope_architectures.json is what the installed transformers' config classes say (regenerate:
    ``python tests/hf/_rotary_oracle.py``)."""
    assert oracle.TABLE.read_text(encoding="utf-8") == oracle.dumps(oracle.architecture_table())


COMPOSITES = TABLE["composite"]


@pytest.mark.parametrize("model_type", sorted(COMPOSITES))
def test_multimodal_and_composite_configs_read_their_language_part(tmp_path, model_type):
    """A composite config (text + vision, encoder + decoder, ...) written with only its non-default keys: poslab
    reads the language part (text_config) as the model builds it, or refuses naming the parts."""
    oracle.quiet()
    cls = transformers.CONFIG_MAPPING[model_type]
    try:
        cfg = cls()
    except Exception:  # noqa: BLE001 - containers whose default parts do not build (AutoConfig parts)
        pytest.skip(f"{model_type}: its class defaults do not build")
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(minimal_json(cfg)))
    parts = COMPOSITES[model_type]
    texts = [p for p in parts if p.split(".")[-1] == "text_config"]
    chosen = texts or list(parts)
    if len(chosen) > 1:
        with pytest.raises(ParameterError, match="several rotary parts"):
            make_encoding("rotary", config=str(folder))
        return
    part_type = parts[chosen[0]]
    if part_type in PER_LAYER and part_type not in REFUSED:  # each layer type against the module
        sub = cls.from_pretrained(folder)
        for key in chosen[0].split("."):
            sub = getattr(sub, key)
        rot = next(rot for mt, cfg_cls, rot, _mod in CASES if cfg_cls is type(sub) or mt == sub.model_type)(sub)
        inv = read_rope_inventory(folder)
        assert inv.part == chosen[0] and inv.model_type == part_type
        assert [inv.group(n).layer_type for n in inv.layer_pattern] == list(sub.layer_types)
        for g in inv.groups:
            held = oracle.module_frequencies(rot, g.layer_type)
            if g.rope is None:
                assert held is None
                continue
            r = make_encoding("rotary", config=str(folder), layer_type=g.name).resolve(4096, N)
            np.testing.assert_allclose(held[0], r.inv_freq, rtol=2e-6)
            assert held[1] == pytest.approx(r.attention_scaling)
        return
    if part_type in REFUSED or part_type in SWITCH_ON or part_type in ODD_DEFAULTS:
        with pytest.raises((ParameterError, ValueError)):
            make_encoding("rotary", config=str(folder)).resolve(4096, N)
        return
    sub = cls.from_pretrained(folder)
    for key in chosen[0].split("."):
        sub = getattr(sub, key)
    rot_cls = next(rot for mt, cfg_cls, rot, _mod in CASES if cfg_cls is type(sub) or mt == sub.model_type)
    r = make_encoding("rotary", config=str(folder)).resolve(4096, N)
    assert r.config.part == chosen[0] and r.config.model_type == part_type
    held = oracle.module_frequencies(rot_cls(sub))
    np.testing.assert_allclose(np.sort(held[0]), np.sort(r.inv_freq), rtol=2e-6)
    assert held[1] == pytest.approx(r.attention_scaling)
