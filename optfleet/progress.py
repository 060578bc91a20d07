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
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TextIO

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
                     unit: str | None = None) -> Progress:
    """A stderr display for ``task`` (e.g. ``"gap"``), or :func:`silent` when quiet or not on a terminal; with
    ``unit`` (e.g. ``"scenarios"``) it shows a bar, the count done and the rate (module docstring)."""
    out = sys.stderr if stream is None else stream
    if quiet or not out.isatty():
        return silent
    return _Display(task, out, delay_s, unit)


BAR_WIDTH = 20


class _Display:
    """The line of one run: the latest (label, done, total) and a daemon thread that redraws it every second."""

    def __init__(self, task: str, out: TextIO, delay_s: float, unit: str | None = None) -> None:
        self.task, self.out, self.delay_s, self.unit = task, out, delay_s, unit
        self.start = time.perf_counter()
        self.state = ("", 0.0, 1.0)
        self.lock = threading.Lock()
        self.finished = threading.Event()
        threading.Thread(target=self._redraw_while_running, daemon=True).start()

    def __call__(self, label: str, done: float, total: float) -> None:
        with self.lock:
            self.state = (label, float(done), float(total))
        if done >= total:
            self.finished.set()
            if time.perf_counter() - self.start >= self.delay_s:
                self._draw(final=True)

    def _redraw_while_running(self) -> None:
        while not self.finished.wait(REDRAW_S):
            if time.perf_counter() - self.start >= self.delay_s:
                self._draw(final=False)

    def _draw(self, final: bool) -> None:
        with self.lock:
            label, done, total = self.state
        elapsed = time.perf_counter() - self.start
        share = done / total if total > 0 else 1.0
        left = f", about {elapsed * (1 - share) / share:,.0f} s left" if 0.0 < share < 1.0 else ""
        bar = counts = ""
        if self.unit is not None:
            filled = round(BAR_WIDTH * share)
            bar = f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] "
            counts = f" {done:,.0f}/{total:,.0f} {self.unit}, {done / elapsed if elapsed > 0 else 0.0:,.1f}/s,"
        line = f"{self.task}: {bar}{100 * share:.0f} %{counts} after {elapsed:,.0f} s{left}; {label}"
        print(f"\r\x1b[K{line}", end="\n" if final else "", file=self.out, flush=True)
