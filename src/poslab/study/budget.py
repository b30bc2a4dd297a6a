"""Up-front resource checks: refuse a study that cannot fit in memory before any work starts.

Two estimates, both conservative models fitted to measurements (peak
resident memory, ``resource.getrusage`` / ``/usr/bin/time -v``; the numbers
and commands are in ``benchmarks/README.md``, "Memory estimates"):

**One run** (in its worker), :func:`estimate_run_memory`: the larger of
generating the table (what the encoding declares, :meth:`Encoding.table_cost
<poslab.encodings.Encoding.table_cost>`) and analysing it. Analysing a
table of n × d, fitted to :func:`poslab.study.runner.analyse_table`::

    n × d table   n_resamples   measured   estimate
    16384 × 256       200        235 MiB    ~410 MiB
    65536 × 64        200        276 MiB    ~390 MiB
    131072 × 32       200        355 MiB    ~520 MiB
    262144 × 16       200        598 MiB    ~780 MiB
    4096 × 4096       200        471 MiB    ~600 MiB
    65536 × 256         0        438 MiB    ~720 MiB

i.e. about 3.5 copies of the float64 table (the table, its unit rows, FFT
blocks), 2 KiB per position (profile, anchor-block sums and bootstrap
chunks) and 150 MiB of fixed overhead, plus per bootstrap resample
10 bytes per fitted distance (at most 4096), 16 per anchor block and 700
(the replicate's weights, its refit points, its row of the replicate table):
measured 1.6 KiB per resample at 64 positions and 9.2 KiB at 1024, the
model gives 1.8 and 11.2 KiB.

**The study's results** (in the ``poslab`` process), :func:`estimate_results_memory`:
every run's tables are held until they are written, then the figures are
drawn from them (at most 16 heatmap panels and 10 curves each, so their
cost does not grow with the runs). Per run: 160 bytes per heatmap cell
(bins²), 260 per profile distance, 250 per bootstrap replicate and 16 KiB
of small tables; 1100 bytes per pair of labels (``comparison_pairs``, built
row by row: 1047 measured); 240 MiB for the interpreter, libraries and
figures. Measured peak / estimate: 0.94–0.95 on grids of 50–200 runs.

**A kernel run** (an encoding with an exact kernel, :meth:`Encoding.kernel
<poslab.encodings.Encoding.kernel>`: sinusoidal of even width, rotary, relative
biases) builds no table: :func:`estimate_kernel_run_memory` counts its kernel
(forward and backward per head, and the one up to n_positions − 1 its heatmap
reads), ~1 KiB per distance for the profile, fits, bands and their frames, and
the fixed overhead; a 1,048,576-position rotary run is ~1.2 GiB.

They are meant to refuse impossible work (a billion positions, a trillion
dims, a billion resamples, a grid whose tables outgrow the machine) with a
message, not to predict a run to the megabyte.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ResourceError", "estimate_run_memory", "estimate_kernel_run_memory", "estimate_results_memory",
           "available_memory", "check_resources", "format_bytes"]

_TABLE_COPIES = 3.5
_BYTES_PER_POSITION = 2048
_OVERHEAD = 150 * 2**20
# per bootstrap resample (module docstring)
_RESAMPLE_PER_FITTED_DISTANCE, _RESAMPLE_PER_BLOCK, _RESAMPLE_FIXED = 10, 16, 700
_MAX_FITTED = 4096  # fit_decay fits at most 4096 points (decay.py, "Long profiles")
# held by the poslab process until written (module docstring)
_HEATMAP_CELL, _PROFILE_ROW, _REPLICATE_ROW, _RUN_FIXED = 160, 260, 250, 16 * 2**10
_PAIR_ROW, _PROCESS = 1100, 240 * 2**20
# a kernel run: per distance (profile, fits, bands, their frames) and per head x distance (forward, backward,
# head means; the heatmap's kernel over n_positions)
_KERNEL_PER_DISTANCE, _KERNEL_PER_HEAD_DISTANCE = 1024, 48


class ResourceError(ValueError):
    """A study needs more memory than this machine has; the message says how much and what to change."""


def estimate_run_memory(n_positions: int, dim: int, *, n_resamples: int = 200, n_thresholds: int = 3,
                        n_fitted: int | None = None, n_blocks: int = 32, generation: int = 0) -> int:
    """Estimated peak memory of one run, in bytes (module docstring).

    Parameters
    ----------
    n_positions : int
        Positions analysed (table rows).
    dim : int
        Table width.
    n_resamples : int
        Bootstrap resamples.
    n_thresholds : int
        Band-width thresholds (one replicate column each).
    n_fitted : int, optional
        Distances the decay fit uses (default: all but distance 0), at most 4096.
    n_blocks : int
        Anchor blocks of the bootstrap.
    generation : int
        Peak bytes of generating the table (:meth:`Encoding.table_cost`).
    """
    n_positions, dim, n_resamples = int(n_positions), int(dim), int(n_resamples)
    n_fitted = min(_MAX_FITTED, max(1, n_positions - 1) if n_fitted is None else int(n_fitted))
    per_resample = (_RESAMPLE_PER_FITTED_DISTANCE * n_fitted + _RESAMPLE_PER_BLOCK * int(n_blocks) + _RESAMPLE_FIXED
                    + 8 * (int(n_thresholds) + 3))
    analysis = _TABLE_COPIES * 8 * n_positions * dim + _BYTES_PER_POSITION * n_positions + per_resample * n_resamples
    return int(max(analysis, int(generation)) + _OVERHEAD)


def estimate_kernel_run_memory(n_positions: int, max_distance: int, n_heads: int = 1, *, n_resamples: int = 200,
                               n_thresholds: int = 3) -> int:
    """Estimated peak memory of one kernel run (no table), in bytes (module docstring).

    Parameters
    ----------
    n_positions : int
        Positions of the window (the heatmap reads the kernel up to n_positions − 1).
    max_distance : int
        Largest distance of the profile.
    n_heads : int
        Heads of the kernel.
    n_resamples, n_thresholds : int
        Its constant bootstrap replicates (one row each).
    """
    n, m, heads = int(n_positions), int(max_distance) + 1, max(1, int(n_heads))
    replicates = int(n_resamples) * (_REPLICATE_ROW + 8 * (int(n_thresholds) + 3))  # constant, but rows all the same
    return int(_OVERHEAD + _KERNEL_PER_DISTANCE * max(n, m) + _KERNEL_PER_HEAD_DISTANCE * heads * (n + m)
               + replicates)


def _kernel_heads(run, spec) -> int | None:
    """Heads of the kernel the run will analyse instead of a table, or None (the table is analysed)."""
    kernel_of = getattr(run.encoding, "kernel", None)
    if kernel_of is None:
        return None
    try:
        kernel = kernel_of(run.n_positions, 0, spec.dim)  # distance 0 only: cheap
    except Exception:  # noqa: BLE001 - the run itself will fail and say why; estimate it as a table
        return None
    if kernel is None or (kernel.scale == "cosine" and spec.analysis.center):
        return None
    return kernel.n_heads


def estimate_results_memory(spec) -> int:
    """Estimated peak memory of the ``poslab`` process holding, writing and drawing every run's tables, in bytes.

    Counts every run (module docstring), failed or not.
    """
    options = spec.analysis
    total, labels = _PROCESS, set()
    for run in spec.runs():
        bins = min(int(options.heatmap_bins), run.n_positions)
        total += (_HEATMAP_CELL * bins * bins + _PROFILE_ROW * (run.max_distance + 1)
                  + _REPLICATE_ROW * int(options.n_resamples) + _RUN_FIXED)
        labels.add(run.label)
    return int(total + _PAIR_ROW * len(labels) * (len(labels) - 1) // 2)


def _read_int(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> int | None:
    """Memory this process can still use, in bytes; None if unknown.

    Linux: ``MemAvailable`` of ``/proc/meminfo``, lowered to what a cgroup
    memory limit leaves (containers, batch schedulers). Elsewhere the free
    physical pages (``os.sysconf``), or None.
    """
    values = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                values.append(int(line.split()[1]) * 1024)
                break
    except (OSError, ValueError, IndexError):
        pass
    limit, used = _read_int("/sys/fs/cgroup/memory.max"), _read_int("/sys/fs/cgroup/memory.current")  # cgroup v2
    if limit is None:
        limit, used = (_read_int("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
                       _read_int("/sys/fs/cgroup/memory/memory.usage_in_bytes"))  # cgroup v1
    if limit is not None and limit < 2**60:  # v1 reports "no limit" as a huge number
        values.append(max(0, limit - (used or 0)))
    if not values:
        try:
            values.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES"))
        except (ValueError, OSError, AttributeError):
            return None
    return min(values)


def format_bytes(n: float) -> str:
    """``n`` bytes as "12.3 GiB"."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if abs(n) < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB"  # pragma: no cover


