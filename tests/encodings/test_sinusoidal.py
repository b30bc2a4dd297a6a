import numpy as np
import pytest

from poslab.analysis import cosine_similarity, similarity_profile
from poslab.encodings import make_encoding, sinusoidal_frequencies


def closed_form(k, dim, base=10000.0, spacing="vaswani"):
    """(2/d) Σ_i cos(k ω_i) for even d."""
    omega = sinusoidal_frequencies(dim, base=base, spacing=spacing)
    return (2.0 / dim) * np.cos(np.outer(np.atleast_1d(k), omega)).sum(axis=1)


@pytest.mark.parametrize("dim", [2, 8, 64, 512])
@pytest.mark.parametrize("layout", ["interleaved", "concatenated"])
@pytest.mark.parametrize("spacing", ["vaswani", "tensor2tensor"])
def test_profile_equals_closed_form(dim, layout, spacing):
    table = make_encoding("sinusoidal", layout=layout, spacing=spacing).generate(300, dim)
    prof = similarity_profile(table)
    expected = closed_form(prof.distance, dim, spacing=spacing)
    np.testing.assert_allclose(prof.mean_similarity, expected, rtol=0, atol=1e-12)
    # translation invariant: every pair at distance k has the same similarity
    assert prof.std_similarity.max() < 1e-12


def test_c1_odd_dim():
    table = make_encoding("sinusoidal").generate(3, 5)
    assert table.shape == (3, 5)
    np.testing.assert_allclose(table[1], [0.841471, 0.540302, 0.025116, 0.999685, 0.000631], atol=5e-7)
    # odd dim: row norms vary, so S comes from the vectors, not the closed form
    norms = np.linalg.norm(table, axis=1)
    assert np.ptp(norms) > 1e-7
    s = cosine_similarity(table)
    brute = np.array([[a @ b / np.linalg.norm(a) / np.linalg.norm(b) for b in table] for a in table])
    np.testing.assert_allclose(s, brute, atol=1e-15)
    concat = make_encoding("sinusoidal", layout="concatenated").generate(3, 5)
    np.testing.assert_allclose(concat[1], [0.841471, 0.025116, 0.000631, 0.540302, 0.999685], atol=5e-7)


@pytest.mark.parametrize("dim", [1, 3, 7, 129])
def test_every_odd_dim_builds(dim):
    table = make_encoding("sinusoidal", spacing="tensor2tensor").generate(10, dim)
    assert table.shape == (10, dim) and np.isfinite(table).all()


def test_c2_layout_does_not_change_similarity():
    a = make_encoding("sinusoidal", layout="interleaved").generate(16, 8)
    b = make_encoding("sinusoidal", layout="concatenated").generate(16, 8)
    assert abs(np.abs(a - b).max() - 1.757) < 1e-3
    np.testing.assert_allclose(cosine_similarity(a), cosine_similarity(b), atol=1e-12)
    assert cosine_similarity(a)[0, 1] == pytest.approx(0.883814, abs=1e-6)
    prof = similarity_profile(a)
    np.testing.assert_allclose(prof.mean_similarity[:6], [1, 0.8838, 0.6409, 0.4912, 0.5667, 0.7900], atol=1e-4)


def test_c3_spacing():
    np.testing.assert_allclose(sinusoidal_frequencies(8, spacing="vaswani"), [1, 0.1, 0.01, 0.001], rtol=1e-12)
    np.testing.assert_allclose(sinusoidal_frequencies(8, spacing="tensor2tensor"), [1, 0.046416, 0.002154, 0.0001], atol=5e-7)
    for spacing, value in [("vaswani", 0.491222), ("tensor2tensor", 0.500077)]:
        table = make_encoding("sinusoidal", spacing=spacing).generate(16, 8)
        assert similarity_profile(table).mean_similarity[3] == pytest.approx(value, abs=1e-6)


def test_c4_closed_form_values_and_monotonicity():
    table = make_encoding("sinusoidal").generate(512, 512)
    prof = similarity_profile(table, max_distance=256).mean_similarity
    for k, v in {1: 0.973055, 8: 0.722520, 64: 0.485390, 128: 0.405892, 256: 0.313466}.items():
        assert prof[k] == pytest.approx(v, abs=1e-6)
    diffs = np.diff(prof)
    assert (diffs[:43] < 0).all()  # strictly decreasing up to k = 43
    assert prof[44] == pytest.approx(0.526447, abs=1e-6) and prof[43] == pytest.approx(0.526401, abs=1e-6)
    assert prof[44] > prof[43]
