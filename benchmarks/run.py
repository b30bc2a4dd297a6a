"""poslab against the usual recipes: wall time and peak memory, side by side, per size.

Run from the repository root::

    .venv/bin/python benchmarks/run.py            # every size, then the default study end to end
    .venv/bin/python benchmarks/run.py --quick    # n = 4096 only
    .venv/bin/python benchmarks/run.py --issue16  # n = 4096 with (e), the 2^20 x 128 whole run, the default study

Methods (each in a fresh Python process, so its peak memory is its own):

(a) classic   the tutorial recipe: normalise rows, S = U·Uᵀ (float64), then a
              Python loop averaging S[i, i + k] over i for each distance k.
(b) sklearn   sklearn.metrics.pairwise.cosine_similarity(X), then the mean of
              each diagonal (numpy.diagonal).
(c) poslab    poslab.analysis.similarity_profile (mean, std and n_pairs at every
              distance), plus block_similarity(bins=512) at n = 1,048,576.
(c32)         the same with precision="float32".
(d) fft       the floor: a bare scipy.fft autocorrelation of the unit rows
              (normalise, one rfft per column, Σ_dims |F|², one irfft,
              divide by the pair counts): the mean profile and nothing else.
(e) poslab run  the whole process at n = 4096 (``--whole-run`` sizes): the
              same table saved as .npy, a one-run study ``kind = "learned",
              source = <file>`` through ``poslab run`` (interpreter,
              imports, analysis with fits, bootstrap and properties, CSV and
              figures), timed from outside; peak RSS is the largest of
              poslab's processes (RUSAGE_CHILDREN of an intermediate process).
              ``--repeat N``: (a) and (e) run N times each, alternately
              (a, e, a, e, ...), and each row shows its fastest, the list of
              all times printed below the table.
(f) floor     benchmarks/floor_process.py on (e)'s table, timed as (e): the
              interpreter, the imports of a tool with tidy tables and figures
              (numpy, pandas, pyarrow, scipy.fft, matplotlib), (d)'s profile,
              one CSV and one 300-dpi PNG: the least any whole process pays
              (with ``--repeat N`` it alternates with (a) and (e)).

Time is the method alone (table generation and imports excluded; first calls
included, as a user pays them: FFT plans, fresh memory pages). Peak memory
is the child process's peak resident set (resource.getrusage(RUSAGE_SELF)
.ru_maxrss, read inside the child at the end), so it includes the Python
interpreter, numpy/scipy and the input table itself; the "table only" row is
that baseline. A method whose n × n matrix cannot fit in the available memory
is skipped with the memory it would need. Accuracy: max |Δ| of the mean
profile against (a) where (a) ran; otherwise against exact row-wise dot
products at distances 1, 2, n/2, n − 2, n − 1 (computed in the poslab process).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZES = [(4096, 768), (131_072, 128), (1_048_576, 128)]
HEATMAP_BINS = {1_048_576: 512}
METHODS = ["table", "classic", "sklearn", "poslab", "poslab32", "fft"]
NAMES = {"table": "table only", "classic": "(a) classic", "sklearn": "(b) sklearn", "poslab": "(c) poslab",
         "poslab32": "(c32) poslab float32", "fft": "(d) bare scipy.fft", "run": "(e) poslab run (whole)",
         "floor": "(f) floor process"}
#: Sizes at which (e), the whole ``poslab run`` process, runs too.
WHOLE_RUN = {(4096, 768)}
#: Times (a) and (e) each run, alternately, at those sizes (``--repeat``).
REPEAT = 1


def _table(n, dim):
    import numpy as np

    return np.random.default_rng(0).normal(size=(n, dim))


def _child(method, n, dim, out):
    """Run one method in this (fresh) process; write timing, memory and result to ``out``."""
    import numpy as np

    table = _table(n, dim)
    extra = {}
    if method == "sklearn":
        from sklearn.metrics.pairwise import cosine_similarity
    if method.startswith("poslab"):
        from poslab.analysis import block_similarity, similarity_profile
    if method == "fft":
        import scipy.fft
    t0 = time.perf_counter()
    if method == "classic":
        u = table / np.linalg.norm(table, axis=1, keepdims=True)
        s = u @ u.T
        mean = np.empty(n)
        for k in range(n):
            values = [s[i, i + k] for i in range(n - k)]
            mean[k] = sum(values) / len(values)
    elif method == "sklearn":
        s = cosine_similarity(table)
        mean = np.array([np.diagonal(s, k).mean() for k in range(n)])
    elif method in ("poslab", "poslab32"):
        prof = similarity_profile(table, precision="float32" if method == "poslab32" else "float64")
        mean = prof.mean_similarity
        if n in HEATMAP_BINS:
            block_similarity(table, bins=HEATMAP_BINS[n])
    elif method == "fft":
        u = table / np.linalg.norm(table, axis=1, keepdims=True)
        f = scipy.fft.rfft(u, n=scipy.fft.next_fast_len(2 * n, real=True), axis=0)
        power = (f.real ** 2 + f.imag ** 2).sum(axis=1)
        mean = scipy.fft.irfft(power, axis=0)[:n] / np.arange(n, 0, -1)
    else:
        mean = None
    seconds = time.perf_counter() - t0
    if method.startswith("poslab"):  # exact spot checks where no baseline can run
        u = table / np.linalg.norm(table, axis=1, keepdims=True)
        ks = sorted({1, 2, n // 2, n - 2, n - 1})
        exact = [np.einsum("ij,ij->i", u[: n - k], u[k:]).mean() for k in ks]
        extra["spot_error"] = float(max(abs(mean[k] - e) for k, e in zip(ks, exact)))
    if mean is not None:
        np.save(out + ".npy", mean)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: KiB
    Path(out).write_text(json.dumps({"seconds": seconds, "peak": peak, **extra}))


def _available_bytes():
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def _gib(b):
    return f"{b / 2**30:.2f} GiB" if b >= 2**30 else f"{b / 2**20:.0f} MiB"


#: Environment of every child process (all methods alike); see --hugepages.
CHILD_ENV = dict(os.environ)


def _run_child(method, n, dim, workdir):
    out = str(Path(workdir) / f"{method}-{n}-{dim}.json")
    subprocess.run([sys.executable, __file__, "--child", method, str(n), str(dim), out], check=True, env=CHILD_ENV)
    return json.loads(Path(out).read_text()), out + ".npy"


def bench_size(n, dim, workdir):
    import numpy as np

    print(f"\n## n = {n:,}, dim = {dim}, all {n:,} distances"
          + (f", + {HEATMAP_BINS[n]}x{HEATMAP_BINS[n]} block heatmap (poslab)" if n in HEATMAP_BINS else ""))
    print(f"{'method':24} {'seconds':>9} {'peak RSS':>11} {'time vs (a)':>12} {'time vs (c)':>12}  max |Δ mean|")
    rows, means, repeats = {}, {}, None
    need = 8 * n * n  # the float64 n × n matrix
    for method in METHODS:
        if method in ("classic", "sklearn") and need > 0.8 * _available_bytes():
            print(f"{NAMES[method]:24} {'skipped':>9}  (S alone needs {_gib(need)}; {_gib(_available_bytes())} available)")
            continue
        rows[method], path = _run_child(method, n, dim, workdir)
        if method != "table":
            means[method] = np.load(path)
    if (n, dim) in WHOLE_RUN:
        rows["run"], means["run"] = _whole_run(n, dim, workdir)
        rows["floor"], means["floor"] = _floor_process(workdir)
        if "classic" in rows and REPEAT > 1:  # (a), (e) and (f) again, alternately: each row keeps its fastest
            times = {name: [rows[name]["seconds"]] for name in ("classic", "run", "floor")}
            for _ in range(REPEAT - 1):
                again = {"classic": _run_child("classic", n, dim, workdir)[0], "run": _whole_run(n, dim, workdir)[0],
                         "floor": _floor_process(workdir)[0]}
                for method, r in again.items():
                    times[method].append(r["seconds"])
                    if r["seconds"] < rows[method]["seconds"]:
                        rows[method] = r
            repeats = (f"(a), (e) and (f) alternately, {REPEAT} times each (the rows above: each one's fastest): "
                       + "; ".join(f"{NAMES[m][:3]} {', '.join(f'{t:.2f}' for t in times[m])} s" for m in times)
                       + f"; load average now {os.getloadavg()[0]:.2f}")
    for method, r in rows.items():
        a, c = rows.get("classic"), rows.get("poslab")
        vs_a = f"{a['seconds'] / r['seconds']:.2f}x" if a and method not in ("classic", "table") else ""
        vs_c = f"{r['seconds'] / c['seconds']:.1f}x" if c and method not in ("poslab", "table") else ""
        if method == "table" or method == "classic":
            err = ""
        elif "classic" in means:
            err = f"{np.abs(means[method] - means['classic']).max():.1e} vs (a)"
        else:
            err = f"{r['spot_error']:.1e} vs exact dots at 5 distances"
        sec = "" if method == "table" else f"{r['seconds']:.3f}"
        print(f"{NAMES[method]:24} {sec:>9} {_gib(r['peak']):>11} {vs_a:>12} {vs_c:>12}  {err}")
    if repeats:
        print(repeats)
    return rows


def _measured(cmd, cwd=None):
    """Run ``cmd`` in a fresh intermediate process: (wall seconds, largest child peak RSS in bytes, CompletedProcess)."""
    probe = ("import json, resource, subprocess, sys, time; t = time.perf_counter(); "
             "d = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "print(json.dumps([time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
             "d.returncode, d.stdout, d.stderr]))")
    done = subprocess.run([sys.executable, "-c", probe, *map(str, cmd)], capture_output=True, text=True,
                          env=CHILD_ENV, check=True, cwd=cwd)
    seconds, peak, code, stdout, stderr = json.loads(done.stdout)
    return seconds, peak * 1024, subprocess.CompletedProcess(cmd, code, stdout, stderr)


def _whole_run(n, dim, workdir):
    """(e): the same table through ``poslab run`` as a one-run study, the whole process timed from outside."""
    import numpy as np
    import pandas as pd

    np.save(Path(workdir) / "table.npy", _table(n, dim))
    study = Path(workdir) / "whole.toml"
    study.write_text(f'name = "whole"\nn_positions = {n}\ndim = {dim}\n\n'
                     '[[encodings]]\nkind = "learned"\nsource = "./table.npy"\n')
    out = Path(workdir) / "whole"
    seconds, peak, done = _measured([Path(sys.executable).with_name("poslab"), "run", study, "--out", out,
                                     "--overwrite", "--no-progress"], cwd=workdir)
    if done.returncode:
        raise SystemExit(f"poslab run failed: {done.stderr[-500:]}")
    mean = pd.read_csv(out / "profiles.csv")["mean_similarity"].to_numpy()
    return {"seconds": seconds, "peak": peak}, mean


def _floor_process(workdir):
    """(f): benchmarks/floor_process.py on (e)'s table, the whole process timed from outside (its docstring)."""
    import pandas as pd

    out = Path(workdir) / "floor"
    seconds, peak, done = _measured([sys.executable, Path(__file__).with_name("floor_process.py"),
                                     Path(workdir) / "table.npy", out], cwd=workdir)
    if done.returncode:
        raise SystemExit(f"the floor process failed: {done.stderr[-500:]}")
    return {"seconds": seconds, "peak": peak}, pd.read_csv(out / "profile.csv")["mean_similarity"].to_numpy()


