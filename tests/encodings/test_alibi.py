"""ALiBi slopes and kernels (Press et al. 2022; BLOOM and MPT configs)."""

import json
import math

import numpy as np
import pytest

from poslab.encodings import make_encoding
from poslab.encodings.alibi import alibi_slopes, read_alibi_config


def test_slopes_of_the_issue():
    np.testing.assert_allclose(alibi_slopes(8), [1 / 2**h for h in range(1, 9)], rtol=1e-15)
    np.testing.assert_allclose(alibi_slopes(16), 2.0 ** (-0.5 * np.arange(1, 17)), rtol=1e-15)
    twelve = alibi_slopes(12)
    np.testing.assert_allclose(twelve[:8], alibi_slopes(8), rtol=1e-15)
    np.testing.assert_allclose(twelve[8:], [0.707107, 0.353553, 0.176777, 0.0883883], rtol=5e-6)
    # MPT's rule (a power of two above, odd-indexed slopes then even-indexed ones) gives the same 12 values
    np.testing.assert_allclose(alibi_slopes(12, alibi_bias_max=8.0 + 1e-13), twelve, rtol=1e-12)


def _get_slopes(n):
    """The authors' get_slopes (ofirpress/attention_with_linear_biases), written out as its recursion."""
    def power_of_2(n):
        start = 2 ** (-2 ** -(math.log2(n) - 3))
        return [start * start**i for i in range(n)]
    if math.log2(n).is_integer():
        return power_of_2(n)
    closest = 2 ** math.floor(math.log2(n))
    return power_of_2(closest) + _get_slopes(2 * closest)[0::2][:n - closest]


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6, 7, 12, 20, 24, 40, 64, 96, 100])
def test_slopes_follow_the_reference_recursion(n):
    np.testing.assert_allclose(alibi_slopes(n), _get_slopes(n), rtol=1e-14)


def test_kernel_is_the_attention_prior_of_the_linear_bias():
    enc = make_encoding("alibi", n_heads=4)
    k = enc.kernel(600, 599, 1)
    slopes = alibi_slopes(4)
    np.testing.assert_allclose(k.backward, np.exp(-np.outer(slopes, np.arange(600))), rtol=1e-14)
    assert k.direction == "causal" and np.isnan(k.forward[:, 1:]).all() and k.scale == "attention_prior"
    assert k.head_parameters["slope"] == tuple(slopes) and k.heads == ("0", "1", "2", "3")
    from poslab.stages import run_stage

    out = run_stage("kernel", enc, 600)
    heads = out.tables["kernel_heads"]
    # exp(-m k) < 1/e first at the integer k just above 1/m; < 1/2 just above ln 2 / m
    assert list(heads["below_1e"]) == [int(1 / m) + 1 for m in slopes]
    assert list(heads["below_half"]) == [math.floor(math.log(2) / m) + 1 for m in slopes]
    assert out.summary["heads_below_1e_min"] == 5 and out.summary["heads_below_1e_max"] == 257
    assert out.summary["heads_below_1e_median"] == (17 + 65) / 2
    bidirectional = make_encoding("alibi", n_heads=4, direction="bidirectional").kernel(50, 49, 1)
    assert bidirectional.symmetric


def _write(path, config):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def test_configs(tmp_path):
    bloom = _write(tmp_path / "bloom", {"model_type": "bloom", "n_head": 12, "hidden_size": 48})
    assert read_alibi_config(bloom).n_heads == 12
    enc = make_encoding("alibi", config=bloom)
    np.testing.assert_allclose(enc.slopes(), alibi_slopes(12))
    assert "ALiBi n_heads = 12 (config: n_head)" in enc.kernel(10, 9, 1).notes
    mpt = _write(tmp_path / "mpt", {"model_type": "mpt", "n_heads": 12, "attn_config": {"alibi": True,
                                                                                         "alibi_bias_max": 8}})
    np.testing.assert_allclose(make_encoding("alibi", config=mpt).slopes(), alibi_slopes(12), rtol=1e-12)
    assert make_encoding("alibi", config=mpt, n_heads=4).slopes().size == 4  # inline wins, key by key
    off = _write(tmp_path / "off", {"model_type": "mpt", "n_heads": 4, "attn_config": {"alibi": False}})
    with pytest.raises(ValueError, match=r"attn_config.alibi = False.*kind = \"learned\""):
        make_encoding("alibi", config=off)
    llama = _write(tmp_path / "llama", {"model_type": "llama", "num_attention_heads": 4})
    with pytest.raises(ValueError, match="model_type 'llama' is not an ALiBi architecture"):
        make_encoding("alibi", config=llama)
    with pytest.raises(ValueError, match="causal rows only"):
        make_encoding("alibi", config=bloom, direction="bidirectional")
    bad = _write(tmp_path / "bad", {"model_type": "bloom", "n_head": 0})
    with pytest.raises(ValueError, match="n_head must be a positive integer, got 0"):
        make_encoding("alibi", config=bad)
    with pytest.raises(ValueError, match="alibi_bias_max"):
        make_encoding("alibi", alibi_bias_max=-1.0)


def test_generates_no_table():
    with pytest.raises(ValueError, match="no position table"):
        make_encoding("alibi").generate(10, 4)
