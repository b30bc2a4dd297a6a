import json

import numpy as np
import pandas as pd
import pytest

from poslab.plots import STUDY_FIGURES
from poslab.stages.schema import RUN_ID, with_run_columns
from poslab.study import ResultsExistError, load_study, read_results, run_study, write_results
from poslab.study.runner import analyse_table

STUDY = """
name = "small"
n_positions = 128
dim = 32
seeds = [0, 1]

[analysis]
heatmap_bins = 16

[[encodings]]
kind = "sinusoidal"

[[encodings]]
kind = "random"

[[encodings]]
kind = "rotary"
rotary_dim = 16

[[encodings]]
kind = "learned"
source = "gpt2"
"""

FILES = {"summary.csv", "profiles.csv", "decay_metrics.csv", "summaries.csv", "window_sensitivity.csv", "heatmaps.csv",
         "similarity_heatmaps.png", "decay_curves.png", "manifest.json",
         # uncertainty and literature properties (every study)
         "properties.csv", "bootstrap.csv", "comparison.csv", "comparison_pairs.csv", "decay_lengths.png",
         # rotary runs
         "inv_freq.csv", "rope_decay.csv", "rope_geometry.png",
         # kernel runs (sinusoidal, rotary): each head's reach
         "kernel_heads.csv"}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("study")
    (folder / "small.toml").write_text(STUDY)
    spec = load_study(folder / "small.toml")
    result = run_study(spec, progress=False)
    out = write_results(result, folder / "results" / "small")
    return spec, result, out


def test_every_output_written(study):
    spec, result, out = study
    written = {p.name for p in out.iterdir()}
    assert FILES <= written and written - FILES <= set(STUDY_FIGURES)  # and figures of stages its runs have
    assert all((out / f).stat().st_size > 0 for f in written)
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp folders left


def test_tables_hold_the_analysis(study, gpt2_table):
    spec, result, out = study
    s = result.summary
    assert list(s["label"]) == ["sinusoidal", "random", "random", "rotary(rotary_dim=16)", "learned(source=gpt2)"]
    assert list(s["seed"].astype(object).where(s["seed"].notna(), None)) == [None, 0, 1, None, None]
    assert (s["status"] == "ok").all()
    assert list(s["table_dim"].fillna(0)) == [0, 32, 32, 0, 768]  # kernel runs (sinusoidal, rotary) generate no table
    # profiles: the real GPT-2 rows, recomputed directly
    p = result.profiles[result.profiles["label"] == "learned(source=gpt2)"]
    direct = analyse_table(gpt2_table[:128], max_distance=127).profile
    np.testing.assert_allclose(p["mean_similarity"], direct.mean_similarity, atol=0)
    assert list(p["n_pairs"]) == list(128 - np.arange(128))
    # parameters recorded once per run in summary (and in every row of the full-key tables); the profiles carry
    # the run's identifier only, and get them back by joining on it
    assert set(s["source"].dropna()) == {"gpt2"} and set(result.decay_metrics["source"].dropna()) == {"gpt2"}
    assert list(result.profiles.columns[:4]) == list(RUN_ID) and "source" not in result.profiles
    joined = with_run_columns(result.profiles, s, ["source", "base"])
    assert set(joined["source"].dropna()) == {"gpt2"} and len(joined) == len(result.profiles)
    assert set(joined.loc[joined["kind"] == "sinusoidal", "base"]) == {10000.0}
    assert (joined.loc[joined["label"] == "learned(source=gpt2)", "source"] == "gpt2").all()
    # decay: one row per run x model, exactly one selected where any fit is ok
    d = result.decay_metrics[result.decay_metrics["target"] == "profile"]
    assert len(d) == 5 * 6  # six decay models, the log law included
    for (label, seed), g in d.groupby(["label", "seed"], dropna=False):
        assert g["selected"].sum() == int((g["status"] == "ok").any())
    # summaries: two default thresholds and four more summaries per run (issue 13: the zero crossing is its own)
    assert len(result.summaries) == 5 * 6
    assert {"band_width_0p9", "band_width_0p5", "zero_crossing", "integral_scale"} <= set(s.columns)


def test_csv_reads_back_to_the_same_numbers(study):
    spec, result, out = study
    back = read_results(out)
    for name, frame in result.tables().items():
        pd.testing.assert_frame_equal(back[name], frame, check_dtype=False, check_exact=True)


def test_manifest(study):
    spec, result, out = study
    m = json.loads((out / "manifest.json").read_text())
    assert m["study_text"] == STUDY and m["seeds"] == [0, 1]
    assert {"python", "numpy", "scipy", "pandas", "matplotlib", "seaborn", "poslab"} <= set(m["versions"])
    assert m["timings_seconds"]["total"] > 0 and len(m["runs"]) == 5


