"""The results folder: CSV tables, figures and manifest.json, written atomically.

Everything is written into a temporary sibling folder which is renamed into
place only when complete, so an interrupted or failed write never leaves a
half-written results folder; an existing folder is replaced only with
``overwrite=True``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import shutil
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from .. import __version__
from ..plots import plot_decay_curves, plot_similarity_heatmaps, save_figure
from .runner import TABLES, StudyResult

__all__ = ["ResultsExistError", "write_results", "read_results", "write_figures", "FIGURES"]

_TEXT_COLUMNS = ("message", "selected_model", "excluded_positions")
FIGURES = ("similarity_heatmaps.png", "decay_curves.png")
_KEY_PACKAGES = ("numpy", "scipy", "pandas", "matplotlib", "seaborn", "safetensors", "click", "tqdm")


class ResultsExistError(FileExistsError):
    """The results folder exists and may not be replaced (no overwrite, or not poslab results)."""


def check_writable(out, *, overwrite: bool = False) -> Path:
    """Refuse an existing results folder unless ``overwrite`` (call before any work).

    Even with ``overwrite`` only an empty folder or a poslab results folder
    (one holding ``manifest.json``) is replaced, never the working folder or
    one of its parents.

    Raises
    ------
    ResultsExistError
    """
    out = Path(out)
    if not out.exists():
        return out
    if not overwrite:
        raise ResultsExistError(f"results folder {out} exists; pass --overwrite (overwrite=True) or choose another --out")
    if not out.is_dir():
        raise ResultsExistError(f"{out} exists and is not a folder; choose another --out")
    if Path.cwd().resolve().is_relative_to(out.resolve()):
        raise ResultsExistError(f"{out} is the current folder or one of its parents; choose another --out")
    if any(out.iterdir()) and not (out / "manifest.json").is_file():
        raise ResultsExistError(
            f"{out} is not empty and holds no manifest.json, so it is not a poslab results folder; "
            "--overwrite only replaces poslab results. Choose another --out"
        )
    return out


def _versions() -> dict[str, str]:
    out = {"python": sys.version.split()[0], "poslab": __version__}
    for name in _KEY_PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def manifest(result: StudyResult) -> dict:
    """What ``manifest.json`` records: study file, versions, platform, seeds, timings."""
    spec = result.spec
    return {
        "study": spec.name,
        "study_file": spec.source,
        "study_text": spec.text,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": _versions(),
        "platform": {"system": platform.platform(), "machine": platform.machine(), "processor": platform.processor()},
        "n_positions": spec.n_positions,
        "dim": spec.dim,
        "max_distance": spec.max_distance,
        "seeds": list(spec.seeds),
        "analysis": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(spec.analysis).items()},
        "runs": [{"label": r.label, "kind": r.encoding.kind, "params": r.encoding.params(), "seed": r.seed} for r in spec.runs()],
        "failed_runs": result.summary.loc[result.summary["status"] != "ok", ["label", "seed", "message"]]
        .astype(object).where(lambda f: f.notna(), None).to_dict("records"),
        "timings_seconds": result.timings,
        "tables": [f"{t}.csv" for t in TABLES],
        "figures": list(FIGURES),
    }


def write_figures(tables: dict[str, pd.DataFrame], folder) -> None:
    """Draw the study figures from the tables alone into ``folder``."""
    folder = Path(folder)
    if not len(tables["heatmaps"]) and not len(tables["profiles"]):
        raise ValueError("no run of this study succeeded: there is nothing to draw (see summary.csv)")
    if len(tables["heatmaps"]):
        save_figure(plot_similarity_heatmaps(tables["heatmaps"]), folder / FIGURES[0])
    if len(tables["profiles"]):
        save_figure(plot_decay_curves(tables["profiles"]), folder / FIGURES[1])


def write_results(result: StudyResult, out, *, overwrite: bool = False) -> Path:
    """Write the tables, figures and manifest of ``result`` to the folder ``out``.

    Parameters
    ----------
    result : StudyResult
    out : str or Path
        The results folder (created; its parent too).
    overwrite : bool
        Replace an existing folder. Without it an existing folder is an error.

    Returns
    -------
    Path of the written folder.

    Raises
    ------
    ResultsExistError
        ``out`` exists and ``overwrite`` is False. Nothing is written.
    """
    out = check_writable(out, overwrite=overwrite)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)  # mkdtemp makes 0700; results are meant to be shared
    try:
        tables = result.tables()
        for name, frame in tables.items():
            frame.to_csv(tmp / f"{name}.csv", index=False)
        write_figures(tables, tmp)
        (tmp / "manifest.json").write_text(json.dumps(manifest(result), indent=2, default=str) + "\n")
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / out.name)
            try:
                os.replace(tmp, out)
            except BaseException:
                os.replace(old / out.name, out)  # put the previous result back
                raise
            finally:
                shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def read_results(folder) -> dict[str, pd.DataFrame]:
    """Read the CSV tables of a results folder back, with their dtypes.

    Returns
    -------
    dict mapping table name (``summary``, ``profiles``, ``decay_metrics``,
    ``bands``, ``heatmaps``) to DataFrame.

    Raises
    ------
    FileNotFoundError
        ``folder`` is not a poslab results folder.
    """
    folder = Path(folder)
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(f"{folder} is not a poslab results folder (no manifest.json)")
    missing = [f"{name}.csv" for name in TABLES if not (folder / f"{name}.csv").is_file()]
    if missing:
        raise FileNotFoundError(f"results folder {folder} lacks {', '.join(missing)}; run the study again")
    out = {}
    for name in TABLES:
        frame = pd.read_csv(folder / f"{name}.csv", low_memory=False)
        for col in frame.columns:
            if col == "seed" or (name == "bands" and col == "width") or (
                name == "summary" and (col == "table_dim" or col.startswith("band_width_"))
            ):
                frame[col] = frame[col].astype("Int64")
            elif col in _TEXT_COLUMNS:
                frame[col] = frame[col].astype(object).fillna("").astype(str)
        out[name] = frame
    return out
