"""Helpers of the fault-injection suite: deadlines (no test can hang), a poslab process to hurt, process tables."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent


@contextlib.contextmanager
def deadline(seconds: float):
    """Raise TimeoutError in this (main) thread if the block runs longer than ``seconds``: a hang fails, never hangs."""

    def expire(signum, frame):
        raise TimeoutError(f"still running after {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def wait_for(predicate, seconds: float, what: str):
    """Poll ``predicate`` every 20 ms until it is truthy; fail after ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {seconds} s waiting for {what}")


def alive(pid: int) -> bool:
    """True if ``pid`` is a running (not zombie) process."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _live(field: int, value: int) -> list[int]:
    """Live processes whose /proc stat field ``field`` (after the command name) equals ``value``."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[field]) == value and fields[0] != "Z":
                out.append(int(entry.name))
    return out


def children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (Linux /proc)."""
    return _live(1, pid)


def session(sid: int) -> list[int]:
    """Live processes of session ``sid`` (a poslab started in its own session, and whatever it left behind)."""
    return _live(4, sid)


def _states(pids) -> str:
    """What each process is doing (for the message of a hang): state, kernel wait channel, signal masks, command."""
    lines = []
    for pid in pids:
        proc = Path(f"/proc/{pid}")
        try:
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            wchan = (proc / "wchan").read_text()
            masks = " ".join(line.replace(":\t", " ") for line in (proc / "status").read_text().splitlines()
                             if line.startswith(("SigBlk", "SigIgn", "SigCgt")))
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:120]
        except OSError:
            continue
        threads = len(list((proc / "task").iterdir()))
        lines.append(f"pid {pid} state {state} wchan {wchan} threads {threads} {masks} {command}")
    return "\n".join(lines)


def descendants(pid: int) -> list[int]:
    """Live children of ``pid``, their children, and so on (workers are children of the fork server)."""
    found, todo = [], [pid]
    while todo:
        kids = children(todo.pop())
        found += kids
        todo += kids
    return found


class Poslab:
    """``poslab ARGS`` (with the ``fault`` encoding registered) in its own session, in ``cwd``."""

    def __init__(self, args, cwd: Path, *, slow_figure: bool = False, preexec_fn=None):
        self.dir = cwd / "fault-signals"
        self.dir.mkdir(exist_ok=True)
        env = dict(os.environ, POSLAB_FAULT_DIR=str(self.dir), PYTHONUNBUFFERED="1")
        if slow_figure:
            env["POSLAB_FAULT_SLOW_FIGURE"] = "1"
        self.process = subprocess.Popen([sys.executable, str(HERE / "fault_poslab.py"), *map(str, args)], cwd=cwd,
                                        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        start_new_session=True, preexec_fn=preexec_fn)

    def started(self) -> dict[int, int]:
        """worker pid -> tag (the encoding's first draw) of every run that has started."""
        if self.process.poll() is not None:
            out, err = self.process.communicate()
            raise AssertionError(f"poslab exited with {self.process.returncode} too early:\n{out}{err}")
        return {int(p.name.split("-")[2]): int(p.name.split("-")[1]) for p in self.dir.glob("started-*")}

    def finish(self, seconds: float = 60):
        try:
            out, err = self.process.communicate(timeout=seconds)
        except subprocess.TimeoutExpired:
            where = _states([self.process.pid, *descendants(self.process.pid)])
            self.kill()
            out, err = self.process.communicate()
            raise AssertionError(f"poslab still running after {seconds} s: a hang\n{where}\n{out}{err}") from None
        return self.process.returncode, out + err

    def kill(self):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.communicate()


@pytest.fixture
def poslab(tmp_path):
    """Start poslab processes; whatever a test leaves running is killed (its whole session) afterwards."""
    started = []

    def start(args, **kwargs):
        p = Poslab(args, tmp_path, **kwargs)
        started.append(p)
        return p

    yield start
    for p in started:
        if p.process.poll() is None:
            p.kill()
        with contextlib.suppress(ProcessLookupError):  # orphaned workers share the session
            os.killpg(p.process.pid, signal.SIGKILL)
