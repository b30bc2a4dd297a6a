"""Faults of processes: a worker killed, the main process killed, Ctrl-C / SIGTERM, kill -9 while writing.

Each test drives a real ``poslab`` process (tests/faults/fault_poslab.py) and
hurts it as a user or the kernel would; every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from poslab._atomic import TEMPORARY_PATTERN

from .conftest import HERE, alive, deadline, descendants, session, wait_for

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads the process table from /proc")

STUDY = """
name = "faults"
n_positions = 256
dim = 8
seeds = [0, 1, 2, 3]

[analysis]
n_resamples = 40

[[encodings]]
kind = "fault"
sleep = {seconds}
"""


def _tag(seed: int) -> int:
    """What the fault encoding writes for a run of this seed (its first draw)."""
    return int(np.random.default_rng(seed).integers(1 << 30))


PLAIN = """
name = "plain"
n_positions = 256
dim = 8

[analysis]
n_resamples = 40

[[encodings]]
kind = "sinusoidal"
"""


def _plain(tmp_path):
    path = tmp_path / "plain.toml"
    path.write_text(PLAIN)
    return path


def _study(tmp_path, seconds):
    path = tmp_path / "faults.toml"
    path.write_text(STUDY.format(seconds=seconds))
    return path


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_killed_worker_costs_only_its_run(tmp_path, poslab, sig):
    """kill -9 (or -15) of one busy worker: one failed row naming the signal, the other runs finish, no hang."""
    p = poslab(["run", _study(tmp_path, 0.6), "--out", tmp_path / "res", "--jobs", "2", "--no-progress"])
    started = wait_for(p.started, 30, "a run to start")
    victim, tag = next(iter(started.items()))
    os.kill(victim, sig)
    code, output = p.finish(60)
    assert code == 1, output  # some runs failed: written, exit 1
    summary = pd.read_csv(tmp_path / "res" / "summary.csv")
    killed_seed = next(s for s in range(4) if _tag(s) == tag)
    failed = summary[summary["status"] != "ok"]
    assert list(failed["seed"]) == [killed_seed], output
    message = failed["message"].iloc[0]
    assert message.startswith("WorkerLost:") and signal.Signals(sig).name in message and str(victim) in message
    assert (summary.loc[summary["seed"] != killed_seed, "status"] == "ok").all()
    # results bigger than a pipe buffer made it back (the old pool deadlocked on exactly these)
    assert len(pd.read_csv(tmp_path / "res" / "heatmaps.csv")) == 3 * 128 * 128
    assert "1 of 4 runs failed" in output


def test_workers_exit_when_the_main_process_is_killed(tmp_path, poslab):
    p = poslab(["run", _study(tmp_path, 60.0), "--out", tmp_path / "res", "--jobs", "2", "--no-progress"])
    workers = list(wait_for(lambda: len(p.started()) == 2 and p.started(), 30, "both workers to start a run"))
    helpers = descendants(p.process.pid)  # the workers, the fork server, multiprocessing's resource tracker
    assert set(workers) <= set(helpers)
    os.kill(p.process.pid, signal.SIGKILL)
    p.process.wait(timeout=10)
    wait_for(lambda: not any(alive(w) for w in helpers), 5, "orphaned workers and helpers to exit")
    assert not (tmp_path / "res").exists()


def _interrupt(p, sig) -> None:
    """Ctrl-C as a terminal sends it (SIGINT to the whole process group), or SIGTERM to poslab alone."""
    if sig == signal.SIGINT:
        os.killpg(p.process.pid, sig)
    else:
        os.kill(p.process.pid, sig)


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_exits_with_its_code_and_leaves_nothing(tmp_path, poslab, sig, code):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or SIGTERM to poslab."""
    p = poslab(["run", _study(tmp_path, 60.0), "--out", tmp_path / "res", "--jobs", "2", "--no-progress"])
    workers = list(wait_for(lambda: len(p.started()) == 2 and p.started(), 30, "both workers to start a run"))
    helpers = descendants(p.process.pid)
    assert set(workers) <= set(helpers)
    _interrupt(p, sig)
    status, output = p.finish(20)
    assert status == code, output
    assert "Traceback" not in output
    wait_for(lambda: not any(alive(w) for w in helpers), 5, "workers and helpers to exit")
    assert [q.name for q in tmp_path.iterdir() if q.name.startswith(".")] == []
    assert not (tmp_path / "res").exists()


