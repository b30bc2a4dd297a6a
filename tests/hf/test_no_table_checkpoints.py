"""Checkpoints written by transformers for architectures without a learned absolute table.

`learned` must refuse them naming the scheme the model uses (never offer a weight to pick), and the RoPE one
must then read, through `rotary config = <the same folder>`, the frequencies of the model's own rotary module.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from poslab.encodings import make_encoding  # noqa: E402

SMALL = dict(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64)
MODELS = {
    "llama": (lambda: transformers.LlamaModel(transformers.LlamaConfig(**SMALL, rope_theta=500000.0)),
              'RoPE \\(rotary embeddings\\).*kind = "rotary" with config'),
    "bloom": (lambda: transformers.BloomModel(transformers.BloomConfig(vocab_size=64, hidden_size=32, n_layer=1,
                                                                        n_head=4)), "ALiBi"),
    "t5": (lambda: transformers.T5Model(transformers.T5Config(vocab_size=64, d_model=32, d_kv=8, d_ff=64,
                                                              num_layers=1, num_heads=4)),
           "T5 relative position buckets"),
}


@pytest.mark.parametrize("model_type", sorted(MODELS))
def test_saved_model_without_a_learned_table_is_refused_naming_its_scheme(tmp_path, model_type):
    build, scheme = MODELS[model_type]
    torch.manual_seed(0)
    model = build()
    model.save_pretrained(tmp_path / model_type)
    with pytest.raises(ValueError) as info:
        make_encoding("learned", source=str(tmp_path / model_type)).table()
    message = str(info.value)
    assert re.search(f"{model_type} uses {scheme}", message), message
    assert "key = NAME" not in message
    if model_type == "llama":  # what the message points to reads exactly the model's rotary frequencies
        r = make_encoding("rotary", config=str(tmp_path / model_type)).resolve(32, 16)
        np.testing.assert_allclose(r.inv_freq, model.rotary_emb.inv_freq.double().numpy(), rtol=1e-6)
