"""The fleet MILP under the fleetsim TTFT rule (mean prefill at one slot, length-scaled iteration): the floor
levels' restriction and relaxation, the sweep's optimum reproduced in its space, never worse outside it."""

from __future__ import annotations

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.cli import main
from optfleet.errors import InfeasibleError
from optfleet.instance import load_instance
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.milp_data import floor_levels, prepare_milp_data
from optfleet.problems.fleet.problem import prepare

from support import FLEET_INSTANCES, fleet_problem

pytestmark = pytest.mark.solved


def _toy_fleetsim(tmp_path, slo_ms: float, rate_rps: float, w_ms: float, h_ms: float):
    doc = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())
    doc["slo"] = {"ttft_p99_ms": slo_ms, "rho_max": 0.8, "ttft_rule": "fleetsim"}
    doc["workload"]["rate_rps"] = rate_rps
    doc["hardware"]["iteration"] = {"w_ms": w_ms, "h_ms_per_slot": h_ms, "chunk_tokens": 1000}
    path = tmp_path / "toy_fleetsim.yaml"
    path.write_text(yaml.safe_dump(doc))
    return prepare(load_instance(path))


def test_floor_levels_by_hand():
    # s = W + H = 10 ms, SLO 35 ms, at most 4 chunks, one level per chunk.
    problem = fleet_problem("toy")
    problem = type(problem)(**{**problem.__dict__, "ttft_rule": "fleetsim", "ttft_p99_ms": 35.0})
    config = problem.pool(4000)
    config = type(config)(**{**config.__dict__, "w_ms": 7.0, "h_ms_per_slot": 3.0})
    floors, allowance = floor_levels(problem, config, 4, "restriction")
    assert floors == pytest.approx((10.0, 20.0, 30.0)) and allowance.tolist() == [1.0, 2.0, 3.0]
    floors, allowance = floor_levels(problem, config, 4, "relaxation")
    # level m holds mean chunks in (b_m, u_m]: [1, 1], (1, 2], (2, 3], (3, 4] cut at 35 / 10
    assert floors == pytest.approx((10.0, 10.0, 20.0, 30.0)) and allowance.tolist() == [1.0, 2.0, 3.0, 3.5]
    floors, allowance = floor_levels(problem, config, 4, "relaxation", resolution=2)
    assert floors == pytest.approx((10.0, 10.0, 15.0, 20.0, 25.0, 30.0)) and allowance.tolist() == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]


def test_the_relaxations_floors_are_never_above_the_restrictions():
    problem = fleet_problem("azure_2023", "fleetsim_compatible")
    for resolution in (1, 2):
        tight = prepare_milp_data(problem, "restriction", resolution)
        loose = prepare_milp_data(problem, "relaxation", resolution)
        for a, b in zip(tight.pools, loose.pools, strict=True):
            assert b.levels >= a.levels
            assert np.all(np.asarray(b.level_floors_ms[: a.levels]) <= np.asarray(a.level_floors_ms))


@settings(max_examples=25, deadline=None)
@given(slo_ms=st.floats(200, 4000), rate_rps=st.floats(0.5, 30), w_ms=st.floats(0.5, 40), h_ms=st.floats(0, 20))
def test_in_the_sweeps_space_the_milp_finds_the_sweeps_optimum_and_bounds_it(tmp_path_factory, slo_ms, rate_rps, w_ms, h_ms):
    problem = _toy_fleetsim(tmp_path_factory.mktemp("toy"), slo_ms, rate_rps, w_ms, h_ms)
    try:
        swept = evaluate(problem, sweep(problem).plan).cost_per_hour
    except InfeasibleError:
        with pytest.raises(InfeasibleError):
            solve_milp(problem, routing="sweep")
        return
    result = solve_milp(problem, routing="sweep")
    assert result.evaluation.meets_slo
    assert result.report.bound <= swept + 1e-6  # the relaxation's bound holds for the sweep's plan
    assert result.evaluation.cost_per_hour >= swept - 1e-6  # the sweep is exhaustive in its own space
    if result.report.proven_optimal:
        assert result.evaluation.cost_per_hour == pytest.approx(swept)
    unrestricted = solve_milp(problem, routing="split")
    assert unrestricted.evaluation.meets_slo and unrestricted.evaluation.cost_per_hour <= swept + 1e-6


