import re

import numpy as np
import pytest
from safetensors.numpy import save_file

from poslab.analysis import similarity_profile
from poslab.encodings import make_encoding

from pathlib import Path
from poslab.stages import run_stage

DATA = Path(__file__).parents[1] / "data"

def _source(enc, n_positions):
    """The learned_source stage's summary columns of a run."""
    return run_stage("learned_source", enc, n_positions).summary


def test_gpt2_is_the_real_table(gpt2_table):
    assert gpt2_table.shape == (1024, 768)
    np.testing.assert_allclose(gpt2_table[0, :5], [-0.01882072, -0.1974186, 0.004026725, 0.011346859, 0.06382412], rtol=1e-6)
    # rows 0..63 are bit-identical to an independent fixture regenerated with transformers
    first64 = np.load(DATA / "gpt2_wpe_first64.npy")
    np.testing.assert_array_equal(gpt2_table[:64], first64.astype(np.float64))


def test_gpt2_profile_is_computed_from_it(gpt2_table):
    prof = similarity_profile(gpt2_table, max_distance=3)
    u = gpt2_table / np.linalg.norm(gpt2_table, axis=1, keepdims=True)
    assert prof.mean_similarity[1] == pytest.approx(np.mean(np.sum(u[:-1] * u[1:], axis=1)), abs=1e-14)
    assert 0.9 < prof.mean_similarity[1] < 1.0


# adjacent-row mean cosine as measured in data/PROVENANCE.md
@pytest.mark.parametrize("source, shape, adjacent", [("gpt1", (512, 768), 0.857), ("whisper-tiny", (448, 384), 0.91),
                                                     ("whisper-base", (448, 512), 0.81), ("whisper-small", (448, 768), 0.89)])
def test_bundled_tables(source, shape, adjacent):
    enc = make_encoding("learned", source=source)
    table = enc.generate(shape[0], 1)
    assert table.shape == shape
    prof = similarity_profile(table, max_distance=200)
    assert prof.mean_similarity[1] == pytest.approx(adjacent, abs=0.005)
    assert prof.mean_similarity[200] < prof.mean_similarity[1]


def test_too_many_positions_names_both_numbers():
    with pytest.raises(ValueError, match=r"n_positions=1025.*1024"):
        make_encoding("learned", source="gpt2").generate(1025, 768)
    with pytest.raises(ValueError, match=r"offset=2.*1024"):
        make_encoding("learned", source="gpt2", offset=2).generate(1023, 768)


def test_files_with_key_and_offset(tmp_path, gpt2_table):
    rows = gpt2_table[:50].astype(np.float32)
    np.save(tmp_path / "t.npy", rows)
    np.savez(tmp_path / "t.npz", wpe=rows, other=rows[:3])
    save_file({"transformer.wpe.weight": rows, "transformer.wte.weight": rows[:10]}, str(tmp_path / "t.safetensors"))
    for name, key in [("t.npy", None), ("t.npz", "wpe"), ("t.safetensors", "transformer.wpe.weight"),
                      ("t.safetensors", None)]:  # no key: the only tensor named like a position table
        enc = make_encoding("learned", source=str(tmp_path / name), key=key, offset=2)
        np.testing.assert_array_equal(enc.generate(48, 1), gpt2_table[2:50].astype(np.float32))
        assert _source(enc, 48)["row_offset"] == 2
    save_file({"a": rows, "b": rows[:10]}, str(tmp_path / "two.safetensors"))
    with pytest.raises(ValueError, match=r"no config.json; no float tensor is named like a position table; choose one "
                                         r"with key = NAME \(and give offset = ROW OF POSITION 0\). It holds 2 tensors: a \(50, 768\) float32; b \(10, 768\) float32"):
        make_encoding("learned", source=str(tmp_path / "two.safetensors")).generate(5, 1)
    with pytest.raises(KeyError, match=r"no tensor 'c' in two.safetensors; it holds 2 tensors: a \(50, 768\) float32; b"):
        make_encoding("learned", source=str(tmp_path / "two.safetensors"), key="c").generate(5, 1)
    with pytest.raises(FileNotFoundError, match=r"looks like a file path, and there is no file or folder .*missing.npy"):
        make_encoding("learned", source=str(tmp_path / "missing.npy")).generate(5, 1)
    (tmp_path / "t.bin").write_bytes(b"\x80\x04")  # PyTorch files are read only through weights_only=True
    with pytest.raises(ValueError, match="cannot read .*t.bin"):
        make_encoding("learned", source=str(tmp_path / "t.bin")).generate(5, 1)
    (tmp_path / "t.pkl").write_bytes(b"\x80\x04")
    with pytest.raises(ValueError, match="supported formats are"):
        make_encoding("learned", source=str(tmp_path / "t.pkl")).generate(5, 1)
    np.save(tmp_path / "nan.npy", np.full((4, 3), np.nan))
    with pytest.raises(ValueError, match="NaN or inf"):
        make_encoding("learned", source=str(tmp_path / "nan.npy")).generate(4, 3)


