"""T5's bucket rule: the issue's values, and transformers' own ``T5Attention._relative_position_bucket``."""

from __future__ import annotations

import numpy as np
import pytest

from poslab.encodings.t5_buckets import relative_position_bucket

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
from transformers.models.t5.modeling_t5 import T5Attention  # noqa: E402

BIDIRECTIONAL = {-1: 1, -8: 8, -16: 10, -32: 12, -64: 14, -128: 15, -129: 15, -1000: 15, 0: 0, 1: 17, 8: 24,
                 16: 26, 32: 28, 64: 30, 90: 30, 91: 31, 128: 31, 1000: 31}
CAUSAL = {-15: 15, -16: 16, -20: 17, -32: 21, -64: 26, -100: 30, -112: 30, -113: 31, -128: 31, -5000: 31, 0: 0, 1: 0,
          7: 0, 1000: 0}


@pytest.mark.parametrize("bidirectional, expected", [(True, BIDIRECTIONAL), (False, CAUSAL)], ids=["encoder", "decoder"])
def test_the_issues_values(bidirectional, expected):
    rel = np.array(list(expected))
    got = relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=32, max_distance=128)
    assert dict(zip(rel.tolist(), got.tolist())) == expected


# the published T5 configuration first, then others; every one within the rule's domain (max_distance > max_exact)
CONFIGS = [(32, 128), (64, 128), (32, 256), (128, 1024), (16, 64), (8, 32), (48, 100), (33, 77), (256, 2048)]


@pytest.mark.parametrize("num_buckets, max_distance", CONFIGS)
@pytest.mark.parametrize("bidirectional", [True, False], ids=["bidirectional", "causal"])
def test_equal_to_transformers_over_rel_in_minus_1000_to_1000(num_buckets, max_distance, bidirectional):
    rel = np.arange(-1000, 1001)
    theirs = T5Attention._relative_position_bucket(torch.tensor(rel), bidirectional=bidirectional,
                                                   num_buckets=num_buckets, max_distance=max_distance).numpy()
    ours = relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets,
                                    max_distance=max_distance)
    np.testing.assert_array_equal(ours, theirs)


def test_bidirectional_buckets_use_other_rows_for_keys_after_the_query():
    # the same rule on |rel|, offset by num_buckets // 2 for rel > 0: rel = +k and -k read different table rows,
    # so a learned table is not symmetric in general
    k = np.arange(1, 2000)
    np.testing.assert_array_equal(relative_position_bucket(k), relative_position_bucket(-k) + 16)
    assert relative_position_bucket(np.array([91, -91])).tolist() == [31, 15]


@pytest.mark.parametrize("bidirectional, num_buckets, max_distance, match", [
    (True, 32, 8, "must exceed the exact buckets"),
    (False, 32, 16, "must exceed the exact buckets"),
    (True, 2, 128, "too few"),
])
def test_a_rule_that_cannot_be_evaluated_is_refused(bidirectional, num_buckets, max_distance, match):
    # transformers divides by ln(max_distance / max_exact) <= 0 there and returns garbage buckets
    with pytest.raises(ValueError, match=match):
        relative_position_bucket(np.arange(-5, 5), bidirectional=bidirectional, num_buckets=num_buckets,
                                 max_distance=max_distance)


def test_non_integer_positions_are_refused():
    with pytest.raises(TypeError, match="integers"):
        relative_position_bucket(np.array([0.5]))
