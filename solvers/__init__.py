"""Solver drivers: HiGHS over Pyomo (warm start, time limit, status, bound, gap) and other installed Pyomo solvers.

``solve`` is imported on first use (it brings Pyomo, highspy and scipy), so code that only reads a
``SolveReport`` stays light.
"""

from typing import Any

from optfleet.solvers.report import SolveReport

__all__ = ["SolveReport", "solve"]


def __getattr__(name: str) -> Any:
    if name == "solve":
        from optfleet.solvers.highs import solve

        return solve
    raise AttributeError(f"module 'optfleet.solvers' has no attribute {name!r}")
