"""The first minimum (folded into the summaries stage, issue 13): its value, its column, its figure."""

import numpy as np
import pandas as pd
import pytest

from poslab.encodings import make_encoding
from poslab.plots import STUDY_FIGURES
from poslab.stages import AnalysisOptions, run_stage
from poslab.study import parse_study, run_study


def _phase_pair(omega, n):
    """Rows (cos ωm, sin ωm): the profile is exactly cos(ωk)."""
    m = np.arange(n)
    return np.stack([np.cos(omega * m), np.sin(omega * m)], axis=1)


class Table:
    """A fixed table as an encoding, for run_stage."""

    kind, stochastic = "table", False

    def __init__(self, table):
        self.table = table

    def generate(self, n_positions, dim, rng=None):
        return self.table[:n_positions]


@pytest.mark.parametrize("period", [40, 64, 200])
def test_a_cosine_profile_oscillates_without_decay_so_it_has_no_first_minimum_number(period):
    """Issue 13: a cosine that does not decay gets a status, never a number (it would say where a period falls)."""
    out = run_stage("summaries", Table(_phase_pair(2 * np.pi / period, 256)), 256)
    assert out.summary["first_minimum"] is None and np.isnan(out.summary["first_minimum_similarity"])
    assert out.summary["summary_notes"].startswith("every summary: no_decay (S oscillates without decaying")


@pytest.mark.parametrize("period", [40, 64])
def test_a_cosine_that_falls_off_has_its_first_minimum_at_half_its_period(period):
    # a cosine pair beside unit rows of a smooth random process: S = (cos ωk + c(k)) / 2 falls to cos(ωk) / 2
    smooth = make_encoding("smoothed_random", length_scale=4.0).generate(256, 256, rng=np.random.default_rng(0))
    table = np.concatenate([_phase_pair(2 * np.pi / period, 256),
                            smooth / np.linalg.norm(smooth, axis=1, keepdims=True)], axis=1)
    out = run_stage("summaries", Table(table), 256)
    assert abs(out.summary["first_minimum"] - period // 2) <= 2
    assert out.summary["first_minimum_depth"] > 0.05


def test_no_rise_within_the_window_is_no_minimum_and_small_wiggles_do_not_count():
    falling = run_stage("summaries", Table(_phase_pair(np.pi / 500, 256)), 256)  # cos falls up to k = 500
    assert falling.summary["first_minimum"] is None
    assert "first_minimum: not_reached" in falling.summary["summary_notes"]
    wiggle = _phase_pair(2 * np.pi / 40, 256) * 0.1
    wiggle = np.concatenate([wiggle, np.ones((256, 1))], axis=1)  # profile (1 + 0.01 cos ωk) / 1.01: rises 0.02
    assert run_stage("summaries", Table(wiggle), 256).summary["first_minimum"] is None
    lenient = AnalysisOptions(min_rise=0.01)  # the same tolerance makes a profile that varies by 0.02 flat
    assert run_stage("summaries", Table(wiggle), 256, options=lenient).summary["summary_notes"].startswith(
        "every summary: flat")


def test_the_study_column_and_figure():
    spec = parse_study({"name": "m", "n_positions": 128, "dim": 2, "analysis": {"n_resamples": 0},
                        "encodings": [{"kind": "rotary"}, {"kind": "rotary", "rope_type": "linear", "factor": 100.0}]})
    result = run_study(spec, progress=False, executor="serial")
    summary = result.summary.set_index("label")
    # 2 dims: one pair, θ_0 = 1, profile cos k: oscillates without decay, no number
    assert pd.isna(summary.loc["rotary", "first_minimum"])
    assert summary.loc["rotary", "summary_notes"].startswith("every summary: no_decay")
    # θ_0 = 1/100: cos(k/100) falls up to k = 314, beyond the window
    assert pd.isna(summary.loc[summary.index != "rotary", "first_minimum"]).all()
    assert STUDY_FIGURES["first_minimum.png"](result.tables(), "m") is None  # no run has one

    spec = parse_study({"name": "m", "n_positions": 256, "dim": 64, "analysis": {"n_resamples": 0},
                        "encodings": [{"kind": "sinusoidal"}]})
    result = run_study(spec, progress=False, executor="serial")
    assert result.summary["first_minimum"].iloc[0] == 22  # a ripple of the cosine sum (exact profile)
    fig = STUDY_FIGURES["first_minimum.png"](result.tables(), "m")
    assert fig is not None


def test_a_ripple_is_marked_apart_from_a_trough():
    """An exact cosine sum's first minimum (sinusoidal, RoPE) is a ripple, not a length scale: the figure marks it
    with a circle and says so in its legend, the console prints "(ripple, depth)", as comparison_pairs.csv says;
    a sampled table's trough keeps the triangle (ripple_depth: one rule for all three)."""
    from poslab.cli import _summary_text
    from poslab.stages.bands import ripple_depth

    spec = parse_study({"name": "m", "n_positions": 256, "dim": 64, "seeds": [0], "analysis": {"n_resamples": 40},
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "smoothed_random", "length_scale": 6.0}]})
    result = run_study(spec, progress=False, executor="serial")
    rows = {r["label"]: r for _, r in result.summary.iterrows()}
    sin = rows["sinusoidal"]
    assert sin["ci_method"] == "exact" and ripple_depth(sin) == pytest.approx(sin["first_minimum_depth"])
    assert ripple_depth({**sin, "kernel": "alibi"}) is None  # a relative-bias kernel's dip is no cosine sum
    assert ripple_depth({**sin, "ci_method": "none"}) == ripple_depth(sin)  # a kernel run without resamples
    assert ripple_depth({**sin, "ci_method": "anchor_block", "profile_method": "table"}) is None
    assert f"22 (ripple, {sin['first_minimum_depth']:.2f})" in _summary_text(result.summary)
    fig = STUDY_FIGURES["first_minimum.png"](result.tables(), "m")
    ax = fig.axes[0]
    markers = {line.get_marker() for line in ax.lines if len(line.get_xdata()) == 1}
    labels = [t.get_text() for legend in fig.legends + [ax.get_legend()] if legend for t in legend.get_texts()]
    assert "o" in markers and any("ripple" in t for t in labels)
    smooth = next(r for label, r in rows.items() if label != "sinusoidal")
    if pd.notna(smooth["first_minimum"]):  # a sampled trough, when it has one, is a triangle
        assert "v" in markers and "first minimum" in labels


def test_noise_is_no_minimum():
    from poslab.encodings import make_encoding

    out = run_stage("summaries", make_encoding("random"), 512, 64, seed=1)
    assert out.summary["first_minimum"] is None  # a noise profile is flat: no summary is a number
    assert out.summary["summary_notes"].startswith("every summary: flat")
    table = make_encoding("smoothed_random", length_scale=20.0).generate(512, 64, rng=np.random.default_rng(1))
    out = run_stage("summaries", Table(table), 512)
    assert out.summary["first_minimum"] is None  # wiggles of a noisy tail stay within its standard errors
