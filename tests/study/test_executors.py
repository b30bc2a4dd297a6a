"""Executors: the same tables whichever executor ran the runs; warnings and failures survive the trip."""

import functools
import os
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

from poslab.analysis import InvalidPositionsWarning
from poslab.study import parse_study, run_study
from poslab.study.executors import EXECUTORS, WorkerLost, map_unordered
from poslab.study.runner import execute_run


def _study(tmp_path):
    half_zero = np.random.default_rng(3).normal(size=(48, 12))
    half_zero[::2] = 0.0  # every other position excluded: a warning from the run
    np.save(tmp_path / "half_zero.npy", half_zero)
    np.save(tmp_path / "all_zero.npy", np.zeros((48, 12)))  # no valid row: the run fails
    return parse_study({
        "name": "executors", "n_positions": 48, "dim": 12, "seeds": [0, 1, 2],
        "analysis": {"heatmap_bins": 8},
        "encodings": [
            {"kind": "random"},
            {"kind": "sinusoidal"},
            {"kind": "learned", "source": str(tmp_path / "half_zero.npy")},
            {"kind": "learned", "source": str(tmp_path / "all_zero.npy")},
            {"kind": "rotary", "rotary_dim": 12},
        ],
    })


def _run(spec, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run_study(spec, progress=False, **kwargs)
    return result, sorted(str(w.message) for w in caught if issubclass(w.category, InvalidPositionsWarning))


def _assert_same_tables(a, b):
    assert a.frames.keys() == b.frames.keys()
    for name in a.frames:
        left, right = a.frames[name], b.frames[name]
        if "seconds" in left.columns:  # wall time is the one thing allowed to differ
            left, right = left.drop(columns="seconds"), right.drop(columns="seconds")
        pd.testing.assert_frame_equal(left, right, check_exact=True, obj=name)


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    spec = _study(tmp_path_factory.mktemp("executors"))
    return spec, *_run(spec, executor="serial")


def test_serial_reference(serial):
    spec, result, caught = serial
    s = result.summary
    assert list(s["label"]) == [r.label for r in spec.runs()]  # run order
    assert list(s["status"]) == ["ok"] * 5 + ["failed", "ok"]
    assert "no valid row" in s["message"].iloc[5] or "zero or non-finite" in s["message"].iloc[5]
    half = [r.label for r in spec.runs()][4]
    assert len(caught) == 1 and caught[0].startswith(f"{half}: ") and "24 of 48 positions" in caught[0]


def test_process_pool_gives_identical_tables(serial):
    spec, reference, caught = serial
    result, caught_pool = _run(spec, executor="processes", jobs=2)
    _assert_same_tables(reference, result)
    assert caught_pool == caught  # the worker's warning, named by its run, reaches this process


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # a run's numpy warnings, re-issued here: not the point
# the runs' warnings are checked below from what the worker recorded; the re-issued copies are expected
@pytest.mark.filterwarnings("ignore::poslab.analysis.similarity.InvalidPositionsWarning")
def test_dask_local_cluster_gives_identical_tables(serial):
    distributed = pytest.importorskip("dask.distributed")
    spec, reference, caught = serial
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        result = run_study(spec, progress=False, executor="dask", scheduler=cluster.scheduler_address)
        # warnings.catch_warnings is process-global and the in-process cluster's threads use it too, so
        # check what the worker recorded (run_study re-issues exactly these) rather than catching them here
        work = functools.partial(execute_run, spec, param_names=["source"])
        outcomes = dict(map_unordered(work, spec.runs(), executor="dask", scheduler=cluster.scheduler_address))
    _assert_same_tables(reference, result)
    recorded = [m for i in sorted(outcomes) for c, m in outcomes[i].warnings if c is InvalidPositionsWarning]
    assert recorded == caught


def _double_or_die(x):
    if x == 3:
        os._exit(7)  # a worker killed mid-run (out of memory, segfault)
    if x == 4:
        raise ValueError("bad item")
    warnings.warn(f"item {x}", UserWarning)
    return 2 * x


def test_map_unordered_reports_every_item_once_with_errors_and_warnings():
    for executor in ("serial", "processes"):
        items = [0, 1, 2, 4] if executor == "serial" else [0, 1, 2, 3, 4]
        out = dict(map_unordered(_double_or_die, items, executor=executor, jobs=2))
        assert sorted(out) == list(range(len(items)))
        by_item = {items[i]: o for i, o in out.items()}
        assert isinstance(by_item[4].error, ValueError) and "bad item" in str(by_item[4].error)
        if executor == "processes":  # the lost worker: its item's error, not a hang or a crash
            assert isinstance(by_item[3].error, WorkerLost) and "exited with status 7" in str(by_item[3].error)
        for x in (0, 1, 2):  # and nobody else's
            o = by_item[x]
            assert o.error is None and o.value == 2 * x and o.warnings == ((UserWarning, f"item {x}"),)


def _threads_here(_):
    from threadpoolctl import threadpool_info

    from poslab._threads import analysis_threads

    return analysis_threads(), sorted({lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"})


@pytest.mark.parametrize("executor, jobs", [("processes", 1), ("processes", 2), ("processes", 3),
                                            pytest.param("dask", 2, marks=pytest.mark.slow)])  # ~5-10 s: a cluster
def test_each_worker_uses_its_share_of_the_cpus(executor, jobs, monkeypatch):
    from poslab import _threads
    from poslab.study import executors

    cpus = 4
    monkeypatch.setattr(_threads, "usable_cpus", lambda: cpus)  # the share is computed here, before any worker
    share = max(1, cpus // jobs)
    if executor == "dask":
        pytest.importorskip("dask.distributed")
    out = dict(map_unordered(_threads_here, range(jobs), executor=executor, jobs=jobs))
    assert all(o.error is None for o in out.values()), [o.error for o in out.values()]
    for threads, blas in (o.value for o in out.values()):
        assert threads == share and all(b <= share for b in blas)
    assert executors.default_jobs() == cpus
    assert _threads.analysis_threads() == cpus  # this process keeps all of them


def test_bad_executor_arguments():
    with pytest.raises(ValueError, match="executor must be one of"):
        list(map_unordered(abs, [1], executor="threads"))
    with pytest.raises(ValueError, match="jobs must be a positive integer"):
        list(map_unordered(abs, [1], jobs=0))
    with pytest.raises(ValueError, match="needs executor='dask'"):
        list(map_unordered(abs, [1], scheduler="tcp://127.0.0.1:8786"))
    assert set(EXECUTORS) == {"serial", "processes", "dask"}


def test_missing_dask_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "dask.distributed", None)  # as if dask[distributed] were not installed
    with pytest.raises(ImportError, match=r"pip install 'poslab\[dask\]'"):
        list(map_unordered(abs, [1], executor="dask"))


class _Unpicklable(Exception):
    def __init__(self, a, b):  # pickles, but cannot be rebuilt from its args
        super().__init__(f"{a} {b}")


def _odd_errors(x):
    if x == 0:
        raise _Unpicklable("odd", "error")
    if x == 1:
        return lambda: None  # a result that cannot be pickled
    return x


def test_errors_and_results_that_cannot_travel_become_plain_errors():
    out = dict(map_unordered(_odd_errors, [0, 1, 2], executor="processes", jobs=2))
    # plain RuntimeError naming it, or the original where a library taught pickle exceptions (dask loads tblib)
    assert "odd error" in str(out[0].error) and isinstance(out[0].error, (RuntimeError, _Unpicklable))
    assert isinstance(out[1].error, RuntimeError) and "could not be sent" in str(out[1].error)
    assert out[2].error is None and out[2].value == 2


def _stop(x):
    raise KeyboardInterrupt if x == 0 else SystemExit(3)


def test_consumer_stopping_early_stops_the_workers():
    import time

    gen = map_unordered(time.sleep, [5.0, 5.0, 5.0], executor="processes", jobs=2)
    import multiprocessing

    with pytest.raises(StopIteration):
        gen.close()
        next(gen)
    assert not [c for c in multiprocessing.active_children() if c.name == "poslab-worker"]


def _no_workers_left():
    import multiprocessing

    return not [c for c in multiprocessing.active_children() if c.name == "poslab-worker"]


def test_work_that_cannot_be_pickled_runs_here_with_a_warning():
    def local(x):  # a local function (like a class defined inside a function) cannot be pickled
        return 2 * x

    with pytest.warns(UserWarning, match=r"cannot be sent to worker processes \(.*local.*\); this process runs 3 run"):
        out = dict(map_unordered(local, [0, 1, 2], executor="processes", jobs=2))
    assert {i: o.value for i, o in out.items()} == {0: 0, 1: 2, 2: 4}


def test_work_a_worker_cannot_load_runs_here_with_a_warning(monkeypatch):
    import types

    phantom = types.ModuleType("poslab_phantom")  # importable in this process only, as a class under a script's
    monkeypatch.setitem(sys.modules, "poslab_phantom", phantom)  # `if __name__ == "__main__":` is

    def triple(x):
        return 3 * x

    triple.__module__, triple.__qualname__ = "poslab_phantom", "triple"
    phantom.triple = triple
    with pytest.warns(UserWarning, match=r"could not load the study \(ModuleNotFoundError: No module named "
                                         r"'poslab_phantom'\); this process runs 3 run\(s\) itself.*top level"):
        out = dict(map_unordered(triple, [0, 1, 2], executor="processes", jobs=2))
    assert {i: o.value for i, o in out.items()} == {0: 0, 1: 3, 2: 6}
    assert _no_workers_left()


INTERACTIVE = """
import dataclasses, os
from poslab.encodings import Encoding, register
from poslab.study import parse_study, run_study

@register
@dataclasses.dataclass(frozen=True)
class Mine(Encoding):
    kind = "mine"
    stochastic = True

    def _generate(self, n_positions, dim, rng):
        print("generated in", "this process" if os.getpid() == CALLER else "a worker")
        return rng.normal(size=(n_positions, dim))

CALLER = os.getpid()
spec = parse_study({"name": "nb", "n_positions": 64, "dim": 8, "seeds": [0, 1], "analysis": {"n_resamples": 40},
                    "encodings": [{"kind": "mine"}, {"kind": "sinusoidal"}]})
print(list(run_study(spec, progress=False, executor="processes", jobs=2).summary["status"]))
"""


def test_a_class_defined_interactively_runs_here_with_a_warning(tmp_path):
    """A class defined in a notebook (here ``python -c``): workers cannot import it, so its study runs here, saying so."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", INTERACTIVE], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["generated in this process"] * 2 + ["['ok', 'ok', 'ok']"]
    assert ("class Mine is defined in this interactive session (a notebook, the REPL, python -c), which worker "
            "processes cannot import; this process runs 3 run(s) itself") in done.stderr
    assert "entry point" in done.stderr and "executor='serial'" in done.stderr


UNGUARDED = """
from poslab.study.executors import map_unordered

def double(x):
    return 2 * x

print(sorted((i, o.value) for i, o in map_unordered(double, [0, 1, 2], executor="processes", jobs=2)))
"""


def test_a_script_without_main_guard_runs_here_with_a_warning(tmp_path):
    """Each worker imports the script that started it (as spawn does): unguarded, it dies; the runs run here."""
    import subprocess

    (tmp_path / "unguarded.py").write_text(UNGUARDED)
    done = subprocess.run([sys.executable, "unguarded.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[(0, 0), (1, 2), (2, 4)]"
    assert "exited with status 1 before it could load the study; this process runs 3 run(s) itself" in done.stderr
    assert 'inside its `if __name__ == "__main__":` block' in done.stderr


def _kill_the_fork_server_first(x):
    caller, n = x
    if n == 0 and os.getppid() != caller:  # a fork server's worker: its parent is the server
        os.kill(os.getppid(), 9)
    import time

    time.sleep(0.3)
    return n


def test_the_fork_servers_death_costs_no_run():
    """Workers need the fork server only to start; its death (kill -9) loses nothing, and it is restarted."""
    items = [(os.getpid(), n) for n in range(4)]
    out = dict(map_unordered(_kill_the_fork_server_first, items, executor="processes", jobs=2))
    assert {i: (o.value, o.error) for i, o in out.items()} == {n: (n, None) for n in range(4)}
    out = dict(map_unordered(abs, [-1, -2, -3], executor="processes", jobs=2))  # a new server starts the workers
    assert [out[i].value for i in range(3)] == [1, 2, 3]


def test_a_ctrl_c_while_the_fork_server_starts_is_acted_on_once_it_has():
    """Ctrl-C is ignored while the fork server starts (the server inherits that through exec), but blocked too, so
    one that comes meanwhile is delivered once the server is up instead of lost (it was: the command then waited
    for its runs; tests/faults, 2 times in 41 under load). In a fresh process, as ``poslab run`` calls it: before
    any other thread (a thread that does not block it would take the signal and drop it, ignored), with Python's
    own Ctrl-C handler (a shell's background job, `make test &`, starts with Ctrl-C ignored, and keeps it so)."""
    import subprocess

    code = (
        "import multiprocessing.forkserver, os, signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal, even if this runs in the background\n"
        "from poslab.study import executors\n"
        "multiprocessing.forkserver.ensure_running = lambda: os.kill(os.getpid(), signal.SIGINT)  # comes meanwhile\n"
        "try:\n"
        "    executors._start_fork_server()\n"
        "except KeyboardInterrupt:\n"
        "    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler\n"
        "    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, set())\n"
        "    print('interrupted')\n"
        "else:\n"
        "    print('lost')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "interrupted", done.stdout + done.stderr
