"""``poslab inspect``: what it lists, and a verdict and exit status that agree with what a study would do."""

import numpy as np
import pytest
from click.testing import CliRunner
from safetensors.numpy import save_file

from poslab.cli import main


def inspect(*args):
    return CliRunner().invoke(main, ["inspect", *map(str, args)])


@pytest.mark.parametrize("suffix", [".safetensors", ".npz"])
def test_no_candidate_lists_the_tensors_there_are(tmp_path, wpe, suffix):
    """QA: 'candidate position tensors: none … choose one with key = NAME' without naming any tensor."""
    path = tmp_path / f"two{suffix}"
    arrays = {"foo": wpe[:5, :4].copy(), "bar": wpe[:6, :4].copy()}
    save_file(arrays, str(path)) if suffix == ".safetensors" else np.savez(path, **arrays)
    out = inspect(path)
    assert out.exit_code == 2
    assert "holds 2 tensors: " in out.output and "foo (5, 4) float32" in out.output and "bar (6, 4) float32" in out.output
    # a plain array chosen with key follows the stated rule (row p is position p): no offset to give
    assert ("give offset" in out.output) == (suffix == ".safetensors")


def test_tensor_listing_is_capped_with_a_count(tmp_path, wpe):
    path = tmp_path / "many.safetensors"
    save_file({f"t{i:03d}": wpe[i : i + 2, :4].copy() for i in range(150)}, str(path))
    out = inspect(path)
    assert out.exit_code == 2 and "holds 150 tensors: t000 (2, 4) float32;" in out.output
    assert "t019 (2, 4)" in out.output and "t020 (2, 4)" not in out.output and "… and 130 more" in out.output


def _study_refusal(source) -> str | None:
    """What a one-entry study on ``learned source = SOURCE`` says when it refuses (None when it parses)."""
    from poslab.study import StudyError, parse_study

    data = {"name": "q", "n_positions": 2, "dim": 8, "encodings": [{"kind": "learned", "source": str(source)}]}
    try:
        parse_study(data)
    except StudyError as exc:
        return str(exc).split("(kind = 'learned'): ", 1)[1]
    return None


def test_inspect_refuses_whatever_a_study_refuses_with_the_same_message(tmp_path, make_model, wpe):
    """QA: a model_type 'mystery' checkpoint exited 0 from inspect; the study refused it (offset unknown)."""
    cases = {
        "mystery": make_model(tmp_path / "mystery", {"model_type": "mystery", "max_position_embeddings": 16},
                              {"embeddings.position_embeddings.weight": wpe[:16, :8]}),
        "no config": make_model(tmp_path / "bare", None, {"a.position_embeddings.weight": wpe[:16, :8]}),
        "grid too large": make_model(tmp_path / "vit", {"model_type": "vit", "image_size": 32, "patch_size": 8},
                                     {"embeddings.position_embeddings": wpe[None, :10, :8]}),
        "gpt2": make_model(tmp_path / "gpt2", {"model_type": "gpt2", "n_positions": 16}, {"wpe.weight": wpe[:16, :8]}),
    }
    refused = set()
    for name, folder in cases.items():
        refusal, out = _study_refusal(folder), inspect(folder)
        assert out.exit_code == (0 if refusal is None else 2), (name, refusal, out.output)
        assert refusal is None or refusal in out.output, (name, refusal, out.output)
        assert "Traceback" not in out.output
        refused |= {name} if refusal else set()
    assert refused == {"mystery", "grid too large"}  # a lone tensor without config: the stated rule, row p = p


def test_inspect_shows_how_rotary_reads_a_config(tmp_path):
    """A config.json alone is no learned table: inspect says how rotary config = reads it (exit 0), or why not (exit 2)."""
    import json

    good, bad = tmp_path / "llama", tmp_path / "broken"
    good.mkdir(), bad.mkdir()
    (good / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                                                  "rope_theta": 500000.0}))
    (bad / "config.json").write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 0}))
    out = inspect(good)
    assert out.exit_code == 0, out.output
    assert "no learned position table: the model's positions are RoPE" in out.output
    assert f"kind = \"rotary\", config = {str(good)!r}" in out.output
    assert "rope_type 'default', rope_theta 500000, head_dim 16" in out.output
    from poslab.encodings import make_encoding

    with pytest.raises(ValueError) as refused:
        make_encoding("rotary", config=str(bad))
    out = inspect(bad)
    assert out.exit_code == 2 and f"refused: {refused.value}" in out.output


def test_inspect_refuses_an_empty_source():
    """An empty argument is not the working folder (QA: `poslab inspect ""` listed the folder's files)."""
    out = inspect("")
    assert out.exit_code == 2 and "the source is empty" in out.output and "Traceback" not in out.output


def test_inspect_refuses_a_config_without_rope_naming_what_it_found(tmp_path):
    """QA: an unknown model_type with no RoPE key printed a generic 'rope_theta 10000' inventory before refusing,
    and the error spoke only of weights. The refusal comes first (what was found, what to write), no defaults."""
    import json

    folder = tmp_path / "mystery"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "mystery", "hidden_size": 64,
                                                    "num_attention_heads": 4, "num_hidden_layers": 2}))
    out = inspect(folder)
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "model_type 'mystery'" in out.output and "names no RoPE key" in out.output
    assert "rope_theta = 10000.0" in out.output  # what to write
    assert "rope_theta 10000" not in out.output  # no inventory of the defaults it refuses
    assert "holds no weights file" in out.output and "nor RoPE from its config" in out.output


def test_inspect_names_mrope_for_a_config_with_an_mrope_section():
    """QA: Qwen3-VL's config was read as 1-D RoPE only; its study entry is kind = "mrope" (say what to write)."""
    from pathlib import Path

    config = Path(__file__).parents[2] / "src" / "poslab" / "data" / "configs" / "qwen3-vl-8b-instruct.json"
    out = inspect(config)
    assert out.exit_code == 0, out.output
    assert "mrope_section 24,20,20" in out.output
    assert f"kind = \"mrope\", config = {str(config)!r}" in out.output and "kind = \"rotary\"" in out.output


def test_a_source_that_is_nothing_names_what_is_accepted(tmp_path, monkeypatch):
    """A name that is neither bundled, a path nor a Hub id: the bundled names and the other forms are listed."""
    from click.testing import CliRunner

    from poslab.cli import main

    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(main, ["inspect", "nope"])
    assert out.exit_code == 2 and out.output.startswith(
        "Error: 'nope' is neither a bundled table (gpt2, gpt1, ") and "nor a Hub id ORG/NAME[@REVISION]; give one of these" in out.output
