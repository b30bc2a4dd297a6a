"""Cross-run comparison, per-run intervals and properties in a small study with known truth."""

import math

import numpy as np
import pandas as pd
import pytest

from poslab.study import load_study, read_results, run_study, write_results
from poslab.study.comparison import compare_runs, seed_bootstrap
from poslab.study.runner import analyse_table

STUDY = """
name = "truth"
n_positions = 256
dim = 64
seeds = [0, 1, 2, 3, 4]  # 5 seeds: 126 distinct seed resamples, enough for a 95 % interval

[analysis]
heatmap_bins = 8
fit_tolerance = 1.0  # sinusoidal's exponential through the fit gate (its profile is a log law)
models = ["exponential", "gaussian", "power_law", "stretched_exponential", "damped_cosine"]

[[encodings]]
kind = "smoothed_random"
length_scale = [3.0, 8.0]

[[encodings]]
kind = "sinusoidal"

[[encodings]]
kind = "learned"
source = "gpt2"
"""

SHORT, LONG = "smoothed_random(length_scale=3)", "smoothed_random(length_scale=8)"


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("truth")
    (folder / "truth.toml").write_text(STUDY)
    spec = load_study(folder / "truth.toml")
    result = run_study(spec, progress=False)
    return spec, result, folder


def _rows(comparison, summary):
    return comparison[comparison["summary"] == summary].set_index("label")


def test_comparison_ranks_with_seed_and_anchor_intervals(study):
    spec, result, _ = study
    comparison = result.comparison
    assert set(comparison["summary"]) == {"band_width_0p9", "band_width_0p5", "e_folding_distance", "zero_crossing",
                                          "first_minimum", "integral_scale", "decay_length"}
    for summary, rows in comparison[comparison["summary"] != "decay_length"].groupby("summary"):
        ranked = rows["rank"].dropna()
        assert list(ranked) == sorted(ranked), summary  # ranked, largest first
    c, e = _rows(comparison, "decay_length"), _rows(comparison, "e_folding_distance")
    assert set(c.index) == {SHORT, LONG, "sinusoidal", "learned(source=gpt2)"}
    for label, sigma in [(SHORT, 3.0), (LONG, 8.0)]:
        row = c.loc[label]
        assert row["ci_method"] == "seed" and row["n_runs"] == 5 and row["n_resamples"] == 200
        assert row["value"] == pytest.approx(np.sqrt(4 * sigma**2 + 1) - 1, rel=0.1)  # truth from distance 1
        assert row["value_ci_low"] <= row["value"] <= row["value_ci_high"]
        # model-free: exp(-k²/4σ²) first falls below 1/e just after 2σ
        assert abs(e.loc[label, "value"] - 2 * sigma) <= 1.5
        assert e.loc[label, "value_ci_low"] <= e.loc[label, "value"] <= e.loc[label, "value_ci_high"]
    assert c.loc["learned(source=gpt2)", "ci_method"] == "anchor_block"
    gpt2 = result.summary.set_index("label").loc["learned(source=gpt2)"]
    assert c.loc["learned(source=gpt2)", "value"] == gpt2["decay_length"]
    assert c.loc["learned(source=gpt2)", "value_ci_low"] == gpt2["decay_length_ci_low"]
    assert _rows(comparison, "band_width_0p5").loc["learned(source=gpt2)", "value"] == gpt2["band_width_0p5"]


def test_pairs_say_which_differences_exceed_the_uncertainty(study):
    spec, result, _ = study
    pairs = result.comparison_pairs
    assert len(pairs) == 4 * 3 / 2 * 6  # pairs of labels × model-free summaries
    both = pairs[(pairs["label"] == SHORT) & (pairs["other_label"] == LONG)].set_index("summary")
    row = both.loc["e_folding_distance"]
    assert row["verdict"] == "shorter" and row["exceeds_uncertainty"]
    assert row["difference"] == pytest.approx(-10.0, abs=2)
    assert row["difference_ci_high"] < 0  # the seeds' paired replicates
    for _, row in pairs.iterrows():
        assert row["exceeds_uncertainty"] == (row["verdict"] in ("longer", "shorter"))
        if np.isfinite(row["difference_ci_low"]) and np.isfinite(row["difference"]):  # high NaN: open above
            assert row["difference_ci_low"] <= row["difference"]
            assert np.isnan(row["difference_ci_high"]) or row["difference"] <= row["difference_ci_high"]


