"""The pd_fleet kind's declarative constraint kinds (instance ``constraints:``), registered in one place.

Each kind is one :class:`~optfleet.models.constraints.ConstraintKind` of :data:`PD_CONSTRAINTS`: its MILP block
(models/pd_fleet.py for power and fixed; budget, availability and gpu_mix are the profiled kind's formulations,
models/profiled_constraints.py, on the same ``m.n[g]`` and ``m.cost``), its check of a scored plan (below, used by the evaluator) and its description in words.  GPUs
are counted over both roles and every pool.  This module imports Pyomo (through the formulations): the evaluator
imports it only for an instance with constraints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optfleet.models import pd_fleet as formulation
from optfleet.models import profiled_constraints as shared
from optfleet.models.constraints import ConstraintKind, ConstraintRegistry, Verdict
from optfleet.problems.pd_fleet.evaluator import TOLERANCE

if TYPE_CHECKING:
    from optfleet.problems.pd_fleet.evaluator import PdEvaluation
    from optfleet.problems.pd_fleet.problem import PdProblem


def check_budget(problem: PdProblem, evaluation: PdEvaluation, c: Any) -> Verdict:
    cost = evaluation.cost_per_hour
    return Verdict(cost <= c.max_cost_per_hour * (1 + TOLERANCE), f"${cost:,.2f}/h")


def check_power(problem: PdProblem, evaluation: PdEvaluation, c: Any) -> Verdict:
    power = evaluation.power_w or 0.0
    return Verdict(power <= c.max_power_w * (1 + TOLERANCE), f"{power:,.0f} W")


def check_availability(problem: PdProblem, evaluation: PdEvaluation, c: Any) -> Verdict:
    n = evaluation.gpus.get(c.gpu, 0)
    return Verdict(n <= c.max_gpus, f"{n} {c.gpu} GPUs")


def check_gpu_mix(problem: PdProblem, evaluation: PdEvaluation, c: Any) -> Verdict:
    n, every = evaluation.gpus.get(c.gpu, 0), sum(evaluation.gpus.values())
    slack = TOLERANCE * max(every, 1)
    share = f"{100 * n / every:.1f} %" if every else "no GPUs"
    return Verdict(c.min_share * every - slack <= n <= c.max_share * every + slack, f"{n} of {every} GPUs are {c.gpu} ({share})")


def check_fixed(problem: PdProblem, evaluation: PdEvaluation, c: Any) -> Verdict:
    n = evaluation.gpus.get(c.gpu, 0)
    return Verdict(n == c.gpus, f"{n} {c.gpu} GPUs")


PD_CONSTRAINTS = ConstraintRegistry([
    ConstraintKind("budget", shared.formulate_budget, check_budget, describe=lambda c: f"<= ${c.max_cost_per_hour:g}/h"),
    ConstraintKind("power", formulation.formulate_power, check_power, describe=lambda c: f"<= {c.max_power_w:g} W"),
    ConstraintKind("availability", shared.formulate_availability, check_availability,
                   describe=lambda c: f"{c.gpu} <= {c.max_gpus} GPUs"),
    ConstraintKind("gpu_mix", shared.formulate_gpu_mix, check_gpu_mix, bound_proven=False,
                   describe=lambda c: f"{c.min_share:g} <= share of {c.gpu} <= {c.max_share:g}"),
    ConstraintKind("fixed", formulation.formulate_fixed, check_fixed, bound_proven=False, describe=lambda c: f"{c.gpu} = {c.gpus} GPUs"),
])


def describe_constraint(i: int, c: Any) -> str:
    """``"constraints[0] (power: <= 20000 W)"``: a constraint in words."""
    describe = PD_CONSTRAINTS[c.kind].describe
    return f"constraints[{i}] ({c.kind}: {describe(c) if describe is not None else c.kind})"
