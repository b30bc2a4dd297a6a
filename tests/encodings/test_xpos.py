"""xPos: the issue's numbers, and the score kernel against queries and keys built as torchscale builds them."""

from __future__ import annotations

import numpy as np
import pytest

from poslab.encodings import ParameterError, apply_rotary, rope_inv_freq
from poslab.encodings.xpos import XPos, xpos_decay, xpos_score_kernel, xpos_zeta


def test_the_issues_numbers():
    zeta = xpos_zeta(128)
    assert zeta.shape == (64,)
    assert zeta[0] == pytest.approx(0.285714, abs=5e-7) and zeta[63] == pytest.approx(0.988839, abs=5e-7)
    factor = xpos_decay([2048], 128, scale_base=512)[:, 0]
    assert factor[0] == pytest.approx(0.00666389, rel=1e-6) and factor[63] == pytest.approx(0.956099, rel=1e-6)


def test_zeta_is_torchscales_scale():
    d = 96  # torchscale: (arange(0, head_dim, 2) + 0.4 * head_dim) / (1.4 * head_dim)
    np.testing.assert_allclose(xpos_zeta(d), (np.arange(0, d, 2) + 0.4 * d) / (1.4 * d), rtol=1e-15)


def test_score_kernel_is_the_score_of_scaled_rotated_queries_and_keys():
    d, sb, n = 32, 64.0, 300
    theta = rope_inv_freq(d, 10000.0)
    zeta = xpos_zeta(d)
    pos = np.arange(n)
    content = np.ones((n, d))  # the same content at every position, unit weight on every pair
    scale = np.repeat(zeta, 2)[None, :] ** ((pos - n // 2)[:, None] / sb)  # torchscale centres positions
    q = apply_rotary(content, pos, theta) * scale
    k = apply_rotary(content, pos, theta) / scale
    scores = q @ k.T
    m = n - 1  # the last query, keys k positions behind it
    expected = scores[m, m - np.arange(n)] / scores[m, m]
    np.testing.assert_allclose(xpos_score_kernel(np.arange(n), theta, scale_base=sb), expected, rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(XPos(rotary_dim=d, scale_base=sb).score_kernel(n - 1, 999), expected, rtol=1e-10,
                               atol=1e-12)


def test_without_decay_it_is_ropes_cosine_kernel():
    theta = rope_inv_freq(64, 10000.0)
    k = np.arange(500)
    rope = np.mean(np.cos(k[None, :] * theta[:, None]), axis=0)
    np.testing.assert_allclose(xpos_score_kernel(k, theta, gamma=1e12), rope, atol=1e-9)


def test_parameters_are_checked():
    with pytest.raises(ParameterError, match="rotary_dim"):
        XPos(rotary_dim=7)
    with pytest.raises(ParameterError, match="scale_base"):
        XPos(scale_base=0.0)
    with pytest.raises(ValueError, match="odd"):
        XPos().check_size(10, 9)
    assert XPos().width(128) == 128 and XPos(rotary_dim=16).width(128) == 16


def test_the_kernel_is_the_causal_score_kernel():
    enc = XPos(rotary_dim=64)
    kernel = enc.kernel(200, 150, 768)
    assert (kernel.scale, kernel.direction, kernel.heads) == ("score", "causal", ("all",))
    np.testing.assert_allclose(kernel.backward[0], enc.score_kernel(150, 768), rtol=0, atol=0)
    assert np.isnan(kernel.forward[0, 1:]).all()
    with pytest.raises(ValueError, match="has no position table"):
        enc.generate(10, 64)


def test_xpos_decay_takes_a_scalar_or_an_array_of_distances():
    """Issue 15 leftover: a scalar distance raised IndexError. Shape (pairs,) + shape of the distance."""
    one = xpos_decay(2048, 128)
    assert one.shape == (64,)
    assert one[0] == pytest.approx(0.00666389, rel=1e-5) and one[63] == pytest.approx(0.956099, rel=1e-6)
    np.testing.assert_array_equal(xpos_decay([2048], 128)[:, 0], one)
    grid = xpos_decay(np.array([[0, 512], [1024, 2048]]), 128)
    assert grid.shape == (64, 2, 2)
    np.testing.assert_array_equal(grid[:, 1, 1], one)
    np.testing.assert_array_equal(grid[:, 0, 0], np.ones(64))
