"""The fleet MILP under the continuous-batching service model (optfleet/problems/fleet/milp_batching.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet.cli import main
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.batching_pool import batching_workload, cap_seconds_per_request, meets_slo, rates_per_gpu, state_at
from optfleet.problems.fleet.heuristics import homogeneous, sweep
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.milp_data import level_caps
from optfleet.problems.fleet.pool_config import PoolConfig

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "instances/fleet/toy.yaml"
LMSYS = ROOT / "instances/fleet/lmsys_multiturn.yaml"


def config(slots: int, w_ms: float, h_ms: float, chunk: int = 256, window: int = 4096) -> PoolConfig:
    return PoolConfig(window_tokens=window, slots_per_instance=slots, w_ms=w_ms, h_ms_per_slot=h_ms, chunk_tokens=chunk,
                      length_scale_tokens=None, cost_per_instance_hour=1.0, gpu="test")


# random pools: hardware, GPUs, a mix of (L_in, L_out, weight) atoms, a load up to 1.5 x the relaxation's cap, SLO, cap
POOLS = dict(
    slots=st.integers(2, 64), w_ms=st.floats(2.0, 20.0), h_ms=st.floats(0.05, 2.0), gpus=st.integers(1, 4),
    atoms=st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 400), st.floats(0.05, 1.0)), min_size=1, max_size=5),
    load=st.floats(0.05, 1.5), slo_ms=st.floats(100.0, 3000.0), rho=st.floats(0.5, 0.95),
)


def pool_meeting_the_model(slots, w_ms, h_ms, gpus, atoms, load, slo_ms, rho):
    """``(config, chunks, weight, load per GPU, state)`` of the random pool, or None when it does not meet the batching
    SLO (the relaxation's rows need hold only for pools that do)."""
    cfg = config(slots, w_ms, h_ms)
    l_in, l_out, weight = (np.array(v) for v in zip(*atoms, strict=True))
    weight = weight / weight.sum()
    seconds = float(weight @ cap_seconds_per_request(cfg, l_in, l_out, rho))
    rate = load * rho * slots * gpus / seconds
    state = state_at(batching_workload([cfg], [(l_in, l_out, weight)], rate), [cfg], [gpus])
    if not meets_slo(state, slo_ms, rho)[0]:
        return None
    return cfg, cfg.prefill_chunks(l_in), weight, rate * seconds / gpus, state


@settings(max_examples=80, deadline=None)
@given(**POOLS)
def test_every_pool_meeting_the_model_meets_the_relaxation_rows(slots, w_ms, h_ms, gpus, atoms, load, slo_ms, rho):
    """The relaxation's rows are necessary: a pool that meets the batching SLO meets the utilisation cap on the
    slot-seconds at the cap (row 3) and, at its P99 chunk level, the level's floor (row 4) and load cap (row 7)."""
    pool = pool_meeting_the_model(slots, w_ms, h_ms, gpus, atoms, load, slo_ms, rho)
    if pool is None:
        return
    cfg, chunks, weight, per_gpu, _ = pool
    assert per_gpu <= rho * slots * (1 + 1e-9)
    level = min(m for m in range(int(chunks.max()) + 1) if weight[chunks > m].sum() <= 0.01 + 1e-12)
    assert (level + 1) * w_ms <= slo_ms * (1 + 1e-9)
    caps = level_caps(SimpleNamespace(rho_max=rho, ttft_p99_ms=slo_ms), cfg, level + 1)
    assert per_gpu <= caps[level] * (1 + 1e-9)


def test_rates_per_gpu_are_the_largest_feasible_and_rise_with_gpus():
    cfg = config(16, 8.0, 0.65, chunk=512, window=65536)
    l_in, l_out, weight = np.array([200, 4000]), np.array([300, 200]), np.array([0.6, 0.4])
    unit = batching_workload([cfg], [(l_in, l_out, weight)], 1.0)
    slo, rho = 500.0, 0.85
    ceiling = rho * 16 / float(weight @ cap_seconds_per_request(cfg, l_in, l_out, rho))
    (rates,) = rates_per_gpu(unit, [cfg], slo, rho, np.array([ceiling]))
    assert len(rates) > 1 and np.all(np.diff(rates) >= 0)  # a table: small pools carry less per GPU

    def ok(n: int, rate_per_gpu: float) -> bool:
        workload = batching_workload([cfg], [(l_in, l_out, weight)], rate_per_gpu * n)
        return bool(meets_slo(state_at(workload, [cfg], [n]), slo, rho)[0])

    for n, rate in enumerate(rates, start=1):
        assert ok(n, rate) and not ok(n, rate * 1.001)
    top = len(rates)
    assert ok(2 * top, rates[-1]) and ok(10 * top, rates[-1])  # the last entry holds from N on


@pytest.fixture(scope="module")
def toy_batching():
    return optfleet.load(TOY, slo__service_model="batching").problem


def test_one_pool_milp_is_the_brute_force(toy_batching):
    """K = 1: the only plans are one pool holding every request, the homogeneous fleet; the MILP finds it and its
    bound does not exceed it."""
    best = evaluate(toy_batching, homogeneous(toy_batching)).cost_per_hour
    result = solve_milp(toy_batching, max_pools=1)
    assert result.evaluation.meets_slo
    assert result.evaluation.cost_per_hour == pytest.approx(best)
    assert result.report.bound <= best + 1e-6


def test_milp_plan_passes_and_its_bound_is_below_every_heuristic(toy_batching):
    result = solve_milp(toy_batching)
    assert result.evaluation.meets_slo
    assert result.report.bound <= result.evaluation.cost_per_hour + 1e-6
    for plan in (sweep(toy_batching).plan, homogeneous(toy_batching)):
        assert result.report.bound <= evaluate(toy_batching, plan).cost_per_hour + 1e-6
    assert result.evaluation.cost_per_hour <= evaluate(toy_batching, sweep(toy_batching).plan).cost_per_hour + 1e-6
    resized = result.relaxation_routing  # the relaxation's routing at the evaluator's least counts: a candidate
    assert resized is not None and resized.meets_slo
    assert all(p.instances == p.min_instances for p in resized.pools if p.share > 0)
    assert result.report.bound - 1e-6 <= result.evaluation.cost_per_hour <= resized.cost_per_hour + 1e-6


@pytest.mark.slow
def test_agent_heavy_regression_under_the_batching_model():
    """Pinned to the shipped instance (benchmarks/results/batching_milp.md): the relaxation's routing, resized, is the
    plan (6,373.64 $/h against the tables' 12,937.34 before it was a candidate) and the join levels' bound is
    5,178.03 $/h (5,041.01 with the integer chunk levels)."""
    problem = optfleet.load(ROOT / "instances/fleet/agent_heavy.yaml", slo__service_model="batching").problem
    result = solve_milp(problem)
    assert result.evaluation.meets_slo and "relaxation's plan" in result.note
    assert result.evaluation.cost_per_hour == pytest.approx(6373.64, abs=0.01)
    assert result.report.bound == pytest.approx(5178.03, abs=0.01)


def test_lmsys_regression_under_the_batching_model():
    """Pinned to the shipped instance (benchmarks/results/batching_milp.md): the MILP's tables find no plan below the
    sweep's 304.98 $/h that passes, so the sweep's plan is the result, with the relaxation's bound 269.62 $/h (join
    levels; 267.41 with the integer chunk levels)."""
    problem = optfleet.load(LMSYS, slo__service_model="batching").problem
    result = solve_milp(problem)
    assert result.evaluation.meets_slo
    assert result.evaluation.cost_per_hour == pytest.approx(304.98, abs=0.01)
    assert result.report.status == "unproven"
    assert result.report.bound == pytest.approx(269.62, abs=0.01)
    assert "sweep" in result.note


def test_gap_under_the_batching_model_has_a_bound(capsys):
    code = main(["gap", str(TOY), "--set", "slo.service_model=batching", "--json", "--quiet"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    document = json.loads(captured.out)
    (reference,) = document["references"]
    assert reference["bound"] is not None and "relaxation of the batching model" in reference["reason"]
    milp = next(row for row in document["rows"] if row["method"] == "milp")
    assert milp["feasible"] and milp["bound"] <= milp["objective"] + 1e-6


def test_carry_over_starts_variables_the_previous_model_lacks_within_their_bounds():
    """A refreshed batching table can be longer than the last one: the re-solve's start must still set every variable
    (found by a review: chunk_tokens 2048 on Azure crashed with 'warm start needs a value on every variable')."""
    import pyomo.environ as pyo

    from optfleet.problems.fleet.milp import _carry_over

    previous, model = pyo.ConcreteModel(), pyo.ConcreteModel()
    previous.count = pyo.Var([0, 1], initialize={0: 1.0, 1: 0.0})
    model.count = pyo.Var([0, 1, 2])
    model.lifted = pyo.Var(bounds=(2.0, 5.0))
    _carry_over(previous, model)
    assert [model.count[i].value for i in range(3)] == [1.0, 0.0, 0.0] and model.lifted.value == 2.0


@pytest.mark.slow
def test_a_constrained_catalog_gets_a_plan_that_meets_its_constraints():
    """Found by a review: with an availability cap (at most 16 H100) no table plan passed the evaluator and the
    instance was reported infeasible, though a plan within the cap exists.  Resized plans are now candidates
    under constraints too, each checked against them."""
    from optfleet.problems.fleet.constraint_check import constraint_violations

    problem = optfleet.load(ROOT / "instances/fleet/azure_2023_catalog_16_h100.yaml", slo__service_model="batching").problem
    result = solve_milp(problem)
    assert result.evaluation.meets_slo and not constraint_violations(problem, result.evaluation)
    assert result.report.bound <= result.evaluation.cost_per_hour + 1e-6


def test_batching_infeasibility_names_the_idle_floor_not_inf(tmp_path):
    """Found by a review: under the batching model the message read 'needs P99 prefill inf ms'.  Now it gives the
    idle pool's in-GPU time to first token, and a rate no count of GPUs can carry is told as such."""
    import yaml

    from optfleet.errors import InfeasibleError

    doc = yaml.safe_load(TOY.read_text())
    doc["slo"] = {**doc["slo"], "service_model": "batching", "ttft_p99_ms": 1}
    path = tmp_path / "toy_tight.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InfeasibleError, match=r"in-GPU time to first token of \d+\.\d ms even when idle .* > SLO 1 ms") as caught:
        sweep(optfleet.load(path).problem)
    assert " inf ms" not in str(caught.value)
    doc["slo"]["ttft_p99_ms"] = 10_000
    doc["workload"]["rate_rps"] = 1e18
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InfeasibleError, match=r"needs more than 9,007,199,254,740,992 instances"):
        sweep(optfleet.load(path).problem)


@settings(max_examples=60, deadline=None)
@given(atoms=st.lists(st.tuples(st.integers(1, 8), st.floats(0.01, 1.0)), min_size=1, max_size=6), z=st.floats(1.0, 9.0))
def test_join_levels_measure_is_the_mass_whose_chunks_plus_join_pass_z(atoms, z):
    """Row (4)'s measure at a join level, from the chunk levels' ``mass above m``, is ``sum_i w_i P[X_i + J > z]`` with
    ``J`` uniform on (0, 1): ``sum_i w_i clip(X_i + 1 - z, 0, 1)``."""
    from optfleet.problems.fleet.milp_batching import JoinLevels

    chunks, weight = (np.array(v) for v in zip(*atoms, strict=True))
    k_max = 8
    mass_above = np.array([weight[chunks > m].sum() for m in range(k_max + 1)])
    measure = JoinLevels(np.array([z]), np.array([1.0])).interpolate(mass_above)[0]
    assert measure == pytest.approx(float(weight @ np.clip(chunks + 1.0 - z, 0.0, 1.0)), abs=1e-12)


@settings(max_examples=80, deadline=None)
@given(**POOLS)
def test_every_pool_meeting_the_model_meets_its_join_level(slots, w_ms, h_ms, gpus, atoms, load, slo_ms, rho):
    """The relaxation's join levels are necessary (milp_batching.join_levels): a pool meeting the batching SLO has its
    in-GPU P99 at least the floor ``f_r`` of the level r its ``P99 of X + J`` picks, that level is on the grid (within
    the SLO), its row (4) holds, and its load per GPU is within the level's cap."""
    from optfleet.problems.fleet.milp_batching import join_grid
    from optfleet.problems.fleet.milp_data import floor_caps

    pool = pool_meeting_the_model(slots, w_ms, h_ms, gpus, atoms, load, slo_ms, rho)
    if pool is None:
        return
    cfg, chunks, weight, per_gpu, state = pool
    k_max = int(np.ceil(cfg.window_tokens / cfg.chunk_tokens))
    grid = join_grid(k_max, w_ms, slo_ms)
    over = grid.interpolate(np.array([weight[chunks > m].sum() for m in range(k_max + 1)]))  # P[X + J > z_r]
    # the P99 of X + J (continuous): the least z with P[X + J > z] <= 1 %, by bisection on the exact tail
    lo, hi = 0.0, float(chunks.max()) + 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if float(weight @ np.clip(chunks + 1.0 - mid, 0.0, 1.0)) > 0.01 else (lo, mid)
    level = int(np.searchsorted(grid.z, hi - 1e-12))  # the first grid point at or above it
    assert level < len(grid.z), "the pool's level must be on the grid"
    assert over[level] <= 0.01 + 1e-12
    in_gpu_iterations = state.in_gpu_p99_ms[0] / state.iteration_ms[0]
    assert in_gpu_iterations >= grid.floor_iterations[level] - 1e-9
    cap = floor_caps(SimpleNamespace(rho_max=rho, ttft_p99_ms=slo_ms), cfg, grid.floor_iterations[level:level + 1], slo_ms * (1 + 1e-9))
    assert per_gpu <= cap[0] * (1 + 1e-9)


def test_bound_is_below_every_routing_of_a_brute_force(tmp_path):
    """Brute force on a toy whose floor caps bind (H > 0, a tight SLO): every routing of the sweep's space (each
    boundary and gamma) with every pool at its least instance count under the evaluator, and the one-pool fleet,
    cost at least the relaxation's bound with the join levels (the MILP's reported bound); and the join levels only
    raise the bound (no lower than the integer chunk levels' relaxation)."""
    import yaml

    from optfleet.problems.fleet.constraints import gpu_bounds
    from optfleet.problems.fleet.heuristics.sweep import candidate_table, plan_from_row
    from optfleet.problems.fleet.milp import _build, _runner
    from optfleet.problems.fleet.milp_batching import relaxation_data
    from optfleet.problems.fleet.milp_data import prepare_milp_data

    doc = yaml.safe_load(TOY.read_text())
    doc["hardware"]["iteration"] = {"w_ms": 2.0, "h_ms_per_slot": 0.5, "chunk_tokens": 1000}
    doc["slo"] = {"ttft_p99_ms": 40, "service_model": "batching"}
    path = tmp_path / "toy_floor.yaml"
    path.write_text(yaml.safe_dump(doc))
    problem = optfleet.load(path).problem

    def relaxed_bound(relaxed_data, tables) -> float:
        model = _build(problem, relaxed_data, gpu_bounds(relaxed_data, problem.constraints), relaxed_data.service_ratio_ms,
                       routing=problem.milp_routing, max_pools=problem.max_pools, customize=None, wait_tables=tables)
        return _runner(model, problem.solver, None)(model, time_limit=None, mip_gap=None).bound

    data = prepare_milp_data(problem)
    bound = relaxed_bound(*relaxation_data(data))
    table = candidate_table(problem)
    costs = [evaluate(problem, plan_from_row(problem, row, "sweep")).cost_per_hour for _, row in table.iterrows() if row["feasible"]]
    costs.append(evaluate(problem, homogeneous(problem)).cost_per_hour)
    assert len(costs) > 2 and min(costs) >= bound - 1e-6
    assert bound >= relaxed_bound(*relaxation_data(data, with_join=False)) - 1e-6
