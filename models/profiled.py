"""Profiled-throughput fleet sizing as a Pyomo MILP (Mélange-style; contracts in docs/architecture.md).

Source: Griggs et al., "Mélange: Cost Efficient Large Language Model Serving
by Exploiting GPU Heterogeneity", arXiv:2404.14527 (2024), section 5, and its
solver (github.com/tyler-griggs/melange-release, ``melange/solver.py``): GPUs
are bins, slices of request buckets are items, the load of a slice on a GPU
type is its rate over the type's profiled max rate for that bucket.

Sets: GPU types g (``m.G``), buckets with demand b (``m.B``), eligible pairs
(b, g) with ``T[g,b] > 0`` (``m.BG``).  Data (optfleet.problems.profiled_fleet.problem):
``lambda_b``, ``L[b,g] = lambda_b / T[g,b]``, price ``p_g`` per GPU-hour,
``k_g`` GPUs per instance, utilisation cap ``u``, ``s`` slices per bucket.

Variables
    n[g]          integer >= 0   GPUs of type g (bounded by ``problem.gpu_upper_bounds``)
    instances[g]  integer >= 0   instances of type g
    x[b,g] in [0,1]              share of bucket b's requests served by type g
    slices[b,g]   integer in [0,s]   (splitting by slices only) slices of b on g

Constraints
    (1) whole_instances[g]  n[g] = k_g instances[g]
    (2) route[b]            sum_g x[b,g] = 1      (= served_b under the served objective)
    (3) slice_link[b,g]     s x[b,g] = slices[b,g]          (s = 1: a whole bucket to one type)
    (4) capacity[g]         load_instances[g] = sum_b L[b,g] x[b,g] <= u instances[g]
    cost                    cost = sum_g p_g n[g]    ($/hour);  served_rps = sum_b lambda_b sum_g x[b,g]

With ``s = 1`` and ``u = 1`` this is Mélange's ILP exactly (its ``x_ij``
binary, ``y_j`` integer, ``sum_i x_ij L_ij <= y_j``); with slices it is
Mélange's ``slice_factor``; fractional splitting drops (3).

Objectives (``OBJECTIVES``, chosen when the model is built and recorded as
``m.objective_name``):

    cost      route rows (2) = 1;  objective: min cost
    served    (a budget cap) route rows (2) = served_b, ``served[b]`` in [0, 1] per bucket
              (``admission: per_bucket``) or one ``served`` (``uniform``);  objective:
              max served_rps  (the driver then minimises cost at that rate: :func:`minimise_cost_at`)

User constraints (instance ``constraints:``) are declared by the driver, each
a Block ``m.user_<kind>_<i>`` (the contract: models/constraints.py; the
formulations: models/profiled_constraints.py).  Python constraints go straight
on the model: ``m = build(problem); m.cap = pyo.Constraint(expr=m.cost <= 6);
solve(m)``.  :func:`extract` returns the solution in numbers
(:class:`ProfiledSolution`; the driver makes it a plan).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyomo.environ as pyo
from optfleet.models.constraints import COST, SERVED, start_user_constraints
from optfleet.models.linear import total

if TYPE_CHECKING:
    from optfleet.problems.profiled_fleet.problem import ProfiledProblem

SERVED_FLOOR_TOLERANCE = 1e-6  # relative: served rate kept when the driver re-solves for the cheapest plan
SHARE_ZERO = 1e-9  # a fractional share at or below this is solver noise


def build(problem: ProfiledProblem, gpu_bounds: dict[str, int] | None = None, objective: str = COST) -> pyo.ConcreteModel:
    """The MILP of ``problem`` (see the module docstring) with the objective ``OBJECTIVES[objective]``.

    ``gpu_bounds`` overrides the upper bound on each ``n[g]`` (default ``problem.gpu_upper_bounds()``).  A
    bucket with demand that no type can serve leaves the empty route row ``0 = 1``: the model is infeasible.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {tuple(OBJECTIVES)}")
    goal = OBJECTIVES[objective]
    m = pyo.ConcreteModel(name=f"profiled:{problem.name}")
    m.problem = problem
    m.gpu_bounds = dict(gpu_bounds or problem.gpu_upper_bounds())
    m.objective_name = objective
    m.user_constraints = []
    add_gpu_vars(m)
    add_routing_vars(m)
    goal.route_rows(m)
    add_capacity_rows(m)
    add_cost_and_served_rate(m)
    goal.objective(m)
    return m