def test_rank_ranges_are_what_the_verdicts_leave_open(study):
    """rank_best / rank_worst against the verdicts counted out label by label: the rank by value lies between
    them, and a label whose every pair in its group is established has one place."""
    _, result, _ = study
    comparison, pairs = result.comparison, result.comparison_pairs
    ranked = comparison[comparison["rank"].notna()]
    assert comparison.loc[comparison["rank"].isna(), "rank_best"].isna().all()
    for _, row in ranked.iterrows():
        group = ranked[(ranked["summary"] == row["summary"]) & (ranked["max_distance"] == row["max_distance"])
                       & (ranked["kernel"] == row["kernel"])]
        if len(group) == 1:  # alone in its group: compared with no one there, no range
            assert pd.isna(row["rank_best"]) and pd.isna(row["rank_worst"])
            continue
        longer_than_me = shorter_than_me = 0
        for other in group["label"]:
            if other == row["label"]:
                continue
            verdict = pairs[(pairs["summary"] == row["summary"]) & (((pairs["label"] == row["label"])
                            & (pairs["other_label"] == other)) | ((pairs["label"] == other)
                            & (pairs["other_label"] == row["label"])))].iloc[0]
            mine = verdict["verdict"] if verdict["label"] == row["label"] else \
                {"longer": "shorter", "shorter": "longer"}.get(verdict["verdict"], verdict["verdict"])
            longer_than_me += mine == "shorter"
            shorter_than_me += mine == "longer"
        assert row["rank_best"] == 1 + longer_than_me and row["rank_worst"] == len(group) - shorter_than_me
        assert row["rank_best"] <= row["rank"] <= row["rank_worst"]
    # the seeds' e-folding distances are established apart (above): the shorter one's place below the longer
    e = _rows(comparison, "e_folding_distance")
    assert e.loc[SHORT, "rank_best"] > e.loc[LONG, "rank"]


def test_per_run_intervals_properties_and_bootstrap_tables(study):
    spec, result, _ = study
    s = result.summary
    for col in ("decay_length_ci_low", "decay_length_ci_high", "band_width_0p5_ci_low", "band_width_0p5_ci_high",
                "ci_method", "ci_level", "n_resamples", "block_length", "n_failed_refits", "envelope_decay_length"):
        assert col in s.columns
    exact = s["label"] == "sinusoidal"  # exactly translation invariant: no sampling variability, no interval
    assert (s.loc[exact, "ci_method"] == "exact").all() and s.loc[exact, "decay_length_ci_low"].isna().all()
    ok = s[s["decay_length"].notna() & ~exact]
    assert ((ok["decay_length_ci_low"] <= ok["decay_length"]) & (ok["decay_length"] <= ok["decay_length_ci_high"])).all()
    assert (s.loc[~exact, "ci_method"] == "anchor_block").all() and (s.loc[~exact, "n_resamples"] == 200).all()
    assert (s.loc[exact, "n_resamples"] == 0).all()  # an exact run draws no resamples
    # chosen from the data, at least ceil(256 / 32), at most 256 / 8; exact runs have none
    assert s.loc[~exact, "block_length"].between(8, 32).all() and s.loc[exact, "block_length"].isna().all()
    # band-width intervals are integer positions around the width
    assert (s.loc[~exact, "band_width_0p5_ci_low"] <= s.loc[~exact, "band_width_0p5"]).all()
    boot = result.bootstrap
    assert (boot["window"] == 255).sum() == 200 * int((~exact).sum())  # every sampled run at its own window
    assert not boot["label"].isin(s.loc[exact, "label"]).any()  # an exact run's resamples would repeat its estimates
    # the sampled runs' smaller windows (63, 127): summaries only, no refits; exact runs have none there
    nested = boot[boot["window"] < 255]
    assert set(nested["window"]) == {63, 127} and nested["decay_length"].isna().all()
    assert len(nested) == 2 * 200 * int((~exact).sum())
    props = result.properties
    assert len(props) == 5 * len(s) - 1  # sinusoidal is analysed from its kernel: no translation variance row
    sin = props[props["label"] == "sinusoidal"].set_index("metric")["value"]
    assert "translation_variance_ratio" not in sin and sin["symmetry"] == 1.0  # 0 by construction: not reported
    # decay_metrics: every run has profile rows; the oscillating sinusoidal profile also has envelope rows
    dm = result.decay_metrics
    assert set(dm.loc[dm["label"] == "sinusoidal", "target"]) == {"profile", "envelope"}
    assert set(dm.loc[dm["label"] == SHORT, "target"]) == {"profile"}


