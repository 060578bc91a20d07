"""The fleet MILP under the continuous-batching service model (optfleet/problems/fleet/milp_batching.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
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


@settings(max_examples=80, deadline=None)
@given(
    slots=st.integers(2, 64), w_ms=st.floats(2.0, 20.0), h_ms=st.floats(0.05, 2.0), gpus=st.integers(1, 4),
    atoms=st.lists(st.tuples(st.integers(1, 3000), st.integers(1, 400), st.floats(0.05, 1.0)), min_size=1, max_size=5),
    load=st.floats(0.05, 1.5), slo_ms=st.floats(100.0, 3000.0), rho=st.floats(0.5, 0.95),
)
def test_every_pool_meeting_the_model_meets_the_relaxation_rows(slots, w_ms, h_ms, gpus, atoms, load, slo_ms, rho):
    """The relaxation's rows are necessary: a pool that meets the batching SLO meets the utilisation cap on the
    slot-seconds at the cap (row 3) and, at its P99 chunk level, the level's floor (row 4) and load cap (row 7)."""
    cfg = config(slots, w_ms, h_ms)
    l_in, l_out, weight = (np.array(v) for v in zip(*atoms, strict=True))
    weight = weight / weight.sum()
    seconds = float(weight @ cap_seconds_per_request(cfg, l_in, l_out, rho))
    rate = load * rho * slots * gpus / seconds  # up to 1.5 x the relaxation's cap
    state = state_at(batching_workload([cfg], [(l_in, l_out, weight)], rate), [cfg], [gpus])
    if not meets_slo(state, slo_ms, rho)[0]:
        return
    per_gpu = rate * seconds / gpus
    assert per_gpu <= rho * slots * (1 + 1e-9)
    chunks = -(-l_in // cfg.chunk_tokens)
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


def test_lmsys_regression_under_the_batching_model():
    """Pinned to the shipped instance (benchmarks/results/batching_milp.md): the MILP's tables find no plan below the
    sweep's 304.98 $/h that passes, so the sweep's plan is the result, with the relaxation's bound 267.41 $/h."""
    problem = optfleet.load(LMSYS, slo__service_model="batching").problem
    result = solve_milp(problem)
    assert result.evaluation.meets_slo
    assert result.evaluation.cost_per_hour == pytest.approx(304.98, abs=0.01)
    assert result.report.status == "unproven"
    assert result.report.bound == pytest.approx(267.41, abs=0.01)
    assert "sweep" in result.note


def test_gap_under_the_batching_model_has_a_bound():
    run = subprocess.run([sys.executable, "-m", "optfleet", "gap", str(TOY), "--set", "slo.service_model=batching", "--json", "--quiet"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
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
