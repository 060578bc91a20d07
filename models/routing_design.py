"""Token-budget threshold design joint with the pools' GPU configurations, as a Pyomo MILP (kind ``routing``).

Routing candidates ``c`` (short window ``C_c``, threshold ``B_c <= C_c``, C&R multiplier ``gamma_c``) each have a
mis-route probability ``p_c``.  Pool options ``j = (c, pool, g)``, one per candidate, pool (short, long) and GPU
configuration ``g`` of the fleet instance, each have the fewest instances ``N_j`` that serve the traffic the
candidate sends that pool within the SLO and the utilisation cap (the fleet evaluator's sizing, computed outside
the model), an upper bound ``U_j >= N_j`` and a price ``pi_j`` per instance-hour:

    min  cost = sum_j pi_j n_j                                      ($/hour)
    s.t. one[]:       sum_c z_c = 1                                 (one design)
         misroute[]:  sum_c p_c z_c <= epsilon                      (its mis-route probability)
         pick[c,p]:   sum_g open_(c,p,g) = z_c                      (one GPU configuration per pool of the design
                                                                     that receives requests; a pool that receives
                                                                     none stays empty: no option, no instance)
         fewest[j]:   N_j open_j <= n_j,   n_open[j]: n_j <= U_j open_j
         the fleet instance's constraints (models/fleet_constraints.py) on ``n`` and ``open``

with ``z_c, open_j`` binary and ``n_j`` integer.  A pool of more than ``N_j`` instances still meets the SLO (a
larger M/G/c pool waits less), so extra instances are bought only when a constraint asks for them (whole nodes, a
GPU mix).  ``U_j``:
``N_j`` widened by the fleet's bound rules for node multiples and GPU mixes, then capped by budgets and availability
(optfleet/problems/fleet/constraints.py ``gpu_bounds``); proven not to cut off an optimum except under ``gpu_mix``,
whose widening is a heuristic: there the driver (design_milp.py) solves again with every ``U_j`` at least
``cost / pi_j`` of the design found, which no cheaper design can exceed, so the optimum is proven.  A ``budget`` here
caps the cost (every request is served); ``fixed`` pins the instances of the pool with that window and GPU
configuration, summed over the candidates' options.

The model is exact over the grid of candidates and the instance's GPU configurations: its optimum equals
enumerating every (candidate, short configuration, long configuration) pair at their fewest instances when the
instance has no constraints.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyomo.environ as pyo

from optfleet.models.constraints import ConstraintRegistry

SHORT_POOL, LONG_POOL = 0, 1


@dataclass(frozen=True)
class DesignOption:
    """One pool option: candidate ``candidate``'s pool ``pool`` (0 short, 1 long) on GPU configuration ``gpu``
    (a label; ``gpu_type`` its GPU, ``tp`` GPUs per instance), fewest instances ``fewest``, price per instance-hour.
    The field names are the ones the fleet's constraint formulations read."""

    candidate: int
    pool: int
    gpu: str
    gpu_type: str
    tp: int
    window_tokens: int
    fewest: int
    cost_per_instance_hour: float


@dataclass(frozen=True)
class DesignData:
    """The candidates' mis-route probabilities, the pool options and their upper bounds, the fleet problem (its
    catalog, for the formulations), epsilon and the fleet constraints the model carries (the instance's, or all
    but one when asking which one leaves no design)."""

    misroute: np.ndarray
    pools: tuple[DesignOption, ...]
    upper: np.ndarray
    problem: Any
    epsilon: float
    constraints: tuple = ()
    empty: frozenset = frozenset()  # (candidate, pool) pairs that receive no request: no option, no pick row


def build_design(data: DesignData, constraints: ConstraintRegistry) -> pyo.ConcreteModel:
    """The module docstring's MILP; ``constraints`` holds the formulation of each constraint kind (the fleet's,
    with :func:`formulate_fixed_any` for ``fixed``)."""
    m = pyo.ConcreteModel(name="routing threshold design")
    m.data = data
    m.user_constraints = []
    candidates, options = range(len(data.misroute)), range(len(data.pools))
    m.z = pyo.Var(candidates, domain=pyo.Binary)
    m.open = pyo.Var(options, domain=pyo.Binary)
    m.n = pyo.Var(options, domain=pyo.NonNegativeIntegers, bounds=lambda _, j: (0, int(data.upper[j])))
    m.one = pyo.Constraint(expr=sum(m.z[c] for c in candidates) == 1)
    m.misroute = pyo.Constraint(expr=sum(float(data.misroute[c]) * m.z[c] for c in candidates) <= data.epsilon)
    by_pick: dict[tuple[int, int], list[int]] = {}
    for j, o in enumerate(data.pools):
        by_pick.setdefault((o.candidate, o.pool), []).append(j)
    m.pick = pyo.Constraint([(c, p) for c in candidates for p in (SHORT_POOL, LONG_POOL) if (c, p) not in data.empty],
                            rule=lambda _, c, p: sum(m.open[j] for j in by_pick.get((c, p), [])) == m.z[c])
    m.fewest = pyo.Constraint(options, rule=lambda _, j: data.pools[j].fewest * m.open[j] <= m.n[j])
    m.n_open = pyo.Constraint(options, rule=lambda _, j: m.n[j] <= int(data.upper[j]) * m.open[j])
    m.cost = pyo.Expression(expr=sum(o.cost_per_instance_hour * m.n[j] for j, o in enumerate(data.pools)))
    m.objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)
    constraints.declare_all(m, data.constraints)
    return m


def chosen(m: pyo.ConcreteModel) -> tuple[int, dict[int, tuple[DesignOption, int]]]:
    """The chosen candidate and, per pool, its option and instance count, from a solved model."""
    candidate = max(m.z, key=lambda c: pyo.value(m.z[c]))
    pools = {o.pool: (o, int(round(pyo.value(m.n[j])))) for j, o in enumerate(m.data.pools) if pyo.value(m.open[j]) > 0.5}
    return int(candidate), pools


def _fixed_options(data: DesignData, i: int, spec: Any) -> list[int]:
    """The options at the pinned window and GPU configuration (none when no rule's pool there can meet the SLO, or
    the window is not the design's)."""
    label = data.problem.configuration_label(spec.gpu, spec.tp, f"constraints[{i}].gpu")
    return [j for j, o in enumerate(data.pools) if (o.gpu, o.window_tokens) == (label, spec.window_tokens)]


def formulate_fixed_any(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``gpus: sum_{j at (window, GPU)} n_j = gpus`` over every candidate's option there; with no option there a
    positive pin excludes every design (``none: sum_c z_c <= 0``) and a zero pin holds outright."""
    options = _fixed_options(m.data, i, spec)
    if options:
        block.instances = pyo.Constraint(expr=sum(m.n[j] for j in options) == spec.instances)
    elif spec.instances > 0:
        block.none = pyo.Constraint(expr=sum(m.z[c] for c in m.z) <= 0)


def bound_fixed_any(data: DesignData, bounds: np.ndarray, specs: list[tuple[int, Any]]) -> np.ndarray:
    """A pinned count ``f``: ``max(U_j, f)`` on every option at that window and GPU configuration."""
    widened = bounds.copy()
    for i, spec in specs:
        for j in _fixed_options(data, i, spec):
            widened[j] = max(int(widened[j]), spec.instances)
    return widened
