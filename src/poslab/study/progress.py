"""Where a study is: a bar on a terminal, plain lines on a pipe or in CI, nothing when asked for none.

A :class:`Progress` reports *tasks* and the *steps* inside them, on stderr
(results and the console summary stay on stdout):

- a task is a counted piece of work of the study: its runs, the stages of a
  single run, the tables and the figures written, the cross-run comparison;
- a step is a computation inside the task's current item, named in the
  field's words, with a count where one exists: the table generated, the
  similarity profile, the anchor blocks, the decay fits, the bootstrap's
  resamples, the nested windows.

Three styles, chosen from where the output goes (``style`` overrides it):

``"bar"``
    stderr is a terminal and the environment variable ``CI`` is not set (or
    is ``0`` / ``false``): one :mod:`tqdm` bar per task, its current item
    and step (with counts) beside it, cleared when the task ends. Tasks
    shorter than half a second show nothing.
``"lines"``
    stderr is a pipe, a file or a CI log: no bar and no carriage return,
    one plain line per finished stage of a single run (its time and the
    steps inside it), one line per finished task (its count and time), and
    while a task goes on, a line saying where it is every
    :data:`HEARTBEAT` seconds (only where the work reports counts).
``"off"``
    nothing (``poslab run --no-progress``, ``run_study(progress=False)``).

Reporting costs microseconds per item or count (a few hundred per run):
nothing next to the analysis it describes. Runs executing in worker
processes report only when they finish (the runner's per-run bar); the
stages of a run are shown when the study's single run executes in this
process (:func:`poslab.study.run_study`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Iterator

__all__ = ["HEARTBEAT", "Progress", "STYLES", "default_style"]

#: Seconds between the plain lines saying where a long task is (style ``"lines"``).
HEARTBEAT = 10.0
#: The styles of :class:`Progress`.
STYLES = ("bar", "lines", "off")
#: A bar appears only for a task still running after this many seconds.
_BAR_DELAY = 0.5
#: Least seconds between two redraws of a bar for a new item or count.
_REDRAW = 0.1


def _ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def default_style(file) -> str:
    """``"bar"`` when ``file`` is a terminal and ``CI`` is not set, else ``"lines"``."""
    try:
        tty = bool(file.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed file
        tty = False
    return "bar" if tty and not _ci() else "lines"


def _seconds(s: float) -> str:
    return f"{s:.1f} s"


class _Step:
    """A computation inside a task's item: its name, count and time; called as ``step(what, done, total)``."""

    def __init__(self, progress: Progress, name: str, total: int | None, unit: str):
        self.progress, self.name, self.total, self.unit = progress, name, total, unit
        self.what, self.done, self.of = "", 0, total
        self.reported = False  # the work reported a count: the item's line gives the step's total
        self.cancelled = False
        self.start = time.perf_counter()
        self.nested = 0.0  # seconds spent in steps inside this one

    def __call__(self, what: str = "", done: int = 0, total: int | None = None) -> None:
        """Report ``done`` of ``total`` (default: the step's own total) of its part ``what`` (e.g. ``"refits"``)."""
        self.what, self.done, self.of = what, done, self.total if total is None else total
        self.reported = True
        self.progress._changed(count=True)

    def cancel(self) -> None:
        """The step turned out to do nothing worth saying (e.g. no kernel): left out of the item's line."""
        self.cancelled = True

    def status(self) -> str:
        if self.what:
            return f"{self.name} {self.what} {self.done}/{self.of}"
        return f"{self.name} {self.done}/{self.of} {self.unit}" if self.of else self.name


class _Item:
    """What :meth:`_Task.item` yields: set ``counted`` to False and the item does not count as done."""

    counted = True


class _Task:
    """A counted piece of work; its items advance the count."""

    def __init__(self, progress: Progress, name: str, total: int | None, unit: str, each: bool):
        self.progress, self.name, self.total, self.unit, self.each = progress, name, total, unit, each
        self.done = 0
        self.current: str | None = None  # the item under way
        self.details: list[str] = []  # the current item's finished steps
        self.note = ""  # said after the count when the task ends (lines)
        self.start = self.item_start = time.perf_counter()
        self.bar, self.delay = None, _BAR_DELAY
        if progress.style == "bar":
            from tqdm.auto import tqdm

            # stages differ in cost: their count, no rate or ETA; a single run's stages show at once
            bar_format = ("{desc} [{elapsed}]{postfix}" if not total else
                          "{desc}: {n_fmt}/{total_fmt} {unit} [{elapsed}]{postfix}" if each else None)
            self.delay = 0.0 if each else _BAR_DELAY
            self.bar = tqdm(total=total, desc=name, unit=unit, file=progress.file, leave=False, delay=self.delay,
                            dynamic_ncols=True, bar_format=bar_format)

    @contextlib.contextmanager
    def item(self, name: str) -> Iterator[_Item]:
        """One item of the task (a stage, a table, a figure): counted when it ends without an error, unless the
        block sets ``counted = False`` on what it yields (a figure that could not be drawn).

        In style ``"lines"`` a task made with ``each=True`` prints a line per item, with its time and the steps
        inside it.
        """
        self.current, self.details, self.item_start = name, [], time.perf_counter()
        self.progress._changed()
        ok, item = False, _Item()
        try:
            yield item
            ok = item.counted
        finally:
            if ok:
                if self.each and self.progress.style == "lines":
                    details = f" ({'; '.join(self.details)})" if self.details else ""
                    self.progress._line(f"{self.name}: {name} {_seconds(time.perf_counter() - self.item_start)}"
                                        f"{details}")
                self.advance()
            self.current, self.details = None, []

    def detail(self, text: str) -> None:
        """Say ``text`` in the current item's line, beside its steps' times."""
        self.details.append(text)

    def set_total(self, total: int | None) -> None:
        """Change the number of items (the work found more or fewer than it expected)."""
        self.total = total
        if self.bar is not None:
            self.bar.total = total
            self.bar.refresh()

    def advance(self, n: int = 1, item: str | None = None) -> None:
        """Count ``n`` more items done; ``item`` names the last one (shown beside the bar)."""
        self.done += n
        if self.bar is not None:
            if item is not None:
                self.bar.set_postfix_str(item, refresh=False)
            self.bar.update(n)
        else:
            self.progress._changed(count=True)

    def status(self) -> str:
        count = f" {self.done}/{self.total}{' ' + self.unit if self.unit and self.unit != self.name else ''}" \
            if self.total else ""
        where = ": ".join(([self.current] if self.current else []) + [s.status() for s in self.progress._steps])
        return f"{self.name}:{count} after {time.perf_counter() - self.start:.0f} s{', ' + where if where else ''}"

    def _close(self, ok: bool) -> None:
        if self.bar is not None:
            self.bar.close()
        elif ok and not self.each and self.progress.style == "lines":
            count = f" {self.done}/{self.total}" if self.total is not None else ""
            sep = " in" if count else ""
            note = f" ({self.note})" if self.note else ""
            self.progress._line(f"{self.name}:{count}{sep} {_seconds(time.perf_counter() - self.start)}{note}")


