"""The Kernel interface: validation, the cosine kernel of frequency pairs, the heatmap of a kernel."""

import numpy as np
import pytest

from poslab.analysis.heatmap import kernel_block_means
from poslab.encodings import make_encoding
from poslab.encodings.kernel import Kernel, attention_prior, cosine_kernel


def test_cosine_kernel_is_the_weighted_cosine_sum_brute_force():
    rng = np.random.default_rng(0)
    theta = np.concatenate([rng.uniform(0, 3, 7), [0.0]])  # a zero-frequency pair counts as cos 0 = 1
    w = rng.uniform(0.5, 2, theta.size)
    k = np.arange(2500)
    expected = (np.cos(np.outer(k, theta)) * w).sum(axis=1) / w.sum()
    np.testing.assert_allclose(cosine_kernel(theta, 2499, w), expected, rtol=0, atol=1e-12)  # angles to 7500 rad
    # the cosine similarity of rows a_i (cos p θ_i, sin p θ_i) at distance k, brute force
    p = np.arange(40)
    table = np.concatenate([np.sqrt(w) * np.cos(np.outer(p, theta)), np.sqrt(w) * np.sin(np.outer(p, theta))], axis=1)
    u = table / np.linalg.norm(table, axis=1, keepdims=True)
    np.testing.assert_allclose(cosine_kernel(theta, 39, w)[7], np.sum(u[0] * u[7]), rtol=0, atol=1e-14)
    with pytest.raises(ValueError, match="weights"):
        cosine_kernel(theta, 3, np.zeros(theta.size))


def test_the_kernel_checks_what_it_holds():
    d = np.arange(4)
    row = np.array([[1.0, 0.5, 0.25, 0.125]])
    k = Kernel("attention_prior", d, row, row)
    assert k.symmetric and k.n_heads == 1 and k.max_distance == 3 and not k.forward.flags.writeable
    with pytest.raises(ValueError, match="scale must be one of cosine, attention_prior"):
        Kernel("logits", d, row, row)
    with pytest.raises(ValueError, match="1 at distance 0"):
        Kernel("cosine", d, row * 2, row * 2)
    with pytest.raises(ValueError, match=r"shape \(n_heads, max_distance \+ 1\)"):
        Kernel("cosine", d, row, row, heads=("a", "b"))
    with pytest.raises(ValueError, match="0, 1, ..., max_distance"):
        Kernel("cosine", d + 1, row, row)
    with pytest.raises(ValueError, match="causal"):
        Kernel("cosine", d, np.full((1, 4), np.nan), row)  # NaN forward needs direction='causal'
    causal = Kernel("attention_prior", d, np.array([[1.0, np.nan, np.nan, np.nan]]), row, direction="causal")
    np.testing.assert_array_equal(causal.profile(), row[0])
    with pytest.raises(ValueError, match="2 values for 1 heads"):
        Kernel("cosine", d, row, row, head_parameters={"slope": (1.0, 2.0)})


def test_attention_prior_is_relative_to_distance_zero():
    bias = np.array([[3.0, 2.0, 0.0], [-1.0, -1.0, -2.0]])
    np.testing.assert_allclose(attention_prior(bias), [[1, np.exp(-1), np.exp(-3)], [1, 1, np.exp(-1)]])


@pytest.mark.parametrize("direction", ["bidirectional", "causal"])
def test_the_heatmap_of_a_kernel_is_the_block_mean_of_its_toeplitz_matrix(direction):
    n, heads = 37, 3
    rng = np.random.default_rng(1)
    back = np.concatenate([np.ones((heads, 1)), rng.uniform(0, 1, (heads, n - 1))], axis=1)
    fwd = np.concatenate([np.ones((heads, 1)), rng.uniform(0, 1, (heads, n - 1))], axis=1)
    if direction == "causal":
        fwd[:, 1:] = np.nan
    kernel = Kernel("attention_prior", np.arange(n), fwd, back, heads=("0", "1", "2"), direction=direction)
    i, j = np.indices((n, n))
    d = j - i
    matrix = np.where(d >= 0, fwd.mean(axis=0)[np.abs(d)], back.mean(axis=0)[np.abs(d)])  # key − query = j − i
    blocks = kernel_block_means(kernel, n, 5)
    e = blocks.edges
    for r in range(5):
        for c in range(5):
            block = matrix[e[r]:e[r + 1], e[c]:e[c + 1]]
            expected = np.nanmean(block) if np.isfinite(block).any() else np.nan
            np.testing.assert_allclose(blocks.mean_similarity[r, c], expected, rtol=0, atol=1e-13)
    assert (np.isnan(blocks.mean_similarity[0, 4]) if direction == "causal" else
            np.isfinite(blocks.mean_similarity).all())


def test_kernel_sizes_are_checked_and_odd_sinusoidal_has_none():
    enc = make_encoding("rotary", rotary_dim=8)
    with pytest.raises(ValueError, match="max_distance must be < n_positions = 10"):
        enc.kernel(10, 10, 8)
    with pytest.raises(TypeError):
        enc.kernel(10.5, 3, 8)
    assert make_encoding("sinusoidal").kernel(10, 9, 7) is None
    assert make_encoding("learned", source="gpt2").kernel(10, 9, 7) is None
