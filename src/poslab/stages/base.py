"""The stage protocol and the per-run context stages compute from.

A *stage* is one analysis of a run: it declares what it writes (its tables,
its ``summary.csv`` columns), which runs it applies to, the settings that
change its results, and computes its rows from a :class:`RunContext`. The
context derives what several stages share — the generated table, its unit
rows, the similarity profile, the decay fits, the band metrics, the
bootstrap — once, lazily, on first use.

A stage is a frozen dataclass whose fields are its settings (the
``[analysis]`` options of a study file), each declared with :func:`setting`:
a default, a constraint (:mod:`poslab._validation`) and one line of
documentation; they are recorded in ``manifest.json``. The protocol follows
seaborn's ``_stats.base.Stat`` (a dataclass of parameters with one compute
method over tidy data) and scikit-learn's declared parameter constraints.

Adding a stage (README, "Adding an analysis")::

    @dataclasses.dataclass(frozen=True)
    class FirstMinimum(Stage):
        name = "first_minimum"
        description = "distance of the first local minimum of the profile"
        summary = (Column("first_minimum", "Int64", "positions", "...", beyond_window=True),)
        uses = frozenset({"profile"})

        def compute(self, ctx):
            return Output(summary={"first_minimum": ...})

decorated with :func:`register_stage` (README, "Adding an analysis").
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
from typing import Any, ClassVar

import numpy as np

from .._validation import Constraint
from .schema import Column, Table

__all__ = ["Stage", "Output", "RunContext", "setting", "settings_of", "register_stage", "registered_stages",
           "NOT_APPLICABLE_GRID"]

#: Why the 1-D stages (``positions = "line"``) do not apply to a run whose positions are points of a grid.
NOT_APPLICABLE_GRID = "not_applicable: multi-axis positions; see grid tables"

_REGISTERED: list[type[Stage]] = []


def register_stage(cls: type[Stage]) -> type[Stage]:
    """Class decorator: add a stage to the pipeline (after every stage registered before it).

    The built-in stage modules are imported in pipeline order by
    :mod:`poslab.stages`; within a module, stages run in the order they are
    defined. Their order is the order of their ``summary.csv`` columns.

    Raises
    ------
    TypeError
        Not a frozen dataclass subclass of :class:`Stage` with a name.
    ValueError
        A stage of that name is registered already.
    """
    if not (isinstance(cls, type) and issubclass(cls, Stage) and "__dataclass_fields__" in cls.__dict__
            and cls.__dataclass_params__.frozen and cls.name):
        raise TypeError(f"{cls!r} must be a @dataclasses.dataclass(frozen=True) subclass of Stage with a name")
    if any(s.name == cls.name for s in _REGISTERED):
        raise ValueError(f"a stage named {cls.name!r} is registered already")
    if cls.positions not in ("any", "line"):
        raise ValueError(f"stage {cls.name}: positions must be 'any' or 'line', got {cls.positions!r}")
    if cls.positions == "line" and "applies_to" not in cls.__dict__:
        cls.applies_to = "every run on a line, none on a grid"
    _REGISTERED.append(cls)
    return cls


def registered_stages() -> tuple[type[Stage], ...]:
    """Every registered stage, in pipeline order."""
    return tuple(_REGISTERED)


def setting(default, check: Constraint, doc: str) -> Any:
    """A stage setting: an ``[analysis]`` option with its default, constraint and one-line description.

    Parameters
    ----------
    default
        Used when the study file does not set it (immutable: tuples, not lists).
    check : Constraint
        What a study file may give (``Integer(minimum=0)``, ``ListOf(...)``, ...).
    doc : str
        One line for error messages, ``docs/tables.md`` and ``manifest.json`` readers.
    """
    return dataclasses.field(default=default, metadata={"check": check, "doc": doc})


def settings_of(stage: type[Stage]) -> tuple[dataclasses.Field, ...]:
    """The setting fields a stage class declares itself (not those of its bases)."""
    return tuple(f for f in dataclasses.fields(stage) if "check" in f.metadata)


@dataclasses.dataclass
class Output:
    """What one stage computed for one run.

    Attributes
    ----------
    summary : dict
        Its ``summary.csv`` columns for this run (declared in ``Stage.summary``).
    tables : dict of DataFrame
        Its tables' rows for this run, without the run's keys (the runner
        adds them); names and columns declared in ``Stage.tables``.
    note : str
        Appended to the run's ``message`` (e.g. why no decay model was selected).
    """

    summary: dict = dataclasses.field(default_factory=dict)
    tables: dict = dataclasses.field(default_factory=dict)
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Stage:
    """Base class of analysis stages: declare, then compute from a :class:`RunContext`.

    Class attributes
    ----------------
    name : str
        Stage name (``bands``, ``bootstrap``, ...), recorded in manifest.json.
    description : str
        One line for ``docs/tables.md``.
    applies_to : str
        Which runs it applies to, in words (``every run``, ``rotary runs``);
        :meth:`applies` decides.
    tables : tuple of Table
        Tables it writes (rows per run).
    summary : tuple of Column
        Columns it adds to ``summary.csv``.
    uses : frozenset of str
        Context values it reads (``table``, ``units``, ``profile``, ``fits``,
        ``envelope_fits``, ``bands``, ``bootstrap``): the runner frees the
        unit rows before the bootstrap's resamples when no later stage uses them.
    fills_intervals : bool
        It writes the ``_ci_low`` / ``_ci_high`` columns of the other stages'
        interval columns (the bootstrap).
    positions : {"any", "line"}
        The positions its analysis needs. ``"line"``: positions on a line, whose
        distance is |i − j| (the similarity profile and everything measured on it);
        such a stage does not apply to a run whose positions are points of a grid
        (:attr:`RunContext.positions`): the runner leaves its columns and tables
        empty and records why (:meth:`not_applicable`). ``"any"``: per-run facts
        that hold whatever the positions (the default).
    kernel_only : bool
        For a kernel run (:attr:`RunContext.kernel` not None), :meth:`compute` reads the kernel, the encoding and
        the run's settings alone, nothing another stage computes: a study of one run computes it in a second
        thread beside the later stages (:func:`poslab.study.runner.execute_run`).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    applies_to: ClassVar[str] = "every run"
    tables: ClassVar[tuple[Table, ...]] = ()
    summary: ClassVar[tuple[Column, ...]] = ()
    uses: ClassVar[frozenset[str]] = frozenset()
    fills_intervals: ClassVar[bool] = False
    positions: ClassVar[str] = "any"
    kernel_only: ClassVar[bool] = False

    def applies(self, ctx: RunContext) -> bool:
        """Whether this stage has anything to say about the run (default: every run)."""
        return True

    def not_applicable(self, ctx: RunContext) -> str | None:
        """Why this stage's analysis does not apply to the run's positions, or None when it does.

        A ``"line"`` stage on a run whose positions are points of a grid: the row index of a
        (t, h, w) or (h, w) grid flattened in C order is not a distance (its neighbours wrap from
        one row, or frame, to the next), and the grid stage analyses those runs on the grid.
        """
        if self.positions == "line" and ctx.positions == "grid":
            return NOT_APPLICABLE_GRID
        return None

    def compute(self, ctx: RunContext) -> Output:  # pragma: no cover - abstract
        raise NotImplementedError

    def may_write(self, name: str, summary: Table) -> bool:
        """Whether ``name`` is a summary column this stage declares (or an interval it fills)."""
        if any(col.matches(name) for col in self.summary):
            return True
        if self.fills_intervals and name.endswith(("_ci_low", "_ci_high")):
            col = summary.column(name)
            return col is not None and col.interval
        return False

    def settings(self) -> dict[str, Any]:
        """This stage's settings and their values."""
        return {f.name: getattr(self, f.name) for f in settings_of(type(self))}


