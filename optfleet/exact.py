"""The fleet MILP end to end: prepare data, build, warm-start from the sweep, solve, extract, re-score.

The Erlang-C table of the model (models/fleet.py) is computed at each pool's
``R_j = E[S^2]/E[S]``, which depends on the routing the model chooses.  The
driver starts from R_j of all requests a pool could hold, then after every
solve re-scores the plan with the evaluator and refreshes R_j of the pools the
plan uses from their actual traffic, re-solving until the plan passes the
evaluator and R_j is stable (DESIGN.md section 3, requirement 3).  The
reported bound and gap are HiGHS's for the model at the final R_j; every
returned plan has passed the evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from optfleet.errors import InfeasibleError
from optfleet.fleet.evaluator import FleetEvaluation, evaluate
from optfleet.fleet.milp_data import prepare_milp_data
from optfleet.fleet.plan import Plan, PoolPlan
from optfleet.fleet.plan_sizing import infeasible_pool_message
from optfleet.fleet.problem import FleetProblem
from optfleet.heuristics import sweep
from optfleet.models import fleet as fleet_model
from optfleet.solvers import SolveReport, solve


@dataclass(frozen=True)
class MilpResult:
    """The MILP's plan, the last solve's report, the evaluator's verdict and the R_j iterations."""

    plan: Plan
    report: SolveReport
    evaluation: FleetEvaluation
    iterations: int
    converged: bool
    history: list[dict] = field(default_factory=list)


def solve_milp(
    problem: FleetProblem,
    *,
    routing: str = "threshold",
    max_pools: int = 2,
    time_limit_s: float | None = 60.0,
    mip_gap: float | None = 1e-6,
    warm_start: bool = True,
    max_iterations: int = 6,
) -> MilpResult:
    """Solve the fleet MILP (see the module docstring); InfeasibleError explains an infeasible instance."""
    data = prepare_milp_data(problem)
    ratio = data.service_ratio_ms.copy()
    start = _sweep_plan(problem) if warm_start else None
    history: list[dict] = []
    for iteration in range(1, max_iterations + 1):
        model = fleet_model.build(data, ratio, routing=routing, max_pools=max_pools)
        if start is not None and start.rules is None and len(start.pools) <= max_pools:
            fleet_model.warm_start(model, start)
            report = solve(model, time_limit=time_limit_s, mip_gap=mip_gap, warm_start=True)
        else:
            report = solve(model, time_limit=time_limit_s, mip_gap=mip_gap)
        if not report.has_solution:
            raise InfeasibleError(_explain(problem, report))
        plan = fleet_model.extract(model)
        evaluation = evaluate(problem, plan)
        updated = ratio.copy()
        for pool in evaluation.pools:
            if pool.share > 0:
                updated[_pool_index(data, pool.window_tokens)] = (1.0 + pool.service_scv) * pool.mean_service_ms
        stable = np.allclose(updated, ratio, rtol=1e-6)
        history.append({"iteration": iteration, "cost_per_hour": report.objective, "status": report.status, "passes_evaluator": evaluation.meets_slo})
        if evaluation.meets_slo and stable:
            return MilpResult(plan, report, evaluation, iteration, True, history)
        ratio = updated
    if not evaluation.meets_slo:
        raise InfeasibleError(f"the MILP's plan still fails the evaluator after {max_iterations} table refreshes")
    return MilpResult(plan, report, evaluation, max_iterations, False, history)


def _pool_index(data, window: int) -> int:
    return next(j for j, o in enumerate(data.pools) if o.window_tokens == window)


def _sweep_plan(problem: FleetProblem) -> Plan | None:
    try:
        return sweep(problem).plan
    except InfeasibleError:
        return None


def _explain(problem: FleetProblem, report: SolveReport) -> str:
    """Why no plan exists: the homogeneous pool's TTFT floor if that is the cause, else the solver status."""
    evaluation = evaluate(problem, Plan((PoolPlan("long", problem.long_window_tokens, 0),)))
    if evaluation.pools[0].min_gpus < 0:
        return f"MILP {report.status}: TTFT floor constraints (4) cannot hold; {infeasible_pool_message(evaluation, 'long')}"
    return f"MILP {report.status} ({report.summary}); the homogeneous fleet is feasible, so a user constraint excludes every plan"
