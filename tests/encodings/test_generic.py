"""Generic tests run over every built-in encoding: adding an encoding means adding one row here."""

import dataclasses

import numpy as np
import pytest

from poslab.encodings import Encoding, available_encodings, make_encoding

# kind, example parameters, (n_positions, dim), expected table width
EXAMPLES = [
    ("sinusoidal", {"base": 10000.0, "layout": "concatenated", "spacing": "tensor2tensor"}, (33, 17), 17),
    ("learned", {"source": "whisper-tiny", "offset": 3}, (40, 999), 384),
    ("random", {"distribution": "uniform"}, (20, 12), 12),
    ("rotary", {"rope_theta": 500000.0, "rotary_dim": 16, "pairing": "half"}, (30, 64), 16),
    ("rotary", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rotary_dim": 8}, (30, 64), 8),
    ("smoothed_random", {"length_scale": 3.5}, (25, 6), 6),
]


def test_every_builtin_has_a_row():
    builtin = {k for k, c in available_encodings().items() if c.__module__.startswith("poslab.")}
    assert builtin == {row[0] for row in EXAMPLES}


@pytest.mark.parametrize("kind, params, size, width", EXAMPLES, ids=[r[0] for r in EXAMPLES])
class TestEveryEncoding:
    def test_table(self, kind, params, size, width):
        enc = make_encoding(kind, **params)
        table = enc.generate(*size, rng=np.random.default_rng(0))
        assert table.shape == (size[0], width)
        assert table.dtype == np.float64 and np.isfinite(table).all()

    def test_reproducible_and_seeded(self, kind, params, size, width):
        enc = make_encoding(kind, **params)
        a = enc.generate(*size, rng=np.random.default_rng(7))
        b = enc.generate(*size, rng=np.random.default_rng(7))
        np.testing.assert_array_equal(a, b)
        c = enc.generate(*size, rng=np.random.default_rng(8))
        assert (not np.array_equal(a, c)) == enc.stochastic

    def test_params_round_trip_and_label(self, kind, params, size, width):
        enc = make_encoding(kind, **params)
        assert isinstance(enc, Encoding) and enc.kind == kind
        assert make_encoding(kind, **enc.params()) == enc
        assert enc.label == make_encoding(kind, **params).label
        assert enc.label.startswith(kind)
        for key, value in params.items():
            assert enc.params()[key] == value
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(enc, next(iter(enc.params())), None)

    def test_bad_sizes_refused(self, kind, params, size, width):
        enc = make_encoding(kind, **params)
        for bad in [(0, size[1]), (size[0], 0), (2.5, size[1])]:
            with pytest.raises((ValueError, TypeError)):
                enc.generate(*bad, rng=np.random.default_rng(0))

    def test_unknown_parameter_lists_valid_ones(self, kind, params, size, width):
        with pytest.raises(TypeError, match="valid parameters"):
            make_encoding(kind, **params, not_a_parameter=1)


def test_wrong_type_and_choice_messages():
    with pytest.raises(ValueError, match=r"layout.*one of 'interleaved', 'concatenated'.*'diagonal'"):
        make_encoding("sinusoidal", layout="diagonal")
    with pytest.raises(ValueError, match=r"sinusoidal: base must be a finite number, got '10000'"):
        make_encoding("sinusoidal", base="10000")
    with pytest.raises(ValueError, match="rotary_dim"):
        make_encoding("rotary", rotary_dim=7)
    # ints are accepted for floats and stored as float
    assert make_encoding("sinusoidal", base=100).base == 100.0


def test_stochastic_needs_rng():
    with pytest.raises(ValueError, match="rng"):
        make_encoding("random").generate(4, 4)


def test_labels():
    assert make_encoding("sinusoidal").label == "sinusoidal"
    assert make_encoding("rotary", rope_theta=500000, rotary_dim=128).label == "rotary(rope_theta=500000, rotary_dim=128)"
    assert make_encoding("learned", source="gpt2").label == "learned(source=gpt2)"
