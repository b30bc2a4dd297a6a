"""An exactly translation-invariant table has no sampling variability: its intervals are left empty with
ci_method "exact", and the console says "(exact)" instead of a confident-looking zero-width bracket
(issue 12 QA: `151.6 [151.6, 151.6]`)."""

import numpy as np
import pandas as pd
import pytest

from poslab.cli import _summary_text
from poslab.study import parse_study, run_study

SINUSOIDAL, NOISY = "sinusoidal", "smoothed_random(length_scale=4)"
# Sinusoidal and RoPE profiles follow a log law (no decay length) and fail the exact gate for single-scale
# models; these tests are about exact intervals, so they let the exponential through the gate.
LOOSE = {"models": ["exponential", "gaussian"], "fit_tolerance": 1.0}


@pytest.fixture(scope="module")
def result():
    spec = parse_study({"name": "exact", "n_positions": 128, "dim": 32, "seeds": [0],
                        "analysis": {"heatmap_bins": 8, "n_resamples": 40, **LOOSE},
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "smoothed_random", "length_scale": 4.0}]})
    return run_study(spec, progress=False, executor="serial")


def test_exact_runs_leave_their_intervals_empty_and_say_why(result):
    s = result.summary.set_index("label")
    intervals = [c for c in s.columns if c.endswith(("_ci_low", "_ci_high"))]
    assert "decay_length_ci_low" in intervals and any(c.startswith("band_width_") for c in intervals)
    assert s.loc[SINUSOIDAL, "ci_method"] == "exact" and np.isfinite(s.loc[SINUSOIDAL, "decay_length"])
    assert s.loc[SINUSOIDAL, intervals].isna().all()
    assert s.loc[NOISY, "ci_method"] == "anchor_block"  # estimated: a real interval
    assert s.loc[NOISY, "decay_length_ci_low"] < s.loc[NOISY, "decay_length_ci_high"]
    p = result.profiles
    band = p.loc[p["label"] == SINUSOIDAL, ["mean_similarity_ci_low", "mean_similarity_ci_high"]]
    assert band.isna().all().all()
    assert p.loc[p["label"] == NOISY, "mean_similarity_ci_low"].notna().any()
    boot = result.bootstrap  # no replicates of an exact run: each would repeat its estimates; the sampled run's stay
    assert not (boot["label"] == SINUSOIDAL).any()
    assert (boot.loc[boot["label"] == NOISY, "window"] == s.loc[NOISY, "max_distance"]).sum() == 40
    assert s.loc[SINUSOIDAL, "n_resamples"] == 0  # an exact run draws no resamples (QA report, item 3)


def test_comparison_keeps_exact_and_its_pairs_judge_against_the_estimated_interval(result):
    c = result.comparison
    mine = c[c["label"] == SINUSOIDAL]
    assert (mine["ci_method"] == "exact").all() and mine["value_ci_low"].isna().all()
    pair = result.comparison_pairs.set_index("summary").loc["band_width_0p5"]
    # exact against estimated: no interval of a difference (nothing to pair), the estimated label's interval decides
    assert pd.isna(pair["difference_ci_low"]) and pair["verdict"] != "not comparable", pair["reason"]


def test_console_prints_exact_not_a_zero_width_bracket(result):
    text = _summary_text(result.summary)

    def rows(label):  # the run's rows in every block of columns (long labels are numbered, the key above the table)
        key = next((line.split()[0] for line in text.splitlines() if line.split()[1:] == [label]), label)
        return " ".join(row for row in text.splitlines() if row.split()[:1] == [key] and row.split()[1:] != [label])

    line = rows(SINUSOIDAL)
    assert "(exact)" in line and "[" not in line
    noisy = rows(NOISY)
    assert "[" in noisy and "(exact)" not in noisy
    assert "(exact): the table is exactly translation invariant" in text
    assert "(exact)" not in _summary_text(result.summary[result.summary["label"] == NOISY])  # no footnote either


def test_a_study_of_exact_runs_only_keeps_its_interval_columns_empty():
    """The columns are the schema's whatever the runs: empty, never absent."""
    spec = parse_study({"name": "only", "n_positions": 64, "dim": 16, "analysis": {"heatmap_bins": 8, "n_resamples": 40, **LOOSE},
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "rotary", "rope_theta": 100.0}]})
    s = run_study(spec, progress=False, executor="serial").summary
    for col in ("decay_length_ci_low", "decay_length_ci_high", "band_width_0p5_ci_low", "band_width_0p5_ci_high"):
        assert col in s.columns and s[col].isna().all()
    assert (s["ci_method"] == "exact").all()


def test_two_exact_labels_get_no_zero_width_interval_of_their_difference():
    """Default study QA: rotary vs sinusoidal had difference_ci_low = difference_ci_high (constant replicates).
    Both exact (issue 13: model-free summaries): no interval of the difference; they differ wherever their
    summaries differ, at every common window."""
    spec = parse_study({"name": "two", "n_positions": 64, "dim": 16, "analysis": {"heatmap_bins": 8, "n_resamples": 40, **LOOSE},
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "rotary", "rope_theta": 100.0}]})
    result = run_study(spec, progress=False, executor="serial")
    pairs = result.comparison_pairs
    assert pairs["difference_ci_low"].isna().all() and pairs["difference_ci_high"].isna().all()
    differ = pairs[pairs["difference"].abs() > 0]
    assert len(differ) and (differ["verdict"].isin(["longer", "shorter", "window-dependent"])).all()
    assert differ["exceeds_uncertainty"].any() and set(pairs["windows"]) == {"15;31;63"}
