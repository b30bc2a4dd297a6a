"""A table's columns are its declared ones whatever the settings and whichever stages applied (QA: with
n_resamples = 0 summary.csv lost its interval columns, so summary["decay_length_ci_low"] raised KeyError)."""

import warnings

import pytest

from poslab.stages import SUMMARY, TABLES
from poslab.stages.schema import declared_names
from poslab.study import parse_study, run_study
from poslab.study.results import read_results, write_results

BASE = {"name": "cols", "n_positions": 64, "dim": 16, "seeds": [1]}
NOISY = {"kind": "smoothed_random", "length_scale": 4.0}


def _run(analysis, encodings=(NOISY,)):
    with warnings.catch_warnings():  # n_resamples = 5: "too few ... n_resamples = 0 is used"
        warnings.simplefilter("ignore")
        spec = parse_study(BASE | {"analysis": {"heatmap_bins": 8} | analysis, "encodings": list(encodings)})
        return run_study(spec, progress=False, executor="serial")


INTERVALS = ["decay_length_ci_low", "decay_length_ci_high", "band_width_0p5_ci_low", "band_width_0p5_ci_high"]


@pytest.mark.parametrize("analysis", [{"n_resamples": 0}, {"n_resamples": 5}],  # 5 < min for 0.95: coerced to 0
                         ids=["none", "too-few"])
def test_no_bootstrap_keeps_every_summary_column_empty(analysis, tmp_path):
    with_intervals = _run({"n_resamples": 40})
    result = _run(analysis)
    s = result.summary
    assert list(s.columns) == list(with_intervals.summary.columns)
    assert (s["ci_method"] == "none").all() and s[INTERVALS + ["block_length", "n_failed_refits"]].isna().all().all()
    folder = tmp_path / "out"
    write_results(result, folder)
    assert s.columns.equals(read_results(folder)["summary"].columns)


def test_columns_do_not_depend_on_models_or_on_which_stages_applied():
    """decay_metrics keeps every model's parameter columns; a study without rotary or learned runs keeps their
    summary columns (empty); a table nobody filled keeps its header."""
    few = _run({"n_resamples": 0, "models": ["exponential"]})
    assert {"sigma", "exponent_se", "period_ci_high", "stretch"} <= set(few.decay_metrics.columns)
    assert few.decay_metrics["sigma"].isna().all()
    s = few.summary
    for col in ("effective_rope_type", "rope_length", "rope_factors", "tensor", "not_applicable", "source_repo"):
        assert col in s.columns and (s[col].isna() | s[col].eq("")).all(), col
    names = declared_names(SUMMARY, ["length_scale"], few.spec.analysis)
    assert sorted(s.columns) == sorted(names)
    mixed = _run({"n_resamples": 0}, [NOISY, {"kind": "rotary", "rope_theta": 100.0}])
    assert set(mixed.summary.columns) - set(s.columns) == set(mixed.spec.encodings[1].params())
    for name in TABLES:
        if name in few.frames and not name.startswith("comparison"):
            assert set(declared_names(TABLES[name], ["length_scale"] if TABLES[name].keys == "run" else (),
                                      few.spec.analysis)) == set(few.frames[name].columns), name
