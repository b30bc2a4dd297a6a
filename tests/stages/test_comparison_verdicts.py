"""comparison_pairs.csv: every verdict says its true reason (issue 12 QA: random vs another window said "different windows")."""

import math

import pytest

from poslab.study import parse_study, run_study
from poslab.study.comparison import pair_verdict

NAN = math.nan


def _row(label, length, window=255, fit_se=1.0, why="", no_interval=""):
    return {"label": label, "decay_length": length, "max_distance": window, "fit_se": fit_se, "why": why,
            "no_interval": no_interval}


CASES = [
    # same window, both measured
    ("longer", "both lie above 0", _row("a", 20.0), _row("b", 10.0), (5.0, 15.0), (6.0, 14.0)),
    ("shorter", "both lie below 0", _row("a", 10.0), _row("b", 20.0), (-15.0, -5.0), (-14.0, -6.0)),
    ("not distinguishable", "the fit interval of the difference includes 0", _row("a", 11.0), _row("b", 10.0),
     (0.5, 1.5), (-2.0, 4.0)),
    ("not distinguishable", "the bootstrap and the fit interval of the difference both include 0",
     _row("a", 11.0), _row("b", 10.0), (-1.0, 3.0), (-2.0, 4.0)),
    # different windows, both measured
    ("different windows", "analysed up to distance 255 and 127", _row("a", 20.0), _row("b", 10.0, window=127),
     (5.0, 15.0), (6.0, 14.0)),
    # one side has no decay length: not comparable, whatever the windows
    ("not comparable", "random has no decay length (no decay model accepted: flat for every model)",
     _row("a", 20.0), _row("random", NAN, window=127, why="no decay model accepted: flat for every model"),
     (NAN, NAN), (NAN, NAN)),
    ("not comparable", "random has no decay length", _row("random", NAN, why="x"), _row("b", 10.0), (NAN, NAN),
     (NAN, NAN)),
    # not reached within the window: the decay length lies beyond the fitted distances
    ("not comparable", "long has no decay length (no decay model accepted: out_of_range for every model)",
     _row("long", NAN, why="no decay model accepted: out_of_range for every model"), _row("b", 10.0),
     (NAN, NAN), (NAN, NAN)),
    # both measured, same window, but an interval is missing
    ("not comparable", "no bootstrap interval of the difference (a: no bootstrap (n_resamples = 0))",
     _row("a", 20.0, no_interval="no bootstrap (n_resamples = 0)"), _row("b", 10.0), (NAN, NAN), (6.0, 14.0)),
    ("not comparable", "no standard error of the decay length of b", _row("a", 20.0), _row("b", 10.0, fit_se=NAN),
     (5.0, 15.0), (NAN, NAN)),
]


@pytest.mark.parametrize("verdict, reason, a, b, boot, fit", CASES)
def test_each_verdict_says_its_true_reason(verdict, reason, a, b, boot, fit):
    got, why = pair_verdict(a, b, difference_ci=boot, fit_difference_ci=fit)
    assert got == verdict and reason in why, (got, why)


def test_random_against_another_window_is_not_comparable_with_the_reason():
    """Random tables have no decay length: "different windows" was the wrong reason."""
    spec = parse_study({"name": "v", "n_positions": 128, "dim": 16, "seeds": [0],
                        "analysis": {"heatmap_bins": 8, "n_resamples": 40},
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "sinusoidal", "base": 50.0},
                                      {"kind": "random", "n_positions": 64}]})
    pairs = run_study(spec, progress=False, executor="serial").comparison_pairs
    rows = pairs[(pairs["label"] == "random") | (pairs["other_label"] == "random")]
    assert len(rows) == 2
    assert (rows["verdict"] == "not comparable").all(), rows[["verdict", "reason"]]
    assert rows["reason"].str.startswith("random has no decay length (no decay model accepted: flat").all()
    same = pairs[(pairs["label"] != "random") & (pairs["other_label"] != "random")].iloc[0]
    assert same["verdict"] in ("longer", "shorter", "not distinguishable") and same["reason"]


def _exact(label, length, fit_se=1.0):
    return _row(label, length, fit_se=fit_se) | {"ci_method": "exact"}


@pytest.mark.parametrize("verdict, reason, a, b, fit", [
    ("longer", "both are exact (no sampling variability, no bootstrap interval): the fit interval of the difference "
     "lies above 0", _exact("a", 20.0), _exact("b", 10.0), (6.0, 14.0)),
    ("shorter", "lies below 0", _exact("a", 10.0), _exact("b", 20.0), (-14.0, -6.0)),
    ("not distinguishable", "the fit interval of the difference includes 0", _exact("a", 11.0), _exact("b", 10.0),
     (-2.0, 4.0)),
    ("not comparable", "no standard error of the decay length of b", _exact("a", 20.0), _exact("b", 10.0, NAN),
     (NAN, NAN)),
])
def test_two_exact_labels_need_no_bootstrap_interval(verdict, reason, a, b, fit):
    """No sampling variability on either side: no (zero-width) bootstrap interval, the fit interval decides."""
    got = pair_verdict(a, b, difference_ci=(NAN, NAN), fit_difference_ci=fit)
    assert got[0] == verdict and reason in got[1]
    # one exact side against an estimated one still needs the bootstrap interval
    assert pair_verdict(a, _row("b", b["decay_length"]), difference_ci=(NAN, NAN),
                        fit_difference_ci=fit)[0] == "not comparable"
