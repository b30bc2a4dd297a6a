"""The figure worker under signals: SIGTERM or kill -9 of ``poslab`` while the figures are drawn (one by a forked
worker, tests/faults/fault_poslab.py) leaves no process behind, and SIGTERM nothing half-written."""

from __future__ import annotations

import os
import signal

import pytest

from .conftest import descendants, session, wait_for

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads the process table from /proc")

STUDY = """
name = "worker"
n_positions = 256
dim = 8

[[encodings]]
kind = "sinusoidal"

[[encodings]]
kind = "rotary"
rotary_dim = 8
"""


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_signal_to_poslab_alone_ends_its_figure_worker(tmp_path, poslab, sig):
    study = tmp_path / "worker.toml"
    study.write_text(STUDY)
    p = poslab(["run", study, "--out", tmp_path / "res", "--executor", "serial", "--no-progress"], slow_figure=True)
    wait_for(lambda: (p.dir / "drawing").exists(), 60, "poslab to draw its figures")
    wait_for(lambda: descendants(p.process.pid), 10, "the figure worker")  # forked before the first figure
    os.kill(p.process.pid, sig)  # poslab alone, not its process group: the worker must end with it
    status, output = p.finish(20)
    assert status == (143 if sig == signal.SIGTERM else -signal.SIGKILL), output
    wait_for(lambda: not session(p.process.pid), 10, "the figure worker to exit")
    if sig == signal.SIGTERM:
        assert "Traceback" not in output and "stopped by SIGTERM; nothing half-written" in output, output
        assert [q.name for q in tmp_path.iterdir() if q.name.startswith(".")] == []
    assert not (tmp_path / "res").exists()
