"""Solve a Pyomo model with HiGHS (the embedded default) or another installed Pyomo solver.

HiGHS is driven through highspy directly: Pyomo's standard-form compiler
(``pyomo.repn.plugins.standard_form``, mixed form) turns the model's active
constraints and objective into sparse arrays, which go to
``Highs.passModel`` in one call (:func:`pass_model`, the one hand-over of
arrays to HiGHS, also for the caching LP's blocks); a MIP start goes through
``setSolution``;
HiGHS reports the incumbent and the dual bound, and the incumbent is written
back into the model's variables.  The compiler is 4-5x faster than Pyomo's
persistent APPSI interface on the fleet MILP (0.13 s against 0.67 s on
LMSYS threshold routing, 4,827 rows), which mattered at 1-2 s per solve.

* A time-limited or infeasible run returns a report instead of raising;
  the incumbent is loaded only if HiGHS has a primal feasible one.  A model
  with a row that no values meet (found by the compiler, e.g. an empty sum
  equal to 1) is reported infeasible without calling HiGHS.
* A MIP start sends every variable; variables without a value would go as 0,
  so :func:`solve` refuses a warm start with unset variables.
* The log is always captured (a temporary log file) and returned, and
  nothing any solver prints reaches stdout: every HiGHS session
  (:func:`highs_session`, the one way optfleet creates a ``Highs``) and every
  other solver's run happen inside :func:`optfleet.solvers.console.solver_console`,
  which points file descriptor 1 away from stdout; what was printed there
  goes into the report's log.
* ``SolveReport.counts`` holds optfleet's own counts (solver runs, MIP starts
  and whether they meet the model, cases): tests and programs read those, not
  the solver's wording.
* Fixed variables are constants to the compiler; variables in no active
  constraint or objective are not sent and keep their values.

:func:`solve_cases` solves a model as the union of cases (variables fixed at
0 per case, and taken out of what HiGHS gets) on one compiled model, best
first by each case's lower bound (given, then its LP relaxation), each MILP
cut off at the best incumbent so far; the fleet MILP uses it to enumerate
sets of open pools.

Other solvers (``cbc``, ``glpk``, ``gurobi``, ``cplex``, ...) are used through
``SolverFactory`` when installed, with the option names mapped in
``_OPTION_NAMES``; no warm start there.
"""

from __future__ import annotations

import heapq
import math
import os
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import highspy
import numpy as np
import pyomo.environ as pyo
from numpy.typing import NDArray
from optfleet.solvers.console import solver_console
from optfleet.solvers.report import (
    ERROR,
    INFEASIBLE,
    INFEASIBLE_OR_UNBOUNDED,
    OPTIMAL,
    TIME_LIMIT,
    UNBOUNDED,
    UNPROVEN,
    SolveReport,
    relative_gap,
)
from pyomo.common.errors import InfeasibleConstraintException
from pyomo.opt import TerminationCondition as LegacyCondition
from pyomo.repn.plugins.standard_form import LinearStandardFormCompiler
from scipy.sparse import csc_matrix

from optfleet.errors import InputError

HIGHS_STATUS = {
    highspy.HighsModelStatus.kOptimal: OPTIMAL,
    highspy.HighsModelStatus.kTimeLimit: TIME_LIMIT,
    highspy.HighsModelStatus.kInfeasible: INFEASIBLE,
    highspy.HighsModelStatus.kUnbounded: UNBOUNDED,
    highspy.HighsModelStatus.kUnboundedOrInfeasible: INFEASIBLE_OR_UNBOUNDED,
    highspy.HighsModelStatus.kObjectiveTarget: "objective_target",  # resolved against known_bound below
}
OBJECTIVE_TARGET = HIGHS_STATUS[highspy.HighsModelStatus.kObjectiveTarget]
TARGET_TOLERANCE = 1e-9  # relative: how close to known_bound an incumbent stops HiGHS
ROUND_OFF_GAP = 1e-12  # relative gaps below this are floating-point round-off, reported as 0
START_ZERO = 1e-6  # a MIP start fits a case when its fixed variables are this close to 0
UNPROVEN_GAP = 1e-3  # relative: an "optimal" run whose bound is further than this from the incumbent is reported unproven
SMALL_MIP_COLUMNS = 64
"""A MIP of at most this many columns runs without HiGHS's feasibility-jump heuristic: its set-up took about 10 ms of
a 12.8 ms solve of the 6-column reserved model of ``optfleet explain``'s rate curve (2.4 ms without it, the same optimum
and one node; highspy 1.16, one-off).  It only looks for a first incumbent, which branch and bound finds at once on
models this small, so no bound or status changes."""
FEASIBILITY_JUMP = "mip_heuristic_run_feasibility_jump"

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
    "glpk": ("tmlim", "mipgap", None),  # glpsol takes whole seconds (see _WHOLE_SECONDS)
    "gurobi": ("TimeLimit", "MIPGap", "Threads"),
    "cplex": ("timelimit", "mipgap", "threads"),
    "scip": ("limits/time", "limits/gap", None),
}
_WHOLE_SECONDS = {"glpk"}  # solver families whose time-limit option is an integer (rounded up)