def test_tables_are_reproducible_and_read_back(study, tmp_path, monkeypatch):
    spec, result, folder = study
    table = np.load(_gpt2_path())[:128]
    first, again = (analyse_table(table, max_distance=127, options=spec.analysis, seed=3) for _ in range(2))
    np.testing.assert_array_equal(again.bootstrap.band_widths, first.bootstrap.band_widths)
    np.testing.assert_array_equal(again.bootstrap.decay_lengths, first.bootstrap.decay_lengths)
    other = analyse_table(table, max_distance=127, options=spec.analysis, seed=4)
    assert not np.array_equal(other.bootstrap.decay_lengths, first.bootstrap.decay_lengths)  # the seed is used
    import poslab.study.results as res

    monkeypatch.setattr(res, "write_figures", lambda *a, **k: [])  # figures: test_forest_plot_*
    out = write_results(result, tmp_path / "out")
    assert {"comparison.csv", "comparison_pairs.csv", "properties.csv", "bootstrap.csv"} <= {
        p.name for p in out.iterdir()}
    back = read_results(out)
    for name, columns in [("comparison", None), ("comparison_pairs", None),
                          ("properties", ["label", "seed", "metric", "value", "n_anchors", "anchor_step"]),
                          ("bootstrap", ["label", "seed", "resample", "decay_length", "band_width_0p5"])]:
        columns = columns or list(result.frames[name].columns)
        pd.testing.assert_frame_equal(back[name][columns], result.frames[name][columns], check_dtype=False)
    recomputed = compare_runs(back, spec)  # the comparison needs the tables only
    pd.testing.assert_frame_equal(recomputed["comparison"], result.comparison, check_dtype=False)


def _gpt2_path():
    from poslab.data import bundled_path

    return bundled_path("gpt2")


def test_seed_bootstrap_needs_two_seeds(study):
    spec, result, _ = study
    one = result.profiles[(result.profiles["label"] == SHORT) & (result.profiles["seed"] == 0)]
    with pytest.raises(ValueError, match="at least 2 seeds"):
        seed_bootstrap(one, models=spec.analysis.models)


def test_forest_plot_draws_each_decay_length(study):
    from poslab.plots import plot_decay_length_forest

    spec, result, _ = study
    fig = plot_decay_length_forest(result.comparison)
    ax = fig.axes[0]
    points = [line.get_xdata()[0] for line in ax.get_lines() if line.get_marker() == "o"]
    decay = result.comparison[result.comparison["summary"] == "decay_length"].sort_values("value", ascending=False)
    assert sorted(points) == sorted(decay["value"].dropna())
    assert [t.get_text().replace("\n", " ").split(" (")[0] for t in ax.get_yticklabels()] == list(decay["label"])
    with pytest.raises(ValueError, match="lacks column"):
        plot_decay_length_forest(pd.DataFrame({"label": ["x"]}))
    from poslab.plots import STUDY_FIGURES

    assert STUDY_FIGURES["decay_lengths.png"](result.frames, "t") is not None
    assert STUDY_FIGURES["decay_lengths.png"]({}, "t") is None


