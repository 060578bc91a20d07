"""What a problem kind declares so that ``optfleet explain`` can analyse its exact method (the registry's ``explain``).

A kind's ``explain(problem) -> Explainer`` hook returns:

* ``solve(problem) -> Solved``: its exact method on a (possibly changed) problem: objective, status and a label of
  the plan that two plans share exactly when they are the same plan (the parametric curves mark where it changes);
* ``analyse(problem, solved) -> dict[str, DataFrame]``: the tables read off the solved model: ``binding`` (each
  constraint of the plan with its slack), ``shadow_prices`` (LP duals of the fixed-integer LP, with their bound
  ranges) and ``price_ranges`` (objective-coefficient ranges), with ``notes`` saying what the numbers hold for;
* ``parameters``: what a curve or a break-even may vary (:class:`Parameter`), by name;
* ``break_even``: the parameters whose break-even value the report shows by default;
* ``alternatives(problem, solved) -> [(label, problem)]``: restrictions a planner names (no GPU of type T, one pool
  fewer), each solved exactly to find near-optimal plans;
* ``default_curves``: curves the report shows unasked (e.g. ``percentile=0.95,0.99``: the cost of P95 -> P99);
* ``subject`` (optional): what the hooks take as ``problem`` when it is not the prepared problem itself (e.g. the
  reserved kind's question: the problem and the percentile asked);
* ``session(problem, parameter) -> solve_at | None`` (optional): a warm re-solver for the points of one parameter's
  curve or break-even.  ``solve_at(changed_problem) -> Solved`` gives what ``solve`` gives, but keeps what the
  parameter does not change between calls: one model whose bounds or costs change, so the solver restarts from the
  previous point's basis (e.g. the caching LP's capacity rows), or the rows that do not read the parameter, built
  once (the placement MILP's at another arrival rate).  None for a parameter the kind has no warm path for: each
  point is then solved by ``solve``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Solved:
    """One exact solve: the objective (None without a plan), the solver status, the plan's label, the kind's own result."""

    objective: float | None
    status: str
    plan: str
    detail: Any = None


MAX_RATE_GROWTH = 1e6
"""The largest ``rate_growth`` a curve may ask for: a million times the instance's traffic; far larger factors overflow
the load arithmetic instead of planning anything."""


def plan_digest(*arrays: Any) -> str:
    """Eight hex digits of a SHA-1 of ``arrays``' bytes: the part of a plan's label that two plans share exactly when
    their arrays are equal (up to a hash collision)."""
    return hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:8]


@dataclass(frozen=True)
class Parameter:
    """A number of the instance a curve may vary: its name, unit, meaning, its value in the instance, and
    ``apply(problem, value) -> problem`` with that value; ``low``/``high`` bound the values that make sense (open
    interval when ``open_interval``, ``low`` itself allowed when ``low_included``); ``another_question`` is True when a value of it asks another question than the
    instance's (the reserved percentile when the instance's question is the hybrid one), so a curve's first plan has
    nothing to be compared with.  ``integral``: the parameter is a whole number (a capacity in tokens or blocks) that
    ``apply`` rounds to the nearest, so its break-even is searched among whole values (optfleet/sensitivity/run.py)."""

    name: str
    unit: str
    meaning: str
    current: float
    apply: Callable[[Any, float], Any]
    low: float = 0.0
    high: float = float("inf")
    open_interval: bool = True
    another_question: bool = False
    low_included: bool = False
    integral: bool = False

    def holds(self, value: float) -> bool:
        """Whether ``value`` is in the parameter's domain: ``(low, high)``, or ``(low, high]`` without ``open_interval``;
        ``[low, ...`` with ``low_included`` (a capacity or a threshold of 0)."""
        above = self.low <= value if self.low_included else self.low < value
        below = value < self.high if self.open_interval else value <= self.high
        return math.isfinite(value) and above and below

    def domain(self) -> str:
        """The domain in interval notation, e.g. ``(0, 1]``."""
        return f"{'[' if self.low_included else '('}{self.low:g}, {self.high:g}{')' if self.open_interval else ']'}"


@dataclass(frozen=True)
class Analysis:
    """The tables read off one solved model (module docstring) and notes on what they hold for."""

    tables: Mapping[str, Any]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Explainer:
    """One kind's sensitivity hooks (module docstring)."""

    objective_unit: str
    solve: Callable[[Any], Solved]
    analyse: Callable[[Any, Solved], Analysis]
    parameters: Mapping[str, Parameter]
    alternatives: Callable[[Any, Solved], list[tuple[str, Any]]]
    break_even: tuple[str, ...] = field(default=())
    default_curves: tuple[str, ...] = field(default=())
    subject: Any = None
    session: Callable[[Any, str], Callable[[Any], Solved] | None] | None = None
