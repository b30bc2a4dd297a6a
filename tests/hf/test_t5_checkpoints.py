"""T5-family checkpoints written by transformers: poslab's bias is the one the model's forward pass adds.

A tiny random-init model is saved with ``save_pretrained``; a forward hook on the self-attention of
block 0 takes the ``position_bias`` (1, n_heads, query, key) it returns, and poslab, reading the
saved folder (also as the weights file and as a Hugging Face cache snapshot), must give the same
bias for every query and key, encoder (bidirectional) and decoder (causal).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from poslab.encodings import ParameterError  # noqa: E402
from poslab.encodings.t5_buckets import T5Buckets, t5_bias  # noqa: E402

from ..checkpoints.conftest import write_cache  # noqa: E402

N = 300  # beyond max_distance 128: the shared last buckets are reached in both directions
SMALL = dict(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
             relative_attention_num_buckets=32, relative_attention_max_distance=128)


def _hook(seen: dict, name: str):
    def keep(module, args, output):  # returns None: the output is left as it is
        seen.setdefault(name, output[1][0].detach().double().numpy())
    return keep


def _forward_biases(model, n: int = N) -> dict[str, np.ndarray]:
    """The position_bias each stack's block-0 self-attention returns, (n_heads, n, n), from one forward pass."""
    seen = {}
    hooks = [stack.block[0].layer[0].SelfAttention.register_forward_hook(_hook(seen, name))
             for name, stack in (("encoder", model.encoder), ("decoder", model.decoder))]
    ids = torch.arange(n).remainder(64)[None, :]
    with torch.no_grad():
        model(input_ids=ids, decoder_input_ids=ids)
    for h in hooks:
        h.remove()
    return seen


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    torch.manual_seed(0)
    model = transformers.T5Model(transformers.T5Config(**SMALL)).eval()
    folder = tmp_path_factory.mktemp("t5") / "tiny-t5"
    model.save_pretrained(folder)
    return folder, _forward_biases(model)


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_the_bias_the_forward_pass_adds(t5, stack):
    folder, seen = t5
    r = T5Buckets(source=str(folder), stack=stack).resolve()
    assert r.bidirectional == (stack == "encoder") and r.num_buckets == 32 and r.max_distance == 128 and r.n_heads == 4
    i = np.arange(N)
    ours = t5_bias(r.bias, i[None, :] - i[:, None], bidirectional=r.bidirectional, max_distance=r.max_distance)
    np.testing.assert_array_equal(ours, seen[stack])  # a lookup of the stored float32 values: exact
    forward, backward = r.bias_by_distance(N - 1)
    np.testing.assert_array_equal(forward, seen[stack][:, 0, :])  # query 0, key k: rel = +k
    np.testing.assert_array_equal(backward, seen[stack][:, :, 0])  # query k, key 0: rel = -k
    assert r.stored.tensor == f"{stack}.block.0.layer.0.SelfAttention.relative_attention_bias.weight"
    assert r.stored.source_dtype == "float32" and r.rules == ()


def test_the_same_table_from_the_weights_file_and_a_cache_snapshot(t5, tmp_path, monkeypatch):
    folder, seen = t5
    by_folder = T5Buckets(source=str(folder), stack="encoder").resolve()
    by_file = T5Buckets(source=str(folder / "model.safetensors"), stack="encoder").resolve()
    repo = write_cache(tmp_path / "hub", "tiny/t5", folder)
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    by_cache = T5Buckets(source=str(repo), stack="encoder").resolve()
    by_hub_id = T5Buckets(source="tiny/t5", stack="encoder").resolve()
    for r in (by_file, by_cache, by_hub_id):
        np.testing.assert_array_equal(r.bias, by_folder.bias)
        assert r.stored.sha256 == by_folder.stored.sha256
    assert (by_cache.stored.repo_id, by_hub_id.stored.repo_id) == ("tiny/t5", "tiny/t5")
    assert by_hub_id.stored.revision is not None


def test_two_tables_without_a_stack_are_refused_naming_both(t5):
    folder, _ = t5
    with pytest.raises(ParameterError) as info:
        T5Buckets(source=str(folder))
    msg = str(info.value)
    assert "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight" in msg
    assert "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight" in msg
    assert 'stack = "encoder"' in msg and 'stack = "decoder"' in msg


def test_values_contradicting_the_checkpoint_are_refused(t5):
    folder, _ = t5
    with pytest.raises(ParameterError, match="bidirectional = false contradicts the encoder table"):
        T5Buckets(source=str(folder), stack="encoder", bidirectional=False)
    with pytest.raises(ParameterError, match="relative_attention_max_distance = 64 contradicts the source's 128"):
        T5Buckets(source=str(folder), stack="decoder", relative_attention_max_distance=64)


def test_an_encoder_only_checkpoint_needs_no_stack(tmp_path):
    torch.manual_seed(1)
    model = transformers.T5EncoderModel(transformers.T5Config(**SMALL)).eval()
    model.save_pretrained(tmp_path / "enc")
    r = T5Buckets(source=str(tmp_path / "enc")).resolve()
    assert r.bidirectional and r.stored.stack == "encoder"
    np.testing.assert_array_equal(
        r.bias, model.encoder.block[0].layer[0].SelfAttention.relative_attention_bias.weight.detach().double().numpy())


def test_umt5_gives_each_block_a_table_choose_one_with_key(tmp_path):
    torch.manual_seed(2)
    cfg = transformers.UMT5Config(**SMALL)
    model = transformers.UMT5Model(cfg).eval()
    model.save_pretrained(tmp_path / "umt5")
    with pytest.raises(ParameterError, match="holds 2 T5 bias tables in the encoder.*choose one with key"):
        T5Buckets(source=str(tmp_path / "umt5"), stack="encoder")
    with torch.no_grad():  # UMT5's attention returns no position_bias: its own compute_bias is the oracle
        theirs = model.encoder.block[1].layer[0].SelfAttention.compute_bias(40, 40)[0].double().numpy()
    r = T5Buckets(source=str(tmp_path / "umt5"),
                  key="encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight").resolve()
    i = np.arange(40)
    np.testing.assert_array_equal(t5_bias(r.bias, i[None, :] - i[:, None], bidirectional=True), theirs)


def test_learned_points_a_t5_checkpoint_to_t5_buckets(t5):
    from poslab.encodings import make_encoding

    folder, _ = t5
    with pytest.raises(ValueError, match='kind = "t5_buckets"'):
        make_encoding("learned", source=str(folder)).table()


@pytest.mark.parametrize("stack", ["encoder", "decoder"])
def test_the_kernel_is_the_attention_prior_of_the_forward_pass_bias(t5, stack):
    folder, seen = t5
    kernel = T5Buckets(source=str(folder), stack=stack).kernel(N, N - 1, 32)
    bias = seen[stack]
    assert kernel.scale == "attention_prior" and kernel.heads == ("0", "1", "2", "3")
    np.testing.assert_allclose(kernel.backward, np.exp(bias[:, :, 0] - bias[:, [0], [0]]), rtol=1e-15)
    if stack == "encoder":
        assert kernel.direction == "bidirectional" and not kernel.symmetric
        np.testing.assert_allclose(kernel.forward, np.exp(bias[:, 0, :] - bias[:, [0], [0]]), rtol=1e-15)
    else:  # keys after the query are masked in the decoder
        assert kernel.direction == "causal" and np.isnan(kernel.forward[:, 1:]).all()
