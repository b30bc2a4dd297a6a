"""The stage protocol: declarations are the truth about every table, and everything else derives from them."""

import contextlib
import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import poslab.stages as stages
from poslab._validation import ValidationError
from poslab.stages import PIPELINE, SUMMARY, TABLES, AnalysisOptions, Column, Output, RunContext, Stage
from poslab.stages.docs import COMMAND, tables_markdown
from poslab.study import load_study, run_study, write_results
from poslab.study.spec import StudyError

ROOT = Path(__file__).parents[2]
SMALL = 'name = "s"\nn_positions = 64\ndim = 16\nseeds = [0]\n[analysis]\nn_resamples = 40\n' \
        '[[encodings]]\nkind = "sinusoidal"\n[[encodings]]\nkind = "random"\n'


def test_the_column_reference_is_current():
    assert (ROOT / "docs" / "tables.md").read_text(encoding="utf-8") == tables_markdown(), \
        f"docs/tables.md is stale: run {COMMAND}"


def test_every_stage_declares_a_name_description_and_settings_with_docs():
    names = [s.name for s in PIPELINE]
    assert len(set(names)) == len(names) and all(s.description for s in PIPELINE)
    for stage in PIPELINE:
        for f in stages.settings_of(stage):
            assert f.metadata["doc"] and f.name in AnalysisOptions.OWNERS


def test_settings_are_checked_with_the_one_message_style(tmp_path):
    with pytest.raises(ValidationError, match=r"^\[analysis\]: n_blocks must be an integer >= 1, got 0$"):
        AnalysisOptions(n_blocks=0)
    (tmp_path / "s.toml").write_text(SMALL.replace("n_resamples = 40", "min_aic_gain = -1"))
    with pytest.raises(StudyError, match=r"s\.toml: \[analysis\]: min_aic_gain must be a finite number >= 0, got -1"):
        load_study(tmp_path / "s.toml")
    (tmp_path / "s.toml").write_text(SMALL.replace("n_resamples = 40", "n_block = 4"))
    with pytest.raises(StudyError, match=r"unknown \[analysis\] option\(s\) n_block; valid: heatmap_bins, .*n_blocks"):
        load_study(tmp_path / "s.toml")


def test_settings_that_change_results_are_recorded_and_used(tmp_path):
    (tmp_path / "s.toml").write_text(SMALL.replace("n_resamples = 40", "n_resamples = 40\nn_blocks = 8"))
    result = run_study(load_study(tmp_path / "s.toml"), progress=False, executor="serial")
    table_runs = result.summary["profile_method"] == "table"  # kernel runs are exact: no anchor blocks
    assert set(result.summary.loc[table_runs, "block_length"]) == {8}  # 64 positions in 8 blocks
    assert result.summary.loc[~table_runs, "block_length"].isna().all() and (~table_runs).any()
    out = write_results(result, tmp_path / "out")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["analysis"]["n_blocks"] == 8 and manifest["analysis"]["min_aic_gain"] == 10.0
    assert [s["name"] for s in manifest["stages"]] == [s.name for s in PIPELINE]
    assert {"n_resamples", "n_blocks"} <= set(next(s for s in manifest["stages"] if s["name"] == "bootstrap")["settings"])


def test_summary_columns_follow_the_schema(tmp_path):
    (tmp_path / "s.toml").write_text(SMALL)
    summary = run_study(load_study(tmp_path / "s.toml"), progress=False, executor="serial").summary
    columns = list(summary.columns)
    assert columns[-1] == "seconds"
    assert columns.index("integral_scale_ci_high") + 1 == columns.index("decay_length_ci_low")
    assert columns.index("decay_length_ci_high") + 1 == columns.index("ci_method")
    # the model-free summaries lead: before the decay fits
    assert columns.index("band_width_0p9") < columns.index("e_folding_distance") < columns.index("selected_model")
    assert all(SUMMARY.column(c) is not None for c in columns if c not in ("base", "layout", "spacing", "distribution"))


@dataclasses.dataclass(frozen=True)
class _Sloppy(Stage):
    name = "sloppy"
    description = "writes a column it does not declare"
    summary = (Column("declared", "float", "", "a declared column"),)

    def compute(self, ctx):
        return Output(summary={"declared": 1.0, "undeclared": 2.0})