def test_refuses_to_overwrite_and_overwrites_when_asked(study):
    spec, result, out = study
    before = (out / "summary.csv").read_bytes()
    with pytest.raises(ResultsExistError, match=r"pass --overwrite \(overwrite=True\) to replace it") as refused:
        write_results(result, out)
    assert refused.value.cli_message == f"results folder {out} exists; pass --overwrite to replace it, or choose another --out"
    assert (out / "summary.csv").read_bytes() == before
    written = {p.name for p in out.iterdir()}
    write_results(result, out, overwrite=True)
    assert {p.name for p in out.iterdir()} == written
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]


def test_failed_write_leaves_nothing(study, monkeypatch, tmp_path):
    spec, result, out = study
    import poslab.study.results as res

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(res, "write_figures", boom)
    with pytest.raises(RuntimeError):
        write_results(result, tmp_path / "new")
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(RuntimeError):
        write_results(result, out, overwrite=True)
    assert (out / "summary.csv").is_file()  # the old result is intact


def test_failed_run_is_a_row_and_the_study_goes_on(tmp_path, monkeypatch):
    (tmp_path / "s.toml").write_text(STUDY)
    spec = load_study(tmp_path / "s.toml")
    from poslab.encodings.sinusoidal import Sinusoidal

    def broken(self, n, d, rng):
        raise FloatingPointError("overflow in a user encoding")

    monkeypatch.setattr(Sinusoidal, "_generate", broken)
    monkeypatch.setattr(Sinusoidal, "kernel", lambda self, *args: None)  # the table path (no exact kernel)
    result = run_study(spec, progress=False, executor="serial")  # a patch in this process: workers import afresh
    row = result.summary.iloc[0]
    assert row["status"] == "failed" and "overflow in a user encoding" in row["message"]
    assert (result.summary["status"].iloc[1:] == "ok").all()
    assert "sinusoidal" not in set(result.profiles["label"])


def test_overwrite_only_replaces_poslab_results(study, tmp_path, monkeypatch):
    spec, result, out = study
    thesis = tmp_path / "important"
    thesis.mkdir()
    (thesis / "thesis.tex").write_text("my thesis")
    with pytest.raises(ResultsExistError, match="not a poslab results folder"):
        write_results(result, thesis, overwrite=True)
    assert (thesis / "thesis.tex").read_text() == "my thesis"
    monkeypatch.chdir(thesis)
    with pytest.raises(ResultsExistError, match="current folder"):
        write_results(result, ".", overwrite=True)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (write_results(result, empty, overwrite=True) / "manifest.json").is_file()


def test_results_folder_is_readable_by_others(study):
    import os

    spec, result, out = study
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o777 & ~umask


def test_non_utf8_and_non_finite_values(tmp_path):
    from poslab.study import StudyError

    (tmp_path / "bin.toml").write_bytes(b'name = "bin"\n\xff\xfe garbage')
    with pytest.raises(StudyError, match="not a text file in UTF-8"):
        load_study(tmp_path / "bin.toml")
    (tmp_path / "inf.toml").write_text(STUDY.replace('kind = "sinusoidal"', 'kind = "sinusoidal"\nbase = inf'))
    with pytest.raises(StudyError, match="entry 1.*base must be a finite number, got inf"):
        load_study(tmp_path / "inf.toml")


def test_unreadable_table_files_are_named(tmp_path):
    from poslab.study import StudyError

    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    (tmp_path / "corrupt.npy").write_bytes(b"\x93NUMPY garbage")
    for name, what in (("objects.npy", r"holds Python objects \(dtype object\), not numbers"), ("corrupt.npy", "numpy.save")):
        (tmp_path / "s.toml").write_text(STUDY + f'\n[[encodings]]\nkind = "learned"\nsource = "{name}"\n')
        with pytest.raises(StudyError, match=rf"entry 5 \(kind = 'learned'\): cannot read .*{name}.*{what}"):
            load_study(tmp_path / "s.toml")


def test_unnormalised_out_path_cannot_replace_a_folder(study, tmp_path):
    spec, result, out = study
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "thesis.txt").write_text("thesis")
    with pytest.raises(ResultsExistError, match="exists"):
        write_results(result, tmp_path / "newdir" / ".." / "victim")
    assert (victim / "thesis.txt").read_text() == "thesis"


def test_a_manifest_json_alone_does_not_make_a_results_folder(study, tmp_path):
    spec, result, out = study
    webapp = tmp_path / "webapp"
    webapp.mkdir()
    (webapp / "manifest.json").write_text('{"name": "my app"}')
    (webapp / "index.html").write_text("<html/>")
    with pytest.raises(ResultsExistError, match="not a poslab results folder"):
        write_results(result, webapp, overwrite=True)
    assert (webapp / "index.html").is_file()
    (out / "notes.txt").write_text("a user's file inside a results folder")
    with pytest.raises(ResultsExistError, match="not a poslab results folder"):
        write_results(result, out, overwrite=True)
    (out / "notes.txt").unlink()