def solve(
    model: pyo.ConcreteModel,
    *,
    solver: str = "highs",
    time_limit: float | None = None,
    mip_gap: float | None = None,
    threads: int | None = None,
    warm_start: bool = False,
    stream_log: bool = False,
    known_bound: float | None = None,
    deadline: float | None = None,
    options: dict[str, Any] | None = None,
) -> SolveReport:
    """Solve ``model`` in place; the incumbent (if any) is loaded into its variables.

    A run stopped by ``time_limit`` returns status ``time_limit`` with the
    incumbent and the bound: it is not proven optimal.  ``deadline`` (a
    ``time.perf_counter()`` value: the end of a time limit that began before,
    e.g. with the model's build) caps the limit at what is left of it once the
    model is compiled; with nothing left the solver is not started and the
    report says so (status ``time_limit``, no solution).

    ``known_bound`` is a bound on this model's optimum proven elsewhere (e.g.
    the optimum of a relaxation of it).  HiGHS then stops as soon as its
    incumbent reaches it (option ``objective_target``, to a relative 1e-9),
    which proves the incumbent optimal; the report's bound is the better of
    HiGHS's and ``known_bound``.  ``options`` are further HiGHS options by name (e.g.
    ``{"mip_heuristic_effort": 0.3}``).
    """
    if solver == "highs":
        return _solve_highs(model, time_limit, mip_gap, threads, warm_start, stream_log, known_bound, deadline, options)
    if known_bound is not None:
        raise InputError("solve.solver", solver, "known_bound is supported with HiGHS only")
    if options:
        raise InputError("solve.solver", solver, "HiGHS options are supported with HiGHS only")
    start = time.perf_counter()
    time_limit = _within_deadline(time_limit, deadline)
    if deadline is not None and time_limit <= 0:
        return _out_of_time(start, solver)
    return _solve_other(model, solver, time_limit, mip_gap, threads, warm_start, stream_log)


def _within_deadline(time_limit: float | None, deadline: float | None) -> float | None:
    """``time_limit`` capped at the seconds left until ``deadline`` (either may be None)."""
    if deadline is None:
        return time_limit
    left = deadline - time.perf_counter()
    return left if time_limit is None else min(time_limit, left)


def _out_of_time(start: float, solver: str = "highs") -> SolveReport:
    """The report of a solve whose time limit passed before the solver could start (in the model's build)."""
    return SolveReport(TIME_LIMIT, None, None, None, time.perf_counter() - start, solver,
                       "not started: the time limit passed while the model was built and compiled", {"solver_runs": 0})


def _solve_highs(model, time_limit, mip_gap, threads, warm_start, stream_log, known_bound, deadline=None, options=None) -> SolveReport:
    start = time.perf_counter()
    try:
        form, integer = _compile(model, warm_start)
    except InfeasibleConstraintException as exc:
        return _trivially_infeasible(exc, start)
    time_limit = _within_deadline(time_limit, deadline)
    if deadline is not None and time_limit <= 0:
        return _out_of_time(start)
    columns = form.columns
    args = _pass_model_args(form, integer)
    start_values = np.array([float(v.value) for v in columns]) if warm_start and integer.any() else None
    report, values = solve_arrays(args, what=f"model {model.name!r}", time_limit=time_limit, mip_gap=mip_gap, threads=threads,
                                  start_values=start_values, stream_log=stream_log, known_bound=known_bound, started=start,
                                  options=options)
    if values is not None:
        _load(columns, values)
    return report