def bench_whole_large(n, dim, workdir):
    """A one-run study of a random (learned-style) table of n positions, whole process with figures."""
    print(f"\n## whole run: random table n = {n:,}, dim = {dim} (poslab run, figures included)")
    study = Path(workdir) / "large.toml"
    study.write_text(f'name = "large"\nn_positions = {n}\ndim = {dim}\nseeds = [0]\n\n[[encodings]]\nkind = "random"\n')
    cmd = ["/usr/bin/time", "-v", Path(sys.executable).with_name("poslab"), "run", study, "--out",
           Path(workdir) / "large", "--overwrite", "--no-progress"]
    seconds, _, done = _measured(cmd, cwd=workdir)
    rss = next((int(line.split(":")[1]) * 1024 for line in done.stderr.splitlines()
                if "Maximum resident set size" in line), 0)
    tail = [line for line in done.stdout.splitlines() if line.startswith("wrote")]
    print(f"exit {done.returncode}; wall {seconds:.1f} s; peak RSS {_gib(rss)} (/usr/bin/time -v, largest process); "
          f"{tail[-1] if tail else done.stderr.strip()[-300:]}")


def bench_study(workdir):
    print("\n## default study end to end (poslab run --overwrite, figures included)")
    out = Path(workdir) / "study"
    poslab = Path(sys.executable).with_name("poslab")
    cmd = [str(poslab), "run", "--overwrite", "--no-progress", "--out", str(out)]
    seconds, peak, done = _measured(cmd)
    code, stdout, stderr = done.returncode, done.stdout, done.stderr
    print("command: poslab run --overwrite --no-progress --out DIR  (runs in a process pool of all CPUs)")
    tail = [line for line in stdout.splitlines() if line.startswith("wrote")]
    print(f"exit {code}; wall {seconds:.1f} s; largest single process peak RSS {_gib(peak)}; "
          f"{tail[-1] if tail else stderr.strip()[-300:]}")


