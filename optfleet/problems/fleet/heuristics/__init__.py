"""Fleet heuristics from the literature; every one returns a Plan scored by the evaluator."""

from collections.abc import Callable

from optfleet.problems.fleet.heuristics.baselines import homogeneous, pool_routing, retrofit
from optfleet.problems.fleet.heuristics.sweep import sweep
from optfleet.problems.fleet.method_names import HEURISTICS
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.plan_sizing import size_plan
from optfleet.problems.fleet.problem import FleetProblem

FLEET_METHODS: dict[str, Callable[[FleetProblem], Plan]] = dict(zip(
    HEURISTICS, (homogeneous, pool_routing, retrofit, lambda problem: sweep(problem).plan), strict=True,
))

__all__ = ["FLEET_METHODS", "HEURISTICS", "homogeneous", "pool_routing", "retrofit", "size_plan", "sweep"]
