"""The hindsight-optimal cache schedule: prepare, build (Pyomo or highspy arrays), solve by simplex, extract, re-score.

The LP is models/caching.py's interval LP (Tail-Optimized Caching for LLM Inference, Zhang et al.).  Two paths,
one formulation (arrays from :func:`optfleet.problems.caching.lp_data.prepare`):

* ``"highspy"``: the column-wise arrays go straight to ``highspy.Highs.passModel``,
  one diagonal block of the LP at a time (``decompose=False``: the whole LP
  at once), dual simplex, HiGHS presolve off: the path for large traces
  (1e6 turns);
* ``"pyomo"``: the Pyomo model (``m.y``, ``m.capacity``, ``m.tel``) solved
  through optfleet.solvers (HiGHS via highspy; an LP ends at a basic solution,
  simplex or IPM with its default crossover): small models, and models users
  extend (``customize(m)`` adds constraints before the solve).

``path="auto"`` takes Pyomo when ``customize`` is given, else highspy.

Every schedule returned is re-scored by the one evaluator
(``evaluate_schedule``): ``objective`` is its TEL in ms.  The LP optimum is a
lower bound on TEL (it relaxes whole tokens).  Total unimodularity makes the
optimal vertex whole (checked within 1e-6): its TEL then equals the LP
optimum, and ``bound == objective``, ``gap == 0``.  A time-limited run is
*not proven optimal*: the incumbent is the better of HiGHS's point rounded
down (when primal feasible) and Tail-Optimized Belady's schedule, and the
bound is the Lagrangian bound at HiGHS's current row duals (never below the
unlimited-cache bound).  With ``customize`` the greedy may break the user's
constraints, so it is not used as a fallback and the bound is the solver's.

:func:`solve_two_tier` solves the two-tier MILP (models/caching.py (6)-(8))
and scores it with :func:`optfleet.problems.caching.tiers.evaluate_two_tier`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import highspy
import numpy as np
import pyomo.environ as pyo
from numpy.typing import ArrayLike, NDArray

from optfleet.errors import InputError
from optfleet.models import caching as lp
from optfleet.problems.caching.belady import tail_optimized_belady
from optfleet.problems.caching.evaluate import TtftModel, evaluate_schedule
from optfleet.problems.caching.lp_data import prepare, prepare_two_tier
from optfleet.problems.caching.tiers import evaluate_two_tier
from optfleet.problems.caching.trace import ConversationTrace
from optfleet.solvers import SolveReport, solve
from optfleet.solvers.highs import HIGHS_STATUS, highs_session, pass_model
from optfleet.solvers.report import ERROR, INFEASIBLE, OPTIMAL, TIME_LIMIT, FromSolveReport, relative_gap

PATHS = ("auto", "pyomo", "highspy")
# Relative agreement at which the LP optimum and the schedule's evaluated TEL are the same number.
TEL_MATCH_RELATIVE = 1e-7

HIGHS_INFINITY = 1e20
"""HiGHS reads a cost, bound or objective at or above 1e20 as infinite (its ``infinite_cost`` and ``infinite_bound``)."""


def check_lp_range(tel_constant_ms: float, ttft: TtftModel) -> None:
    """Refuse a hindsight LP whose objective HiGHS would read as infinite: its TEL with nothing cached (the LP's
    constant, ``alpha`` x the tokens beyond ``xi``) must stay below :data:`HIGHS_INFINITY` ms, some 3 billion years;
    the message gives the largest ``alpha`` that keeps it there on this trace."""
    if tel_constant_ms >= HIGHS_INFINITY:
        alpha = ttft.alpha_ms_per_token
        raise InputError(
            "ttft.alpha_ms_per_token", alpha,
            f"the hindsight LP's TEL with nothing cached reaches {tel_constant_ms:.3g} ms, above the limit of {HIGHS_INFINITY:g} ms that HiGHS "
            f"reads as infinite; on this trace alpha may be at most about {alpha * HIGHS_INFINITY / tel_constant_ms:.3g} ms per token",
        )


@dataclass(frozen=True)
class HindsightResult(FromSolveReport):
    """The hindsight schedule and the solver's verdict on it (``report``).

    ``report.objective``: the schedule's TEL (ms, by the evaluator); ``report.bound``: a proven lower bound
    on TEL (ms; None when there is none); ``report.gap``: the relative gap; ``integral``: whether the LP
    point was whole within 1e-6; ``lp_objective``: the LP optimum when the solver proved one.
    ``report.seconds`` is the total, ``build_seconds`` (prepare + model or arrays) and ``solve_seconds``
    its main parts.
    """

    kept_tokens: NDArray[np.int64]
    report: SolveReport
    path: str
    integral: bool
    lp_objective: float | None = None
    build_seconds: float = 0.0
    solve_seconds: float = 0.0
    n_columns: int = 0
    n_rows: int = 0
    n_nonzeros: int = 0

    @property
    def proven_optimal(self) -> bool:
        return self.report.status == OPTIMAL and self.report.gap == 0.0


@dataclass(frozen=True)
class _Outcome:
    """What one solver path returns before scoring."""

    status: str
    values: NDArray[np.float64] | None   # column values of a primal-feasible point
    lp_optimum: float | None             # proven LP optimum
    bound: float | None                  # proven lower bound when not optimal
    build_seconds: float
    solve_seconds: float
    solver_runs: int = 0


def solve_hindsight(
    trace: ConversationTrace,
    capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float | ArrayLike,
    *,
    weights: ArrayLike | None = None,
    path: str = "auto",
    time_limit_s: float | None = None,
    forced: bool = False,
    customize: Callable[[pyo.ConcreteModel], None] | None = None,
    decompose: bool = True,
    solver: str = "highs",
) -> HindsightResult:
    """Minimise TEL in hindsight (models/caching.py (2)-(4), or (5) with ``forced``); see the module docstring.

    ``weights`` and ``xi_ms`` may be per turn (SLO tiers); ``customize(m)``
    receives the Pyomo model before the solve; ``decompose=False`` makes the
    highspy path pass the whole LP in one piece instead of block by block; ``solver`` other than ``highs``
    solves the Pyomo model with that installed Pyomo solver.
    """
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if path == "auto":
        path = "pyomo" if customize is not None or solver != "highs" else "highspy"
    if (customize is not None or solver != "highs") and path != "pyomo":
        raise ValueError("customize and solvers other than highs need the Pyomo path")
    start = time.perf_counter()
    data = prepare(trace, capacity_tokens, ttft, xi_ms, weights=weights, forced=forced)
    check_lp_range(data.tel_constant_ms, ttft)
    prepare_s = time.perf_counter() - start
    if data.n_columns == 0 and customize is None:
        # Nothing is worth caching (every turn is within xi, or the capacity is 0): TEL is the constant.
        outcome = _Outcome(OPTIMAL, np.zeros(0), data.tel_constant_ms, data.tel_constant_ms, 0.0, 0.0)
    elif path == "pyomo":
        outcome = _solve_pyomo(data, time_limit_s, customize, solver)
    else:
        outcome = _solve_highspy(data, time_limit_s, decompose)

    def tel(kept: NDArray[np.int64]) -> float:
        slo_ms = float(np.max(xi_ms)) if np.ndim(xi_ms) else None
        return evaluate_schedule(trace, kept, capacity_tokens, ttft, xi_ms, slo_ms=slo_ms, weights=weights, policy="hindsight-lp").tel_ms

    if outcome.status == INFEASIBLE and customize is None:
        raise RuntimeError("the hindsight LP reported infeasible, but keeping nothing is always feasible")
    kept, integral, objective = None, False, None
    if outcome.values is not None:
        kept, integral = lp.kept_from_columns(data, outcome.values)
        objective = tel(kept)
    bound = outcome.lp_optimum if outcome.lp_optimum is not None else outcome.bound
    if outcome.lp_optimum is not None and integral and abs(objective - outcome.lp_optimum) <= TEL_MATCH_RELATIVE * max(1.0, abs(objective)):
        bound, gap = objective, 0.0
    else:
        if customize is None:
            greedy = tail_optimized_belady(trace, capacity_tokens, ttft, xi_ms, forced=forced)
            greedy_tel = tel(greedy)
            if objective is None or greedy_tel < objective:
                kept, objective = greedy, greedy_tel
        if kept is None:
            raise RuntimeError(f"the solver returned no schedule (status {outcome.status})")
        gap = relative_gap(objective, bound)
    report = SolveReport(outcome.status, float(objective), None if bound is None else float(bound), gap, time.perf_counter() - start,
                         solver, counts={"solver_runs": outcome.solver_runs})
    return HindsightResult(
        kept_tokens=kept, report=report, path=path, integral=integral, lp_objective=outcome.lp_optimum,
        build_seconds=prepare_s + outcome.build_seconds, solve_seconds=outcome.solve_seconds,
        n_columns=data.n_columns, n_rows=data.n_rows, n_nonzeros=data.n_nonzeros,
    )


def _solve_highspy(data: lp.CacheLpData, time_limit_s: float | None, decompose: bool) -> _Outcome:
    """Solve the LP's diagonal blocks (or the whole LP) with HiGHS dual simplex; read point, optimum and a bound.

    Columns in no block sit at their upper bound.  A block the time limit
    stops keeps HiGHS's point if primal feasible, else 0 (feasible: the
    matrix is non-negative); the bound is the Lagrangian bound at the duals
    collected (0 for unsolved blocks), valid for any non-negative prices.
    """
    start = time.perf_counter()
    blocks = lp.highs_blocks(data) if decompose else [lp.highs_whole(data)]
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    values = data.col_upper.astype(float)
    prices = np.zeros(data.n_rows)
    status, block_sum, runs = OPTIMAL, 0.0, 0
    with highs_session(keep_log=False) as (h, _):
        h.setOptionValue("solver", "simplex")
        # HiGHS presolve costs more than it saves on these interval LPs (3x slower measured at 1e5 turns);
        # the rows that can never bind are already dropped by prepare().
        h.setOptionValue("presolve", "off")
        for block in blocks:
            rows = slice(block.first_row, block.end_row)
            if time_limit_s is not None:
                remaining = time_limit_s - (time.perf_counter() - start)
                if remaining <= 0:
                    status, values[block.columns] = TIME_LIMIT, 0.0
                    continue
                h.setOptionValue("time_limit", remaining)
            pass_model(h, block.pass_model_args, "the hindsight LP")
            h.run()
            runs += 1
            block_status = HIGHS_STATUS.get(h.getModelStatus(), ERROR)
            info, solution = h.getInfo(), h.getSolution()
            feasible = solution.value_valid and info.primal_solution_status == int(highspy.SolutionStatus.kSolutionStatusFeasible)
            values[block.columns] = np.asarray(solution.col_value, dtype=float) if feasible else 0.0
            if solution.dual_valid:
                # HiGHS's duals of <= rows of a minimisation are <= 0; the price of capacity is their negative.
                prices[rows] = -np.asarray(solution.row_dual, dtype=float)
            if block_status == OPTIMAL:
                block_sum += float(info.objective_function_value)
            elif status == OPTIMAL or block_status == ERROR:
                status = block_status
    solve_s = time.perf_counter() - start
    lp_optimum = None
    if status == OPTIMAL:
        free = np.ones(data.n_columns, dtype=bool)  # columns in no block, at their upper bound
        for block in blocks:
            free[block.columns] = False
        lp_optimum = data.tel_constant_ms - float(np.dot(data.col_value_ms[free], data.col_upper[free])) + block_sum
    bound = max(data.unlimited_cache_bound_ms(), lp.lagrangian_bound_ms(data, prices))
    return _Outcome(status, values, lp_optimum, bound, build_s, solve_s, runs)


def _solve_pyomo(data: lp.CacheLpData, time_limit_s: float | None, customize: Callable[[pyo.ConcreteModel], None] | None,
                 solver: str = "highs") -> _Outcome:
    """Build the Pyomo model, let ``customize`` extend it, solve with optfleet.solvers (HiGHS)."""
    start = time.perf_counter()
    model = lp.build(data)
    if customize is not None:
        customize(model)
    build_s = time.perf_counter() - start
    report = solve(model, time_limit=time_limit_s, solver=solver)
    values = lp.column_values(model, data) if report.has_solution else None
    lp_optimum = report.objective if report.status == OPTIMAL else None
    bound = report.bound
    if bound is None and customize is None:
        bound = data.unlimited_cache_bound_ms()
    return _Outcome(report.status, values, lp_optimum, bound, build_s, report.seconds, report.counts.get("solver_runs", 1))


@dataclass(frozen=True)
class TwoTierResult(FromSolveReport):
    """The two-tier MILP's schedule (fast and slow tokens per gap) and the solver's verdict; TEL in ms."""

    fast_tokens: NDArray[np.int64]
    slow_tokens: NDArray[np.int64]
    report: SolveReport  # objective: the schedule's TEL by evaluate_two_tier; seconds: the whole run


def solve_two_tier(
    trace: ConversationTrace,
    fast_capacity_tokens: int,
    slow_capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float | ArrayLike,
    reload_ms_per_token: float,
    *,
    weights: ArrayLike | None = None,
    time_limit_s: float | None = 60.0,
    mip_gap: float = 0.0,
) -> TwoTierResult:
    """Minimise two-tier TEL in hindsight (models/caching.py (6)-(8), a MILP; Pyomo path).

    ``objective`` is the schedule's TEL by :func:`evaluate_two_tier`; with the
    default ``mip_gap = 0`` an optimal status proves it exact.
    """
    start = time.perf_counter()
    data = prepare_two_tier(trace, fast_capacity_tokens, slow_capacity_tokens, ttft, xi_ms, reload_ms_per_token, weights=weights)
    check_lp_range(data.tel_constant_ms, ttft)
    if len(data.gap) == 0:
        # No gap's next turn exceeds xi: nothing is worth caching, TEL is the constant.
        report = SolveReport(OPTIMAL, data.tel_constant_ms, data.tel_constant_ms, 0.0, 0.0, "none")
        fast = slow = np.zeros(len(trace), dtype=np.int64)
    else:
        model = lp.build_two_tier(data)
        report = solve(model, time_limit=time_limit_s, mip_gap=mip_gap)
        if not report.has_solution:
            raise RuntimeError(f"the two-tier MILP returned no schedule (status {report.status})")
        fast, slow = lp.extract_two_tier(model)
    slo_ms = float(np.max(xi_ms)) if np.ndim(xi_ms) else None
    evaluation = evaluate_two_tier(trace, fast, slow, fast_capacity_tokens, slow_capacity_tokens, ttft, xi_ms,
                                   reload_ms_per_token, slo_ms=slo_ms, weights=weights, policy="two-tier-milp")
    gap = 0.0 if report.status == OPTIMAL and mip_gap == 0.0 else relative_gap(evaluation.tel_ms, report.bound)
    scored = SolveReport(report.status, evaluation.tel_ms, report.bound, gap, time.perf_counter() - start, report.solver, report.log, report.counts)
    return TwoTierResult(fast, slow, scored)
