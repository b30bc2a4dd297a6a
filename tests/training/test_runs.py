"""The run-folder writer, the settings and the CLI without torch (no torch needed)."""

import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from poslab.cli import main
from poslab.training import RunExistsError, RunWriter, TrainConfig, default_snapshot_steps, parse_steps


def _table(value=1.0):
    return np.full((4, 3), value, dtype=np.float32)


def test_writer_renames_into_place_only_when_finished(tmp_path):
    out = tmp_path / "run"
    with RunWriter(out) as run:
        run.save_snapshot(0, _table(0.5))
        run.save_snapshot(7, _table(2.0))
        assert not out.exists()
        run.finish({"losses": []})
    meta = json.loads((out / "poslab_train.json").read_text())
    assert (meta["format"], meta["version"], meta["steps"]) == ("poslab-train-run", 1, [0, 7])
    assert np.array_equal(np.load(out / "positions" / "step_0000007.npy"), _table(2.0))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize("error", [KeyboardInterrupt, RuntimeError])
def test_an_interrupted_run_leaves_nothing(tmp_path, error):
    with pytest.raises(error), RunWriter(tmp_path / "run") as run:
        run.save_snapshot(0, _table())
        raise error()
    assert list(tmp_path.iterdir()) == []


def test_overwrite_replaces_only_a_run_folder(tmp_path):
    out = tmp_path / "run"
    with RunWriter(out) as run:
        run.save_snapshot(0, _table(1.0))
        run.finish({})
    with pytest.raises(RunExistsError, match="--overwrite"):
        RunWriter(out)
    with RunWriter(out, overwrite=True) as run:
        run.save_snapshot(0, _table(3.0))
        run.finish({})
    assert np.load(out / "positions" / "step_0000000.npy")[0, 0] == 3.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    other = tmp_path / "notes"
    other.mkdir()
    (other / "paper.tex").write_text("x")
    with pytest.raises(RunExistsError, match="not a poslab training run"):
        RunWriter(other, overwrite=True)


def test_writer_refuses_bad_snapshots(tmp_path):
    with RunWriter(tmp_path / "run") as run:
        with pytest.raises(ValueError, match="not finite"):
            run.save_snapshot(0, np.full((4, 3), np.nan, dtype=np.float32))
        run.save_snapshot(5, _table())
        with pytest.raises(ValueError, match="must increase"):
            run.save_snapshot(5, _table())
        with pytest.raises(ValueError, match="differs"):
            run.save_snapshot(6, np.zeros((5, 3), np.float32))
        with pytest.raises(ValueError, match="may not set"):
            run.finish({"steps": [1]})


def test_snapshot_steps():
    assert default_snapshot_steps(1000) == [0, 1, 2, 4, 8, 16, 32, 63, 126, 251, 501, 1000]
    assert TrainConfig(steps=30, snapshot_steps=(10, 5)).saved_steps() == [0, 5, 10, 30]
    assert parse_steps("0, 50,100") == (0, 50, 100)
    with pytest.raises(ValueError, match="comma-separated"):
        parse_steps("0;50")
    with pytest.raises(ValueError, match=r"train: snapshot steps must be a list of values, each an integer in \[0, 30\], got \[40\]"):
        TrainConfig(steps=30, snapshot_steps=(40,))
    with pytest.raises(ValueError, match="multiple of heads"):
        TrainConfig(d_model=30, heads=4)


def test_cli_says_how_to_install_torch_when_it_is_missing(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch now raises ImportError
    result = CliRunner().invoke(main, ["train", "--out", str(tmp_path / "run"), "--steps", "2"])
    assert result.exit_code == 2  # a missing extra is a usage error, refused before any work
    assert "pip install 'poslab[train]'" in result.output
    assert not (tmp_path / "run").exists()


def test_poslab_imports_and_lists_commands_without_torch():
    code = (
        "import sys, importlib.abc\n"
        "class NoTorch(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'torch': raise ImportError('no torch here')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "import poslab, poslab.cli, poslab.study, poslab.training, poslab.plots, poslab.plots.training\n"
        "assert 'torch' not in sys.modules\n"
        "from click.testing import CliRunner\n"
        "r = CliRunner().invoke(poslab.cli.main, ['--help'])\n"
        "assert r.exit_code == 0 and 'train' in r.output, r.output\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
