"""The window flag of a label with seeds: its pooled profile at its nested windows, not any seed's flag."""

import math

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


SUMMARIES = ("band_width_0p9", "band_width_0p5", "e_folding_distance", "zero_crossing", "first_minimum",
             "integral_scale")


def _with_windows(tables, other=20.0):
    """The seeds' own window_sensitivity rows (each seed's profile summarised at its nested windows: what the pairs
    used to average) and an exact single label "sinusoidal" whose every summary is ``other`` at every window."""
    from poslab.analysis.summaries import profile_summaries
    from poslab.stages.window import nested_windows

    rows = []
    for seed, mine in tables["profiles"].groupby("seed"):
        for _, _, window in nested_windows(N, N - 1):
            cut = mine[mine["distance"] <= window]
            s = profile_summaries(cut["distance"].to_numpy(float), cut["mean_similarity"].to_numpy(float))
            rows += [{"label": LABEL, "seed": seed, "summary": name, "window": window, "value": value,
                      "status": status} for name, value, status in zip(s.names, s.values, s.status)]
    rows += [{"label": "sinusoidal", "seed": np.nan, "summary": name, "window": window, "value": other,
              "status": "ok"} for _, _, window in nested_windows(N, N - 1) for name in SUMMARIES]
    summary = tables["summary"]
    summary.loc[summary["label"] == "sinusoidal", list(SUMMARIES)] = other
    return tables | {"window_sensitivity": pd.DataFrame(rows)}


def test_a_pair_compares_the_values_comparison_csv_reports_for_a_label_with_seeds():
    """exp(-k / 8) with noise, 8 seeds, against an exact label at 20. The pair's value at the label's own window
    is comparison.csv's (the pooled profile's), and so is its status (in ``reason``); at the smaller windows the
    pooled profile cut there (its first distance below 0.5, counted here: 6 at every window). The pairs used to
    take the mean of the seeds' own window_sensitivity rows: a 1/e distance of 8.5 against comparison.csv's 8,
    a 0.9 width of 1.125 against 1, a zero crossing of 39 (every seed's, ok) against the pooled profile's
    within_noise."""
    tables = _with_windows(_tables(lambda k: np.exp(-k / 8), single=""))
    out = compare_runs(tables, _spec())
    mine = out["comparison"][out["comparison"]["label"] == LABEL].set_index("summary")
    pairs = out["comparison_pairs"].set_index("summary")
    assert set(pairs["window"]) == {N - 1} and set(pairs["windows"]) == {"31;63;127"}
    for name in SUMMARIES:
        value, status = mine.loc[name, ["value", "status"]]
        assert pairs.loc[name, "value"] == pytest.approx(value, nan_ok=True), name
        shown = {"ok": f"{value:g}", "within_noise": "noise"}.get(status, f"> {N - 1}")
        if name == "integral_scale" and status == "not_reached":
            shown = f"crossing > {N - 1}"
        assert f"127: {shown} vs 20" in pairs.loc[name, "reason"], name
    # the old mismatch: the mean of the seeds' own rows at the own window
    seeds = tables["window_sensitivity"]
    seeds = seeds[(seeds["label"] == LABEL) & (seeds["window"] == N - 1)].set_index(["summary", "seed"])
    assert seeds.loc["e_folding_distance", "value"].mean() == 8.5 and mine.loc["e_folding_distance", "value"] == 8
    assert seeds.loc["band_width_0p9", "value"].mean() == 1.125 and mine.loc["band_width_0p9", "value"] == 1
    assert set(seeds.loc["zero_crossing", "status"]) == {"ok"} and mine.loc["zero_crossing", "status"] == \
        "within_noise"
    # the smaller windows: the pooled profile (weighted by pairs) cut there, its first distance below 0.5
    profiles = tables["profiles"]
    pooled = (profiles["mean_similarity"] * profiles["n_pairs"]).groupby(profiles["distance"]).sum() \
        / profiles["n_pairs"].groupby(profiles["distance"]).sum()
    first = next(k for k in range(1, N) if pooled[k] < 0.5)
    assert f"31: {first} vs 20; 63: {first} vs 20; 127: {first} vs 20" in pairs.loc["band_width_0p5", "reason"]
    # its seed-bootstrap intervals are known at every window: the difference exceeds them at each
    assert pairs.loc["band_width_0p5", "verdict"] == "shorter"
    assert "exceeds its uncertainty at window(s) 31, 63, 127" in pairs.loc["band_width_0p5", "reason"]


def test_seed_resamples_beyond_the_window_leave_the_interval_open_above():
    """Known truth: 8 seeds 1 - (k / 120)² / 2 + δ (δ from -0.04 to 0.03): the pooled profile crosses 0.5 at 120,
    beyond its noise by distance 127 by little, so some seed resamples cross it within the noise or not at all
    (beyond the window). Counted here resample by resample (each resampled pooled profile summarised alone): more
    than 2.5 % of 200 lie beyond, so the 95 % interval is open above (low end the 2.5 % order statistic, high end
    empty), as the paired differences and the window flag count them. Left out (the old rule), they gave a
    closed interval biased low."""
    from poslab.analysis.bootstrap import AnchorBlocks, block_standard_errors, resample_units
    from poslab.analysis.summaries import profile_summaries

    k = np.arange(N)
    offsets = [-0.04, -0.03, -0.02, -0.01, 0.0, 0.01, 0.02, 0.03]
    means = np.array([np.where(k > 0, 1 - 0.5 * (k / 120) ** 2 + d, 1.0) for d in offsets])
    profiles = pd.concat([pd.DataFrame({"label": LABEL, "seed": seed, "distance": k, "mean_similarity": mean,
                                        "std_similarity": 0.1, "n_pairs": N - k})
                          for seed, mean in enumerate(means)], ignore_index=True)
    summary = pd.DataFrame([{"label": LABEL, "kind": "random", "seed": seed, "status": "ok", "n_positions": N,
                             "max_distance": N - 1, "window_dependent": ""} for seed in range(len(offsets))])
    spec = _spec()
    row = compare_runs({"summary": summary, "profiles": profiles}, spec)["comparison"].set_index("summary") \
        .loc["band_width_0p5"]
    # brute force: the same seed resamples (the label's generator), each summarised alone
    import zlib

    sums, counts = means * (N - k), np.tile(N - k, (len(offsets), 1)).astype(float)
    noise = {"noise_se": block_standard_errors(AnchorBlocks(sums, counts, 1)), "n_pairs": counts.sum(0),
             "crossing_z": spec.analysis.crossing_z}
    resampled, _ = resample_units(sums, counts, 200, np.random.default_rng(zlib.crc32(LABEL.encode())))
    values = []
    for profile in resampled:
        s = profile_summaries(k, profile, thresholds=spec.analysis.thresholds, **noise)
        j = s.names.index("band_width_0p5")
        values.append(np.inf if s.status[j] in ("not_reached", "within_noise") else s.values[j])
    values = np.sort(values)
    beyond = int(np.isinf(values).sum())
    assert 0.025 * 200 < beyond < 0.5 * 200
    low, high = values[math.ceil(0.025 * 200) - 1], values[math.ceil(0.975 * 200) - 1]  # inverted_cdf
    assert (row["value"], row["status"]) == (120, "ok")
    assert row["value_ci_low"] == low and np.isinf(high) and pd.isna(row["value_ci_high"])
    finite = values[np.isfinite(values)]  # the old rule: beyond ones left out, a closed interval
    assert finite[math.ceil(0.975 * finite.size) - 1] < N and finite[math.ceil(0.025 * finite.size) - 1] <= low
