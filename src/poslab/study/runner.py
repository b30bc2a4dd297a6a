"""Run a study: every run through the analysis pipeline, into tidy tables.

A failed run becomes a ``summary`` row with ``status = "failed"`` and the
error message; the study goes on.
"""

from __future__ import annotations

import dataclasses
import functools
import time
import warnings

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..analysis import BandMetrics, BlockSimilarity, DecayFits, SimilarityProfile, band_metrics, fit_decay, unit_rows
from ..analysis.bootstrap import (BOOTSTRAP_LEVEL, BOOTSTRAP_SEED, N_RESAMPLES, BootstrapResult, anchor_block_sums,
                                  bootstrap_anchor_blocks)
from ..analysis.decay import fit_weights, oscillates
from ..analysis.heatmap import _block_similarity
from ..analysis.properties import Properties, table_properties
from ..analysis.profile import _similarity_profile
from .comparison import compare_runs
from .executors import map_unordered
from .spec import AnalysisOptions, Run, StudySpec

__all__ = ["RunAnalysis", "StudyResult", "analyse_table", "execute_run", "run_study", "TABLES"]

#: The tables of a study result, in the order they are written.
TABLES = ("summary", "profiles", "decay_metrics", "bands", "heatmaps")


@dataclasses.dataclass(frozen=True)
class RunAnalysis:
    """Everything the pipeline measures on one table."""

    profile: SimilarityProfile
    bands: BandMetrics
    fits: DecayFits
    blocks: BlockSimilarity
    table_dim: int
    envelope_fits: DecayFits | None = None
    bootstrap: BootstrapResult | None = None
    properties: Properties | None = None


def analyse_table(table, *, max_distance: int, options: AnalysisOptions = AnalysisOptions(),
                  seed: int | None = None) -> RunAnalysis:
    """Profile, band metrics, decay fits, bootstrap intervals, properties and block heatmap of one table.

    Parameters
    ----------
    table : array_like of shape (n_positions, dim)
    max_distance : int
        Largest distance of the profile (< n_positions).
    options : AnalysisOptions
        ``n_resamples`` and ``ci_level`` are read from it when present
        (defaults :data:`poslab.analysis.bootstrap.N_RESAMPLES` = 200 and
        ``BOOTSTRAP_LEVEL`` = 0.95).
    seed : int, optional
        The run's seed: the anchor-block bootstrap uses
        ``default_rng((BOOTSTRAP_SEED, seed or 0))``, so results are reproducible.

    Returns
    -------
    RunAnalysis
        ``envelope_fits`` is set when the profile oscillates
        (:func:`poslab.analysis.decay.oscillates`) and has a decay to fit;
        ``bootstrap`` is None when ``n_resamples`` is 0.

    Notes
    -----
    Cost at n positions, dim d, up to distance n − 1: the profile's FFTs
    O(d · n log n), the anchor-block sums O(d · n · (log(n / 32) + 32)), the
    fits on at most 4096 points (bins beyond, see
    :mod:`poslab.analysis.decay`), the resamples O(n_resamples · n) time in
    chunks of distances (:func:`poslab.analysis.bootstrap.bootstrap_anchor_blocks`) and the
    properties O(d · n · 64)-ish with their entry budget
    (:mod:`poslab.analysis.properties`). Measured at n = 131072, dim 128:
    ~7-8 s and 0.7 GiB peak per run (benchmarks/README.md, benchmarks/pipeline.py).
    """
    units = unit_rows(table, center=options.center)  # normalised (and excluded positions reported) once
    if not 0 <= max_distance < len(units.vectors):
        raise ValueError(f"max_distance must be in [0, {len(units.vectors)}), got {max_distance}")
    profile = _similarity_profile(units, max_distance, precision=options.precision)
    bands = band_metrics(profile, options.thresholds)
    use = profile.distance >= options.fit_min_distance
    fits = fit_decay(
        profile.distance[use],
        profile.mean_similarity[use],
        n_pairs=profile.n_pairs[use],
        std=profile.std_similarity[use],
        models=options.models,
    )
    envelope = None
    se = fit_weights(profile.n_pairs[use], profile.std_similarity[use])
    if {f.status for f in fits.fits}.isdisjoint({"flat", "rising"}) and oscillates(profile.mean_similarity[use], se=se):
        envelope = fit_decay(profile.distance[use], profile.mean_similarity[use], n_pairs=profile.n_pairs[use],
                             std=profile.std_similarity[use], models=options.models, target="envelope")
    blocks = _block_similarity(units, options.heatmap_bins)
    props = table_properties(units, profile)
    boot = None
    n_resamples = int(getattr(options, "n_resamples", N_RESAMPLES))
    if n_resamples > 0:  # 0: no intervals, and none of their cost
        anchor = anchor_block_sums(units, max_distance)
        del units  # the rows are not needed any more: free them before the resamples (1 GiB at n = 1M, dim 128)
        rng = np.random.default_rng((BOOTSTRAP_SEED, 0 if seed is None else int(seed)))
        boot = bootstrap_anchor_blocks(profile.distance, anchor, n_resamples, rng, fits=fits,
                                       thresholds=options.thresholds,
                                       level=float(getattr(options, "ci_level", BOOTSTRAP_LEVEL)))
    return RunAnalysis(profile, bands, fits, blocks, int(np.shape(table)[1]), envelope, boot, props)


