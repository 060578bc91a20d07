"""``optfleet explain``: sensitivity of a kind's exact plan, generic over the kinds' :class:`Explainer` hooks.

For the instance's exact plan it reports the kind's analysis (binding rows with slack, shadow prices, price
ranges: optfleet/sensitivity/explainer.py) and, by re-solving the exact method on changed instances:

* **curves**: the optimum at each value of a parameter (``--curve rate_growth=1:1.5:6``), with ``plan_changes``
  marking the values whose plan differs from the previous value's (none at the first value of a parameter that asks
  another question than the instance's);
* **break-even**: for a parameter (by default the kind's, e.g. the fleet's second-cheapest GPU type's price), the
  value at which the optimal plan stops being the instance's.  The parameter is moved up from its current value by
  the factors ``SCAN_FACTORS`` until the plan changes (then down by their inverses, if it never does), and the change
  is bracketed by ``BISECTIONS`` halvings; ``break_even`` is the bracket's end where the plan differs (the first value
  seen with another plan), ``low`` the end with the instance's plan (named for the upward case; downward it is the
  larger).  A whole-number parameter (``Parameter.integral``: a capacity in tokens or blocks, which a solve rounds to
  the nearest whole value) is bracketed among whole values instead, halving until its ends are adjacent:
  ``break_even`` is then the whole value at which the plan changes and ``low`` the next one towards the instance's
  value, which keeps the instance's plan (the note says which way).  No change over the whole scan is reported as a
  note.
  (Plans are compared by the kind's label; between two probes the plan may change and change back unseen.)
* **alternatives**: the kind's named restrictions (no GPU of type T, one pool fewer), each solved exactly, with
  its cost over the optimum in percent and whether that is within ``within_pct``.

Each point of a curve or a break-even scan is an exact solve of the changed instance.  A value equal to the
instance's own (e.g. ``rate_growth`` 1) is the instance's solve, not solved again.  Where the kind declares a
warm ``session`` for the parameter (optfleet/sensitivity/explainer.py; the caching LP's capacity), the points
are solved in one model whose bounds change from point to point, the solver restarting from the previous basis;
otherwise each is a full solve (with the kind's own warm start, e.g. the fleet's sweep plan).
benchmarks/bench_explain.py measures a 10-point curve against one solve.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from optfleet.errors import InputError
from optfleet.sensitivity.explainer import Analysis, Explainer, Parameter, Solved
from optfleet.progress import Progress, silent

SCAN_FACTORS = (1.1, 1.25, 1.5, 2.0, 3.0, 5.0)
BISECTIONS = 6
DEFAULT_WITHIN_PCT = 5.0
MAX_CURVE_POINTS = 200
"""Values of one curve: each is a full exact solve, so a larger N is a typo (or a run of hours)."""


@dataclass(frozen=True)
class CurveRequest:
    """A curve over ``parameter`` at ``values`` (parsed and checked by :func:`parse_curve`)."""

    parameter: str
    values: tuple[float, ...]


@dataclass(frozen=True)
class ExplainResult:
    """Everything ``explain`` found: the base solve, the kind's analysis, curves, break-evens and alternatives."""

    instance: str
    kind: str
    objective_unit: str
    base: Solved
    analysis: Analysis
    curves: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    break_even: pd.DataFrame | None = None
    alternatives: pd.DataFrame | None = None

    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table by name (``binding``, ``shadow_prices``, ``price_ranges``, ``curve:<parameter>``,
        ``break_even``, ``alternatives``)."""
        found = dict(self.analysis.tables)
        found.update({f"curve:{name}": frame for name, frame in self.curves.items()})
        if self.break_even is not None:
            found["break_even"] = self.break_even
        if self.alternatives is not None:
            found["alternatives"] = self.alternatives
        return found


def parse_curve(text: str, explainer: Explainer, option: str = "--curve") -> CurveRequest:
    """``PARAMETER=START:STOP:N`` (N >= 2 values from START to STOP, evenly spaced) or ``PARAMETER=V1,V2,...``.
    An unknown parameter, an empty range or a value outside the parameter's domain is an InputError naming ``option``."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not spec.strip():
        raise InputError(option, text, "give PARAMETER=START:STOP:N or PARAMETER=V1,V2,...")
    if name not in explainer.parameters:
        raise InputError(option, text, f"this kind has no parameter {name!r}; known: {', '.join(explainer.parameters)}")
    try:
        if ":" in spec:
            start_text, stop_text, count = spec.split(":")
            start, stop = float(start_text), float(stop_text)
            listed = None
        else:
            listed = tuple(float(v) for v in spec.split(","))
    except ValueError:
        raise InputError(option, text, "give PARAMETER=START:STOP:N (three numbers) or PARAMETER=V1,V2,... (numbers)") from None
    if listed is None:  # checked outside the try: an InputError is a ValueError, and its message must not be replaced
        if not (count.strip().isascii() and count.strip().isdigit()):  # isdigit alone takes '³', which int() refuses
            raise InputError(option, text, f"N = {count.strip()!r} must be a whole number of values (N >= 2)")
        n = int(count)
        if not (math.isfinite(start) and math.isfinite(stop)):
            raise InputError(option, text, "START and STOP must be finite numbers")
        if n < 2 or not start < stop:
            raise InputError(option, text, "empty range: give START < STOP and N >= 2 values")
        if n > MAX_CURVE_POINTS:
            raise InputError(option, text, f"N = {n} is above the limit of {MAX_CURVE_POINTS} values (each is an exact solve)")
        values = tuple(float(v) for v in np.linspace(start, stop, n))
    else:
        values = listed
        if len(values) > MAX_CURVE_POINTS:
            raise InputError(option, text, f"{len(values)} values are above the limit of {MAX_CURVE_POINTS} (each is an exact solve)")
    check_values(explainer.parameters[name], values, option, text)
    return CurveRequest(name, values)


