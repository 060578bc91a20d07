"""The fleet MILP over a GPU catalog (heterogeneous pools) and its constraints, checked by brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import linprog

from optfleet.errors import InfeasibleError, InputError
import optfleet
from optfleet.hardware.profiles import derive_profile
from optfleet.instance import load_instance
from optfleet.instance.loader import read_document
from optfleet.problems.fleet.constraint_check import constraint_violations
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.heuristics import FLEET_METHODS
from optfleet.problems.fleet.kind import single_type_methods
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.problem import FleetProblem, prepare

from support import FLEET_INSTANCES, fleet_problem

pytestmark = pytest.mark.solved

TOY = FLEET_INSTANCES / "toy_hetero.yaml"


def _toy_document(**changes) -> dict:
    data = read_document(TOY)
    data.update(changes)
    return data


def _toy(**changes) -> FleetProblem:
    return optfleet.load(_toy_document(**changes)).problem


def _brute_force_cost(problem: FleetProblem, max_pools: int, extra=lambda n, options: True) -> float:
    """Cheapest GPU-count vector over every option for which a fractional routing meets every cap.

    The toy's SLO is loose, so a pool is feasible iff its load is within
    ``rho_max x slots x n``; a routing exists iff a small LP is feasible.
    """
    mix = problem.mix
    options = [(f, w) for w in problem.option_windows for f in problem.options if f.slots_per_instance(w) >= 1]
    load = np.array([
        [problem.rate_rps * mix.prob[i] * f.pool(w).service_ms(mix.l_in[i:i + 1], mix.l_out[i:i + 1])[0] / 1000.0 if mix.l_total[i] <= w else np.nan
         for f, w in options]
        for i in range(len(mix.prob))
    ])
    capacity = np.array([problem.rho_max * f.slots_per_instance(w) for f, w in options])
    price = np.array([f.cost_per_instance_hour for f, _ in options])
    upper = [int(np.ceil(np.nansum(load[:, j]) / capacity[j])) + 1 for j in range(len(options))]
    vectors = sorted(itertools.product(*(range(u + 1) for u in upper)), key=lambda n: float(np.dot(price, n)))
    fits = ~np.isnan(load)
    pairs = [(i, j) for i in range(load.shape[0]) for j in range(load.shape[1]) if fits[i, j]]
    for n in vectors:
        if sum(v > 0 for v in n) > max_pools or not extra(n, options):
            continue
        a_eq = np.zeros((load.shape[0], len(pairs)))
        a_ub = np.zeros((len(options), len(pairs)))
        for c, (i, j) in enumerate(pairs):
            a_eq[i, c] = 1.0
            a_ub[j, c] = load[i, j]
        bounds = [(0, 1 if n[j] > 0 else 0) for _, j in pairs]
        if linprog(np.zeros(len(pairs)), A_ub=a_ub, b_ub=capacity * np.array(n), A_eq=a_eq, b_eq=np.ones(load.shape[0]), bounds=bounds, method="highs").status == 0:
            return float(np.dot(price, n))
    raise AssertionError("no feasible vector")


def test_toy_hetero_matches_brute_force_and_beats_every_single_type() -> None:
    problem = prepare(load_instance(TOY))
    result = solve_milp(problem, routing="split", max_pools=4)
    assert result.report.proven_optimal
    assert result.evaluation.cost_per_hour == pytest.approx(_brute_force_cost(problem, 4))
    assert result.evaluation.cost_per_hour == pytest.approx(13.0)
    assert result.evaluation.meets_slo
    assert {p.gpu for p in result.plan.pools} == {"A100-80GB", "H100-SXM"}
    outcome = optfleet.run_gap(TOY, ["milp", "milp:A100-80GB", "milp:H100-SXM"], solve__routing="split", solve__max_pools=4)
    rows = {r["method"]: r for r in outcome.rows}
    assert rows["milp:H100-SXM"]["cost_per_hour"] == pytest.approx(_brute_force_cost(problem.with_options(problem.options[1:]), 4)) == pytest.approx(13.5)
    assert rows["milp:A100-80GB"]["cost_per_hour"] == pytest.approx(17.0)
    assert outcome.summary["mixed_vs_best_single_type"]["savings_pct"] == pytest.approx(100 * (1 - 13.0 / 13.5), abs=1e-3)


def test_single_type_restriction_equals_the_model_without_a_catalog() -> None:
    problem = prepare(load_instance(TOY))
    plain = _toy(gpu_catalog=None, pools={"long_window_tokens": 4000, "short_window_candidates": [1000]})
    restricted = solve_milp(problem.with_options(problem.options[:1]), routing="split", max_pools=4)
    assert restricted.evaluation.cost_per_hour == pytest.approx(solve_milp(plain, routing="split", max_pools=4).evaluation.cost_per_hour)


@pytest.mark.parametrize(
    ("constraint", "check"),
    [
        ({"kind": "availability", "gpu": "H100-SXM", "max_gpus": 4}, lambda n, o: sum(v for v, (f, _) in zip(n, o) if f.gpu_name == "H100-SXM") <= 4),
        ({"kind": "max_types", "count": 1}, lambda n, o: len({f.gpu_name for v, (f, _) in zip(n, o) if v > 0}) <= 1),
        ({"kind": "gpu_mix", "gpu": "A100-80GB", "min_share": 0.5}, lambda n, o: 2 * sum(v for v, (f, _) in zip(n, o) if f.gpu_name == "A100-80GB") >= sum(n)),
        ({"kind": "node_multiple", "gpus_per_node": 4}, lambda n, o: all(sum(v for v, (f, _) in zip(n, o) if f.gpu_name == g) % 4 == 0 for g in ("A100-80GB", "H100-SXM"))),
    ],
    ids=["availability", "max_types", "gpu_mix", "node_multiple"],
)
def test_constraints_match_brute_force(constraint, check) -> None:
    problem = _toy(constraints=[constraint])
    result = solve_milp(problem, routing="split", max_pools=4)
    assert result.report.proven_optimal and result.evaluation.meets_slo
    assert result.evaluation.cost_per_hour == pytest.approx(_brute_force_cost(problem, 4, check))
    assert constraint_violations(problem, result.evaluation) == []


def test_heuristic_plans_are_checked_against_the_constraints() -> None:
    problem = _toy(constraints=[{"kind": "availability", "gpu": "A100-80GB", "max_gpus": 10}, {"kind": "node_multiple", "gpus_per_node": 8}])
    homogeneous = evaluate(problem, FLEET_METHODS["homogeneous"](problem))  # 26 A100 at 4000 tokens
    assert constraint_violations(problem, homogeneous) == [
        "constraints[0] (availability): 26 A100-80GB GPUs > 10",
        "constraints[1] (node_multiple): 26 A100-80GB GPUs is not a multiple of 8",
    ]
    (row,) = optfleet.run_gap(_toy_document(constraints=[{"kind": "availability", "gpu": "A100-80GB", "max_gpus": 10},
                                                         {"kind": "node_multiple", "gpus_per_node": 8}]), ["homogeneous"]).rows
    assert row["status"] == "heuristic" and not row["feasible"] and row["gap_pct"] is None
    assert row["note"] == ("breaks constraints[0] (availability): 26 A100-80GB GPUs > 10; "
                           "breaks constraints[1] (node_multiple): 26 A100-80GB GPUs is not a multiple of 8")


def test_availability_counts_gpus_of_tensor_parallel_instances() -> None:
    problem = _toy(
        gpu_catalog={"gpus": ["H100-SXM"], "tp": [2], "windows": [1000, 4000],
                     "overrides": [{"gpu": "H100-SXM", "w_ms": 0.5, "h_ms_per_slot": 0.0, "kv_tokens_per_gpu": 8000, "cost_per_gpu_hour": 1.5}]},
        constraints=[{"kind": "availability", "gpu": "H100-SXM", "max_gpus": 8}],
    )
    with pytest.raises(InfeasibleError, match="constraints\\[0\\] \\(availability\\)"):
        solve_milp(problem, routing="split", max_pools=4)


def test_fixed_pins_a_configuration_and_unknown_ones_are_named() -> None:
    problem = _toy(constraints=[{"kind": "fixed", "window_tokens": 4000, "gpu": "A100-80GB", "instances": 3}])
    result = solve_milp(problem, routing="split", max_pools=4)
    assert [p.instances for p in result.plan.pools if p.gpu == "A100-80GB" and p.window_tokens == 4000] == [3]
    bad = _toy(constraints=[{"kind": "fixed", "window_tokens": 2000, "gpu": "H100-SXM", "instances": 1}])
    with pytest.raises(InputError, match="H100-SXM"):
        solve_milp(bad, routing="split", max_pools=4)


def test_constraint_on_a_type_outside_the_catalog_is_an_input_error() -> None:
    with pytest.raises(InputError, match="L40S"):
        solve_milp(_toy(constraints=[{"kind": "availability", "gpu": "L40S", "max_gpus": 1}]), routing="split", max_pools=4)


def test_heterogeneous_plan_round_trips_through_json_and_the_evaluator() -> None:
    problem = prepare(load_instance(TOY))
    plan = solve_milp(problem, routing="split", max_pools=4).plan
    again = type(plan).from_dict(plan.to_dict())
    assert evaluate(problem, again).cost_per_hour == pytest.approx(evaluate(problem, plan).cost_per_hour)
    with pytest.raises(InputError, match="plan.pools.gpu"):
        evaluate(problem, type(plan).from_dict({**plan.to_dict(), "pools": [{**p, "gpu": "B200"} for p in plan.to_dict()["pools"]]}))


def test_sweep_routing_is_refused_over_a_catalog() -> None:
    with pytest.raises(InputError, match="solve.routing"):
        solve_milp(prepare(load_instance(TOY)), routing="sweep")


CATALOG_PINS = {  # mixed optimum, best single type and its cost (benchmarks/results/heterogeneous.md)
    "azure_2023_catalog": (1274.08, "H100-SXM", 1323.48),
    "azure_2023_catalog_16_h100": (1651.36, "H200", 1751.92),
    "lmsys_llama3_8b_catalog": (392.74, "H100-SXM", 392.74),
}


def test_catalog_options_use_first_principles_profiles() -> None:
    problem = fleet_problem("azure_2023_catalog")
    labels = [o.label for o in problem.options]
    assert "L40S x4" in labels and "A100-80GB x8" in labels
    config = problem.pool(8192, "H100-SXM x8")
    profile = derive_profile("H100-SXM", "Llama-3-70B", 8, 8192)
    assert (config.slots_per_instance, config.w_ms, config.h_ms_per_slot) == (profile.slots, profile.iteration_base_ms, profile.per_slot_ms)
    assert config.cost_per_instance_hour == pytest.approx(profile.cost_per_instance_hour)  # per instance of 8 GPUs


def test_configurations_that_cannot_hold_the_model_are_skipped_with_a_reason() -> None:
    problem = _toy(gpu_catalog={"gpus": ["A10G", "H100-SXM"], "tp": [4]}, hardware={"gpu": "H100-SXM", "tp": 4, "model": "Llama-3-70B", "iteration": {"chunk_tokens": 1000}})
    assert [o.label for o in problem.options] == ["H100-SXM x4"]
    (reason,) = problem.skipped_options
    assert reason.startswith("A10G x4: Llama-3-70B: weights 141.20 GB exceed")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CATALOG_PINS))
def test_shipped_catalog_instances_are_pinned(name: str) -> None:
    problem = fleet_problem(name)
    mixed, single_type, single_cost = CATALOG_PINS[name]
    rows = {r["method"]: r for r in optfleet.run_gap(FLEET_INSTANCES / f"{name}.yaml", ["milp", *single_type_methods(problem)]).rows}
    assert rows["milp"]["status"] == "optimal" and rows["milp"]["cost_per_hour"] == pytest.approx(mixed)
    best = min((r for m, r in rows.items() if m.startswith("milp:") and r["cost_per_hour"] is not None), key=lambda r: r["cost_per_hour"])
    assert best["method"] == f"milp:{single_type}" and best["cost_per_hour"] == pytest.approx(single_cost)
    assert rows["milp"]["cost_per_hour"] <= best["cost_per_hour"] + 1e-9


def test_an_override_of_the_hardware_blocks_own_configuration_is_refused() -> None:
    with pytest.raises(InputError, match="gpu_catalog.overrides\\[0\\]"):
        _toy(gpu_catalog={"gpus": ["A100-80GB"], "overrides": [{"gpu": "A100-80GB", "tp": 1, "w_ms": 2.0}]})


def test_a_single_type_without_a_plan_is_explained_by_the_prefill_tail_it_cannot_serve() -> None:
    (row,) = optfleet.run_gap(FLEET_INSTANCES / "azure_2023_catalog.yaml", ["milp:L40S"]).rows
    assert row["status"] == "no_plan" and row["gap_pct"] is None
    assert "TTFT floor constraints (4) cannot hold" in row["note"] and "% of the traffic has a prefill floor above the SLO" in row["note"]
