"""Study files: TOML → validated :class:`StudySpec` → runs (encoding × parameter grid × seed).

A study file::

    name = "compare_encodings"
    n_positions = 1024
    dim = 768
    seeds = [0, 1, 2]
    max_distance = 1023          # optional, default n_positions - 1

    [analysis]                   # optional: settings of the analysis stages (poslab.stages.AnalysisOptions)
    thresholds = [0.9, 0.5, 0.0]
    n_resamples = 200

    [figures]                    # optional: the files written for each figure
    formats = ["png", "pdf"]     # any of png, pdf, svg (default ["png"])
    width = "column"             # "page" (7 in, default) or "column" (3.5 in): the print width

    [[encodings]]
    kind = "sinusoidal"
    layout = ["interleaved", "concatenated"]   # a list expands to one run per value

Everything is checked before any work: unknown keys, unknown kinds and
parameters, wrong types, sizes an encoding cannot produce. Messages name the
file, the ``[[encodings]]`` entry and the valid choices.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re
import tomllib
import warnings
from pathlib import Path
from typing import Any

from .._validation import Choice, Integer, ListOf, Text, ValidationError, check, missing_message
from ..analysis.bootstrap import min_replicates
from ..data import BUNDLED_TABLES, bundled_name
from ..encodings import Encoding, make_encoding
from ..stages import AnalysisOptions, parse_options
from ..encodings.registry import get_encoding_class
from .._figure_settings import FORMATS, WIDTHS, FigureSettings

__all__ = ["MAX_PAIRS", "MAX_RUNS", "StudyError", "StudyWarning", "AnalysisOptions", "Run", "StudySpec", "load_study", "parse_study"]

#: Most runs a study may expand to unless the cap is lifted on purpose (``poslab run --force``,
#: ``parse_study(max_runs=None)``): a typo in a grid (a long list, many seeds) is refused before any work.
MAX_RUNS = 10_000

#: Most pairs of labels ``comparison_pairs`` may compare under the same cap (lifted with it): each pair costs
#: ~170 µs and ~1 KiB (benchmarks/README.md), so 10⁶ pairs (1415 labels) take ~3 minutes and ~1 GiB, and the
#: 8 × 10⁶ pairs of 4000 labels ~25 minutes and ~8 GiB.
MAX_PAIRS = 1_000_000


class StudyError(ValidationError):
    """A study file is invalid; the message names the file, the entry and the fix."""


class StudyWarning(UserWarning):
    """A study is valid but some of its numbers will not mean much (too few resamples or seeds for an interval)."""


@dataclasses.dataclass(frozen=True)
class Run:
    """One unit of work: an encoding at one seed (None for deterministic encodings).

    ``n_positions`` and ``max_distance`` are the run's analysed window: the
    study's, or shorter when the study entry sets its own ``n_positions``.
    """

    encoding: Encoding
    seed: int | None
    n_positions: int
    max_distance: int

    @property
    def label(self) -> str:
        return self.encoding.label


@dataclasses.dataclass(frozen=True)
class StudySpec:
    """A validated study. Build it with :func:`load_study` or :func:`parse_study`."""

    name: str
    n_positions: int
    dim: int
    seeds: tuple[int, ...]
    max_distance: int
    analysis: AnalysisOptions
    encodings: tuple[Encoding, ...]
    source: str = "<dict>"
    text: str = ""
    lengths: tuple[int, ...] = ()
    figures: FigureSettings = FigureSettings()

    def n_positions_of(self, index: int) -> int:
        """Analysed positions of ``encodings[index]``: its entry's ``n_positions``, else the study's."""
        return self.lengths[index] if self.lengths else self.n_positions

    def runs(self) -> list[Run]:
        """Stochastic encodings once per seed, deterministic ones once (seed None)."""
        out = []
        for i, enc in enumerate(self.encodings):
            n = self.n_positions_of(i)
            for seed in self.seeds if enc.stochastic else (None,):
                out.append(Run(enc, seed, n, min(self.max_distance, n - 1)))
        return out


_TOP_KEYS = {"name", "n_positions", "dim", "seeds", "max_distance", "analysis", "encodings", "description", "figures"}

#: The keys of a study's ``[figures]`` table and what each accepts.
_FIGURE_KEYS = {"formats": ListOf(Choice(FORMATS), distinct=True), "width": Choice(tuple(WIDTHS))}


def parse_figures(raw, where: str) -> FigureSettings:
    """A study's ``[figures]`` table (formats, width) → :class:`FigureSettings`; unknown keys and values refused,
    naming the valid ones."""
    if not isinstance(raw, dict):
        raise StudyError(f"{where}: [figures] must be a table (formats = [...], width = \"page\"), got {raw!r}")
    unknown = sorted(set(raw) - set(_FIGURE_KEYS))
    if unknown:
        raise StudyError(f"{where}: [figures] has unknown key(s) {', '.join(unknown)}; valid keys: "
                         f"{', '.join(_FIGURE_KEYS)}")
    values = {key: check(value, _FIGURE_KEYS[key], key, where=f"{where}: [figures]", error=StudyError)
              for key, value in raw.items()}
    return FigureSettings(**values)


_REQUIRED = {
    "name": Text("a folder name: a letter or digit, then letters, digits, '_', '.', '-'",
                 test=lambda s: re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", s) is not None),
    "n_positions": Integer(minimum=2),
    "dim": Integer(minimum=1),
}


#: Values tried, in order, for a missing n_positions or dim (after the widths the entries give).
_TRIED = {"n_positions": (1024, 512, 256, 128, 64), "dim": (128, 64, 768, 256, 32)}
_WHAT = {"n_positions": "the number of positions, an integer >= 2", "dim": "the width of every position vector, an integer >= 1"}


def _missing_size(data: dict, key: str, where: str, max_runs) -> str:
    """The message for a missing ``n_positions`` or ``dim``, suggesting a value the study's encodings accept.

    The value suggested is the first that :func:`parse_study` accepts among the widths the entries
    give (``rotary_dim``, ``dim``, ``head_dim``, for ``dim``) and then a few common sizes; the
    message says why the smallest allowed value would be refused, if it would.
    """
    entries = data["encodings"] if isinstance(data.get("encodings"), list) else []
    given = [(v, f"the {name} of [[encodings]] entry {i + 1}") for i, e in enumerate(entries) if isinstance(e, dict)
             for name, v in e.items() if key == "dim" and name in ("rotary_dim", "dim", "head_dim")
             and isinstance(v, int) and not isinstance(v, bool) and v >= 1]
    tried = list(dict.fromkeys([v for v, _ in given] + list(_TRIED[key])))
    why = dict(reversed(given))
    other = {} if key == "dim" or "dim" in data else {"dim": _TRIED["dim"][0]}
    def refusal(value):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                parse_study({**data, **other, key: value}, source=where, max_runs=max_runs)
        except StudyError as exc:
            return str(exc).removeprefix(f"{where}: ")
        return None

    smallest = _REQUIRED[key].minimum
    refused = refusal(smallest)
    least = f"; {key} = {smallest} would be refused: {refused}" if refused else ""
    if len(tried) > 1 and refusal(tried[0]) == refusal(tried[1]) is not None:  # refused for another reason
        return f"{where}: {refusal(tried[0])} (and {key} is required: {_WHAT[key]})"
    for value in tried:
        if refusal(value) is None:
            return (f"{where}: {key} is required ({_WHAT[key]}); write {key} = {value} "
                    f"({why.get(value, 'a common size these encodings accept')}{least})")
    return (f"{where}: {key} is required ({_WHAT[key]}), and the study is refused whatever its {key} (none of "
            f"{', '.join(map(str, tried))} would do; {key} = {tried[0]}: {refusal(tried[0])})")


def _int(value, what, where, minimum):
    return check(value, Integer(minimum=minimum), what, where=where, error=StudyError)


def _analysis(raw, where) -> AnalysisOptions:
    try:
        return parse_options(raw, where=where)
    except ValidationError as exc:
        raise StudyError(str(exc)) from None


def _entry(where: str, index: int, entry) -> str:
    """How every message about one ``[[encodings]]`` entry begins: ``FILE: [[encodings]] entry N (kind = 'K')``
    (N counts from 1 in the file's order; the kind when the entry names one)."""
    kind = entry.get("kind") if isinstance(entry, dict) else None
    return f"{where}: [[encodings]] entry {index + 1}" + (f" (kind = {kind!r})" if isinstance(kind, str) else "")


def _expand(entry: dict, index: int, where: str, n_seeds: int, used: int, max_runs: int | None) -> list[Encoding]:
    """The encodings of one ``[[encodings]]`` entry; refused before they are built if the study would exceed ``max_runs``."""
    if not isinstance(entry, dict) or "kind" not in entry:
        raise StudyError(f"{_entry(where, index, entry)} must be a table with a kind = \"...\", got {entry!r}")
    kind = entry["kind"]
    if not isinstance(kind, str):
        hint = "; write one [[encodings]] entry per kind" if isinstance(kind, list) else ""
        raise StudyError(f"{_entry(where, index, entry)}: kind must be one name such as \"sinusoidal\", "
                         f"got {kind!r}{hint}")
    params = {k: v for k, v in entry.items() if k != "kind"}
    cls = None
    try:  # a kind may expand study-file shorthands into grids (learned: step = "all")
        cls = get_encoding_class(kind)
        params = cls.expand_study_params(params)
    except KeyError:
        pass  # unknown kind: make_encoding below names the installed ones
    except (TypeError, ValueError) as exc:
        raise StudyError(f"{_entry(where, index, entry)}: {exc}") from None
    grid_keys = [k for k, v in params.items() if isinstance(v, list)]
    for k in grid_keys:
        if not params[k]:
            raise StudyError(f"{_entry(where, index, entry)}: {k} is an empty list")
    size = math.prod(len(params[k]) for k in grid_keys)
    runs = size * (n_seeds if cls is not None and cls.stochastic else 1)
    if max_runs is not None and used + runs > max_runs:
        grid = " x ".join(f"{len(params[k])} {k}" for k in grid_keys) or "1 setting"
        seeds = f" x {n_seeds} seeds" if cls is not None and cls.stochastic else ""
        before = f", after {used} runs of the entries before it" if used else ""
        raise StudyError(f"{_entry(where, index, entry)} expands to {runs} runs "
                         f"({grid}{seeds}){before}: more than the {max_runs} runs a study may have; shorten its "
                         "lists or seeds, or lift the cap on purpose with poslab run --force")
    out = []
    for values in itertools.product(*(params[k] for k in grid_keys)):
        combo = {**params, **dict(zip(grid_keys, values))}
        try:
            out.append(make_encoding(kind, **combo))
        except (KeyError, TypeError, ValueError) as exc:
            msg = exc.args[0] if isinstance(exc, KeyError) else str(exc)
            msg = msg.removeprefix(f"{kind}: ")  # the entry already names the kind
            raise StudyError(f"{_entry(where, index, entry)}: {msg}") from None
    return out


def _warn_meaningless_intervals(analysis: AnalysisOptions, seeds, encodings, where: str) -> AnalysisOptions:
    """Warn where an interval at ``ci_level`` cannot mean what it says; return the options to use.

    With fewer resamples than :func:`min_replicates` every interval would be
    left empty, so none are drawn: the options returned have
    ``n_resamples = 0`` (recorded as used), and the warning says so.
    """
    if analysis.n_resamples == 0:
        return analysis
    need = min_replicates(analysis.ci_level)
    if analysis.n_resamples < need:
        warnings.warn(f"{where}: [analysis] n_resamples = {analysis.n_resamples} is too few for intervals at "
                      f"ci_level = {analysis.ci_level!r}: at least {need} (= 2 / (1 - ci_level)) are needed so that "
                      "each end lies between resamples, not at the most extreme one. Every interval would be empty, "
                      "so no resamples are drawn (n_resamples = 0 is used and recorded); use "
                      f"n_resamples >= {need} or a lower ci_level for intervals, or n_resamples = 0 to silence this",
                      StudyWarning, stacklevel=3)
        return dataclasses.replace(analysis, n_resamples=0)
    return analysis


def parse_study(data: dict[str, Any], *, source: str = "<dict>", text: str = "",
                max_runs: int | None = MAX_RUNS) -> StudySpec:
    """Validate a study given as a dict (the parsed TOML).

    Grids are expanded in time linear in the number of runs, and a study of
    more than ``max_runs`` runs is refused before its encodings are built
    (None: no cap).

    Raises
    ------
    StudyError
        Anything wrong, with the source, the entry and the valid choices named.
    """
    where = source
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise StudyError(f"{where}: unknown key(s) {', '.join(unknown)}; valid keys: {', '.join(sorted(_TOP_KEYS))}")
    for key in ("name", "n_positions", "dim", "encodings"):
        if key in ("n_positions", "dim") and key not in data and "encodings" in data:
            raise StudyError(_missing_size(data, key, where, max_runs))
        if key not in data:
            raise StudyError(missing_message(where, key, _REQUIRED[key]) if key != "encodings" else
                             f"{where}: encodings are required; write at least one [[encodings]] table with "
                             'kind = "..." (poslab encodings lists the kinds)')
    name = check(data["name"], _REQUIRED["name"], "name", where=where, error=StudyError)
    n_positions = _int(data["n_positions"], "n_positions", where, 2)
    dim = _int(data["dim"], "dim", where, 1)
    seeds = list(check(data.get("seeds", [0]), ListOf(Integer(minimum=0), distinct=True), "seeds", where=where,
                       error=StudyError))
    max_distance = check(data.get("max_distance", n_positions - 1), Integer(minimum=1, maximum=n_positions - 1),
                         "max_distance", where=where, fix=f"it must be < n_positions = {n_positions}",
                         error=StudyError)
    analysis = _analysis(data.get("analysis", {}), where)
    figures = parse_figures(data.get("figures", {}), where)
    if analysis.heatmap_bins > n_positions:
        if "heatmap_bins" in data.get("analysis", {}):
            raise StudyError(f"{where}: [analysis] heatmap_bins = {analysis.heatmap_bins} exceeds n_positions = {n_positions}")
        analysis = dataclasses.replace(analysis, heatmap_bins=n_positions)  # the default, capped: recorded as used
    if "fit_min_distance" in data.get("analysis", {}) and analysis.fit_min_distance >= max_distance:
        raise StudyError(f"{where}: [analysis] fit_min_distance must be < max_distance = {max_distance}")
    entries = data["encodings"]
    if not isinstance(entries, list) or not entries:
        raise StudyError(f"{where}: give at least one [[encodings]] table")
    encodings: list[Encoding] = []
    lengths: list[int] = []
    labels: dict[str, int] = {}  # label -> the entry (index) it came from
    n_runs = 0
    for index, entry in enumerate(entries):
        length = n_positions
        if isinstance(entry, dict) and "n_positions" in entry:
            entry = dict(entry)
            length = _int(entry.pop("n_positions"), "n_positions", _entry(where, index, entry), 2)
            if length > n_positions:
                raise StudyError(f"{_entry(where, index, entry)}: n_positions = {length} exceeds the "
                                 f"study's n_positions = {n_positions}; an entry may only analyse a shorter window")
        for enc in _expand(entry, index, where, len(seeds), n_runs, max_runs):
            try:
                enc.check_size(length, dim, max_distance=min(max_distance, length - 1))
            except Exception as exc:  # any failure to produce the table is this entry's fault
                msg = (exc.args[0] if isinstance(exc, KeyError) else str(exc)).removeprefix(f"{enc.kind}: ")
                raise StudyError(f"{_entry(where, index, entry)}: {msg}") from None
            if enc.label in labels:
                first = "this entry" if labels[enc.label] == index else f"entry {labels[enc.label] + 1}"
                raise StudyError(f"{_entry(where, index, entry)}: {enc.label} appears twice (also in {first}); "
                                 "remove the duplicate")
            labels[enc.label] = index
            n_runs += len(seeds) if enc.stochastic else 1
            encodings.append(enc)
            lengths.append(length)
    pairs = len(encodings) * (len(encodings) - 1) // 2
    if max_runs is not None and pairs > MAX_PAIRS:
        raise StudyError(f"{where}: its {len(encodings)} encodings make {pairs} pairs to compare "
                         f"(comparison_pairs.csv), more than the {MAX_PAIRS} a study may have (each pair costs "
                         f"~170 µs and ~1 KiB: about {pairs * 170e-6 / 60:.0f} minutes here); split the grid into "
                         f"studies of at most {math.isqrt(2 * MAX_PAIRS) + 1} encodings each, or pass --force to "
                         "run it anyway")
    analysis = _warn_meaningless_intervals(analysis, seeds, encodings, where)
    return StudySpec(
        name=name,
        n_positions=n_positions,
        dim=dim,
        seeds=tuple(seeds),
        max_distance=max_distance,
        analysis=analysis,
        encodings=tuple(encodings),
        source=source,
        text=text,
        lengths=tuple(lengths) if any(n != n_positions for n in lengths) else (),
        figures=figures,
    )


def _beside(value, folder: Path, bundled: bool = False):
    """A relative path that exists in ``folder``, recorded relative to the working folder; else unchanged.

    With ``bundled``, a bundled name stays a name (:func:`poslab.data.bundled_name`, which raises
    ValueError when a bare one also exists in ``folder``).
    """
    if isinstance(value, list):
        return [_beside(v, folder, bundled) for v in value]
    if bundled and bundled_name(value, folder) is not None:
        return value
    if isinstance(value, str) and value and not Path(value).is_absolute() and (folder / value).exists():
        resolved = (folder / value).resolve()
        cwd = Path.cwd().resolve()
        out = str(resolved.relative_to(cwd) if resolved.is_relative_to(cwd) else resolved)
        return f"./{out}" if bundled and out in BUNDLED_TABLES else out  # a path, never read as the bundled name
    return value


def _missing_file(value, folder: Path) -> Path | None:
    """The absolute path tried for ``value`` when it looks like a file path and nothing is there, else None."""
    from ..checkpoints.sources import looks_like_path

    if not isinstance(value, str) or not looks_like_path(value):
        return None
    given = Path(value).expanduser()
    if given.exists() or given.is_symlink():
        return None
    return Path(os.path.abspath(given if given.is_absolute() else folder / given))


def _no_study_file(path: Path) -> str:
    """Why ``path`` is not a study file, the path looked at, and what to give instead (the packaged studies)."""
    from . import default_study_path

    packaged = default_study_path().parent
    looked = os.path.abspath(path)
    at = "" if str(path) == looked else f" (looked for {looked})"
    what = f"{path} is a folder, not a study file" if path.is_dir() else f"no study file {path}{at}"
    if (packaged / path.name).is_file() and not path.is_dir():
        return f"{what}; the packaged study of that name is {packaged / path.name}: give that path"
    return (f"{what}; give the path of a study TOML file (README: Study files), e.g. one of the packaged studies "
            f"in {packaged}")


def load_study(path, *, max_runs: int | None = MAX_RUNS) -> StudySpec:
    """Read and validate a TOML study file.

    Relative paths in path parameters (``Encoding.path_params``, e.g. a
    learned ``source``) are resolved against the study file's folder when
    they exist there, and recorded relative to the working folder (absolute
    if the file lies outside it).

    Raises
    ------
    FileNotFoundError
        No such file.
    StudyError
        Invalid TOML or an invalid study.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(_no_study_file(path))
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is allowed
    except UnicodeDecodeError as exc:
        raise StudyError(f"{path}: not a text file in UTF-8 ({exc.reason} at byte {exc.start}); a study file is TOML") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StudyError(f"{path}: not valid TOML: {exc}") from None
    for index, entry in enumerate(data.get("encodings", []) if isinstance(data.get("encodings"), list) else []):
        try:
            cls = get_encoding_class(entry["kind"])
        except (TypeError, KeyError, ValueError):
            continue  # parse_study reports a missing or unknown kind
        for name in cls.path_params:
            if name in entry:
                try:
                    entry[name] = _beside(entry[name], path.parent, bundled=name in cls.bundled_params)
                except ValueError as exc:  # a bare bundled name that also exists beside the study file
                    raise StudyError(f"{_entry(str(path), index, entry)}: {name} = {exc}") from None
                for value in entry[name] if isinstance(entry[name], list) else [entry[name]]:
                    missing = _missing_file(value, path.parent)
                    if missing is not None:
                        raise StudyError(
                            f"{_entry(str(path), index, entry)}: {name} = {value!r} looks like a file path, and "
                            f"there is no file or folder {missing} (a relative path is read beside the study file); "
                            "give the path of an existing file, or a Hub id ORG/NAME")
    return parse_study(data, source=str(path), text=text, max_runs=max_runs)
