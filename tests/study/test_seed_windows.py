"""The window flag of a label with seeds: its pooled profile at its nested windows, not any seed's flag."""

import numpy as np
import pandas as pd
import pytest

from poslab.study import load_study, run_study
from poslab.study.comparison import compare_runs
from poslab.study.spec import parse_study

N = 128  # positions: nested windows up to distances 31, 63 and 127
LABEL = "random"


def _spec(n_resamples=200):
    return parse_study({"name": "seedwin", "n_positions": N, "dim": 16, "seeds": [0, 1],
                        "analysis": {"models": ["exponential"], "n_resamples": n_resamples},
                        "encodings": [{"kind": "random"}]})


def _tables(shape, n_seeds=8, flags=None, single=None):
    """summary and profiles rows of one label with ``n_seeds`` seeds whose profiles are ``shape`` plus noise
    (0.01 per seed and distance), each seed's summary.csv flagging ``flags[seed]``; ``single``: another label's
    one run with that window_dependent."""
    k = np.arange(N)
    summary, profiles = [], []
    for seed in range(n_seeds):
        mean = shape(k) + np.where(k > 0, np.random.default_rng(seed).normal(0, 0.01, N), 0.0)
        profiles.append(pd.DataFrame({"label": LABEL, "seed": seed, "distance": k, "mean_similarity": mean,
                                      "std_similarity": 0.1, "n_pairs": N - k}))
        summary.append({"label": LABEL, "kind": "random", "seed": seed, "status": "ok", "n_positions": N,
                        "max_distance": N - 1, "window_dependent": (flags or {}).get(seed, "")})
    if single is not None:
        summary.append({"label": "sinusoidal", "kind": "sinusoidal", "seed": np.nan, "status": "ok",
                        "n_positions": N, "max_distance": N - 1, "window_dependent": single,
                        "band_width_0p5": 20.0, "ci_method": "exact"})
    return {"summary": pd.DataFrame(summary), "profiles": pd.concat(profiles, ignore_index=True)}


def _flags(comparison, label=LABEL):
    rows = comparison[(comparison["label"] == label) & (comparison["summary"] != "decay_length")]
    return {r.summary for r in rows.itertuples() if r.window_dependent == "yes"}


def test_seeds_flagged_alone_do_not_flag_a_pooled_profile_that_does_not_move():
    """An exponential profile exp(-k / 8) (the same at every window): two seeds' own flags (false, as each
    seed's 5 % test at some rate is) no longer make the label "yes"; its pooled summaries do not move."""
    tables = _tables(lambda k: np.exp(-k / 8), flags={0: "e_folding_distance;zero_crossing", 3: "band_width_0p5"},
                     single="band_width_0p5")
    comparison = compare_runs(tables, _spec())["comparison"]
    assert _flags(comparison) == set()
    assert _flags(comparison, "sinusoidal") == {"band_width_0p5"}  # a single run keeps its own flag
    rows = comparison[comparison["label"] == LABEL].set_index("summary")
    assert rows.loc["band_width_0p5", ["value", "status"]].tolist() == [6, "ok"]  # exp(-6/8) = 0.47 < 0.5


@pytest.mark.parametrize("n_resamples", [200, 0])
def test_a_pooled_profile_that_is_a_number_at_a_quarter_and_rising_at_the_whole_window_is_flagged(n_resamples):
    """Known truth: the seeds decay as exp(-k / 4) up to distance 40, then rise to 0.8 from distance 64 on. At a
    quarter of the window (distances up to 31) the band widths and the 1/e distance are numbers (1, 3, 4-5, every
    seed resample alike: intervals closed above); over the half window the profile is ``rising`` (the mean of
    its second half exceeds its first half's by more than min_rise) and over the whole window ``flat`` (S(1)
    lies within min_rise of the median, which the plateau sets), so no summary is a number there. What the
    label reports depends on the window; the crossing at 0 is a number at no window (not flagged). Without
    resamples (n_resamples = 0) the tolerances alone decide, as for an exact run."""
    shape = lambda k: np.where(k <= 40, np.exp(-k / 4), np.clip(0.8 * (k - 40) / 24, 0, 0.8))  # noqa: E731
    comparison = compare_runs(_tables(shape), _spec(n_resamples))["comparison"]
    assert _flags(comparison) == {"band_width_0p9", "band_width_0p5", "e_folding_distance"}
    rows = comparison[(comparison["label"] == LABEL) & (comparison["summary"] != "decay_length")]
    assert set(rows["status"]) == {"flat"}  # at its own window


@pytest.mark.slow
def test_null_model_with_30_seeds_is_not_flagged(tmp_path):
    """The null model (smoothed_random sigma 16, 1024 positions, dim 128, 30 seeds; /work/scratch/nullwin):
    E[S] does not depend on the window, and its pooled profile does not move between a quarter, half and all of
    it. Each seed alone is flagged rarely (1-2 of 30 per summary); any seed's flag made the label "yes" for three
    summaries. About 15 s."""
    spec = parse_study({"name": "nullwin", "n_positions": 1024, "dim": 128, "seeds": list(range(30)),
                        "encodings": [{"kind": "smoothed_random", "length_scale": 16.0}]})
    result = run_study(spec, progress=False)
    per_seed = result.summary["window_dependent"].fillna("").str.split(";").explode()
    assert per_seed[per_seed != ""].value_counts().max() <= 5  # each seed's own test: rare
    assert _flags(result.comparison, "smoothed_random(length_scale=16)") == set()
