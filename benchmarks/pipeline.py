"""One whole study run per case at large n: wall time, peak memory and where the time goes.

Run from the repository root::

    .venv/bin/python benchmarks/pipeline.py                 # n = 131072, dim 128: sinusoidal, smoothed_random
    .venv/bin/python benchmarks/pipeline.py --n 1048576     # any size
    .venv/bin/python benchmarks/pipeline.py --n-resamples 0 # without bootstrap intervals

Each case is one run of a one-encoding study (``poslab.study.runner.execute_run``:
table generation, profile, bands, decay fits, envelope fits, anchor-block
bootstrap with n_resamples refits, properties, block heatmap and the run's
result tables; the study-level comparison and figures are not included), up to
distance n − 1, in a fresh Python process. Time is execute_run alone (imports
excluded); peak memory is the child's peak resident set
(``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the end), interpreter,
libraries and the table included. The per-stage seconds come from wrapping the
analysis functions the stages and their run context call. Children run with numpy's default
environment (what ``poslab run`` gets; see benchmarks/README.md on
NUMPY_MADVISE_HUGEPAGE).
"""

from __future__ import annotations

import argparse
import functools
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KINDS = ("sinusoidal", "smoothed_random")
# the analysis functions behind the stages (poslab.stages), and where the pipeline looks them up
STAGES = {"unit_rows": "poslab.analysis", "_similarity_profile": "poslab.analysis.profile",
          "band_metrics": "poslab.analysis", "fit_decay": "poslab.analysis.decay",
          "_block_similarity": "poslab.stages.heatmap", "anchor_block_sums": "poslab.analysis.bootstrap",
          "bootstrap_anchor_blocks": "poslab.analysis.bootstrap", "table_properties": "poslab.stages.properties"}


def _child(kind, n, dim, n_resamples, out):
    from poslab.study import runner
    from poslab.study.spec import parse_study

    seconds = dict.fromkeys(STAGES, 0.0)

    def timed(name, f):
        @functools.wraps(f)
        def wrapper(*args, **kwargs):
            t = time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                seconds[name] += time.perf_counter() - t
        return wrapper

    import importlib

    for name, module in STAGES.items():
        module = importlib.import_module(module)
        setattr(module, name, timed(name, getattr(module, name)))
    spec = parse_study({"name": "pipeline", "n_positions": n, "dim": dim, "seeds": [0],
                        "analysis": {"n_resamples": n_resamples}, "encodings": [{"kind": kind}]})
    run = spec.runs()[0]
    t = time.perf_counter()
    frames = runner.execute_run(spec, run, list(run.encoding.params()))
    total = time.perf_counter() - t
    summary = frames["summary"].iloc[0]
    if summary["status"] != "ok":
        raise SystemExit(f"{kind} n={n}: {summary['message']}")
    Path(out).write_text(json.dumps({
        "seconds": total, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "stages": seconds, "model": summary.get("selected_model", ""),
        "decay_length": float(summary.get("decay_length", float("nan"))),
        "ci": [float(summary.get("decay_length_ci_low", float("nan"))),
               float(summary.get("decay_length_ci_high", float("nan")))]}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=131_072, help="positions (default 131072)")
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--n-resamples", type=int, default=200)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS))
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, n, dim, n_resamples, out = args.child
        _child(kind, int(n), int(dim), int(n_resamples), out)
        return
    print(f"## one study run, n = {args.n:,}, dim = {args.dim}, distances up to n - 1, "
          f"n_resamples = {args.n_resamples}")
    with tempfile.TemporaryDirectory() as workdir:
        for kind in args.kinds:
            out = str(Path(workdir) / f"{kind}.json")
            subprocess.run([sys.executable, __file__, "--child", kind, str(args.n), str(args.dim),
                            str(args.n_resamples), out], check=True)
            r = json.loads(Path(out).read_text())
            stages = ", ".join(f"{k.strip('_')} {v:.2f}" for k, v in r["stages"].items() if v >= 0.005)
            print(f"{kind:16} {r['seconds']:6.1f} s  peak {r['peak'] / 2**30:.2f} GiB  "
                  f"{r['model'] or 'no model'} decay length {r['decay_length']:.4g} "
                  f"[{r['ci'][0]:.4g}, {r['ci'][1]:.4g}]\n    stages (s): {stages}")


if __name__ == "__main__":
    main()
