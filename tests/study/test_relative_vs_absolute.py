"""studies/relative_vs_absolute.toml: its runs, and the numbers the README reads off it, from the kernels alone."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from poslab.study import load_study

STUDY = Path(__file__).resolve().parents[2] / "studies" / "relative_vs_absolute.toml"


def _first_below(values, level):
    return int(np.flatnonzero(values < level)[0])


def test_the_study_and_the_readmes_numbers():
    spec = load_study(STUDY)
    runs = {enc.label: enc for enc in spec.encodings}
    assert list(runs) == ["learned(source=gpt2)", "sinusoidal", "rotary(rotary_dim=128)", "xpos(rotary_dim=128)",
                          "t5_buckets", "alibi(n_heads=8)", "alibi(n_heads=12)", "alibi(n_heads=16)", "kerple"]
    n, dim = spec.n_positions, spec.dim
    k = {label: enc.kernel(n, n - 1, dim) for label, enc in runs.items() if label != "learned(source=gpt2)"}
    alibi = {h: k[f"alibi(n_heads={h})"].profile() for h in (8, 12, 16)}
    assert [_first_below(alibi[h], 0.5) for h in (8, 12, 16)] == [14, 7, 12]  # 12 heads: four steep heads added
    t5 = k["t5_buckets"]
    assert (t5.forward[:, 91:] == t5.forward[:, [91]]).all() and (t5.backward[:, 91:] == t5.backward[:, [91]]).all()
    assert t5.profile()[91] == t5.profile()[-1] and round(float(t5.profile()[-1]), 3) == 0.369
    assert round(float(t5.backward[1, 1]), 2) == 3.69 and round(float(t5.forward[1, 1]), 2) == 0.50
    xpos, rope = k["xpos(rotary_dim=128)"].profile(), k["rotary(rotary_dim=128)"].profile()
    for level in (0.9, 0.5, 1 / np.e):
        assert _first_below(xpos, level) == _first_below(rope, level)
    assert (k["xpos(rotary_dim=128)"].scale, k["rotary(rotary_dim=128)"].scale) == ("score", "cosine")
    assert round(float(xpos[-1]), 3) == 0.168 and round(float(rope[-1]), 3) == 0.191
    assert _first_below(k["kerple"].profile(), 0.5) == 2
