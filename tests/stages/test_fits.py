"""Issue 13, fits that must fit, through the study pipeline: the log law's slope beside its theory, the fit
range and its rule, the gate, the ci_level of the Wald intervals, the trained table's decay length."""

import math

import numpy as np
import pytest

from poslab.study import parse_study, run_study


@pytest.fixture(scope="module")
def result():
    spec = parse_study({"name": "fits", "n_positions": 512, "dim": 128, "seeds": [0],
                        "analysis": {"heatmap_bins": 8, "n_resamples": 40, "ci_level": 0.9},
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "rotary", "rope_theta": 500000.0},
                                      {"kind": "smoothed_random", "length_scale": 8.0},
                                      {"kind": "learned", "source": "trained-char-lm", "n_positions": 256}]})
    return run_study(spec, progress=False, executor="serial")


def test_sinusoidal_and_rotary_follow_a_log_law_of_slope_one_over_ln_base(result):
    s = result.summary.set_index("label")
    for label, base in [("sinusoidal", 10000.0), ("rotary(rope_theta=500000)", 500000.0)]:
        assert s.loc[label, "log_slope_theory"] == pytest.approx(1 / math.log(base))
        assert s.loc[label, "log_slope"] == pytest.approx(1 / math.log(base), rel=0.02)
        assert s.loc[label, "selected_model"] == "log_law" and np.isnan(s.loc[label, "decay_length"])
        assert "scale-free" in s.loc[label, "message"]
    assert np.isnan(s.loc["smoothed_random(length_scale=8)", "log_slope_theory"])


def test_fit_range_gate_and_level_are_recorded(result):
    m = result.decay_metrics
    noisy = m[(m["label"] == "smoothed_random(length_scale=8)") & (m["target"] == "profile")]
    assert set(noisy["fit_range_rule"]) == {"first_zero_crossing"} and set(noisy["gof_test"]) == {"noise"}
    best = noisy[noisy["selected"]].iloc[0]
    assert best["model"] == "gaussian" and best["ci_level"] == 0.9 and best["gof_p_value"] > 1e-3
    assert best["decay_length"] == pytest.approx(math.sqrt(4 * 8**2 + 1) - 1, rel=0.1)
    assert best["decay_length_ci_low"] < best["decay_length"] < best["decay_length_ci_high"]
    exact = m[(m["label"] == "sinusoidal") & (m["target"] == "profile")]
    assert set(exact["gof_test"]) == {"exact"} and set(exact["fit_range_rule"]) == {"window"}
    poor = exact[exact["status"] == "poor_fit"]
    assert len(poor) and poor["message"].str.contains("exact profile").all()
    s = result.summary.set_index("label")
    assert s.loc["smoothed_random(length_scale=8)", "block_length"] >= 512 // 32
    assert s.loc["smoothed_random(length_scale=8)", "interval_widening"] > 1


def test_no_ok_fit_fails_the_gate_and_the_trained_tables_decay_length_lies_before_its_zero_crossing(result):
    m = result.decay_metrics
    ok = m[m["status"] == "ok"]
    passes = (ok["misfit"] <= 0.1) | ((ok["gof_test"] == "noise") & (ok["gof_p_value"] >= 1e-3))
    assert len(ok) and passes.all()
    s = result.summary.set_index("label")
    trained = "learned(source=trained-char-lm)"
    length = s.loc[trained, "decay_length"]
    assert np.isnan(length) or 1 + length <= s.loc[trained, "fit_max_distance"] <= 86
