import numpy as np
import pytest

from poslab.analysis import similarity_profile
from poslab.encodings import apply_rotary, make_encoding, rope_angles, rope_inv_freq, sinusoidal_frequencies


def test_c5_angles_in_float64_from_int_positions():
    inv_freq = rope_inv_freq(32, 10000.0)
    angle = rope_angles(np.array([1857]), inv_freq)[0, 1]
    assert angle == pytest.approx(1044.2678, abs=5e-5)
    assert np.float16(np.float16(1857) * np.float16(inv_freq[1])) == 1045.0  # the bug C5 reports
    big = rope_angles(np.array([70000]), inv_freq)[0, 0]
    assert np.cos(big) == pytest.approx(0.567354, abs=1e-6) and np.sin(big) == pytest.approx(-0.823474, abs=1e-6)
    table = make_encoding("rotary", rotary_dim=32).generate(70001, 32)
    assert table[70000, 0] == pytest.approx(0.567354, abs=1e-6) and table[70000, 1] == pytest.approx(-0.823474, abs=1e-6)
    with pytest.raises(TypeError, match="integers"):
        rope_angles(np.array([1.5]), inv_freq)


C6 = {"half": 39.024808, "interleaved": 77.909967}


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_c6_relative_shift_invariance_and_norm(pairing):
    q, k = np.arange(1.0, 9.0), np.arange(8.0, 0.0, -1.0)
    inv_freq = rope_inv_freq(8, 10000.0)

    def rot(x, p):
        return apply_rotary(x[None, :], np.array([p]), inv_freq, pairing=pairing)[0]

    assert rot(q, 3) @ rot(k, 1) == pytest.approx(C6[pairing], abs=1e-6)
    assert rot(q, 103) @ rot(k, 101) == pytest.approx(C6[pairing], abs=1e-6)
    for p in [0, 1, 7, 1000, 123456]:
        assert np.linalg.norm(rot(q, p)) == pytest.approx(14.282857, abs=1e-6)
    # random vectors, many shifts
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 64))
    f = rope_inv_freq(64, 500000.0)
    base = apply_rotary(a[None], np.array([5]), f, pairing=pairing)[0] @ apply_rotary(b[None], np.array([2]), f, pairing=pairing)[0]
    for shift in [1, 10, 4096]:
        val = apply_rotary(a[None], np.array([5 + shift]), f, pairing=pairing)[0] @ apply_rotary(
            b[None], np.array([2 + shift]), f, pairing=pairing)[0]
        assert val == pytest.approx(base, abs=1e-9)


def test_c6_mixed_convention_breaks():
    """Half-split frequencies with interleaved rotation (a real bug): shift invariance fails."""
    q, k = np.arange(1.0, 9.0), np.arange(8.0, 0.0, -1.0)
    inv_freq = rope_inv_freq(8, 10000.0)
    # frequency per dim laid out half-split (HF cos/sin cache), applied by an interleaved rotation
    freq_per_dim = np.concatenate([inv_freq, inv_freq])

    def wrong(x, p):
        ang = p * freq_per_dim
        out = x * np.cos(ang)
        out[0::2] -= x[1::2] * np.sin(ang[0::2])
        out[1::2] += x[0::2] * np.sin(ang[1::2])
        return out

    assert wrong(q, 3) @ wrong(k, 1) != pytest.approx(wrong(q, 103) @ wrong(k, 101), abs=1e-3)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_table_is_the_phase_pairs_and_profile_is_sinusoidal_closed_form(pairing):
    enc = make_encoding("rotary", rope_theta=500000, rotary_dim=128, pairing=pairing)
    table = enc.generate(400, 768)
    assert table.shape == (400, 128)
    # rotating the unit vector e_0-pair by position m gives row m (cos, sin) in each pair
    np.testing.assert_allclose(np.linalg.norm(table, axis=1), np.sqrt(64), rtol=1e-12)
    prof = similarity_profile(table)
    omega = sinusoidal_frequencies(128, base=500000.0)
    np.testing.assert_allclose(enc.inv_freq(768), omega, rtol=1e-15)
    expected = (2 / 128) * np.cos(np.outer(prof.distance, omega)).sum(axis=1)
    np.testing.assert_allclose(prof.mean_similarity, expected, atol=1e-12)
    sin_table = make_encoding("sinusoidal", base=500000).generate(400, 128)
    np.testing.assert_allclose(prof.mean_similarity, similarity_profile(sin_table).mean_similarity, atol=1e-12)


def test_rotary_dim_checks():
    assert make_encoding("rotary").generate(4, 64).shape == (4, 64)
    with pytest.raises(ValueError, match="odd"):
        make_encoding("rotary").generate(4, 63)
    with pytest.raises(ValueError, match="exceeds"):
        make_encoding("rotary", rotary_dim=128).generate(4, 64)


def test_context_length_evaluates_length_dependent_scaling_there():
    """The first 64 positions of a longer sequence: dynamic's base and longrope's factor list are those of the
    whole sequence (transformers' seq_len); a shorter context than the window, or a rope type that does not
    depend on the length, is refused."""
    from poslab.encodings.base import ParameterError
    from poslab.study import StudyError, parse_study

    dyn = dict(rope_type="dynamic", factor=2.0, max_position_embeddings=1024, rotary_dim=32)
    inside = make_encoding("rotary", context_length=8192, **dyn)
    np.testing.assert_array_equal(inside.resolve(32, 64).inv_freq, make_encoding("rotary", **dyn).resolve(32, 8192).inv_freq)
    np.testing.assert_array_equal(inside.generate(64, 32), make_encoding("rotary", **dyn).generate(8192, 32)[:64])
    assert inside.resolve(32, 64).summary()["rope_length"] == 8192
    with pytest.raises(ValueError, match="context_length = 100 is shorter than the analysed n_positions = 128"):
        make_encoding("rotary", context_length=100, **dyn).resolve(32, 128)
    with pytest.raises(ParameterError, match="rope type is 'default'.*leave context_length out"):
        make_encoding("rotary", rotary_dim=32, context_length=8192)
    study = {"name": "s", "n_positions": 128, "dim": 32,
             "encodings": [{"kind": "rotary", "context_length": 64, **dyn}]}
    with pytest.raises(StudyError, match=r"entry 1 \(kind = 'rotary'\): context_length = 64 is shorter"):
        parse_study(study)
