"""optfleet explain on the routing kind's threshold design (issue 39): duals by finite differences, monotone curves,
break-even, alternatives (bad input and output: tests/test_explain_cli_kinds.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet import api
from optfleet.problems.fleet.schema import BudgetConstraint, NodeMultipleConstraint
from optfleet.problems.routing import explain as routing_explain
from optfleet.problems.routing.design import evaluate_design
from optfleet.solvers.sensitivity import fixed_lp_sensitivity
from tests.support import REPO
from tests.test_explain import shifted_objective

TINY = REPO / "instances" / "routing" / "tiny.yaml"
HETERO = {"fleet__instance": "../fleet/toy_hetero.yaml"}  # the tiny stream on the two-type toy catalog


def hetero_problem(*constraints):
    problem = api.load(TINY, **HETERO).problem
    return replace(problem, fleet=replace(problem.fleet, constraints=tuple(constraints)))


def test_duals_match_finite_differences_under_whole_nodes():
    """With whole 4-GPU nodes the node row carries the dual (one more GPU of H100 in the fixed node count costs its
    price); every dual shown equals the fixed LP's change in cost per unit of its row's bound, both directions
    inside the bound's range."""
    problem = hetero_problem(NodeMultipleConstraint(kind="node_multiple", gpus_per_node=4))
    solved = routing_explain.solve(problem)
    model, _ = routing_explain.plan_model(problem, solved.detail)
    continuous = lambda m: [m.n]  # noqa: E731
    lp = fixed_lp_sensitivity(model, continuous=continuous(model))
    shown = routing_explain.dual_frame(model, lp)
    assert len(shown) >= 1
    for _, row in shown.iterrows():
        delta = 1e-3 * max(1.0, abs(row["bound"]))
        steps = [d for d in (delta, -delta) if row["bound_low"] <= row["bound"] + d <= row["bound_high"]]
        assert steps
        for step in steps:
            slope = (shifted_objective(model, row["row"], step, continuous) - lp.report.objective) / step
            assert slope == pytest.approx(row["dual"], rel=1e-6, abs=1e-7)


def test_sizing_rows_price_an_instance_at_its_price():
    """On the one-type toy fleet both pools sit at their fewest instances: each sizing row binds and its shadow price is
    the pool's $/instance-hour (d cost / d N_j = pi_j), checked by one instance fewer in the fixed LP."""
    problem = api.load(TINY).problem
    solved = routing_explain.solve(problem)
    model, picked = routing_explain.plan_model(problem, solved.detail)
    lp = fixed_lp_sensitivity(model, continuous=[model.n])
    frame = routing_explain.dual_frame(model, lp)
    assert set(frame["row"]) == {model.fewest[j].name for j in picked.values()}
    for j in picked.values():
        row = frame[frame["row"] == model.fewest[j].name].iloc[0]
        assert row["shadow_price"] == pytest.approx(model.data.pools[j].cost_per_instance_hour)
        one_fewer = shifted_objective(model, row["row"], 1.0, lambda m: [m.n])  # -n_j <= -N_j + 1
        assert lp.report.objective - one_fewer == pytest.approx(row["shadow_price"])


def test_explained_plan_is_the_design_method_scored_by_the_evaluator():
    """Regression on the shipped tiny instance: the plan explained is the design MILP's, its cost the evaluator's."""
    problem = api.load(TINY).problem
    solved = routing_explain.solve(problem)
    assert solved.plan == "C=2000 B=1400 gamma=1: short A100-80GB x7 + long A100-80GB x13"
    assert solved.objective == pytest.approx(evaluate_design(problem, solved.detail).cost_per_hour) == pytest.approx(20.0)
    result = optfleet.explain(TINY, near_optimal=False)
    binding = result.tables()["binding"]
    assert binding[binding["row"] == "misroute"].iloc[0]["slack"] == pytest.approx(0.01)  # no request mis-routed at B = 1400
    assert binding[binding["row"].str.startswith("fewest")]["binds"].all()
    assert list(result.curves["percentile"]["percentile"]) == [0.95, 0.99]


@settings(max_examples=4, deadline=None)
@given(st.lists(st.floats(min_value=0.002, max_value=0.2), min_size=2, max_size=3, unique=True))
def test_cost_never_rises_with_epsilon(epsilons):
    """A larger epsilon only adds rules to the feasible set: the optimum is non-increasing in it."""
    problem = api.load(TINY, **HETERO).problem
    epsilon = routing_explain.parameters(problem)["epsilon"]
    costs = [routing_explain.solve(epsilon.apply(problem, e)).objective for e in sorted(epsilons)]
    assert all(b <= a + 1e-9 for a, b in zip(costs, costs[1:]))


@settings(max_examples=4, deadline=None)
@given(st.lists(st.floats(min_value=0.5, max_value=2.5), min_size=2, max_size=3, unique=True))
def test_cost_never_falls_with_the_rate(growths):
    """Each rule splits the stream the same way at any rate and a pool's fewest instances grow with its rate: the
    least cost over the rules is non-decreasing in the rate."""
    problem = api.load(TINY, **HETERO).problem
    rate = routing_explain.parameters(problem)["rate_growth"]
    costs = [routing_explain.solve(rate.apply(problem, g)).objective for g in sorted(growths)]
    assert all(a <= b + 1e-9 for a, b in zip(costs, costs[1:]))


def test_break_even_and_alternatives_on_two_gpu_types():
    """The second-cheapest type is the H100 ($1.5/GPU-h): its break-even brackets the plan change, and the design with
    no H100 costs at least the optimum."""
    result = optfleet.explain(TINY, **HETERO)
    row = result.break_even.iloc[0]
    assert row["parameter"] == "price:H100-SXM"
    assert row["low"] < row["break_even"] and row["plan_there"] != result.base.plan
    problem = api.load(TINY, **HETERO).problem
    price = routing_explain.parameters(problem)["price:H100-SXM"]
    assert routing_explain.solve(price.apply(problem, row["low"])).plan == result.base.plan
    alternatives = result.alternatives
    assert list(alternatives["alternative"]) == ["no H100-SXM"]
    assert (alternatives["objective"] >= result.base.objective - 1e-9).all()
    assert "H100" not in alternatives.iloc[0]["plan"]


def test_the_warm_price_session_gives_the_full_solves_design():
    """Repricing one computed grid (and the budget's bounds) gives each price's full solve, plan and cost, including
    where the budget leaves no design; the other parameters have no warm path."""
    problem = hetero_problem(BudgetConstraint(kind="budget", max_cost_per_hour=19.5))
    price = routing_explain.parameters(problem)["price:H100-SXM"]
    warm = routing_explain.session(problem, "price:H100-SXM")
    for value in (1.5, 1.74, 1.76, 3.0, 0.5):
        at = price.apply(problem, value)
        full, repriced = routing_explain.solve(at), warm(at)
        assert (repriced.objective, repriced.plan, repriced.status) == (full.objective, full.plan, full.status)
    assert routing_explain.session(problem, "rate_growth") is None