class RunContext:
    """One run's table and everything derived from it, computed once on first use and shared by the stages.

    Parameters
    ----------
    encoding : Encoding
    n_positions, max_distance : int
        The run's analysed window.
    dim : int
        The study's width (encodings that keep their own width ignore it).
    options : AnalysisOptions
        Every stage's settings (the study's ``[analysis]``).
    seed : int or None
        The run's seed: the encoding's generator and the bootstrap's.
    table : ndarray of shape (n_positions, table_dim), optional
        An already generated table (default: generated on first use).

    Attributes (derived on first use)
    ---------------------------------
    kernel : poslab.encodings.kernel.Kernel or None
        The encoding's exact kernel by distance (:meth:`Encoding.kernel
        <poslab.encodings.Encoding.kernel>`), None when the table is analysed:
        an encoding without one, or a cosine kernel with ``center`` (a centred
        table is no longer the kernel's).
    profile_method : {"kernel", "table"}
        Where the profile comes from.
    table : ndarray of shape (n_positions, table_dim), float64
        Generated on first use; a kernel run never needs it (a bias has none).
    units : poslab.analysis.UnitRows
        Unit rows (centred first with ``center``); excluded positions reported.
    profile : poslab.analysis.SimilarityProfile
        Distances 0..max_distance. A window with no pair of valid positions
        at any distance >= 1 is refused (ValueError): nothing can be measured.
        A kernel run's profile is the kernel's (:meth:`Kernel.profile
        <poslab.encodings.kernel.Kernel.profile>`: the mean over heads), exact:
        std 0 and n_pairs = n_positions − distance, O(max_distance · pairs).
        A table run's mean (``precision`` float64) is :attr:`anchor_blocks`' sums totalled over the blocks: the
        same Σ_i S[i, i + k] as the whole table's FFT (:func:`poslab.analysis.similarity_profile`) to ~1e-16
        relative, without a second FFT of the table (tests/stages/test_stages.py checks it against the
        brute-force loop); float32 keeps its own FFT.
    block_length : (int, float)
        Anchors per block, chosen from the data, and the lag products' correlation length.
    block_lengths : dict
        The same for the run and its nested windows, keyed by (positions, max distance).
    anchor_blocks : poslab.analysis.bootstrap.AnchorBlocks
    profile_noise : ndarray of shape (max_distance + 1, n_blocks)
        The profile's noise, one column per anchor block: the fits' noise model.
    fit_range : (float or None, str)
        The fit range's upper end and its rule.
    fits : poslab.analysis.DecayFits
        Decay models fitted to the profile from ``fit_min_distance`` to the fit range's end.
    envelope_fits : DecayFits or None
        Fitted to the upper envelope when the profile oscillates.
    noise_se : ndarray of shape (max_distance + 1,) or None
        The profile's anchor-block standard errors (None for a kernel run).
    summaries : poslab.analysis.summaries.ProfileSummaries
        The model-free summaries of the profile (stage ``summaries``).
    window_analyses : list of poslab.stages.window.WindowAnalysis
        The summaries at a quarter, half and all of the window, with bootstrap intervals at the smaller ones.
    bands : poslab.analysis.BandMetrics
    bootstrap : poslab.analysis.bootstrap.BootstrapResult or None
        The anchor-block bootstrap (None when ``n_resamples`` is 0).
    progress : poslab.study.progress.Progress or None
        Where the costly derivations report themselves as steps (:meth:`step`); set by the runner for a run it
        shows stage by stage, None otherwise.
    """

    def __init__(self, encoding, *, n_positions: int, max_distance: int, dim: int, options, seed: int | None = None,
                 table: np.ndarray | None = None):
        self.encoding = encoding
        self.n_positions = int(n_positions)
        self.max_distance = int(max_distance)
        self.dim = int(dim)
        self.options = options
        self.seed = seed
        if table is not None:
            self.__dict__["table"] = table
        self._table_given = table is not None  # a given table cannot be regenerated: never released
        self.pending: tuple[Stage, ...] = ()  # stages still to run (the runner sets it)
        self.window_blocks: dict = {}  # the nested windows' anchor-block sums when anchor_blocks made them
        self.progress = None  # a poslab.study.progress.Progress (the runner sets it), or None

    def step(self, name: str, total: int | None = None, unit: str = ""):
        """Report one costly derivation to :attr:`progress` (:meth:`poslab.study.progress.Progress.step`).

        A context manager yielding the step, a callable ``step(what, done, total)`` that analysis functions take as
        their ``progress`` argument, or None without a reporter.
        """
        if self.progress is None:
            return contextlib.nullcontext()
        return self.progress.step(name, total, unit)

    # ----------------------------------------------------------------- derived
    @functools.cached_property
    def kernel(self):
        if getattr(self.encoding, "kernel", None) is None:  # no encoding (a bare table), or a duck-typed one
            return None
        with self.step("kernel") as step:
            kernel = self.encoding.kernel(self.n_positions, self.max_distance, self.dim)
            if kernel is None and step is not None:
                step.cancel()  # the encoding has none: nothing to report
        if kernel is not None and kernel.scale == "cosine" and self.options.center:
            return None  # the centred table's similarities are not the kernel's
        return kernel

    @property
    def positions(self) -> str:
        """``"grid"`` when the encoding declares a grid (:meth:`Encoding.grid_shape
        <poslab.encodings.Encoding.grid_shape>`; the window is then the whole grid), else ``"line"``."""
        grid_shape = getattr(self.encoding, "grid_shape", None)
        return "grid" if grid_shape is not None and grid_shape(self.n_positions) is not None else "line"

    @property
    def profile_method(self) -> str:
        return "kernel" if self.kernel is not None else "table"

    @functools.cached_property
    def table(self) -> np.ndarray:
        rng = np.random.default_rng(self.seed) if self.seed is not None else None
        with self.step("table"):
            return self.encoding.generate(self.n_positions, self.dim, rng=rng)

    @property
    def table_dim(self) -> int | None:
        """Width of the analysed table; None for a kernel run that generated none."""
        if "table_dim" in self.__dict__:  # the table was released once its unit rows existed
            return self.__dict__["table_dim"]
        if "table" not in self.__dict__ and self.kernel is not None:
            return None
        return int(np.shape(self.table)[1])

    @functools.cached_property
    def units(self):
        from ..analysis.similarity import _unit_rows

        table = self.table
        overwrite = False
        # the generated table is not read again once its unit rows exist (a line without ``center``: the nested
        # windows re-centre from it, a grid reads it): released (1 GiB at n = 2^20, dim 128), regenerated from the
        # seed if ever read again; when nothing else holds it (the encoding kept no reference), its rows are
        # normalised in place: no second 1 GiB (its pages were ~4 CPU-s of page faults on a 2-CPU VM)
        if self.seed is not None and not self._table_given and not self.options.center and self.positions == "line":
            self.__dict__["table_dim"] = int(np.shape(table)[1])
            del self.__dict__["table"]
            overwrite = (isinstance(table, np.ndarray) and table.flags.owndata and table.flags.writeable
                         and sys.getrefcount(table) <= 2)
        with self.step("unit rows"):
            return _unit_rows(table, center=self.options.center, overwrite=overwrite, stacklevel=3)

    @functools.cached_property
    def profile(self):
        from ..analysis.profile import SimilarityProfile, _similarity_profile

        if self.kernel is not None:
            distance = self.kernel.distance
            n_pairs = self.n_positions - distance
            with self.step("profile"):
                mean = self.kernel.profile()
            return SimilarityProfile(distance=distance, mean_similarity=mean,
                                     std_similarity=np.zeros(distance.size), n_pairs=n_pairs,
                                     n_positions=self.n_positions, center=False, std_pairs=n_pairs)

        if not 0 <= self.max_distance < len(self.units.vectors):
            raise ValueError(f"max_distance must be in [0, {len(self.units.vectors)}), got {self.max_distance}")
        units = self.units
        lag_sums = None
        if self.options.precision == "float64":
            # the mean: the anchor-block sums (computed anyway for the fits' noise and the bootstrap) totalled over
            # the blocks, the same Σ_i S[i, i + k] as the whole table's FFT to ~1e-16 relative (no second FFT)
            blocks = self.anchor_blocks
            lag_sums = (blocks.sums.sum(axis=0), blocks.counts.sum(axis=0))
        with self.step("profile"):
            profile = _similarity_profile(units, self.max_distance, precision=self.options.precision,
                                          lag_sums=lag_sums)
        if self.max_distance >= 1 and not np.any(profile.n_pairs[1:] > 0):
            excluded = profile.excluded_positions
            raise ValueError(
                f"no pair of valid positions within distances 1..{self.max_distance}: "
                f"{len(excluded)} of {profile.n_positions} positions have zero or non-finite vectors "
                f"(first: {list(excluded[:10])}), so nothing can be measured; analyse more positions or a wider table")
        return profile

    @property
    def block_length(self) -> tuple[int, float]:
        """(anchors per block, correlation length): :func:`poslab.analysis.bootstrap.choose_block_length`."""
        return self.block_lengths[self.n_positions, self.max_distance]

    @functools.cached_property
    def block_lengths(self) -> dict[tuple[int, int], tuple[int, float]]:
        """:attr:`block_length` of the run and of its nested windows (:func:`poslab.stages.window.nested_windows`)
        on the same rows (none with ``center``: a window is centred on its own mean), by (positions, max distance):
        one pass of lag products serves them all (the same lengths as a
        :func:`~poslab.analysis.bootstrap.choose_block_length` call per window)."""
        from ..analysis.bootstrap import _block_lengths
        from .window import nested_windows

        units = self.units
        windows = [(self.n_positions, self.max_distance)]
        if not self.options.center:
            windows = [(n, d) for _, n, d in nested_windows(self.n_positions, self.max_distance)]
        with self.step("block length"):
            lengths = _block_lengths(units, windows, max_blocks=self.options.n_blocks)
        return dict(zip(windows, lengths))

    @functools.cached_property
    def anchor_blocks(self):
        """Per-anchor-block sums of the profile (:func:`poslab.analysis.bootstrap.anchor_block_sums`), with the
        data-driven block length: behind the fits' noise and the bootstrap.

        When the window-sensitivity stage is still to run (:attr:`pending`) on these rows (no ``center``), its
        nested windows' sums (:attr:`window_blocks`) are computed right after, in the same working arrays (their
        pages still in memory: ~0.7 GB less of fresh memory at n = 2^20, dim 128; the same sums)."""
        from ..analysis.bootstrap import anchor_block_sums
        from ..analysis.similarity import UnitRows
        from .window import nested_windows

        units, (length, _) = self.units, self.block_length
        buffers = {}
        with self.step("anchor blocks"):
            blocks = anchor_block_sums(units, self.max_distance, length, buffers=buffers)
            windows = {}
            if not self.options.center and any(s.name == "window_sensitivity" for s in self.pending):
                for _, n, d in nested_windows(self.n_positions, self.max_distance)[:-1]:
                    windows[n, d] = anchor_block_sums(UnitRows(units.vectors[:n], units.valid[:n], units.center), d,
                                                      self.block_lengths[n, d][0], buffers=buffers)
        self.window_blocks.update(windows)
        return blocks

    @functools.cached_property
    def profile_noise(self) -> np.ndarray:
        """The profile's noise, one column per anchor block (:func:`poslab.analysis.bootstrap.block_noise`), shape
        (max_distance + 1, n_blocks): the fits' noise model. The last distances, whose anchors lie in one block,
        carry the last estimate forward. A kernel run's profile is exact: zero."""
        from ..analysis.bootstrap import block_noise

        if self.kernel is not None:  # an exact kernel: no sampling noise
            return np.zeros((self.max_distance + 1, 1))
        factor = block_noise(self.anchor_blocks)
        known = np.isfinite(factor).all(axis=1)
        if known.any():  # each unknown row from the last known one before it (the first known one at the start)
            source = np.maximum.accumulate(np.where(known, np.arange(known.size), np.argmax(known)))
            factor[~known] = factor[source[~known]]  # in place: the rows read are known, so not written
        return factor

    @functools.cached_property
    def fit_points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(distance, mean_similarity, n_pairs, std_similarity, noise) at distances >= fit_min_distance."""
        p = self.profile
        use = p.distance >= self.options.fit_min_distance
        first = int(np.argmax(use)) if use.any() else use.size
        if use[first:].all():  # the distances from the first fitted one on: views, not copies (the noise: 256 MB at
            use = slice(first, None)  # 10^6 distances and 32 blocks)
        return (p.distance[use], p.mean_similarity[use], p.n_pairs[use], p.std_similarity[use],
                self.profile_noise[use])

    @functools.cached_property
    def fit_range(self) -> tuple[float | None, str]:
        """(largest fitted distance or None for the window, rule): :func:`poslab.analysis.decay.fit_range_end`."""
        from ..analysis.decay import fit_range_end

        d, y, *_ = self.fit_points
        return fit_range_end(d, y)

    def _fit(self, target):
        from ..analysis.decay import fit_decay

        o = self.options
        d, y, n, s, e = self.fit_points
        end, rule = self.fit_range if target == "profile" else (None, "window")
        return fit_decay(d, y, n_pairs=n, std=s, models=o.models, target=target, min_aic_gain=o.min_aic_gain,
                         level=o.ci_level, max_distance=end, range_rule=rule, noise=e, gof_alpha=o.gof_alpha,
                         fit_tolerance=o.fit_tolerance)

    @functools.cached_property
    def fits(self):
        _ = self.fit_points, self.fit_range  # derived first: the step times the fits alone
        with self.step("fits"):
            return self._fit("profile")

    @functools.cached_property
    def envelope_fits(self):
        from ..analysis.decay import fit_weights, oscillates

        o = self.options
        d, y, n, s, _ = self.fit_points
        if not {f.status for f in self.fits.fits}.isdisjoint({"flat", "rising"}):
            return None
        if not oscillates(y, se=fit_weights(n, s), min_depth=o.oscillation_min_depth, min_se=o.oscillation_min_se):
            return None
        with self.step("envelope fits"):
            return self._fit("envelope")

    @functools.cached_property
    def noise_se(self) -> np.ndarray | None:
        """Standard errors of the profile counting the dependence between anchors, the row norms of
        :func:`poslab.analysis.bootstrap.block_noise` (NaN where fewer than two blocks hold a pair), shape
        (max_distance + 1,); None for a kernel run (exact). A crossing counts only beyond them (stage summaries)."""
        from ..analysis.bootstrap import block_standard_errors

        if self.kernel is not None:
            return None
        return block_standard_errors(self.anchor_blocks)

    @functools.cached_property
    def summaries(self):
        from .bands import run_summaries

        return run_summaries(self.profile, self.options, self.noise_se)

    @functools.cached_property
    def window_analyses(self):
        """The run's nested windows with their summaries and (sampled tables) bootstrap intervals:
        :func:`poslab.stages.window.window_analyses`."""
        from .window import window_analyses

        return window_analyses(self)

    @functools.cached_property
    def bands(self):
        from ..analysis import band_metrics

        return band_metrics(self.profile, self.options.thresholds)

    @functools.cached_property
    def bootstrap(self):
        from ..analysis.bootstrap import bootstrap_anchor_blocks

        o = self.options
        if self.kernel is not None:  # an exact kernel: nothing to resample, so exact whatever n_resamples is
            return _exact_bootstrap(self)
        if o.n_resamples == 0:  # no intervals, and none of their cost
            return None
        profile, fits = self.profile, self.fits
        anchor = self.anchor_blocks
        self._release_units()  # before the resamples (1 GiB at n = 1M, dim 128)
        rng = np.random.default_rng((o.bootstrap_seed, 0 if self.seed is None else int(self.seed)))
        summaries = self.summaries
        with self.step("bootstrap", o.n_resamples, "resamples") as step:
            result = bootstrap_anchor_blocks(profile.distance, anchor, o.n_resamples, rng, fits=fits,
                                             thresholds=o.thresholds, level=o.ci_level,
                                             max_failed_fraction=o.max_failed_fraction,
                                             correlation_length=self.block_length[1], summarise=self.summarise,
                                             progress=step)
        return open_within_noise(result, summaries)

    def summarise(self, distance, profiles) -> dict:
        """The model-free summaries of resampled profiles (rows), for the bootstrap's intervals:
        :func:`poslab.stages.bands.summariser` of the run's profile and ``noise_se`` (made once per run)."""
        return self._summariser(distance, profiles)

    @functools.cached_property
    def _summariser(self):
        from .bands import summariser

        return summariser(self.profile, self.options, self.noise_se)

    def _release_units(self) -> None:
        """Drop the unit rows when no stage still to run reads them (they are rebuilt if read later)."""
        if "units" in self.__dict__ and not any("units" in s.uses for s in self.pending):
            del self.__dict__["units"]


