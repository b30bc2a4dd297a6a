"""Studies: TOML spec → runs → tables → results folder.

Every name is imported on first use (PEP 562), so ``import poslab.study.executors`` (what ``poslab run`` needs to
start its workers' fork server before anything else) does not import the analysis, pandas or matplotlib; the
results folder's functions bring matplotlib and seaborn, which worker processes (they import
poslab.study.runner) never need.
"""

from .._lazy import lazy_exports

#: Public name -> the submodule that defines it.
_EXPORTS = {
    "AnalysisOptions": "spec",
    "ResultsExistError": "results",
    "Run": "spec",
    "StudyError": "spec",
    "StudyResult": "runner",
    "StudySpec": "spec",
    "analyse_table": "runner",
    "load_study": "spec",
    "parse_study": "spec",
    "read_results": "results",
    "run_study": "runner",
    "write_figures": "results",
    "write_results": "results",
}

__all__ = sorted([*_EXPORTS, "default_study_path"])

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)


def default_study_path():
    """Path of the packaged default study ``compare_encodings.toml``."""
    from importlib import resources
    from pathlib import Path

    return Path(str(resources.files("poslab").joinpath("studies", "compare_encodings.toml")))
