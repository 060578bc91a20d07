"""User constraints on the fleet MILP, one registered function per ``kind`` (instance ``constraints:``).

Each function adds named components ``m.user_<kind>_<i>`` to a model built by
models/fleet.py; a new kind is one more function in ``CONSTRAINTS``.

* ``budget``: ``cost <= max_cost_per_hour``; the objective becomes *maximise
  the served rate*: every class is admitted at the same share ``served`` in
  [0, 1] (route rows become ``sum x + sum z = served``), ties broken by cost.
  Compression applies to the admitted requests: ``sum_j z[k,j] <= p_c served``, and in
  threshold modes ``z = p_c served compress`` (linearised: a binary times a
  bounded variable).
GPU counts below are GPUs, ``g_j = tp_j n[j]`` (an instance of TP degree t is t GPUs).

* ``availability``: ``sum_{j of type g} g_j <= max_gpus``.
* ``gpu_mix``: ``min_share sum_j g_j <= sum_{j of type g} g_j <= max_share sum_j g_j``.
* ``max_pools``: ``sum_j open[j] <= count``.
* ``max_types``: a binary ``used[g]`` per GPU type, ``open[j] <= used[type(j)]``,
  ``sum_g used[g] <= count``.
* ``node_multiple``: ``sum_{j of type g} g_j = gpus_per_node * nodes[g]``, ``nodes[g]`` integer
  (for one type, or for each type when ``gpu`` is omitted).
* ``fixed``: ``n[j] = gpus`` (and ``open[j] = 1`` if gpus > 0) for the pool with that window
  (and that GPU configuration, default the ``hardware`` block's).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyomo.environ as pyo

from optfleet.errors import InputError
from optfleet.problems.fleet.milp_data import FleetMilpData
from optfleet.hardware import get_gpu
from optfleet.models.fleet import service_gpu_bounds

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


def add_budget(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    m.served = pyo.Var(bounds=(0, 1))
    m.route.deactivate()
    pools = range(len(m.data.pools))
    m.route_served = pyo.Constraint(
        list(m.route.keys()),
        rule=lambda m, k: sum(m.x[k, j] for j in pools if (k, j) in m.x) + sum(m.z[k, j] for j in pools if (k, j) in m.z) == m.served,
    )
    pc = m.data.problem.compressible_fraction
    pairs = list(m.z.keys())
    m.compress_share.deactivate()
    into = {k: [j for kk, j in pairs if kk == k] for k, _ in pairs}
    m.z_served = pyo.Constraint(sorted(into), rule=lambda m, k: sum(m.z[k, j] for j in into[k]) <= pc * m.served)
    if hasattr(m, "z_fixed"):
        m.z_fixed.deactivate()
        segment = m.data.class_segment
        m.z_compress_up = pyo.Constraint(pairs, rule=lambda m, k, j: m.z[k, j] <= pc * m.compress[int(segment[k]), j])
        m.z_compress_low = pyo.Constraint(pairs, rule=lambda m, k, j: m.z[k, j] >= pc * m.served - pc * (1 - m.compress[int(segment[k]), j]))
    setattr(m, f"user_budget_{i}", pyo.Constraint(expr=m.cost <= spec.max_cost_per_hour))
    m.objective.deactivate()
    m.served_objective = pyo.Objective(expr=m.served - 1e-9 * m.cost, sense=pyo.maximize)


def add_availability(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    pools = _pools_of_gpu(m, spec.gpu, f"constraints[{i}].gpu")
    if pools:
        setattr(m, f"user_availability_{i}", pyo.Constraint(expr=_gpus(m, pools) <= spec.max_gpus))


def add_gpu_mix(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    if spec.min_share > spec.max_share:
        raise InputError(f"constraints[{i}].min_share", spec.min_share, f"exceeds max_share {spec.max_share}")
    pools = _pools_of_gpu(m, spec.gpu, f"constraints[{i}].gpu")
    total = _gpus(m, range(len(m.data.pools)))
    mine = _gpus(m, pools)
    setattr(m, f"user_gpu_mix_{i}_min", pyo.Constraint(expr=mine >= spec.min_share * total))
    setattr(m, f"user_gpu_mix_{i}_max", pyo.Constraint(expr=mine <= spec.max_share * total))


def add_max_pools(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    setattr(m, f"user_max_pools_{i}", pyo.Constraint(expr=sum(m.open[j] for j in range(len(m.data.pools))) <= spec.count))


def add_max_types(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    types = sorted({o.gpu_type for o in m.data.pools})
    used = pyo.Var(types, domain=pyo.Binary)
    setattr(m, f"user_max_types_{i}_used", used)
    pools = range(len(m.data.pools))
    setattr(m, f"user_max_types_{i}_link", pyo.Constraint(pools, rule=lambda m, j: m.open[j] <= used[m.data.pools[j].gpu_type]))
    setattr(m, f"user_max_types_{i}", pyo.Constraint(expr=sum(used[g] for g in types) <= spec.count))


def add_node_multiple(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    if spec.gpu is not None:
        pools = _pools_of_gpu(m, spec.gpu, f"constraints[{i}].gpu")
        groups = {get_gpu(spec.gpu).name: pools} if pools else {}
    else:
        groups = {}
        for j, o in enumerate(m.data.pools):
            groups.setdefault(o.gpu_type, []).append(j)
    nodes = pyo.Var(sorted(groups), domain=pyo.NonNegativeIntegers)
    setattr(m, f"user_node_multiple_{i}_nodes", nodes)
    setattr(m, f"user_node_multiple_{i}", pyo.Constraint(sorted(groups), rule=lambda m, g: _gpus(m, groups[g]) == spec.gpus_per_node * nodes[g]))


def _fixed_option(data: FleetMilpData, i: int, spec: Any) -> int:
    """The pool option a ``fixed`` constraint pins (an error naming the field when there is none)."""
    label = data.problem.configuration_label(spec.gpu, spec.tp, f"constraints[{i}].gpu")
    keys = [(o.gpu, o.window_tokens) for o in data.pools]
    if (label, spec.window_tokens) not in keys:
        offered = sorted(w for g, w in keys if g == label)
        raise InputError(f"constraints[{i}].window_tokens", spec.window_tokens, f"is not a pool option on {label}; its windows: {offered}")
    return keys.index((label, spec.window_tokens))


def add_fixed(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    j = _fixed_option(m.data, i, spec)
    setattr(m, f"user_fixed_{i}", pyo.Constraint(expr=m.n[j] == spec.gpus))
    if spec.gpus > 0:
        setattr(m, f"user_fixed_{i}_open", pyo.Constraint(expr=m.open[j] == 1))


CONSTRAINTS: dict[str, Callable[[pyo.ConcreteModel, int, Any], None]] = {
    "budget": add_budget,
    "availability": add_availability,
    "gpu_mix": add_gpu_mix,
    "max_pools": add_max_pools,
    "max_types": add_max_types,
    "node_multiple": add_node_multiple,
    "fixed": add_fixed,
}


def add_user_constraints(m: pyo.ConcreteModel, specs: tuple, skip: int | None = None) -> None:
    """Add every constraint of ``specs`` (except index ``skip``, used to find which one makes a model infeasible)."""
    for i, spec in enumerate(specs):
        if i != skip:
            CONSTRAINTS[spec.kind](m, i, spec)


def gpu_bounds(data: FleetMilpData, specs: tuple) -> np.ndarray:
    """Upper bounds on each pool option's instances ``n[j]`` (the model's ``gpu_bound``) under the constraints ``specs``.

    Start from :func:`optfleet.models.fleet.service_gpu_bounds` ``s_j`` (any routing's load), then:

    * ``fixed`` at ``f``: ``max(s_j, f)``;
    * ``node_multiple`` (``G`` GPUs per node) on j's type: ``s_j + L_j - 1`` with ``L_j`` the lcm, over
      those constraints, of ``G / gcd(tp_j, G)``.  Proof: take any feasible plan and, in every pool j that is
      not fixed and has at least ``s_j + L_j`` instances, remove ``L_j`` instances until it has fewer.  Each
      step removes ``tp_j L_j`` GPUs, a multiple of every ``G``, so node multiples still hold; the pool
      still has ``s_j`` instances or more, so its cap and wait rows and ``open[j]`` are unchanged; cost and
      GPU counts only fall, so budgets and availability still hold, and the plan is no worse.  Hence
      some optimal plan lies within the bounds, and an instance is infeasible only if no plan within them
      exists;
    * ``budget`` ``B`` and ``availability`` ``A``: every feasible plan has ``n_j <= B / c_j`` and
      ``tp_j n_j <= A``, so the bounds are capped there (no plan is lost);
    * ``gpu_mix``: a share can make a type hold GPUs no traffic needs, as many as ``s / (1 - s)`` times the
      other types' (min share ``s``) or ``(1 - s) / s`` times its own in the others (max share ``s``); the
      types' totals are widened by those factors (three rounds, for shares that chain).  This bound is not
      proven: ``optfleet.problems.fleet.milp.solve_milp`` certifies the optimum by cost afterwards (a plan beyond the
      bounds costs at least ``min_j c_j (gpu_bound_j + 1)``) and re-solves with wider bounds when that is
      below the plan found; an infeasible verdict under ``gpu_mix`` holds for plans within the bounds.
    """
    pools = data.pools
    bounds = service_gpu_bounds(data).astype(np.int64)
    fixed = {}
    for i, spec in enumerate(specs):
        if spec.kind == "fixed":
            fixed[_fixed_option(data, i, spec)] = spec.gpus
    steps = np.ones(len(pools), dtype=np.int64)
    for spec in specs:
        if spec.kind == "node_multiple":
            wanted = None if spec.gpu is None else get_gpu(spec.gpu).name
            for j, option in enumerate(pools):
                if wanted is None or option.gpu_type == wanted:
                    steps[j] = math.lcm(int(steps[j]), spec.gpus_per_node // math.gcd(option.tp, spec.gpus_per_node))
    bounds += steps - 1
    bounds = _widen_for_shares(data, bounds, [spec for spec in specs if spec.kind == "gpu_mix"])
    for j, gpus in fixed.items():
        bounds[j] = max(int(bounds[j]), min(gpus, LARGEST_BOUND))
    for spec in specs:
        if spec.kind == "budget":
            cap = np.array([min(math.floor(spec.max_cost_per_hour / o.cost_per_gpu_hour), LARGEST_BOUND) for o in pools])
            bounds = np.minimum(bounds, cap)
        elif spec.kind == "availability":
            wanted = get_gpu(spec.gpu).name
            cap = np.array([min(spec.max_gpus // o.tp, LARGEST_BOUND) if o.gpu_type == wanted else LARGEST_BOUND for o in pools])
            bounds = np.minimum(bounds, cap)
    return bounds


def _widen_for_shares(data: FleetMilpData, bounds: np.ndarray, mixes: list, rounds: int = 3) -> np.ndarray:
    """``bounds`` widened so that each type's GPUs can reach the shares of ``mixes`` (see :func:`gpu_bounds`)."""
    if not mixes:
        return bounds
    pools = data.pools
    types = sorted({o.gpu_type for o in pools})
    total = {t: sum(o.tp * int(bounds[j]) for j, o in enumerate(pools) if o.gpu_type == t) for t in types}
    for _ in range(rounds):
        for spec in mixes:
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
