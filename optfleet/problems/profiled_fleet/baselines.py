"""Baselines for profiled fleets: the best single-type fleet per type (exact), and the greedy heuristic.

Mélange (arXiv:2404.14527, section 6) measures its savings against fleets
of one GPU type.  Here each single-type fleet is the MILP restricted to that
type — the same model and constraints with the other types removed — so it
is solved exactly, user constraints included:

* constraints on the removed types hold trivially at 0 GPUs, except a
  ``gpu_mix`` minimum share > 0 on one of them; and a ``gpu_mix`` maximum
  share < 1 on the type itself fails at its 100 % share (either is
  reported as the reason);
* a type that cannot serve some bucket with demand has no single-type fleet.

The greedy heuristic lives in optfleet/problems/profiled_fleet/greedy.py (no Pyomo).
"""

from __future__ import annotations

from dataclasses import replace

from optfleet.errors import InfeasibleError
from optfleet.problems.profiled_fleet.constraints import describe_constraint
from optfleet.problems.profiled_fleet.evaluator import evaluate
from optfleet.problems.profiled_fleet.greedy import GREEDY, greedy_cost_per_request, require_single_type_serves, single_type_plan
from optfleet.problems.profiled_fleet.plan import ProfiledPlan
from optfleet.problems.profiled_fleet.problem import ProfiledProblem
from optfleet.problems.profiled_fleet.solve import ProfiledResult, solve_profiled

__all__ = ["GREEDY", "greedy_cost_per_request", "single_type_fleet", "single_type_plan", "single_type_problem"]


def single_type_problem(problem: ProfiledProblem, gpu: str) -> ProfiledProblem:
    """``problem`` with only type ``gpu`` and the constraints that concern it (InfeasibleError if none can exist)."""
    g = problem.gpu_index(gpu)
    require_single_type_serves(problem, g)
    kept = []
    for i, c in enumerate(problem.constraints):
        other = getattr(c, "gpu", gpu) != gpu
        if c.kind == "gpu_mix" and ((other and c.min_share > 0) or (not other and c.max_share < 1)):
            raise InfeasibleError(f"a fleet of {gpu} only breaks {describe_constraint(i, c)}")
        if not other:
            kept.append(c)
    return replace(problem, gpus=(problem.gpus[g],), constraints=tuple(kept))


def single_type_fleet(problem: ProfiledProblem, gpu: str, *, time_limit_s: float | None = None, mip_gap: float | None = None) -> ProfiledResult:
    """The cheapest fleet of type ``gpu`` alone (the restricted MILP), re-scored on the full problem."""
    restricted = single_type_problem(problem, gpu)
    result = solve_profiled(restricted, time_limit_s=time_limit_s, mip_gap=mip_gap, start=single_type_plan(restricted, gpu), method=f"milp:{gpu}")
    plan = _widen(problem, gpu, result.plan)
    return replace(result, plan=plan, evaluation=evaluate(problem, plan))


def _widen(problem: ProfiledProblem, gpu: str, plan: ProfiledPlan) -> ProfiledPlan:
    """A one-type plan in the full problem's type order (zeros for the other types)."""
    g = problem.gpu_index(gpu)
    n = len(problem.gpus)
    gpus = tuple(plan.gpus[0] if i == g else 0 for i in range(n))
    routing = tuple(tuple(row[0] if i == g else 0.0 for i in range(n)) for row in plan.routing)
    return ProfiledPlan(plan.method, problem.gpu_names, gpus, routing)
