"""Make poslab's shipped SYNTHETIC T5 bias table, ``src/poslab/data/t5_small_synthetic_relative_attention_bias.npy``.

Not a real checkpoint: no T5 checkpoint can be downloaded where poslab is built, so the table is
made from t5-small's published configuration (google-t5/t5-small config.json:
relative_attention_num_buckets 32, relative_attention_max_distance 128, num_heads 8; the encoder,
so bidirectional buckets) and a documented synthetic bias. Each bucket gets the bias of its
representative relative position r (key − query): the r of smallest |r| that falls in the bucket
(the bucket's nearest edge). Bucket 16 (rel > 0 with |rel| = 0) is never used by the
bidirectional rule and is 0. Eight heads, with d = |r|:

    h0  local:           -1.5 ln(1 + d)
    h1  previous token:  -1.0 ln(1 + d) + 2 [r = -1]
    h2  next token:      -1.0 ln(1 + d) + 2 [r = +1]
    h3  local window:    -0.75 ln(1 + d / 4)
    h4  broad:           -0.4 ln(1 + d / 16)
    h5  nearly flat:     -0.1 ln(1 + d / 64)
    h6  avoids itself:   -0.5 ln(1 + d / 8) - 1.5 [r = 0]
    h7  looks back:      -0.5 ln(1 + d / 8) - 0.3 [r > 0] ln(1 + d)

Deterministic (no random numbers); stored as float32 (T5 checkpoints store float32).

    python scripts/make_t5_synthetic_bias.py [OUT.npy]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from poslab.encodings.t5_buckets import relative_position_bucket

NUM_BUCKETS, MAX_DISTANCE, N_HEADS = 32, 128, 8
OUT = Path(__file__).resolve().parents[1] / "src/poslab/data/t5_small_synthetic_relative_attention_bias.npy"


def representatives() -> dict[int, int]:
    """bucket -> the relative position of smallest |rel| in it (ties cannot occur: a bucket has one sign)."""
    rel = np.arange(-4 * MAX_DISTANCE, 4 * MAX_DISTANCE + 1)
    buckets = relative_position_bucket(rel, bidirectional=True, num_buckets=NUM_BUCKETS, max_distance=MAX_DISTANCE)
    out = {}
    for r in sorted(rel, key=abs):
        out.setdefault(int(buckets[r + 4 * MAX_DISTANCE]), int(r))
    return out


def head_biases(r: int) -> list[float]:
    d = abs(r)
    return [
        -1.5 * np.log1p(d),
        -1.0 * np.log1p(d) + 2.0 * (r == -1),
        -1.0 * np.log1p(d) + 2.0 * (r == 1),
        -0.75 * np.log1p(d / 4),
        -0.4 * np.log1p(d / 16),
        -0.1 * np.log1p(d / 64),
        -0.5 * np.log1p(d / 8) - 1.5 * (r == 0),
        -0.5 * np.log1p(d / 8) - 0.3 * (r > 0) * np.log1p(d),
    ]


def make() -> np.ndarray:
    table = np.zeros((NUM_BUCKETS, N_HEADS), dtype=np.float64)
    for bucket, r in representatives().items():
        table[bucket] = head_biases(r)
    return (table + 0.0).astype(np.float32)  # + 0.0 turns -0.0 into 0.0


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    np.save(out, make())
    print(out)