@dataclasses.dataclass(frozen=True)
class StudyResult:
    """The tables of a finished study plus what the manifest records.

    Attributes
    ----------
    spec : StudySpec
    frames : dict of pandas.DataFrame
        Every table by name: the common ones (:data:`TABLES`: ``summary``,
        ``profiles``, ``decay_metrics``, ``bands``, ``heatmaps``, also
        reachable as attributes) and those runs add (e.g. ``inv_freq``).
        See the README for every column.
    timings : dict
        Seconds per run label/seed and in total.
    """

    spec: StudySpec
    frames: dict
    timings: dict

    def __getattr__(self, name):
        frames = self.__dict__.get("frames", {})
        if name in frames:
            return frames[name]
        raise AttributeError(name)

    def tables(self) -> dict[str, pd.DataFrame]:
        """Tables to write: the common ones always, the others when they have rows."""
        return {name: frame for name, frame in self.frames.items() if name in TABLES or len(frame)}


def _band_column(threshold: float) -> str:
    return "band_width_" + f"{threshold:g}".replace("-", "m").replace(".", "p")


def _keys(spec: StudySpec, run: Run, param_names: list[str]) -> dict:
    params = run.encoding.params()
    keys = {"study": spec.name, "label": run.label, "kind": run.encoding.kind}
    keys.update({p: params.get(p) for p in param_names})
    keys["seed"] = run.seed
    return keys


def _with_keys(frame: pd.DataFrame, keys: dict) -> pd.DataFrame:
    return pd.concat([pd.DataFrame({k: [v] * len(frame) for k, v in keys.items()}), frame.reset_index(drop=True)], axis=1)


def _finish(frames: list[pd.DataFrame], columns_first: list[str]) -> pd.DataFrame:
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=columns_first)
    out = pd.concat(frames, ignore_index=True)
    out["seed"] = out["seed"].astype("Int64")
    return out


def execute_run(spec: StudySpec, run: Run, param_names: list[str]) -> dict[str, pd.DataFrame]:
    """Generate and analyse one run; return its rows of every table, keyed by table name.

    Never raises for a failing encoding or analysis: the run then has only a
    ``summary`` row with ``status = "failed"`` and the error message.
    A plain function of plain data, so any executor can run it.
    """
    keys = _keys(spec, run, param_names)
    t0 = time.perf_counter()
    row = dict(keys, n_positions=run.n_positions, max_distance=run.max_distance, table_dim=pd.NA,
               center=spec.analysis.center, status="ok", message="")
    name = run.label if run.seed is None else f"{run.label} seed {run.seed}"
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rng = np.random.default_rng(run.seed) if run.seed is not None else None
            table = run.encoding.generate(run.n_positions, spec.dim, rng=rng)
            options = spec.analysis
            if options.heatmap_bins > run.n_positions:  # a shorter entry: as many bins as positions
                options = dataclasses.replace(options, heatmap_bins=run.n_positions)
            result = analyse_table(table, max_distance=run.max_distance, options=options, seed=run.seed)
            extra_info = run.encoding.run_info(run.n_positions)
            extra_tables = run.encoding.run_tables(table, run.n_positions)
    except Exception as exc:  # a failed run is a row, not a crash
        row.update(status="failed", message=f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - t0)
        return {"summary": pd.DataFrame([row])}
    finally:
        for w in caught:  # say which run a warning comes from
            warnings.warn(f"{name}: {w.message}", w.category, stacklevel=2)
    prof = result.profile.to_frame()
    fitted = result.fits.predict(prof["distance"].to_numpy())
    prof["fitted_similarity"] = np.where(prof["distance"] >= spec.analysis.fit_min_distance, fitted, np.nan)
    boot = result.bootstrap  # None: n_resamples = 0, no intervals
    prof["mean_similarity_ci_low"], prof["mean_similarity_ci_high"] = boot.profile_ci if boot else (np.nan, np.nan)
    band = result.bands.to_frame()
    selected = result.fits.selected
    row.update(
        table_dim=result.table_dim,
        excluded_positions=";".join(map(str, result.profile.excluded_positions)),
        selected_model=selected.model if selected else "",
        decay_length=selected.decay_length if selected else np.nan,
    )
    if selected is None:
        row["message"] = "no decay model fitted: " + ", ".join(sorted({f.status for f in result.fits.fits}))
    row.update({_band_column(t): w for t, w in zip(band["threshold"], band["width"])})
    row.update(boot.summary() if boot else {"ci_method": "none", "n_resamples": 0})
    envelope = result.envelope_fits.selected if result.envelope_fits is not None else None
    row["envelope_decay_length"] = envelope.decay_length if envelope else np.nan
    row.update(extra_info)
    row["seconds"] = time.perf_counter() - t0
    short = {k: keys[k] for k in ("study", "label", "kind", "seed")}  # heatmaps are large: parameters are in summary
    return {
        "summary": pd.DataFrame([row]),
        "profiles": _with_keys(prof, keys),
        "decay_metrics": _with_keys(pd.concat([f.to_frame() for f in (result.fits, result.envelope_fits)
                                               if f is not None], ignore_index=True), keys),
        "bands": _with_keys(band, keys),
        "heatmaps": _with_keys(result.blocks.to_frame(), short),
        "properties": _with_keys(result.properties.to_frame(), keys),
        **({"bootstrap": _with_keys(boot.replicates.replace(np.inf, np.nan), keys)} if boot else {}),
        **{name: _with_keys(frame, keys) for name, frame in extra_tables.items()},
    }


