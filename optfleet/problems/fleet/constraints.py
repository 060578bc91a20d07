"""The fleet's declarative constraint kinds (instance ``constraints:``), registered in one place.

Each kind is one :class:`~optfleet.models.constraints.ConstraintKind` of
:data:`FLEET_CONSTRAINTS`: its MILP block, MIP start and GPU-count bound
(models/fleet_constraints.py) and its plan check (below), which states for any
plan, heuristic or exact, whether it meets the constraint in the MILP's own
terms: instance counts are GPUs (``tp x instances``), shares are of all GPUs, and a
pool counts towards ``max_pools`` when it has at least one GPU.  A ``budget``
makes the MILP maximise the served share (the objective ``served``).

This module imports Pyomo (through the formulations): the light plan check
(constraint_check.py) imports it only for an instance with constraints.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np

from optfleet.hardware import get_gpu
from optfleet.models import fleet_constraints as formulation
from optfleet.models.constraints import SERVED, ConstraintKind, ConstraintRegistry, Verdict
from optfleet.models.fleet import service_gpu_bounds

if TYPE_CHECKING:
    from optfleet.problems.fleet.evaluator import FleetEvaluation
    from optfleet.problems.fleet.milp_data import FleetMilpData
    from optfleet.problems.fleet.problem import FleetProblem

SLACK = 1e-9  # relative slack of the checks: the evaluator's cost and shares against the MILP's rows
# The order the kinds' bounds apply in: widen (node multiples, then shares), pin fixed counts, then cap.
BOUND_ORDER = ("node_multiple", "gpu_mix", "fixed", "budget", "availability")


def _gpus_by_type(problem: FleetProblem, evaluation: FleetEvaluation) -> Counter[str]:
    """GPUs (``tp x instances``) of each GPU type in the plan."""
    gpus: Counter[str] = Counter()
    for pool in evaluation.plan.pools:
        config = problem.configuration(pool.gpu)
        gpus[config.gpu_name] += config.tp * pool.instances
    return gpus


def check_budget(problem: FleetProblem, evaluation: FleetEvaluation, spec: Any) -> Verdict:
    cost = evaluation.cost_per_hour
    holds = cost <= spec.max_cost_per_hour * (1 + SLACK)
    return Verdict(holds, f"${cost:,.2f}/h {'<=' if holds else '>'} ${spec.max_cost_per_hour:,.2f}/h")


def check_availability(problem: FleetProblem, evaluation: FleetEvaluation, spec: Any) -> Verdict:
    name = get_gpu(spec.gpu).name
    have = _gpus_by_type(problem, evaluation)[name]
    holds = have <= spec.max_gpus
    return Verdict(holds, f"{have} {name} GPUs {'<=' if holds else '>'} {spec.max_gpus}")


def check_gpu_mix(problem: FleetProblem, evaluation: FleetEvaluation, spec: Any) -> Verdict:
    gpus = _gpus_by_type(problem, evaluation)
    name = get_gpu(spec.gpu).name
    total = sum(gpus.values())
    share = gpus[name] / total if total else 0.0
    holds = spec.min_share - SLACK <= share <= spec.max_share + SLACK
    return Verdict(holds, f"{name} share {share:.3f} {'inside' if holds else 'outside'} [{spec.min_share}, {spec.max_share}]")


def check_max_pools(problem: FleetProblem, evaluation: FleetEvaluation, spec: Any) -> Verdict:
    used = sum(1 for p in evaluation.plan.pools if p.instances > 0)
    holds = used <= spec.count
    return Verdict(holds, f"{used} pools {'<=' if holds else '>'} {spec.count}")


def check_max_types(problem: FleetProblem, evaluation: FleetEvaluation, spec: Any) -> Verdict:
    types = sum(1 for n in _gpus_by_type(problem, evaluation).values() if n > 0)
    holds = types <= spec.count
    return Verdict(holds, f"{types} GPU types {'<=' if holds else '>'} {spec.count}")


def check_node_multiple(problem: FleetProblem, evaluation: FleetEvaluation, spec: Any) -> Verdict:
    gpus = _gpus_by_type(problem, evaluation)
    names = [get_gpu(spec.gpu).name] if spec.gpu is not None else list(gpus)
    off = [f"{gpus[name]} {name} GPUs is not a multiple of {spec.gpus_per_node}" for name in names if gpus[name] % spec.gpus_per_node]
    return Verdict(not off, "; ".join(off) or f"whole nodes of {spec.gpus_per_node}")


def check_fixed(problem: FleetProblem, evaluation: FleetEvaluation, spec: Any) -> Verdict:
    label = problem.configuration_label(spec.gpu, spec.tp)
    instances = {(problem.configuration(p.gpu).label, p.window_tokens): p.instances for p in evaluation.plan.pools}
    have = instances.get((label, spec.window_tokens), 0)
    return Verdict(have == spec.instances, f"{have} instances at {label} w{spec.window_tokens}, pinned to {spec.instances}")


FLEET_CONSTRAINTS = ConstraintRegistry([
    ConstraintKind("budget", formulation.formulate_budget, check_budget, bound=formulation.bound_budget, objective=SERVED),
    ConstraintKind("availability", formulation.formulate_availability, check_availability, bound=formulation.bound_availability),
    ConstraintKind("gpu_mix", formulation.formulate_gpu_mix, check_gpu_mix, bound=formulation.bound_gpu_mix, bound_proven=False),
    ConstraintKind("max_pools", formulation.formulate_max_pools, check_max_pools),
    ConstraintKind("max_types", formulation.formulate_max_types, check_max_types, start=formulation.start_max_types),
    ConstraintKind("node_multiple", formulation.formulate_node_multiple, check_node_multiple, start=formulation.start_node_multiple,
                   bound=formulation.bound_node_multiple),
    ConstraintKind("fixed", formulation.formulate_fixed, check_fixed, bound=formulation.bound_fixed),
])


def gpu_bounds(data: FleetMilpData, specs: tuple) -> np.ndarray:
    """Upper bounds on each pool option's instances ``n[j]`` (the model's ``gpu_bound``) under the constraints
    ``specs``: from :func:`optfleet.models.fleet.service_gpu_bounds` (any routing's load), each kind's
    ``bound`` (models/fleet_constraints.py, with its proof) in ``BOUND_ORDER``.  Proven to keep an optimal
    plan under every kind whose ``bound_proven`` holds (all but ``gpu_mix``)."""
    bounds = service_gpu_bounds(data).astype(np.int64)
    for name in BOUND_ORDER:
        bounds = FLEET_CONSTRAINTS[name].bound(data, bounds, [(i, spec) for i, spec in enumerate(specs) if spec.kind == name])
    return bounds
