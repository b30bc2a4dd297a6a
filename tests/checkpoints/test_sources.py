"""The one resolver: files, folders, cache entries and Hub ids; every derived path confined (issue 11 item 7)."""

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from poslab.checkpoints import SourceError, list_tensors, resolve_model
from poslab.cli import main
from poslab.encodings import make_encoding

from .conftest import COMMIT

GPT2 = {"model_type": "gpt2", "n_positions": 24}


@pytest.fixture
def gpt2_folder(tmp_path, make_model, wpe):
    return make_model(tmp_path / "gpt2", GPT2, {"wpe.weight": wpe[:24], "wte.weight": wpe[100:110]})


def test_every_local_form(tmp_path, gpt2_folder, make_cache):
    repo = make_cache(tmp_path / "hub", "openai-community/gpt2", gpt2_folder)
    snap = repo / "snapshots" / COMMIT
    cases = {
        gpt2_folder: ("model folder", gpt2_folder),
        gpt2_folder / "config.json": ("config file", gpt2_folder),
        gpt2_folder / "model.safetensors": ("weights file", gpt2_folder),
        snap: ("Hugging Face cache snapshot", repo),
        repo: ("Hugging Face cache repo", repo),
        snap / "model.safetensors": ("weights file", repo),
    }
    for source, (what, root) in cases.items():
        m = resolve_model(str(source))
        assert (m.what, m.root) == (what, root), source
        assert m.weights_path.name == "model.safetensors" and m.config_path.name == "config.json"
        assert m.read_config() == GPT2
        if root == repo:
            assert (m.repo_id, m.revision) == ("openai-community/gpt2", COMMIT)


def test_hub_id_from_the_cache_offline(hub_cache, gpt2_folder, make_cache, wpe):
    make_cache(hub_cache, "openai-community/gpt2", gpt2_folder)
    m = resolve_model("openai-community/gpt2")
    assert (m.what, m.repo_id, m.revision, m.requested_revision) == ("Hub id", "openai-community/gpt2", COMMIT, "main")
    assert m.weights_path == hub_cache / "models--openai-community--gpt2" / "snapshots" / COMMIT / "model.safetensors"
    for source in ("openai-community/gpt2", f"openai-community/gpt2@{COMMIT}", "openai-community/gpt2@main"):
        enc = make_encoding("learned", source=source)
        np.testing.assert_array_equal(enc.generate(24, 1), wpe[:24])
    result = CliRunner().invoke(main, ["inspect", "openai-community/gpt2"])
    assert result.exit_code == 0, result.output
    assert "openai-community/gpt2: Hub id" in result.output and "used: wpe.weight" in result.output
    with pytest.raises(FileNotFoundError, match=r"revision 'v2' is not in the cache repo .*snapshots: " + COMMIT):
        resolve_model("openai-community/gpt2@v2")
    with pytest.raises(FileNotFoundError, match=r"(?s)the Hub model facebook/opt-125m is not in the local cache .*"
                                                r"poslab never downloads unless you set HF_HUB_OFFLINE=0.*hf download"):
        make_encoding("learned", source="facebook/opt-125m").generate(4, 1)


def test_hub_id_weights_not_cached_offline(hub_cache, tmp_path, make_cache):
    only_config = tmp_path / "cfg"
    only_config.mkdir()
    (only_config / "config.json").write_text(json.dumps(GPT2))
    make_cache(hub_cache, "org/tiny", only_config)
    m = resolve_model("org/tiny")
    assert m.config_path is not None and m.weights_path is None
    with pytest.raises(FileNotFoundError, match=r"weights of org/tiny are not in the local cache .* never downloads unless you set HF_HUB_OFFLINE=0"):
        make_encoding("learned", source="org/tiny").generate(4, 1)