def solve_arrays(
    args: tuple,
    *,
    what: str,
    time_limit: float | None = None,
    mip_gap: float | None = None,
    threads: int | None = None,
    start_values: np.ndarray | None = None,
    stream_log: bool = False,
    known_bound: float | None = None,
    started: float | None = None,
    options: dict[str, Any] | None = None,
) -> tuple[SolveReport, np.ndarray | None]:
    """Solve a model given as ``passModel`` arrays (column-wise: see :func:`_pass_model_args`) with HiGHS.

    The one HiGHS run of every model: a Pyomo model reaches it through its compiled arrays, a model too large
    for Pyomo (the reserved-capacity LPs over 604,800 windows) is built as arrays directly.  Returns the
    report and the incumbent's column values (None without a primal feasible solution).  ``start_values`` is
    a MIP start; ``known_bound`` and the statuses are as in :func:`solve`; ``options`` are further HiGHS options
    by name (e.g. ``{"presolve": "off"}``).
    """
    start = time.perf_counter() if started is None else started
    minimising = int(args[4]) == 1
    integer = np.asarray(args[14])
    counts = {"solver_runs": 1, "mip_starts": 0, "feasible_mip_starts": 0}
    with highs_session(time_limit=time_limit, mip_gap=mip_gap, threads=threads, stream_log=stream_log) as (h, log):
        if integer.any() and int(args[0]) <= SMALL_MIP_COLUMNS:
            h.setOptionValue(FEASIBILITY_JUMP, False)
        for name, value in (options or {}).items():
            h.setOptionValue(name, value)
        pass_model(h, args, what)
        _set_target(h, known_bound, minimising)
        if start_values is not None and integer.any():
            h.setSolution(_solution(None, start_values))
            counts["mip_starts"] = 1
            counts["feasible_mip_starts"] = int(start_is_feasible(args, np.asarray(start_values, dtype=np.float64)))
        h.run()
        seconds = time.perf_counter() - start
    status = HIGHS_STATUS.get(h.getModelStatus(), ERROR)
    info = h.getInfo()
    objective = bound = values = None
    if info.primal_solution_status == int(highspy.SolutionStatus.kSolutionStatusFeasible):
        objective = float(info.objective_function_value)
        values = np.asarray(h.getSolution().col_value, dtype=np.float64)
    if integer.any():
        bound = float(info.mip_dual_bound) if objective is not None or status == TIME_LIMIT else None
    elif status == OPTIMAL:
        bound = objective  # an LP solved to optimality: the dual objective equals the primal
    if bound is not None and not np.isfinite(bound):
        bound = None
    if known_bound is not None and status in (OBJECTIVE_TARGET, TIME_LIMIT):
        bound = known_bound if bound is None else (max if minimising else min)(bound, known_bound)
    if status == OBJECTIVE_TARGET:
        status = OPTIMAL  # the incumbent reaches known_bound (to TARGET_TOLERANCE): optimal by that bound
    gap = _gap(status, objective, bound)
    if status == OPTIMAL and gap is not None and gap > max(UNPROVEN_GAP, 10 * (mip_gap or 0.0)):
        status = UNPROVEN  # HiGHS stopped within its tolerances, but its bound does not prove the incumbent (badly scaled costs)
    return SolveReport(status, objective, bound, gap, seconds, "highs", log.text, counts), values


