"""Every result traceable to what was read: the Hub repo and snapshot commit, and the learned table's fingerprint."""

import hashlib
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from poslab.cli import main
from poslab.encodings import make_encoding
from poslab.stages import run_stage
from poslab.study import parse_study, run_study

from .conftest import COMMIT

OTHER = "0123456789abcdef0123456789abcdef01234567"
GPT2 = {"model_type": "gpt2", "n_positions": 24}
LLAMA = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": 500000.0}


@pytest.fixture
def camembert(tmp_path, make_model, wpe):
    cfg = {"model_type": "camembert", "max_position_embeddings": 20, "pad_token_id": 1}
    return make_model(tmp_path / "camembert", cfg, {"embeddings.position_embeddings.weight": wpe[:20, :8]})


def _summary(tmp_path, entries: str):
    spec = parse_study(__import__("tomllib").loads(f'name = "p"\nn_positions = 8\ndim = 8\n{entries}'),
                       source=str(tmp_path / "s.toml"))
    return run_study(spec, progress=False, executor="serial").summary.set_index("label")


def test_hub_id_and_cache_forms_record_repo_and_commit(hub_cache, tmp_path, camembert, make_cache, wpe):
    """QA: source = "org/camembert" (HF_HUB_CACHE, offline) ran, but no output held the snapshot commit."""
    repo = make_cache(hub_cache, "org/camembert", camembert)
    snap = repo / "snapshots" / COMMIT
    sources = ["org/camembert", f"org/camembert@{COMMIT}", str(repo), str(snap), str(snap / "model.safetensors"),
               str(snap / "config.json")]
    for source in sources:
        got = run_stage("model_revision", make_encoding("learned", source=source), 8).summary
        assert got["source_repo"] == "org/camembert" and got["source_revision"] == COMMIT, source
    got = run_stage("model_revision", make_encoding("learned", source=str(camembert)), 8).summary
    assert got["source_repo"] is None and got["source_revision"] is None and len(got["table_sha256"]) == 64
    assert run_stage("model_revision", make_encoding("learned", source="gpt2"), 8).summary["source_repo"] is None
    summary = _summary(tmp_path, '[[encodings]]\nkind = "learned"\nsource = "org/camembert"\n'
                                 f'[[encodings]]\nkind = "learned"\nsource = "{camembert}"\n')
    row = summary.loc["learned(source=org/camembert)"]
    assert (row["source_repo"], row["source_revision"], row["status"]) == ("org/camembert", COMMIT, "ok")
    assert summary.loc[f"learned(source={camembert})", ["source_repo", "source_revision"]].tolist() == ["", ""]
    out = CliRunner().invoke(main, ["inspect", "org/camembert"])
    assert out.exit_code == 0, out.output
    assert f"Hub repo org/camembert, revision {COMMIT} (refs/main)" in out.output


def test_the_revision_read_follows_refs_main_and_at_revision(hub_cache, tmp_path, make_model, make_cache, wpe):
    old = make_model(tmp_path / "old", GPT2, {"wpe.weight": wpe[:24]})
    new = make_model(tmp_path / "new", GPT2, {"wpe.weight": wpe[100:124]})
    make_cache(hub_cache, "org/gpt", old, OTHER)
    repo = make_cache(hub_cache, "org/gpt", new, COMMIT)  # refs/main -> COMMIT
    cases = {"org/gpt": COMMIT, f"org/gpt@{OTHER}": OTHER, str(repo): COMMIT}
    for source, commit in cases.items():
        enc = make_encoding("learned", source=source)
        assert run_stage("model_revision", enc, 8).summary["source_revision"] == commit, source
        np.testing.assert_array_equal(enc.generate(8, 1), (wpe[:8] if commit == OTHER else wpe[100:108]))
    (repo / "refs" / "main").write_text(OTHER)  # the cache moves on: the record follows what is read
    assert run_stage("model_revision", make_encoding("learned", source="org/gpt"), 8).summary["source_revision"] == OTHER


def test_rotary_config_from_the_cache_records_its_revision(hub_cache, tmp_path):
    folder = tmp_path / "llama"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(LLAMA))
    from .conftest import write_cache

    repo = write_cache(hub_cache, "org/llama", folder)
    for source in ("org/llama", str(repo), str(repo / "snapshots" / COMMIT / "config.json")):
        got = run_stage("model_revision", make_encoding("rotary", config=source), 8, 16).summary
        assert got == {"source_repo": "org/llama", "source_revision": COMMIT, "table_sha256": None}, source
    plain = run_stage("model_revision", make_encoding("rotary", config=str(folder)), 8, 16).summary
    inline = run_stage("model_revision", make_encoding("rotary"), 8, 16).summary
    assert plain == inline == {"source_repo": None, "source_revision": None, "table_sha256": None}
    summary = _summary(tmp_path, '[[encodings]]\nkind = "rotary"\nconfig = "org/llama"\n')
    assert summary.iloc[0]["source_revision"] == COMMIT and summary.iloc[0]["status"] == "ok"


def test_table_sha256_fingerprints_the_values_read(tmp_path, make_model, wpe):
    """A plain file has no revision: the fingerprint of the stored values traces the result to the table."""
    want = hashlib.sha256(np.asarray(wpe[:24], "<f8").tobytes()).hexdigest()
    np.save(tmp_path / "t.npy", wpe[:24])
    folder = make_model(tmp_path / "m", GPT2, {"wpe.weight": wpe[:24]})
    half = make_model(tmp_path / "h", GPT2, {"wpe.weight": wpe[:24].astype(np.float16)})
    for source in (tmp_path / "t.npy", folder):
        assert run_stage("model_revision", make_encoding("learned", source=str(source)), 8).summary["table_sha256"] == want
    got = run_stage("model_revision", make_encoding("learned", source=str(half)), 8).summary["table_sha256"]
    assert got == hashlib.sha256(np.asarray(wpe[:24].astype(np.float16), "<f8").tobytes()).hexdigest() != want
    bundled = hashlib.sha256(np.asarray(wpe, "<f8").tobytes()).hexdigest()
    assert run_stage("model_revision", make_encoding("learned", source="gpt2"), 8).summary["table_sha256"] == bundled
    out = CliRunner().invoke(main, ["inspect", str(folder)])
    assert out.exit_code == 0 and f"table sha256 {want}" in out.output


def test_a_model_folder_inside_a_snapshot_records_the_snapshot(tmp_path, camembert, make_cache):
    """Repos with one model per subfolder: the subfolder of a snapshot is still that snapshot's revision."""
    repo = tmp_path / "hub" / "models--org--multi"
    sub = repo / "snapshots" / COMMIT / "text_encoder"
    sub.mkdir(parents=True)
    (repo / "blobs").mkdir()
    for file in camembert.iterdir():  # huggingface_hub's layout: links up to the repo's blobs/
        blob = hashlib.sha256(file.read_bytes()).hexdigest()
        (repo / "blobs" / blob).write_bytes(file.read_bytes())
        os.symlink(f"../../../blobs/{blob}", sub / file.name)
    got = run_stage("model_revision", make_encoding("learned", source=str(sub)), 8).summary
    assert (got["source_repo"], got["source_revision"]) == ("org/multi", COMMIT)
