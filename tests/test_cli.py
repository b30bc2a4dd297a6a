from click.testing import CliRunner

from poslab.cli import main
from poslab.data import bundled_path

SMALL = """
name = "cli_small"
n_positions = 64
dim = 16
seeds = [0, 1]

[[encodings]]
kind = "sinusoidal"

[[encodings]]
kind = "random"
"""


def test_encodings_lists_every_kind_with_parameters_and_defaults():
    out = CliRunner().invoke(main, ["encodings"]).output
    for text in ["sinusoidal", "learned", "random", "rotary", "base: a finite number, default 10000.0",
                 "source: a string, required", "rope_theta: a finite number > 1, or omitted (None), default: from config, else 10000", "one run per seed"]:
        assert text in out


def test_run_writes_refuses_overwrite_and_redraws(tmp_path):
    study = tmp_path / "s.toml"
    study.write_text(SMALL)
    out = tmp_path / "res"
    runner = CliRunner()
    first = runner.invoke(main, ["run", str(study), "--out", str(out), "--no-progress"])
    assert first.exit_code == 0, first.output
    assert "sinusoidal" in first.output and (out / "profiles.csv").is_file()
    before = (out / "profiles.csv").read_bytes()
    again = runner.invoke(main, ["run", str(study), "--out", str(out), "--no-progress"])
    assert again.exit_code == 2 and "pass --overwrite to replace it, or choose another --out" in again.output
    assert "overwrite=True" not in again.output  # the flag, not the Python keyword
    assert (out / "profiles.csv").read_bytes() == before
    assert runner.invoke(main, ["run", str(study), "--out", str(out), "--overwrite", "--no-progress"]).exit_code == 0
    (out / "decay_curves.png").unlink()
    assert runner.invoke(main, ["plot", str(out)]).exit_code == 0
    assert (out / "decay_curves.png").stat().st_size > 0


def test_bad_study_fails_before_any_work(tmp_path):
    study = tmp_path / "bad.toml"
    study.write_text(SMALL + '\n[[encodings]]\nkind = "rotary"\nrope_theta = "big"\n')
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "res")])
    assert result.exit_code != 0
    assert "bad.toml" in result.output and "entry 3 (kind = 'rotary')" in result.output and "rope_theta must be a finite number > 1, or omitted (None), got 'big'" in result.output
    assert not (tmp_path / "res").exists()


def test_failed_runs_exit_nonzero_but_results_are_written(tmp_path, monkeypatch):
    import numpy as np

    monkeypatch.chdir(tmp_path)
    table = np.ones((64, 8))
    table[::2] = 0.0  # half the positions are zero vectors: reported and excluded, the run succeeds
    np.save(tmp_path / "half_zero.npy", table)
    np.save(tmp_path / "all_zero.npy", np.zeros((64, 8)))  # nothing left: the run fails
    study = tmp_path / "s.toml"
    study.write_text(SMALL + '\n[[encodings]]\nkind = "learned"\nsource = "half_zero.npy"\n'
                     '\n[[encodings]]\nkind = "learned"\nsource = "all_zero.npy"\n')
    out = tmp_path / "res"
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(out), "--no-progress"])
    assert result.exit_code == 1
    assert "1 of 5 runs failed" in result.output and "zero or non-finite" in result.output
    assert "warning: learned(source=half_zero.npy): 32 of 64 positions have zero or non-finite vectors" in result.output
    import pandas as pd

    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["status"]) == ["ok", "ok", "ok", "ok", "failed"]
    assert summary["excluded_positions"].iloc[3] == ";".join(str(i) for i in range(0, 64, 2))