def test_split_refreshes_do_not_swap_two_failing_routings(tmp_path):
    """Found by the property test above at HiGHS 1.15: split routing alternated between two routings, each fitting
    the other's R_j and failing the evaluator at its own, until the refreshes ran out (milp.py: R_j only rise once
    a plan fails)."""
    problem = _toy_fleetsim(tmp_path, 1927.0, 1.998300589621067, 40.0, 0.0)
    result = solve_milp(problem, routing="split")
    assert result.evaluation.meets_slo and result.evaluation.cost_per_hour <= evaluate(problem, sweep(problem).plan).cost_per_hour + 1e-6


@pytest.mark.parametrize("name, swept, split", [
    ("azure_2023", 249.73, 221.0),
    pytest.param("lmsys_multiturn", 125.97, 125.97, marks=pytest.mark.slow),
    pytest.param("agent_heavy", 4090.71, 4090.71, marks=pytest.mark.slow),
])
def test_paper_workloads_under_the_fleetsim_rule(name, swept, split):
    problem = fleet_problem(name, "fleetsim_compatible")
    assert evaluate(problem, sweep(problem).plan).cost_per_hour == pytest.approx(swept)
    in_space = solve_milp(problem, routing="sweep")
    assert in_space.report.proven_optimal and in_space.evaluation.cost_per_hour == pytest.approx(swept)
    for routing in ("threshold", "split"):
        result = solve_milp(problem, routing=routing)
        assert result.report.proven_optimal and result.evaluation.meets_slo
        assert result.evaluation.cost_per_hour == pytest.approx(split) and result.report.bound == pytest.approx(split, rel=1e-6)


def test_gap_under_the_fleetsim_preset_has_a_proven_bound(capsys):
    import json

    assert main(["gap", str(FLEET_INSTANCES / "azure_2023.yaml"), "--preset", "fleetsim_compatible", "--json"]) == 0
    rows = {row["method"]: row for row in json.loads(capsys.readouterr().out)["rows"]}
    assert rows["milp"]["status"] == "optimal" and rows["milp"]["bound"] == pytest.approx(221.0)
    assert rows["sweep"]["gap_pct"] == pytest.approx(100 * (249.73 - 221.0) / 221.0, abs=0.01)


def test_split_routing_finds_the_one_pool_plan_its_refreshed_moments_excluded(tmp_path):
    """Found by the property test above at HiGHS 1.15: the refreshed model's optimum (13 $/h, two pools) was
    reported optimal while the sweep's one-pool plan costs 12; the long pool's E[S^2]/E[S] over all traffic is below
    its refreshed value.  The relaxation at the least class moments contains that plan and returns it."""
    problem = _toy_fleetsim(tmp_path, 200.0, 1.099609375, 1.0, 15.546875)
    swept = evaluate(problem, sweep(problem).plan).cost_per_hour
    result = solve_milp(problem, routing="split")
    assert swept == pytest.approx(12.0)
    assert result.evaluation.meets_slo and result.evaluation.cost_per_hour == pytest.approx(swept)
    assert result.report.bound <= swept + 1e-6


@pytest.mark.parametrize("name, preset", [("azure_2023", None), ("lmsys_multiturn", None), ("azure_2023", "fleetsim_compatible")])
def test_no_pool_of_any_plan_has_moments_below_the_least_class_ratio(name, preset):
    problem = fleet_problem(name, preset) if preset else fleet_problem(name)
    data = prepare_milp_data(problem)
    windows = [pool.window_tokens for pool in data.pools]
    plans = [sweep(problem).plan, solve_milp(problem, routing="split").plan]
    for plan in plans:
        for pool in evaluate(problem, plan).pools:
            if pool.share > 0:
                j = windows.index(pool.window_tokens)
                assert (1 + pool.service_scv) * pool.mean_service_ms >= data.least_ratio_ms[j] * (1 - 1e-9)


def test_when_no_refreshed_model_passes_the_sweeps_plan_stands(tmp_path):
    """Found by the property test above at HiGHS 1.15: split routing's six refreshed models each returned a plan
    whose short pool broke the SLO at its own moments, and the MILP raised "no plan" on an instance the sweep
    solves at 8 $/h.  The sweep's plan is now the result, against the relaxation's bound."""
    problem = _toy_fleetsim(tmp_path, 3998.0, 0.5048866271972656, 38.25, 4.42578125)
    swept = evaluate(problem, sweep(problem).plan).cost_per_hour
    result = solve_milp(problem, routing="split")
    assert result.evaluation.meets_slo and result.evaluation.cost_per_hour <= swept + 1e-6
    assert result.report.bound <= result.evaluation.cost_per_hour + 1e-6