def open_within_noise(result, summaries):
    """A bootstrap result whose intervals of the summaries ``within_noise`` at the estimate are open above.

    The data then do not exclude that S never falls below the level within the window (the test of
    :mod:`poslab.analysis.summaries` does not reject it), so by test inversion the confidence set holds "beyond
    the window": the upper end is left open (NaN) whatever the replicates' upper quantile. Usually the replicates
    say so already (a replicate within the noise is +inf); this makes the point estimate and its interval agree.
    """
    import dataclasses

    from ..analysis.summaries import threshold_name

    noisy = {name for name, status in zip(summaries.names, summaries.status) if status == "within_noise"}
    if not noisy:
        return result
    summaries_ci = {name: (low, np.nan) if name in noisy else (low, high)
                    for name, (low, high) in result.summaries_ci.items()}
    band_widths_ci = {t: (low, np.nan) if threshold_name(t) in noisy else (low, high)
                      for t, (low, high) in result.band_widths_ci.items()}
    return dataclasses.replace(result, summaries_ci=summaries_ci, band_widths_ci=band_widths_ci)


def _exact_bootstrap(ctx: RunContext):
    """The bootstrap of a kernel run, without resampling: every resample of anchor blocks would give the kernel's
    own profile, so the ``n_resamples`` replicates are its decay length and band widths, and it is ``exact``."""
    from ..analysis.bands import first_crossings
    from ..analysis.bootstrap import BootstrapResult

    o = ctx.options
    thresholds = tuple(float(t) for t in o.thresholds)
    selected = ctx.fits.selected
    p = ctx.profile
    widths = first_crossings(p.distance, p.mean_similarity[None, :], thresholds)  # +inf: beyond the window
    r = int(o.n_resamples)
    return BootstrapResult(
        method="exact", level=float(o.ci_level), n_resamples=r, block_length=None, thresholds=thresholds,
        decay_lengths=np.full(r, np.nan if selected is None else selected.decay_length),
        band_widths=np.repeat(widths, r, axis=0),
        decay_length_ci=(np.nan, np.nan) if selected is None else (selected.decay_length,) * 2,
        band_widths_ci={t: (w, w) if np.isfinite(w) else (np.nan, np.nan) for t, w in zip(thresholds, widths[0])},
        profile_ci=(p.mean_similarity, p.mean_similarity), n_failed=0, exact=True)
