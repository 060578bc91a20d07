"""User constraints on the fleet MILP: the formulation, MIP start and GPU-count bound of each declarative kind.

Each ``formulate_<kind>(m, block, i, spec)`` fills the Block ``m.user_<kind>_<i>``
of the instance's ``i``-th constraint (the contract: models/constraints.py);
the kinds are registered, with their plan checks, in
optfleet/problems/fleet/constraints.py.  instance counts are GPUs, ``g_j = tp_j n[j]``
(an instance of TP degree t is t GPUs).

* ``budget``: ``cap: cost <= max_cost_per_hour``; a model with a budget has
  the objective ``served`` (models/fleet_objectives.py): every class admitted
  at the same share, maximised, ties broken by cost.
* ``availability``: ``cap: sum_{j of type g} g_j <= max_gpus``.
* ``gpu_mix``: ``min_share: sum_{j of type g} g_j >= min_share sum_j g_j``,
  ``max_share: sum_{j of type g} g_j <= max_share sum_j g_j``.
* ``max_pools``: ``count: sum_j open[j] <= count``.
* ``max_types``: a binary ``used[g]`` per GPU type, ``link[j]: open[j] <= used[type(j)]``,
  ``count: sum_g used[g] <= count``.
* ``node_multiple``: ``link[g]: sum_{j of type g} g_j = gpus_per_node nodes[g]``, ``nodes[g]`` integer
  (for one type, or for each type when ``gpu`` is omitted).
* ``fixed``: ``gpus: n[j] = gpus`` (and ``open: open[j] = 1`` if gpus > 0) for the pool with that window
  (and that GPU configuration, default the ``hardware`` block's).

Bounds on instance counts.  ``bound_<kind>(data, bounds, specs)`` turns the bounds
``bounds`` on each pool option's instances ``n[j]`` (the model's ``gpu_bound``)
into bounds that keep an optimal plan under the constraints ``specs`` of that
kind (``(i, spec)`` pairs); optfleet/problems/fleet/constraints.py applies
them from :func:`optfleet.models.fleet.service_gpu_bounds` ``s_j`` (any
routing's load) on: widen for node multiples, then for GPU-mix shares, pin
the fixed counts, then cap at budgets and availability.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyomo.environ as pyo

from optfleet.errors import InputError
from optfleet.hardware import get_gpu

if TYPE_CHECKING:
    from optfleet.problems.fleet.milp_data import FleetMilpData

LARGEST_BOUND = 2**53  # instances: the largest count a double (HiGHS's bounds) holds exactly


def _pools_of_gpu(m: pyo.ConcreteModel, gpu: str, field: str) -> list[int]:
    """Pool options on GPU type ``gpu`` (any TP degree).

    Empty for a type of the instance's catalog that this model leaves out (a
    single-type restriction); an error naming the types offered otherwise.
    """
    wanted = get_gpu(gpu, field).name
    pools = [j for j, o in enumerate(m.data.pools) if o.gpu_type == wanted]
    if not pools and wanted not in m.data.problem.catalog_types:
        offered = sorted({o.gpu_type for o in m.data.pools})
        raise InputError(field, gpu, f"no pool option uses this GPU type; the options use {', '.join(offered)}")
    return pools


def _gpus(m: pyo.ConcreteModel, pools: list[int] | range) -> Any:
    """GPUs (not instances) in ``pools``: ``sum tp_j n[j]``."""
    return sum(m.data.pools[j].tp * m.n[j] for j in pools)


def _pools_by_type(m: pyo.ConcreteModel, spec: Any, i: int) -> dict[str, list[int]]:
    """The pool options of each GPU type a ``node_multiple`` constraint covers (``spec.gpu``'s, or every type's)."""
    if spec.gpu is not None:
        pools = _pools_of_gpu(m, spec.gpu, f"constraints[{i}].gpu")
        return {get_gpu(spec.gpu).name: pools} if pools else {}
    groups: dict[str, list[int]] = {}
    for j, o in enumerate(m.data.pools):
        groups.setdefault(o.gpu_type, []).append(j)
    return groups


def formulate_budget(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``cap: cost <= max_cost_per_hour`` (the objective, ``served``, is chosen when the model is built)."""
    block.cap = pyo.Constraint(expr=m.cost <= spec.max_cost_per_hour)


