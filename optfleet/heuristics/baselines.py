"""The practitioners' fleet baselines; each returns a sized :class:`Plan`.

* ``homogeneous``: one pool at the long window serving everything.
* ``pool_routing``: two pools split at B with gamma = 1 (no compression).  B
  is the instance's ``pool_routing_boundary_tokens`` or, if absent, the best
  boundary of the gamma = 1 sweep.
* ``retrofit``: the pool-routing fleet is built, then Compress-and-Route is
  switched on at ``retrofit_gamma`` (1.5 by default) and only the short pool is
  resized for the traffic it now receives; the long pool keeps its GPUs
  (FleetOpt's retrofit scenario).

Pool sizes are the minimum GPU counts meeting the utilisation cap and the
P99 TTFT SLO (pool_stats.size_pools), read from the evaluator.
"""

from __future__ import annotations

from optfleet.errors import InfeasibleError
from optfleet.fleet.evaluator import FleetEvaluation, evaluate
from optfleet.fleet.plan import Plan, PoolPlan
from optfleet.fleet.problem import FleetProblem
from optfleet.heuristics.sweep import best_plan, candidate_table


def size_plan(problem: FleetProblem, plan: Plan) -> Plan:
    """``plan`` with every pool at its minimum feasible GPU count; InfeasibleError says which pool cannot be."""
    evaluation = evaluate(problem, plan)
    for pool in evaluation.pools:
        if pool.min_gpus < 0:
            raise InfeasibleError(infeasible_pool_message(evaluation, pool.name))
    return plan.with_gpus([p.min_gpus for p in evaluation.pools])


def infeasible_pool_message(evaluation: FleetEvaluation, pool_name: str) -> str:
    """``infeasible: pool <name> needs P99 prefill X ms + one iteration Y ms > SLO Z ms``."""
    pool = next(p for p in evaluation.pools if p.name == pool_name)
    return (
        f"infeasible: pool {pool.name} (window {pool.window_tokens} tokens) needs P99 prefill "
        f"{pool.prefill_p99_ms:.1f} ms + one iteration {pool.first_iteration_ms:.1f} ms "
        f"> SLO {evaluation.ttft_slo_ms:g} ms, before any queueing"
    )


def homogeneous(problem: FleetProblem) -> Plan:
    """One pool at the long window."""
    plan = Plan((PoolPlan("long", problem.long_window_tokens, 0),), method="homogeneous")
    return size_plan(problem, plan)


def pool_routing(problem: FleetProblem, boundary_tokens: int | None = None) -> Plan:
    """Two pools at boundary B, gamma = 1; B defaults to the instance's or the best of the gamma = 1 sweep."""
    boundary = boundary_tokens or problem.pool_routing_boundary_tokens
    if boundary is None:
        table = candidate_table(problem, gammas=(1.0,))
        two_pool = table[table["B"] < problem.long_window_tokens]
        return best_plan(problem, two_pool, "pool-routing")
    plan = Plan((PoolPlan("short", boundary, 0), PoolPlan("long", problem.long_window_tokens, 0)), method="pool-routing")
    return size_plan(problem, plan)


def retrofit(problem: FleetProblem, boundary_tokens: int | None = None) -> Plan:
    """Pool-routing fleet, then C&R at ``retrofit_gamma`` with only the short pool resized."""
    routed = pool_routing(problem, boundary_tokens)
    if len(routed.pools) < 2:
        raise InfeasibleError("retrofit: the pool-routing baseline has no short pool to compress into")
    compressed = Plan(routed.pools, gamma=problem.retrofit_gamma, method="retrofit")
    resized = size_plan(problem, compressed)
    return resized.with_gpus([resized.pools[0].gpus, routed.pools[1].gpus])