def solve_cases(
    model: pyo.ConcreteModel,
    groups: Sequence[Sequence[Any]],
    cases: Sequence[Sequence[int]],
    *,
    case_bounds: Sequence[float] | None = None,
    case_refine: Callable[[int], float] | None = None,
    time_limit: float | None = None,
    mip_gap: float | None = None,
    threads: int | None = None,
    warm_start: bool = False,
    stream_log: bool = False,
    known_bound: float | None = None,
) -> SolveReport:
    """Minimise ``model`` case by case: case c is the model with the variables of the groups ``cases[c]``
    (indices into ``groups``, lists of variables) fixed at 0.

    Exact when every feasible solution lies in some case (the caller's promise, e.g. every set of
    at most K open pools lies in some case's set of pools left open).  The model is compiled once;
    HiGHS gets each case without its fixed columns (:func:`_without_columns`).

    Best first: every case has a lower bound on its optimum, at first ``case_bounds[c]`` (one the
    caller proved) or -inf, and the case with the least bound is worked on next: ``case_refine(c)``
    first when given (a stronger lower bound the caller proved, too costly to compute for every case:
    +inf drops the case), then a bound from its LP relaxation, then its MILP, cut off at the best
    incumbent so far (``objective_bound``).  It
    stops when no case's bound is below the incumbent (within ``mip_gap``): the cases left are pruned
    by their bounds, unsolved.  The report's bound is the least of the pruned cases' bounds and the
    solved cases' (a case's optimum, the cutoff it could not beat, or its dual bound when the time
    limit stops it); a case never bounded leaves no bound.  The best incumbent is loaded into the
    model.  ``warm_start`` sends the model's values as the MIP start of the first case they fit,
    which is solved first; ``known_bound`` as in :func:`solve`.
    """
    objective = next(model.component_data_objects(pyo.Objective, active=True))
    if objective.sense != pyo.minimize:
        raise ValueError("solve_cases minimises; the model's objective maximises")
    start = time.perf_counter()
    try:
        compiled = _CaseArrays.of(model, groups, warm_start)
    except InfeasibleConstraintException as exc:
        return _trivially_infeasible(exc, start)
    columns, args, group_columns, fixed_of = compiled.columns, compiled.args, compiled.group_columns, compiled.fixed
    start_values = np.array([float(v.value) for v in columns]) if warm_start else None
    fitting = [] if start_values is None else [g for g, cols in enumerate(group_columns) if np.all(np.abs(start_values[cols]) <= START_ZERO)]
    first = None if start_values is None else next((c for c, case in enumerate(cases) if set(case) <= set(fitting)), None)
    # (priority, stage, case, bound): stage 0 wants case_refine, stage 1 its LP relaxation, stage 2 its MILP; the
    # priority is the bound, but -inf for the case the MIP start fits
    given = [-np.inf if case_bounds is None else float(case_bounds[c]) for c in range(len(cases))]
    opening = 0 if case_refine is not None else 1
    queue = [(-np.inf, 2, c, given[c]) if c == first else (given[c], opening, c, given[c]) for c in range(len(cases))]
    heapq.heapify(queue)
    incumbent, best, settled, status = np.inf, None, [], OPTIMAL
    counts = {"cases": len(cases), "refined_bounds": 0, "lp_relaxations": 0, "case_solves": 0, "empty_cases": 0, "mip_starts": 0, "feasible_mip_starts": 0}
    with highs_session(time_limit=time_limit, mip_gap=mip_gap, threads=threads, stream_log=stream_log) as (h, log):
        tolerance = float(h.getOptionValue("mip_rel_gap")[1])
        while queue and (incumbent == np.inf or relative_gap(incumbent, queue[0][0]) > tolerance and queue[0][0] < incumbent):
            priority, stage, c, bound = heapq.heappop(queue)
            remaining = None if time_limit is None else time_limit - (time.perf_counter() - start)
            if remaining is not None and remaining <= 0:
                heapq.heappush(queue, (priority, stage, c, bound))
                status = TIME_LIMIT
                break
            if stage == 0:
                counts["refined_bounds"] += 1
                refined = max(bound, float(case_refine(c)))
                if refined < np.inf:
                    heapq.heappush(queue, (refined, 1, c, refined))
                continue
            reduced = _without_columns(args, fixed_of(cases[c]))
            if reduced is None:  # a row the fixed columns alone break: nothing in this case
                counts["empty_cases"] += 1
                continue
            case_args, kept = reduced
            mip = bool(case_args[-1].any())
            if remaining is not None:
                h.setOptionValue("time_limit", remaining)
            if stage == 1 and mip:
                counts["lp_relaxations"] += 1
                relaxed = _relaxation_bound(h, case_args, incumbent, f"the LP relaxation of a case of model {model.name!r}")
                if relaxed < np.inf:
                    heapq.heappush(queue, (max(bound, relaxed), 2, c, max(bound, relaxed)))
                continue
            counts["case_solves"] += 1
            pass_model(h, case_args, f"model {model.name!r}")
            _set_target(h, known_bound, True)
            h.setOptionValue("objective_bound", float(incumbent))
            if c == first:
                h.setSolution(_solution(columns, start_values[kept]))
                counts["mip_starts"] += 1
                counts["feasible_mip_starts"] += int(start_is_feasible(case_args, start_values[kept]))
            cutoff = incumbent
            h.run()
            case_status, info = h.getModelStatus(), h.getInfo()
            found = info.primal_solution_status == int(highspy.SolutionStatus.kSolutionStatusFeasible)
            if found and info.objective_function_value < incumbent:
                incumbent, best = float(info.objective_function_value), np.zeros(len(columns))
                best[kept] = h.getSolution().col_value
            # A case's bound: HiGHS's dual bound (an optimal MIP stops within mip_rel_gap of its optimum;
            # an LP's optimum is exact), never above the cutoff it was given.
            proven = float(info.mip_dual_bound) if mip else float(info.objective_function_value)
            if case_status == highspy.HighsModelStatus.kOptimal:
                # an earlier bound (the LP's) may sit a tolerance above the case's own incumbent: cap it there
                settled.append(min(max(bound, proven), info.objective_function_value) if found else max(bound, cutoff))
            elif case_status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kObjectiveBound):
                settled.append(cutoff)  # nothing below the cutoff (nothing at all, when there was none)
            elif case_status == highspy.HighsModelStatus.kObjectiveTarget:
                settled.append(known_bound)  # stopped at the known bound (below)
            elif case_status == highspy.HighsModelStatus.kTimeLimit:
                status = TIME_LIMIT
                settled.append(max(bound, min(proven, cutoff)) if mip else bound)
            else:  # unbounded, infeasible-or-unbounded, interrupted: reported as such, no bound
                status = HIGHS_STATUS.get(case_status, ERROR)
                settled.append(-np.inf)
                break
            if known_bound is not None and incumbent <= known_bound + TARGET_TOLERANCE * max(1.0, abs(known_bound)):
                queue, settled, status = [], [known_bound], OPTIMAL  # the incumbent reaches the known bound: done
                break
        seconds = time.perf_counter() - start
    if best is not None:
        _load(columns, best)
    objective_value = None if best is None else incumbent
    bounds = settled + [bound for _, _, _, bound in queue]
    bound = min(bounds) if bounds else None
    if known_bound is not None:
        bound = known_bound if bound is None else max(bound, known_bound)
    if bound is not None and not np.isfinite(bound):
        bound = None if bound < 0 else bound
    if status == OPTIMAL and objective_value is None:
        status, bound = INFEASIBLE, None
    gap = _gap(status, objective_value, bound)
    left = "pruned by their bounds" if status == OPTIMAL else "unsolved"
    counts["cases_left"] = len(queue)
    counts["solver_runs"] = counts["lp_relaxations"] + counts["case_solves"]
    text = (f"optfleet: {len(cases)} cases: {counts['refined_bounds']} refined bounds, {counts['lp_relaxations']} LP relaxations, "
            f"{counts['case_solves']} solved, "
            f"{len(queue)} left {left}; each HiGHS run below\n")
    text += log.text
    return SolveReport(status, objective_value, bound, gap, seconds, "highs", text, counts)


