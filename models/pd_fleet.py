"""Aggregated or prefill/decode-disaggregated fleets as a Pyomo MILP (contracts in docs/architecture.md).

Data (optfleet/problems/pd_fleet/sizing.py): for every busy pool ``p``, aggregated candidates ``a`` with their least
count ``n_a`` (the fleet kind's batching sizing) and (prefill, decode) pairs ``d`` with their Pareto frontier
``{(x_dk, y_dk)}`` (the analytic pool model); each candidate's instances cost ``c`` $/h and hold ``tp`` GPUs of one
type; ``U`` bounds each count (the driver certifies that no bound cuts off the optimum).

Variables
    pick_agg[a]   binary        pool p takes aggregated candidate a
    n_agg[a]      integer >= 0  its instances
    pick_pt[d,k]  binary        pool p takes pair d at frontier point k
    x[d], y[d]    integer >= 0  the pair's prefill and decode instances

Constraints
    (1) one_option[p]   sum_{a of p} pick_agg[a] + sum_{d of p, k} pick_pt[d,k] = 1
    (2) agg_least[a]    n_agg[a] >= n_a pick_agg[a];        agg_open[a]: n_agg[a] <= U_a pick_agg[a]
    (3) prefill_least[d] x[d] >= sum_k x_dk pick_pt[d,k];   decode_least[d]: y[d] >= sum_k y_dk pick_pt[d,k]
        pair_open[d]    x[d] <= U_d sum_k pick_pt[d,k],  y[d] <= U_d sum_k pick_pt[d,k]
    n[g]     = sum of tp x instances over every candidate (both roles, every pool) on GPU type g   (GPUs of type g)
    cost     = sum of c x instances                        ($/h);   objective: min cost

Counts may exceed the chosen point (the feasible counts are an up-set), so user constraints (``fixed``, ``gpu_mix``)
can add instances.  User constraints (instance ``constraints:``) are Blocks ``m.user_<kind>_<i>`` (the contract:
models/constraints.py):

    budget        cap: cost <= max_cost_per_hour            (models/profiled_constraints.py's formulation)
    power         cap: sum_g power_g n[g] <= max_power_w
    availability  cap: n[g] <= max_gpus                     (models/profiled_constraints.py's formulation)
    gpu_mix       min_share sum_h n[h] <= n[g] <= max_share sum_h n[h]   (models/profiled_constraints.py's formulation)
    fixed         pin: n[g] = gpus

Python constraints go straight on the model: ``m = build(problem, candidates); m.cap = pyo.Constraint(expr=
m.n["H100-SXM"] <= 64); solve(m)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyomo.environ as pyo
from optfleet.models.constraints import start_user_constraints
from optfleet.models.linear import scaled, total

if TYPE_CHECKING:
    from optfleet.problems.pd_fleet.problem import PdProblem
    from optfleet.problems.pd_fleet.sizing import AggregatedCandidate, PairCandidate


@dataclass(frozen=True)
class PdCandidates:
    """What the MILP chooses among: aggregated and pair candidates (sizing.py) and a count bound per candidate."""

    aggregated: tuple[AggregatedCandidate, ...]
    pairs: tuple[PairCandidate, ...]
    aggregated_bound: tuple[int, ...]
    pair_bound: tuple[int, ...]


def build(problem: PdProblem, candidates: PdCandidates) -> pyo.ConcreteModel:
    """The MILP of ``problem`` over ``candidates`` (module docstring)."""
    m = pyo.ConcreteModel(name=f"pd_fleet:{problem.name}")
    m.problem = problem
    m.candidates = candidates
    m.user_constraints = []
    add_aggregated_vars(m)
    add_pair_vars(m)
    add_one_option_rows(m)
    add_gpu_counts_and_cost(m)
    m.objective = pyo.Objective(expr=m.cost, sense=pyo.minimize)
    return m


def add_aggregated_vars(m: pyo.ConcreteModel) -> None:
    """``pick_agg[a]``, ``n_agg[a]`` and (2) ``n_a pick_agg[a] <= n_agg[a] <= U_a pick_agg[a]``."""
    c: PdCandidates = m.candidates
    m.A = pyo.RangeSet(0, len(c.aggregated) - 1) if c.aggregated else pyo.Set(initialize=[])
    m.pick_agg = pyo.Var(m.A, domain=pyo.Binary)
    m.n_agg = pyo.Var(m.A, domain=pyo.NonNegativeIntegers, bounds=lambda _, a: (0, c.aggregated_bound[a]))
    m.agg_least = pyo.Constraint(m.A, rule=lambda m, a: m.n_agg[a] >= c.aggregated[a].min_instances * m.pick_agg[a])
    m.agg_open = pyo.Constraint(m.A, rule=lambda m, a: m.n_agg[a] <= c.aggregated_bound[a] * m.pick_agg[a])


def add_pair_vars(m: pyo.ConcreteModel) -> None:
    """``pick_pt[d,k]``, ``x[d]``, ``y[d]`` and (3) the frontier rows."""
    c: PdCandidates = m.candidates
    m.D = pyo.RangeSet(0, len(c.pairs) - 1) if c.pairs else pyo.Set(initialize=[])
    m.DK = pyo.Set(initialize=[(d, k) for d, pair in enumerate(c.pairs) for k in range(len(pair.frontier))], dimen=2)
    m.pick_pt = pyo.Var(m.DK, domain=pyo.Binary)
    m.x = pyo.Var(m.D, domain=pyo.NonNegativeIntegers, bounds=lambda _, d: (0, c.pair_bound[d]))
    m.y = pyo.Var(m.D, domain=pyo.NonNegativeIntegers, bounds=lambda _, d: (0, c.pair_bound[d]))

    def points(d: int) -> list[tuple[int, tuple[int, int]]]:
        return list(enumerate(c.pairs[d].frontier))

    m.prefill_least = pyo.Constraint(m.D, rule=lambda m, d: m.x[d] >= scaled([(float(xy[0]), m.pick_pt[d, k]) for k, xy in points(d)]))
    m.decode_least = pyo.Constraint(m.D, rule=lambda m, d: m.y[d] >= scaled([(float(xy[1]), m.pick_pt[d, k]) for k, xy in points(d)]))
    m.prefill_open = pyo.Constraint(m.D, rule=lambda m, d: m.x[d] <= c.pair_bound[d] * total([m.pick_pt[d, k] for k, _ in points(d)]))
    m.decode_open = pyo.Constraint(m.D, rule=lambda m, d: m.y[d] <= c.pair_bound[d] * total([m.pick_pt[d, k] for k, _ in points(d)]))


def add_one_option_rows(m: pyo.ConcreteModel) -> None:
    """(1) every busy pool takes exactly one candidate (a pool without any is the empty row ``0 = 1``: infeasible)."""
    c: PdCandidates = m.candidates
    pools = [pool.index for pool in m.problem.busy_pools]
    m.P = pyo.Set(initialize=pools)

    def row(m: pyo.ConcreteModel, p: int):
        picks = [m.pick_agg[a] for a, cand in enumerate(c.aggregated) if cand.pool == p]
        picks += [m.pick_pt[d, k] for d, pair in enumerate(c.pairs) if pair.pool == p for k in range(len(pair.frontier))]
        if not picks:
            return pyo.Constraint.Infeasible
        return total(picks) == 1

    m.one_option = pyo.Constraint(m.P, rule=row)


def add_gpu_counts_and_cost(m: pyo.ConcreteModel) -> None:
    """``n[g]``, the GPUs of type g (both roles, every pool), and ``cost`` ($/h)."""
    problem: PdProblem = m.problem
    c: PdCandidates = m.candidates
    terms: dict[str, list[tuple[float, Any]]] = {g: [] for g in problem.gpus}
    cost: list[tuple[float, Any]] = []
    for a, cand in enumerate(c.aggregated):
        option = problem.aggregated[cand.option]
        terms[option.gpu].append((float(option.tp), m.n_agg[a]))
        cost.append((option.cost_per_instance_hour, m.n_agg[a]))
    for d, pair in enumerate(c.pairs):
        for option, var in ((problem.prefill[pair.prefill], m.x[d]), (problem.decode[pair.decode], m.y[d])):
            terms[option.gpu].append((float(option.tp), var))
            cost.append((option.cost_per_instance_hour, var))
    m.G = pyo.Set(initialize=list(problem.gpus), ordered=True)
    m.n = pyo.Expression(m.G, rule=lambda m, g: scaled(terms[g]) if terms[g] else 0)
    m.cost = pyo.Expression(expr=scaled(cost) if cost else 0)


# ---------------------------------------------------------------- user constraints of this kind only (models/constraints.py contract)


def formulate_power(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``cap: sum_g power_g n[g] <= max_power_w``."""
    block.cap = pyo.Constraint(expr=sum(m.problem.power_of(g) * m.n[g] for g in m.G) <= spec.max_power_w)