def test_a_stage_writing_an_undeclared_column_fails_its_run(tmp_path, monkeypatch):
    monkeypatch.setattr(stages, "PIPELINE", (*PIPELINE, _Sloppy))
    (tmp_path / "s.toml").write_text(SMALL)
    summary = run_study(load_study(tmp_path / "s.toml"), progress=False, executor="serial").summary
    assert (summary["status"] == "failed").all()
    assert summary["message"].str.contains("stage sloppy wrote summary column(s) undeclared it does not declare",
                                           regex=False).all()


def test_the_context_derives_once_and_frees_the_unit_rows_before_the_resamples():
    table = np.random.default_rng(0).normal(size=(128, 8))
    ctx = RunContext(None, n_positions=128, max_distance=127, dim=8, options=AnalysisOptions(n_resamples=40),
                     table=table)
    assert ctx.profile is ctx.profile and ctx.fits is ctx.fits
    later = [s for s in stages.build_stages(ctx.options) if "units" in s.uses]
    ctx.pending = tuple(later)
    ctx.bootstrap
    assert "units" in ctx.__dict__  # a stage still to run reads them
    fresh = RunContext(None, n_positions=128, max_distance=127, dim=8, options=AnalysisOptions(n_resamples=40),
                       table=table)
    fresh.bootstrap
    assert "units" not in fresh.__dict__  # nobody reads them any more: freed (rebuilt if read)
    np.testing.assert_array_equal(fresh.bootstrap.decay_lengths, ctx.bootstrap.decay_lengths)


@pytest.mark.parametrize("excluded", [False, True])
def test_a_table_runs_mean_profile_is_its_anchor_block_sums_and_the_brute_force_loops(excluded):
    """The context's mean comes from the anchor-block sums (no second FFT of the table): equal to the O(n²) loop to
    1e-12 at every distance, the last (one pair) included, with excluded (zero) positions too."""
    rng = np.random.default_rng(5)
    n = 1500
    table = np.cumsum(rng.normal(size=(n, 12)), axis=0) * 0.05 + rng.normal(size=(n, 12))  # smooth plus noise
    if excluded:
        table[[3, 700, n - 1]] = 0.0
    ctx = RunContext(None, n_positions=n, max_distance=n - 1, dim=12, options=AnalysisOptions(), table=table)
    with pytest.warns(UserWarning, match="zero") if excluded else contextlib.nullcontext():
        profile = ctx.profile
    assert "anchor_blocks" in ctx.__dict__
    norms = np.linalg.norm(table, axis=1)
    valid = norms > 0
    u = np.where(valid[:, None], table / np.where(valid, norms, 1.0)[:, None], 0.0)
    for k in range(n):
        ok = valid[:n - k] & valid[k:]
        assert profile.n_pairs[k] == ok.sum()
        if ok.any():
            expected = 1.0 if k == 0 else np.mean(np.einsum("ij,ij->i", u[:n - k][ok], u[k:][ok]))
            assert abs(profile.mean_similarity[k] - expected) <= 1e-12, k


def test_the_context_releases_a_generated_table_once_its_unit_rows_exist():
    from poslab.encodings import make_encoding

    calls = []

    class Counting:  # an encoding without a kernel, counting its tables
        kernel = None

        def __init__(self, kind="random"):
            self.encoding = make_encoding(kind)

        def generate(self, n, dim, rng=None):
            calls.append(n)
            return self.encoding.generate(n, dim, rng=rng)

    ctx = RunContext(Counting(), n_positions=64, max_distance=63, dim=4, options=AnalysisOptions(), seed=3)
    table = ctx.table.copy()
    units = ctx.units
    assert "table" not in ctx.__dict__ and ctx.table_dim == 4 and calls == [64]  # released, its width kept
    np.testing.assert_array_equal(ctx.table, table)  # read again: the same table, from the seed
    assert ctx.units is units
    for kept in (RunContext(Counting(), n_positions=64, max_distance=63, dim=4, options=AnalysisOptions(center=True),
                            seed=3),  # the nested windows re-centre from it
                 RunContext(Counting("sinusoidal"), n_positions=64, max_distance=63, dim=4,
                            options=AnalysisOptions()),  # no seed
                 RunContext(None, n_positions=64, max_distance=63, dim=4, options=AnalysisOptions(), seed=3,
                            table=table)):  # given: cannot be regenerated
        kept.units
        assert "table" in kept.__dict__