def test_hf_hub_cache_environment_in_a_fresh_process(tmp_path, gpt2_folder, make_cache):
    """HF_HUB_CACHE / HF_HUB_OFFLINE are read the way huggingface_hub reads them, from the environment."""
    make_cache(tmp_path / "hub", "openai-community/gpt2", gpt2_folder)
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", "from poslab.cli import main; main()", "inspect", "openai-community/gpt2"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "used: wpe.weight" in out.stdout
    env = {**os.environ, "HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}  # HF_HOME/hub
    env.pop("HF_HUB_CACHE", None)
    out = subprocess.run([sys.executable, "-c", "from poslab.cli import main; main()", "inspect", "openai-community/gpt2"], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


# ------------------------------------------------- never the network (QA report, item 1)
@pytest.fixture
def no_network(monkeypatch):
    """Any attempt to reach the Hub fails the test at once."""
    import huggingface_hub

    from poslab.checkpoints import hub

    def refuse(*args, **kwargs):
        raise AssertionError("poslab reached for the network")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", refuse)
    monkeypatch.setattr(huggingface_hub, "get_session", refuse)
    monkeypatch.setattr(hub, "open_hub_weights", refuse)


@pytest.mark.parametrize("source", ["weights/missing.safetensors", "nothere/config.json", "org/x.bin", "org/x.gguf",
                                    "a/b.NPZ", "./org/name", "../org/name", "~/no-such-poslab-dir/m.pt"])
def test_a_source_written_like_a_path_is_never_a_hub_id(hub_cache, no_network, monkeypatch, tmp_path, source):
    from poslab.checkpoints.sources import looks_like_path, parse_hub_id

    monkeypatch.chdir(tmp_path)
    assert looks_like_path(source) and parse_hub_id(source) is None
    tried = os.path.abspath(os.path.expanduser(source))
    with pytest.raises(FileNotFoundError, match=r"looks like a file path, and there is no file or folder " + re.escape(tried)):
        resolve_model(source)
    with pytest.raises(FileNotFoundError, match=re.escape(tried)):
        make_encoding("learned", source=source).generate(4, 1)


@pytest.mark.parametrize("kind, entry", [("learned", 'source = "weights/missing.safetensors"'),
                                         ("rotary", 'config = "nothere/config.json"')])
def test_a_missing_file_in_a_study_is_refused_when_the_study_is_read(tmp_path, no_network, monkeypatch, kind, entry):
    from poslab.study.spec import StudyError, load_study

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    study = tmp_path / "study" / "s.toml"
    study.parent.mkdir()
    study.write_text(f'name = "s"\nn_positions = 8\ndim = 8\n[[encodings]]\nkind = "{kind}"\n{entry}\n')
    monkeypatch.chdir(tmp_path)
    name = entry.split('"')[1]
    with pytest.raises(StudyError, match=re.escape(f"there is no file or folder {study.parent / name}")):
        load_study(study)
    result = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "Retry" not in result.output and str(study.parent / name) in result.output


def test_an_uncached_hub_id_never_reaches_the_network(hub_cache, no_network, monkeypatch):
    """With HF_HUB_OFFLINE unset poslab is offline; only an explicit HF_HUB_OFFLINE=0 lets it download."""
    from huggingface_hub import constants

    from poslab.checkpoints.sources import downloads_allowed

    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # as huggingface_hub reads an unset variable
    assert not downloads_allowed()
    with pytest.raises(FileNotFoundError, match=r"someorg/somemodel is not in the local cache .* poslab never "
                                                r"downloads unless you set HF_HUB_OFFLINE=0.*hf download someorg/somemodel"):
        resolve_model("someorg/somemodel")
    with pytest.raises(ValueError, match=r"never downloads"):
        make_encoding("rotary", config="someorg/somemodel").generate(4, 8)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert downloads_allowed()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)  # huggingface_hub's own offline switch still wins
    assert not downloads_allowed()


# ------------------------------------------------------------- confinement (issue 11 item 7)
@pytest.mark.parametrize("entry", ["../outside.safetensors", "ABSOLUTE"])
def test_shard_entries_stay_in_the_folder(tmp_path, make_model, wpe, entry):
    outside = make_model(tmp_path, None, {"transformer.wpe.weight": wpe[:30]}, "outside.safetensors")
    folder = tmp_path / "model"
    make_model(folder, {"model_type": "gpt2", "n_positions": 30}, {"transformer.wte.weight": wpe[:5]},
               "model-00001-of-00002.safetensors")
    name = str(outside / "outside.safetensors") if entry == "ABSOLUTE" else entry
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "transformer.wte.weight": "model-00001-of-00002.safetensors", "transformer.wpe.weight": name}}))
    with pytest.raises(SourceError, match=r"names the shard .*outside.safetensors.*no absolute path, no '\.\.'"):
        make_encoding("learned", source=str(folder)).generate(4, 1)
    result = CliRunner().invoke(main, ["inspect", str(folder)])
    assert result.exit_code != 0 and "Traceback" not in result.output and "outside.safetensors" in result.output


