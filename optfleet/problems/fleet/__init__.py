"""The fleet kind (FleetOpt): prepared problem, plans, routing, exact pool statistics, the evaluator, heuristics,
the MILP driver and the simulator.  Its registry entry is kind.py; load instances with ``optfleet.load``.

The names below are imported on first use, so importing one module of the package (its schema, say) does
not import the evaluator and its numerical stack.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "FleetEvaluation": "optfleet.problems.fleet.evaluator",
    "PoolMetrics": "optfleet.problems.fleet.evaluator",
    "evaluate": "optfleet.problems.fleet.evaluator",
    "Plan": "optfleet.problems.fleet.plan",
    "PoolPlan": "optfleet.problems.fleet.plan",
    "FleetProblem": "optfleet.problems.fleet.problem",
    "prepare": "optfleet.problems.fleet.problem",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'optfleet.problems.fleet' has no attribute {name!r}")