def test_no_successful_run_gives_no_comparison(study):
    spec, result, _ = study
    summary = result.summary.assign(status="failed")
    assert compare_runs({"summary": summary}, spec) == {}


def test_runs_of_different_windows_are_compared_on_their_common_windows(tmp_path):
    """Issue 13: a shorter entry meets a longer one at the windows both were analysed over (instead of being
    refused: decay lengths depend on the window, the model-free summaries of a translation-invariant table do not)."""
    (tmp_path / "w.toml").write_text('name = "w"\nn_positions = 256\ndim = 64\n[analysis]\nheatmap_bins = 8\n'
                                     'fit_tolerance = 1.0\nmodels = ["exponential", "gaussian"]\n'
                                     '[[encodings]]\nkind = "sinusoidal"\n'
                                     '[[encodings]]\nkind = "learned"\nsource = "gpt2"\nn_positions = 128\n')
    result = run_study(load_study(tmp_path / "w.toml"), progress=False)
    assert set(result.comparison["max_distance"]) == {255, 127}
    pairs = result.comparison_pairs.set_index("summary")
    assert set(pairs["windows"]) == {"63;127"} and (pairs["window"] == 127).all()
    # gpt2 keeps similarity above 0.5 longer than sinusoidal (28) at both windows: beyond its uncertainty over its
    # 128 positions, not over its first 64 (8 anchor blocks), where it now has an interval too (its half window):
    # the difference does not hold at every window
    row = pairs.loc["band_width_0p5"]
    assert row["verdict"] == "window-dependent"
    assert "exceeds its uncertainty at window(s) 127 but not at 63" in row["reason"]
    windows = result.window_sensitivity
    gpt2 = windows[(windows["label"] != "sinusoidal") & (windows["summary"] == "band_width_0p5")].set_index("window")
    low, value, high = gpt2.loc[63, ["value_ci_low", "value", "value_ci_high"]]
    assert low <= value and (pd.isna(high) or value <= high)  # high empty: some resamples stay above 0.5 to 63
    assert pd.isna(gpt2.loc[127, "value_ci_low"])  # its own window: summary.csv's interval
    sin = windows[windows["label"] == "sinusoidal"]
    assert sin["value_ci_low"].isna().all()  # exact: no interval at any window


def test_first_minimum_of_an_exact_cosine_sum_is_called_a_ripple(tmp_path):
    """sinusoidal's and RoPE's first minima are dips of exact cosine sums: the pair's reason says so."""
    (tmp_path / "ripples.toml").write_text(
        'name = "ripples"\nn_positions = 1024\ndim = 768\nmax_distance = 1023\n\n'
        '[[encodings]]\nkind = "sinusoidal"\n\n'
        '[[encodings]]\nkind = "rotary"\nrope_theta = 500000\nrotary_dim = 128\n')
    result = run_study(load_study(tmp_path / "ripples.toml"), progress=False, executor="serial")
    row = result.comparison_pairs.set_index("summary").loc["first_minimum"]
    assert (row["value"], row["other_value"], row["verdict"]) == (787, 34, "longer")  # exact: the verdict stands
    assert "sinusoidal's first minimum is a dip of an exact cosine sum (it rises back 0.053)" in row["reason"]
    assert "rises back 0.062" in row["reason"] and "a ripple, not a length scale" in row["reason"]
    assert "ripple" not in result.comparison_pairs.set_index("summary").loc["band_width_0p5", "reason"]


# --- exact labels: a crossing beyond the window, an unreached integral scale (constructed exact profiles) ---

