"""The bundled trained run (poslab/data/trained_char_lm) and the emergence study: no torch needed."""

import hashlib
import json
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from poslab.analysis import band_metrics, similarity_profile
from poslab.data import BUNDLED_TABLES, bundled_path
from poslab.encodings import make_encoding
from poslab.study import load_study, run_study
from poslab.training import load_corpus

DATA = Path(str(resources.files("poslab.data")))
RUN = DATA / "trained_char_lm"
STEPS = [0, 30, 100, 200, 400, 800, 1500]
FINAL_VAL_LOSS = 1.5366545170545578  # measured: poslab_train.json of the bundled run
TRAINED_WIDTHS = [1, 2, 86]  # measured: first distance below 0.9 / 0.5 / 0.0 (brute force)
STUDY = Path(str(resources.files("poslab").joinpath("studies", "learned_emergence.toml")))


def _brute_profile(table):
    unit = table / np.linalg.norm(table, axis=1, keepdims=True)
    s = unit @ unit.T
    return np.array([np.mean(np.diagonal(s, k)) for k in range(len(table))])


def _first_below(profile, threshold):
    below = np.nonzero(profile < threshold)[0]
    return int(below[0]) if len(below) else None


def test_bundled_run_follows_the_contract():
    meta = json.loads((RUN / "poslab_train.json").read_text())
    assert (meta["format"], meta["version"], meta["steps"]) == ("poslab-train-run", 1, STEPS)
    assert (meta["context_length"], meta["d_model"], meta["layers"], meta["heads"], meta["batch_size"]) == (256, 128, 2, 4, 32)
    assert (meta["total_steps"], meta["seed"], meta["threads"]) == (1500, 0, 1)
    assert meta["corpus"] == "tinyshakespeare" and meta["corpus_sha256"] == load_corpus().sha256
    assert meta["final_val_loss"] == pytest.approx(FINAL_VAL_LOSS, abs=5e-5)
    assert sorted(p.name for p in (RUN / "positions").iterdir()) == [f"step_{s:07d}.npy" for s in STEPS]
    val = [row["val_loss"] for row in meta["losses"]]
    assert val[0] == pytest.approx(np.log(65), abs=0.05) and val == sorted(val, reverse=True)


def test_trained_char_lm_is_the_final_snapshot_with_provenance():
    path = bundled_path("trained-char-lm")
    assert "trained-char-lm" in BUNDLED_TABLES
    assert path.read_bytes() == (RUN / "positions" / "step_0001500.npy").read_bytes()
    table = np.load(path)
    assert table.dtype == np.float32 and table.shape == (256, 128) and np.isfinite(table).all()
    provenance = (DATA / "PROVENANCE.md").read_text()
    assert hashlib.sha256(path.read_bytes()).hexdigest() in provenance
    assert "poslab train --out" in provenance and f"{FINAL_VAL_LOSS:.4f}" in provenance


def test_the_trained_table_has_a_band_and_its_initialisation_has_none():
    table = make_encoding("learned", source="trained-char-lm").generate(256, 1)
    brute = _brute_profile(table)
    profile = similarity_profile(table)
    np.testing.assert_allclose(profile.mean_similarity, brute, atol=1e-12)
    widths = band_metrics(profile, (0.9, 0.5, 0.0)).to_frame().set_index("threshold")["width"]
    assert [_first_below(brute, t) for t in (0.9, 0.5, 0.0)] == TRAINED_WIDTHS
    assert [None if np.isnan(w) else int(w) for w in widths.loc[[0.9, 0.5, 0.0]]] == TRAINED_WIDTHS
    start = np.load(RUN / "positions" / "step_0000000.npy").astype(np.float64)
    assert _first_below(_brute_profile(start), 0.5) == 1  # random N(0, 0.02^2) rows: no band


def test_emergence_study_reads_every_bundled_step(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = load_study(STUDY)
    steps = [enc.step for enc in spec.encodings if enc.kind == "learned"]
    assert steps == STEPS
    assert spec.n_positions == 256


def test_emergence_study_and_figure(tmp_path, monkeypatch):
    from poslab.plots import STUDY_FIGURES

    monkeypatch.chdir(tmp_path)
    spec = load_study(STUDY)
    result = run_study(spec, progress=False, executor="serial")
    summary = result.summary
    assert (summary["status"] == "ok").all()
    learned = summary[summary["kind"] == "learned"].sort_values("step")
    assert learned["step"].astype(int).tolist() == STEPS
    final = learned.iloc[-1]
    assert [int(final[f"band_width_{t}"]) for t in ("0p9", "0p5", "0")] == TRAINED_WIDTHS
    # issue 13: the initialisation's profile is flat (noise after distance 1): a status, not a width of 1
    assert pd.isna(learned.iloc[0]["band_width_0p5"])
    assert learned.iloc[0]["summary_notes"].startswith("every summary: flat")
    fig = STUDY_FIGURES["band_emergence.png"]({"summary": summary}, None)
    decay_ax, band_ax = fig.axes
    (curve,) = [line for line in decay_ax.get_lines() if line.get_label() == "decay length"]
    np.testing.assert_array_equal(curve.get_xdata(), STEPS)
    np.testing.assert_allclose(np.asarray(curve.get_ydata(), float), learned["decay_length"].astype(float))
    widths = {line.get_label(): np.asarray(line.get_ydata(), float) for line in band_ax.get_lines()}
    np.testing.assert_allclose(widths["width at 0.5"], learned["band_width_0p5"].astype(float))
    assert STUDY_FIGURES["band_emergence.png"]({"summary": summary[summary["kind"] != "learned"]}, None) is None
