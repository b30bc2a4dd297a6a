"""A signal the ``poslab`` command must not lose: what its handlers raise, kept until it has ended the command.

A signal handler's exception is raised in the main thread wherever that thread is. When it is inside a weakref
callback or a ``__del__`` (an import's module-lock callback, say, while the worker processes start), Python
prints "Exception ignored in: ..." and drops it: the command went on waiting for its runs, for as long as they
took, as if Ctrl-C had never been pressed (seen 1 time in 11 under load, tests/faults/test_processes.py). The
command's handlers raise through :func:`raise_signal`, which keeps the exception; the main thread's waits
(``poslab run``'s run thread, its worker processes, its figures) wake up at least every 0.25 s and call
:func:`check`, which raises it again. Nothing is kept outside the command: :func:`clear` when it starts and ends.
"""

from __future__ import annotations

_pending: list = []  # the exception class or instance a handler raised, until the command has ended


def raise_signal(exc) -> None:
    """Raise ``exc`` (a KeyboardInterrupt, a SystemExit) from a signal handler, and keep it for :func:`check`."""
    _pending[:] = [exc]
    raise exc


def check() -> None:
    """Raise again a signal's exception that was dropped before it could end the command (module docstring)."""
    if _pending:
        raise _pending[0]


def unraisable_hook(previous):
    """A ``sys.unraisablehook`` that prints nothing for the signal exception :func:`check` will raise again (Python
    would print "Exception ignored ... Traceback ... KeyboardInterrupt" before the command's own one-line
    message) and hands everything else to ``previous``."""

    def hook(unraisable):
        if _pending and isinstance(unraisable.exc_value, (KeyboardInterrupt, SystemExit)):
            return
        previous(unraisable)

    return hook


def clear() -> None:
    """Forget a kept signal: the command has acted on it, or a new command starts."""
    _pending.clear()
