"""The fleet MILP's GPU-count bounds never cut off a plan the constraints allow.

An exact model that reports "infeasible" on a feasible instance, or a cost
above a plan the constraints allow, is wrong.  On the toy instance (split
routing) every random mix of ``fixed`` counts, node multiples, availability
and budgets is checked against plans the evaluator scores directly: the
sweep's threshold plans (every gamma of its grid) and the one-pool plan, at
every GPU count pair up to a limit, filtered by the same constraint check
the CLI applies to heuristic plans.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optfleet.errors import InfeasibleError
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.constraint_check import constraint_violations
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.milp_data import prepare_milp_data
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.schema import (
    AvailabilityConstraint,
    BudgetConstraint,
    FixedConstraint,
    NodeMultipleConstraint,
)
from optfleet.models.fleet import service_gpu_bounds
from optfleet.problems.fleet.constraints import gpu_bounds

from support import fleet_problem

pytestmark = pytest.mark.solved

TOY = fleet_problem("toy")
WINDOWS = (2000, 4000)
LIMIT = 420  # GPU counts enumerated per pool: above every bound the strategies below can need


def _minimum_gpus() -> list[tuple[float, int, int]]:
    """(gamma, least short GPUs, least long GPUs) of each two-pool threshold plan, and the long-only plan
    (gamma None, short 0): the evaluator's own sizing."""
    rows = []
    for gamma in TOY.gammas:
        plan = Plan((PoolPlan("short", 2000, 1), PoolPlan("long", 4000, 1)), gamma=gamma)
        short, long = evaluate(TOY, plan).pools
        rows.append((gamma, short.min_instances, long.min_instances))
    homogeneous = evaluate(TOY, Plan((PoolPlan("long", 4000, 1),))).pools[0]
    rows.append((None, 0, homogeneous.min_instances))
    return rows


MINIMUM = _minimum_gpus()


def _cheapest_allowed_plan(problem) -> Plan | None:
    """The cheapest plan of the family (module docstring) that meets the SLO and every constraint but the budget;
    None when none does.  The toy has one GPU type at $1 per GPU-hour: cost = GPUs."""
    short, long = np.meshgrid(np.arange(LIMIT + 1), np.arange(LIMIT + 1), indexing="ij")
    best = None
    for gamma, least_short, least_long in MINIMUM:
        ok = (long >= least_long) & (short >= least_short) if gamma is not None else (short == 0) & (long >= least_long)
        if gamma is not None:
            ok &= short >= 1
        for spec in problem.constraints:
            if spec.kind == "fixed":
                ok &= (short if spec.window_tokens == 2000 else long) == spec.instances
            elif spec.kind == "node_multiple":
                ok &= (short + long) % spec.gpus_per_node == 0
            elif spec.kind == "availability":
                ok &= short + long <= spec.max_gpus
        if not ok.any():
            continue
        total = np.where(ok, short + long, np.iinfo(np.int64).max)
        i, j = np.unravel_index(np.argmin(total), total.shape)
        if best is None or total[i, j] < best[0]:
            best = (int(total[i, j]), int(short[i, j]), int(long[i, j]), gamma)
    if best is None:
        return None
    _, n_short, n_long, gamma = best
    if gamma is None:
        return Plan((PoolPlan("long", 4000, n_long),))
    return Plan((PoolPlan("short", 2000, n_short), PoolPlan("long", 4000, n_long)), gamma=gamma)


constraint_sets = st.lists(
    st.one_of(
        st.builds(lambda w, g: FixedConstraint(kind="fixed", window_tokens=w, instances=g), st.sampled_from(WINDOWS), st.integers(0, 300)),
        st.builds(lambda g: NodeMultipleConstraint(kind="node_multiple", gpus_per_node=g), st.integers(1, 64)),
        st.builds(lambda a: AvailabilityConstraint(kind="availability", gpu="A100-80GB", max_gpus=a), st.integers(0, 400)),
    ),
    min_size=1,
    max_size=3,
)


