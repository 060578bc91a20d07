"""User constraints on the profiled-fleet MILP: the formulation and MIP start of each declarative kind.

Each ``formulate_<kind>(m, block, i, spec)`` fills the Block ``m.user_<kind>_<i>``
of the instance's ``i``-th constraint on a model of models/profiled.py (the
contract: models/constraints.py); the kinds are registered, with their plan
checks, in optfleet/problems/profiled_fleet/constraints.py.

    availability   cap: n[g] <= max_gpus
    budget         cap: cost <= max_cost_per_hour   (a model with a budget has the objective
                   ``served``, models/profiled.py: max served_rps)
    gpu_mix        min_share: n[g] >= min_share sum_h n[h],  max_share: n[g] <= max_share sum_h n[h]
                   (trivial sides omitted)
    max_types      link[g]: n[g] <= N_g used[g],  count: sum_g used[g] <= count
                   (used binary, N_g the bound on n[g])
    node_multiple  link: n[g] = gpus_per_node nodes[g],  nodes integer
"""

from __future__ import annotations

from typing import Any

import pyomo.environ as pyo


def formulate_availability(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``cap: n[g] <= max_gpus``."""
    block.cap = pyo.Constraint(expr=m.n[spec.gpu] <= spec.max_gpus)


def formulate_budget(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``cap: cost <= max_cost_per_hour`` (the objective, ``served``, is chosen when the model is built)."""
    block.cap = pyo.Constraint(expr=m.cost <= spec.max_cost_per_hour)


def formulate_gpu_mix(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``min_share sum_h n[h] <= n[g] <= max_share sum_h n[h]`` (trivial sides omitted)."""
    total = sum(m.n[h] for h in m.G)
    if spec.min_share > 0.0:
        block.min_share = pyo.Constraint(expr=m.n[spec.gpu] >= spec.min_share * total)
    if spec.max_share < 1.0:
        block.max_share = pyo.Constraint(expr=m.n[spec.gpu] <= spec.max_share * total)


def formulate_max_types(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``link[g]: n[g] <= N_g used[g]`` and ``count: sum_g used[g] <= count`` (``N_g`` = the bound on ``n[g]``)."""
    block.used = pyo.Var(m.G, domain=pyo.Binary)
    block.link = pyo.Constraint(m.G, rule=lambda _, g: m.n[g] <= m.gpu_bounds[g] * block.used[g])
    block.count = pyo.Constraint(expr=sum(block.used[g] for g in m.G) <= spec.count)


def start_max_types(m: pyo.ConcreteModel, block: pyo.Block, spec: Any) -> None:
    """A type is used when the plan gives it GPUs."""
    for g in m.G:
        block.used[g].set_value(1 if pyo.value(m.n[g]) > 0.5 else 0)


def formulate_node_multiple(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``link: n[g] = gpus_per_node nodes``, ``nodes`` integer."""
    block.nodes = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(0, m.gpu_bounds[spec.gpu] // spec.gpus_per_node))
    block.link = pyo.Constraint(expr=m.n[spec.gpu] == spec.gpus_per_node * block.nodes)


def start_node_multiple(m: pyo.ConcreteModel, block: pyo.Block, spec: Any) -> None:
    """``nodes``: the plan's GPUs of the type over the node size (rounded: a plan off the multiple breaks ``link``)."""
    block.nodes.set_value(round(pyo.value(m.n[spec.gpu]) / spec.gpus_per_node))
