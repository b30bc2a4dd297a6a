"""ALiBi read from BLOOM and MPT models saved by transformers: the slopes and bias their forward pass uses."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from poslab.encodings import make_encoding  # noqa: E402


def _captured(model, method, input_ids):
    """The return value of ``model.<method>`` during one forward pass (the bias the model adds)."""
    seen = []
    original = getattr(model, method)

    def spy(*args, **kwargs):
        seen.append(original(*args, **kwargs))
        return seen[-1]

    setattr(model, method, spy)
    with torch.no_grad():
        model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
    (bias,) = seen
    return bias.detach().double().numpy()


@pytest.mark.parametrize("n_heads", [8, 12])
def test_bloom(tmp_path, n_heads):
    torch.manual_seed(0)
    model = transformers.BloomModel(transformers.BloomConfig(vocab_size=64, hidden_size=4 * n_heads, n_layer=1,
                                                              n_head=n_heads)).eval()
    model.save_pretrained(tmp_path / "bloom")
    length = 24
    ids = torch.arange(length)[None, :] % 64
    seen = _captured(model, "build_alibi_tensor", ids)  # (batch · heads, 1, length): slope × key position
    kernel = make_encoding("alibi", config=str(tmp_path / "bloom")).kernel(length, length - 1, 1)
    query = length - 1
    for h in range(n_heads):  # b_h(k) − b_h(0) on the last (causal) row: key query − k against the query itself
        relative = seen[h, 0, query - np.arange(length)] - seen[h, 0, query]
        np.testing.assert_allclose(np.log(kernel.backward[h]), relative, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n_heads", [4, 12])
def test_mpt(tmp_path, n_heads):
    torch.manual_seed(0)
    config = transformers.MptConfig(vocab_size=64, d_model=4 * n_heads, n_heads=n_heads, n_layers=1, max_seq_len=32,
                                    attn_config={"alibi": True, "alibi_bias_max": 8})
    model = transformers.MptModel(config).eval()
    model.save_pretrained(tmp_path / "mpt")
    seen = _captured(model, "build_mpt_alibi_tensor", torch.arange(20)[None, :])  # (heads, 1, max_seq_len)
    length = seen.shape[-1]
    kernel = make_encoding("alibi", config=str(tmp_path / "mpt")).kernel(length, length - 1, 1)
    for h in range(n_heads):  # slope × (key − last position): the last row, relative to the query itself
        relative = seen[h, 0, length - 1 - np.arange(length)] - seen[h, 0, length - 1]
        np.testing.assert_allclose(np.log(kernel.backward[h]), relative, rtol=1e-6, atol=1e-6)


def test_mpt_alibi_bias_max_follows_gen_slopes(tmp_path):
    """A config with another alibi_bias_max: llm-foundry's rule (transformers' own build_mpt_alibi_tensor given the
    key), recorded in the kernel's notes since transformers 5.24's MptModel does not pass it."""
    from transformers.models.mpt.modeling_mpt import build_mpt_alibi_tensor

    config = transformers.MptConfig(vocab_size=64, d_model=48, n_heads=12, n_layers=1, max_seq_len=16,
                                    attn_config={"alibi": True, "alibi_bias_max": 6})
    config.save_pretrained(tmp_path / "mpt6")
    reference = build_mpt_alibi_tensor(12, 16, alibi_bias_max=6).double().numpy()
    kernel = make_encoding("alibi", config=str(tmp_path / "mpt6")).kernel(16, 15, 1)
    np.testing.assert_allclose(np.log(kernel.backward), reference[:, 0, ::-1], rtol=1e-6, atol=1e-6)
    assert any("llm-foundry" in note for note in kernel.notes)