def _check(constraints: list, budget: float | None) -> None:
    specs = tuple(constraints) + (() if budget is None else (BudgetConstraint(kind="budget", max_cost_per_hour=budget),))
    problem = dataclasses.replace(TOY, constraints=specs)
    reference = _cheapest_allowed_plan(problem)
    try:
        result = solve_milp(problem, routing="split", time_limit_s=30)
    except InfeasibleError as exc:
        if budget is not None and reference is not None and evaluate(problem, reference).cost_per_hour > budget:
            return  # the reference breaks the budget; a budget the cheapest GPU exceeds has no plan at all
        assert reference is None, f"MILP says infeasible ({exc}); the evaluator accepts {reference.to_dict()}"
        return
    assert result.report.proven_optimal
    evaluation = evaluate(problem, result.plan)
    assert evaluation.meets_slo and not constraint_violations(problem, evaluation)
    if reference is None:
        return  # the split-routing MILP may find plans outside the threshold family
    reference_cost = evaluate(problem, reference).cost_per_hour
    if budget is None:
        assert evaluation.cost_per_hour <= reference_cost + 1e-6
    elif reference_cost <= budget:
        assert result.plan.served_share == pytest.approx(1.0, abs=1e-6)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(constraint_sets, st.one_of(st.none(), st.floats(0.5, 400.0)))
def test_milp_is_infeasible_only_when_no_allowed_plan_exists(constraints, budget):
    _check(constraints, budget)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(constraint_sets, st.one_of(st.none(), st.floats(0.5, 400.0)))
def test_milp_is_infeasible_only_when_no_allowed_plan_exists_500_sets(constraints, budget):
    _check(constraints, budget)


@pytest.mark.parametrize(
    ("constraints", "cost"),
    [
        ([FixedConstraint(kind="fixed", window_tokens=4000, instances=100)], 100),  # the reported case: 26 suffice
        ([FixedConstraint(kind="fixed", window_tokens=4000, instances=10**9)], 10**9),
        ([NodeMultipleConstraint(kind="node_multiple", gpus_per_node=1000)], 1000),
        ([NodeMultipleConstraint(kind="node_multiple", gpus_per_node=7)], 21),  # 17 GPUs unconstrained
    ],
)
def test_constraints_that_ask_for_more_gpus_than_the_traffic_needs(constraints, cost):
    result = solve_milp(dataclasses.replace(TOY, constraints=tuple(constraints)), routing="split")
    assert result.report.proven_optimal and result.evaluation.cost_per_hour == pytest.approx(cost)


def test_bounds_widen_for_fixed_counts_and_node_multiples_and_cap_at_budgets_and_availability():
    data = prepare_milp_data(TOY)
    service = service_gpu_bounds(data)
    short, long = (next(j for j, o in enumerate(data.pools) if o.window_tokens == w) for w in WINDOWS)
    fixed = gpu_bounds(data, (FixedConstraint(kind="fixed", window_tokens=4000, instances=10**6),))
    assert fixed[long] == 10**6 and fixed[short] == service[short]
    nodes = gpu_bounds(data, (NodeMultipleConstraint(kind="node_multiple", gpus_per_node=12),
                              NodeMultipleConstraint(kind="node_multiple", gpus_per_node=8)))
    assert list(nodes) == list(service + math.lcm(12, 8) - 1)
    capped = gpu_bounds(data, (NodeMultipleConstraint(kind="node_multiple", gpus_per_node=1000),
                               AvailabilityConstraint(kind="availability", gpu="A100-80GB", max_gpus=30),
                               BudgetConstraint(kind="budget", max_cost_per_hour=12.5)))
    assert list(capped) == [12] * len(data.pools)


def test_a_python_constraint_beyond_the_bounds_is_certified_by_cost():
    bound = int(service_gpu_bounds(prepare_milp_data(TOY)).max())

    def at_least(m) -> None:
        m.gpu_bound[m.data.long_index] = 5 * bound  # the hook widens the bound it needs
        m.many = pyo.Constraint(expr=m.n[m.data.long_index] >= 3 * bound)

    result = solve_milp(TOY, routing="split", customize=at_least)
    assert result.report.proven_optimal
    assert {p.window_tokens: p.instances for p in result.plan.pools}[4000] == 3 * bound


def test_a_python_constraint_beyond_the_bounds_without_widening_them_is_explained():
    bound = int(service_gpu_bounds(prepare_milp_data(TOY)).max())

    def too_many(m) -> None:
        m.many = pyo.Constraint(expr=m.n[m.data.long_index] >= 3 * bound)

    with pytest.raises(InfeasibleError, match=r"customize.*raises m\.gpu_bound\[j\]"):
        solve_milp(TOY, routing="split", customize=too_many)