def check_values(parameter: Parameter, values: Sequence[float], option: str, text: Any) -> None:
    """Every value within the parameter's domain (e.g. a percentile in (0, 1)): an InputError naming ``option`` otherwise."""
    for value in values:
        if not parameter.holds(value):
            raise InputError(option, text, f"{parameter.name} = {value:g} is outside {parameter.domain()}")


class PointSolver:
    """The exact solve at values of one parameter (module docstring): the instance's own solve at its current value,
    the kind's warm session where it has one, else the kind's ``solve``."""

    def __init__(self, explainer: Explainer, problem: Any, parameter: Parameter, base: Solved) -> None:
        self.explainer, self.problem, self.parameter, self.base = explainer, problem, parameter, base
        self.warm = explainer.session(problem, parameter.name) if explainer.session is not None else None

    def __call__(self, value: float) -> Solved:
        if value == self.parameter.current and not self.parameter.another_question:
            return self.base
        changed = self.parameter.apply(self.problem, value)
        return self.warm(changed) if self.warm is not None else self.explainer.solve(changed)


def curve(explainer: Explainer, problem: Any, request: CurveRequest, base: Solved, progress: Progress = silent) -> pd.DataFrame:
    """The optimum at each value of the request's parameter; ``plan_changes`` is True where the plan differs from the
    previous value's (the first value: from the instance's plan, or None when the parameter asks another question than
    the instance's)."""
    parameter = explainer.parameters[request.parameter]
    solve_at = PointSolver(explainer, problem, parameter, base)
    records, previous, compared = [], base.plan, not parameter.another_question
    for i, value in enumerate(request.values):
        progress(f"curve {parameter.name}", i, len(request.values))
        solved = solve_at(value)
        records.append({parameter.name: value, "objective": solved.objective, "status": solved.status, "plan": solved.plan,
                        "plan_changes": solved.plan != previous if compared else None})
        previous, compared = solved.plan, True
    return pd.DataFrame(records)


def break_even(explainer: Explainer, problem: Any, names: Sequence[str], base: Solved, progress: Progress = silent) -> pd.DataFrame:
    """The break-even value of each parameter of ``names`` (module docstring), one row each."""
    records = []
    for name in names:
        parameter = explainer.parameters[name]
        solve_at = PointSolver(explainer, problem, parameter, base)
        progress(f"break-even {name}", 0, 1)
        low = high = other = None
        for factors in (SCAN_FACTORS, tuple(1 / f for f in SCAN_FACTORS)):  # up first, then down
            low = parameter.current
            for factor in factors:
                value = parameter.current * factor
                if not parameter.holds(value):
                    break  # the scan leaves the parameter's domain (e.g. rho_max above 1)
                solved = solve_at(value)
                if solved.plan != base.plan:
                    high, other = value, solved
                    break
                low = value
            if high is not None:
                break
        note = ""
        if high is not None:
            low, high, other = narrowed(solve_at, base.plan, low, high, other, parameter.integral)
            if parameter.integral:
                note = (f"whole {parameter.unit}: the plan changes at {high:g} ({'above' if high > low else 'below'} {low:g}, which keeps the "
                        "instance's plan)")
        else:
            note = f"the plan stays from {parameter.current / SCAN_FACTORS[-1]:g} to {parameter.current * SCAN_FACTORS[-1]:g}"
        records.append({"parameter": name, "unit": parameter.unit, "current": parameter.current, "low": low, "break_even": high,
                        "change_pct": None if high is None else 100 * (high / parameter.current - 1),
                        "plan_there": None if other is None else other.plan,
                        "objective_there": None if other is None else other.objective, "note": note})
    return pd.DataFrame(records)


def narrowed(solve_at: PointSolver, plan: str, low: float, high: float, other: Solved, integral: bool) -> tuple[float, float, Solved]:
    """The bracket ``(low, high)`` of a plan change (``plan`` at ``low``, another, ``other``, at ``high``) narrowed by
    bisection: ``BISECTIONS`` halvings, or for a whole-number parameter halvings among whole values until the ends
    are adjacent (``low`` and ``high`` rounded first, as the solve rounds them), with the plan at each end."""
    if integral:
        low, high = float(round(low)), float(round(high))
    halvings = 0
    while abs(high - low) > 1 if integral else halvings < BISECTIONS:
        middle = float(math.floor((low + high) / 2)) if integral else (low + high) / 2
        solved = solve_at(middle)
        if solved.plan != plan:
            high, other = middle, solved
        else:
            low = middle
        halvings += 1
    return low, high, other


def alternatives(explainer: Explainer, problem: Any, base: Solved, within_pct: float, progress: Progress = silent) -> pd.DataFrame:
    """Each named restriction of the kind solved exactly: its objective, its excess over the optimum in percent and
    whether that is within ``within_pct``."""
    records = []
    named = explainer.alternatives(problem, base)
    for i, (label, restricted) in enumerate(named):
        progress(f"alternative {label}", i, len(named))
        solved = explainer.solve(restricted)
        excess = (None if solved.objective is None or base.objective is None
                  else 0.0 if solved.objective == base.objective  # ties an optimum of 0 too
                  else None if not base.objective else 100 * (solved.objective / base.objective - 1))
        records.append({"alternative": label, "objective": solved.objective, "status": solved.status, "over_optimum_pct": excess,
                        "within": excess is not None and excess <= within_pct + 1e-9, "plan": solved.plan})
    return pd.DataFrame(records, columns=["alternative", "objective", "status", "over_optimum_pct", "within", "plan"])
