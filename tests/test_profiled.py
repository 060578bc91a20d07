"""Profiled-throughput fleets (Mélange-style): the public example, brute force, constraints, bad input.

Mélange (arXiv:2404.14527; github.com/tyler-griggs/melange-release) publishes a
toy example: A10G $1.01/h with max rates [[2, 1], [5, 2]] req/s, A100-80GB
$3.67/h with [[20, 20], [40, 20]], bucket shares [[0.2, 0.1], [0.5, 0.2]] of
30 req/s.  Bucket rates 6, 3, 15, 6 req/s; A10G load 3 instances per bucket;
A100 loads 0.3, 0.15, 0.375, 0.3 (1.125 in all).  Every number below is
computed by the model and checked against that arithmetic:

* whole buckets (one slice): one bucket on 3 A10G, the rest on one A100:
  3 x 1.01 + 3.67 = $6.70/h;
* slices of 1/2, 1/4, 1/16 (Mélange's slice_factor): 0.125 of A100 load must
  move to A10G; the cheapest move costs 1.5 A10G-loads -> 2 A10G + 1 A100 = $5.69/h;
* fractional (continuous) splitting: exactly 1/3 of bucket (in 1, out 0) moves
  to A10G (A10G load 1.0, A100 load 1.0, both at 100 %): 1 A10G + 1 A100 = $4.68/h;
  with any utilisation cap below 1 that tight fit fails and $5.69/h returns.
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyomo.environ as pyo
import pytest
import yaml
from optfleet.models import profiled as model_lib
from optfleet.solvers import solve
from scipy.optimize import linprog
from support import REPO

import optfleet
from optfleet.errors import InfeasibleError, InputError
from optfleet.hardware import get_gpu
from optfleet.problems.fleet.schema import MaxTypesConstraint
from optfleet.problems.profiled_fleet import ProfiledPlan, evaluate, greedy_cost_per_request, plan_from_dict, single_type_plan
from optfleet.problems.profiled_fleet.baselines import single_type_fleet
from optfleet.problems.profiled_fleet.constraints import PROFILED_CONSTRAINTS
from optfleet.problems.profiled_fleet.report import render_plan
from optfleet.problems.profiled_fleet.solve import extract_plan, solve_profiled

pytestmark = pytest.mark.solved

INSTANCES = REPO / "instances" / "profiled"
EXAMPLE = INSTANCES / "melange_example.yaml"
BASE: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
COST_TOL = 1e-6


def _problem(data: dict[str, Any]):
    return optfleet.load(data).problem


def load_profiled(path: Path):
    return optfleet.load(path).problem


def _with(**changes: Any) -> dict[str, Any]:
    """The example's data with top-level blocks replaced or merged (dicts merge one level deep)."""
    data = copy.deepcopy(BASE)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(key), dict):
            data[key] = {**data[key], **value}
        else:
            data[key] = value
    return data


# ---------------------------------------------------------------- the Mélange regression


def test_melange_example_whole_buckets_is_6_70():
    problem = load_profiled(EXAMPLE)
    result = solve_profiled(problem)
    assert result.report.proven_optimal
    assert result.plan.gpus == (3, 1)
    assert result.evaluation.cost_per_hour == pytest.approx(6.70, abs=COST_TOL)
    assert result.evaluation.feasible
    assert all(sorted(row) == [0.0, 1.0] for row in result.plan.routing)  # every bucket whole on one type
    # One bucket (any: each is 3 A10G of load and at least 0.125 of the A100's 1.125) goes to the A10Gs.
    assert sum(row[0] for row in result.plan.routing) == 1.0
    assert result.evaluation.types[0].load_instances == pytest.approx(3.0)


@pytest.mark.parametrize("slices", [2, 4, 16])
def test_melange_example_sliced_is_5_69(slices):
    result = solve_profiled(load_profiled(EXAMPLE).with_splitting(slices))
    assert result.report.proven_optimal
    assert result.plan.gpus == (2, 1)
    assert result.evaluation.cost_per_hour == pytest.approx(5.69, abs=COST_TOL)
    assert result.evaluation.feasible


