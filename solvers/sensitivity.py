"""Duals and ranging of a solved model's LP with its integer decisions fixed (HiGHS ``getRanging``).

A MILP has no duals.  The usual answer (PyPSA, HiGHS users) is to fix the integer variables at the chosen plan and
solve the LP that is left: its duals and ranges then hold **for that integer plan**, not for the MILP.  Here

    fixed LP(plan):  min c'x  s.t.  the model's rows,  y_i = round(y*_i) for every integer y_i not in ``continuous``

where ``continuous`` names integer variable components that stay in the LP as continuous variables within their
bounds instead of being fixed.  A model whose cost depends only on integers (the fleet MILP: ``sum_j c_j n_j``)
has a constant objective once they are all fixed, and every dual is 0; keeping the GPU counts continuous (and the
binary choices fixed) gives the marginal cost of the chosen plan's structure with fractional GPUs instead.

For each row ``l <= a'x <= u`` of the LP (a ranged Pyomo constraint is two rows):

* ``dual`` = d(LP objective) / d(the row's active bound), HiGHS's row dual (0 for a row with slack);
* ``slack`` = the distance of ``a'x`` from the row's bound (``u - a'x`` for ``<=``, ``a'x - l`` for ``>=``, 0 for ``=``);
* ``bound_low``, ``bound_high``: the interval of that bound over which the optimal basis stays optimal (HiGHS
  ``row_bound_dn/up``); the LP objective moves linearly by ``dual`` inside it.

A row that binds with a zero dual is ``degenerate``: its one-sided rates of change may differ (the dual holds on one
side only); finite differences (tests/test_explain.py) check the duals of the rows that are not.

For each column: ``reduced_cost`` and ``cost_low``, ``cost_high``, the interval of its objective coefficient over
which the basis stays optimal (HiGHS ``col_cost_dn/up``).  Infinite ends are ``inf``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import pyomo.environ as pyo
from optfleet.solvers.highs import HIGHS_STATUS, _compile, _pass_model_args, highs_session, pass_model
from optfleet.solvers.report import ERROR, OPTIMAL, SolveReport

HIGHS_INFINITY = 1e30  # HiGHS's infinite bound: ranges at or beyond it are reported as inf


@dataclass(frozen=True)
class RowSensitivity:
    """One LP row: its constraint's name, sense (``<=``, ``>=``, ``==``), activity, bound, slack, dual and bound range."""

    name: str
    sense: str
    activity: float
    bound: float
    slack: float
    dual: float
    bound_low: float
    bound_high: float

    @property
    def degenerate(self) -> bool:
        """Binding (no slack) with a zero dual: the LP is degenerate there (e.g. a spill row ``o_n >= 0`` that meets the
        column bound ``o_n >= 0``), and moving the bound one way may change the objective at another rate than the dual."""
        return self.slack <= 1e-9 * max(1.0, abs(self.bound)) and abs(self.dual) <= 1e-12


@dataclass(frozen=True)
class ColumnSensitivity:
    """One LP column: its variable's name, value, objective coefficient, reduced cost and coefficient range."""

    name: str
    value: float
    cost: float
    reduced_cost: float
    cost_low: float
    cost_high: float


@dataclass(frozen=True)
class LpSensitivity:
    """The fixed LP's solve report and its rows and columns (module docstring)."""

    report: SolveReport
    rows: tuple[RowSensitivity, ...]
    columns: tuple[ColumnSensitivity, ...]

    def row(self, name: str) -> RowSensitivity:
        """The row of the constraint named ``name`` (the first, for a ranged constraint's two rows)."""
        return next(r for r in self.rows if r.name == name)

    def column(self, name: str) -> ColumnSensitivity:
        return next(c for c in self.columns if c.name == name)


def fixed_lp_sensitivity(model: pyo.ConcreteModel, continuous: Iterable[pyo.Var] = ()) -> LpSensitivity:
    """Duals and ranges of ``model``'s LP with its integer variables fixed at their (rounded) current values, except
    the components ``continuous``, which are relaxed to continuous (module docstring).  The model must hold a
    solution; it is left as it was (fixings and domains restored), with the LP's values loaded into it."""
    kept = {id(component) for component in continuous}
    with _fixed_integers(model, kept):
        start = time.perf_counter()
        form, integer = _compile(model, warm_start=False)
        args = _pass_model_args(form, np.zeros_like(integer))
        found = arrays_sensitivity(args, [entry.constraint.name for entry in form.rows], [var.name for var in form.columns],
                                   f"the fixed LP of model {model.name!r}", start)
        if found.report.status == OPTIMAL:
            for var, column in zip(form.columns, found.columns, strict=True):
                var.set_value(column.value, skip_validation=True)
    return found


