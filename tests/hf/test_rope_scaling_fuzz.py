"""poslab's RoPE scaling formulas against transformers' own (ROPE_INIT_FUNCTIONS), over random configs.

transformers computes in float32, poslab in float64: they must agree to float32 rounding.
Fuzz sizes: FUZZ configs per rope type (seeded).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import LlamaConfig  # noqa: E402
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # noqa: E402
from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import HunYuanDenseV1RotaryEmbedding  # noqa: E402
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding  # noqa: E402

from poslab.encodings.rope_scaling import ROPE_TYPES, rope_parameters  # noqa: E402

FUZZ = 100
RTOL = 2e-5  # float32 powers of bases up to 1e7


def _draw(rng, rope_type):
    """(poslab keyword arguments, transformers rope_parameters, head_dim, max_position_embeddings, seq_len)."""
    head = int(rng.choice([8, 16, 32, 64, 80, 96, 128, 256]))
    theta = float(10 ** rng.uniform(2, 7))
    mpe = int(rng.integers(64, 16384))
    seq_len = int(rng.integers(1, 4 * mpe))
    params = {}
    if rope_type in ("linear", "dynamic"):
        params["factor"] = float(rng.uniform(1, 32))
    elif rope_type == "yarn":
        params.update(factor=float(rng.uniform(1, 64)), original_max_position_embeddings=int(rng.integers(64, mpe + 1)),
                      beta_fast=float(rng.uniform(8, 64)), beta_slow=float(rng.uniform(0.5, 4)),
                      truncate=bool(rng.integers(2)))
        if rng.random() < 0.3:
            params.update(mscale=float(rng.uniform(0.5, 1.5)), mscale_all_dim=float(rng.uniform(0.5, 1.5)))
        if rng.random() < 0.2:
            params["attention_factor"] = float(rng.uniform(0.5, 2))
    elif rope_type == "longrope":
        pairs = head // 2
        params.update(short_factor=[float(x) for x in rng.uniform(1, 4, pairs)],
                      long_factor=[float(x) for x in rng.uniform(1, 64, pairs)],
                      original_max_position_embeddings=int(rng.integers(64, mpe + 1)))
        if rng.random() < 0.5:
            params["factor"] = float(rng.uniform(1, 64))
    elif rope_type == "llama3":
        low = float(rng.uniform(0.5, 4))
        high = low if rng.random() < 0.2 else float(rng.uniform(low, 8))  # low == high: Llama 4's hard cut
        params.update(factor=float(rng.uniform(1, 32)), low_freq_factor=low, high_freq_factor=high,
                      original_max_position_embeddings=int(rng.integers(64, mpe + 1)))
    elif rope_type == "proportional":
        params.update(partial_rotary_factor=float(rng.choice([0.125, 0.25, 0.5, 0.75, 1.0])),
                      factor=float(rng.uniform(1, 8)))
    hf = {"rope_type": rope_type, "rope_theta": theta, **params}
    ours = dict(params)
    if rope_type == "dynamic":
        ours["max_position_embeddings"] = mpe
    if rope_type in ("longrope", "yarn") and "factor" not in params:
        ours["max_position_embeddings"] = mpe
    return ours, hf, head, theta, mpe, seq_len


def _hf(rope_type, hf, head, mpe, seq_len):
    config = LlamaConfig(hidden_size=head * 4, num_attention_heads=4, head_dim=head, max_position_embeddings=mpe,
                         rope_parameters=dict(hf))
    if rope_type == "default":
        inv, attention = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
    else:
        inv, attention = ROPE_INIT_FUNCTIONS[rope_type](config, None, seq_len=seq_len)
    return inv.double().numpy(), float(attention)


@pytest.mark.parametrize("rope_type", ROPE_TYPES)
def test_scaling_formulas_equal_transformers(rope_type):
    rng = np.random.default_rng(sum(map(ord, rope_type)))
    worst = 0.0
    for _ in range(FUZZ):
        ours, hf, head, theta, mpe, seq_len = _draw(rng, rope_type)
        width = head
        inv, attention = rope_parameters(rope_type, rotary_dim=width, rope_theta=theta, seq_len=seq_len, **ours)
        ref_inv, ref_attention = _hf(rope_type, hf, head, mpe, seq_len)
        assert inv.shape == ref_inv.shape, (rope_type, hf)
        if rope_type == "llama3":  # a pair whose wavelength sits within float32 rounding of a band edge may flip
            wavelength = 2 * math.pi / (theta ** (-np.arange(0, head, 2) / head))
            edges = [hf["original_max_position_embeddings"] / hf[k] for k in ("low_freq_factor", "high_freq_factor")]
            keep = np.all([np.abs(wavelength / e - 1) > 1e-5 for e in edges], axis=0)
            inv, ref_inv = inv[keep], ref_inv[keep]
        rel = np.abs(inv - ref_inv) / np.where(ref_inv == 0, 1.0, np.abs(ref_inv))
        worst = max(worst, float(rel.max(initial=0.0)))
        assert attention == pytest.approx(ref_attention, rel=1e-6), (rope_type, hf)
    assert worst < RTOL, f"{rope_type}: max relative difference {worst:.3g} over {FUZZ} configs"


def test_ntk_alpha_equals_hunyuan():
    """dynamic with alpha (Hunyuan): transformers' HunYuanDenseV1RotaryEmbedding.compute_ntk_alpha_rope_parameters."""
    from transformers import HunYuanDenseV1Config

    rng = np.random.default_rng(7)
    for _ in range(FUZZ // 4):
        head = int(rng.choice([16, 64, 128]))
        theta, alpha = float(10 ** rng.uniform(3, 6)), float(10 ** rng.uniform(0, 3))
        config = HunYuanDenseV1Config(hidden_size=head * 4, num_attention_heads=4, head_dim=head, rope_parameters={
            "rope_type": "dynamic", "alpha": alpha, "factor": 1.0, "rope_theta": theta})
        ref, _ = HunYuanDenseV1RotaryEmbedding.compute_ntk_alpha_rope_parameters(config)
        ours, _ = rope_parameters("dynamic", rotary_dim=head, rope_theta=theta, alpha=alpha)
        np.testing.assert_allclose(ours, ref.double().numpy(), rtol=RTOL)
