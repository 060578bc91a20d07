"""The fleet kind under the engine model (preset: engine): prefill compute charged, TPOT targets, the sources.

Hand checks on a one-size workload, the paper's flat model as the engine's special case, the MILP against the
sweep in the sweep's own policy space, the sources (affine, roofline, fit, a config.json) and the refusals.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.cli import main
from optfleet.engine.reduce import affine_reduction
from optfleet.engine.roofline import roofline_engine
from optfleet.engine.step import AffineStep, prefill_pairs
from optfleet.errors import InfeasibleError, InputError
from optfleet.instance import load_instance
from optfleet.problems.fleet import Plan, PoolPlan, evaluate
from optfleet.problems.fleet.heuristics import homogeneous, sweep
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.problem import prepare

from support import FLEET_INSTANCES

pytestmark = pytest.mark.unit

ONE_SIZE = {
    "kind": "fleet", "name": "one-size",
    "workload": {"rate_rps": 10, "lengths": {"cdf": [[1099, 0.0], [1100, 1.0]]},
                 "split": {"rule": "fixed_output_fraction", "output_fraction": 1 / 11}},
    "hardware": {"gpu": "A100-80GB", "model": "Llama-3-8B", "iteration": {"chunk_tokens": 500}, "slots": {"table": {2000: 4}},
                 "performance": {"source": "affine", "base_ms": 10.0, "per_seq_ms": 1.0, "per_prefill_token_ms": 0.01}},
    "pools": {"long_window_tokens": 2000},
    "compression": {"enabled": False},
    "slo": {"ttft_p99_ms": 1000},
}


def _one_size(**changes: object) -> object:
    return prepare(load_instance(ONE_SIZE, **changes))


def test_prefill_compute_is_charged_by_hand():
    # L_in = 1000, L_out = 100, chunk 500, 4 slots: u = 2 + 100 = 102 iterations, sigma = 1 ms, P = 0.01 x 1000 = 10 ms
    # S = u (base + s sigma) + s P = 102 x 14 + 4 x 10 = 1468 ms; TTFT floor (m = 2) = 3 t_w + P(1000) = 42 + 10 = 52 ms
    problem = _one_size()
    config = problem.pool(2000)
    assert config.service_ms(1000, 100) == pytest.approx(1468.0)
    assert config.chunk_floor_ms(2) == pytest.approx(52.0)
    assert config.tpot_bound_ms == pytest.approx(14.0 + 0.01 * 500)
    pool = evaluate(problem, Plan((PoolPlan("long", 2000, 5),))).pools[0]
    # utilisation: lambda E[S] / (n s) = 10 x 1.468 / 20; mean TPOT t_w / (1 - lambda_g P) = 14 / (1 - 2 x 0.01)
    assert pool.utilisation == pytest.approx(10 * 1.468 / 20)
    assert pool.ttft_p99_ms == pytest.approx(52.0 + pool.wait_p99_ms)
    assert pool.tpot_mean_ms == pytest.approx(14.0 / (1 - 2 * 0.010))


def test_without_compute_or_context_costs_the_engine_is_the_papers_flat_model():
    # base = W, per_seq = H and no other cost: the paper's toy fleet (W = 1, H = 0) to the last digit
    engine = prepare(load_instance(FLEET_INSTANCES / "toy.yaml", preset="engine", hardware__iteration={"chunk_tokens": 1000},
                                   hardware__performance={"source": "affine", "base_ms": 1.0}))
    paper = prepare(load_instance(FLEET_INSTANCES / "toy.yaml"))
    for method in (homogeneous, sweep):
        a, b = method(engine), method(paper)
        plan_a, plan_b = (getattr(p, "plan", p) for p in (a, b))
        assert [p.instances for p in plan_a.pools] == [p.instances for p in plan_b.pools]
        ea, eb = evaluate(engine, plan_a), evaluate(paper, plan_b)
        assert ea.cost_per_hour == eb.cost_per_hour
        assert [p.utilisation for p in ea.pools] == pytest.approx([p.utilisation for p in eb.pools], rel=1e-12)
        assert [p.ttft_p99_ms for p in ea.pools] == pytest.approx([p.ttft_p99_ms for p in eb.pools], rel=1e-12)


def test_a_tpot_percentile_target_below_the_longest_iteration_is_infeasible_and_says_so():
    problem = _one_size(slo={"ttft_p99_ms": 1000, "tpot_p99_ms": 18.0})  # the bound is 19 ms
    with pytest.raises(InfeasibleError, match=r"longest iteration, 19.0 ms .* above the TPOT target 18 ms"):
        homogeneous(problem)


def test_a_mean_tpot_target_sizes_the_pool_by_hand():
    # mean TPOT t_w / (1 - lambda P / n) <= 14.5 ms: n >= 10 x 0.010 / (1 - 14 / 14.5) = 2.9 -> 3 instances, fewer than
    # the utilisation cap's 10 x 1.468 / (0.85 x 4) = 4.3 -> 5; at a 14.1 ms target it is 0.1 / (0.1 / 14.1) = 14.1 -> 15
    loose = homogeneous(_one_size(slo={"ttft_p99_ms": 1000, "tpot_mean_ms": 14.5}))
    assert loose.pools[0].instances == 5
    tight_problem = _one_size(slo={"ttft_p99_ms": 1000, "tpot_mean_ms": 14.1})
    tight = homogeneous(tight_problem)
    assert tight.pools[0].instances == 15
    pool = evaluate(tight_problem, tight).pools[0]
    assert pool.binding == "tpot" and pool.tpot_mean_ms <= 14.1
    with pytest.raises(InfeasibleError, match=r"decode step at the window, 14.0 ms, is already above the mean TPOT target 13.9 ms"):
        homogeneous(_one_size(slo={"ttft_p99_ms": 1000, "tpot_mean_ms": 13.9}))


@pytest.mark.solved
def test_the_milp_meets_tpot_targets_and_agrees_with_the_evaluator():
    problem = _one_size(slo={"ttft_p99_ms": 1000, "tpot_mean_ms": 14.1})
    result = solve_milp(problem)
    assert result.report.proven_optimal and result.evaluation.meets_slo
    assert result.evaluation.total_instances == 15


@pytest.mark.solved
def test_the_shipped_engine_instance_milp_finds_the_sweep_in_its_space_and_beats_it_outside():
    problem = prepare(load_instance(FLEET_INSTANCES / "azure_2023_h100_engine.yaml"))
    swept = evaluate(problem, sweep(problem).plan)
    assert swept.meets_slo
    restricted = solve_milp(problem, routing="sweep")
    assert restricted.report.proven_optimal and restricted.evaluation.cost_per_hour == pytest.approx(swept.cost_per_hour)
    free = solve_milp(problem)
    assert free.report.proven_optimal and free.evaluation.meets_slo
    assert free.evaluation.cost_per_hour <= swept.cost_per_hour + 1e-9
    # pinned: 6 x H100 x8 at 4,096 tokens and 6 at 16,384 ($258.24/h); the paper's model on the same hardware, which
    # charges no prefill compute and every slot a full window, differs
    assert [(p.window_tokens, p.instances) for p in free.evaluation.pools] == [(4096, 6), (16384, 6)]
    assert free.evaluation.cost_per_hour == pytest.approx(258.24)


def test_a_fit_to_measured_iterations_is_the_engine():
    problem = _one_size(hardware__performance={"source": "fit", "file": str(FLEET_INSTANCES / "data" / "iterations_synthetic_example.csv")})
    step = problem.pool(2000).step
    assert step.source.startswith("fit: iterations_synthetic_example.csv") and step.max_error < 0.05


def test_a_config_json_is_the_model():
    document = yaml.safe_load((FLEET_INSTANCES / "azure_2023_h100_engine.yaml").read_text())
    document["workload"]["lengths"]["cdf_file"] = str(FLEET_INSTANCES / "data" / "azure_2023_cdf.json")
    document["hardware"] = {**document["hardware"], "tp": 1, "config_json": str(FLEET_INSTANCES / "models" / "example_config.json")}
    del document["hardware"]["model"]
    problem = prepare(load_instance(document))
    model = problem.hardware.model
    assert (model.architecture, model.layers, model.kv_heads) == ("Qwen3ForCausalLM", 36, 8)
    assert model.params_billion == pytest.approx(8.19, abs=0.01)
    assert evaluate(problem, sweep(problem).plan).meets_slo


@pytest.mark.parametrize(("changes", "field", "says"), [
    ({"hardware__iteration": {"w_ms": 8.0, "chunk_tokens": 500}}, "hardware.iteration.w_ms", "paper's service model"),
    ({"preset": "paper", "hardware__iteration": {"w_ms": 8.0, "h_ms_per_slot": 0.5, "chunk_tokens": 500}}, "hardware.performance",
     "applies under preset engine"),
    ({"hardware__performance": {"source": "roofline", "base_ms": 3.0}}, "hardware.performance", "do not apply to source roofline"),
    ({"hardware__performance": {"source": "fit"}}, "hardware.performance", "source fit needs file"),
    ({"hardware__engine": {"max_num_batched_tokens": 256}}, "hardware.iteration.chunk_tokens", "above the engine's token budget"),
    ({"hardware__engine": {"defaults": "vllm", "max_num_batched_tokens": 200}}, "hardware.engine.max_num_batched_tokens",
     "below max_num_seqs 256 (given or vLLM's default for A100-80GB)"),
    ({"hardware__performance": {"source": "affine", "base_ms": 1e-300}}, "hardware.performance.base_ms", "greater than or equal to 0.001"),
    ({"hardware__performance": {"source": "roofline", "compute_efficiency": 1e-300}}, "hardware.performance.compute_efficiency",
     "greater than or equal to 0.01"),
    ({"preset": "paper", "hardware": {"gpu": "A100-80GB", "model": "Llama-3-8B", "slots": {"table": {2000: 4}},
                                      "iteration": {"w_ms": 8.0, "h_ms_per_slot": 0.5, "chunk_tokens": 500}},
      "slo": {"ttft_p99_ms": 1000, "tpot_p99_ms": 50, "service_model": "batching"}}, "slo.tpot_p99_ms", "need preset engine"),
    ({"slo": {"ttft_p99_ms": 1000, "ttft_rule": "fleetsim"}}, "slo.ttft_rule", "under preset engine the TTFT floor is the engine's"),
])
def test_bad_engine_input_names_the_field(changes, field, says):
    with pytest.raises(InputError, match=field.replace(".", r"\.")) as error:
        _one_size(**changes)
    assert says in str(error.value)


def test_a_bad_config_json_is_refused_on_the_cli(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text('{"architectures": ["NoSuchForCausalLM"], "num_hidden_layers": 2}')
    document = dict(ONE_SIZE, hardware={**ONE_SIZE["hardware"], "model": None, "config_json": str(config)})
    document["hardware"] = {k: v for k, v in document["hardware"].items() if v is not None}
    instance = tmp_path / "bad.yaml"
    instance.write_text(yaml.safe_dump(document))
    assert main(["solve", str(instance)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "hardware.config_json" in err[0] and "NoSuchForCausalLM" in err[0]


def test_an_affine_engine_reduces_to_itself():
    step = AffineStep(5.0, 0.1, 1e-4, 0.02, 1e-7)
    assert affine_reduction(step, 64, 8192, 2048) is step


@pytest.mark.parametrize(("gpu", "model", "tp", "slots", "window", "chunk"), [
    ("H100-SXM", "Llama-3-70B", 8, 148, 8192, 2048), ("H100-SXM", "Llama-3-8B", 1, 49, 8192, 512),
    ("H200", "Qwen3-235B-A22B", 8, 40, 32768, 8192),
])
def test_the_roofline_reduces_within_four_percent_on_decode_steps_and_full_chunks(gpu, model, tp, slots, window, chunk):
    engine = roofline_engine(gpu, model, tp)
    step = affine_reduction(engine, slots, window, chunk)
    assert step.max_error < 0.04
    # a partial chunk is charged at the full chunk's rate per token: never less than the roofline (a convex pass)
    for b in (1, slots):
        assert float(step.step_ms(chunk // 2, b, b * window / 2)) >= float(engine.step_ms(chunk // 2, b, b * window / 2)) * (1 - step.max_error)


@settings(max_examples=50, deadline=None)
@given(prompt=st.integers(1, 100_000), chunk=st.integers(1, 20_000))
def test_the_pairs_of_a_chunked_prompt_are_those_of_the_whole_prompt(prompt, chunk):
    offsets = np.arange(0, prompt, chunk)
    sizes = np.minimum(chunk, prompt - offsets)
    assert float(prefill_pairs(sizes, offsets).sum()) == pytest.approx(prompt * (prompt + 1) / 2, rel=1e-12)
    assert math.isclose(float(AffineStep(1.0, 0, 0, 0, 1.0).prefill_compute_ms(prompt)), prompt * (prompt + 1) / 2)


def test_a_measured_model_with_tied_embeddings_counted_twice_is_the_served_model():
    # Qwen3-0.6B ties its embeddings (0.156 B of its 0.596 B parameters); aiconfigurator counts the matrix twice
    from types import SimpleNamespace

    from optfleet.hardware.catalog import ModelSpec
    from optfleet.problems.fleet.performance import _check_same_model

    tied = ModelSpec("Qwen3-0.6B", layers=28, kv_heads=8, head_dim=128, params_billion=0.596, source="test",
                     tied_embedding_params_billion=0.156)
    twice = SimpleNamespace(memory=SimpleNamespace(weights_bytes=2.0 * (0.596 + 0.156) * 1e9), source="measured, Qwen/Qwen3-0.6B")
    _check_same_model(twice, tied, 1, "hardware.performance")  # the same model, the matrix counted twice
    untied = ModelSpec("Qwen3-0.6B", layers=28, kv_heads=8, head_dim=128, params_billion=0.596, source="test")
    with pytest.raises(InputError, match="the same model at the same precision"):
        _check_same_model(twice, untied, 1, "hardware.performance")
    bigger = SimpleNamespace(memory=SimpleNamespace(weights_bytes=2.0 * 1.2 * 1e9), source="measured, another")
    with pytest.raises(InputError, match="hardware.performance.model"):
        _check_same_model(bigger, tied, 1, "hardware.performance")
