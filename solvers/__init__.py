"""Solver drivers: HiGHS over Pyomo (warm start, time limit, status, bound, gap) and other installed Pyomo solvers."""

from optfleet.solvers.highs import solve
from optfleet.solvers.report import SolveReport

__all__ = ["SolveReport", "solve"]