def _run_memory(run, spec) -> tuple[int, int, int]:
    """(estimated peak bytes, table width, generation bytes) of one run: what its encoding declares, the analysis."""
    options = spec.analysis
    heads = _kernel_heads(run, spec)
    if heads is not None:  # no table: the kernel's own cost
        need = estimate_kernel_run_memory(run.n_positions, run.max_distance, heads, n_resamples=options.n_resamples,
                                          n_thresholds=len(options.thresholds))
        return need, 0, 0
    cost = run.encoding.table_cost(run.n_positions, spec.dim)
    fitted = max(1, run.max_distance - int(options.fit_min_distance) + 1)
    need = estimate_run_memory(run.n_positions, cost.table_dim, n_resamples=options.n_resamples,
                               n_thresholds=len(options.thresholds), n_fitted=fitted, n_blocks=options.n_blocks,
                               generation=cost.peak_bytes)
    return need, cost.table_dim, cost.peak_bytes


def check_resources(spec, *, workers: int = 1, available: int | None = None) -> int:
    """Refuse a study whose largest runs, ``workers`` at a time, and its collected tables need more memory than is available.

    Parameters
    ----------
    spec : StudySpec
    workers : int
        Runs executing at the same time on this machine (the process pool's
        workers; 1 for the serial executor).
    available : int, optional
        Bytes available (default: :func:`available_memory`; no check when unknown).

    Returns
    -------
    int
        The estimated peak: the ``workers`` largest runs together plus the
        tables the ``poslab`` process collects, in bytes.

    Raises
    ------
    ResourceError
        The estimate exceeds the available memory; the message names the
        largest run or the size of the results, both numbers and what to change.
    """
    options = spec.analysis
    runs = spec.runs()
    estimates = sorted(((*_run_memory(run, spec), run) for run in runs), key=lambda e: e[0], reverse=True)
    workers = max(1, min(workers, len(estimates)))
    together = sum(e[0] for e in estimates[:workers])
    results = estimate_results_memory(spec)
    total = together + results
    available = available_memory() if available is None else available
    if available is None or total <= available:
        return total
    need, table_dim, generation, run = estimates[0]
    if results > together:  # the runs' tables are the larger part
        bins = min(int(options.heatmap_bins), spec.n_positions)
        raise ResourceError(
            f"{spec.source}: its {len(runs)} runs keep about {format_bytes(results)} of tables in memory until they "
            f"are written and drawn (per run: a {bins} × {bins} heatmap, a profile of up to {spec.n_positions} "
            f"distances, {options.n_resamples} bootstrap replicates; and the pairs of labels compared), "
            f"{format_bytes(total)} "
            f"with the analysis, and {format_bytes(available)} is available: run fewer runs (split the grid into "
            "several studies), or lower n_positions, [analysis] heatmap_bins or n_resamples; or pass --force to "
            "try anyway")
    name = run.label if run.seed is None else f"{run.label} seed {run.seed}"
    generating = (f" (generating its table alone {format_bytes(generation)}, as {run.encoding.kind} declares: "
                  "see its parameters)" if generation + _OVERHEAD >= need else "")
    at_once = (f"; {workers} runs at a time need about {format_bytes(together)}" if workers > 1 else "")
    fix = ("use fewer --jobs (each run alone needs about " + format_bytes(need) + "), or analyse"
           if workers > 1 and need + results <= available else "analyse")
    raise ResourceError(
        f"{spec.source}: the largest run ({name}: {run.n_positions} positions, "
        f"{f'dim {table_dim}' if table_dim else 'its exact kernel, no table'}, n_resamples {options.n_resamples}) "
        f"needs about {format_bytes(need)} "
        f"of memory{generating}{at_once}, the collected tables about {format_bytes(results)}, and {format_bytes(available)} is "
        f"available: {fix} a shorter window (n_positions), a smaller dim or fewer resamples; or pass --force to "
        "try anyway"
    )