@dataclass(frozen=True)
class _CaseArrays:
    """A model compiled once for solving case by case: its columns, its ``passModel`` arguments and each group's
    column indices."""

    columns: list
    args: tuple
    group_columns: list[np.ndarray]

    @classmethod
    def of(cls, model: pyo.ConcreteModel, groups: Sequence[Sequence[Any]], warm_start: bool = False) -> _CaseArrays:
        form, integer = _compile(model, warm_start)
        index = {id(var): i for i, var in enumerate(form.columns)}
        group_columns = [np.array([index[id(v)] for v in group if id(v) in index], dtype=np.int64) for group in groups]
        return cls(form.columns, _pass_model_args(form, integer), group_columns)

    def fixed(self, case: Sequence[int]) -> np.ndarray:
        """The columns case ``case`` fixes at 0 (those of its groups)."""
        fixed = np.zeros(len(self.columns), dtype=bool)
        for g in case:
            fixed[self.group_columns[g]] = True
        return np.flatnonzero(fixed)


def case_optima(model: pyo.ConcreteModel, groups: Sequence[Sequence[Any]], cases: Sequence[Sequence[int]], *,
                mip_gap: float | None = None) -> NDArray[np.float64]:
    """Each case's own optimum (cases as in :func:`solve_cases`; +inf for a case with no solution), every case solved
    in full with no pruning and no cutoff: the brute force that bounds on cases are checked against.  The model is
    compiled once.  A RuntimeError when a case ends neither optimal nor infeasible (e.g. unbounded)."""
    objective = next(model.component_data_objects(pyo.Objective, active=True))
    if objective.sense != pyo.minimize:
        raise ValueError("case_optima minimises; the model's objective maximises")
    try:
        compiled = _CaseArrays.of(model, groups)
    except InfeasibleConstraintException:
        return np.full(len(cases), np.inf)
    optima = np.full(len(cases), np.inf)
    with highs_session(mip_gap=mip_gap, keep_log=False) as (h, _):
        for c, case in enumerate(cases):
            reduced = _without_columns(compiled.args, compiled.fixed(case))
            if reduced is None:
                continue
            pass_model(h, reduced[0], f"a case of model {model.name!r}")
            h.run()
            status = h.getModelStatus()
            if status == highspy.HighsModelStatus.kOptimal:
                optima[c] = float(h.getInfo().objective_function_value)
            elif status != highspy.HighsModelStatus.kInfeasible:
                raise RuntimeError(f"case {c} of model {model.name!r} ended {h.modelStatusToString(status)}")
    return optima


