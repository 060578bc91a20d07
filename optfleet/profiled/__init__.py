"""Profiled-throughput fleets (Mélange-style): capacity from measured max request rates per bucket.

``load_profiled(path)`` -> :class:`ProfiledProblem`; ``solve_profiled`` (the
exact MILP of models/profiled.py), ``single_type_fleet`` and
``greedy_cost_per_request`` (baselines) -> plans; ``evaluate`` scores any
plan; ``gap_rows`` compares every method in one table.
"""

from optfleet.profiled.plan import ProfiledPlan, plan_from_dict
from optfleet.profiled.problem import Bucket, GpuType, ProfiledProblem, load_profiled, prepare_profiled
from optfleet.profiled.evaluator import ProfiledEvaluation, evaluate
from optfleet.profiled.greedy import greedy_cost_per_request, single_type_plan
from optfleet.profiled.solve import ProfiledResult, solve_profiled
from optfleet.profiled.baselines import single_type_fleet
from optfleet.profiled.gap import gap_rows, run_methods, savings_vs_best_single

__all__ = [
    "Bucket",
    "GpuType",
    "ProfiledEvaluation",
    "ProfiledPlan",
    "ProfiledProblem",
    "ProfiledResult",
    "evaluate",
    "gap_rows",
    "greedy_cost_per_request",
    "load_profiled",
    "plan_from_dict",
    "prepare_profiled",
    "run_methods",
    "savings_vs_best_single",
    "single_type_fleet",
    "single_type_plan",
    "solve_profiled",
]