def test_the_context_normalises_a_generated_table_in_place_only_when_nothing_else_holds_it():
    """A released table's rows are divided in place (no second array of its size), bit for bit the unit rows of
    the same table; an encoding that keeps a reference to its table (a cache) gets it back untouched."""
    from poslab.analysis import unit_rows
    from poslab.encodings import make_encoding

    class Keeping:  # an encoding without a kernel that keeps (or not) what it returned
        kernel = None

        def __init__(self, keep):
            self.encoding, self.keep, self.tables = make_encoding("random"), keep, []

        def generate(self, n, dim, rng=None):
            table = self.encoding.generate(n, dim, rng=rng)
            self.tables.append(table if self.keep else id(table))
            return table

    expected = unit_rows(make_encoding("random").generate(64, 4, rng=np.random.default_rng(3)))
    for keep in (False, True):
        enc = Keeping(keep)
        ctx = RunContext(enc, n_positions=64, max_distance=63, dim=4, options=AnalysisOptions(), seed=3)
        units = ctx.units
        np.testing.assert_array_equal(units.vectors, expected.vectors)
        if keep:  # untouched, and the unit rows are a new array
            np.testing.assert_array_equal(enc.tables[0], make_encoding("random").generate(
                64, 4, rng=np.random.default_rng(3)))
            assert not np.shares_memory(units.vectors, enc.tables[0])
        else:  # the generated array itself
            assert id(units.vectors) == enc.tables[0]


def test_the_windows_anchor_blocks_made_beside_the_runs_give_the_same_window_analyses():
    """With the window-sensitivity stage still to run, the nested windows' anchor-block sums are made right after the
    run's (in its working arrays): the same summaries, replicates and intervals as made in the window stage."""
    from poslab.encodings import make_encoding
    from poslab.stages import build_stages

    options = AnalysisOptions(n_resamples=40)
    encoding = make_encoding("smoothed_random", length_scale=5.0)
    ahead = RunContext(encoding, n_positions=800, max_distance=799, dim=8, options=options, seed=2)
    ahead.pending = tuple(build_stages(options))
    ahead.anchor_blocks
    assert sorted(ahead.window_blocks) == [(200, 199), (400, 399)]
    later = RunContext(encoding, n_positions=800, max_distance=799, dim=8, options=options, seed=2)
    later.anchor_blocks
    assert later.window_blocks == {}
    for a, b in zip(ahead.window_analyses, later.window_analyses, strict=True):
        np.testing.assert_equal(a.summaries.values, b.summaries.values)
        np.testing.assert_equal(a.replicates, b.replicates)
        np.testing.assert_equal(a.intervals, b.intervals)
        assert (a.n_positions, a.max_distance, a.block_length) == (b.n_positions, b.max_distance, b.block_length)
    assert ahead.window_blocks == {}  # handed over to the window stage


def test_every_table_and_column_has_a_dtype_unit_and_description():
    for table in TABLES.values():
        assert table.description and table.row
        for col in table.columns:
            assert col.description and col.dtype in ("int", "Int64", "float", "str", "bool")


def test_a_window_without_a_valid_pair_is_a_failed_run_not_widths_beyond_it():
    """Issue 11: n_positions = 2, dim = 1 reported band widths '> 1' with no valid pair (sin 0 = 0 at position 0)."""
    from poslab.cli import _summary_text
    from poslab.study import parse_study

    spec = parse_study({"name": "two", "n_positions": 2, "dim": 1,
                        "encodings": [{"kind": "sinusoidal"}, {"kind": "random"}]})
    with pytest.warns(UserWarning, match="zero or non-finite"):
        summary = run_study(spec, progress=False, executor="serial").summary
    sinusoidal, random = summary.iloc[0], summary.iloc[1]
    assert sinusoidal["status"] == "failed"
    assert "no pair of valid positions within distances 1..1: 1 of 2 positions have zero or non-finite vectors" \
        in sinusoidal["message"]
    # issue 13: two points (distances 0 and 1) are too few to summarise: a status with its reason, never a number
    assert random["status"] == "ok" and pd.isna(random["band_width_0p5"])
    assert random["summary_notes"].startswith("every summary: too_few_points (2 distances with a finite value")
    text = _summary_text(summary)
    assert "> 1" not in text and "too_few_points" in text