def test_shard_symlink_escaping_the_folder(tmp_path, make_model, wpe):
    make_model(tmp_path / "elsewhere", None, {"transformer.wpe.weight": wpe[:30]}, "x.safetensors")
    folder = make_model(tmp_path / "model", {"model_type": "gpt2", "n_positions": 30},
                        {"transformer.wte.weight": wpe[:5]}, "model-00001-of-00002.safetensors")
    os.symlink(tmp_path / "elsewhere" / "x.safetensors", folder / "model-00002-of-00002.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "transformer.wte.weight": "model-00001-of-00002.safetensors",
        "transformer.wpe.weight": "model-00002-of-00002.safetensors"}}))
    with pytest.raises(SourceError, match=r"resolves to .*elsewhere/x.safetensors, outside the model folder"):
        list_tensors(folder / "model.safetensors.index.json")


def test_shard_index_naming_itself_or_another_index(tmp_path, make_model, wpe):
    """Issue 11 item 6: an index naming itself recursed until RecursionError."""
    folder = make_model(tmp_path, {"model_type": "gpt2", "n_positions": 30}, {"wpe.weight": wpe[:30]}, "a.safetensors")
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {
        "wpe.weight": "model.safetensors.index.json"}}))
    with pytest.raises(SourceError, match=r"names 'model.safetensors.index.json' as a shard; shards are .safetensors"):
        list_tensors(folder / "model.safetensors.index.json")
    result = CliRunner().invoke(main, ["inspect", str(folder)])
    assert result.exit_code != 0 and "RecursionError" not in result.output and "as a shard" in result.output


def test_refs_main_pointing_outside_the_cache_repo(tmp_path, gpt2_folder, make_cache, make_model, wpe):
    repo = make_cache(tmp_path / "hub", "openai-community/gpt2", gpt2_folder)
    other = make_model(tmp_path / "evil" / "snapshots" / "x", {"model_type": "gpt2", "n_positions": 24},
                       {"wpe.weight": wpe[500:524]})
    for ref in (os.path.relpath(other, repo / "snapshots"), str(other)):
        (repo / "refs" / "main").write_text(ref)
        with pytest.raises(SourceError, match=r"refs/main holds .*expected the name of a snapshot"):
            make_encoding("learned", source=str(repo)).generate(4, 1)
    (repo / "refs" / "main").unlink()  # refs/main itself a link out of the repo
    os.symlink(tmp_path / "evil" / "ref", repo / "refs" / "main")
    (tmp_path / "evil" / "ref").write_text(COMMIT)
    with pytest.raises(SourceError, match=r"refs/main resolves to .*outside the cache repo"):
        resolve_model(str(repo))


def test_snapshot_link_escaping_the_cache_repo(tmp_path, gpt2_folder, make_cache, make_model, wpe):
    repo = make_cache(tmp_path / "hub", "openai-community/gpt2", gpt2_folder)
    snap = repo / "snapshots" / COMMIT
    make_model(tmp_path / "other", None, {"wpe.weight": wpe[500:524]})
    (snap / "model.safetensors").unlink()
    os.symlink(tmp_path / "other" / "model.safetensors", snap / "model.safetensors")
    with pytest.raises(SourceError, match=r"model.safetensors resolves to .*other/model.safetensors, outside the cache repo"):
        make_encoding("learned", source=str(repo)).generate(4, 1)