def _relaxation_bound(h: highspy.Highs, case_args: tuple, cutoff: float, what: str) -> float:
    """A lower bound on a case's optimum from its LP relaxation (``what``, for the error if HiGHS refuses
    it): the LP's optimum, +inf when the LP is infeasible or its dual simplex passes ``cutoff``
    (``objective_bound``), -inf when HiGHS stops otherwise.  Presolve is off: on the fleet cases' LPs (a
    few hundred columns) it doubled the time."""
    pass_model(h, (*case_args[:-1], np.zeros_like(case_args[-1])), what)
    h.setOptionValue("objective_bound", float(cutoff))
    h.setOptionValue("presolve", "off")
    h.setOptionValue("output_flag", False)
    try:
        h.run()
    finally:
        h.setOptionValue("presolve", "choose")
        h.setOptionValue("output_flag", True)
    status = h.getModelStatus()
    if status == highspy.HighsModelStatus.kOptimal:
        return float(h.getInfo().objective_function_value)
    if status in (highspy.HighsModelStatus.kInfeasible, highspy.HighsModelStatus.kObjectiveBound):
        return np.inf
    return -np.inf


def _without_columns(args: tuple, fixed: np.ndarray, tolerance: float = 1e-9) -> tuple[tuple, np.ndarray] | None:
    """``passModel`` arguments of the model with the columns ``fixed`` at 0 taken out, and the kept columns.

    Rows left with no entry are dropped; None if one of them, or a fixed column's own bounds, exclude 0 (the
    case has no solution).  HiGHS then gets only what the case can use, not columns for its presolve to
    remove (on the fleet MILP its probing over the closed pools' binaries cost seconds per case).
    """
    (n_cols, n_rows, _, _, sense, offset, cost, col_lower, col_upper, row_lower, row_upper, starts, indices, values, integer) = args
    if np.any(col_lower[fixed] > tolerance) or np.any(col_upper[fixed] < -tolerance):
        return None
    dropped = np.zeros(n_cols, dtype=bool)
    dropped[fixed] = True
    kept = np.flatnonzero(~dropped)
    matrix = csc_matrix((values, indices, np.append(starts, len(values))), shape=(n_rows, n_cols))[:, kept]
    used = np.diff(matrix.tocsr().indptr) > 0
    if np.any(row_lower[~used] > tolerance) or np.any(row_upper[~used] < -tolerance):
        return None
    matrix = matrix[used, :].tocsc()
    return (
        len(kept), int(used.sum()), int(matrix.nnz), 1, sense, offset, cost[kept], col_lower[kept], col_upper[kept],
        row_lower[used], row_upper[used], matrix.indptr[:-1].astype(np.int32), matrix.indices.astype(np.int32),
        matrix.data.astype(np.float64), integer[kept],
    ), kept


