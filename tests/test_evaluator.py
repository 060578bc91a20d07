"""The evaluator and the sweep's vectorised statistics: routing rules, and agreement on every candidate."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.pool_stats import pool_stats
from optfleet.problems.fleet.problem import prepare
from optfleet.problems.fleet.routing import route
from optfleet.problems.fleet.heuristics.sweep import candidate_table, plan_from_row, sweep
from optfleet.instance import load_instance
from optfleet.problems.fleet.workload.mix import RequestMix

from support import FLEET_INSTANCES, PAPER_WORKLOADS, fleet_problem

pytestmark = pytest.mark.unit


def test_routing_conserves_mass_and_guarantees_the_compressed_length():
    problem = fleet_problem("azure_2023")
    plan = Plan((PoolPlan("short", 4096, 0), PoolPlan("long", 65536, 0)), gamma=1.5)
    short, long = route(problem.mix, plan, problem.compressible_fraction)
    assert short.share + long.share == pytest.approx(1.0)
    assert np.all(short.l_in + short.l_out <= 4096)
    # Compressed requests end exactly at the boundary: T_c + L_out = B.
    band = problem.mix.mass_at_most(1.5 * 4096) - problem.mix.mass_at_most(4096)
    assert short.compressed_share == pytest.approx(problem.compressible_fraction * band)
    assert long.share == pytest.approx(1 - problem.mix.mass_at_most(4096) - short.compressed_share)


def test_request_with_output_beyond_the_boundary_is_not_compressed():
    mix = RequestMix.from_pairs(np.array([10, 40]), np.array([5, 110]), np.array([1.0, 1.0]))
    plan = Plan((PoolPlan("short", 100, 0), PoolPlan("long", 1000, 0)), gamma=2.0)
    short, long = route(mix, plan, compressible_fraction=1.0)
    # (40, 110): L_total 150 is in the band (100, 200] but L_out = 110 >= B = 100.
    assert short.l_in.tolist() == [10] and long.l_in.tolist() == [40]


def test_partial_compression_splits_the_band_request():
    mix = RequestMix.from_pairs(np.array([130]), np.array([20]), np.array([1.0]))
    plan = Plan((PoolPlan("short", 100, 0), PoolPlan("long", 1000, 0)), gamma=2.0)
    short, long = route(mix, plan, compressible_fraction=0.3)
    assert short.l_in.tolist() == [80] and short.weight.tolist() == pytest.approx([0.3])
    assert long.l_in.tolist() == [130] and long.weight.tolist() == pytest.approx([0.7])


def test_pool_stats_moments_by_hand():
    problem = fleet_problem("toy")
    config = problem.pool(4000)
    stats = pool_stats(config, np.array([750, 3000]), np.array([250, 1000]), np.array([0.8, 0.2]), "paper")
    mean = 0.8 * 251 + 0.2 * 1003
    second = 0.8 * 251**2 + 0.2 * 1003**2
    assert stats.mean_service_ms == pytest.approx(mean)
    assert stats.service_scv == pytest.approx(second / mean**2 - 1)
    # P99 request is the 3000-token prompt: 3 chunks of 1 ms plus one decode iteration.
    assert (stats.prefill_ms, stats.first_iteration_ms) == (3.0, 1.0)


def _assert_table_matches_evaluator(problem, every: int = 1) -> None:
    table = candidate_table(problem)
    for _, row in table.iloc[::every].iterrows():
        row = row.copy()
        row[["n_short", "n_long"]] = 0
        evaluation = evaluate(problem, plan_from_row(problem, row, "check"))
        wanted = [p.min_instances for p in evaluation.pools]
        original = table.loc[row.name]
        got = [int(original["n_long"])] if len(wanted) == 1 else [int(original["n_short"]), int(original["n_long"])]
        assert got == wanted, (row["B"], row["gamma"])


@pytest.mark.parametrize("preset", ["paper", "fleetsim_compatible"])
@pytest.mark.parametrize("workload", PAPER_WORKLOADS)
def test_sweep_statistics_equal_the_evaluator_on_every_candidate(workload, preset):
    _assert_table_matches_evaluator(fleet_problem(workload, preset), every=1 if workload == "azure_2023" else 4)


def test_length_scaled_paper_rule_uses_the_exact_per_candidate_path(tmp_path):
    data = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())
    data["hardware"]["iteration"].update({"scaling": "length_scaled", "h_ms_per_slot": 0.5, "length_scale_tokens": 4000})
    path = tmp_path / "scaled.yaml"
    path.write_text(yaml.safe_dump(data))
    _assert_table_matches_evaluator(prepare(load_instance(path)))


@pytest.mark.parametrize("rule", ["paper", "fleetsim"])
def test_band_requests_too_long_to_compress_stay_long_in_the_sweep(tmp_path, rule):
    # Output share 0.75: the 4000-token requests have L_out = 3000 >= B = 2000, so none can be compressed.
    data = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())
    data["workload"]["split"]["output_fraction"] = 0.75
    data["slo"]["ttft_rule"] = rule
    path = tmp_path / "long_outputs.yaml"
    path.write_text(yaml.safe_dump(data))
    problem = prepare(load_instance(path))
    _assert_table_matches_evaluator(problem)
    table = candidate_table(problem)
    two_pool = table[table["B"] == 2000]
    assert two_pool["instances"].nunique() == 1  # gamma changes nothing


@pytest.mark.parametrize("preset", ["paper", "fleetsim_compatible"])
def test_sweep_plans_pass_the_evaluator_and_are_minimal(preset):
    problem = fleet_problem("azure_2023", preset)
    plan = sweep(problem).plan
    assert evaluate(problem, plan).meets_slo
    for i, pool in enumerate(plan.pools):
        if pool.instances > 0:
            fewer = [p.instances - (j == i) for j, p in enumerate(plan.pools)]
            assert not evaluate(problem, plan.with_instances(fewer)).meets_slo


def test_sweep_is_never_worse_than_homogeneous_or_pool_routing():
    for workload in ("azure_2023", "lmsys_multiturn"):
        table = sweep(fleet_problem(workload, "fleetsim_compatible")).candidates
        best = table["cost_per_hour"].min()
        assert best <= table.loc[0, "cost_per_hour"]
        assert best <= table.loc[table["gamma"] == 1.0, "cost_per_hour"].min()