def test_every_run_failing_still_writes_the_summary(tmp_path):
    np.save(tmp_path / "zeros.npy", np.zeros((64, 8)))
    (tmp_path / "s.toml").write_text('name = "z"\nn_positions = 64\ndim = 8\n[[encodings]]\nkind = "learned"\n'
                                     'source = "zeros.npy"\n')
    result = run_study(load_study(tmp_path / "s.toml"), progress=False)
    assert list(result.summary["status"]) == ["failed"] and "zero or non-finite" in result.summary["message"][0]
    out = write_results(result, tmp_path / "res")
    assert {p.name for p in out.iterdir()} == {f"{t}.csv" for t in ("summary", "profiles", "decay_metrics",
                                                                     "summaries", "heatmaps")} | {"manifest.json"}
    back = read_results(out)
    assert back["summary"]["status"].tolist() == ["failed"] and len(back["profiles"]) == 0


def test_bad_model_files_and_names(tmp_path):
    from poslab.study import StudyError

    import json
    import struct

    # a float8 safetensors file, written by the format's spec: u64 header size, JSON header, data
    header = json.dumps({"wpe": {"dtype": "F8_E4M3", "shape": [8, 4], "data_offsets": [0, 32]}}).encode()
    header += b" " * (-len(header) % 8)
    (tmp_path / "f8.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + bytes(32))
    (tmp_path / "corrupt.npz").write_bytes(b"PK\x03\x04 not a zip")
    for name, pattern in [("f8.safetensors", "dtype F8_E4M3 has no numpy equivalent"),
                          ("corrupt.npz", "cannot read .*corrupt.npz")]:
        (tmp_path / "s.toml").write_text(f'name = "b"\nn_positions = 4\ndim = 4\n[[encodings]]\nkind = "learned"\n'
                                         f'source = "{name}"\n')
        with pytest.raises(StudyError, match=pattern):
            load_study(tmp_path / "s.toml")
    for bad in ["..", ".", ".hidden"]:
        (tmp_path / "n.toml").write_text(f'name = "{bad}"\nn_positions = 4\ndim = 4\n[[encodings]]\nkind = "random"\n')
        with pytest.raises(StudyError, match="name must be a folder name"):
            load_study(tmp_path / "n.toml")
    (tmp_path / "bom.toml").write_bytes('\ufeffname = "bom"\nn_positions = 4\ndim = 4\n[[encodings]]\nkind = "random"\n'
                                        .encode("utf-8"))
    assert load_study(tmp_path / "bom.toml").name == "bom"


def test_garbage_tables_are_named_when_read_back(study, tmp_path):
    import shutil

    spec, result, out = study
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    (copy / "profiles.csv").write_text("this,is\nnot,a table\n")
    with pytest.raises(ValueError, match="profiles.csv lacks column"):
        read_results(copy)


def test_kind_specific_stages_add_summary_columns_and_tables(tmp_path):
    """Stages that apply to some runs only (a vision table's grid) add their columns and tables, read back."""
    (tmp_path / "s.toml").write_text('name = "x"\nn_positions = 729\ndim = 8\n[analysis]\nn_resamples = 0\n'
                                     '[[encodings]]\nkind = "learned"\nsource = "siglip-so400m"\n'
                                     '[[encodings]]\nkind = "sinusoidal"\n')
    result = run_study(load_study(tmp_path / "s.toml"), progress=False)
    assert result.summary["grid_shape"].tolist() == ["27x27", ""] and result.summary["row_offset"].tolist()[0] == 0
    assert set(result.grid_profiles["label"]) == {"learned(source=siglip-so400m)"}
    assert len(result.grid_maps) == 27 * 27
    out = write_results(result, tmp_path / "out")
    back = read_results(out)
    columns = ["label", "metric", "distance", "mean_similarity", "n_pairs"]
    pd.testing.assert_frame_equal(back["grid_profiles"][columns], result.grid_profiles[columns], check_dtype=False)
    assert back["summary"]["grid_shape"].tolist() == ["27x27", ""]
    write_results(result, out, overwrite=True)  # a folder with the extra tables is still ours to replace


def test_no_resamples_gives_the_same_analysis_without_intervals(tmp_path):
    """[analysis] n_resamples = 0: same profiles, fits and widths; interval columns empty, no bootstrap.csv."""
    text = ('name = "nr"\nn_positions = 96\ndim = 16\n[analysis]\nheatmap_bins = 8\n{}'
            '[[encodings]]\nkind = "sinusoidal"\n[[encodings]]\nkind = "learned"\nsource = "gpt2"\n')
    (tmp_path / "a.toml").write_text(text.format(""))
    (tmp_path / "b.toml").write_text(text.format("n_resamples = 0\n"))
    full = run_study(load_study(tmp_path / "a.toml"), progress=False)
    bare = run_study(load_study(tmp_path / "b.toml"), progress=False)
    pd.testing.assert_series_equal(full.profiles["mean_similarity"], bare.profiles["mean_similarity"])
    np.testing.assert_array_equal(full.summary["decay_length"], bare.summary["decay_length"])
    np.testing.assert_array_equal(full.summary["band_width_0p5"], bare.summary["band_width_0p5"])
    assert list(bare.summary["ci_method"]) == ["exact", "none"]  # a kernel run is exact without resamples too
    assert list(bare.summary.columns) == list(full.summary.columns)  # the same columns, the intervals empty
    assert bare.summary[[c for c in bare.summary.columns if c.endswith(("_ci_low", "_ci_high"))]].isna().all().all()
    assert full.summary["decay_length_ci_low"].notna().any()
    out = write_results(bare, tmp_path / "out")
    assert not (out / "bootstrap.csv").exists() and (out / "decay_lengths.png").is_file()


def test_a_long_table_written_by_two_threads_is_the_file_written_in_one_piece(tmp_path, monkeypatch):
    import pyarrow as pa
    import pyarrow.csv as pacsv

    from poslab.study import results

    rng = np.random.default_rng(3)
    n = 1001
    frame = pd.DataFrame({"label": pd.array(["rotary(rope_theta=10000)"] * n, dtype="str"),
                          "seed": pd.array([None] * n, dtype="Int64"), "distance": np.arange(n),
                          "mean_similarity": rng.normal(size=n), "fitted_similarity": np.where(rng.random(n) < .1,
                                                                                                np.nan, 1 / 3)})
    monkeypatch.setattr(results, "_CSV_SPLIT_ROWS", 10)  # 1001 rows: the split path, an odd half
    results.write_csv(frame, tmp_path / "split.csv")
    pacsv.write_csv(pa.table({c: results._arrow_column(frame[c]) for c in frame.columns}), str(tmp_path / "one.csv"))
    assert (tmp_path / "split.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.csv", "split.csv"]  # the second half's file removed


def test_a_run_asks_numpy_for_small_pages_and_restores_its_setting(tmp_path, monkeypatch):
    """run_study switches numpy's huge-page advice off (small_pages) and back on after, also when nested or raising;
    a process that had it off keeps it off."""
    from poslab.study import runner

    setting = runner._madvise_hugepage()
    before = setting(True)
    try:
        seen = []
        execute = runner.execute_run
        monkeypatch.setattr(runner, "execute_run", lambda *a, **k: (seen.append(setting(False)), setting(seen[-1]),
                                                                    execute(*a, **k))[2])
        (tmp_path / "pages.toml").write_text('name = "pages"\nn_positions = 32\ndim = 8\n\n[[encodings]]\n'
                                             'kind = "sinusoidal"\n')
        run_study(load_study(tmp_path / "pages.toml"), progress=False, executor="serial")
        assert seen == [False] and setting(True) is True
        with pytest.raises(KeyError), runner.small_pages():
            with runner.small_pages():
                pass
            assert setting(False) is False
            raise KeyError
        assert setting(False) is True
        with runner.small_pages():  # off before: left off
            pass
        assert setting(False) is False
    finally:
        setting(before)


def test_threads_take_short_gil_turns_during_a_run_and_the_interval_is_restored(tmp_path, monkeypatch):
    """run_study and write_results shorten the GIL's switch interval (short_gil_turns) and restore it, also when
    nested or raising."""
    import sys

    from poslab.study import runner

    before = sys.getswitchinterval()
    seen = []
    execute = runner.execute_run
    monkeypatch.setattr(runner, "execute_run", lambda *a, **k: (seen.append(sys.getswitchinterval()), execute(*a, **k))[1])
    (tmp_path / "gil.toml").write_text('name = "gil"\nn_positions = 32\ndim = 8\n\n[[encodings]]\nkind = "sinusoidal"\n')
    spec = load_study(tmp_path / "gil.toml")
    result = run_study(spec, progress=False, executor="serial")
    assert seen == [min(runner.GIL_TURN, before)] and sys.getswitchinterval() == before
    with runner.short_gil_turns():
        with runner.short_gil_turns():
            pass
        assert sys.getswitchinterval() == min(runner.GIL_TURN, before)
    with pytest.raises(KeyError), runner.short_gil_turns():
        raise KeyError
    assert sys.getswitchinterval() == before
    write_results(result, tmp_path / "out")
    assert sys.getswitchinterval() == before
