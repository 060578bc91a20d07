"""The greedy heuristic for profiled fleets (plain Python; no Pyomo).

Mélange (arXiv:2404.14527) compares its ILP against single-GPU-type fleets
only (optfleet/problems/profiled_fleet/baselines.py solves those exactly); the paper has no
greedy algorithm.  The greedy here is the rule its section 4 analysis suggests to a
practitioner — send every request size to the GPU with the best cost
efficiency for it — and is labelled as such, not as Mélange's method:

    greedy-cost-per-request:  g*(b) = argmin_g  p_g k_g / (u T[g,b])   ($/h per req/s of bucket b)
                              n_g   = fewest GPUs carrying sum_{b: g*(b) = g} L[b,g]  at cap u,
                                      in whole instances and nodes

Whole buckets go to one type, so the plan is valid for any splitting rule.
It ignores availability, budget, mix and type-count constraints; the
evaluator reports any it breaks.
"""

from __future__ import annotations

import math

from optfleet.errors import InfeasibleError
from optfleet.problems.profiled_fleet.plan import ProfiledPlan
from optfleet.problems.profiled_fleet.problem import ProfiledProblem, require_servable

GREEDY = "greedy-cost-per-request"


def cost_per_request_rate(problem: ProfiledProblem, bucket: int, gpu: int) -> float:
    """``p_g k_g / (u T[g,b])``: $/hour per req/s of bucket b served on type g (inf if g cannot serve b)."""
    g = problem.gpus[gpu]
    if not g.can_serve(bucket):
        return math.inf
    return g.cost_per_instance_hour / (problem.max_utilisation * g.max_rps[bucket])


def greedy_cost_per_request(problem: ProfiledProblem) -> ProfiledPlan:
    """Every bucket wholly to its cheapest type per req/s, then each type rounded up to whole instances/nodes."""
    require_servable(problem)
    types = range(len(problem.gpus))
    load = [0.0 for _ in types]
    routing = [tuple(0.0 for _ in types) for _ in problem.buckets]
    for b in problem.demand_buckets:
        best = min(types, key=lambda g: (cost_per_request_rate(problem, b.index, g), g))
        load[best] += problem.instance_load(b.index, best)
        routing[b.index] = tuple(1.0 if g == best else 0.0 for g in types)
    gpus = tuple(problem.gpus_to_carry(load[g], g) if load[g] > 0 else 0 for g in types)
    return ProfiledPlan(GREEDY, problem.gpu_names, gpus, tuple(routing))


def single_type_plan(problem: ProfiledProblem, gpu: str) -> ProfiledPlan:
    """Every bucket to type ``gpu``: ``n = `` the fewest GPUs carrying ``sum_b L[b,g]`` at cap u (closed form).

    This is the single-type optimum when no user constraint binds; with
    constraints, optfleet/problems/profiled_fleet/baselines.py solves the restricted MILP.
    Requires ``gpu`` to serve every bucket with demand.
    """
    g = problem.gpu_index(gpu)
    require_single_type_serves(problem, g)
    load = sum(problem.instance_load(b.index, g) for b in problem.demand_buckets)
    gpus = tuple(problem.gpus_to_carry(load, g) if i == g and load > 0 else 0 for i in range(len(problem.gpus)))
    routing = tuple(tuple(1.0 if i == g else 0.0 for i in range(len(problem.gpus))) for _ in problem.buckets)
    return ProfiledPlan(f"milp:{gpu}", problem.gpu_names, gpus, routing)


def require_single_type_serves(problem: ProfiledProblem, gpu: int) -> None:
    """InfeasibleError naming the first bucket with demand that type ``gpu`` cannot serve."""
    g = problem.gpus[gpu]
    for b in problem.demand_buckets:
        if not g.can_serve(b.index):
            raise InfeasibleError(f"{g.name} alone cannot serve bucket {b.label} ({b.rate_rps:g} req/s; its max_rps there is 0)")