def start_is_feasible(args: tuple, values: np.ndarray, tolerance: float = 1e-6) -> bool:
    """Whether a MIP start meets every bound, integrality and row of the ``passModel`` arrays ``args`` (to
    ``tolerance``, relative to each bound's magnitude, at least 1): optfleet's own check that a heuristic's
    plan is a solution of the model it starts, independent of what the solver logs about it."""
    (n_cols, n_rows, _, _, _, _, _, col_lower, col_upper, row_lower, row_upper, starts, indices, values_a, integer) = args
    values = np.asarray(values, dtype=np.float64)

    def within(x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> bool:
        low_slack = tolerance * np.maximum(1.0, np.abs(np.where(np.isfinite(lower), lower, 0.0)))
        high_slack = tolerance * np.maximum(1.0, np.abs(np.where(np.isfinite(upper), upper, 0.0)))
        return bool(np.all(x >= lower - low_slack) and np.all(x <= upper + high_slack))

    if not within(values, col_lower, col_upper):
        return False
    whole = integer.astype(bool)
    if np.any(np.abs(values[whole] - np.round(values[whole])) > tolerance):
        return False
    matrix = csc_matrix((values_a, indices, np.append(starts, len(values_a))), shape=(n_rows, n_cols))
    return within(matrix @ values, row_lower, row_upper)


def _gap(status: str, objective: float | None, bound: float | None) -> float | None:
    """The relative gap between incumbent and bound; an optimal run stopped within ``mip_gap`` shows it
    (0 without a bound to compare, e.g. another solver's optimal LP, and below ``ROUND_OFF_GAP``: a case's
    dual bound and the incumbent can differ in the last digits)."""
    if objective is not None and bound is not None:
        gap = relative_gap(objective, bound)
        return 0.0 if gap < ROUND_OFF_GAP else gap
    return 0.0 if status == OPTIMAL else None


def _compile(model: pyo.ConcreteModel, warm_start: bool):
    """The model's mixed standard form and each column's integrality (refusing a warm start with unset values)."""
    if warm_start:
        unset = [v.name for v in model.component_data_objects(pyo.Var, active=True) if v.value is None and not v.fixed]
        if unset:
            raise ValueError(f"warm start needs a value on every variable; unset: {unset[:5]}{' ...' if len(unset) > 5 else ''}")
    form = LinearStandardFormCompiler().write(model, mixed_form=True, set_sense=None)
    if len(form.objectives) != 1:
        raise ValueError(f"the HiGHS driver needs exactly one active objective; the model has {len(form.objectives)}")
    return form, np.array([v.is_integer() for v in form.columns], dtype=np.int32)


def _trivially_infeasible(exc: InfeasibleConstraintException, start: float) -> SolveReport:
    """The report of a model with a row no values can meet (e.g. an empty sum = 1), found while compiling."""
    return SolveReport(INFEASIBLE, None, None, None, time.perf_counter() - start, "highs", f"not sent to HiGHS: {exc}", {"solver_runs": 0})


@dataclass
class SessionLog:
    """What one HiGHS session printed: its console output (the banner, or the log when streamed) and its log."""

    text: str = ""


@contextmanager
def highs_session(
    *,
    time_limit: float | None = None,
    mip_gap: float | None = None,
    threads: int | None = None,
    stream_log: bool = False,
    keep_log: bool = True,
) -> Iterator[tuple[highspy.Highs, SessionLog]]:
    """A configured ``Highs``, created and run with stdout kept for optfleet (:func:`solver_console`).

    With ``keep_log`` HiGHS logs to a temporary file; after the block ``log.text`` holds what HiGHS printed
    to the console (its banner) and that log.  ``stream_log`` also shows the log live, on stderr.  Without
    ``keep_log`` HiGHS logs nothing (``output_flag`` off), as the caching LP's thousands of blocks want.
    """
    log = SessionLog()
    with solver_console(to_stderr=stream_log) as console:
        h = highspy.Highs()
        h.setOptionValue("log_to_console", bool(stream_log))
        if not keep_log:
            h.setOptionValue("output_flag", False)
        if time_limit is not None:
            h.setOptionValue("time_limit", float(time_limit))
        if mip_gap is not None:
            h.setOptionValue("mip_rel_gap", float(mip_gap))
        if threads is not None:
            h.setOptionValue("threads", int(threads))
        handle, log_path = tempfile.mkstemp(prefix="optfleet-highs-", suffix=".log")
        os.close(handle)
        if keep_log:
            h.setOptionValue("log_file", log_path)
        try:
            yield h, log
            h.setOptionValue("log_file", "")  # closes the file before it is read
            with open(log_path) as log_file:
                log.text = log_file.read()
        finally:
            os.unlink(log_path)
    log.text = console.text + log.text


def pass_model(h: highspy.Highs, args: tuple, what: str) -> None:
    """Hand HiGHS a model as arrays: ``h.passModel(*args)`` (column-wise, see :func:`_pass_model_args`); a
    RuntimeError naming ``what`` (e.g. ``"model 'fleet:toy'"``) when HiGHS refuses them."""
    if h.passModel(*args) == highspy.HighsStatus.kError:
        raise RuntimeError(f"HiGHS refused the arrays of {what}")


def _set_target(h, known_bound: float | None, minimising: bool) -> None:
    if known_bound is not None:
        slack = TARGET_TOLERANCE * max(1.0, abs(known_bound))
        h.setOptionValue("objective_target", known_bound + slack if minimising else known_bound - slack)


def _solution(columns, values=None):
    """A ``HighsSolution`` holding ``values`` (default: the columns' current values), for ``setSolution``."""
    solution = highspy.HighsSolution()
    solution.col_value = [float(v.value) for v in columns] if values is None else list(values)
    solution.value_valid = True
    return solution


def _load(columns, values) -> None:
    for var, value in zip(columns, values, strict=True):
        var.set_value(float(value), skip_validation=True)


def _pass_model_args(form, integer: np.ndarray) -> tuple:
    """``passModel`` positional arguments (column-wise) of a mixed-form standard form: row kind 0 is ``==``,
    1 is ``<=`` and -1 is ``>=`` its right-hand side."""
    kinds = np.array([row.bound_type for row in form.rows], dtype=np.int64)
    rhs = np.asarray(form.rhs, dtype=np.float64)
    row_lower = np.where(kinds <= 0, rhs, -np.inf)
    row_upper = np.where(kinds >= 0, rhs, np.inf)
    columns = form.columns
    col_lower = np.array([-np.inf if v.lb is None else v.lb for v in columns], dtype=np.float64)
    col_upper = np.array([np.inf if v.ub is None else v.ub for v in columns], dtype=np.float64)
    cost = np.asarray(form.c.toarray()[0], dtype=np.float64) if form.c.shape[0] else np.zeros(len(columns))
    sense = 1 if form.objectives[0].sense == pyo.minimize else -1
    matrix = form.A.tocsc()
    return (
        len(columns), len(kinds), int(matrix.nnz), 1, sense, float(form.c_offset[0]), cost, col_lower, col_upper,
        row_lower, row_upper, matrix.indptr[:-1].astype(np.int32), matrix.indices.astype(np.int32),
        matrix.data.astype(np.float64), integer,
    )


def solver_factory(solver: str, field: str = "solve.solver") -> Any:
    """The installed Pyomo solver ``solver`` (an InputError naming ``field`` when it is not installed here).  Pyomo's
    own warning about a missing solver stays off stdout."""
    with solver_console():
        factory = pyo.SolverFactory(solver)
        available = factory.available(exception_flag=False)
    if not available:
        raise InputError(field, solver, "this Pyomo solver is not installed here (HiGHS, the default, always is)")
    return factory


def _solve_other(model, solver, time_limit, mip_gap, threads, warm_start, stream_log) -> SolveReport:
    factory = solver_factory(solver)
    family = solver.split("_")[0]
    names = _OPTION_NAMES.get(family, (None, None, None))
    if time_limit is not None and family in _WHOLE_SECONDS:
        time_limit = max(1, math.ceil(time_limit))
    options: dict[str, Any] = {}
    for name, value in zip(names, (time_limit, mip_gap, threads), strict=True):
        if name is not None and value is not None:
            options[name] = value
    # A MIP start only where the solver's Pyomo interface takes one (GLPK's does not: solved cold).
    extra = {"warmstart": True} if warm_start and getattr(factory, "warm_start_capable", lambda: False)() else {}
    start = time.perf_counter()
    with solver_console(to_stderr=stream_log) as console:
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
    gap = _gap(status, objective, bound)
    return SolveReport(status, objective, bound, gap, seconds, solver, console.text, {"solver_runs": 1})