STUCK = """
name = "stuck"
n_positions = 256
dim = 8

[[encodings]]
kind = "fault"
stuck = true
"""


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "SIGTERM")])
def test_a_single_run_stuck_in_native_code_still_stops(tmp_path, poslab, sig, code, said):
    """One run, default executor, deep in one C call that never checks for signals: Ctrl-C / SIGTERM still act.

    The run is in a thread of the poslab process (no worker for a single run: poslab.cli._in_a_thread); the main
    thread only waits, so the signal's handler runs at once (the C call releases the GIL, as numpy's and scipy's
    long loops do). Before the worker processes it ran in the main thread, whose handlers wait for the C call to
    return (minutes).
    """
    study = tmp_path / "stuck.toml"
    study.write_text(STUCK)
    p = poslab(["run", study, "--out", tmp_path / "res", "--no-progress"])
    (worker,) = wait_for(p.started, 30, "the run to start")
    assert worker == p.process.pid  # the run is in poslab's own process (a thread)
    helpers = descendants(p.process.pid)
    _interrupt(p, sig)
    status, output = p.finish(20)
    assert status == code, output
    assert said in output and "Traceback" not in output, output
    wait_for(lambda: not any(alive(w) for w in helpers), 5, "the worker to exit")
    assert [q.name for q in tmp_path.iterdir() if q.name.startswith(".")] == []
    assert not (tmp_path / "res").exists()


def test_a_caller_with_threads_is_never_forked(tmp_path):
    """Workers start from a fork server, never by forking the caller (whose threads can make a fork hang).

    Regression: a test session hung for ever in ``os.fork()`` of a worker,
    inside scipy's pocketfft at-fork handler, because earlier analysis in the
    same process had left pocketfft's thread pool running. The script makes
    every fork of itself fail at once (see its docstring), with threads and
    that pool running, and starts workers for two studies and a replacement.
    """
    process = subprocess.Popen([sys.executable, str(HERE / "threaded_caller.py")], cwd=tmp_path, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 0 and out.strip() == "ok", f"status {process.returncode}\n{out}{err}"


def test_ctrl_c_while_the_fork_server_starts_prints_no_traceback(tmp_path, poslab):
    """Ctrl-C reaches the whole process group, also the fork server while it imports poslab (a second or two)."""
    p = poslab(["run", _study(tmp_path, 60.0), "--out", tmp_path / "res", "--jobs", "2", "--no-progress"])

    def fork_server():
        p.started()  # fails if poslab has exited
        return [c for c in descendants(p.process.pid) if b"forkserver" in Path(f"/proc/{c}/cmdline").read_bytes()]

    wait_for(fork_server, 30, "the fork server to start")
    os.killpg(p.process.pid, signal.SIGINT)
    status, output = p.finish(30)
    assert status == 130 and "Traceback" not in output, output
    assert "interrupted; nothing half-written was left behind" in output
    wait_for(lambda: not session(p.process.pid), 10, "the fork server and its workers to exit")


def _kill_while_writing(tmp_path, poslab, extra=()):
    p = poslab(["run", _study(tmp_path, 0.0), "--out", tmp_path / "res", "--jobs", "1", "--no-progress", *extra],
               slow_figure=True)
    wait_for(lambda: (p.dir / "drawing").exists(), 60, "poslab to draw its figures")
    os.kill(p.process.pid, signal.SIGKILL)
    p.process.wait(timeout=10)
    stale = [q for q in tmp_path.iterdir() if TEMPORARY_PATTERN.match(q.name)]
    assert len(stale) == 1 and stale[0].name.startswith(".res.poslab-tmp-")
    assert (stale[0] / "summary.csv").is_file()  # the tables were written before any figure
    return stale[0]


def test_kill_while_writing_leaves_a_temporary_the_next_run_removes(tmp_path, poslab):
    from click.testing import CliRunner

    from poslab.cli import main

    user_files = [tmp_path / ".res.tmp-keepme", tmp_path / ".my-notes", tmp_path / "res.poslab-tmp-notours"]
    for f in user_files:
        f.mkdir()
    stale = _kill_while_writing(tmp_path, poslab)
    assert not (tmp_path / "res").exists()
    with deadline(60):
        result = CliRunner().invoke(main, ["run", str(_plain(tmp_path)), "--out", str(tmp_path / "other"),
                                           "--no-progress"])
    assert result.exit_code == 0, result.output
    assert not stale.exists()  # poslab's own stale temporary, in the same parent folder: removed
    assert all(f.is_dir() for f in user_files)  # nothing else is ever touched


def test_kill_while_replacing_keeps_the_previous_result(tmp_path, poslab):
    from poslab._atomic import AtomicFolder

    previous = tmp_path / "res"
    previous.mkdir()
    (previous / "summary.csv").write_text("the previous result\n")
    p = poslab([])  # only to share the fixture's clean-up; the real victim is the script below
    p.kill()
    import subprocess
    import sys

    script = (
        "import os, sys, time\n"
        "from pathlib import Path\n"
        "from poslab._atomic import AtomicFolder\n"
        "real = os.rename\n"
        "def slow(a, b):\n"
        "    Path(sys.argv[2]).touch(); time.sleep(60)\n"
        "with AtomicFolder(sys.argv[1]) as f:\n"
        "    (f.path / 'summary.csv').write_text('new')\n"
        "    os.rename = slow\n"
        "    f.commit()\n"
    )
    marker = tmp_path / "swapping"
    victim = subprocess.Popen([sys.executable, "-c", script, str(previous), str(marker)])
    try:
        wait_for(marker.exists, 30, "the swap to begin")
        victim.kill()  # between moving the previous result aside and moving the new one in
        victim.wait(timeout=10)
    finally:
        if victim.poll() is None:
            victim.kill()
    assert not previous.exists()
    assert any(q.name.startswith(".res.poslab-old-") for q in tmp_path.iterdir())
    with AtomicFolder(tmp_path / "elsewhere"):  # any later write into this folder puts it back
        pass
    assert (previous / "summary.csv").read_text() == "the previous result\n"
    assert not [q for q in tmp_path.iterdir() if TEMPORARY_PATTERN.match(q.name)]


def test_full_disk_keeps_the_previous_result(tmp_path, poslab):
    """A file size limit (RLIMIT_FSIZE, as a full disk) while writing: a clear error, the old result intact."""
    import resource

    from click.testing import CliRunner

    from poslab.cli import main

    study = _plain(tmp_path)
    with deadline(60):
        first = CliRunner().invoke(main, ["run", str(study), "--out", str(tmp_path / "res"), "--no-progress"])
    assert first.exit_code == 0, first.output
    before = {q.name: q.read_bytes() for q in (tmp_path / "res").iterdir()}

    def small_files():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, 200_000))

    p = poslab(["run", study, "--out", tmp_path / "res", "--overwrite", "--jobs", "1", "--no-progress"],
               preexec_fn=small_files)
    code, output = p.finish(60)
    assert code == 1, output
    assert f"cannot write results folder {tmp_path / 'res'}" in output and "file size limit" in output
    assert "poslab-tmp" not in output and "Traceback" not in output
    assert {q.name: q.read_bytes() for q in (tmp_path / "res").iterdir()} == before
    assert not [q for q in tmp_path.iterdir() if TEMPORARY_PATTERN.match(q.name)]
    assert json.loads((tmp_path / "res" / "manifest.json").read_text())["study"] == "plain"