def add_gpu_vars(m: pyo.ConcreteModel) -> None:
    """``n[g]`` GPUs and ``instances[g]``, linked by (1) ``n[g] = k_g instances[g]``."""
    problem: ProfiledProblem = m.problem
    k = {g.name: g.gpus_per_instance for g in problem.gpus}
    m.G = pyo.Set(initialize=list(problem.gpu_names), ordered=True)
    m.n = pyo.Var(m.G, domain=pyo.NonNegativeIntegers, bounds=lambda _, g: (0, m.gpu_bounds[g]))
    m.instances = pyo.Var(m.G, domain=pyo.NonNegativeIntegers, bounds=lambda _, g: (0, m.gpu_bounds[g] // k[g]))
    m.whole_instances = pyo.Constraint(m.G, rule=lambda m, g: m.n[g] == k[g] * m.instances[g])


def add_routing_vars(m: pyo.ConcreteModel) -> None:
    """``x[b,g]`` on eligible pairs; with slices also ``slices[b,g]`` and (3) ``s x[b,g] = slices[b,g]``."""
    problem: ProfiledProblem = m.problem
    m.B = pyo.Set(initialize=[b.index for b in problem.demand_buckets], ordered=True)
    pairs = [(b, g.name) for b in m.B for g in problem.gpus if g.can_serve(b)]
    m.BG = pyo.Set(initialize=pairs, dimen=2, ordered=True)
    m.x = pyo.Var(m.BG, bounds=(0, 1))
    s = problem.slices_per_bucket
    if s is not None:
        m.slices = pyo.Var(m.BG, domain=pyo.NonNegativeIntegers, bounds=(0, s))
        m.slice_link = pyo.Constraint(m.BG, rule=lambda m, b, g: s * m.x[b, g] == m.slices[b, g])


def _routed(m: pyo.ConcreteModel, b: int):
    """``sum_g x[b,g]``: the share of bucket b routed anywhere."""
    return total([m.x[b, g] for g in m.G if (b, g) in m.BG])


def add_capacity_rows(m: pyo.ConcreteModel) -> None:
    """(4) ``capacity[g]: load_instances[g] = sum_b L[b,g] x[b,g] <= u instances[g]``."""
    problem: ProfiledProblem = m.problem
    index = {name: i for i, name in enumerate(problem.gpu_names)}
    m.load_instances = pyo.Expression(
        m.G, rule=lambda m, g: sum(problem.instance_load(b, index[g]) * m.x[b, g] for b in m.B if (b, g) in m.BG)
    )
    m.capacity = pyo.Constraint(m.G, rule=lambda m, g: m.load_instances[g] <= problem.max_utilisation * m.instances[g])


def add_cost_and_served_rate(m: pyo.ConcreteModel) -> None:
    """``cost = sum_g p_g n[g]`` ($/hour) and ``served_rps = sum_b lambda_b sum_g x[b,g]`` (req/s)."""
    problem: ProfiledProblem = m.problem
    price = {g.name: g.cost_per_gpu_hour for g in problem.gpus}
    m.cost = pyo.Expression(expr=sum(price[g] * m.n[g] for g in m.G))
    m.served_rps = pyo.Expression(expr=sum(problem.buckets[b].rate_rps * _routed(m, b) for b in m.B))


# ---------------------------------------------------------------- objectives


@dataclass(frozen=True)
class ProfiledObjective:
    """One registered objective: its route rows (2), the objective itself, and the MIP start of its variables."""

    route_rows: Callable[[pyo.ConcreteModel], None]
    objective: Callable[[pyo.ConcreteModel], None]
    start: Callable[[pyo.ConcreteModel], None]


def add_full_route_rows(m: pyo.ConcreteModel) -> None:
    """(2) ``route[b]: sum_g x[b,g] = 1``."""
    m.route = pyo.Constraint(m.B, rule=lambda m, b: _routed(m, b) == 1)


def add_cost_objective(m: pyo.ConcreteModel) -> None:
    """``objective: min cost``."""
    m.objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)


def add_served_route_rows(m: pyo.ConcreteModel) -> None:
    """``served[b]`` (``admission: per_bucket``) or ``served`` (``uniform``) in [0, 1] and (2) ``route[b]:
    sum_g x[b,g] = served_b``."""
    if m.problem.budget.admission == "per_bucket":
        m.served = pyo.Var(m.B, bounds=(0, 1))
        m.route = pyo.Constraint(m.B, rule=lambda m, b: _routed(m, b) == m.served[b])
    else:
        m.served = pyo.Var(bounds=(0, 1))
        m.route = pyo.Constraint(m.B, rule=lambda m, b: _routed(m, b) == m.served)


def add_served_objective(m: pyo.ConcreteModel) -> None:
    """``objective: max served_rps``."""
    m.objective = pyo.Objective(expr=m.served_rps, sense=pyo.maximize)


def _start_served(m: pyo.ConcreteModel) -> None:
    """``served_b``: the share of bucket b the plan routes (uniform: the least of them)."""
    routed = {b: sum(pyo.value(m.x[b, g]) for g in m.G if (b, g) in m.BG) for b in m.B}
    if m.problem.budget.admission == "per_bucket":
        for b in m.B:
            m.served[b].set_value(routed[b])
    else:
        m.served.set_value(min(routed.values(), default=1.0))


OBJECTIVES: dict[str, ProfiledObjective] = {
    COST: ProfiledObjective(add_full_route_rows, add_cost_objective, start=lambda m: None),
    SERVED: ProfiledObjective(add_served_route_rows, add_served_objective, start=_start_served),
}


def minimise_cost_at(m: pyo.ConcreteModel, served_rps: float) -> None:
    """Second phase of a served-objective model: keep ``served_rps`` (to a relative 1e-6) and minimise cost instead."""
    for objective in list(m.component_data_objects(pyo.Objective, active=True)):
        objective.deactivate()
    m.served_floor = pyo.Constraint(expr=m.served_rps >= served_rps - SERVED_FLOOR_TOLERANCE * max(1.0, served_rps))
    m.cost_objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)


