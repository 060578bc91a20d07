"""The toy instance, whose every number is computed by hand in instances/fleet/toy.yaml."""

from __future__ import annotations

import pytest

from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.heuristics import homogeneous, pool_routing, retrofit, sweep

from support import fleet_problem

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def toy():
    return fleet_problem("toy")


def test_request_mix_is_the_two_hand_sizes(toy):
    mix = toy.mix
    assert mix.l_in.tolist() == [750, 3000]
    assert mix.l_out.tolist() == [250, 1000]
    assert mix.prob.tolist() == pytest.approx([0.8, 0.2], abs=1e-12)


def test_homogeneous_needs_26_gpus(toy):
    plan = homogeneous(toy)
    assert [p.instances for p in plan.pools] == [26]
    pool = evaluate(toy, plan).pools[0]
    assert pool.mean_service_ms == pytest.approx(0.8 * 251 + 0.2 * 1003)
    assert pool.load_erlangs == pytest.approx(40.14)
    assert pool.binding == "utilisation"


def test_pool_routing_needs_7_plus_13(toy):
    plan = pool_routing(toy)
    assert plan.boundary_tokens == 2000 and plan.gamma == 1.0
    assert [p.instances for p in plan.pools] == [7, 13]
    short, long = evaluate(toy, plan).pools
    assert short.load_erlangs == pytest.approx(20.08)
    assert long.load_erlangs == pytest.approx(20.06)


def test_sweep_compresses_half_the_long_requests(toy):
    result = sweep(toy)
    assert (result.plan.boundary_tokens, result.plan.gamma) == (2000, 2.0)
    assert [p.instances for p in result.plan.pools] == [10, 7]
    short, long = evaluate(toy, result.plan).pools
    # 10 req/s of the 4000-token requests cut to L_in = 2000 - 1000 = 1000: S = (1 + 1000) ms.
    assert short.compressed_share == pytest.approx(0.1)
    assert short.load_erlangs == pytest.approx(80 * 0.251 + 10 * 1.001)
    assert long.load_erlangs == pytest.approx(10 * 1.003)
    assert evaluate(toy, result.plan).cost_per_hour == pytest.approx(17.0)


def test_sweep_table_covers_every_gamma_and_homogeneous(toy):
    table = sweep(toy).candidates
    assert len(table) == 1 + len(toy.gammas)
    # gamma < 2 leaves the band (2000, gamma 2000] empty: plain pool routing.
    assert set(table.loc[(table["B"] == 2000) & (table["gamma"] < 2.0), "instances"]) == {20}


def test_retrofit_keeps_the_long_pool(toy):
    plan = retrofit(toy)
    assert plan.gamma == 2.0
    assert [p.instances for p in plan.pools] == [10, 13]