def formulate_availability(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``cap: sum_{j of type g} g_j <= max_gpus`` (nothing when the model has no pool of type g)."""
    pools = _pools_of_gpu(m, spec.gpu, f"constraints[{i}].gpu")
    if pools:
        block.cap = pyo.Constraint(expr=_gpus(m, pools) <= spec.max_gpus)


def formulate_gpu_mix(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``min_share sum_j g_j <= sum_{j of type g} g_j <= max_share sum_j g_j``."""
    if spec.min_share > spec.max_share:
        raise InputError(f"constraints[{i}].min_share", spec.min_share, f"exceeds max_share {spec.max_share}")
    pools = _pools_of_gpu(m, spec.gpu, f"constraints[{i}].gpu")
    total = _gpus(m, range(len(m.data.pools)))
    mine = _gpus(m, pools)
    block.min_share = pyo.Constraint(expr=mine >= spec.min_share * total)
    block.max_share = pyo.Constraint(expr=mine <= spec.max_share * total)


def formulate_max_pools(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``count: sum_j open[j] <= count``."""
    block.count = pyo.Constraint(expr=sum(m.open[j] for j in range(len(m.data.pools))) <= spec.count)


def formulate_max_types(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``used[g]`` binary, ``link[j]: open[j] <= used[type(j)]``, ``count: sum_g used[g] <= count``."""
    types = sorted({o.gpu_type for o in m.data.pools})
    block.used = pyo.Var(types, domain=pyo.Binary)
    block.link = pyo.Constraint(range(len(m.data.pools)), rule=lambda _, j: m.open[j] <= block.used[m.data.pools[j].gpu_type])
    block.count = pyo.Constraint(expr=sum(block.used[g] for g in types) <= spec.count)


def start_max_types(m: pyo.ConcreteModel, block: pyo.Block, spec: Any) -> None:
    """A type is used when one of its pools is open."""
    for g in block.used:
        block.used[g].set_value(int(any(pyo.value(m.open[j]) > 0.5 for j, o in enumerate(m.data.pools) if o.gpu_type == g)))


def formulate_node_multiple(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``nodes[g]`` integer, ``link[g]: sum_{j of type g} g_j = gpus_per_node nodes[g]``."""
    groups = _pools_by_type(m, spec, i)
    block.nodes = pyo.Var(sorted(groups), domain=pyo.NonNegativeIntegers)
    block.link = pyo.Constraint(sorted(groups), rule=lambda _, g: _gpus(m, groups[g]) == spec.gpus_per_node * block.nodes[g])


def start_node_multiple(m: pyo.ConcreteModel, block: pyo.Block, spec: Any) -> None:
    """``nodes[g]``: the plan's GPUs of type g over the node size (rounded: a plan off the multiple breaks ``link``)."""
    for g in block.nodes:
        gpus = sum(o.tp * pyo.value(m.n[j]) for j, o in enumerate(m.data.pools) if o.gpu_type == g)
        block.nodes[g].set_value(round(gpus / spec.gpus_per_node))


def fixed_option(data: FleetMilpData, i: int, spec: Any) -> int:
    """The pool option a ``fixed`` constraint pins (an error naming the field when there is none)."""
    label = data.problem.configuration_label(spec.gpu, spec.tp, f"constraints[{i}].gpu")
    keys = [(o.gpu, o.window_tokens) for o in data.pools]
    if (label, spec.window_tokens) not in keys:
        offered = sorted(w for g, w in keys if g == label)
        raise InputError(f"constraints[{i}].window_tokens", spec.window_tokens, f"is not a pool option on {label}; its windows: {offered}")
    return keys.index((label, spec.window_tokens))


def formulate_fixed(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``gpus: n[j] = gpus``; ``open: open[j] = 1`` when ``gpus > 0``."""
    j = fixed_option(m.data, i, spec)
    block.instances = pyo.Constraint(expr=m.n[j] == spec.instances)
    if spec.instances > 0:
        block.open = pyo.Constraint(expr=m.open[j] == 1)


# ---------------------------------------------------------------- bounds on n[j]


def bound_node_multiple(data: FleetMilpData, bounds: np.ndarray, specs: list[tuple[int, Any]]) -> np.ndarray:
    """``s_j + L_j - 1`` with ``L_j`` the lcm, over the node multiples on j's type (``G`` GPUs per node), of
    ``G / gcd(tp_j, G)``.

    Proof: take any feasible plan and, in every pool j that is not fixed and has at least ``s_j + L_j``
    instances, remove ``L_j`` instances until it has fewer.  Each step removes ``tp_j L_j`` GPUs, a multiple
    of every ``G``, so node multiples still hold; the pool still has ``s_j`` instances or more, so its cap
    and wait rows and ``open[j]`` are unchanged; cost and instance counts only fall, so budgets and availability
    still hold, and the plan is no worse.  Hence some optimal plan lies within the bounds, and an instance
    is infeasible only if no plan within them exists.
    """
    steps = np.ones(len(data.pools), dtype=np.int64)
    for _, spec in specs:
        wanted = None if spec.gpu is None else get_gpu(spec.gpu).name
        for j, option in enumerate(data.pools):
            if wanted is None or option.gpu_type == wanted:
                steps[j] = math.lcm(int(steps[j]), spec.gpus_per_node // math.gcd(option.tp, spec.gpus_per_node))
    return bounds + steps - 1


def bound_gpu_mix(data: FleetMilpData, bounds: np.ndarray, specs: list[tuple[int, Any]], rounds: int = 3) -> np.ndarray:
    """Each type's GPUs widened so that it can reach the shares: a share can make a type hold GPUs no
    traffic needs, as many as ``s / (1 - s)`` times the other types' (min share ``s``) or ``(1 - s) / s``
    times its own in the others (max share ``s``); the types' totals are widened by those factors (three
    rounds, for shares that chain).

    Not proven: optfleet.problems.fleet.milp.solve_milp certifies the optimum by cost afterwards (a plan
    beyond the bounds costs at least ``min_j c_j (gpu_bound_j + 1)``) and re-solves with wider bounds when
    that is below the plan found; an infeasible verdict under ``gpu_mix`` holds for plans within the bounds.
    """
    if not specs:
        return bounds
    pools = data.pools
    types = sorted({o.gpu_type for o in pools})
    total = {t: sum(o.tp * int(bounds[j]) for j, o in enumerate(pools) if o.gpu_type == t) for t in types}
    for _ in range(rounds):
        for _, spec in specs:
            mine = get_gpu(spec.gpu).name
            if mine not in total:
                continue
            others = sum(v for t, v in total.items() if t != mine)
            if 0.0 < spec.min_share < 1.0:
                total[mine] = max(total[mine], math.ceil(spec.min_share / (1.0 - spec.min_share) * others))
            if 0.0 < spec.max_share < 1.0:
                for t in types:
                    if t != mine:
                        total[t] = max(total[t], math.ceil((1.0 - spec.max_share) / spec.max_share * total[mine]))
    return np.array([min(max(int(bounds[j]), -(-total[o.gpu_type] // o.tp)), LARGEST_BOUND) for j, o in enumerate(pools)], dtype=np.int64)


def bound_fixed(data: FleetMilpData, bounds: np.ndarray, specs: list[tuple[int, Any]]) -> np.ndarray:
    """A count fixed at ``f``: ``max(bound_j, f)``."""
    fixed = {fixed_option(data, i, spec): spec.instances for i, spec in specs}
    widened = bounds.copy()
    for j, gpus in fixed.items():
        widened[j] = max(int(widened[j]), min(gpus, LARGEST_BOUND))
    return widened


def bound_budget(data: FleetMilpData, bounds: np.ndarray, specs: list[tuple[int, Any]]) -> np.ndarray:
    """A budget ``B``: every feasible plan has ``n_j <= B / c_j``, so the bounds are capped there (no plan is lost)."""
    for _, spec in specs:
        bounds = np.minimum(bounds, np.array([min(math.floor(spec.max_cost_per_hour / o.cost_per_instance_hour), LARGEST_BOUND) for o in data.pools]))
    return bounds


def bound_availability(data: FleetMilpData, bounds: np.ndarray, specs: list[tuple[int, Any]]) -> np.ndarray:
    """Availability ``A`` of j's type: every feasible plan has ``tp_j n_j <= A``, so the bounds are capped there."""
    for _, spec in specs:
        wanted = get_gpu(spec.gpu).name
        bounds = np.minimum(bounds, np.array([min(spec.max_gpus // o.tp, LARGEST_BOUND) if o.gpu_type == wanted else LARGEST_BOUND for o in data.pools]))
    return bounds
