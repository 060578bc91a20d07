"""The fleet kind (FleetOpt): prepared problem, plans, routing, exact pool statistics, the evaluator, heuristics,
the MILP driver and the simulator.  Its registry entry is kind.py; load instances with ``optfleet.load``."""

from optfleet.problems.fleet.evaluator import FleetEvaluation, PoolMetrics, evaluate
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.problem import FleetProblem, prepare

__all__ = ["FleetEvaluation", "FleetProblem", "Plan", "PoolMetrics", "PoolPlan", "evaluate", "prepare"]