def formulate_fixed(m: pyo.ConcreteModel, block: pyo.Block, i: int, spec: Any) -> None:
    """``pin: n[g] = gpus``."""
    block.pin = pyo.Constraint(expr=m.n[spec.gpu] == spec.gpus)


# ---------------------------------------------------------------- solutions out, plans in


@dataclass(frozen=True)
class PdSolution:
    """A solved model in numbers: per busy pool, ``("aggregated", a, n)`` or ``("pair", d, x, y)`` (candidate indices)."""

    choices: dict[int, tuple]


def extract(m: pyo.ConcreteModel) -> PdSolution:
    """The chosen candidate of every busy pool with its integer counts."""
    c: PdCandidates = m.candidates
    choices: dict[int, tuple] = {}
    for a, cand in enumerate(c.aggregated):
        if pyo.value(m.pick_agg[a]) > 0.5:
            choices[cand.pool] = ("aggregated", a, int(round(pyo.value(m.n_agg[a]))))
    for d, pair in enumerate(c.pairs):
        if any(pyo.value(m.pick_pt[d, k]) > 0.5 for k in range(len(pair.frontier))):
            choices[pair.pool] = ("pair", d, int(round(pyo.value(m.x[d]))), int(round(pyo.value(m.y[d]))))
    return PdSolution(choices)


def warm_start(m: pyo.ConcreteModel, solution: PdSolution) -> None:
    """Load ``solution`` (candidate indices and counts, e.g. a baseline's) as the MIP start: each pair's frontier point
    is the last one its counts dominate; every other variable starts at 0."""
    c: PdCandidates = m.candidates
    for var in m.component_data_objects(pyo.Var):
        var.set_value(0)
    for choice in solution.choices.values():
        if choice[0] == "aggregated":
            _, a, n = choice
            m.pick_agg[a].set_value(1)
            m.n_agg[a].set_value(n)
        else:
            _, d, x, y = choice
            dominated = [k for k, (xk, yk) in enumerate(c.pairs[d].frontier) if xk <= x and yk <= y]
            if dominated:
                m.pick_pt[d, dominated[-1]].set_value(1)
            m.x[d].set_value(x)
            m.y[d].set_value(y)
    start_user_constraints(m)