def arrays_sensitivity(args: tuple, row_names: Sequence[str], column_names: Sequence[str], what: str,
                       start: float | None = None) -> LpSensitivity:
    """Duals and ranges of the LP given as ``highspy.Highs.passModel`` arguments (``args``: num_col, num_row, num_nz,
    format, sense, offset, cost, col_lower, col_upper, row_lower, row_upper, ...; continuous), its rows and columns
    named by ``row_names`` and ``column_names`` (module docstring).  ``start`` is the clock reading the report's
    seconds count from (default: now)."""
    start = time.perf_counter() if start is None else start
    with highs_session() as (h, log):
        pass_model(h, args, what)
        h.run()
        status = HIGHS_STATUS.get(h.getModelStatus(), ERROR)
        solution = h.getSolution()
        ranging_status, ranging = h.getRanging() if status == OPTIMAL else (None, None)
        objective = float(h.getInfo().objective_function_value) if status == OPTIMAL else None
    seconds = time.perf_counter() - start
    if status != OPTIMAL:
        return LpSensitivity(SolveReport(status, None, None, None, seconds, "highs", log.text, {"solver_runs": 1}), (), ())
    report = SolveReport(OPTIMAL, objective, objective, 0.0, seconds, "highs", log.text, {"solver_runs": 1})
    ranged = ranging if ranging_status == highspy.HighsStatus.kOk else None
    return LpSensitivity(report, tuple(_rows(row_names, args, solution, ranged)), tuple(_columns(column_names, args, solution, ranged)))


@contextmanager
def _fixed_integers(model: pyo.ConcreteModel, kept: set[int]) -> Iterator[None]:
    """Fix every unfixed integer variable at its rounded value, except those of the components ``kept`` (by id), whose
    domain becomes continuous within the same bounds (its domain's, e.g. 0 for NonNegativeIntegers, made explicit);
    restore fixings, domains and bounds afterwards."""
    fixed, relaxed = [], []
    for var in model.component_data_objects(pyo.Var, active=True):
        if var.fixed or not var.is_integer():
            continue
        if id(var.parent_component()) in kept:
            # the domain's own bounds (NonNegativeIntegers: 0) become explicit bounds; Reals alone would drop them
            relaxed.append((var, var.domain, var._lb, var._ub))
            lower, upper = var.lb, var.ub
            var.domain = pyo.Reals
            var.setlb(lower)
            var.setub(upper)
        else:
            if var.value is None:
                raise ValueError(f"the fixed LP needs a solved model; {var.name} has no value")
            var.fix(round(var.value))
            fixed.append(var)
    try:
        yield
    finally:
        for var in fixed:
            var.unfix()
        for var, domain, lower, upper in relaxed:
            var.domain = domain
            var.setlb(lower)
            var.setub(upper)


def _finite(value: float) -> float:
    return float(value) if abs(value) < HIGHS_INFINITY else float(np.sign(value) * np.inf)


def _rows(names: Sequence[str], args: tuple, solution, ranging) -> Iterator[RowSensitivity]:
    row_lower, row_upper = np.asarray(args[9], dtype=np.float64), np.asarray(args[10], dtype=np.float64)
    for i, name in enumerate(names):
        activity = float(solution.row_value[i])
        lower, upper = row_lower[i], row_upper[i]
        if lower == upper:
            sense, bound, slack = "==", float(upper), 0.0
        elif abs(upper) < HIGHS_INFINITY:  # a ranged row reads as its upper bound (the model's rows are one-sided)
            sense, bound, slack = "<=", float(upper), float(upper) - activity
        else:
            sense, bound, slack = ">=", float(lower), activity - float(lower)
        low = _finite(ranging.row_bound_dn.value_[i]) if ranging is not None else float("nan")
        high = _finite(ranging.row_bound_up.value_[i]) if ranging is not None else float("nan")
        yield RowSensitivity(name, sense, activity, bound, max(slack, 0.0), float(solution.row_dual[i]), low, high)


def _columns(names: Sequence[str], args: tuple, solution, ranging) -> Iterator[ColumnSensitivity]:
    cost = args[6]
    for i, name in enumerate(names):
        low = _finite(ranging.col_cost_dn.value_[i]) if ranging is not None else float("nan")
        high = _finite(ranging.col_cost_up.value_[i]) if ranging is not None else float("nan")
        yield ColumnSensitivity(name, float(solution.col_value[i]), float(cost[i]), float(solution.col_dual[i]), low, high)


def row_slack(row: Any) -> float:
    """The distance of a Pyomo constraint's body from its nearest bound at the model's current values (0 for an
    equality that holds; never negative)."""
    body = pyo.value(row.body)
    gaps = [body - pyo.value(row.lower) if row.lower is not None else np.inf, pyo.value(row.upper) - body if row.upper is not None else np.inf]
    return max(min(gaps), 0.0)


def row_binds(row: Any, tolerance: float = 1e-6) -> bool:
    """Whether the row's slack is within ``tolerance`` of its bound's magnitude (at least ``tolerance`` absolute)."""
    bound = row.upper if row.upper is not None else row.lower
    return row_slack(row) <= tolerance * max(1.0, abs(pyo.value(bound)))