def _die_on_three(x):
    if x == 3:
        os.kill(os.getpid(), signal.SIGKILL)  # the worker is lost mid-run
    return np.zeros(50_000) + x  # a result larger than a pipe buffer


def test_a_lost_dask_worker_is_one_failed_item():
    pytest.importorskip("dask.distributed")
    from poslab.study.executors import map_unordered

    with deadline(90):
        out = dict(map_unordered(_die_on_three, list(range(5)), executor="dask", jobs=1))
    assert sorted(out) == list(range(5))
    assert [i for i, o in out.items() if o.error is not None] == [3]
    assert "KilledWorker" in type(out[3].error).__name__ or "died" in str(out[3].error)
    assert all(out[i].value[0] == i for i in (0, 1, 2, 4))  # the nanny's new worker ran the rest


@pytest.mark.parametrize("phase", ["stages", "figures"])
def test_interrupt_with_progress_on_leaves_nothing(tmp_path, poslab, phase):
    """Progress on (the default; a pipe: plain lines): Ctrl-C during a single run's stages (in this process, serial)
    or while the figures are drawn exits 130 with nothing half-written, no traceback and no bar junk."""
    sleep, slow = (60.0, False) if phase == "stages" else (0.0, True)
    study = tmp_path / "one.toml"
    study.write_text(STUDY.format(seconds=sleep).replace("seeds = [0, 1, 2, 3]", "seeds = [0]"))
    p = poslab(["run", study, "--out", tmp_path / "res", "--executor", "serial"], slow_figure=slow)
    if phase == "stages":
        wait_for(p.started, 30, "the run to start")
    else:
        wait_for(lambda: (p.dir / "drawing").exists(), 60, "poslab to draw its figures")
    os.killpg(p.process.pid, signal.SIGINT)
    status, output = p.finish(20)
    assert status == 130, output
    assert "Traceback" not in output and "\r" not in output, output
    assert "interrupted; nothing half-written was left behind" in output
    assert "\n\ninterrupted" not in output and not output.startswith("\n")  # no empty line before it on a pipe
    if phase == "figures":  # the stages were reported, the unfinished figures were not (the tables are written
        # while the figures are drawn, also in a second process: their line may or may not have come)
        assert "fault seed 0: heatmap " in output
        assert "figures: " not in output
    assert [q.name for q in tmp_path.iterdir() if q.name.startswith(".")] == []
    assert not (tmp_path / "res").exists()
