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
from collections.abc import Iterable, Iterator
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
        with highs_session() as (h, log):
            pass_model(h, args, f"the fixed LP of model {model.name!r}")
            h.run()
            status = HIGHS_STATUS.get(h.getModelStatus(), ERROR)
            solution = h.getSolution()
            ranging_status, ranging = h.getRanging() if status == OPTIMAL else (None, None)
        seconds = time.perf_counter() - start
        if status != OPTIMAL:
            report = SolveReport(status, None, None, None, seconds, "highs", log.text, {"solver_runs": 1})
            return LpSensitivity(report, (), ())
        objective = float(h.getInfo().objective_function_value)
        report = SolveReport(OPTIMAL, objective, objective, 0.0, seconds, "highs", log.text, {"solver_runs": 1})
        values = np.asarray(solution.col_value, dtype=np.float64)
        for var, value in zip(form.columns, values, strict=True):
            var.set_value(float(value), skip_validation=True)
        ranged = ranging_status == highspy.HighsStatus.kOk
        rows = tuple(_rows(form, args, solution, ranging if ranged else None))
        columns = tuple(_columns(form, args, solution, ranging if ranged else None))
    return LpSensitivity(report, rows, columns)


@contextmanager
def _fixed_integers(model: pyo.ConcreteModel, kept: set[int]) -> Iterator[None]:
    """Fix every unfixed integer variable at its rounded value, except those of the components ``kept`` (by id), whose
    domain becomes continuous within the same bounds; restore fixings and domains afterwards."""
    fixed, relaxed = [], []
    for var in model.component_data_objects(pyo.Var, active=True):
        if var.fixed or not var.is_integer():
            continue
        if id(var.parent_component()) in kept:
            relaxed.append((var, var.domain))
            var.domain = pyo.Reals
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
        for var, domain in relaxed:
            var.domain = domain


def _finite(value: float) -> float:
    return float(value) if abs(value) < HIGHS_INFINITY else float(np.sign(value) * np.inf)


def _rows(form, args: tuple, solution, ranging) -> Iterator[RowSensitivity]:
    row_lower, row_upper = args[9], args[10]
    for i, entry in enumerate(form.rows):
        activity = float(solution.row_value[i])
        kind = entry.bound_type
        bound = float(row_upper[i] if kind >= 0 else row_lower[i])
        sense = "==" if kind == 0 else ("<=" if kind > 0 else ">=")
        slack = 0.0 if kind == 0 else (bound - activity if kind > 0 else activity - bound)
        low = _finite(ranging.row_bound_dn.value_[i]) if ranging is not None else float("nan")
        high = _finite(ranging.row_bound_up.value_[i]) if ranging is not None else float("nan")
        yield RowSensitivity(entry.constraint.name, sense, activity, bound, max(slack, 0.0), float(solution.row_dual[i]), low, high)


def _columns(form, args: tuple, solution, ranging) -> Iterator[ColumnSensitivity]:
    cost = args[6]
    for i, var in enumerate(form.columns):
        low = _finite(ranging.col_cost_dn.value_[i]) if ranging is not None else float("nan")
        high = _finite(ranging.col_cost_up.value_[i]) if ranging is not None else float("nan")
        yield ColumnSensitivity(var.name, float(solution.col_value[i]), float(cost[i]), float(solution.col_dual[i]), low, high)


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
