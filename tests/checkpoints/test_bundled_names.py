"""A bundled name (gpt2, ...) and a local path of the same name: one rule for study files, inspect and the API.

A bare bundled name that also exists as a path where poslab would look for it is refused as ambiguous;
``./gpt2`` (any name with a path separator) is the path, ``bundled:gpt2`` the bundled table.
"""

import re

import numpy as np
import pytest
from click.testing import CliRunner

from poslab.cli import main
from poslab.encodings import make_encoding
from poslab.study.spec import StudyError, load_study

GPT2 = {"model_type": "gpt2", "n_positions": 64, "n_embd": 32}


@pytest.fixture
def folder(tmp_path, make_model, monkeypatch):
    """A working folder holding a tiny GPT-2 model folder named gpt2 (wpe 64 x 32)."""
    make_model(tmp_path / "gpt2", GPT2, {"transformer.wpe.weight": np.arange(64 * 32, dtype="f4").reshape(64, 32),
                                        "transformer.wte.weight": np.ones((10, 32), "f4")})
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _study(path, source):
    path.write_text(f'name = "s"\nn_positions = 8\ndim = 8\n[[encodings]]\nkind = "learned"\nsource = "{source}"\n')
    return path


def _sha(source):
    out = CliRunner().invoke(main, ["inspect", source])
    assert out.exit_code == 0, out.output
    return out.output.rsplit("table sha256 ", 1)[1].strip()


def test_bare_bundled_name_beside_a_folder_of_that_name_is_refused(folder):
    with pytest.raises(ValueError, match=r'both the bundled table gpt2 .* and the folder .*gpt2.*"\./gpt2" for the '
                                         r'folder, or "bundled:gpt2" for the bundled table'):
        make_encoding("learned", source="gpt2").table()
    out = CliRunner().invoke(main, ["inspect", "gpt2"])
    assert out.exit_code == 2 and "bundled:gpt2" in out.output and "sha256" not in out.output
    with pytest.raises(StudyError, match="both the bundled table gpt2"):
        load_study(_study(folder / "s.toml", "gpt2"))


def test_study_elsewhere_checks_its_own_folder(folder, tmp_path_factory, monkeypatch):
    """The folder beside the study file counts, wherever poslab runs (it used to win there, silently)."""
    monkeypatch.chdir(tmp_path_factory.mktemp("elsewhere"))
    with pytest.raises(StudyError, match="both the bundled table gpt2"):
        load_study(_study(folder / "s.toml", "gpt2"))


def test_dot_slash_is_the_folder_and_bundled_prefix_the_table_everywhere(folder):
    local = make_encoding("learned", source="./gpt2").stored()
    assert local.table.shape == (64, 32) and _sha("./gpt2") == local.sha256
    bundled = make_encoding("learned", source="bundled:gpt2").stored()
    assert bundled.table.shape == (1024, 768) and _sha("bundled:gpt2") == bundled.sha256
    (run,) = load_study(_study(folder / "s.toml", "./gpt2")).runs()
    assert run.encoding.stored().sha256 == local.sha256
    (run,) = load_study(_study(folder / "s.toml", "bundled:gpt2")).runs()
    assert run.encoding.stored().sha256 == bundled.sha256


def test_bare_bundled_name_without_a_path_is_the_bundled_table(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert make_encoding("learned", source="gpt2").stored().sha256 == _sha("gpt2") == _sha("bundled:gpt2")
    with pytest.raises(ValueError, match="no bundled table 'gpt3'"):
        make_encoding("learned", source="bundled:gpt3").table()


@pytest.mark.parametrize("model_type, scheme", [("llama", 'RoPE \\(rotary embeddings\\).*kind = "rotary" with config'),
                                                ("bloom", "ALiBi"), ("t5", "T5 relative position buckets")])
def test_no_learned_table_architectures_say_so(tmp_path, make_model, model_type, scheme):
    """A known architecture without a learned absolute table: say which scheme it uses, offer no tensor to pick."""
    src = make_model(tmp_path / model_type, {"model_type": model_type},
                     {"model.embed_tokens.weight": np.ones((10, 8), "f4"), "model.layers.0.q.weight": np.ones((8, 8), "f4")})
    with pytest.raises(ValueError) as info:
        make_encoding("learned", source=str(src)).table()
    message = str(info.value)
    assert re.search(f"{model_type} uses {scheme}", message), message
    assert "no learned position table" in message
    assert "key = NAME" not in message and "embed_tokens" not in message
