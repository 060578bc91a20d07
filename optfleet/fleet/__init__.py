"""The fleet problem: prepared instance data, plans, routing, exact pool statistics, the evaluator."""

from __future__ import annotations

from pathlib import Path

from optfleet.fleet.evaluator import FleetEvaluation, PoolMetrics, evaluate
from optfleet.fleet.plan import Plan, PoolPlan
from optfleet.fleet.problem import FleetProblem, prepare
from optfleet.instance import load_instance


def load_problem(path: str | Path, preset: str | None = None) -> FleetProblem:
    """Load, validate and prepare a ``kind: fleet`` instance file (``preset`` overrides the file's)."""
    return prepare(load_instance(path, preset=preset))


__all__ = ["FleetEvaluation", "FleetProblem", "Plan", "PoolMetrics", "PoolPlan", "evaluate", "load_problem", "prepare"]
