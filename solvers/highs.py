"""Solve a Pyomo model with HiGHS (the embedded default) or another installed Pyomo solver.

HiGHS goes through Pyomo's APPSI interface (pyomo.contrib.appsi.solvers.Highs),
the one that passes a MIP start (``warmstart``) and reports both the incumbent
and the dual bound.  Its pitfalls, measured with pyomo 6.10 / highspy 1.15
(STYLE.md), are handled here once:

* the time limit and gap are set on the solver's config (the legacy
  ``SolverFactory('appsi_highs').solve(timelimit=...)`` path overwrote them);
* ``load_solution`` is off so that a time-limited or infeasible run returns a
  report instead of raising, and the incumbent is loaded only if one exists;
* a MIP start sends every variable; variables without a value would go as 0,
  so :func:`solve` refuses a warm start with unset variables;
* the log is always captured (a temporary log file) and returned.

Other solvers (``cbc``, ``glpk``, ``gurobi``, ``cplex``, ...) are used through
``SolverFactory`` when installed, with the option names mapped in
``_OPTION_NAMES``; no warm start there.
"""

from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import pyomo.environ as pyo
from pyomo.contrib.appsi.base import TerminationCondition
from pyomo.contrib.appsi.solvers import Highs
from pyomo.opt import TerminationCondition as LegacyCondition

from optfleet.errors import InputError
from optfleet.solvers.report import (
    ERROR,
    INFEASIBLE,
    INFEASIBLE_OR_UNBOUNDED,
    OPTIMAL,
    TIME_LIMIT,
    UNBOUNDED,
    SolveReport,
    relative_gap,
)

_APPSI_STATUS = {
    TerminationCondition.optimal: OPTIMAL,
    TerminationCondition.maxTimeLimit: TIME_LIMIT,
    TerminationCondition.infeasible: INFEASIBLE,
    TerminationCondition.unbounded: UNBOUNDED,
    TerminationCondition.infeasibleOrUnbounded: INFEASIBLE_OR_UNBOUNDED,
}

_LEGACY_STATUS = {
    LegacyCondition.optimal: OPTIMAL,
    LegacyCondition.maxTimeLimit: TIME_LIMIT,
    LegacyCondition.infeasible: INFEASIBLE,
    LegacyCondition.unbounded: UNBOUNDED,
    LegacyCondition.infeasibleOrUnbounded: INFEASIBLE_OR_UNBOUNDED,
}

# Solver family -> (time-limit option, relative-gap option, threads option).
_OPTION_NAMES = {
    "cbc": ("seconds", "ratio", "threads"),
    "glpk": ("tmlim", "mipgap", None),
    "gurobi": ("TimeLimit", "MIPGap", "Threads"),
    "cplex": ("timelimit", "mipgap", "threads"),
    "scip": ("limits/time", "limits/gap", None),
}


def solve(
    model: pyo.ConcreteModel,
    *,
    solver: str = "highs",
    time_limit: float | None = None,
    mip_gap: float | None = None,
    threads: int | None = None,
    warm_start: bool = False,
    stream_log: bool = False,
) -> SolveReport:
    """Solve ``model`` in place; the incumbent (if any) is loaded into its variables.

    A run stopped by ``time_limit`` returns status ``time_limit`` with the
    incumbent and the bound: it is not proven optimal.
    """
    if solver == "highs":
        return _solve_highs(model, time_limit, mip_gap, threads, warm_start, stream_log)
    return _solve_other(model, solver, time_limit, mip_gap, threads, warm_start, stream_log)


def _solve_highs(model, time_limit, mip_gap, threads, warm_start, stream_log) -> SolveReport:
    if warm_start:
        unset = [v.name for v in model.component_data_objects(pyo.Var, active=True) if v.value is None and not v.fixed]
        if unset:
            raise ValueError(f"warm start needs a value on every variable; unset: {unset[:5]}{' ...' if len(unset) > 5 else ''}")
    opt = Highs()
    opt.config.load_solution = False
    opt.config.stream_solver = stream_log
    opt.config.warmstart = warm_start
    opt.config.time_limit = time_limit
    opt.config.mip_gap = mip_gap
    if threads is not None:
        opt.highs_options = {"threads": int(threads)}
    handle, log_path = tempfile.mkstemp(prefix="optfleet-highs-", suffix=".log")
    os.close(handle)
    opt.config.logfile = log_path
    start = time.perf_counter()
    try:
        results = opt.solve(model)
        seconds = time.perf_counter() - start
        with open(log_path) as log_file:
            log = log_file.read()
    finally:
        os.unlink(log_path)
    status = _APPSI_STATUS.get(results.termination_condition, ERROR)
    objective = results.best_feasible_objective
    if objective is not None:
        opt.load_vars()
    bound = results.best_objective_bound
    gap = 0.0 if status == OPTIMAL else relative_gap(objective, bound)
    return SolveReport(status, objective, bound, gap, seconds, "highs", log)


def _solve_other(model, solver, time_limit, mip_gap, threads, warm_start, stream_log) -> SolveReport:
    factory = pyo.SolverFactory(solver)
    if not factory.available(exception_flag=False):
        raise InputError("solve.solver", solver, "this Pyomo solver is not installed here (HiGHS, the default, always is)")
    names = _OPTION_NAMES.get(solver.split("_")[0], (None, None, None))
    options: dict[str, Any] = {}
    for name, value in zip(names, (time_limit, mip_gap, threads), strict=True):
        if name is not None and value is not None:
            options[name] = value
    extra = {"warmstart": True} if warm_start else {}
    start = time.perf_counter()
    results = factory.solve(model, options=options, tee=stream_log, load_solutions=False, **extra)
    seconds = time.perf_counter() - start
    status = _LEGACY_STATUS.get(results.solver.termination_condition, ERROR)
    objective = bound = None
    if len(results.solution) > 0:
        model.solutions.load_from(results)
        objective = pyo.value(next(model.component_data_objects(pyo.Objective, active=True)))
    minimising = next(model.component_data_objects(pyo.Objective, active=True)).sense == pyo.minimize
    raw_bound = results.problem.lower_bound if minimising else results.problem.upper_bound
    if raw_bound is not None and abs(float(raw_bound)) != float("inf"):
        bound = float(raw_bound)
    gap = 0.0 if status == OPTIMAL else relative_gap(objective, bound)
    return SolveReport(status, objective, bound, gap, seconds, solver, "")