def test_melange_example_fractional_is_4_68_at_full_load_and_5_69_with_headroom():
    problem = load_profiled(EXAMPLE).with_splitting(None)
    exact = solve_profiled(problem)
    assert exact.plan.gpus == (1, 1)
    assert exact.evaluation.cost_per_hour == pytest.approx(4.68, abs=COST_TOL)
    big_short = next(b for b in problem.buckets if (b.input_bucket, b.output_bucket) == (1, 0))
    assert exact.plan.routing[big_short.index][0] == pytest.approx(1 / 3, abs=1e-7)
    assert [t.utilisation for t in exact.evaluation.types] == [pytest.approx(1.0, abs=1e-7)] * 2
    headroom = solve_profiled(replace(problem, max_utilisation=0.99))
    assert headroom.plan.gpus == (2, 1)
    assert headroom.evaluation.cost_per_hour == pytest.approx(5.69, abs=COST_TOL)


def test_melange_example_single_types_greedy_and_gap_table():
    outcome = optfleet.run_gap(EXAMPLE)
    by = {r["method"]: r for r in outcome.rows}
    assert set(by) == {"milp", "milp:A10G", "milp:A100-80GB", "greedy-cost-per-request"}
    assert by["milp:A10G"]["fleet"] == "12 A10G" and by["milp:A10G"]["gpus"] == 12 and by["milp:A10G"]["instances"] == 12
    plans = {r["method"]: r["plan"] for r in outcome.to_dict()["rows"]}
    assert plans["milp:A10G"]["gpus"] == {"A10G": 12, "A100-80GB": 0}
    assert by["milp:A10G"]["objective"] == pytest.approx(12.12) and by["milp:A10G"]["objective_unit"] == "$/h"
    assert by["milp:A100-80GB"]["cost_per_hour"] == pytest.approx(7.34)
    assert by["milp"]["gap_pct"] == pytest.approx(0.0, abs=1e-7)
    assert by["milp:A100-80GB"]["gap_pct"] == pytest.approx(100 * (7.34 - 6.70) / 6.70)  # in % of the bound
    assert all(r["status"] in ("optimal", "heuristic") for r in outcome.rows)
    savings = outcome.summary["mixed_vs_best_single_type"]
    assert savings["best_single_type"] == "A100-80GB"
    assert savings["savings_pct"] == pytest.approx(100 * 0.64 / 7.34)
    text = outcome.text()
    assert "milp:A10G" in text and "8.72 % saved" in text


def test_single_type_milp_equals_closed_form():
    problem = load_profiled(EXAMPLE)
    for name in problem.gpu_names:
        exact = single_type_fleet(problem, name)
        assert exact.plan.gpus == single_type_plan(problem, name).gpus


def test_warm_start_reaches_highs_and_plan_round_trips():
    problem = load_profiled(EXAMPLE)
    result = solve_profiled(problem)
    assert result.report.counts["mip_starts"] == 1 and result.report.counts["feasible_mip_starts"] == 1
    again = plan_from_dict(problem, result.plan.to_dict(problem))
    assert again.gpus == result.plan.gpus and again.routing == result.plan.routing
    assert "3 A10G + 1 A100-80GB" in render_plan(problem, result.evaluation, result.report)


# ---------------------------------------------------------------- brute force on tiny instances