def test_plot_refuses_a_folder_without_tables(tmp_path):
    result = CliRunner().invoke(main, ["plot", str(tmp_path)])
    assert result.exit_code == 2 and result.output == (
        f"Error: {tmp_path} is not a poslab results folder (no manifest.json); give the folder poslab run wrote "
        "(--out, default results/<study name>)\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "manifest.json").write_text("{}")
    result = CliRunner().invoke(main, ["plot", str(tmp_path)])  # results/ instead of results/NAME: named
    assert result.exit_code == 2 and "(no manifest.json); the results folders in it are mine; give" in result.output


def test_a_missing_study_file_says_where_it_looked_and_what_to_give(tmp_path, monkeypatch):
    from poslab.study import default_study_path

    monkeypatch.chdir(tmp_path)
    packaged = default_study_path().parent
    result = CliRunner().invoke(main, ["run", "nope.toml"])
    assert result.exit_code == 2 and result.output == (
        f"Error: no study file nope.toml (looked for {tmp_path / 'nope.toml'}); give the path of a study TOML file "
        f"(README: Study files), e.g. one of the packaged studies in {packaged}\n")
    result = CliRunner().invoke(main, ["run", "rope_scaling.toml"])  # a packaged study's name, from elsewhere
    assert result.exit_code == 2 and (f"the packaged study of that name is {packaged / 'rope_scaling.toml'}: give "
                                      "that path") in result.output
    assert list(tmp_path.iterdir()) == []


def test_default_study_end_to_end_from_any_folder(tmp_path, monkeypatch, gpt2_table):
    """`poslab run` with no argument: the packaged default study, real GPT-2 table, every output."""
    import json

    import numpy as np
    import pandas as pd

    from poslab.encodings import sinusoidal_frequencies

    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["run", "--no-progress"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "results" / "compare_encodings"
    assert {p.name for p in out.iterdir()} >= {"summary.csv", "profiles.csv", "decay_metrics.csv", "summaries.csv",
                                               "heatmaps.csv", "similarity_heatmaps.png", "decay_curves.png",
                                               "manifest.json"}
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary["label"]) == ["learned(source=gpt2)", "sinusoidal", "random", "random", "random",
                                      "rotary(rope_theta=500000, rotary_dim=128)", "learned(source=trained-char-lm)"]
    # sinusoidal and rotary are analysed from their exact kernels: no table generated, table_dim empty
    assert list(summary["table_dim"].fillna(0).astype(int)) == [768, 0, 768, 768, 768, 0, 128]
    assert list(summary["n_positions"]) == [1024] * 6 + [256]
    profiles = pd.read_csv(out / "profiles.csv", low_memory=False)
    # sinusoidal rows equal the closed form (2/d) Σ cos(k ω_i)
    sin = profiles[profiles["label"] == "sinusoidal"]
    omega = sinusoidal_frequencies(768)
    expected = (2 / 768) * np.cos(np.outer(sin["distance"], omega)).sum(axis=1)
    np.testing.assert_allclose(sin["mean_similarity"], expected, atol=1e-12)
    # GPT-2 rows come from the real table: distance 1 is the mean cosine of neighbouring rows
    u = gpt2_table / np.linalg.norm(gpt2_table, axis=1, keepdims=True)
    gpt2 = profiles[profiles["label"] == "learned(source=gpt2)"].set_index("distance")
    assert abs(gpt2.loc[1, "mean_similarity"] - np.mean(np.sum(u[:-1] * u[1:], axis=1))) < 1e-14
    # random: no decay length; sinusoidal and RoPE: a scale-free log law (no decay length either); the others one
    assert summary.loc[summary["kind"] == "random", "decay_length"].isna().all()
    scale_free = summary["kind"].isin(["sinusoidal", "rotary"])
    assert (summary.loc[scale_free, "selected_model"] == "log_law").all()
    # the table trained here: its profile is that of the bundled 256 x 128 table, recomputed directly
    trained = np.load(bundled_path("trained-char-lm")).astype(np.float64)
    t = trained / np.linalg.norm(trained, axis=1, keepdims=True)
    mine = profiles[profiles["label"] == "learned(source=trained-char-lm)"].set_index("distance")
    assert mine.index.max() == 255
    for k in (1, 2, 86):
        assert abs(mine.loc[k, "mean_similarity"] - np.mean(np.sum(t[:-k] * t[k:], axis=1))) < 1e-13
    assert summary.loc[~summary["kind"].isin(["random", "sinusoidal", "rotary"]), "decay_length"].notna().all()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["study"] == "compare_encodings" and manifest["seeds"] == [0, 1, 2]


def test_an_empty_out_is_refused_and_an_interrupt_prints_no_empty_line(tmp_path, monkeypatch):
    """QA report item 5: `--out ''` meant the working folder, silently; ^C's message came after an empty line."""
    import poslab.study

    monkeypatch.chdir(tmp_path)
    for command in (["run", "--out", ""], ["run", "--out", "  "], ["train", "--out", ""]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 2 and "Invalid value for '--out': is empty" in result.output, result.output
    assert list(tmp_path.iterdir()) == []

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(poslab.study, "load_study", interrupt)
    result = CliRunner().invoke(main, ["run", "--out", str(tmp_path / "out")])
    assert result.exit_code == 130 and result.output.startswith("interrupted; nothing half-written"), result.output


def test_one_run_is_read_from_the_study_file_alone(tmp_path):
    """poslab run starts no fork server for a study that surely has one run (it runs in poslab's own process)."""
    from poslab.cli import _one_run

    def study(text):
        path = tmp_path / "s.toml"
        path.write_text(text)
        return path

    one = 'name = "s"\nn_positions = 64\ndim = 8\n\n[[encodings]]\nkind = "rotary"\nrope_theta = 100.0\n'
    assert _one_run(study(one))
    assert not _one_run(study(one + '\n[[encodings]]\nkind = "sinusoidal"\n'))  # two entries
    assert not _one_run(study(one.replace("100.0", "[100.0, 1000.0]")))  # a list: several runs
    assert not _one_run(study('seeds = [0, 1]\n' + one))
    assert not _one_run(study("not toml ["))
    assert not _one_run(tmp_path / "missing.toml") and not _one_run(None)  # the default study has several runs


def test_the_command_exits_with_its_status_and_all_its_output(tmp_path):
    """``python -m poslab`` (the console script's entry) ends without the interpreter's teardown: every line is
    still printed, the exit status is the command's, and a closed pipe ends it quietly with 141."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "poslab", "encodings"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.rstrip().endswith(")") and "sinusoidal" in done.stdout
    assert len(done.stdout.splitlines()) > 20 and not done.stderr
    done = subprocess.run([sys.executable, "-m", "poslab", "run", str(tmp_path / "none.toml")], capture_output=True,
                          text=True)
    assert done.returncode == 2 and "no study file" in done.stderr
    reader = subprocess.Popen([sys.executable, "-m", "poslab", "encodings"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
    reader.stdout.close()  # the reader has gone before the first line: `poslab encodings | true`
    assert reader.wait(timeout=60) == 141
    assert reader.stderr.read() == b""  # no "internal error", no "Exception ignored"


def test_the_command_sets_its_process_settings_unless_the_user_has(monkeypatch):
    """The ``poslab`` command sets OPENBLAS_THREAD_TIMEOUT and NUMPY_MADVISE_HUGEPAGE before numpy loads (its
    workers inherit them); a value the user has set is kept."""
    import os
    import types

    import pytest

    from poslab import cli

    assert cli.PROCESS_SETTINGS == {"OPENBLAS_THREAD_TIMEOUT": "4", "NUMPY_MADVISE_HUGEPAGE": "0",
                                    "ARROW_DEFAULT_MEMORY_POOL": "system"}
    monkeypatch.delenv("OPENBLAS_THREAD_TIMEOUT", raising=False)
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    monkeypatch.setattr(cli, "main", lambda **kwargs: None)
    monkeypatch.setattr(cli, "atexit", types.SimpleNamespace())  # no exit handlers to run: a plain sys.exit
    with pytest.raises(SystemExit):
        cli.entry()
    assert os.environ["OPENBLAS_THREAD_TIMEOUT"] == "4" and os.environ["NUMPY_MADVISE_HUGEPAGE"] == "1"


def test_a_learned_table_without_a_finite_row_is_refused_before_any_work(tmp_path, monkeypatch):
    """QA: an all-NaN table gave exit 1 and a failed row after the run; now exit 2 and nothing written."""
    import numpy as np

    monkeypatch.chdir(tmp_path)

    np.save(tmp_path / "nan.npy", np.full((64, 8), np.nan))
    study = tmp_path / "s.toml"
    study.write_text(SMALL + '\n[[encodings]]\nkind = "learned"\nsource = "nan.npy"\n')
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "res"), "--no-progress"])
    assert result.exit_code == 2 and "entry 3 (kind = 'learned'): learned(source=nan.npy): the stored table holds no " \
                                     "finite row" in result.output
    assert not (tmp_path / "res").exists()


def test_the_run_header_states_the_sizes_every_run_has(tmp_path, monkeypatch):
    """QA: the header printed the study's n_positions and dim even when entries analyse fewer positions or a
    learned table keeps its own width."""
    import numpy as np

    from poslab.cli import _sizes
    from poslab.study import parse_study

    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "t.npy", np.random.default_rng(0).normal(size=(64, 8)))
    study = tmp_path / "s.toml"
    study.write_text(SMALL + '\n[[encodings]]\nkind = "learned"\nsource = "t.npy"\nn_positions = 32\n'
                     "\n[analysis]\nn_resamples = 0\n")
    result = CliRunner().invoke(main, ["run", str(study), "--out", "res", "--no-progress", "--executor", "serial"])
    assert result.exit_code == 0, result.output
    assert "study cli_small: 4 runs, 32-64 positions (per entry), dim 16 (learned: its own width) -> res\n" \
        in result.output
    def sizes(*entries):
        spec = parse_study({"name": "s", "n_positions": 64, "dim": 16, "encodings": list(entries)})
        return _sizes(spec, spec.runs())
    assert sizes({"kind": "sinusoidal"}) == "64 positions, dim 16"
    assert sizes({"kind": "learned", "source": "t.npy"}) == "64 positions, each run's own width (learned)"
    assert sizes({"kind": "alibi"}) == "64 positions"  # a bias has no width


def test_a_ctrl_c_that_python_drops_still_stops_the_command(monkeypatch):
    """A signal handler's exception raised inside a ``__del__`` or weakref callback (an import's module-lock
    callback, while the workers start) is printed "Exception ignored" and dropped by Python: Ctrl-C was lost and
    ``poslab run`` waited for its runs (tests/faults: 1 time in 11 under load). The main thread's waits raise it
    again: the run thread's (here), the worker processes' and the figures'."""
    import signal
    import sys
    import time

    import pytest

    from poslab import _signals, cli

    class Dropped:
        def __del__(self):
            cli._interrupt(signal.SIGINT, None)

    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)  # what Python prints, unprinted here
    with _signals.command():
        Dropped()  # deleted at once: its KeyboardInterrupt is dropped
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            cli._in_a_thread(lambda: time.sleep(20))
        assert time.monotonic() - start < 10
    Dropped()  # outside a command nothing is kept
    assert not _signals._pending
    cli._in_a_thread(lambda: None)