def test_self_referencing_cache_symlink_is_diagnosed(tmp_path, gpt2_folder, make_cache):
    """Issue 11 item 9: a link loop was reported as 'blobs not downloaded'."""
    repo = make_cache(tmp_path / "hub", "openai-community/gpt2", gpt2_folder)
    link = repo / "snapshots" / COMMIT / "model.safetensors"
    link.unlink()
    os.symlink("model.safetensors", link)  # points to itself
    for source in (repo, link):
        with pytest.raises(FileNotFoundError, match=r"model.safetensors is a symlink loop \(it points to itself"):
            make_encoding("learned", source=str(source)).generate(4, 1)
    result = CliRunner().invoke(main, ["inspect", str(repo)])
    assert result.exit_code != 0 and "symlink loop" in result.output and "not downloaded" not in result.output


def test_deeply_nested_config_json(tmp_path, make_model, wpe):
    """Issue 11 item 6: RecursionError in inspect."""
    folder = make_model(tmp_path, None, {"wpe.weight": wpe[:8]})
    (folder / "config.json").write_text('{"model_type": ' + "[" * 100000 + "]" * 100000 + "}")
    result = CliRunner().invoke(main, ["inspect", str(folder)])
    assert result.exit_code != 0 and "nested too deeply" in result.output and "Traceback" not in result.output
    with pytest.raises(SourceError, match=r"config.json: JSON nested too deeply"):
        make_encoding("learned", source=str(folder)).generate(4, 1)


def test_hub_range_reads_decode_exactly_what_the_header_says(tmp_path, raw_safetensors, monkeypatch):
    """The online path (not exercisable offline): its byte arithmetic, with the Hub replaced by a local file."""
    import struct

    from poslab.checkpoints import hub
    from poslab.checkpoints.files import TensorInfo

    bits = np.array([0x3F80, 0x4049, 0xC2F7, 0x7F80], dtype="<u2").tobytes()
    table = np.arange(12, dtype="<f4").reshape(3, 4)
    path = raw_safetensors(tmp_path / "model.safetensors", {"wte.weight": ("F32", (2, 2), bytes(16)),
                                                             "wpe.weight": ("F32", (3, 4), table.tobytes()),
                                                             "x": ("BF16", (4,), bits)})
    (n,) = struct.unpack("<Q", path.read_bytes()[:8])
    header = json.loads(path.read_bytes()[8 : 8 + n])
    requests = []

    def fake_range(repo_id, revision, filename, start, length):
        requests.append((start, length))
        return path.read_bytes()[start : start + length]

    monkeypatch.setattr(hub, "_range", fake_range)
    weights = hub.HubWeights("org/m", COMMIT,
                             tuple(TensorInfo(k, tuple(v["shape"]), {"F32": "float32", "BF16": "bfloat16"}[v["dtype"]],
                                              "model.safetensors") for k, v in header.items()),
                             tuple(tuple(v["data_offsets"]) for v in header.values()))
    np.testing.assert_array_equal(weights.read("wpe.weight"), table)
    assert requests == [(0, 8), (8 + n + 16, 48)]  # the header length, then only the 48 bytes of the table
    np.testing.assert_array_equal(weights.read("x"), np.array([1.0, 3.140625, -123.5, np.inf], np.float32))


def test_refs_main_value_quoted_whole_or_visibly_cut(tmp_path, gpt2_folder, make_cache):
    """QA: a refs/main value longer than 80 characters was quoted cut short with no mark."""
    repo = make_cache(tmp_path / "hub", "org/escape", gpt2_folder)
    value = "../../" + "x" * 60 + "/snapshots/0123456789abcdef0123456789abcdef01234567"
    (repo / "refs" / "main").write_text(value)
    with pytest.raises(SourceError) as err:
        resolve_model(str(repo))
    assert repr(value) in str(err.value)
    result = CliRunner().invoke(main, ["inspect", str(repo)])
    assert result.exit_code == 2 and repr(value) in result.output
    (repo / "refs" / "main").write_text("y" * 5000)  # a damaged ref: cut, visibly, with its length
    with pytest.raises(SourceError, match=r"holds 'y{199}… \(5002 characters in all\); expected"):
        resolve_model(str(repo))
