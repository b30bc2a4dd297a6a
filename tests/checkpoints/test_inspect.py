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
