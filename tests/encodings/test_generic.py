"""Generic tests run over every built-in encoding: adding an encoding means adding one row here."""

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from poslab.encodings import Encoding, available_encodings, get_encoding_class, make_encoding
from poslab.testing import check_encoding, encoding_checks

# kind, example parameters, (n_positions, dim), expected table width
EXAMPLES = [
    ("sinusoidal", {"base": 10000.0, "layout": "concatenated", "spacing": "tensor2tensor"}, (33, 17), 17),
    ("learned", {"source": "whisper-tiny", "offset": 3}, (40, 999), 384),
    ("random", {"distribution": "uniform"}, (20, 12), 12),
    ("rotary", {"rope_theta": 500000.0, "rotary_dim": 16, "pairing": "half"}, (30, 64), 16),
    ("rotary", {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16, "rotary_dim": 8}, (30, 64), 8),
    ("smoothed_random", {"length_scale": 3.5}, (25, 6), 6),
    ("mrope", {"grid": "2x4x4", "mrope_section": "4,2,2", "layout": "interleaved", "rope_theta": 5e6}, (32, 16), 16),
    ("mrope", {"mrope_section": "2,3,3", "rotary_dim": 16, "pairing": "half"}, (30, 64), 16),
    ("axial_rope", {"grid": "2x3x5", "axes_dim": "4,6,6", "pairing": "half"}, (30, 64), 16),
    ("sincos2d", {"grid": "5x6", "base": 100.0}, (30, 16), 16),
    ("t5_buckets", {}, (40, 8), 0),
    ("xpos", {"rotary_dim": 16, "scale_base": 64.0}, (30, 64), 0),
    ("fire", {"weights": str(Path(__file__).resolve().parents[1] / "data" / "fire_example.npz")}, (30, 4), 0),
    ("alibi", {"n_heads": 12}, (40, 8), 0),
    ("alibi", {"n_heads": 3, "direction": "bidirectional", "alibi_bias_max": 6.0}, (20, 8), 0),
    ("kerple", {"variant": "log", "p": 1.5, "a": 0.3}, (30, 8), 0),
    ("kerple", {"variant": "power", "p": 0.2, "a": 1.5, "direction": "bidirectional"}, (30, 8), 0),
]


def test_every_builtin_has_a_row():
    builtin = {k for k, c in available_encodings().items() if c.__module__.startswith("poslab.")}
    assert builtin == {row[0] for row in EXAMPLES}


CHECKS = [check for kind, params, size, width in EXAMPLES
          for check in encoding_checks(get_encoding_class(kind), params, n_positions=size[0], dim=size[1],
                                       width=width)]


@pytest.mark.parametrize("check", CHECKS, ids=str)
def test_every_encoding_passes_the_conformance_suite(check):
    check()


def test_the_suite_reports_what_an_encoding_gets_wrong():
    @dataclasses.dataclass(frozen=True)
    class Unseeded(Encoding):
        kind = "unseeded"  # claims to be deterministic, draws from the generator anyway

        def _generate(self, n_positions, dim, rng):
            return rng.normal(size=(n_positions, dim))

    with pytest.raises(AssertionError, match="stochastic = False, but another seed gives another table"):
        check_encoding(Unseeded)

    @dataclasses.dataclass(frozen=True)
    class Talker(Encoding):
        kind = "talker"

        def _generate(self, n_positions, dim, rng):
            return np.cos(np.outer(np.arange(n_positions), np.arange(1, dim + 1) / dim))

        def run_info(self, n_positions):
            return {"extra": 1}

    with pytest.raises(AssertionError, match="defines run_info, which poslab no longer reads"):
        check_encoding(Talker)
    from poslab.encodings import register, unregister

    with pytest.warns(UserWarning, match="defines run_info, which poslab no longer reads"):
        register(Talker)
    unregister("talker")


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


FAST_PATH = [(kind, params, size) for kind, params, size, width in EXAMPLES
             if kind in ("sinusoidal", "rotary")] + [
    ("sinusoidal", {"layout": "concatenated"}, (300, 64)),  # even widths have the exact kernel
    ("sinusoidal", {"spacing": "tensor2tensor", "base": 500.0}, (257, 18)),
]


@pytest.mark.parametrize("kind, params, size", FAST_PATH, ids=str)
def test_the_fast_path_equals_the_table_path(kind, params, size):
    """Every rotary and sinusoidal row: the kernel's profile and heatmap equal the table's to 1e-12 (issue 14
    item 3); an odd-width sinusoidal table has no kernel (case C1: its rows' norms vary)."""
    from poslab.analysis import block_similarity, similarity_profile
    from poslab.analysis.heatmap import kernel_block_means

    enc, (n, dim) = make_encoding(kind, **params), size
    kernel = enc.kernel(n, n - 1, dim)
    if kind == "sinusoidal" and dim % 2:
        assert kernel is None
        return
    table = enc.generate(n, dim)
    profile = similarity_profile(table)
    assert kernel.scale == "cosine" and kernel.symmetric and kernel.heads == ("all",)
    np.testing.assert_allclose(kernel.profile(), profile.mean_similarity, rtol=0, atol=1e-12)
    u = table / np.linalg.norm(table, axis=1, keepdims=True)
    for k in (1, n // 3, n - 1):  # the diagonal itself, brute force
        np.testing.assert_allclose(kernel.profile()[k], np.mean(np.sum(u[:-k] * u[k:], axis=1)), rtol=0, atol=1e-12)
    bins = min(16, n)
    np.testing.assert_allclose(kernel_block_means(kernel, n, bins).mean_similarity,
                               block_similarity(table, bins=bins).mean_similarity, rtol=0, atol=1e-12)
    shorter = enc.kernel(n, n // 2, dim)  # a shorter window is the same kernel, cut
    np.testing.assert_allclose(shorter.profile(), kernel.profile()[:n // 2 + 1], rtol=0, atol=1e-14)
