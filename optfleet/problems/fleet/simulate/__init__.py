"""Discrete-event simulation of fleet plans: the independent check of the analytical evaluator."""

from optfleet.problems.fleet.simulate.run import MODES, SimulationResult, simulate_plan

__all__ = ["MODES", "SimulationResult", "simulate_plan"]
