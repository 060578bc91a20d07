"""The fleet MILP's solution as a Plan: open pools with their GPUs, and one routing rule per length class."""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo

from optfleet.errors import InfeasibleError
from optfleet.models import fleet as fleet_model
from optfleet.models.fleet import FleetSolution
from optfleet.problems.fleet.milp_data import FleetMilpData
from optfleet.problems.fleet.plan import Plan, PoolPlan, RouteRule

SERVED_ZERO = 1e-9  # a served share at or below this (under a budget) is no traffic at all
SHARE_ZERO = 1e-9  # a routing share at or below this is solver noise


def extract_plan(model: pyo.ConcreteModel) -> Plan:
    """The plan of a solved fleet model (``models.fleet.extract``, then :func:`plan_from_solution`)."""
    return plan_from_solution(model.data, fleet_model.extract(model))


def plan_from_solution(data: FleetMilpData, solution: FleetSolution) -> Plan:
    """The plan of ``solution``: the pools with instances, each class's shares of its admitted traffic.

    InfeasibleError when the solution serves nothing (a budget too small for any traffic).
    """
    opened = [int(j) for j in np.flatnonzero(solution.instances)]
    if not opened or solution.served <= SERVED_ZERO:
        raise InfeasibleError("the MILP's best plan serves no traffic: no plan within the budget cap and the other constraints "
                              "serves every length class a positive share; raise the cap, relax the constraints or the time limit")
    gpu_of = (lambda j: data.pools[j].gpu) if data.problem.heterogeneous else (lambda j: None)
    pools = tuple(PoolPlan(data.pools[j].name, data.pools[j].window_tokens, int(solution.instances[j]), gpu_of(j)) for j in opened)
    rules = []
    for k in range(len(data.mass)):
        shares = tuple((data.pools[j].name, float(solution.shares[k, j])) for j in opened if solution.shares[k, j] > SHARE_ZERO)
        compressed = tuple((data.pools[j].name, float(solution.compressed[k, j])) for j in opened if solution.compressed[k, j] > SHARE_ZERO)
        total = sum(v for _, v in shares) + sum(v for _, v in compressed)  # = served (row 1), > SERVED_ZERO
        out_below = int(data.class_out_below[k])
        rules.append(RouteRule(
            total_above=int(data.class_total_above[k]), total_to=int(data.class_total_to[k]),
            shares=tuple((n, v / total) for n, v in shares), compressed=tuple((n, v / total) for n, v in compressed),
            out_from=int(data.class_out_from[k]), out_below=None if out_below == np.iinfo(np.int64).max else out_below,
        ))
    return Plan(pools=pools, method=f"milp-{solution.routing}", rules=tuple(rules), served_share=min(max(solution.served, 0.0), 1.0))
