"""The first_minimum stage (the README's "Adding an analysis" example): its value, its column, its figure."""

import numpy as np
import pytest

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
def test_a_cosine_profile_has_its_first_minimum_at_half_its_period(period):
    out = run_stage("first_minimum", Table(_phase_pair(2 * np.pi / period, 256)), 256)
    assert out.summary["first_minimum"] == period // 2
    assert out.summary["first_minimum_similarity"] == pytest.approx(-1.0, abs=1e-12)


def test_no_rise_within_the_window_is_no_minimum_and_small_wiggles_do_not_count():
    falling = run_stage("first_minimum", Table(_phase_pair(np.pi / 500, 256)), 256)  # cos falls up to k = 500
    assert falling.summary["first_minimum"] is None
    wiggle = _phase_pair(2 * np.pi / 40, 256) * 0.1
    wiggle = np.concatenate([wiggle, np.ones((256, 1))], axis=1)  # profile (1 + 0.01 cos ωk) / 1.01: rises 0.02
    assert run_stage("first_minimum", Table(wiggle), 256).summary["first_minimum"] is None
    lenient = AnalysisOptions(min_rise=0.01)
    assert run_stage("first_minimum", Table(wiggle), 256, options=lenient).summary["first_minimum"] == 20


def test_the_study_column_and_figure():
    spec = parse_study({"name": "m", "n_positions": 128, "dim": 2, "analysis": {"n_resamples": 0},
                        "encodings": [{"kind": "rotary"}, {"kind": "rotary", "rope_type": "linear", "factor": 100.0}]})
    result = run_study(spec, progress=False, executor="serial")
    summary = result.summary.set_index("label")
    assert summary.loc["rotary", "first_minimum"] == 3  # 2 dims: one pair, θ_0 = 1, profile cos k: minimum at π
    assert summary["first_minimum"].isna().sum() == 1  # θ_0 = 1/100: cos(k/100) falls up to k = 314
    assert STUDY_FIGURES["first_minimum.png"](result.tables(), "m") is not None


def test_noise_is_no_minimum():
    from poslab.encodings import make_encoding

    out = run_stage("first_minimum", make_encoding("random"), 512, 64, seed=1)
    assert out.summary["first_minimum"] is None  # wiggles of a noise profile stay within its standard errors