def _lost_run(spec: StudySpec, run: Run, param_names: list[str], error: BaseException) -> dict[str, pd.DataFrame]:
    """The ``failed`` summary row of a run whose executor lost it (a worker died, a result could not be sent)."""
    row = dict(_keys(spec, run, param_names), n_positions=run.n_positions, max_distance=run.max_distance,
               table_dim=pd.NA, center=spec.analysis.center, status="failed",
               message=f"{type(error).__name__}: {error}", seconds=np.nan)
    return {"summary": pd.DataFrame([row])}


def run_study(spec: StudySpec, *, progress: bool = True, executor: str = "processes", jobs: int | None = None,
              scheduler: str | None = None) -> StudyResult:
    """Run every run of ``spec`` and collect the tables.

    The tables are the same whichever executor ran the runs: results are put
    back in run order, each run draws from its own seed, warnings from
    workers are re-issued here (prefixed with the run), and a run whose
    worker failed becomes a ``failed`` summary row.

    Parameters
    ----------
    spec : StudySpec
    progress : bool
        Show a progress bar as runs complete (on a terminal's stderr; hidden
        for studies shorter than 0.5 s).
    executor : {"processes", "serial", "dask"}
        A local process pool (default), this process, or a Dask cluster; see
        :mod:`poslab.study.executors`.
    jobs : int, optional
        Worker processes of the pool or of a local Dask cluster (default: the
        usable CPUs; 1 runs serially in this process).
    scheduler : str, optional
        Address of a running Dask scheduler (``tcp://host:8786``) for
        ``executor="dask"``; a local cluster is started when omitted.

    Returns
    -------
    StudyResult
    """
    runs = spec.runs()
    param_names: list[str] = []
    for enc in spec.encodings:
        param_names += [p for p in enc.params() if p not in param_names]
    key_columns = ["study", "label", "kind", *param_names, "seed"]
    start = time.perf_counter()
    outcomes = [None] * len(runs)
    work = functools.partial(execute_run, spec, param_names=param_names)
    # disable=None: no bar when stderr is not a terminal (logs, pipes)
    bar = tqdm(total=len(runs), desc=spec.name, unit="run", disable=None if progress else True, delay=0.5, leave=False)
    for index, outcome in map_unordered(work, runs, executor=executor, jobs=jobs, scheduler=scheduler):
        outcomes[index] = outcome
        run = runs[index]
        bar.set_postfix_str(run.label if run.seed is None else f"{run.label} seed {run.seed}", refresh=False)
        bar.update()
    bar.close()
    collected: dict[str, list[pd.DataFrame]] = {name: [] for name in TABLES}
    timings: dict[str, float] = {}
    for run, outcome in zip(runs, outcomes):  # in run order, whatever order they completed in
        outcome.reissue()  # the run's warnings (already prefixed with its name), here in this process
        frames = outcome.value if outcome.error is None else _lost_run(spec, run, param_names, outcome.error)
        for name, frame in frames.items():
            collected.setdefault(name, []).append(frame)
        timings[run.label if run.seed is None else f"{run.label} [seed {run.seed}]"] = float(
            frames["summary"]["seconds"].iloc[0])
    timings["total"] = time.perf_counter() - start
    tables = {name: _finish(frames, ["study", "label", "kind", "seed"] if name == "heatmaps" else key_columns)
              for name, frames in collected.items()}
    for col in tables["summary"].columns:
        if col.startswith("band_width_"):
            tables["summary"][col] = tables["summary"][col].astype("Int64")
    tables.update(compare_runs(tables, spec))  # cross-run: seed bootstrap, comparison tables
    return StudyResult(spec=spec, frames=tables, timings=timings)
