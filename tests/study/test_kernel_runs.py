"""Kernel runs through a whole study: the recorded path and scale, exact intervals, the comparison on one scale,
the heatmap of a causal kernel, and the budget of a kernel run (issue 14 item 3, issue 15)."""

import numpy as np
import pandas as pd
import pytest

from poslab.study import parse_study, run_study
from poslab.study.budget import ResourceError, check_resources

ENTRIES = [{"kind": "alibi", "n_heads": [8, 12]}, {"kind": "kerple", "p": 1.0, "a": 0.5},
           {"kind": "rotary", "rope_theta": 1000.0}, {"kind": "sinusoidal"}, {"kind": "random"}]


@pytest.fixture(scope="module")
def result():
    spec = parse_study({"name": "k", "n_positions": 96, "dim": 16, "seeds": [0],
                        "analysis": {"heatmap_bins": 8, "n_resamples": 40}, "encodings": ENTRIES})
    return run_study(spec, progress=False, executor="serial")


def test_every_run_records_its_path_and_scale(result):
    s = result.summary.set_index("label")
    assert (s["status"] == "ok").all(), s["message"]
    assert dict(s["profile_method"]) == {"alibi(n_heads=8)": "kernel", "alibi(n_heads=12)": "kernel",
                                         "kerple(a=0.5)": "kernel", "rotary(rope_theta=1000)": "kernel",
                                         "sinusoidal": "kernel", "random": "table"}
    assert set(s.loc[s["kind"].isin(["alibi", "kerple"]), "kernel"]) == {"attention_prior"}
    assert set(s.loc[~s["kind"].isin(["alibi", "kerple"]), "kernel"]) == {"cosine"}
    assert s.loc["alibi(n_heads=12)", "kernel_n_heads"] == 12 and s.loc["alibi(n_heads=12)", "kernel_direction"] == "causal"
    assert pd.isna(s.loc["alibi(n_heads=8)", "table_dim"]) and s.loc["random", "table_dim"] == 16
    kernel_runs = s["profile_method"] == "kernel"
    assert (s.loc[kernel_runs, "ci_method"] == "exact").all() and s.loc[kernel_runs, "block_length"].isna().all()
    heads = result.kernel_heads
    assert len(heads[heads["label"] == "alibi(n_heads=12)"]) == 12
    assert heads.loc[heads["label"] == "sinusoidal", "head"].tolist() == ["all"]


def test_the_comparison_ranks_on_one_scale_only(result):
    c = result.comparison
    assert set(c["kernel"]) == {"cosine", "attention_prior"}
    for (summary, scale), rows in c[c["summary"] != "decay_length"].groupby(["summary", "kernel"]):
        ranked = rows["rank"].dropna()
        assert ranked.min() == 1 if len(ranked) else True, (summary, scale)  # ranks restart on each scale
    pairs = result.comparison_pairs  # issue 13: by model-free summaries, never across scales
    crossed = pairs[pairs.apply(lambda r: (r["kind"] in ("alibi", "kerple")) != (r["other_kind"] in ("alibi", "kerple")),
                                axis=1)]
    assert len(crossed) and (crossed["verdict"] == "different kernels").all()


def test_a_causal_heatmap_leaves_the_masked_triangle_empty(result):
    h = result.heatmaps
    causal = h[h["label"] == "alibi(n_heads=8)"]
    above = causal["col_start"] >= causal["row_stop"]  # blocks wholly after the query: keys masked
    assert causal.loc[above, "mean_similarity"].isna().all() and causal.loc[~above, "mean_similarity"].notna().all()


def test_a_million_position_rotary_run_is_cheap_for_the_budget():
    spec = parse_study({"name": "big", "n_positions": 1048576, "dim": 128,
                        "encodings": [{"kind": "rotary", "rope_theta": 500000.0, "rotary_dim": 128}]})
    assert check_resources(spec, available=3 * 2**30) < 2 * 2**30  # the kernel: ~1.2 GiB, no table
    centred = parse_study({"name": "big", "n_positions": 1048576, "dim": 128, "analysis": {"center": True},
                           "encodings": [{"kind": "rotary", "rope_theta": 500000.0, "rotary_dim": 128}]})
    with pytest.raises(ResourceError, match="dim 128"):  # a centred table is analysed as a table
        check_resources(centred, available=3 * 2**30)


@pytest.mark.parametrize("entry", [{"kind": "rotary", "rope_theta": 1000.0}, {"kind": "alibi", "n_heads": 4}])
def test_kernel_only_stages_beside_the_others_give_the_same_tables(entry):
    """A study of one kernel run computes its heatmap and properties in a second thread (execute_run beside):
    every table as computed in line, the stage order kept, and a stage failing there fails the run as in line."""
    from poslab.stages import build_stages
    from poslab.study.runner import execute_run

    spec = parse_study({"name": "one", "n_positions": 64, "dim": 16, "analysis": {"heatmap_bins": 8},
                        "encodings": [entry]})
    run = spec.runs()[0]
    assert [s.name for s in build_stages(spec.analysis) if s.kernel_only] == ["heatmap", "properties"]
    inline = execute_run(spec, run, list(run.encoding.params()))
    beside = execute_run(spec, run, list(run.encoding.params()), beside=True)
    assert inline.keys() == beside.keys() and "properties" in beside and "heatmaps" in beside
    for name in inline:
        pd.testing.assert_frame_equal(inline[name].drop(columns="seconds", errors="ignore"),
                                      beside[name].drop(columns="seconds", errors="ignore"))


def test_a_kernel_only_stage_that_fails_beside_fails_the_run(monkeypatch):
    from poslab.stages import properties
    from poslab.study.runner import execute_run

    def broken(*args, **kwargs):
        raise RuntimeError("no properties today")

    monkeypatch.setattr(properties, "run_kernel_properties", broken)
    spec = parse_study({"name": "one", "n_positions": 64, "dim": 16, "encodings": [{"kind": "sinusoidal"}]})
    run = spec.runs()[0]
    out = execute_run(spec, run, list(run.encoding.params()), beside=True)
    row = out["summary"].iloc[0]
    assert row["status"] == "failed" and row["message"] == "RuntimeError: no properties today"
    assert list(out) == ["summary"]


def test_a_kernel_run_is_exact_without_resamples_and_its_comparisons_are_verdicts():
    """n_resamples = 0 turns resampling off, but a kernel run has nothing to resample: it stays ci_method exact, and
    two kernel runs are compared on their exact values (modern_llms.toml: all its verdicts read "not comparable:
    no interval" before)."""
    spec = parse_study({"name": "k0", "n_positions": 512, "dim": 64, "analysis": {"n_resamples": 0},
                        "encodings": [{"kind": "rotary", "rope_theta": 10000.0},
                                      {"kind": "rotary", "rope_theta": 500000.0}]})
    result = run_study(spec, progress=False, executor="serial")
    assert (result.summary["ci_method"] == "exact").all() and (result.summary["n_resamples"] == 0).all()
    pairs = result.frames["comparison_pairs"]
    width = pairs[pairs["summary"] == "band_width_0p5"].iloc[0]
    assert width["verdict"] in ("longer", "shorter")  # 10000's 0.5 width is shorter: an exact difference
    assert "no interval" not in width["reason"]
