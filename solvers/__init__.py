"""Solver drivers (HiGHS over Pyomo): options, warm start, status, bound, gap. Filled by the MILP issues."""
