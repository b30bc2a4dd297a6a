"""Cross-run comparison, per-run intervals and properties in a small study with known truth."""

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


def test_comparison_ranks_with_seed_and_anchor_intervals(study):
    spec, result, _ = study
    c = result.comparison.set_index("label")
    assert set(c.index) == {SHORT, LONG, "sinusoidal", "learned(source=gpt2)"}
    assert list(result.comparison["rank"]) == sorted(result.comparison["rank"])  # ranked, longest first
    for label, sigma in [(SHORT, 3.0), (LONG, 8.0)]:
        row = c.loc[label]
        assert row["ci_method"] == "seed" and row["n_runs"] == 5 and row["n_resamples"] == 200
        assert row["decay_length"] == pytest.approx(2 * sigma, rel=0.1)  # the null model's truth, 2σ
        assert row["decay_length_ci_low"] <= row["decay_length"] <= row["decay_length_ci_high"]
    assert c.loc["learned(source=gpt2)", "ci_method"] == "anchor_block"
    gpt2 = result.summary.set_index("label").loc["learned(source=gpt2)"]
    assert c.loc["learned(source=gpt2)", "decay_length"] == gpt2["decay_length"]
    assert c.loc["learned(source=gpt2)", "decay_length_ci_low"] == gpt2["decay_length_ci_low"]


def test_pairs_say_which_differences_exceed_the_uncertainty(study):
    spec, result, _ = study
    pairs = result.comparison_pairs
    assert len(pairs) == 4 * 3 / 2
    both = pairs[(pairs["label"].isin([SHORT, LONG])) & (pairs["other_label"].isin([SHORT, LONG]))].iloc[0]
    assert both["label"] == LONG and both["verdict"] == "longer" and both["exceeds_uncertainty"]
    assert both["difference"] == pytest.approx(10.0, rel=0.15)
    assert both["difference_ci_low"] > 0 and both["fit_difference_ci_low"] > 0
    for _, row in pairs.iterrows():
        inside = row["difference_ci_low"] <= row["difference"] <= row["difference_ci_high"]
        assert inside or row["verdict"] == "not comparable"
        assert row["exceeds_uncertainty"] == (row["verdict"] in ("longer", "shorter"))


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
    assert (s.loc[~exact, "ci_method"] == "anchor_block").all() and (s["n_resamples"] == 200).all()
    assert (s["block_length"] == 8).all()  # ceil(256 / 32)
    # band-width intervals are integer positions around the width
    assert (s.loc[~exact, "band_width_0p5_ci_low"] <= s.loc[~exact, "band_width_0p5"]).all()
    assert len(result.bootstrap) == 200 * len(s)
    props = result.properties
    assert len(props) == 5 * len(s)
    sin = props[props["label"] == "sinusoidal"].set_index("metric")["value"]
    assert sin["translation_variance_ratio"] < 1e-20 and sin["symmetry_deviation"] == 0
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
    assert sorted(points) == sorted(result.comparison["decay_length"].dropna())
    assert [t.get_text().replace("\n", " ").split(" (")[0] for t in ax.get_yticklabels()] == list(result.comparison["label"])
    with pytest.raises(ValueError, match="lacks column"):
        plot_decay_length_forest(pd.DataFrame({"label": ["x"]}))
    from poslab.plots import STUDY_FIGURES

    assert STUDY_FIGURES["decay_lengths.png"](result.frames, "t") is not None
    assert STUDY_FIGURES["decay_lengths.png"]({}, "t") is None


def test_no_successful_run_gives_no_comparison(study):
    spec, result, _ = study
    summary = result.summary.assign(status="failed")
    assert compare_runs({"summary": summary}, spec) == {}


def test_decay_lengths_of_different_windows_are_not_compared(tmp_path):
    """Decay lengths depend on the window: a shorter entry is never ranked against a longer one."""
    (tmp_path / "w.toml").write_text('name = "w"\nn_positions = 256\ndim = 64\n[analysis]\nheatmap_bins = 8\n'
                                     '[[encodings]]\nkind = "sinusoidal"\n'
                                     '[[encodings]]\nkind = "learned"\nsource = "gpt2"\nn_positions = 128\n')
    result = run_study(load_study(tmp_path / "w.toml"), progress=False)
    assert list(result.comparison["max_distance"]) == [255, 127] or list(result.comparison["max_distance"]) == [127, 255]
    (pair,) = result.comparison_pairs.to_dict("records")
    assert pair["verdict"] == "different windows" and not pair["exceeds_uncertainty"]
