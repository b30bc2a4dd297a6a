"""poslab train: a short run, determinism, the run-folder contract, and reading it back in a study."""

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from poslab.study import load_study, run_study  # noqa: E402
from poslab.training import TrainConfig, load_corpus, train  # noqa: E402

TINY = dict(layers=1, d_model=32, heads=2, context_length=32, batch_size=16, steps=40, lr=3e-3, warmup_steps=5,
            eval_batches=2, snapshot_steps=(0, 10, 20))
SAVED = [0, 10, 20, 40]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    metas = {name: train(TrainConfig(seed=seed, **TINY), root / name, progress=False)
             for name, seed in (("a", 0), ("b", 0), ("c", 1))}
    return root, metas


def test_short_run_writes_the_contract_and_the_loss_falls(runs):
    root, metas = runs
    meta = json.loads((root / "a" / "poslab_train.json").read_text())
    assert meta == metas["a"]
    assert (meta["format"], meta["version"], meta["steps"]) == ("poslab-train-run", 1, SAVED)
    assert {k: meta[k] for k in ("layers", "d_model", "heads", "context_length", "batch_size", "seed")} == \
        {"layers": 1, "d_model": 32, "heads": 2, "context_length": 32, "batch_size": 16, "seed": 0}
    assert meta["total_steps"] == 40 and meta["versions"]["torch"] == torch.__version__
    corpus = load_corpus()
    assert (meta["corpus"], meta["corpus_sha256"], meta["vocab_size"]) == ("tinyshakespeare", corpus.sha256, 65)
    assert [row["step"] for row in meta["losses"]] == SAVED
    first, last = meta["losses"][0], meta["losses"][-1]
    # at initialisation the logits are nearly 0: the loss is that of a uniform guess over 65 characters
    assert first["val_loss"] == pytest.approx(math.log(65), abs=0.05)
    assert first["train_loss"] == pytest.approx(math.log(65), abs=0.05)
    assert last["val_loss"] < first["val_loss"] - 0.8 and last["train_loss"] < first["train_loss"] - 0.8
    assert meta["final_val_loss"] == last["val_loss"]
    assert {p.name for p in (root / "a").iterdir()} == {"poslab_train.json", "positions"}
    files = sorted(p.name for p in (root / "a" / "positions").iterdir())
    assert files == [f"step_{s:07d}.npy" for s in SAVED]
    tables = [np.load(root / "a" / "positions" / f) for f in files]
    for table in tables:
        assert table.dtype == np.float32 and table.shape == (32, 32) and np.isfinite(table).all()
    assert np.std(tables[0]) == pytest.approx(0.02, rel=0.1)  # GPT-2 initialisation N(0, 0.02^2)
    assert not np.array_equal(tables[0], tables[-1])
    assert not any(p.name.startswith(".") for p in root.iterdir())  # no temporary folder left


def test_same_seed_gives_identical_snapshots_and_another_seed_does_not(runs):
    root, metas = runs
    assert [r for r in metas["a"]["losses"]] == [r for r in metas["b"]["losses"]]
    for step in SAVED:
        name = f"positions/step_{step:07d}.npy"
        assert (root / "a" / name).read_bytes() == (root / "b" / name).read_bytes()
        assert not np.array_equal(np.load(root / "a" / name), np.load(root / "c" / name))


def test_torch_settings_are_restored(runs):
    assert not torch.are_deterministic_algorithms_enabled()


def test_snapshots_load_into_a_study(runs, tmp_path, monkeypatch):
    root, _ = runs
    monkeypatch.chdir(tmp_path)
    (root / "study.toml").write_text(
        'name = "emergence"\nn_positions = 32\ndim = 32\nseeds = [0]\n'
        '[[encodings]]\nkind = "learned"\nsource = "a"\nstep = "all"\n'
        '[[encodings]]\nkind = "random"\n'
    )
    spec = load_study(root / "study.toml")
    result = run_study(spec, progress=False)
    summary = result.summary
    assert (summary["status"] == "ok").all()
    learned = summary[summary["kind"] == "learned"].sort_values("step")
    assert learned["step"].astype(int).tolist() == SAVED
    # the study analyses exactly the saved table at each step
    step_40 = learned.loc[learned["step"].astype(int) == 40, "label"].item()  # the step is in summary, once per run
    profile = result.profiles[result.profiles["label"] == step_40]
    table = np.load(root / "a" / "positions" / "step_0000040.npy").astype(np.float64)
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    s = unit @ unit.T
    expected = [np.mean(np.diagonal(s, k)) for k in range(32)]
    np.testing.assert_allclose(profile.sort_values("distance")["mean_similarity"], expected, atol=1e-12)


def test_existing_run_folder_is_refused_without_overwrite(runs):
    from poslab.training import RunExistsError

    root, _ = runs
    before = (root / "a" / "positions" / "step_0000040.npy").read_bytes()
    with pytest.raises(RunExistsError, match="--overwrite"):
        train(TrainConfig(**{**TINY, "steps": 2, "snapshot_steps": None}), root / "a", progress=False)
    assert (root / "a" / "positions" / "step_0000040.npy").read_bytes() == before


def test_a_corpus_too_short_for_the_context_is_an_error(tmp_path):
    text = tmp_path / "short.txt"
    text.write_text("abcdefghij" * 20)  # 200 characters: the validation split has 20
    with pytest.raises(ValueError, match="shorter than one window"):
        train(TrainConfig(**{**TINY, "steps": 2, "snapshot_steps": None}), tmp_path / "run", corpus=text, progress=False)
    assert not (tmp_path / "run").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["short.txt"]


def test_the_bundled_runs_initialisation_is_reproduced(tmp_path):
    from importlib import resources
    from pathlib import Path

    bundled = Path(str(resources.files("poslab.data"))) / "trained_char_lm" / "positions" / "step_0000000.npy"
    config = TrainConfig(context_length=256, d_model=128, layers=2, heads=4, batch_size=32, steps=1, lr=3e-3, seed=0,
                         threads=1, eval_batches=1)
    train(config, tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "positions" / "step_0000000.npy").read_bytes() == bundled.read_bytes()
