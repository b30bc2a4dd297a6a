"""FIRE: the weights file, the bias against the formula computed by torch, the query position."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from poslab.encodings import ParameterError, make_encoding
from poslab.encodings.fire import FIRE_ARRAYS, Fire, fire_bias, read_fire_weights

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "fire_example.npz"


def make_example() -> dict[str, np.ndarray]:
    """FIRE at its initialisation (width 32, 4 heads, c 0.1, L 512), PyTorch's Linear init drawn with numpy, seed 0."""
    rng = np.random.default_rng(0)
    out = {"mlp.0.weight": rng.uniform(-1, 1, (32, 1)), "mlp.0.bias": rng.uniform(-1, 1, 32),
           "mlp.2.weight": rng.uniform(-1, 1, (4, 32)) / np.sqrt(32), "mlp.2.bias": rng.uniform(-1, 1, 4) / np.sqrt(32),
           "c": np.array(0.1), "init_L": np.array(512.0), "L_multiplier": np.array(1.0)}
    return {k: v.astype(np.float32) for k, v in out.items()}


def test_the_example_file_is_what_make_example_writes():
    with np.load(EXAMPLE) as npz:
        assert sorted(npz.files) == sorted(FIRE_ARRAYS)
        for k, v in make_example().items():
            np.testing.assert_array_equal(npz[k], v)


def test_equal_to_the_formula_computed_by_torch(tmp_path):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(1, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).double()
    c, init_L, mult = torch.tensor(0.3, dtype=torch.float64), torch.tensor(40.0, dtype=torch.float64), \
        torch.tensor(1.5, dtype=torch.float64)
    n = 200  # beyond L = 60: the normaliser grows with the query
    pos = torch.arange(n, dtype=torch.float64)
    rel = pos[:, None] - pos[None, :]  # query - key, as Li et al. and the mcleish7/arithmetic port
    norm = torch.log(torch.abs(c * torch.max(pos, torch.abs(mult * init_L))[:, None]) + 1)
    x = torch.log(torch.abs(c * rel) + 1) / (norm + 1e-6)
    with torch.no_grad():
        theirs = mlp(x.unsqueeze(-1)).permute(2, 0, 1).numpy()
    state = {f"mlp.{k}": v.detach().numpy() for k, v in mlp.state_dict().items()}
    np.savez(tmp_path / "fire.npz", **state, c=c.numpy(), init_L=init_L.numpy(), L_multiplier=mult.numpy())
    w = read_fire_weights(tmp_path / "fire.npz")
    assert w.threshold == 60.0 and w.n_heads == 3
    np.testing.assert_allclose(fire_bias(w, np.arange(n), np.arange(n)), theirs, rtol=1e-12, atol=1e-12)
    enc = Fire(weights=str(tmp_path / "fire.npz"))
    np.testing.assert_allclose(enc.bias_by_distance(n, n - 1), theirs[:, n - 1, ::-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Fire(weights=str(tmp_path / "fire.npz"), query_position=50).bias_by_distance(n, 50),
                               theirs[:, 50, 50::-1], rtol=1e-12, atol=1e-12)


def test_translation_invariant_up_to_the_threshold():
    w = read_fire_weights(EXAMPLE)  # L = 512
    b = fire_bias(w, np.arange(600), np.arange(600))
    k = 100
    within = [b[:, i, i - k] for i in range(k, 513)]
    beyond = [b[:, i, i - k] for i in (513, 599)]
    assert all(np.array_equal(v, within[0]) for v in within)
    assert not np.allclose(beyond[0], beyond[1])


def test_bad_weights_and_windows_are_refused(tmp_path):
    with pytest.raises(ParameterError, match="weights is required"):
        make_encoding("fire")
    with pytest.raises(ParameterError, match="does not exist"):
        Fire(weights=str(tmp_path / "nope.npz"))
    good = make_example()
    np.savez(tmp_path / "extra.npz", **good, scale=np.array(2.0))
    with pytest.raises(ParameterError, match="not understood: scale"):
        Fire(weights=str(tmp_path / "extra.npz"))
    bad = {**good, "c": np.array(-1.0)}
    np.savez(tmp_path / "c.npz", **bad)
    with pytest.raises(ParameterError, match="needs c > 0"):
        Fire(weights=str(tmp_path / "c.npz"))
    bad = {**good, "mlp.2.weight": np.zeros((4, 31))}
    np.savez(tmp_path / "shape.npz", **bad)
    with pytest.raises(ParameterError, match=r"expected \(width, 1\)"):
        Fire(weights=str(tmp_path / "shape.npz"))
    enc = Fire(weights=str(EXAMPLE), query_position=10)
    with pytest.raises(ValueError, match="lies outside the window"):
        enc.check_size(8, 4)
    with pytest.raises(ValueError, match="reaches past position 0"):
        enc.bias_by_distance(20, 11)


def test_the_kernel_is_the_attention_prior_at_the_stated_query():
    enc = Fire(weights=str(EXAMPLE), query_position=600)
    kernel = enc.kernel(700, 300, 1)
    b = fire_bias(read_fire_weights(EXAMPLE), [600], 600 - np.arange(301))[:, 0, :]
    assert (kernel.scale, kernel.direction, kernel.heads) == ("attention_prior", "causal", ("0", "1", "2", "3"))
    np.testing.assert_allclose(kernel.backward, np.exp(b - b[:, :1]), rtol=1e-15)
    assert Fire(weights=str(EXAMPLE)).kernel(700, 300, 1) is not None  # the last query, 699
    assert Fire(weights=str(EXAMPLE)).invariant_within(513) and not Fire(weights=str(EXAMPLE)).invariant_within(514)


def test_a_query_position_before_max_distance_is_refused_when_the_study_is_read(tmp_path):
    """Issue 15 leftover: query_position < the run's max_distance failed at run time; the study is now refused
    when read, naming the entry, both values and the fix."""
    from poslab.study import StudyError, parse_study

    study = {"name": "f", "n_positions": 64, "dim": 8, "encodings": [
        {"kind": "sinusoidal"}, {"kind": "fire", "weights": str(EXAMPLE), "query_position": 20}]}
    with pytest.raises(StudyError, match=r"\[\[encodings\]\] entry 2 \(kind = 'fire'\): query_position = 20 and "
                                         r"max_distance = 63: .* give query_position >= 63 \(or leave it out: the "
                                         r"last position, 63\), or max_distance <= 20"):
        parse_study(study)
    parse_study({**study, "max_distance": 20})  # the window the query can give
    parse_study({**study, "encodings": [{"kind": "fire", "weights": str(EXAMPLE), "query_position": 20,
                                         "n_positions": 21}]})  # a window of its own: max_distance 20
    Fire(weights=str(EXAMPLE), query_position=20).check_size(64, 8)  # without a distance: only the window
    with pytest.raises(ValueError, match="query_position = 20 and max_distance = 21"):
        Fire(weights=str(EXAMPLE), query_position=20).check_size(64, 8, max_distance=21)
