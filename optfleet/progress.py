"""One progress display for every long run: a line on stderr with done / total, rate and time left.

``progress(label, done, total)`` is what long-running code calls (before each
unit of work and once at the end with ``done == total``).  The display stays
silent for the first ``delay_s`` seconds, when stderr is not a terminal, or
when the user asked for quiet (``--quiet``): a pipe or a log file never gets
carriage-return noise, and short runs print nothing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

Progress = Callable[[str, int, int], None]
DELAY_S = 2.0  # runs shorter than this show nothing


def silent(label: str, done: int, total: int) -> None:
    """The progress of a run nobody watches."""


def progress_display(task: str, *, quiet: bool = False, stream: TextIO | None = None, delay_s: float = DELAY_S) -> Progress:
    """A stderr display for ``task`` (e.g. ``"gap"``), or :func:`silent` when quiet or not on a terminal."""
    out = sys.stderr if stream is None else stream
    if quiet or not out.isatty():
        return silent
    start = time.perf_counter()

    def show(label: str, done: int, total: int) -> None:
        elapsed = time.perf_counter() - start
        if elapsed < delay_s:
            return
        rate = done / elapsed if elapsed > 0 else 0.0
        left = f", about {(total - done) / rate:,.0f} s left" if 0 < done < total and rate > 0 else ""
        line = f"{task}: {done}/{total} done, {rate:.2g}/s{left}; {label}"
        print(f"\r\x1b[K{line}", end="\n" if done >= total else "", file=out, flush=True)

    return show
