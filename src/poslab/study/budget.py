"""Up-front resource checks: refuse a study that cannot fit in memory before any work starts.

The estimate of one run's peak memory is a conservative model fitted to
measurements of :func:`poslab.study.runner.analyse_table` (peak resident
memory above the interpreter's, random tables, default analysis options)::

    n × d table   n_resamples   measured   estimate
    16384 × 256       200        235 MiB    ~410 MiB
    65536 × 64        200        276 MiB    ~390 MiB
    131072 × 32       200        355 MiB    ~520 MiB
    262144 × 16       200        598 MiB    ~780 MiB
    4096 × 4096       200        471 MiB    ~600 MiB
    65536 × 256         0        438 MiB    ~720 MiB

i.e. about 3.5 copies of the float64 table (the table, its unit rows, FFT
blocks), 2 KiB per position (profile, anchor-block sums and bootstrap
chunks) and 150 MiB of fixed overhead, plus the bootstrap replicates
(n_resamples × (thresholds + 3) float64, kept as a table). It is meant to
refuse impossible work (a billion positions, a trillion dims, a billion
resamples) with a message, not to predict a run to the megabyte.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ResourceError", "estimate_run_memory", "available_memory", "check_resources", "format_bytes"]

_TABLE_COPIES = 3.5
_BYTES_PER_POSITION = 2048
_OVERHEAD = 150 * 2**20


class ResourceError(ValueError):
    """A study needs more memory than this machine has; the message says how much and what to change."""


def estimate_run_memory(n_positions: int, dim: int, *, n_resamples: int = 200, n_thresholds: int = 3) -> int:
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
    """
    table = 8 * int(n_positions) * int(dim)
    replicates = 8 * int(n_resamples) * (int(n_thresholds) + 3) * 4  # values, the table built from them, copies
    return int(_TABLE_COPIES * table + _BYTES_PER_POSITION * int(n_positions) + replicates + _OVERHEAD)


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


def _table_dim(encoding, dim: int) -> int:
    """Width of the table a run analyses: a learned table's own width, else the study's ``dim`` (an upper bound)."""
    table = getattr(encoding, "table", None)
    if encoding.keeps_own_dim and callable(table):
        try:
            return int(table().shape[1])
        except Exception:  # noqa: BLE001 - the estimate falls back to the study's dim
            return dim
    return dim


def check_resources(spec, *, workers: int = 1, available: int | None = None) -> int:
    """Refuse a study whose largest runs, ``workers`` at a time, need more memory than is available.

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
        The estimated peak of the ``workers`` largest runs together, in bytes.

    Raises
    ------
    ResourceError
        The estimate exceeds the available memory; the message names the
        largest run, both numbers and what to change.
    """
    options = spec.analysis
    estimates = []
    for run in spec.runs():
        need = estimate_run_memory(run.n_positions, _table_dim(run.encoding, spec.dim),
                                   n_resamples=options.n_resamples, n_thresholds=len(options.thresholds))
        estimates.append((need, run))
    estimates.sort(key=lambda e: e[0], reverse=True)
    workers = max(1, min(workers, len(estimates)))
    total = sum(e[0] for e in estimates[:workers])
    available = available_memory() if available is None else available
    if available is None or total <= available:
        return total
    need, run = estimates[0]
    name = run.label if run.seed is None else f"{run.label} seed {run.seed}"
    together = (f"; {workers} runs at a time need about {format_bytes(total)}" if workers > 1 else "")
    fix = ("use fewer --jobs (each run alone needs about " + format_bytes(need) + "), or analyse"
           if workers > 1 and need <= available else "analyse")
    raise ResourceError(
        f"{spec.source}: the largest run ({name}: {run.n_positions} positions, dim "
        f"{_table_dim(run.encoding, spec.dim)}, n_resamples {options.n_resamples}) needs about {format_bytes(need)} "
        f"of memory{together}, and {format_bytes(available)} is available: {fix} a shorter window "
        "(n_positions), a smaller dim or fewer resamples; or pass --force to try anyway"
    )
