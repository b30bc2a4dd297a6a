"""Configs as published models write them (transformers 4 names, legacy keys, multimodal wrappers), read by
poslab and by the model's own rotary module: equal, or a known and recorded divergence."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from poslab.encodings import make_encoding  # noqa: E402

_spec = importlib.util.spec_from_file_location("_rotary_oracle", Path(__file__).with_name("_rotary_oracle.py"))
oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oracle)

SHIPPED = Path(__file__).parents[2] / "src" / "poslab" / "data" / "configs"
# The RoPE-relevant keys of published config.json files (sizes as published; the rotary module is cheap).
PUBLISHED = {
    "Llama-3.1-8B": {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8,
                     "max_position_embeddings": 131072, "rope_theta": 500000.0, "rope_scaling": {
                         "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192, "rope_type": "llama3"}},
    "pythia-160m": {"model_type": "gpt_neox", "hidden_size": 768, "num_attention_heads": 12, "rotary_pct": 0.25,
                    "rotary_emb_base": 10000, "max_position_embeddings": 2048},
    "stablelm-2-1_6b (no partial_rotary_factor)": {"model_type": "stablelm", "hidden_size": 2048,
                                                   "num_attention_heads": 32, "rope_theta": 10000},
    # longrope with its published 48 short / 48 long factors: the shipped file (PROVENANCE.md)
    "Phi-3.5-mini-instruct (longrope)": json.loads((SHIPPED / "phi-3.5-mini-instruct.json").read_text()),
    "Qwen2-VL-7B (flat, mrope)": {"model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
                                  "rope_theta": 1000000.0, "max_position_embeddings": 32768,
                                  "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}},
    "Qwen2.5-7B (yarn)": {"model_type": "qwen2", "hidden_size": 3584, "num_attention_heads": 28,
                          "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rope_scaling": {
                              "factor": 4.0, "original_max_position_embeddings": 32768, "type": "yarn"}},
    "Hunyuan-7B (NTK-alpha)": {"model_type": "hunyuan_v1_dense", "hidden_size": 4096, "num_attention_heads": 32,
                               "head_dim": 128, "max_position_embeddings": 32768, "rope_theta": 10000.0,
                               "rope_scaling": {"alpha": 1000.0, "factor": 1.0, "type": "dynamic"}},
    "Llama-4-Scout (llama3, low = high)": {"model_type": "llama4", "text_config": {
        "model_type": "llama4_text", "hidden_size": 5120, "num_attention_heads": 40, "head_dim": 128,
        "max_position_embeddings": 10485760, "rope_theta": 500000.0, "rope_scaling": {
            "factor": 16.0, "high_freq_factor": 1.0, "low_freq_factor": 1.0,
            "original_max_position_embeddings": 8192, "rope_type": "llama3"}}},
    "DeepSeek-V3 (MLA, yarn)": {"model_type": "deepseek_v3", "hidden_size": 7168, "num_attention_heads": 128,
                                "qk_rope_head_dim": 64, "max_position_embeddings": 163840, "rope_theta": 10000,
                                "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                                                 "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                                                 "type": "yarn"}},
    "Phi-3.5-MoE (short/long mscale)": {"model_type": "phimoe", "hidden_size": 4096, "num_attention_heads": 32,
                                        "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
                                        "rope_theta": 10000.0, "rope_scaling": {
                                            "type": "longrope", "short_factor": [1.0] * 64, "long_factor": [1.5] * 64,
                                            "short_mscale": 1.243163121016122, "long_mscale": 1.243163121016122}},
    "jetmoe-8b (kv_channels)": {"model_type": "jetmoe", "hidden_size": 2048, "num_key_value_heads": 16,
                                "kv_channels": 128, "rope_theta": 10000.0},
    "Zamba2-2.7B (attention_head_dim)": {"model_type": "zamba2", "hidden_size": 2560, "num_attention_heads": 32},
    "gpt-j-6b (rotary_dim)": {"model_type": "gptj", "n_embd": 4096, "n_head": 16, "rotary_dim": 64, "n_positions": 2048},
    "cohere (rope_theta left out)": {"model_type": "cohere", "hidden_size": 8192, "num_attention_heads": 64},
}


def _module(folder):
    """The rotary module the model builds from the folder's config (the language part of a multimodal one)."""
    cfg = transformers.AutoConfig.from_pretrained(folder)
    cfg = getattr(cfg, "text_config", None) or cfg
    rot_cls = next(rot for mt, cfg_cls, rot, _mod in oracle.rotary_cases() if cfg_cls is type(cfg))
    return rot_cls(cfg)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
