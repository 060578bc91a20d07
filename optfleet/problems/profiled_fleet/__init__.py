"""The profiled-fleet kind (Mélange-style): capacity from measured max request rates per bucket.

Its registry entry is kind.py; ``optfleet.load`` prepares instances (problem.py).  ``solve_profiled`` (the
exact MILP of models/profiled.py, solve.py), ``single_type_fleet`` and ``greedy_cost_per_request``
(baselines.py, greedy.py) make plans; ``evaluate`` (evaluator.py) scores any plan.
"""

from optfleet.problems.profiled_fleet.evaluator import ProfiledEvaluation, evaluate
from optfleet.problems.profiled_fleet.greedy import greedy_cost_per_request, single_type_plan
from optfleet.problems.profiled_fleet.plan import ProfiledPlan, plan_from_dict
from optfleet.problems.profiled_fleet.problem import Bucket, GpuType, ProfiledProblem, prepare

__all__ = [
    "Bucket",
    "GpuType",
    "ProfiledEvaluation",
    "ProfiledPlan",
    "ProfiledProblem",
    "evaluate",
    "greedy_cost_per_request",
    "plan_from_dict",
    "prepare",
    "single_type_plan",
]
