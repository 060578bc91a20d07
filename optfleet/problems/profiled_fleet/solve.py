"""The profiled-fleet MILP end to end: build, warm-start, solve, extract, re-score.

``solve_profiled(problem)`` builds models/profiled.py's MILP with the
instance's constraints, loads the greedy plan as the MIP start, solves with
HiGHS (solvers/highs.py) and scores the plan with the one evaluator.

* Under a budget cap the model maximises the served rate; a second solve
  then keeps that rate (to a relative 1e-6) and minimises cost, so the plan
  is the cheapest among those serving the most.
* The GPU counts carry upper bounds (``ProfiledProblem.gpu_upper_bounds``)
  that provably hold at some optimum without ``gpu_mix``.  With ``gpu_mix`` or
  a ``customize`` hook the driver certifies the optimum by cost (a plan beyond
  the bounds costs more than the one found) or re-solves once with bounds that
  hold every plan up to that cost, which is exact; under a budget the bounds
  hold every plan within the cap.  An infeasible model is retried once at
  64 times the bounds; an infeasible verdict under ``gpu_mix`` or a hook holds
  for plans within those.
* An infeasible instance raises :class:`InfeasibleError` with the reason in
  words (optfleet/problems/profiled_fleet/diagnose.py), never a solver log.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyomo.environ as pyo

from optfleet.errors import InfeasibleError
from optfleet.models import profiled as model_lib
from optfleet.models.constraints import SERVED
from optfleet.problems.profiled_fleet.constraints import PROFILED_CONSTRAINTS
from optfleet.problems.profiled_fleet.diagnose import explain_infeasible
from optfleet.problems.profiled_fleet.evaluator import ProfiledEvaluation, evaluate
from optfleet.problems.profiled_fleet.greedy import greedy_cost_per_request
from optfleet.problems.profiled_fleet.plan import ProfiledPlan
from optfleet.problems.profiled_fleet.problem import ProfiledProblem, require_servable
from optfleet.solvers import SolveReport, solve

MAX_BOUND_DOUBLINGS = 6
FEASIBILITY_TIME_LIMIT_S = 10.0


@dataclass(frozen=True)
class ProfiledResult:
    """The MILP's plan, its evaluation, and the solver's reports.

    ``report`` is the solve that decides the objective (cost, or the served
    rate under a budget cap): its ``bound`` is the proven bound.
    ``cost_report`` is the budget's second phase (None otherwise).
    ``seconds`` is the wall time of everything (build, solves, extract).
    """

    plan: ProfiledPlan
    evaluation: ProfiledEvaluation
    report: SolveReport
    cost_report: SolveReport | None
    seconds: float
    gpu_bound_scale: int = 1

    @property
    def objective_name(self) -> str:
        return "served_rps" if self.cost_report is not None else "cost_per_hour"


def solve_profiled(
    problem: ProfiledProblem,
    *,
    time_limit_s: float | None = None,
    mip_gap: float | None = None,
    warm_start: bool = True,
    start: ProfiledPlan | None = None,
    customize: Callable[[pyo.ConcreteModel], None] | None = None,
    method: str = "milp",
) -> ProfiledResult:
    """Solve ``problem`` exactly (see the module docstring); InfeasibleError explains an infeasible instance.

    ``time_limit_s`` / ``mip_gap`` default to the instance's ``solve:``
    block.  ``start`` replaces the greedy MIP start.  ``customize(model)``
    is the Python hook for constraints of your own, e.g.
    ``lambda m: setattr(m, "cap", pyo.Constraint(expr=m.n["A100-80GB"] <= 2))``.
    """
    began = time.perf_counter()
    require_servable(problem)
    time_limit_s = problem.time_limit_s if time_limit_s is None else time_limit_s
    mip_gap = problem.mip_gap if mip_gap is None else mip_gap
    if start is None and warm_start:
        start = greedy_cost_per_request(problem)
    bounds = problem.gpu_upper_bounds()
    may_need_more = customize is not None or any(not PROFILED_CONSTRAINTS[c.kind].bound_proven for c in problem.constraints)
    if may_need_more and problem.budget is not None:
        bounds = _within_budget(problem, bounds)  # every plan under the cap fits: the bounds cut nothing off
    widest = 2**MAX_BOUND_DOUBLINGS if may_need_more else 1
    scale = 1
    while True:
        model = _model(problem, {g: scale * n for g, n in bounds.items()}, customize)
        report = _solve(model, start, time_limit_s, mip_gap, problem.solver)
        if not report.has_solution:
            if report.status.startswith("infeasible") and scale < widest:
                scale = widest  # the bounds may be what excludes every plan: retry once at the widest
                continue
            if report.status.startswith("infeasible"):
                raise InfeasibleError(f"no feasible plan: {_explain(problem, customize, widest)}")
            raise InfeasibleError(f"no plan found: {report.summary}")
        cost_report = None
        if model.objective_name == SERVED:
            model_lib.minimise_cost_at(model, float(pyo.value(model.served_rps)))
            start_again = extract_plan(model, method)
            cost_report = _solve(model, start_again, time_limit_s, mip_gap, problem.solver)
            if not cost_report.has_solution:  # cannot happen (the phase-1 plan is feasible) unless time ran out
                raise InfeasibleError(f"the cost phase under the budget found no plan: {cost_report.summary}")
            break
        wider = _uncertified(problem, model.gpu_bounds, float(report.objective)) if may_need_more else None
        if wider is None:
            break
        bounds, scale = wider, 1  # every plan up to this cost fits now: the next solve is exact
    plan = extract_plan(model, method)
    evaluation = evaluate(problem, plan)
    if not evaluation.feasible:
        raise RuntimeError(f"internal error: the MILP's plan fails the evaluator: {'; '.join(evaluation.violations)}")
    return ProfiledResult(plan, evaluation, report, cost_report, time.perf_counter() - began, scale)


def _uncertified(problem: ProfiledProblem, bounds: dict[str, int], cost: float) -> dict[str, int] | None:
    """None when the plan of ``cost`` is certified optimal despite the GPU bounds, else bounds that hold every plan
    up to that cost.  A plan with more than ``bounds[g]`` GPUs of type g costs at least ``p_g (bounds[g] + 1)``
    (p_g per GPU-hour; every type's cost is non-negative), so when that is at least ``cost`` for every type, no plan
    beyond the bounds is cheaper; otherwise ``floor(cost / p_g)`` GPUs of type g (rounded up to its count multiple)
    holds every plan that could be."""
    prices = {gpu.name: gpu.cost_per_gpu_hour for gpu in problem.gpus}
    if all(prices[g] * (n + 1) >= cost for g, n in bounds.items()):
        return None
    return {g: max(n, _round_up(math.floor(cost / prices[g]), problem.gpu_multiple(problem.gpu_index(g)))) for g, n in bounds.items()}


def _within_budget(problem: ProfiledProblem, bounds: dict[str, int]) -> dict[str, int]:
    """Bounds every plan under the budget cap respects: ``p_g n_g <= cap`` for each type g."""
    cap = problem.budget.max_cost_per_hour
    return {gpu.name: max(bounds[gpu.name], _round_up(math.floor(cap / gpu.cost_per_gpu_hour), problem.gpu_multiple(g)))
            for g, gpu in enumerate(problem.gpus)}


def _round_up(count: int, multiple: int) -> int:
    return -(-count // multiple) * multiple


def extract_plan(model: pyo.ConcreteModel, method: str = "milp") -> ProfiledPlan:
    """The plan of a solved model (``models.profiled.extract``), named ``method``."""
    solution = model_lib.extract(model)
    return ProfiledPlan(method, model.problem.gpu_names, solution.gpus, solution.routing)


def _model(problem: ProfiledProblem, bounds: dict[str, int], customize) -> pyo.ConcreteModel:
    """The MILP of ``problem`` within ``bounds``: its objective and constraint blocks, then ``customize``."""
    model = model_lib.build(problem, gpu_bounds=bounds, objective=PROFILED_CONSTRAINTS.objective(problem.constraints))
    PROFILED_CONSTRAINTS.declare_all(model, problem.constraints)
    if customize is not None:
        customize(model)
    return model


def _solve(model: pyo.ConcreteModel, start: ProfiledPlan | None, time_limit_s: float | None, mip_gap: float | None, solver: str) -> SolveReport:
    if start is None:
        return solve(model, time_limit=time_limit_s, mip_gap=mip_gap, solver=solver)
    model_lib.warm_start(model, start)
    return solve(model, time_limit=time_limit_s, mip_gap=mip_gap, warm_start=True, solver=solver)


def _explain(problem: ProfiledProblem, customize, scale: int) -> str:
    """The reason in words: the Python constraints if the instance is feasible without them, else diagnose.py."""
    if customize is not None and _is_feasible(problem, None, scale):
        return "the constraints added in Python (customize) exclude every plan; without them the instance is feasible"
    return explain_infeasible(problem, lambda variant: _is_feasible(variant, customize, scale))


def _is_feasible(problem: ProfiledProblem, customize, scale: int) -> bool:
    """Whether ``problem`` has any plan (a feasibility solve: stop at the first incumbent)."""
    model = _model(problem, problem.gpu_upper_bounds(scale=scale), customize)
    report = solve(model, time_limit=FEASIBILITY_TIME_LIMIT_S, mip_gap=1.0, solver=problem.solver)
    return report.has_solution
