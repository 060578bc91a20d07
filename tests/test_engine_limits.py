"""Engine batch limits (max_num_seqs, max_num_batched_tokens): hand-checked toy, vLLM's defaults, one pool
config for the evaluator, the sweep, the MILP and the simulator, bad input."""

from __future__ import annotations

import pytest
import yaml

from optfleet.cli import main
from optfleet.errors import InputError
from optfleet.hardware import get_gpu
from optfleet.instance import load_instance
from optfleet.problems.fleet import Plan, PoolPlan, evaluate
from optfleet.problems.fleet.engine_limits import vllm_defaults
from optfleet.problems.fleet.heuristics import FLEET_METHODS, sweep
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.problem import prepare
from optfleet.problems.fleet.simulate.run import simulate_plan

from support import FLEET_INSTANCES


def _toy(tmp_path, engine, chunk=1000):
    doc = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())
    doc["hardware"]["engine"] = engine
    if chunk is None:
        del doc["hardware"]["iteration"]["chunk_tokens"]
    path = tmp_path / "toy_engine.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_toy_with_limits_by_hand(tmp_path):
    # 3 sequences: 3 slots at 2000 tokens (KV 4), 2 at 4000 (KV 2); a 500-token budget and no chunk given: the budget
    # is the chunk, S = (ceil(750/500) + 250) 1 ms = 252 ms and (ceil(3000/500) + 1000) = 1006 ms.
    problem = prepare(load_instance(_toy(tmp_path, {"max_num_seqs": 3, "max_num_batched_tokens": 500}, chunk=None)))
    short, long = problem.pool(2000), problem.pool(4000)
    assert (short.slots_per_instance, long.slots_per_instance, short.chunk_tokens) == (3, 2, 500)
    assert short.service_ms(750, 250) == pytest.approx(252.0) and long.service_ms(3000, 1000) == pytest.approx(1006.0)
    # homogeneous: a = 100 (0.8 x 0.252 + 0.2 x 1.006) = 40.28 erlangs over 0.8 x 2 per GPU -> 26 GPUs
    assert FLEET_METHODS["homogeneous"](problem).pools[0].instances == 26
    # pool routing at 2000: short 20.16 / (0.8 x 3) -> 9, long 20.12 / 1.6 -> 13
    assert [p.instances for p in FLEET_METHODS["pool-routing"](problem).pools] == [9, 13]
    swept = evaluate(problem, sweep(problem).plan).cost_per_hour
    exact = solve_milp(problem, routing="sweep")
    assert exact.report.proven_optimal and exact.evaluation.cost_per_hour == pytest.approx(swept)


def test_both_simulator_modes_run_the_limited_slots(tmp_path):
    # One sequence per GPU and H = 0 (a batch of one iterates as fast as the slot model's full batch): both modes
    # are the same M/G/46 queue, so they agree on utilisation and on the P99 TTFT, which the slot mode takes from the
    # capped configuration; batching mode at the KV cache's 2 slots per GPU would wait far less.
    problem = prepare(load_instance(_toy(tmp_path, {"max_num_seqs": 1})))
    plan = Plan((PoolPlan("long", 4000, 46),))
    evaluation = evaluate(problem, plan)
    slots, batching = (simulate_plan(problem, plan, requests=20_000, reps=1, mode=mode).metrics["long"] for mode in ("slots", "batching"))
    assert slots["utilisation"][0] == pytest.approx(evaluation.pools[0].utilisation, rel=0.05)
    assert batching["utilisation"][0] == pytest.approx(evaluation.pools[0].utilisation, rel=0.05)
    assert batching["ttft_p99_ms"][0] == pytest.approx(slots["ttft_p99_ms"][0], rel=0.25)


def test_vllm_defaults_follow_the_engines_table():
    assert vllm_defaults(get_gpu("H100-SXM")) == (1024, 8192)
    assert vllm_defaults(get_gpu("A100-80GB")) == (256, 2048)
    assert vllm_defaults(get_gpu("L4")) == (256, 2048)


def test_defaults_fill_what_is_not_given(tmp_path):
    problem = prepare(load_instance(_toy(tmp_path, {"defaults": "vllm", "max_num_seqs": 3})))
    assert problem.hardware.engine_limits.max_num_seqs == 3 and problem.hardware.engine_limits.max_num_batched_tokens == 2048


@pytest.mark.parametrize("engine, message", [
    ({"max_num_seqs": 8, "max_num_batched_tokens": 4}, "max_num_batched_tokens 4 is below max_num_seqs 8"),
    ({}, "give max_num_seqs, max_num_batched_tokens or defaults"),
    ({"max_num_seqs": 0}, "hardware.engine.max_num_seqs"),
    ({"defaults": "sglang"}, "hardware.engine.defaults"),
])
def test_bad_limits_exit_2_naming_the_field(tmp_path, capsys, engine, message):
    assert main(["validate", str(_toy(tmp_path, engine))]) == 2
    assert message in capsys.readouterr().err


def test_a_chunk_above_the_token_budget_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"hardware.iteration.chunk_tokens = 1000: is above the engine's token budget max_num_batched_tokens 500"):
        prepare(load_instance(_toy(tmp_path, {"max_num_batched_tokens": 500})))


def test_under_the_engine_model_the_token_budget_is_the_chunk():
    loaded = load_instance(FLEET_INSTANCES / "azure_2023_catalog.yaml", preset="engine", hardware__iteration={},
                           hardware__engine={"max_num_batched_tokens": 2048})
    assert prepare(loaded).pool(8192).chunk_tokens == 2048


def test_a_catalog_whose_types_get_different_chunks_is_refused(tmp_path):
    # under the engine model a budget is the chunk: vLLM's defaults give the A100 2,048 tokens and the H100 8,192
    doc = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())
    doc["preset"] = "engine"
    doc["hardware"] = {"gpu": "A100-80GB", "model": "Llama-3-8B", "engine": {"defaults": "vllm"}}
    doc["gpu_catalog"] = {"gpus": ["A100-80GB", "H100-SXM"]}
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(InputError, match="hardware.engine.max_num_batched_tokens.*different prefill chunks"):
        prepare(load_instance(path))