def test_a_dropped_ctrl_c_stops_the_worker_processes_too(tmp_path, monkeypatch):
    """The same through a study on worker processes: their wait raises the kept KeyboardInterrupt, the workers are
    stopped and nothing is written."""
    import sys
    import time

    import pytest

    from poslab import _signals
    from poslab.study import parse_study, run_study

    spec = parse_study({"name": "s", "n_positions": 64, "dim": 8, "seeds": [0, 1, 2, 3],
                        "analysis": {"n_resamples": 0}, "encodings": [{"kind": "random"}]})
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: None)
    with _signals.command():
        _signals._pending[:] = [KeyboardInterrupt]  # as cli._interrupt leaves it when Python dropped the raise
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            run_study(spec, progress=False, executor="processes", jobs=2)
        assert time.monotonic() - start < 60


def test_a_dropped_signal_prints_no_traceback():
    """The console script's unraisable hook: a KeyboardInterrupt kept for raising again prints nothing; anything
    else, or with nothing kept, goes to the previous hook as before."""
    import types

    from poslab import _signals

    seen = []
    hook = _signals.unraisable_hook(seen.append)
    kept = types.SimpleNamespace(exc_value=KeyboardInterrupt())
    other = types.SimpleNamespace(exc_value=ValueError("x"))
    with _signals.command():
        _signals._pending[:] = [KeyboardInterrupt]
        hook(kept)
        hook(other)
        assert seen == [other]
    hook(kept)  # the command has ended: nothing kept
    assert seen == [other, kept]


def test_a_signal_in_a_deferred_step_is_raised_when_it_is_done():
    """A worker's launch is not cut in two by Ctrl-C (it printed the half-launched worker's EOFError traceback):
    the command's signal is kept meanwhile and raised at the step's end; outside a command nothing is deferred."""
    import signal

    import pytest

    from poslab import _signals, cli

    done = []
    with _signals.command():
        with pytest.raises(KeyboardInterrupt):
            with _signals.deferred():
                cli._interrupt(signal.SIGINT, None)  # returns: kept
                done.append("launched")
        assert done == ["launched"]
    with pytest.raises(KeyboardInterrupt):
        with _signals.deferred():
            cli._interrupt(signal.SIGINT, None)  # no command: raised at once
            done.append("not reached")
    assert done == ["launched"]