# ---------------------------------------------------------------- solutions out, plans in


@dataclass(frozen=True)
class ProfiledSolution:
    """A solved model in numbers (the driver makes it a plan): ``gpus[g]`` per type (``m.G`` order) and
    ``routing[b][g]``, the share of bucket b sent to type g (every bucket, 0 where not routed)."""

    gpus: tuple[int, ...]
    routing: tuple[tuple[float, ...], ...]


def extract(m: pyo.ConcreteModel) -> ProfiledSolution:
    """The solution of a solved model: integer GPUs per type and routing shares per bucket.

    Shares are cleaned of solver noise: with slices they are the integer
    slice counts over ``s``; fractional shares below 1e-9 become 0.
    """
    problem: ProfiledProblem = m.problem
    s = problem.slices_per_bucket
    gpus = tuple(int(round(pyo.value(m.n[g]))) for g in m.G)
    routing = []
    for bucket in problem.buckets:
        row = []
        for g in m.G:
            if (bucket.index, g) not in m.BG:
                row.append(0.0)
            elif s is not None:
                row.append(round(pyo.value(m.slices[bucket.index, g])) / s)
            else:
                value = min(1.0, max(0.0, pyo.value(m.x[bucket.index, g])))
                row.append(value if value > SHARE_ZERO else 0.0)
        routing.append(tuple(row))
    return ProfiledSolution(gpus, tuple(routing))


def warm_start(m: pyo.ConcreteModel, plan: Any) -> None:
    """Load ``plan`` (a profiled plan: ``gpu_names``, ``gpus``, ``routing``) as the MIP start; every variable
    gets a value (the objective's and each user constraint's through their ``start``).

    Variables the plan does not determine (e.g. ones a user added) start at 0.
    Shares on pairs the model does not have (a type that cannot serve the
    bucket) are dropped; HiGHS then rejects an infeasible start and solves cold.
    """
    problem: ProfiledProblem = m.problem
    for var in m.component_data_objects(pyo.Var):
        var.set_value(0)
    s = problem.slices_per_bucket
    for g, gpu, n in zip(m.G, problem.gpus, plan.gpus, strict=True):
        m.n[g].set_value(n)
        m.instances[g].set_value(n // gpu.gpus_per_instance)
    for b, g in m.BG:
        share = plan.routing[b][plan.gpu_names.index(g)]
        m.x[b, g].set_value(share)
        if s is not None:
            m.slices[b, g].set_value(round(share * s))
    OBJECTIVES[m.objective_name].start(m)
    start_user_constraints(m)