def _exact_tables(profiles: dict, thresholds=(0.9, 0.5)):
    """The summary and summaries tables compare_runs reads, for exact profiles {label: S over 0..max_distance}
    summarised as a run summarises them (poslab.analysis.summaries.profile_summaries, ci_method exact)."""
    from poslab.analysis.summaries import profile_summaries
    from poslab.study import parse_study

    summary, summaries = [], []
    for label, y in profiles.items():
        k = np.arange(len(y), dtype=float)
        s = profile_summaries(k, y, thresholds=thresholds)
        summary.append({"study": "exact", "label": label, "kind": "kernel", "seed": np.nan, "status": "ok",
                        "max_distance": len(y) - 1, "ci_method": "exact", "kernel": "cosine",
                        **{name: s.values[j] for j, name in enumerate(s.names)}})
        summaries.append(s.to_frame().assign(label=label, seed=np.nan))
    spec = parse_study({"name": "exact", "n_positions": 1024, "dim": 64,
                        "analysis": {"thresholds": list(thresholds)}, "encodings": [{"kind": "sinusoidal"}]})
    return {"summary": pd.DataFrame(summary), "summaries": pd.concat(summaries, ignore_index=True)}, spec


def _pair(pairs, a, b, summary):
    return pairs.set_index(["label", "other_label", "summary"]).loc[(a, b, summary)]


def test_a_crossing_beyond_the_window_that_a_level_change_brings_back_is_not_distinguishable():
    """QA (stop 27): an exact label's 0.5 band width "> 1023" against another's well-conditioned 996 was "longer",
    yet S falls below 0.52 at 909 inside the window (a brute-force scan), below 996: a ±0.02 change of the level,
    the only uncertainty an exact label has, reverses it. Its range is (909, inf): not distinguishable, naming it.
    A profile that stays above 0.52 over the whole window keeps "longer"."""
    k = np.arange(1024, dtype=float)
    near = 0.5 + 0.5 * np.exp(-k * math.log(25) / 908.5)  # never below 0.5, below 0.52 from 909
    far = 0.5 + 0.5 * np.exp(-k / 400.0)  # below 0.52 only from 1288, beyond the window
    b = np.exp(-k * math.log(2) / 995.5)  # 0.5 crossed at 996, monotone: well-conditioned
    assert int(np.argmax(near < 0.52)) == 909 and not (near < 0.5).any() and not (far < 0.52).any()
    assert int(np.argmax(b < 0.5)) == 996
    tables, spec = _exact_tables({"near": near, "far": far, "b": b})
    pairs = compare_runs(tables, spec)["comparison_pairs"]
    row = _pair(pairs, "near", "b", "band_width_0p5")
    assert row["verdict"] == "not distinguishable" and not row["exceeds_uncertainty"], row["reason"]
    assert "1023: > 1023 vs 996" in row["reason"]
    assert "near's crossing lies beyond window 1023, but a change of +0.02 in the level brings it back to 909 " \
           "(crossing_low), so its range, 909 to beyond the window, meets b's 996" in row["reason"]
    assert _pair(pairs, "far", "b", "band_width_0p5")["verdict"] == "longer"
    # the rule before (no crossing_low read: the range (W + 1, inf)) gave "longer"
    old = tables | {"summaries": tables["summaries"].assign(crossing_low=np.where(
        tables["summaries"]["status"] == "not_reached", np.nan, tables["summaries"]["crossing_low"]))}
    assert _pair(compare_runs(old, spec)["comparison_pairs"], "near", "b", "band_width_0p5")["verdict"] == "longer"


