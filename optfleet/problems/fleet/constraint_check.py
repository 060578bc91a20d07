"""Check a scored fleet plan against the instance's declarative ``constraints:``.

The MILP enforces these constraints; heuristics do not know them.  Each
kind's check is registered with its MILP block (optfleet/problems/fleet/constraints.py),
so a plan is judged in the model's own terms.
"""

from __future__ import annotations

from optfleet.problems.fleet.evaluator import FleetEvaluation
from optfleet.problems.fleet.problem import FleetProblem


def constraint_violations(problem: FleetProblem, evaluation: FleetEvaluation) -> list[str]:
    """``["constraints[0] (availability): 6152 H100-SXM GPUs > 16", ...]``; empty when the plan meets them all."""
    if not problem.constraints:
        return []
    from optfleet.problems.fleet.constraints import FLEET_CONSTRAINTS  # Pyomo (the formulations) only when there are constraints

    verdicts = FLEET_CONSTRAINTS.verdicts(problem, evaluation, problem.constraints)
    return [f"constraints[{i}] ({spec.kind}): {verdict.detail}" for i, spec, verdict in verdicts if not verdict.holds]
