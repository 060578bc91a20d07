"""The practitioners' fleet baselines; each returns a sized :class:`Plan`.

* ``homogeneous``: one pool at the long window serving everything.
* ``pool_routing``: two pools split at B with gamma = 1 (no compression).  B
  is the instance's ``pool_routing_boundary_tokens`` or, if absent, the best
  boundary of the gamma = 1 sweep.
* ``retrofit``: the pool-routing fleet is built, then Compress-and-Route is
  switched on at ``retrofit_gamma`` (1.5 by default) and only the short pool is
  resized for the traffic it now receives; the long pool keeps its GPUs
  (FleetOpt's retrofit scenario); not applicable when the instance leaves
  compression off.

Pool sizes are the minimum instance counts meeting the utilisation cap and the
P99 TTFT SLO (fleet/plan_sizing.py).
"""

from __future__ import annotations

from optfleet.errors import InfeasibleError, NotApplicableError
from optfleet.problems.fleet.heuristics.sweep import best_plan, candidate_table
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.plan_sizing import size_plan
from optfleet.problems.fleet.problem import FleetProblem


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
        if two_pool.empty:
            raise InfeasibleError(f"no short-window candidate below the long window {problem.long_window_tokens} (CDF breakpoints "
                                  "with a KV slot, pools.short_window_candidates): pool routing needs two pools")
        return best_plan(problem, two_pool, "pool-routing")
    plan = Plan((PoolPlan("short", boundary, 0), PoolPlan("long", problem.long_window_tokens, 0)), method="pool-routing")
    return size_plan(problem, plan)


def retrofit(problem: FleetProblem, boundary_tokens: int | None = None) -> Plan:
    """Pool-routing fleet, then C&R at ``retrofit_gamma`` with only the short pool resized; not applicable when the
    instance leaves compression off (it would compress prompts the instance says cannot be)."""
    if not problem.compression_enabled:
        raise NotApplicableError("compression.enabled", False, "retrofit switches Compress-and-Route on at compression.retrofit_gamma; "
                                                               "this instance leaves compression off (set compression.enabled: true)")
    routed = pool_routing(problem, boundary_tokens)
    if len(routed.pools) < 2:
        raise InfeasibleError("the pool-routing baseline has no short pool to compress into")
    compressed = Plan(routed.pools, gamma=problem.retrofit_gamma, method="retrofit")
    resized = size_plan(problem, compressed)
    return resized.with_instances([resized.pools[0].instances, routed.pools[1].instances])
