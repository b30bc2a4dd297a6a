"""A signal the ``poslab`` command must not lose: what its handlers raise, kept until it has ended the command.

A signal handler's exception is raised in the main thread wherever that thread is. When it is inside a weakref
callback or a ``__del__`` (an import's module-lock callback, say, while the worker processes start), Python
prints "Exception ignored in: ..." and drops it: the command went on waiting for its runs, for as long as they
took, as if Ctrl-C had never been pressed (tests/faults/test_processes.py, under load). While a command runs
(:func:`command`), its handlers raise through :func:`raise_signal`, which keeps the exception; the main thread's
waits (``poslab run``'s run thread, its worker processes, its figures) wake up at least every 0.25 s and call
:func:`check`, which raises it again. Nothing is kept outside a command (a test process, a notebook calling the
command's functions): there :func:`raise_signal` only raises and :func:`check` does nothing.
"""

from __future__ import annotations

import contextlib

_state = {"active": False, "deferred": 0}
_pending: list = []  # the exception class or instance a handler raised during the command


@contextlib.contextmanager
def command():
    """The span of one command: signals raised meanwhile are kept for :func:`check`, and forgotten at its end."""
    _pending.clear()
    _state["active"] = True
    try:
        yield
    finally:
        _state["active"] = False
        _pending.clear()


def raise_signal(exc) -> None:
    """Raise ``exc`` (a KeyboardInterrupt, a SystemExit) from a signal handler; kept for :func:`check` during a
    command, and only kept inside :func:`deferred`."""
    if _state["active"]:
        _pending[:] = [exc]
        if _state["deferred"]:
            return
    raise exc


@contextlib.contextmanager
def deferred():
    """A step a signal must not cut in two (a worker process half launched, which then prints a traceback as it
    reads a closed pipe): a command's signal that comes meanwhile is raised when the step is done."""
    _state["deferred"] += 1
    try:
        yield
    finally:
        _state["deferred"] -= 1
        if not _state["deferred"]:
            check()


def check() -> None:
    """Raise again a signal's exception that was dropped before it could end the command (module docstring)."""
    if _pending and _state["active"]:
        raise _pending[0]


def unraisable_hook(previous):
    """A ``sys.unraisablehook`` that prints nothing for the signal exception :func:`check` will raise again (Python
    would print "Exception ignored ... Traceback ... KeyboardInterrupt" before the command's own one-line
    message) and hands everything else to ``previous``."""

    def hook(unraisable):
        if _pending and _state["active"] and isinstance(unraisable.exc_value, (KeyboardInterrupt, SystemExit)):
            return
        previous(unraisable)

    return hook