def test_an_unreached_integral_scale_is_longer_than_values_below_its_lower_bound_and_ranked_by_it():
    """The cosine sum (cos(0.001 k) + cos(0.002 k)) / 2 crosses 0 at 1047.2, beyond the window 1023: its integral
    scale is no number, but S >= 0 up to the window, so it exceeds the integral up to 1023, 649.1 (lower_bound).
    Against exact integral scales of 101.2 and 610.9 it is longer; against 720 (1 - (k/900)^4) the bound does not
    settle it (no sign, saying so). Ranked by its bound: 720 first, then it (best 1: nothing is established
    above it), then 610.9 and 101.2, whose places are established."""
    k = np.arange(1024, dtype=float)
    profiles = {"cosines": 0.5 * (np.cos(0.001 * k) + np.cos(0.002 * k)),
                "short": np.exp(-k / 300.0) * np.cos(np.pi * k / 400.0),
                "middle": 0.5 * (np.cos(0.0011 * k) + np.cos(0.0021 * k)),
                "long": 1.0 - (k / 900.0) ** 4}
    tables, spec = _exact_tables(profiles)
    result = compare_runs(tables, spec)
    pairs, comparison = result["comparison_pairs"], result["comparison"]
    bound = tables["summaries"].set_index(["label", "summary"]).loc[("cosines", "integral_scale"), "lower_bound"]
    assert bound == pytest.approx(np.trapezoid(profiles["cosines"] / profiles["cosines"][0], k), rel=1e-12)
    for other in ("short", "middle"):
        row = _pair(pairs, "cosines", other, "integral_scale")
        assert row["verdict"] == "longer" and row["exceeds_uncertainty"], row["reason"]
        assert f"1023: > {bound:g} (integral up to 1023) vs" in row["reason"]
    row = _pair(pairs, "cosines", "long", "integral_scale")
    assert row["verdict"] == "not comparable", row["reason"]
    assert f"cosines's integral scale, beyond its lower bound {bound:g} (the integral up to the window), may lie " \
           "either side of long's 720: the bound does not settle it at window 1023" in row["reason"]
    rows = _rows(comparison, "integral_scale")
    assert np.isnan(rows.loc["cosines", "value"]) and rows.loc["cosines", "status"] == "not_reached"
    ranks = {label: tuple(int(rows.loc[label, c]) for c in ("rank", "rank_best", "rank_worst")) for label in profiles}
    assert ranks == {"long": (1, 1, 2), "cosines": (2, 1, 2), "middle": (3, 3, 3), "short": (4, 4, 4)}


def _integral_to(k, y, level):
    """Brute force: the integral of S / S(0) (piecewise linear) from 0 to S's first crossing of ``level``."""
    total = 0.0
    for i in range(1, len(y)):
        if y[i] < level:
            z = k[i - 1] + (y[i - 1] - level) / (y[i - 1] - y[i])
            return (total + 0.5 * (z - k[i - 1]) * (y[i - 1] + level)) / y[0]
        total += 0.5 * (y[i - 1] + y[i])
    return math.nan


@pytest.mark.parametrize("amplitude, period", [(0.03, 97), (0.025, 61), (0.03, 200)])
def test_an_ill_conditioned_integral_scale_has_the_range_of_the_integral_not_of_its_zero_crossing(amplitude, period):
    """An integral scale ending at an ill-conditioned zero crossing (S ripples around 0 after a decay) was given
    the zero crossing's range of distances (phi-3.5's 628 'over 1573-2284'). Its range now encloses the integral up
    to the crossings of ±0.02 (brute force) and the value itself, and lies far below those distances."""
    from poslab.study.comparison import _conditioning_range

    k = np.arange(1024, dtype=float)
    y = 0.9 * np.exp(-k / 100) + 0.1 + amplitude * np.cos(2 * np.pi * k / period) - 0.1 * np.minimum(k / 600, 1)
    y[0] = 1.0
    tables, _ = _exact_tables({"ripples": y})
    summaries = tables["summaries"]
    row = next(summaries[summaries["summary"] == "integral_scale"].itertuples(index=False))
    assert row.ill_conditioned
    low, high = _conditioning_range(row, "cosine")
    assert row.value == pytest.approx(_integral_to(k, y, 0.0), rel=1e-9)
    for level in (0.02, -0.02):
        assert low <= _integral_to(k, y, level) <= high
    assert low <= row.value <= high < row.crossing_low  # an integral, not a distance
    # on another kernel scale |S / S(0)| <= 1 does not hold: the range is unknown
    assert _conditioning_range(row, "attention_prior") == (-math.inf, math.inf)
