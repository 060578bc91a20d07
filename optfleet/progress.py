"""One progress display for every long run: a line on stderr with the share done, the time spent and the time left.

``progress(label, done, total)`` is what long-running code calls: before each
unit of work, and once at the end with ``done == total``; ``done`` may be
fractional (a method's own steps move the display inside that method's share,
optfleet/api.py).  On a terminal the line is redrawn every second while a step
runs (a long solve shows that it is alive), from the second ``delay_s`` on, so
short runs print nothing.  When stderr is not a terminal, or the user asked for
quiet (``--quiet``), nothing is shown: a pipe or a log file never gets
carriage-return noise.

A run of many like units (a study's scenarios) names its ``unit``: the line
then also shows a bar, ``done/total`` units and the rate, e.g.
``sweep: [######--------------] 30 % 300/1000 scenarios, 12.5/s, after 24 s, about 56 s left; 2 failed``.

The time left comes from measured progress only (:class:`TimeLeft`): the run
is a sequence of parts (the whole units of ``done``: a method, a scenario),
and parts differ in cost (four heuristics in 0.2 s, then a MILP for 9 s).  A
part's remaining time is measured from its own share done when it reports one
(``done`` moving inside the unit), else taken as the mean measured cost of the
finished parts while it has run no longer than that; the parts after it cost
that mean each.  When neither measurement exists (a part without steps of its
own that has outrun every part before it, or parts still to come before any
has finished) the line says nothing about the time left rather than guess.
"""

from __future__ import annotations

import math
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

from optfleet.numbers import duration

Progress = Callable[[str, float, float], None]
DELAY_S = 2.0  # runs shorter than this show nothing
REDRAW_S = 1.0  # the line is redrawn this often while a step runs


def percent_chunks(n: int, progress: Callable[[float], None] | None) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` over ``range(n)`` in steps of 1 % (at least one item), telling ``progress`` (if given) the
    share done before each step: for loops that report as they go, item by item or a step at a time."""
    every = max(1, n // 100)
    for start in range(0, n, every):
        if progress is not None:
            progress(start / n)
        yield start, min(n, start + every)


def silent(label: str, done: float, total: float) -> None:
    """The progress of a run nobody watches."""


def progress_display(task: str, *, quiet: bool = False, stream: TextIO | None = None, delay_s: float = DELAY_S,
                     unit: str | None = None, clock: Callable[[], float] = time.perf_counter) -> Progress:
    """A stderr display for ``task`` (e.g. ``"gap"``), or :func:`silent` when quiet or not on a terminal; with
    ``unit`` (e.g. ``"scenarios"``) it shows a bar, the count done and the rate (module docstring).  ``clock``
    gives the time in seconds (tests pass a fake one)."""
    out = sys.stderr if stream is None else stream
    if quiet or not out.isatty():
        return silent
    return _Display(task, out, delay_s, unit, clock)


BAR_WIDTH = 20
PART_STEP_MIN = 0.02  # a part's own share done below this is too little to extrapolate from
OUTRUN_FACTOR = 2.0  # a part without steps of its own counts as "like the finished ones" up to this multiple of their mean


class TimeLeft:
    """The time left of a run, from measured progress (module docstring): ``update`` with each ``(done, total)``
    at time ``now_s``, ``seconds_left(now_s)`` for the estimate (None while there is too little measurement)."""

    def __init__(self, start_s: float) -> None:
        self.start_s = start_s
        self.done, self.total = 0.0, 1.0
        self.part = 0  # the running part: the whole units done
        self.part_start_s = start_s
        self.finished_parts = 0
        self.finished_s = 0.0  # time spent in the finished parts

    def update(self, done: float, total: float, now_s: float) -> None:
        """Record that ``done`` of ``total`` units are done at ``now_s``; a whole unit passed finishes a part."""
        whole = math.floor(min(done, total) + 1e-9)
        if whole > self.part:
            self.finished_parts += whole - self.part
            self.finished_s += now_s - self.part_start_s
            self.part, self.part_start_s = whole, now_s
        self.done, self.total = float(done), float(total)

    @property
    def mean_part_s(self) -> float | None:
        """The mean measured cost of a finished part (None before the first finishes)."""
        return self.finished_s / self.finished_parts if self.finished_parts else None

    def seconds_left(self, now_s: float) -> float | None:
        """Seconds left: the running part's rest plus the mean part cost for each part after it; None without
        enough measurement (module docstring), 0 when done."""
        if self.total <= 0 or self.done >= self.total:
            return 0.0
        running_s = now_s - self.part_start_s
        share = self.done - self.part  # of the running part, from its own steps
        part_total = min(1.0, self.total - self.part)  # the last part may be a fraction of a unit
        mean = self.mean_part_s
        if share >= PART_STEP_MIN * part_total and running_s > 0:
            per_unit_s = running_s / share
            rest_s = per_unit_s * (part_total - share)
        elif mean is not None and running_s <= OUTRUN_FACTOR * mean:
            per_unit_s = mean
            rest_s = max(0.0, mean * part_total - running_s)
        else:
            return None
        later_units = max(0.0, self.total - self.part - part_total)
        if later_units > 0 and mean is None:
            return None  # the parts after it are unlike it (a MILP's tables, then quick baselines): no measure yet
        return rest_s + later_units * (mean if mean is not None else per_unit_s)


class _Display:
    """The line of one run: the latest (label, done, total) and a daemon thread that redraws it every second."""

    def __init__(self, task: str, out: TextIO, delay_s: float, unit: str | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.task, self.out, self.delay_s, self.unit, self.clock = task, out, delay_s, unit, clock
        self.start = clock()
        self.label = ""
        self.left = TimeLeft(self.start)
        self.lock = threading.Lock()
        self.finished = threading.Event()
        threading.Thread(target=self._redraw_while_running, daemon=True).start()

    def __call__(self, label: str, done: float, total: float) -> None:
        with self.lock:
            self.label = label
            self.left.update(done, total, self.clock())
        if done >= total:
            self.finished.set()
            if self.clock() - self.start >= self.delay_s:
                self._draw(final=True)

    def _redraw_while_running(self) -> None:
        while not self.finished.wait(REDRAW_S):
            if self.clock() - self.start >= self.delay_s:
                self._draw(final=False)

    def line(self) -> str:
        """The display's text now: task, bar and counts (with a unit), share, time spent, time left, label."""
        now = self.clock()
        with self.lock:
            label, done, total = self.label, self.left.done, self.left.total
            left_s = self.left.seconds_left(now)
        elapsed = now - self.start
        share = done / total if total > 0 else 1.0
        left = f", about {duration(left_s, whole_seconds=True)} left" if left_s is not None and 0.0 < share < 1.0 else ""
        bar = counts = ""
        if self.unit is not None:
            filled = round(BAR_WIDTH * share)
            bar = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] "
            counts = f" {done:,.0f}/{total:,.0f} {self.unit}, {done / elapsed if elapsed > 0 else 0.0:,.1f}/s,"
        return f"{self.task}: {bar}{100 * share:.0f} %{counts} after {duration(elapsed, whole_seconds=True)}{left}; {label}"

    def _draw(self, final: bool) -> None:
        """Redraw the line in place; while running it is cut to the terminal's width (a wrapped line could not be
        redrawn: each redraw would leave a row behind)."""
        text = self.line()
        width = shutil.get_terminal_size(fallback=(120, 24)).columns - 1
        if not final and len(text) > width:
            text = text[: max(width - 1, 0)] + "…"
        print(f"\r\x1b[K{text}", end="\n" if final else "", file=self.out, flush=True)
