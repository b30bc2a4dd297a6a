"""The published configs poslab ships (src/poslab/data/configs) against the models transformers builds from them.

For each file: a tiny random-init model of the same family is built from the file's RoPE and layer keys
(only the widths that do not enter RoPE are shrunk: vocabulary, hidden size, heads, MLP), and

- its layer pattern is the inventory's (``config.layer_types``; Llama 4's NoPE layers read from each
  attention layer's ``use_rope``);
- its ``rotary_emb`` (per layer type where the model has one per type) gives cos / sin at positions
  0..n−1 equal to attention_scaling·(cos, sin)(m·inv_freq) with poslab's frequencies, and holds the same
  inv_freq and attention scaling.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from poslab.encodings import make_encoding  # noqa: E402
from poslab.encodings.model_config import read_rope_inventory  # noqa: E402

_spec = importlib.util.spec_from_file_location("_rotary_oracle", Path(__file__).with_name("_rotary_oracle.py"))
oracle = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(oracle)

CONFIGS = Path(__file__).parents[2] / "src" / "poslab" / "data" / "configs"
SHIPPED = sorted(p.name for p in CONFIGS.glob("*.json"))
#: Widths that do not enter RoPE, shrunk so the model builds in a moment (head_dim is kept: it does).
SMALL = {"vocab_size": 64, "intermediate_size": 32, "hidden_size": 64, "num_attention_heads": 2,
         "num_key_value_heads": 1}
FAMILY = {  # per family, what else keeps the tiny model small
    "deepseek_v3": {"n_routed_experts": 4, "first_k_dense_replace": 1000, "moe_intermediate_size": 16,
                    "kv_lora_rank": 16, "q_lora_rank": 16},
    "llama4_text": {"num_local_experts": 2, "intermediate_size_mlp": 32},
    "gemma4_text": {"vocab_size_per_layer_input": 64, "hidden_size_per_layer_input": 8},
    # Phi3Config checks the factor lists against hidden_size // heads (96); its pad token 32000 is past 64
    "phi3": {"hidden_size": 192, "pad_token_id": None},
}


def test_every_family_of_the_issue_is_shipped():
    assert SHIPPED == ["deepseek-v3.json", "gemma-3-4b-it.json", "gemma-4-e2b-it.json", "llama-3.1-8b.json",
                       "llama-4-scout-17b-16e-instruct.json", "phi-3.5-mini-instruct.json",
                       "qwen2.5-7b-instruct-yarn.json", "qwen3-vl-8b-instruct.json"]


def tiny_model(name, layers: bool):
    """A random-init model of the file's family; all its layers when ``layers`` (a layer pattern to check),
    else two (one RoPE for every layer: only the rotary module is compared)."""
    published = json.loads((CONFIGS / name).read_text())
    text = published.get("text_config", published)
    keys = {**text, **SMALL, **FAMILY.get(text["model_type"], {})}
    if "qk_rope_head_dim" not in text:  # keep the published head width (given, a class default, or derived)
        keys["head_dim"] = oracle.effective_head(transformers.AutoConfig.for_model(**text))
    if not layers:
        keys["num_hidden_layers"] = 2
    cfg = transformers.AutoConfig.for_model(**keys)
    return transformers.AutoModel.from_config(cfg).eval()


def _with(name, **keys):
    """The shipped file with some keys of its language part replaced (a temporary copy)."""
    import tempfile

    published = json.loads((CONFIGS / name).read_text())
    (published.get("text_config") or published).update(keys)
    folder = Path(tempfile.mkdtemp(prefix="poslab-shipped-"))
    (folder / "config.json").write_text(json.dumps(published))
    return folder


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_config_matches_the_model_transformers_builds(name):
    oracle.quiet()
    inv = read_rope_inventory(CONFIGS / name)
    pattern = len(inv.groups) > 1
    model = tiny_model(name, pattern)
    cfg, layers = model.config, model.layers
    if not pattern:
        inv = read_rope_inventory(_with(name, num_hidden_layers=2))
    assert inv.num_hidden_layers == cfg.num_hidden_layers == len(layers)
    if getattr(cfg, "layer_types", None) is not None and inv.groups[0].layer_type is not None:
        assert [inv.group(n).layer_type for n in inv.layer_pattern] == list(cfg.layer_types)
    rope_layers = [i for i, layer in enumerate(layers) if getattr(layer.self_attn, "use_rope", True)]
    assert sorted(i for g in inv.groups if g.rope is not None for i in g.layers) == rope_layers
    rot = model.rotary_emb
    n = 64
    for g in inv.groups:
        if g.rope is None:
            assert g.count == len(layers) - len(rope_layers)
            continue
        per_type = getattr(rot, f"{g.layer_type}_inv_freq", None) is not None
        enc = make_encoding("rotary", config=str(CONFIGS / name), layer_type=g.name if per_type else None)
        r = enc.resolve(1, n)
        first, second = oracle.module_tables(rot, n, g.layer_type if per_type else None)
        err, layout = oracle.match_layout(first, second, r.inv_freq, r.attention_scaling)
        assert err < 5e-5, f"{name} {g.name}: {err:.3g} ({layout})"
        held = oracle.module_frequencies(rot, g.layer_type if per_type else None)
        np.testing.assert_allclose(np.sort(held[0]), np.sort(r.inv_freq), rtol=2e-6, atol=0)
        assert held[1] == pytest.approx(r.attention_scaling, rel=1e-6)


@pytest.mark.parametrize("n", [4096, 4097])
def test_phi35_longrope_short_and_long_factors_are_the_models(n):
    """Phi-3.5-mini's longrope: the tiny model's rotary module (head_dim 96, the published factor lists) uses
    short_factor for a sequence of up to 4096 positions and long_factor beyond, at every position of it;
    poslab at n_positions = n, and at the first 64 positions with context_length = n, gives the same cos / sin."""
    oracle.quiet()
    name = "phi-3.5-mini-instruct.json"
    rot = tiny_model(name, False).rotary_emb
    assert rot.inv_freq.shape == (48,)
    first, second = oracle.module_tables(rot, n)
    r = make_encoding("rotary", config=str(CONFIGS / name)).resolve(1, n)
    assert r.summary()["rope_factors"] == ("short" if n <= 4096 else "long")
    err, layout = oracle.match_layout(first, second, r.inv_freq, r.attention_scaling)
    assert err < 5e-5 * n / 64, f"{err:.3g} ({layout})"  # float32 angles at position ~4096
    head = make_encoding("rotary", config=str(CONFIGS / name), context_length=n).resolve(1, 64)
    np.testing.assert_array_equal(head.inv_freq, r.inv_freq)
    err, _ = oracle.match_layout(first[:64], second[:64], head.inv_freq, head.attention_scaling)
    assert err < 5e-5
    other = make_encoding("rotary", config=str(CONFIGS / name)).resolve(1, 8193 - n)  # the other factor list
    assert np.abs(other.inv_freq - r.inv_freq).max() > 1e-3


def test_published_numbers_of_the_reference_note():
    """Gemma 4 full layers: 64 rotating pairs of 256 (head 512, p = 0.25), exponent over the full head;
    Gemma 3 full layers: 1e6 base divided by 8; Llama 4: a hard cut at wavelength 8192 (low = high);
    DeepSeek-V3: 64 rotated dims, yarn attention factor 1 (mscale = mscale_all_dim)."""
    from poslab.encodings import rope_inv_freq

    g4 = make_encoding("rotary", config=str(CONFIGS / "gemma-4-e2b-it.json"), layer_type="full_attention")
    r = g4.resolve(1, 16)
    assert (r.rotary_dim, int((r.inv_freq > 0).sum())) == (512, 64)
    np.testing.assert_allclose(r.inv_freq[:64], 1e6 ** (-np.arange(0, 128, 2) / 512), rtol=1e-15)
    g3 = make_encoding("rotary", config=str(CONFIGS / "gemma-3-4b-it.json"), layer_type="full_attention")
    np.testing.assert_allclose(g3.resolve(1, 16).inv_freq, rope_inv_freq(256, 1e6) / 8, rtol=1e-15)
    l4 = make_encoding("rotary", config=str(CONFIGS / "llama-4-scout-17b-16e-instruct.json")).resolve(1, 16)
    wavelength = 2 * np.pi / l4.reference_inv_freq
    np.testing.assert_allclose(l4.inv_freq, np.where(wavelength > 8192, l4.reference_inv_freq / 16,
                                                     l4.reference_inv_freq), rtol=1e-15)
    ds = make_encoding("rotary", config=str(CONFIGS / "deepseek-v3.json")).resolve(1, 16)
    assert (ds.rotary_dim, ds.attention_scaling) == (64, 1.0)


def test_llama4_nope_query_temperature_is_the_models(monkeypatch):
    """The query scale Llama4TextAttention applies on a layer without RoPE, at positions up to 10,485,760
    (reached through a cache that reports the tokens before), equals poslab's NopeTemperature."""
    from transformers.models.llama4 import modeling_llama4

    oracle.quiet()
    inv = read_rope_inventory(CONFIGS / "llama-4-scout-17b-16e-instruct.json")
    nope = next(g for g in inv.groups if g.rope is None)
    model = tiny_model("llama-4-scout-17b-16e-instruct.json", True)
    model.config._attn_implementation = "eager"
    attn = model.layers[nope.layers[0]].self_attn
    assert not attn.use_rope and attn.attn_temperature_tuning
    seen = {}

    def capture(module, query, key, value, *args, **kwargs):
        seen["query"] = query
        return query.new_zeros(query.shape[0], query.shape[2], query.shape[1] * query.shape[3]), None

    class Before:  # a cache holding `offset` earlier tokens: positions start there
        def __init__(self, offset):
            self.offset = offset

        def get_seq_length(self, layer_idx=0):
            return self.offset

        def update(self, key, value, layer_idx, **kwargs):
            return key, value

    import torch

    monkeypatch.setattr(modeling_llama4, "eager_attention_forward", capture)
    x = torch.randn(1, 4, model.config.hidden_size)
    plain = attn.q_proj(x).view(1, 4, -1, attn.head_dim).transpose(1, 2)
    for offset in (0, 8188, 2**20 - 2, 10_485_756):
        with torch.no_grad():
            attn(x, position_embeddings=None, attention_mask=None, cache=Before(offset))
        scale = (seen["query"] / plain)[0, 0, :, 0].detach().double().numpy()
        np.testing.assert_allclose(scale, nope.temperature.scale(offset + np.arange(4)), rtol=1e-6)
