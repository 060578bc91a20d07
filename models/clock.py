"""A time limit a model build checks: a Pyomo build of a large model can outlast the solve's limit before the solver
starts (the placement hindsight MILP of 2,000 requests took minutes to build while its 20 s limit waited).

A :class:`BuildClock` wraps each constraint family's rule, which raises :class:`~optfleet.errors.NoPlanInTimeError`
(naming the limit, the family and the rows built) as soon as the deadline has passed, and :meth:`BuildClock.check`
raises it between families.  Pyomo logs an exception raised while a component is constructed (to stdout, and the
CLI's stdout is its answer), so a build with a clock runs inside :meth:`BuildClock.building`, which keeps Pyomo's
construction log to itself; the exception still propagates.  The model is then abandoned.
"""

from __future__ import annotations

import io
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pyomo.common.log import LoggingIntercept

from optfleet.errors import NoPlanInTimeError


class BuildClock:
    """The deadline ``time_limit_s`` seconds after ``started`` (a ``time.perf_counter()`` value; default now), for
    the build of the model ``what`` (its name in messages)."""

    def __init__(self, time_limit_s: float, what: str, started: float | None = None) -> None:
        self.time_limit_s = time_limit_s
        self.what = what
        self.started = time.perf_counter() if started is None else started
        self.deadline = self.started + time_limit_s
        self.rows = 0

    def rule(self, family: str, rule: Callable[..., Any]) -> Callable[..., Any]:
        """``rule`` of the constraint family ``family``, raising once the deadline has passed."""

        def checked(*args: Any) -> Any:
            self.check(family)
            self.rows += 1
            return rule(*args)

        return checked

    def check(self, family: str) -> None:
        """Raise :class:`NoPlanInTimeError` when the deadline has passed (``family``: where the build is)."""
        if time.perf_counter() > self.deadline:
            raise NoPlanInTimeError(f"the time limit of {self.time_limit_s:g} s passed while {self.what} was being built ({self.rows:,} rows "
                                    f"built, in {family}): no plan, nothing proven; raise the time limit or make the model smaller")

    @contextmanager
    def building(self) -> Iterator[None]:
        """The build's context: Pyomo's construction log kept from stdout (module docstring)."""
        with LoggingIntercept(io.StringIO(), "pyomo.core", logging.ERROR):
            yield


def ruled(clock: BuildClock | None, family: str, rule: Callable[..., Any]) -> Callable[..., Any]:
    """``rule`` checked by ``clock`` (unchanged without one)."""
    return rule if clock is None else clock.rule(family, rule)


def checkpoint(clock: BuildClock | None, family: str) -> None:
    """``clock.check(family)``, when there is a clock."""
    if clock is not None:
        clock.check(family)


@contextmanager
def building(clock: BuildClock | None) -> Iterator[None]:
    """``clock.building()``, when there is a clock."""
    if clock is None:
        yield
        return
    with clock.building():
        yield