def _brute_force(problem) -> tuple[float, float] | None:
    """(served req/s, $/h) of the best plan by enumerating every slice assignment and every GPU vector.

    GPU vectors run up to a generous bound (twice what every type needs to carry all it can serve,
    plus 8).  Fractional splitting: every GPU vector, cheapest first, with an LP feasibility check of
    the routing.  Independent of the model and the evaluator: loads, caps and constraints are
    recomputed here.
    """
    gpus, buckets = problem.gpus, problem.demand_buckets
    u, s = problem.max_utilisation, problem.slices_per_bucket
    budget = problem.budget
    load = np.array([[b.rate_rps / g.max_rps[b.index] if g.max_rps[b.index] > 0 else np.inf for g in gpus] for b in buckets])
    rates = np.array([b.rate_rps for b in buckets])
    price = np.array([g.cost_per_gpu_hour for g in gpus])
    per_instance = np.array([g.gpus_per_instance for g in gpus])
    bound = 2 * sum(problem.gpus_to_carry(sum(x for x in load[:, g] if np.isfinite(x)), g) for g in range(len(gpus))) + 8
    vectors = np.array(list(itertools.product(range(bound + 1), repeat=len(gpus))))
    total = vectors.sum(axis=1)
    ok = np.all(vectors % per_instance == 0, axis=1)
    for c in problem.constraints:
        if c.kind == "availability":
            ok &= vectors[:, problem.gpu_index(c.gpu)] <= c.max_gpus
        elif c.kind == "node_multiple":
            ok &= vectors[:, problem.gpu_index(c.gpu)] % c.gpus_per_node == 0
        elif c.kind == "max_types":
            ok &= (vectors > 0).sum(axis=1) <= c.count
        elif c.kind == "gpu_mix":
            mine = vectors[:, problem.gpu_index(c.gpu)]
            ok &= (mine >= c.min_share * total - 1e-9) & (mine <= c.max_share * total + 1e-9)
        elif c.kind == "budget":
            ok &= vectors @ price <= c.max_cost_per_hour + 1e-9
    vectors = vectors[ok]
    cost = vectors @ price
    caps = u * (vectors // per_instance)
    order = np.argsort(cost, kind="stable")
    if s is None:
        for i in order:
            if _lp_routes(load, caps[i]):
                return float(rates.sum()), float(cost[i])
        return None
    per_bucket = []
    for b in range(len(buckets)):
        options = [
            c for c in itertools.product(range(s + 1), repeat=len(gpus))
            if (sum(c) == s or (budget is not None and sum(c) <= s)) and all(c[g] == 0 or np.isfinite(load[b, g]) for g in range(len(gpus)))
        ]
        per_bucket.append(options)
    combos = list(itertools.product(*per_bucket))
    if budget is not None and budget.admission == "uniform":
        combos = [c for c in combos if len({sum(x) for x in c}) == 1]
    shares = np.array(combos, dtype=float) / s  # combos x buckets x types
    loads = np.einsum("cbg,bg->cg", shares, np.where(np.isfinite(load), load, 0.0))
    served = np.einsum("cbg,b->c", shares, rates)
    if budget is None:
        for i in order:
            if np.all(loads <= caps[i] * (1 + 1e-9) + 1e-9, axis=1).any():
                return float(rates.sum()), float(cost[i])
        return None
    best = None
    for chunk in np.array_split(order, max(1, len(order) // 256)):
        fits = np.all(loads[None, :, :] <= caps[chunk, None, :] * (1 + 1e-9) + 1e-9, axis=2)
        most = np.where(fits, served[None, :], -np.inf).max(axis=1)
        for i, value in zip(chunk, most, strict=True):
            if np.isfinite(value):
                key = (-float(value), float(cost[i]))
                best = key if best is None or key < best else best
    return None if best is None else (-best[0], best[1])


def _lp_routes(load: np.ndarray, cap: np.ndarray) -> bool:
    nb, ng = load.shape
    allowed = np.isfinite(load)
    finite = np.where(allowed, load, 0.0)
    a_eq = np.zeros((nb, nb * ng))
    a_ub = np.zeros((ng, nb * ng))
    for b in range(nb):
        for g in range(ng):
            a_eq[b, b * ng + g] = 1.0
            a_ub[g, b * ng + g] = finite[b, g]
    bounds = [(0.0, 1.0 if allowed[b, g] else 0.0) for b in range(nb) for g in range(ng)]
    result = linprog(np.zeros(nb * ng), A_ub=a_ub, b_ub=cap + 1e-9, A_eq=a_eq, b_eq=np.ones(nb), bounds=bounds, method="highs")
    return result.status == 0


def _random_instance(seed: int, splitting: str) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    n_types = 2 if splitting != "slices" or seed % 3 else 3
    grid = (2, 2) if n_types == 2 else (1, 3)
    cells = grid[0] * grid[1]
    shares = rng.dirichlet(np.ones(cells))
    shares = np.round(shares, 3)
    shares[-1] = round(1.0 - shares[:-1].sum(), 3)
    if shares[-1] < 0:
        shares = np.full(cells, 1.0 / cells)
    tables = rng.integers(1, 16, size=(n_types, cells)).astype(float)
    tables[rng.random((n_types, cells)) < 0.15] = 0.0
    for b in range(cells):
        if not tables[:, b].any():
            tables[rng.integers(n_types), b] = float(rng.integers(1, 16))
    gpus = [
        {
            "name": f"G{g}",
            "cost_per_gpu_hour": float(rng.choice([0.5, 1.0, 1.5, 2.5, 4.0])),
            "gpus_per_instance": int(rng.choice([1, 1, 1, 2])),
            "max_rps": tables[g].reshape(grid).tolist(),
        }
        for g in range(n_types)
    ]
    routing: dict[str, Any] = {"splitting": splitting, "max_utilisation": float(rng.choice([1.0, 0.9]))}
    if splitting == "slices":
        routing["slices_per_bucket"] = int(rng.choice([1, 1, 2, 3])) if n_types == 2 else int(rng.choice([1, 2]))
    pool = [
        {"kind": "availability", "gpu": "G0", "max_gpus": int(rng.integers(0, 6))},
        {"kind": "gpu_mix", "gpu": "G1", "min_share": float(rng.choice([0.0, 0.25, 0.5])), "max_share": float(rng.choice([0.5, 0.75, 1.0]))},
        {"kind": "max_types", "count": 1},
        {"kind": "node_multiple", "gpu": f"G{int(rng.integers(n_types))}", "gpus_per_node": int(rng.choice([2, 4]))},
    ]
    chosen = [c for c in pool if rng.random() < 0.35]
    for c in chosen:
        if c["kind"] == "gpu_mix" and c["min_share"] > c["max_share"]:
            c["min_share"] = 0.0
    return {
        "kind": "profiled_fleet",
        "name": f"random-{seed}",
        "buckets": {"input_edges_tokens": list(range(0, 100 * (grid[0] + 1), 100)), "output_edges_tokens": list(range(0, 100 * (grid[1] + 1), 100))},
        "workload": {"rate_rps": float(rng.integers(2, 14)), "shares": shares.reshape(grid).tolist()},
        "gpus": gpus,
        "routing": routing,
        "constraints": chosen,
    }


def _check_against_brute_force(data: dict[str, Any]) -> None:
    problem = _problem(data)
    expected = _brute_force(problem)
    try:
        result = solve_profiled(problem)
    except InfeasibleError as exc:
        assert expected is None, f"{data['name']}: MILP says infeasible ({exc}) but brute force finds {expected}"
        assert str(exc)  # an explanation, never empty
        return
    assert expected is not None, f"{data['name']}: MILP found {result.plan} but brute force finds nothing"
    assert result.evaluation.feasible
    served, cost = expected
    assert result.evaluation.served_rps == pytest.approx(served, rel=1e-6, abs=1e-6), data["name"]
    assert result.evaluation.cost_per_hour == pytest.approx(cost, abs=COST_TOL), data["name"]


@pytest.mark.parametrize("seed", range(30))
def test_sliced_milp_matches_brute_force(seed):
    _check_against_brute_force(_random_instance(seed, "slices"))


@pytest.mark.parametrize("seed", range(100, 106))
def test_fractional_milp_matches_brute_force(seed):
    _check_against_brute_force(_random_instance(seed, "fractional"))


@pytest.mark.parametrize(("seed", "admission"), [(s, a) for s in range(200, 206) for a in ("per_bucket", "uniform")])
def test_budget_milp_matches_brute_force(seed, admission):
    data = _random_instance(seed, "slices")
    problem = _problem({**data, "constraints": []})
    full = greedy_cost_per_request(problem)
    cap = 0.6 * evaluate(problem, full).cost_per_hour
    data["constraints"] = [c for c in data["constraints"] if c["kind"] != "gpu_mix"] + [
        {"kind": "budget", "max_cost_per_hour": cap, "admission": admission}
    ]
    _check_against_brute_force(data)


# ---------------------------------------------------------------- each constraint kind


def test_availability_instance():
    problem = load_profiled(INSTANCES / "melange_availability.yaml")
    result = solve_profiled(problem)
    assert result.plan.gpus == (30, 8)
    assert result.evaluation.cost_per_hour == pytest.approx(59.66, abs=COST_TOL)
    rows = {r["method"]: r for r in optfleet.run_gap(INSTANCES / "melange_availability.yaml").rows}
    assert rows["milp:A100-80GB"]["status"] == "no_plan"
    assert "availability" in rows["milp:A100-80GB"]["note"]
    assert rows["greedy-cost-per-request"]["status"] == "heuristic" and not rows["greedy-cost-per-request"]["feasible"]
    assert rows["greedy-cost-per-request"]["gap_pct"] is None


def test_availability_too_small_names_bucket_type_and_cap():
    data = _with(workload={"rate_rps": 300})
    data["gpus"][0]["max_rps"] = [[2, 1], [0, 2]]  # A10G cannot serve (in 500-2000, out 0-500)
    data["constraints"] = [{"kind": "availability", "gpu": "A100-80GB", "max_gpus": 2}]
    with pytest.raises(InfeasibleError) as info:
        solve_profiled(_problem(data))
    message = str(info.value)
    assert "bucket (in 500-2000, out 0-500) carries 150 req/s" in message
    assert "needs 3.75 A100-80GB GPUs, but availability caps A100-80GB at 2 (constraints[0])" in message
    assert "A10G cannot serve it" in message


def test_budget_maximises_served_rate_then_cost():
    data = _with(constraints=[{"kind": "budget", "max_cost_per_hour": 6.0}])
    result = solve_profiled(_problem(data))
    assert result.objective_name == "served_rps"
    assert result.evaluation.cost_per_hour <= 6.0 + COST_TOL
    assert result.evaluation.served_rps < 30.0
    assert result.evaluation.feasible
    # Brute force (independent) agrees on both the served rate and the cheapest cost at that rate.
    served, cost = _brute_force(_problem(data))
    assert result.evaluation.served_rps == pytest.approx(served)
    assert result.evaluation.cost_per_hour == pytest.approx(cost)
    roomy = solve_profiled(_problem(_with(constraints=[{"kind": "budget", "max_cost_per_hour": 100.0}])))
    assert roomy.evaluation.served_rps == pytest.approx(30.0) and roomy.evaluation.cost_per_hour == pytest.approx(6.70)


def test_gpu_mix_instance():
    problem = load_profiled(INSTANCES / "melange_gpu_mix.yaml")
    result = solve_profiled(problem)
    assert result.plan.gpus == (8, 11)
    assert result.evaluation.cost_per_hour == pytest.approx(48.45, abs=COST_TOL)
    assert result.plan.gpus[1] <= 0.6 * result.plan.total_gpus
    unconstrained = solve_profiled(problem.with_constraints(()))
    assert unconstrained.plan.gpus == (0, 12)


def test_max_types_one_gives_best_single_type():
    result = solve_profiled(_problem(_with(constraints=[{"kind": "max_types", "count": 1}])))
    assert result.plan.gpus == (0, 2)
    assert result.evaluation.cost_per_hour == pytest.approx(7.34, abs=COST_TOL)


def test_node_multiple_rounds_to_whole_nodes():
    data = _with(constraints=[{"kind": "node_multiple", "gpu": "A100-80GB", "gpus_per_node": 8}])
    result = solve_profiled(_problem(data))
    assert result.plan.gpus == (12, 0)  # 8 A100 ($29.36) lose to 12 A10G ($12.12)
    cheap_nodes = _with(constraints=[{"kind": "node_multiple", "gpu": "A10G", "gpus_per_node": 4}])
    result = solve_profiled(_problem(cheap_nodes))
    assert result.plan.gpus[0] % 4 == 0
    # The whole-bucket mix's 3 A10G would round up to a 4-GPU node: 4 x 1.01 + 3.67 = 7.71 > 2 A100 = 7.34.
    assert result.plan.gpus == (0, 2)
    assert result.evaluation.cost_per_hour == pytest.approx(7.34, abs=COST_TOL)


def test_gpus_per_instance_counts_whole_instances():
    data = _with()
    data["gpus"][1]["gpus_per_instance"] = 2  # the table is then per 2-GPU instance
    result = solve_profiled(_problem(data))
    assert result.plan.gpus[1] % 2 == 0
    assert result.evaluation.feasible


def test_contradictory_shares_are_explained():
    data = _with(constraints=[
        {"kind": "gpu_mix", "gpu": "A10G", "min_share": 0.6},
        {"kind": "gpu_mix", "gpu": "A100-80GB", "min_share": 0.6},
    ])
    with pytest.raises(InfeasibleError) as info:
        solve_profiled(_problem(data))
    assert "minimum shares add up to 1.2 > 1" in str(info.value)
    assert "constraints[0]" in str(info.value) and "constraints[1]" in str(info.value)


def test_constraints_infeasible_only_together_name_each():
    data = _with(constraints=[
        {"kind": "availability", "gpu": "A10G", "max_gpus": 4},
        {"kind": "availability", "gpu": "A100-80GB", "max_gpus": 1},
        {"kind": "max_types", "count": 1},
    ])
    with pytest.raises(InfeasibleError) as info:
        solve_profiled(_problem(data))
    message = str(info.value)
    assert "dropping any one of" in message
    for i in range(3):
        assert f"constraints[{i}]" in message


def test_unservable_bucket_is_explained():
    data = _with()
    data["gpus"][0]["max_rps"] = [[2, 0], [5, 2]]
    data["gpus"][1]["max_rps"] = [[20, 0], [40, 20]]
    with pytest.raises(InfeasibleError, match=r"bucket \(in 0-500, out 500-2000\) carries 3 req/s and no GPU type can serve it"):
        solve_profiled(_problem(data))


def test_python_constraints_on_the_built_model():
    problem = load_profiled(EXAMPLE).with_splitting(4)
    m = model_lib.build(problem)
    m.cap = pyo.Constraint(expr=m.cost <= 6)
    report = solve(m)
    assert report.proven_optimal and report.objective == pytest.approx(5.69)
    plan = extract_plan(m)
    assert evaluate(problem, plan).feasible
    m.tighter = pyo.Constraint(expr=m.cost <= 5.5)
    assert solve(m).status == "infeasible"
    # A declarative kind added from Python: one type only -> 2 A100-80GB.
    one_type = model_lib.build(problem)
    block = PROFILED_CONSTRAINTS.add(one_type, MaxTypesConstraint(kind="max_types", count=1))
    assert block is one_type.user_max_types_0
    assert solve(one_type).objective == pytest.approx(7.34)
    # The same through the driver's hook; a constraint forcing more GPUs than the
    # default bound makes the driver widen the bounds instead of failing.
    forced = solve_profiled(problem, customize=lambda m: setattr(m, "many", pyo.Constraint(expr=m.n["A10G"] >= 20)))
    assert forced.plan.gpus[0] == 20 and forced.gpu_bound_scale > 1


# ---------------------------------------------------------------- the evaluator on hand-made plans


def test_evaluator_flags_overload_ineligible_routing_and_partial_slices():
    data = _with()
    data["gpus"][0]["max_rps"] = [[2, 0], [5, 2]]  # A10G cannot serve (in 0-500, out 500-2000)
    problem = _problem(data)
    names = problem.gpu_names
    too_small = ProfiledPlan("hand", names, (0, 1), tuple((0.0, 1.0) for _ in problem.buckets))
    assert any("A100-80GB is overloaded" in v for v in evaluate(problem, too_small).violations)
    wrong_type = ProfiledPlan("hand", names, (12, 0), tuple((1.0, 0.0) for _ in problem.buckets))
    assert any("cannot serve it" in v for v in evaluate(problem, wrong_type).violations)
    halves = ProfiledPlan("hand", names, (6, 2), tuple((0.5, 0.5) for _ in problem.buckets))
    assert any("not a whole number of its 1 slice" in v for v in evaluate(problem, halves).violations)
    unrouted = ProfiledPlan("hand", names, (0, 2), ((0.0, 1.0), (0.0, 1.0), (0.0, 1.0), (0.0, 0.0)))
    assert any("only 0 % routed" in v for v in evaluate(problem, unrouted).violations)
    with pytest.raises(InputError, match="plan.routing"):
        evaluate(problem, ProfiledPlan("hand", names, (0, 2), ((0.0, 1.0),)))


# ---------------------------------------------------------------- bad input


def _load(tmp_path: Path, data: dict[str, Any]):
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_profiled(path)


def _gpu(index: int, **changes: Any) -> list[dict[str, Any]]:
    gpus = copy.deepcopy(BASE["gpus"])
    gpus[index].update(changes)
    return [{k: v for k, v in g.items() if v is not None} for g in gpus]


BAD_INPUT = [
    ("negative throughput", _with(gpus=_gpu(0, max_rps=[[2, -1], [5, 2]])), "gpus.0.max_rps.0.1", "greater than or equal to 0"),
    ("shares not summing to 1", _with(workload={"shares": [[0.2, 0.1], [0.5, 0.3]]}), "workload.shares", "sum to 1.1"),
    ("unknown GPU without a price", _with(gpus=_gpu(1, name="Z9000", cost_per_gpu_hour=None)), "gpus[1].cost_per_gpu_hour", "Z9000"),
    ("throughput table of the wrong shape", _with(gpus=_gpu(0, max_rps=[[2, 1, 3], [5, 2, 3]])), "gpus[0].max_rps", "2 x 2 table"),
    ("shares of the wrong shape", _with(workload={"shares": [[0.3, 0.2, 0.1], [0.2, 0.1, 0.1]]}), "workload.shares", "2 x 2 table"),
    ("edges not increasing", _with(buckets={"input_edges_tokens": [0, 500, 500]}), "buckets.input_edges_tokens", "increase strictly"),
    ("rate <= 0", _with(workload={"rate_rps": 0}), "workload.rate_rps", "greater than 0"),
    ("zero slices", _with(routing={"slices_per_bucket": 0}), "routing.slices_per_bucket", "greater than or equal to 1"),
    ("slices with fractional splitting", _with(routing={"splitting": "fractional", "slices_per_bucket": 4}), "routing", "slices_per_bucket applies only"),
    ("constraint on an unknown GPU", _with(constraints=[{"kind": "availability", "gpu": "H100", "max_gpus": 2}]), "constraints[0].gpu", "not a GPU type"),
    ("gpu_mix min above max", _with(constraints=[{"kind": "gpu_mix", "gpu": "A10G", "min_share": 0.7, "max_share": 0.5}]), "constraints[0].min_share", "exceeds max_share"),
    ("two budgets", _with(constraints=[{"kind": "budget", "max_cost_per_hour": 5}, {"kind": "budget", "max_cost_per_hour": 6}]), "constraints[1].kind", "at most one budget"),
    ("unknown constraint kind", _with(constraints=[{"kind": "max_pools", "count": 2}]), "constraints.0", "max_pools"),
    ("duplicate GPU type", _with(gpus=[BASE["gpus"][0], BASE["gpus"][0]]), "gpus[1].name", "appears twice"),
    ("unknown field (typo)", _with(workload={"rate_rp": 3}), "workload.rate_rp", "Extra inputs"),
    ("unknown kind", _with(kind="profiled"), "kind", "profiled_fleet"),
]


@pytest.mark.parametrize(("label", "data", "field", "text"), BAD_INPUT, ids=[c[0] for c in BAD_INPUT])
def test_bad_input_names_the_field(tmp_path, label, data, field, text):
    with pytest.raises(InputError) as info:
        _load(tmp_path, data)
    assert info.value.field == field, str(info.value)
    assert text in str(info.value)


def test_catalog_price_when_none_is_given(tmp_path):
    problem = _load(tmp_path, _with(gpus=_gpu(0, cost_per_gpu_hour=None)))
    assert problem.gpus[0].cost_per_gpu_hour == get_gpu("A10G").cost_per_gpu_hour
    assert problem.gpus[0].price_source.startswith("catalog")
    assert math.isclose(problem.gpus[1].cost_per_gpu_hour, 3.67)


def test_bounds_are_certified_by_cost_or_widened_to_hold_every_cheaper_plan():
    from optfleet.problems.profiled_fleet.solve import _uncertified

    problem = load_profiled(EXAMPLE)  # A10G $1.01/GPU-h, A100-80GB $3.67/GPU-h
    bounds = {"A10G": 4, "A100-80GB": 2}
    assert _uncertified(problem, bounds, 5.0) is None  # a plan beyond either bound costs more than 5.05 > 5
    wider = _uncertified(problem, bounds, 12.12)  # 12 A10G cost 12.12: beyond the A10G bound
    assert wider == {"A10G": 12, "A100-80GB": 3}
    assert _uncertified(problem, wider, 12.12) is None