class Progress:
    """Reports tasks and their steps on stderr: a bar on a terminal, plain lines elsewhere (module docstring).

    Parameters
    ----------
    enabled : bool
        False: report nothing (style ``"off"``).
    file : file object, optional
        Where to report (default: ``sys.stderr`` when the Progress is made).
    style : {"bar", "lines", "off"}, optional
        Default: :func:`default_style` of ``file``.

    Examples
    --------
    >>> import io
    >>> out = io.StringIO()
    >>> progress = Progress(file=out)   # not a terminal: plain lines
    >>> with progress.task("figures", total=2, unit="figures") as task:
    ...     for name in ("profiles.png", "bands.png"):
    ...         with task.item(name):
    ...             pass
    >>> out.getvalue().startswith("figures: 2/2 in ")
    True
    """

    def __init__(self, enabled: bool = True, *, file=None, style: str | None = None):
        if style is not None and style not in STYLES:
            raise ValueError(f"style must be one of {', '.join(STYLES)}; got {style!r}")
        self.file = file if file is not None else sys.stderr
        self.style = "off" if not enabled else (style or default_style(self.file))
        self._tasks: list[_Task] = []
        self._steps: list[_Step] = []
        self._last_line = time.perf_counter()
        self._last_draw = 0.0

    @property
    def enabled(self) -> bool:
        return self.style != "off"

    @contextlib.contextmanager
    def task(self, name: str, total: int | None = None, unit: str = "", *, each: bool = False) -> Iterator[_Task]:
        """A piece of work of ``total`` items (None: uncounted) named ``name``.

        Style ``"lines"``: one line when it ends (its count, time and :attr:`note`), or with ``each`` one line per
        item instead; nothing when it ends by an exception. Style ``"bar"``: a bar while it runs.
        """
        task = _Task(self, name, total, unit, each)
        self._tasks.append(task)
        ok = False
        try:
            yield task
            ok = True
        finally:
            self._tasks.remove(task)
            task._close(ok)

    def iterate(self, name: str, items, *, unit: str = "", label=str) -> Iterator:
        """Yield each of ``items`` as an item of a task ``name`` (total: their number; ``label(item)`` names it).

        An item counts as done when the loop asks for the next one; a loop left by an exception ends the task
        without its line.
        """
        items = list(items)
        with self.task(name, total=len(items), unit=unit) as task:
            for item in items:
                with task.item(label(item)):
                    yield item

    @contextlib.contextmanager
    def step(self, name: str, total: int | None = None, unit: str = "") -> Iterator[_Step]:
        """A computation inside the current task's item (the bar shows it; the item's line lists it).

        The step is called as ``step(what, done, total)`` to report its count (e.g. resamples done); its time in
        the item's line leaves out the steps inside it. Outside any task a step reports nothing.
        """
        step = _Step(self, name, total, unit)
        outer = self._steps[-1] if self._steps else None
        self._steps.append(step)
        self._changed()
        ok = False
        try:
            yield step
            ok = True
        finally:
            self._steps.pop()
            took = time.perf_counter() - step.start
            if outer is not None:
                outer.nested += took
            if ok and self._tasks and not step.cancelled:
                count = f" ({step.total} {step.unit})" if step.total and step.reported else ""
                self._tasks[-1].details.append(f"{name}{count} {_seconds(took - step.nested)}")
            self._changed()

    # ------------------------------------------------------------------ output
    def _line(self, text: str) -> None:
        self.file.write(text + "\n")
        self.file.flush()
        self._last_line = time.perf_counter()

    def _changed(self, count: bool = False) -> None:
        """Show a new item or step (``count``: a new count, redrawn at most every 0.1 s) on the bar, or a line when
        the last is HEARTBEAT seconds old."""
        if self.style == "off" or not self._tasks:
            return
        task = self._tasks[-1]
        now = time.perf_counter()
        if task.bar is not None:
            if count and now - self._last_draw < _REDRAW:
                return
            self._last_draw = now
            where = ": ".join(([task.current] if task.current else []) + [s.status() for s in self._steps])
            task.bar.set_postfix_str(where, refresh=False)
            if now - task.start >= task.delay:
                task.bar.refresh()
        elif self.style == "lines" and now - self._last_line >= HEARTBEAT:
            self._line(task.status())
