"""User constraints on the fleet MILP, one registered function per ``kind`` (instance ``constraints:``).

Each function adds named components ``m.user_<kind>_<i>`` to a model built by
models/fleet.py; a new kind is one more function in ``CONSTRAINTS``.

* ``budget``: ``cost <= max_cost_per_hour``; the objective becomes *maximise
  the served rate*: every class is admitted at the same share ``served`` in
  [0, 1] (route rows become ``sum x + sum z = served``), ties broken by cost.
  Compression applies to the admitted requests: ``z <= p_c served``, and in
  threshold modes ``z = p_c served compress`` (linearised: a binary times a
  bounded variable).
* ``availability``: ``sum_{j of type g} n[j] <= max_gpus``.
* ``gpu_mix``: ``min_share sum_j n[j] <= sum_{j of type g} n[j] <= max_share sum_j n[j]``.
* ``max_pools``: ``sum_j open[j] <= count``.
* ``fixed``: ``n[j] = gpus`` (and ``open[j] = 1`` if gpus > 0) for the pool with that window.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyomo.environ as pyo

from optfleet.errors import InputError
from optfleet.hardware import get_gpu


def _pools_of_gpu(m: pyo.ConcreteModel, gpu: str, field: str) -> list[int]:
    wanted = get_gpu(gpu, field).name
    problem = m.data.problem
    if get_gpu(problem.hardware.spec.gpu).name != wanted:
        raise InputError(field, gpu, f"no pool option uses this GPU (the instance's GPU is {problem.hardware.spec.gpu})")
    return list(range(len(m.data.pools)))


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
    m.z_served = pyo.Constraint(pairs, rule=lambda m, k, j: m.z[k, j] <= pc * m.served)
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
    setattr(m, f"user_availability_{i}", pyo.Constraint(expr=sum(m.n[j] for j in pools) <= spec.max_gpus))


def add_gpu_mix(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    if spec.min_share > spec.max_share:
        raise InputError(f"constraints[{i}].min_share", spec.min_share, f"exceeds max_share {spec.max_share}")
    pools = _pools_of_gpu(m, spec.gpu, f"constraints[{i}].gpu")
    total = sum(m.n[j] for j in range(len(m.data.pools)))
    mine = sum(m.n[j] for j in pools)
    setattr(m, f"user_gpu_mix_{i}_min", pyo.Constraint(expr=mine >= spec.min_share * total))
    setattr(m, f"user_gpu_mix_{i}_max", pyo.Constraint(expr=mine <= spec.max_share * total))


def add_max_pools(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    setattr(m, f"user_max_pools_{i}", pyo.Constraint(expr=sum(m.open[j] for j in range(len(m.data.pools))) <= spec.count))


def add_fixed(m: pyo.ConcreteModel, i: int, spec: Any) -> None:
    windows = [o.window_tokens for o in m.data.pools]
    if spec.window_tokens not in windows:
        raise InputError(f"constraints[{i}].window_tokens", spec.window_tokens, f"is not a pool option; options: {windows}")
    j = windows.index(spec.window_tokens)
    setattr(m, f"user_fixed_{i}", pyo.Constraint(expr=m.n[j] == spec.gpus))
    if spec.gpus > 0:
        setattr(m, f"user_fixed_{i}_open", pyo.Constraint(expr=m.open[j] == 1))


CONSTRAINTS: dict[str, Callable[[pyo.ConcreteModel, int, Any], None]] = {
    "budget": add_budget,
    "availability": add_availability,
    "gpu_mix": add_gpu_mix,
    "max_pools": add_max_pools,
    "fixed": add_fixed,
}


def add_user_constraints(m: pyo.ConcreteModel, specs: tuple, skip: int | None = None) -> None:
    """Add every constraint of ``specs`` (except index ``skip``, used to find which one makes a model infeasible)."""
    for i, spec in enumerate(specs):
        if i != skip:
            CONSTRAINTS[spec.kind](m, i, spec)