@pytest.mark.parametrize("n", [64, 4200])  # 4200: beyond Phi-3.5's original 4096 (long factors)
def test_published_config(tmp_path, name, n):
    oracle.quiet()
    (tmp_path / "config.json").write_text(json.dumps(PUBLISHED[name]))
    enc = make_encoding("rotary", config=str(tmp_path))
    r = enc.resolve(4096, n)
    rot = _module(tmp_path)
    if name.startswith("gpt-j") and n > 2048:  # GPT-J precomputes n_positions = 2048 rows: the model stops there
        n = 2048
        r = enc.resolve(4096, n)
    first, second = oracle.module_tables(rot, n)
    if name.startswith("Phi-3.5-MoE") and n > 4096:
        # known divergence: transformers 5.24's PhimoeRotaryEmbedding recomputes its frequencies without the
        # sequence length (short_factor at every length); poslab applies long_factor beyond the original length,
        # the LongRoPE rule, and records it
        assert "phimoe beyond original_max_position_embeddings" in enc.resolve(4096, n).summary()["rope_rules"]
        short = enc.resolve(4096, 100)
        err, _ = oracle.match_layout(first, second, short.inv_freq, r.attention_scaling)
        assert err < 1e-3
        return
    err, layout = oracle.match_layout(first, second, r.inv_freq, r.attention_scaling)
    assert err < 5e-5 * max(1, n / 64), f"{name}: {err:.3g} ({layout})"


def test_dbrx_rope_theta_in_attn_config_is_read(tmp_path):
    """The published DBRX config keeps rope_theta (500000) in attn_config; transformers 5.24 ignores it (10000)."""
    cfg = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "max_seq_len": 32768,
           "attn_config": {"kv_n_heads": 8, "rope_theta": 500000, "clip_qkv": 8}}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    enc = make_encoding("rotary", config=str(tmp_path))
    r = enc.resolve(1, 16)
    assert (r.rope_theta, r.rotary_dim) == (500000, 128)
    assert "dbrx: rope_theta is read from attn_config" in r.summary()["rope_rules"]
    held, _ = oracle.module_frequencies(_module(tmp_path))
    np.testing.assert_allclose(held, 10000.0 ** (-np.arange(0, 128, 2) / 128), rtol=1e-6)  # the divergence


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_config_resaved_by_transformers_reads_the_same(tmp_path, name):
    """QA: a Qwen2-VL config re-saved by transformers 5 ({"type": "mrope", "rope_type": "default", ...}) was refused.

    Any published config, loaded and written back with save_pretrained (what fine-tuning leaves), must give the
    frequencies and attention scaling of the published file, and of the model's rotary module.
    """
    oracle.quiet()
    (tmp_path / "published").mkdir()
    (tmp_path / "published" / "config.json").write_text(json.dumps(PUBLISHED[name]))
    transformers.AutoConfig.from_pretrained(tmp_path / "published").save_pretrained(tmp_path / "resaved")
    n = 64
    published = make_encoding("rotary", config=str(tmp_path / "published")).resolve(4096, n)
    resaved = make_encoding("rotary", config=str(tmp_path / "resaved")).resolve(4096, n)
    np.testing.assert_allclose(resaved.inv_freq, published.inv_freq, rtol=1e-12)
    assert resaved.attention_scaling == pytest.approx(published.attention_scaling, rel=1e-12)
    first, second = oracle.module_tables(_module(tmp_path / "resaved"), n)
    err, layout = oracle.match_layout(first, second, resaved.inv_freq, resaved.attention_scaling)
    assert err < 5e-5, f"{name}: {err:.3g} ({layout})"
