"""Profiled-throughput fleet sizing as a Pyomo MILP (Mélange-style; DESIGN.md section 2 contracts).

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
    (2) route[b]            sum_g x[b,g] = 1
    (3) slice_link[b,g]     s x[b,g] = slices[b,g]          (s = 1: a whole bucket to one type)
    (4) capacity[g]         load_instances[g] = sum_b L[b,g] x[b,g] <= u instances[g]
    objective               min cost = sum_g p_g n[g]    ($/hour)

With ``s = 1`` and ``u = 1`` this is Mélange's ILP exactly (its ``x_ij``
binary, ``y_j`` integer, ``sum_i x_ij L_ij <= y_j``); with slices it is
Mélange's ``slice_factor``; fractional splitting drops (3).

User constraints (instance ``constraints:`` or :func:`add_constraint`), one
registered function per kind, each filling a named block ``m.user_<kind>_<i>``:

    availability   n[g] <= max_gpus
    budget         cost <= max_cost_per_hour; route rows become sum_g x[b,g] = served_b
                   (per_bucket) or = served (uniform); objective: max served_rps =
                   sum_b lambda_b sum_g x[b,g]  (the driver then minimises cost at that rate)
    gpu_mix        min_share sum_h n[h] <= n[g] <= max_share sum_h n[h]
    max_types      n[g] <= N_g used[g], sum_g used[g] <= count   (used binary, N_g the bound on n[g])
    node_multiple  n[g] = gpus_per_node nodes[g], nodes integer

Python constraints go straight on the model: ``m = build(problem);
m.cap = pyo.Constraint(expr=m.cost <= 6); solve(m)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyomo.environ as pyo

from optfleet.problems.profiled_fleet.plan import ProfiledPlan
from optfleet.problems.profiled_fleet.problem import ProfiledProblem, require_servable

SERVED_FLOOR_TOLERANCE = 1e-6  # relative: served rate kept when the driver re-solves for the cheapest plan


def build(problem: ProfiledProblem, gpu_bounds: dict[str, int] | None = None) -> pyo.ConcreteModel:
    """The MILP of ``problem`` with its declarative constraints (see the module docstring).

    ``gpu_bounds`` overrides the upper bound on each ``n[g]`` (default
    ``problem.gpu_upper_bounds()``).  Raises InfeasibleError at once if a
    bucket with demand has no type that can serve it.
    """
    require_servable(problem)
    m = pyo.ConcreteModel(name=f"profiled:{problem.name}")
    m.problem = problem
    m.gpu_bounds = dict(gpu_bounds or problem.gpu_upper_bounds())
    m.user_blocks = []
    add_gpu_vars(m)
    add_routing_vars(m)
    add_route_rows(m)
    add_capacity_rows(m)
    add_cost_objective(m)
    for i, spec in enumerate(problem.constraints):
        add_constraint(m, spec, f"user_{spec.kind}_{i}")
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
    return sum(m.x[b, g] for g in m.G if (b, g) in m.BG)


def add_route_rows(m: pyo.ConcreteModel) -> None:
    """(2) ``route[b]: sum_g x[b,g] = 1`` and the expression ``served_rps = sum_b lambda_b sum_g x[b,g]``."""
    problem: ProfiledProblem = m.problem
    m.route = pyo.Constraint(m.B, rule=lambda m, b: _routed(m, b) == 1)
    m.served_rps = pyo.Expression(expr=sum(problem.buckets[b].rate_rps * _routed(m, b) for b in m.B))


def add_capacity_rows(m: pyo.ConcreteModel) -> None:
    """(4) ``capacity[g]: load_instances[g] = sum_b L[b,g] x[b,g] <= u instances[g]``."""
    problem: ProfiledProblem = m.problem
    index = {name: i for i, name in enumerate(problem.gpu_names)}
    m.load_instances = pyo.Expression(
        m.G, rule=lambda m, g: sum(problem.instance_load(b, index[g]) * m.x[b, g] for b in m.B if (b, g) in m.BG)
    )
    m.capacity = pyo.Constraint(m.G, rule=lambda m, g: m.load_instances[g] <= problem.max_utilisation * m.instances[g])


def add_cost_objective(m: pyo.ConcreteModel) -> None:
    """``cost = sum_g p_g n[g]`` ($/hour) and ``objective: min cost``."""
    problem: ProfiledProblem = m.problem
    price = {g.name: g.cost_per_gpu_hour for g in problem.gpus}
    m.cost = pyo.Expression(expr=sum(price[g] * m.n[g] for g in m.G))
    m.objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)


# ---------------------------------------------------------------- user constraints


@dataclass(frozen=True)
class ConstraintKind:
    """A registered constraint kind: ``add`` fills its block; ``start`` sets the block's own variables for a MIP start."""

    add: Callable[[pyo.Block, pyo.ConcreteModel, Any], None]
    start: Callable[[pyo.Block, pyo.ConcreteModel, Any], None]


CONSTRAINT_KINDS: dict[str, ConstraintKind] = {}


