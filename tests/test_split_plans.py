"""Split routing rules in plans: the evaluator and the simulator follow them; bad rules are refused."""

from __future__ import annotations

import json

import pytest

from optfleet.errors import InputError
from optfleet.problems.fleet import Plan, PoolPlan, evaluate
from optfleet.problems.fleet.plan import RouteRule
from optfleet.problems.fleet.heuristics import size_plan, sweep
from optfleet.problems.fleet.simulate import simulate_plan

from support import fleet_problem

pytestmark = pytest.mark.unit

POOLS = (PoolPlan("short", 2000, 10), PoolPlan("long", 4000, 7))


def _rules_plan(*rules: RouteRule) -> Plan:
    return Plan(POOLS, rules=rules)


def test_rules_reproduce_the_threshold_plan_exactly():
    problem = fleet_problem("toy")
    threshold = sweep(problem).plan
    ruled = _rules_plan(RouteRule(0, 2000, (("short", 1.0),)), RouteRule(2000, 4000, (("long", 0.5),), (("short", 0.5),)))
    for a, b in zip(evaluate(problem, threshold).pools, evaluate(problem, ruled).pools, strict=True):
        assert (a.load_erlangs, a.min_instances, a.ttft_p99_ms) == pytest.approx((b.load_erlangs, b.min_instances, b.ttft_p99_ms))


def test_split_shares_move_load_proportionally():
    problem = fleet_problem("toy")
    plan = _rules_plan(RouteRule(0, 2000, (("short", 0.75), ("long", 0.25))), RouteRule(2000, 4000, (("long", 1.0),)))
    short, long = evaluate(problem, plan).pools
    assert short.load_erlangs == pytest.approx(0.75 * 80 * 0.251)
    assert long.load_erlangs == pytest.approx(0.25 * 80 * 0.251 + 20 * 1.003)


def test_rules_round_trip_through_json():
    plan = _rules_plan(RouteRule(0, 2000, (("short", 1.0),)), RouteRule(2000, 4000, (("long", 0.6),), (("short", 0.4),), out_below=1500))
    assert Plan.from_dict(json.loads(json.dumps(plan.to_dict()))) == plan


@pytest.mark.parametrize(("rules", "message"), [
    ((RouteRule(0, 2000, (("short", 1.0),)),), "covered by 0 rules"),
    ((RouteRule(0, 4000, (("long", 1.0),)), RouteRule(0, 2000, (("short", 1.0),))), "covered by 2 rules"),
    ((RouteRule(0, 4000, (("short", 1.0),)),), "longer than the pool's window"),
    ((RouteRule(0, 2000, (("short", 1.0),)), RouteRule(2000, 4000, (("long", 0.2),), (("short", 0.8),))), "more than p_c"),
])
def test_bad_rules_are_refused(rules, message):
    with pytest.raises(InputError, match=message):
        evaluate(fleet_problem("toy"), _rules_plan(*rules))


def test_rule_shares_must_sum_to_one():
    with pytest.raises(InputError, match="sum to 1"):
        _rules_plan(RouteRule(0, 4000, (("long", 0.5),)))


def test_simulator_follows_the_split_shares():
    problem = fleet_problem("toy")
    plan = size_plan(problem, _rules_plan(RouteRule(0, 2000, (("short", 0.75), ("long", 0.25))), RouteRule(2000, 4000, (("long", 0.5),), (("short", 0.5),))))
    analytic = evaluate(problem, plan)
    assert analytic.meets_slo
    simulated = simulate_plan(problem, plan, requests=60_000, reps=2, seed=4)
    for pool in analytic.pools:
        assert simulated.metrics[pool.name]["utilisation"][0] == pytest.approx(pool.utilisation, rel=0.05)
