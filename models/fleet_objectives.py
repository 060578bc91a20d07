"""The fleet MILP's registered objectives (``OBJECTIVES``): what it optimises and the admitted share it routes.

Equation numbers are models/fleet.py's.  Each objective writes the rows that
depend on how much traffic is admitted, at their places in the model:

``cost`` (the default): every request is served.
    (1)  route[k]           sum_j x[k,j] + sum_j z[k,j] = 1
    (1') compress_share[k]  sum_j z[k,j] <= p_c   (classes with two or more compressed options; one is its bound)
    (9c) z_fixed[k,j]       z[k,j] = p_c compress[s(k),j]          (threshold modes)
    objective               min cost

``served`` (a budget cap, optfleet/problems/fleet/constraints.py): every class
is admitted at the same share ``served`` in [0, 1].
    (1)  route[k]           sum_j x[k,j] + sum_j z[k,j] = served
    (1') compress_share[k]  sum_j z[k,j] <= p_c served               (every class with a compressed option)
    (9c) z_compress_up[k,j]  z[k,j] <= p_c compress[s(k),j],
         z_compress_low[k,j] z[k,j] >= p_c served - p_c (1 - compress[s(k),j])
                            (z = p_c served compress, linearised: a binary times a bounded variable)
    objective               max served - SERVED_COST_WEIGHT cost   (ties broken by cost)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyomo.environ as pyo
from optfleet.models.constraints import COST, SERVED
from optfleet.models.linear import total

SERVED_COST_WEIGHT = 1e-9  # $/h -> share: the served objective's tie-break by cost


@dataclass(frozen=True)
class FleetObjective:
    """One registered objective: its rows (1), (1'), (9c), the objective itself, and how a plan reads and starts it."""

    route_rows: Callable[[pyo.ConcreteModel], None]
    compress_share_rows: Callable[[pyo.ConcreteModel], None]
    compress_link_rows: Callable[[pyo.ConcreteModel], None]
    objective: Callable[[pyo.ConcreteModel], None]
    served_share: Callable[[pyo.ConcreteModel], float]
    start: Callable[[pyo.ConcreteModel], None]


def _shares_of(m: pyo.ConcreteModel, k: int) -> list:
    """Class k's shares: uncompressed into each pool that holds it, then compressed into each that can take it."""
    index = m.share_index
    return [m.x[k, j] for j in index.fits_into[k]] + [m.z[k, j] for j in index.compressible_into[k]]


def add_full_route_rows(m: pyo.ConcreteModel) -> None:
    """(1) ``route[k]: sum_j x[k,j] + sum_j z[k,j] = 1``."""
    m.route = pyo.Constraint(range(len(m.data.mass)), rule=lambda m, k: total(_shares_of(m, k)) == 1)


def add_compress_share_rows(m: pyo.ConcreteModel) -> None:
    """(1') ``compress_share[k]: sum_j z[k,j] <= p_c`` where k has two or more compressed options."""
    pc = m.data.problem.compressible_fraction
    into = m.share_index.compressible_into
    m.compress_share = pyo.Constraint([k for k in range(len(m.data.mass)) if len(into[k]) > 1],
                                      rule=lambda m, k: total([m.z[k, j] for j in into[k]]) <= pc)


def add_compress_fixed_rows(m: pyo.ConcreteModel) -> None:
    """(9c) ``z_fixed[k,j]: z[k,j] = p_c compress[s(k),j]``: a compressed band takes exactly ``p_c`` of each class."""
    pc = m.data.problem.compressible_fraction
    segment = m.data.class_segment
    m.z_fixed = pyo.Constraint(m.share_index.compressed, rule=lambda m, k, j: m.z[k, j] == pc * m.compress[int(segment[k]), j])


def add_cost_objective(m: pyo.ConcreteModel) -> None:
    """``objective: min cost`` ($/hour)."""
    m.objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)


def add_served_route_rows(m: pyo.ConcreteModel) -> None:
    """``served`` in [0, 1] and (1) ``route[k]: sum_j x[k,j] + sum_j z[k,j] = served``."""
    m.served = pyo.Var(bounds=(0, 1))
    m.route = pyo.Constraint(range(len(m.data.mass)), rule=lambda m, k: total(_shares_of(m, k)) == m.served)


def add_served_compress_share_rows(m: pyo.ConcreteModel) -> None:
    """(1') ``compress_share[k]: sum_j z[k,j] <= p_c served`` for every class with a compressed option."""
    pc = m.data.problem.compressible_fraction
    into = m.share_index.compressible_into
    m.compress_share = pyo.Constraint([k for k in range(len(m.data.mass)) if into[k]],
                                      rule=lambda m, k: total([m.z[k, j] for j in into[k]]) <= pc * m.served)


def add_served_compress_link_rows(m: pyo.ConcreteModel) -> None:
    """(9c) ``z = p_c served compress`` linearised: ``z_compress_up`` and ``z_compress_low``."""
    pc = m.data.problem.compressible_fraction
    segment = m.data.class_segment
    pairs = m.share_index.compressed
    m.z_compress_up = pyo.Constraint(pairs, rule=lambda m, k, j: m.z[k, j] <= pc * m.compress[int(segment[k]), j])
    m.z_compress_low = pyo.Constraint(pairs, rule=lambda m, k, j: m.z[k, j] >= pc * m.served - pc * (1 - m.compress[int(segment[k]), j]))


def add_served_objective(m: pyo.ConcreteModel) -> None:
    """``objective: max served - SERVED_COST_WEIGHT cost``."""
    m.objective = pyo.Objective(expr=m.served - SERVED_COST_WEIGHT * m.cost, sense=pyo.maximize)


def _start_served(m: pyo.ConcreteModel) -> None:
    """A plan's start admits everything: ``served = 1``."""
    m.served.set_value(1)


OBJECTIVES: dict[str, FleetObjective] = {
    COST: FleetObjective(add_full_route_rows, add_compress_share_rows, add_compress_fixed_rows, add_cost_objective,
                           served_share=lambda m: 1.0, start=lambda m: None),
    SERVED: FleetObjective(add_served_route_rows, add_served_compress_share_rows, add_served_compress_link_rows, add_served_objective,
                             served_share=lambda m: float(pyo.value(m.served)), start=_start_served),
}
