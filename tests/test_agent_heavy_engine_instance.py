"""The Agent-heavy engine-model instance of the batching MILP benchmark (instances/fleet/agent_heavy_engine_batching.yaml)."""

from __future__ import annotations

from pathlib import Path

import optfleet
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep

INSTANCE = Path(__file__).resolve().parents[1] / "instances/fleet/agent_heavy_engine_batching.yaml"


def test_agent_heavy_engine_instance_holds_its_longest_request_and_its_sweep_plan_passes():
    problem = optfleet.load(INSTANCE).problem
    assert problem.service_model == "batching"
    long_pool = problem.pool(problem.long_window_tokens)
    assert long_pool.step is not None  # the engine model's iteration, not the paper calibration
    assert problem.long_window_tokens >= problem.mix.l_total.max()
    assert long_pool.slots_per_instance >= 1  # a 64K window fits an instance's KV memory
    evaluation = evaluate(problem, sweep(problem).plan)
    assert evaluation.meets_slo
    assert all(pool.meets_slo for pool in evaluation.pools)