def machine():
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    import numpy
    import scipy

    return (f"{os.cpu_count()} CPUs ({model}), {_gib(_available_bytes())} available, "
            f"Python {platform.python_version()}, numpy {numpy.__version__}, scipy {scipy.__version__}, "
            f"load average {os.getloadavg()[0]:.2f}")


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 4096 only, no study")
    parser.add_argument("--no-study", action="store_true", help="skip the default study")
    parser.add_argument("--issue16", action="store_true",
                        help="issue 16's targets only: n = 4096 with the whole poslab run, the whole run of a random "
                             "1,048,576 x 128 table, the default study")
    parser.add_argument("--hugepages", action="store_true",
                        help="keep numpy's madvise(MADV_HUGEPAGE) on large arrays (default: off in every child, "
                             "NUMPY_MADVISE_HUGEPAGE=0: on this project's VM it makes first touch of fresh memory ~5x slower)")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="run (a) and (e) N times each, alternately, and show each one's fastest (on a shared "
                             "machine one run of each is one draw of the load)")
    args = parser.parse_args()
    global REPEAT
    REPEAT = max(1, args.repeat)
    if not args.hugepages:
        CHILD_ENV["NUMPY_MADVISE_HUGEPAGE"] = "0"
    print("# poslab benchmarks:", machine())
    print("children run with NUMPY_MADVISE_HUGEPAGE=" + CHILD_ENV.get("NUMPY_MADVISE_HUGEPAGE", "(numpy default)"))
    with tempfile.TemporaryDirectory(prefix="poslab-bench-") as workdir:
        for n, dim in SIZES[:1] if args.quick or args.issue16 else SIZES:
            bench_size(n, dim, workdir)
        if not args.quick:
            bench_whole_large(1_048_576, 128, workdir)
        if not (args.quick or args.no_study):
            bench_study(workdir)


if __name__ == "__main__":
    main()
