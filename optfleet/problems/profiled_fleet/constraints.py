"""The profiled fleet's declarative constraint kinds (instance ``constraints:``), registered in one place.

Each kind is one :class:`~optfleet.models.constraints.ConstraintKind` of
:data:`PROFILED_CONSTRAINTS`: its MILP block and MIP start
(models/profiled_constraints.py), its check of a scored plan (below, used by
the evaluator) and its description in words (messages and reports).  A
``budget`` makes the MILP maximise the served rate (the objective ``served``).

This module imports Pyomo (through the formulations): the evaluator imports it
only for an instance with constraints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from optfleet.models import profiled_constraints as formulation
from optfleet.models.constraints import SERVED, ConstraintKind, ConstraintRegistry, Verdict
from optfleet.problems.profiled_fleet.evaluator import LOAD_TOLERANCE

if TYPE_CHECKING:
    from optfleet.problems.profiled_fleet.evaluator import ProfiledEvaluation
    from optfleet.problems.profiled_fleet.problem import ProfiledProblem


def check_availability(problem: ProfiledProblem, evaluation: ProfiledEvaluation, c: Any) -> Verdict:
    n = evaluation.plan.gpus_of(c.gpu)
    return Verdict(n <= c.max_gpus, f"{n} {c.gpu} GPUs")


def check_budget(problem: ProfiledProblem, evaluation: ProfiledEvaluation, c: Any) -> Verdict:
    cost = evaluation.cost_per_hour
    return Verdict(cost <= c.max_cost_per_hour * (1 + LOAD_TOLERANCE), f"${cost:,.2f}/h")


def check_gpu_mix(problem: ProfiledProblem, evaluation: ProfiledEvaluation, c: Any) -> Verdict:
    plan = evaluation.plan
    n, total = plan.gpus_of(c.gpu), plan.total_gpus
    slack = LOAD_TOLERANCE * max(total, 1)
    share = f"{100 * n / total:.1f} %" if total else "no GPUs"
    return Verdict(c.min_share * total - slack <= n <= c.max_share * total + slack, f"{n} of {total} GPUs are {c.gpu} ({share})")


def check_max_types(problem: ProfiledProblem, evaluation: ProfiledEvaluation, c: Any) -> Verdict:
    plan = evaluation.plan
    used = [name for name, n in zip(plan.gpu_names, plan.gpus, strict=True) if n > 0]
    return Verdict(len(used) <= c.count, f"{len(used)} type(s) used ({', '.join(used) or 'none'})")


def check_node_multiple(problem: ProfiledProblem, evaluation: ProfiledEvaluation, c: Any) -> Verdict:
    n = evaluation.plan.gpus_of(c.gpu)
    return Verdict(n % c.gpus_per_node == 0, f"{n} {c.gpu} GPUs")


PROFILED_CONSTRAINTS = ConstraintRegistry([
    ConstraintKind("availability", formulation.formulate_availability, check_availability,
                   describe=lambda c: f"{c.gpu} <= {c.max_gpus} GPUs"),
    ConstraintKind("budget", formulation.formulate_budget, check_budget, objective=SERVED,
                   describe=lambda c: f"<= ${c.max_cost_per_hour:g}/h, {c.admission.replace('_', ' ')} admission"),
    ConstraintKind("gpu_mix", formulation.formulate_gpu_mix, check_gpu_mix, bound_proven=False,
                   describe=lambda c: f"{c.min_share:g} <= share of {c.gpu} <= {c.max_share:g}"),
    ConstraintKind("max_types", formulation.formulate_max_types, check_max_types, start=formulation.start_max_types,
                   describe=lambda c: f"at most {c.count} GPU type{'s' if c.count != 1 else ''}"),
    ConstraintKind("node_multiple", formulation.formulate_node_multiple, check_node_multiple, start=formulation.start_node_multiple,
                   describe=lambda c: f"{c.gpu} in whole nodes of {c.gpus_per_node}"),
])


def describe_constraint(i: int, c: Any) -> str:
    """``"constraints[0] (availability: A100-80GB <= 8 GPUs)"``: a constraint in words."""
    describe = PROFILED_CONSTRAINTS[c.kind].describe
    return f"constraints[{i}] ({c.kind}: {describe(c) if describe is not None else c.kind})"
