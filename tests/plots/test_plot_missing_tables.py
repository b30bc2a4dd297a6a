"""`poslab plot` applies one rule to every table: a table the study wrote that is gone is refused (exit 2),
naming the file and the figures drawn from it, and nothing in the folder changes (issue 12 QA: a missing
inv_freq.csv silently removed its figure and exited 0, a missing profiles.csv exited 2)."""

import json
import shutil

import pytest
from click.testing import CliRunner

from poslab.cli import main
from poslab.plots import FIGURE_TABLES, STUDY_FIGURES

STUDY = """
name = "plotrule"
n_positions = 64
dim = 8

[analysis]
heatmap_bins = 8
n_resamples = 40

[[encodings]]
kind = "sinusoidal"

[[encodings]]
kind = "rotary"
rope_theta = 100
"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plotrule")
    (folder / "s.toml").write_text(STUDY)
    result = CliRunner().invoke(main, ["run", str(folder / "s.toml"), "--out", str(folder / "res"), "--no-progress"])
    assert result.exit_code == 0, result.output
    return folder / "res"


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_every_figure_declares_its_tables():
    assert set(FIGURE_TABLES) == set(STUDY_FIGURES)
    assert FIGURE_TABLES["rope_geometry.png"] == ("inv_freq", "rope_decay")
    assert "profiles" in FIGURE_TABLES["decay_curves.png"]


def _tables(finished):
    return json.loads((finished / "manifest.json").read_text())["tables"]


@pytest.mark.parametrize("table", ["inv_freq.csv", "profiles.csv", "comparison.csv", "summaries.csv", "kernel_heads.csv"])
def test_a_missing_table_is_refused_naming_it_and_its_figures(finished, tmp_path, table):
    assert table in _tables(finished)
    out = tmp_path / "res"
    shutil.copytree(finished, out)
    (out / table).unlink()
    before = _snapshot(out)
    result = CliRunner().invoke(main, ["plot", str(out)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert f"lacks {table}" in result.output and "restore it, or run the study again" in result.output
    figures = [f for f, needs in FIGURE_TABLES.items() if table.removesuffix(".csv") in needs]
    for figure in figures:
        assert figure in result.output
    assert _snapshot(out) == before  # no figure removed or redrawn, manifest untouched


def test_a_complete_folder_is_redrawn_with_exit_0(finished, tmp_path):
    out = tmp_path / "res"
    shutil.copytree(finished, out)
    (out / "rope_geometry.png").unlink()
    result = CliRunner().invoke(main, ["plot", str(out)])
    assert result.exit_code == 0, result.output
    assert (out / "rope_geometry.png").is_file() and (out / "decay_curves.png").is_file()
