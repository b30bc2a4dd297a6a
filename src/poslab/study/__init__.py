"""Studies: TOML spec → runs → tables → results folder."""

from .runner import StudyResult, analyse_table, run_study
from .spec import AnalysisOptions, Run, StudyError, StudySpec, load_study, parse_study

_RESULTS = ("ResultsExistError", "read_results", "write_figures", "write_results")


def __getattr__(name):
    """The results folder's functions, imported on first use: with them come matplotlib and seaborn, which
    worker processes (they import poslab.study.runner) never need."""
    if name in _RESULTS:
        from . import results

        return getattr(results, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "AnalysisOptions",
    "ResultsExistError",
    "Run",
    "StudyError",
    "StudyResult",
    "StudySpec",
    "analyse_table",
    "default_study_path",
    "load_study",
    "parse_study",
    "read_results",
    "run_study",
    "write_figures",
    "write_results",
]


def default_study_path():
    """Path of the packaged default study ``compare_encodings.toml``."""
    from importlib import resources
    from pathlib import Path

    return Path(str(resources.files("poslab").joinpath("studies", "compare_encodings.toml")))
