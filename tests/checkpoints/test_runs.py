"""Training-run snapshots: learned(source=RUN_DIR, step=N) and step = "all" in study files."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from poslab.cli import main
from poslab.encodings import make_encoding
from poslab.study import StudyError, load_study, run_study
from poslab.stages import run_stage

STEPS = [0, 5, 20]


def _source(enc, n_positions):
    """The learned_source stage's summary columns of a run."""
    return run_stage("learned_source", enc, n_positions).summary


@pytest.fixture
def run_dir(tmp_path, wpe):
    """A tiny run folder in the training contract's layout; step s holds GPT-2 rows s..s+15, 32 columns."""
    run = tmp_path / "run"
    (run / "positions").mkdir(parents=True)
    for s in STEPS:
        np.save(run / "positions" / f"step_{s:07d}.npy", wpe[s : s + 16, :32])
    (run / "poslab_train.json").write_text(json.dumps({"format": "poslab-train-run", "version": 1, "steps": STEPS,
                                                       "context_length": 16, "d_model": 32}))
    return run


def test_step_selects_the_snapshot(run_dir, wpe):
    enc = make_encoding("learned", source=str(run_dir), step=5)
    np.testing.assert_array_equal(enc.generate(16, 1), wpe[5:21, :32])
    assert enc.label == f"learned(source={run_dir}, step=5)"
    assert _source(enc, 16)["tensor"] == "positions/step_0000005.npy"
    with pytest.raises(KeyError, match="has no step 6; saved steps: 0, 5, 20"):
        make_encoding("learned", source=str(run_dir), step=6).generate(4, 1)
    with pytest.raises(ValueError, match="is a training run.*choose step = one of 0, 5, 20"):
        make_encoding("learned", source=str(run_dir)).generate(4, 1)
    with pytest.raises(ValueError, match="step = 5 is only for training-run folders"):
        make_encoding("learned", source=str(run_dir / "positions" / "step_0000005.npy"), step=5).generate(4, 1)
    (run_dir / "positions" / "step_0000020.npy").unlink()
    with pytest.raises(FileNotFoundError, match="lists step 20 but .*step_0000020.npy is missing"):
        make_encoding("learned", source=str(run_dir), step=20).generate(4, 1)


def test_bad_run_file(run_dir):
    (run_dir / "poslab_train.json").write_text(json.dumps({"format": "poslab-train-run", "version": 1, "steps": [5, 0]}))
    with pytest.raises(ValueError, match="sorted list of distinct"):
        make_encoding("learned", source=str(run_dir), step=5).generate(4, 1)
    (run_dir / "poslab_train.json").write_text(json.dumps({"format": "poslab-train-run", "version": 2, "steps": [0]}))
    with pytest.raises(ValueError, match="version 2 is not supported"):
        make_encoding("learned", source=str(run_dir), step=0).generate(4, 1)


def test_step_all_expands_to_every_saved_step(run_dir, wpe):
    study = run_dir.parent / "s.toml"
    study.write_text('name = "steps"\nn_positions = 16\ndim = 8\n[[encodings]]\nkind = "learned"\n'
                     'source = "run"\nstep = "all"\n[analysis]\nmodels = ["exponential"]\nheatmap_bins = 4\n')
    spec = load_study(study)
    assert [e.step for e in spec.encodings] == STEPS
    result = run_study(spec, progress=False)
    assert result.summary["step"].tolist() == STEPS and (result.summary["status"] == "ok").all()
    prof = result.profiles[result.profiles["distance"] == 1]
    for s, got in zip(STEPS, prof["mean_similarity"]):
        u = wpe[s : s + 16, :32].astype(float)
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        assert got == pytest.approx(np.mean(np.sum(u[:-1] * u[1:], axis=1)), abs=1e-12)
    study.write_text('name = "steps"\nn_positions = 16\ndim = 8\n[[encodings]]\nkind = "learned"\n'
                     'source = "gpt2"\nstep = "all"\n')
    with pytest.raises(StudyError, match=r"entry 1 \(kind = 'learned'\): step = \"all\" needs source = one training-run"):
        load_study(study)


def test_inspect_a_run(run_dir):
    result = CliRunner().invoke(main, ["inspect", str(run_dir)])
    assert result.exit_code == 0
    assert result.output.splitlines()[:2] == [f"{run_dir}: poslab training run, 3 saved step(s)",
                                              "  step 0: positions/step_0000000.npy"]