def _no_start(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    """Blocks without variables of their own need nothing for a MIP start."""


def register_constraint(kind: str, start: Callable[[pyo.Block, pyo.ConcreteModel, Any], None] = _no_start):
    """Decorator: register ``add(block, model, spec)`` as the constraint kind ``kind``."""

    def decorate(add: Callable[[pyo.Block, pyo.ConcreteModel, Any], None]):
        CONSTRAINT_KINDS[kind] = ConstraintKind(add, start)
        return add

    return decorate


def add_constraint(m: pyo.ConcreteModel, spec: Any, name: str | None = None) -> pyo.Block:
    """Add one constraint (a schema object, or anything with the same fields) as the block ``m.<name>``."""
    name = name or f"user_{spec.kind}_{len(m.user_blocks)}"
    block = pyo.Block()
    setattr(m, name, block)
    CONSTRAINT_KINDS[spec.kind].add(block, m, spec)
    m.user_blocks.append((block, spec))
    return block


@register_constraint("availability")
def add_availability(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    """``n[g] <= max_gpus``."""
    block.cap = pyo.Constraint(expr=m.n[spec.gpu] <= spec.max_gpus)


def _start_budget(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    routed = {b: sum(pyo.value(m.x[b, g]) for g in m.G if (b, g) in m.BG) for b in m.B}
    if spec.admission == "per_bucket":
        for b in m.B:
            block.served[b].set_value(routed[b])
    else:
        block.served.set_value(min(routed.values(), default=1.0))


@register_constraint("budget", start=_start_budget)
def add_budget(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    """``cost <= max_cost_per_hour``; route rows admit ``served`` shares; objective ``max served_rps``."""
    block.cap = pyo.Constraint(expr=m.cost <= spec.max_cost_per_hour)
    m.route.deactivate()
    if spec.admission == "per_bucket":
        block.served = pyo.Var(m.B, bounds=(0, 1))
        block.route = pyo.Constraint(m.B, rule=lambda _, b: _routed(m, b) == block.served[b])
    else:
        block.served = pyo.Var(bounds=(0, 1))
        block.route = pyo.Constraint(m.B, rule=lambda _, b: _routed(m, b) == block.served)
    m.objective.deactivate()
    block.objective = pyo.Objective(expr=m.served_rps, sense=pyo.maximize)


@register_constraint("gpu_mix")
def add_gpu_mix(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    """``min_share sum_h n[h] <= n[g] <= max_share sum_h n[h]`` (trivial sides omitted)."""
    total = sum(m.n[h] for h in m.G)
    if spec.min_share > 0.0:
        block.min_share = pyo.Constraint(expr=m.n[spec.gpu] >= spec.min_share * total)
    if spec.max_share < 1.0:
        block.max_share = pyo.Constraint(expr=m.n[spec.gpu] <= spec.max_share * total)


def _start_max_types(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    for g in m.G:
        block.used[g].set_value(1 if pyo.value(m.n[g]) > 0.5 else 0)


@register_constraint("max_types", start=_start_max_types)
def add_max_types(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    """``n[g] <= N_g used[g]`` and ``sum_g used[g] <= count`` (``N_g`` = the bound on ``n[g]``)."""
    block.used = pyo.Var(m.G, domain=pyo.Binary)
    block.link = pyo.Constraint(m.G, rule=lambda _, g: m.n[g] <= m.gpu_bounds[g] * block.used[g])
    block.count = pyo.Constraint(expr=sum(block.used[g] for g in m.G) <= spec.count)


def _start_node_multiple(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    block.nodes.set_value(round(pyo.value(m.n[spec.gpu]) / spec.gpus_per_node))


@register_constraint("node_multiple", start=_start_node_multiple)
def add_node_multiple(block: pyo.Block, m: pyo.ConcreteModel, spec: Any) -> None:
    """``n[g] = gpus_per_node nodes[g]``, ``nodes`` integer."""
    block.nodes = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(0, m.gpu_bounds[spec.gpu] // spec.gpus_per_node))
    block.link = pyo.Constraint(expr=m.n[spec.gpu] == spec.gpus_per_node * block.nodes)


def minimise_cost_at(m: pyo.ConcreteModel, served_rps: float) -> None:
    """Second phase of a budget model: keep ``served_rps`` (to a relative 1e-6) and minimise cost instead."""
    for objective in list(m.component_data_objects(pyo.Objective, active=True)):
        objective.deactivate()
    m.served_floor = pyo.Constraint(expr=m.served_rps >= served_rps - SERVED_FLOOR_TOLERANCE * max(1.0, served_rps))
    m.objective.activate()


# ---------------------------------------------------------------- plans in and out


def extract(m: pyo.ConcreteModel, method: str = "milp") -> ProfiledPlan:
    """The plan of a solved model: integer GPUs per type and routing shares per bucket.

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
                row.append(value if value > 1e-9 else 0.0)
        routing.append(tuple(row))
    return ProfiledPlan(method, problem.gpu_names, gpus, tuple(routing))


def warm_start(m: pyo.ConcreteModel, plan: ProfiledPlan) -> None:
    """Load ``plan`` as the MIP start; every variable gets a value (user blocks through their ``start``).

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
    for block, spec in m.user_blocks:
        CONSTRAINT_KINDS[spec.kind].start(block, m, spec)