def test_bundled_sources_unchanged_and_recorded(gpt2_table):
    enc = make_encoding("learned", source="gpt2")
    assert enc.label == "learned(source=gpt2)" and enc.offset is None
    assert _source(enc, 1024) == {"tensor": "gpt2_wpe.npy", "source_dtype": "float32", "row_offset": 0,
                                  "grid_shape": None, "prefix_tokens": None,
                                  "position_rule": "bundled table: row p is position p"}
    np.testing.assert_array_equal(make_encoding("learned", source="gpt2", offset=5).generate(3, 1), gpt2_table[5:8])
    with pytest.raises(ValueError, match="bundled table 'gpt2' holds one tensor"):
        make_encoding("learned", source="gpt2", key="wpe").generate(3, 1)
    with pytest.raises(ValueError, match="step is only for training runs .* .gpt2. is a bundled table"):
        make_encoding("learned", source="gpt2", step=3).generate(3, 1)


@pytest.mark.parametrize("distribution", ["gaussian", "uniform"])
def test_random_is_structureless(distribution):
    dim = 256
    table = make_encoding("random", distribution=distribution).generate(1024, dim, rng=np.random.default_rng(3))
    prof = similarity_profile(table, max_distance=100)
    # mean over ~1000 pairs of a variable with sd 1/sqrt(dim): |mean| within 5 standard errors
    se = 1 / np.sqrt(dim * prof.n_pairs[1:])
    assert (np.abs(prof.mean_similarity[1:]) < 5 * se).all()
    np.testing.assert_allclose(prof.std_similarity[1:], 1 / np.sqrt(dim), rtol=0.1)


def test_bundled_training_run_by_name():
    """source = "trained-char-lm" is the run's last step; with step, any saved step of the bundled run."""
    from poslab.data import bundled_path, bundled_run_path
    from poslab.encodings import make_encoding
    from poslab.encodings.learned import Learned

    run = bundled_run_path("trained-char-lm")
    final = make_encoding("learned", source="trained-char-lm").generate(256, 1)
    np.testing.assert_array_equal(final, np.load(bundled_path("trained-char-lm")).astype(np.float64))
    np.testing.assert_array_equal(final, np.load(run / "positions" / "step_0001500.npy").astype(np.float64))
    early = make_encoding("learned", source="trained-char-lm", step=30).generate(256, 1)
    np.testing.assert_array_equal(early, np.load(run / "positions" / "step_0000030.npy").astype(np.float64))
    assert Learned.expand_study_params({"source": "trained-char-lm", "step": "all"})["step"] == [
        0, 30, 100, 200, 400, 800, 1500]
    with pytest.raises(KeyError, match="has no step 31; saved steps: 0, 30, 100, 200, 400, 800, 1500"):
        make_encoding("learned", source="trained-char-lm", step=31).generate(256, 1)


def test_non_finite_rows_refused_only_inside_the_analysed_window(tmp_path):
    from poslab.encodings import make_encoding

    table = np.random.default_rng(0).normal(size=(64, 8))
    table[40] = np.nan
    np.save(tmp_path / "t.npy", table)
    enc = make_encoding("learned", source=str(tmp_path / "t.npy"))
    np.testing.assert_array_equal(enc.generate(32, 1), table[:32])  # row 40 lies outside the window
    with pytest.raises(ValueError, match=r"NaN or inf at 1 analysed position\(s\) \(first: \[40\]\).*smaller n_positions"):
        enc.generate(48, 1)
    with pytest.raises(ValueError, match=r"NaN or inf at 1 analysed position\(s\) \(first: \[40\]\)"):
        enc.check_size(48, 1)  # with the size: a study refuses it before any work


def test_a_table_without_a_finite_row_is_refused_when_the_study_is_read(tmp_path, monkeypatch):
    """QA: an all-NaN learned table was refused only during the run (exit 1, a failed row); the table is read
    when the study is (to check its size), and its analysed rows are checked there too."""
    from poslab.study import StudyError, load_study

    monkeypatch.chdir(tmp_path)  # the label's source is relative to the working folder

    table = np.full((64, 8), np.nan)
    table[50, 3] = 1.0  # one finite value: still no finite row
    np.save(tmp_path / "t.npy", table)
    study = tmp_path / "s.toml"
    study.write_text('name = "s"\nn_positions = 32\ndim = 8\n[[encodings]]\nkind = "sinusoidal"\n'
                     '[[encodings]]\nkind = "learned"\nsource = "t.npy"\n')
    with pytest.raises(StudyError, match="^" + re.escape(
            f"{study}: [[encodings]] entry 2 (kind = 'learned'): learned(source=t.npy): the stored table holds no "
            "finite row (each of its 64 rows holds NaN or inf), so there is nothing to analyse; fix the source table")
            + "$"):
        load_study(study)
    table[40:] = 0.5  # finite rows beyond the window: the window's rows are named, and what to change
    np.save(tmp_path / "t.npy", table)
    with pytest.raises(StudyError, match=r"NaN or inf at 32 analysed position\(s\) \(first: \[0, 1, 2, 3, 4, 5, 6, 7, "
                                         r"8, 9\]\); fix the source table, or analyse a window without them"):
        load_study(study)


def test_a_large_random_table_drawn_run_by_run_is_the_one_call_table(monkeypatch):
    """Drawn in runs of rows (pages touched a run ahead by a second thread): the same table as one call draws."""
    from poslab.encodings import random as random_encoding

    monkeypatch.setattr(random_encoding, "_FILL_ENTRIES", 700)  # 100 rows a run, the last run short
    table = make_encoding("random").generate(1234, 7, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(table, np.random.default_rng(5).standard_normal((1234, 7)))
    assert table.flags.owndata and table.flags.c_contiguous
