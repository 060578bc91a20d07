"""Placement servers under the engine model: the prefill attention term in the simulator (closed forms), the bounds
with it (property tests against every placement), and a server's timing and KV capacity derived from a GPU, a model
and a performance source (server_hardware.py), with its bad input."""

from __future__ import annotations

import copy
import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet.engine.reduce import affine_reduction
from optfleet.engine.roofline import roofline_engine
from optfleet.errors import InputError
from optfleet.hardware.memory import memory_fit
from optfleet.problems.placement.bounds import relaxation_bound
from optfleet.problems.placement.evaluate import evaluate
from optfleet.problems.placement.server import chunk_pairs

from test_placement import PLACEMENT, TIMING, instance, with_requests
from support import documentation_text, prose

PAIR = 0.01
PAIR_TIMING = {**TIMING, "prefill_ms_per_pair": PAIR}


@pytest.mark.parametrize("budget", [40, 100, 1000])
def test_a_prompts_pairs_sum_to_the_whole_triangle_however_it_is_chunked(budget):
    """P = 100, O = 2 (7 blocks held): ceil(100 / budget) prefill iterations of 4 + 0.25 x 7 ms, 0.5 ms per token and
    0.01 ms per pair; the chunks' pairs sum to 100 x 101 / 2 = 5,050 for every budget."""
    problem = with_requests(instance(budget=budget, timing=PAIR_TIMING), [(0.0, 100, 2, 0, -1, 0)])
    iterations = -(-100 // budget)
    expected = iterations * (4 + 0.25 * 7) + 0.5 * 100 + PAIR * 5050
    assert evaluate(problem, np.zeros(1, dtype=int)).ttft_ms[0] == pytest.approx(expected)
    assert sum(chunk_pairs(min(budget, 100 - o), o) for o in range(0, 100, budget)) == 5050


def test_a_reused_prefix_is_attended_to_but_not_computed():
    """Two turns of one conversation on one server: turn 2 (P = 80) reuses turn 1's 48 cached tokens (3 whole blocks of
    prompt 40 and answer 10) and computes 32 tokens at offset 48: 32 x 48 + 32 x 33 / 2 = 2,064 pairs."""
    rows = [(0.0, 40, 10, 0, -1, 7), (10_000.0, 80, 2, 0, -1, 7)]
    problem = with_requests(instance(timing=PAIR_TIMING), rows)
    e = evaluate(problem, np.zeros(2, dtype=int))
    assert e.timeline.hit_tokens[1] == 48
    held = 0.25 * 6  # ceil(82 / 16) blocks, the 3 reused ones among them
    assert e.ttft_ms[1] == pytest.approx(4 + held + 0.5 * 32 + PAIR * (32 * 48 + 32 * 33 // 2))


def _random_problem(seed: int, n: int, pair: float):
    rng = np.random.default_rng(seed)
    rows = [(float(t), int(p), int(o), 32, int(g), 10 * int(g) + int(s)) for t, p, o, g, s in
            zip(np.sort(rng.uniform(0, 60, n)), rng.integers(40, 120, n), rng.integers(1, 6, n), rng.integers(0, 2, n), rng.integers(0, 3, n),
                strict=True)]
    return with_requests(instance(servers=2, kv=64, budget=int(rng.integers(16, 200)), timing={**TIMING, "prefill_ms_per_pair": pair}), rows)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6), pair=st.sampled_from((0.001, 0.01, 0.1)))
def test_the_relaxation_bound_with_pairs_is_below_every_placement(seed, n, pair):
    """The per-request floor charges each request the pairs of its least possible work: below the simulated mean TTFT
    of every placement of up to six requests on two servers (and so of the best)."""
    problem = _random_problem(seed, n, pair)
    bound, parts = relaxation_bound(problem)
    best = min(evaluate(problem, np.array(p)).objective_ms for p in itertools.product(range(2), repeat=n))
    assert bound <= best + 1e-6
    without = replace(problem, engines=tuple(replace(e, prefill_ms_per_pair=0.0) for e in problem.engines))
    assert parts["per_request_ms"] > relaxation_bound(without)[1]["per_request_ms"]  # the pairs tighten it


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 9), pair=st.sampled_from((0.001, 0.1)))
def test_the_milps_model_ttft_stays_below_the_simulated_ttft_with_pairs(seed, n, pair):
    """The MILP leaves the pair term out: each request's model TTFT is still at most its simulated TTFT."""
    from optfleet.models.placement import model_ttft_ms
    from optfleet.problems.placement.exact import placement_data

    problem = _random_problem(seed, n, pair)
    placement = np.random.default_rng(seed).integers(0, 2, n)
    assert np.all(model_ttft_ms(placement_data(problem, 0, n), placement) <= evaluate(problem, placement).ttft_ms + 1e-6)


# --- timing from a GPU, a model and a performance source -------------------------------------------------------------

DOC = {"kind": "placement", "name": "engine",
       "servers": [{"name": "h100", "count": 2, "max_running_seqs": 32, "prefill_budget_tokens": 2048,
                    "hardware": {"gpu": "H100-SXM", "model": "Llama-3-8B", "tp": 1}}],
       "workload": {"seed": 0, "shared_prefix": {"num_groups": 4, "num_prompts_per_group": 3, "system_prompt_len": 2000, "question_len": 300,
                                                 "output_len": 200, "max_turns": 2},
                    "arrivals": {"process": "poisson", "rate_rps": 4, "requests": 30}},
       "policies": ["round_robin", "predicted_latency"]}


def doc(change=None) -> dict:
    d = copy.deepcopy(DOC)
    if change is not None:
        change(d)
    return d


def test_a_roofline_server_takes_the_engines_reduction_and_the_gpus_kv_memory():
    problem = optfleet.load(doc()).problem
    q = problem.requests
    tokens = q.prompt_tokens + q.output_tokens
    longest = int(tokens.max())
    e = problem.engines[0]
    held = min(32, e.kv_capacity_blocks * problem.block_tokens // tokens.mean())  # the sequences the KV memory holds
    assert held == 32  # an 8B model on an H100 holds all 32 at these lengths
    step = affine_reduction(roofline_engine("H100-SXM", "Llama-3-8B", 1), 32, longest, min(2048, longest // 2))  # offsets to half
    assert len(problem.engines) == 2 and problem.engines[1] == e
    assert (e.step_base_ms, e.step_ms_per_seq, e.prefill_ms_per_token, e.prefill_ms_per_pair) == (
        step.base_ms, step.per_seq_ms, step.per_prefill_token_ms, step.per_prefill_pair_ms)
    assert e.step_ms_per_kv_block == step.per_kv_token_ms * problem.block_tokens
    assert e.kv_capacity_blocks == memory_fit("H100-SXM", "Llama-3-8B", 1, longest).kv_tokens // problem.block_tokens
    assert e.prefill_ms_per_pair > 0 and e.timing_source == "roofline: H100-SXM x1, Llama-3-8B"
    assert e.timing_reduction.startswith(f"affine over 32 sequences and {longest:,} tokens: within {100 * step.max_error:.1f} %")
    text = prose(optfleet.validate(doc()).text)
    assert "/query-key pair" in text and "timing from roofline: H100-SXM x1, Llama-3-8B" in text and e.timing_reduction in text


def test_the_region_holds_only_the_sequences_the_kv_memory_holds():
    """A running limit far above what the KV memory holds (a million sequences) reduces the engine over the sequences
    the memory holds at the mean request length, not over a million: the same timing as a limit of 64 on a server
    that holds fewer than 64."""
    def limit(seqs):
        return lambda d: d["servers"][0].update(max_running_seqs=seqs, kv_capacity_blocks=2000)

    capped, huge = (optfleet.load(doc(limit(seqs))).problem.engines[0] for seqs in (64, 1_000_000))
    assert (capped.step_ms_per_seq, capped.prefill_ms_per_token) == (huge.step_ms_per_seq, huge.prefill_ms_per_token)
    assert capped.timing_reduction == huge.timing_reduction and " over 11 sequences" in huge.timing_reduction  # 32,000 tokens / a mean of 2,683


def test_an_affine_source_is_the_timing_itself_and_a_given_capacity_is_kept():
    affine = {"source": "affine", "base_ms": 6.0, "per_seq_ms": 0.1, "per_kv_token_ms": 2e-5, "per_prefill_token_ms": 0.07,
              "per_prefill_pair_ms": 3e-7}

    def change(d):
        d["servers"][0]["hardware"]["performance"] = affine
        d["servers"][0]["kv_capacity_blocks"] = 5000

    e = optfleet.load(doc(change)).problem.engines[0]
    assert (e.step_base_ms, e.step_ms_per_seq, e.step_ms_per_kv_block, e.prefill_ms_per_token, e.prefill_ms_per_pair, e.kv_capacity_blocks) == (
        6.0, 0.1, 2e-5 * 16, 0.07, 3e-7, 5000)
    assert e.timing_reduction == "" and e.timing_source == "affine: given in servers.0.hardware.performance"


def test_an_engine_derived_instance_runs_every_policy_and_its_bound():
    frame = optfleet.gap(doc()).set_index("method")
    bound = frame.loc["relaxation_bound", "bound"]
    for method in ("round_robin", "predicted_latency", "hindsight_milp"):
        assert frame.loc[method, "objective"] >= frame.loc[method, "bound"] >= bound > 0


@pytest.mark.parametrize(("change", "field", "part"), [
    (lambda d: d["servers"][0].update(timing=TIMING), "servers.0", "exactly one"),
    (lambda d: d["servers"][0].pop("hardware"), "servers.0", "exactly one"),
    (lambda d: d["servers"][0].update(timing=TIMING, hardware=None), "servers.0", "kv_capacity_blocks is required with timing"),
    (lambda d: d["servers"][0]["hardware"].update(gpu="H100"), "servers.0.hardware.gpu", "unknown GPU"),
    (lambda d: d["servers"][0]["hardware"].update(model="Llama-9"), "servers.0.hardware.model", "Llama-3-8B"),
    (lambda d: d["servers"][0]["hardware"].pop("model"), "servers.0.hardware", "give model"),
    (lambda d: d["servers"][0]["hardware"].update(gpu="L4", model="Llama-3-70B"), "servers.0.hardware.tp", "short by"),
    (lambda d: d["servers"][0].update(kv_capacity_blocks=10), "servers[0].kv_capacity_blocks", "below the largest request"),
    (lambda d: d["servers"][0].update(kv_capacity_blocks=10**9), "servers.0.kv_capacity_blocks", "whole memory holds"),
    (lambda d: d["servers"][0]["hardware"].update(model="Qwen3-32B") or d["workload"]["shared_prefix"].update(system_prompt_len=12_000),
     "servers.0.hardware.tp", "fewer than the largest request's"),  # 1 x H100 holds 708 blocks (11,328 tokens) after the weights
    (lambda d: d["servers"][0]["hardware"].update(tp=16), "servers.0.hardware.tp", "exceeds one 8-GPU node"),
    (lambda d: d["servers"][0]["hardware"].update(performance={"source": "affine", "base_ms": 5.0, "per_prefill_token_ms": 1e4}),
     "servers.0.hardware.performance.per_prefill_token_ms", "above the limit of 100 ms per token"),
    (lambda d: d["servers"][0]["hardware"].update(performance={"source": "affine", "base_ms": 5.0, "per_prefill_token_ms": 0.1,
                                                               "per_prefill_pair_ms": 2.0}),
     "servers.0.hardware.performance.per_prefill_pair_ms", "above the limit of 1 ms per pair"),
    (lambda d: d["servers"][0]["hardware"].update(performance={"source": "affine", "base_ms": 5.0}),
     "servers.0.hardware.performance.per_prefill_token_ms", "no time per prefill token"),
    (lambda d: d["servers"][0]["hardware"].update(config_json="missing.json"), "servers.0.hardware.config_json", ""),
])
def test_bad_hardware_names_the_field(change, field, part):
    with pytest.raises(InputError) as caught:
        optfleet.load(doc(change))
    assert str(caught.value.field).startswith(field), str(caught.value)
    assert part in str(caught.value)


def test_a_pair_term_above_its_limit_is_refused():
    bad = {**PAIR_TIMING, "prefill_ms_per_pair": 5.0}
    with pytest.raises(InputError) as caught:
        optfleet.load(instance(timing=bad))
    assert caught.value.field == "servers.0.timing.prefill_ms_per_pair" and "ms per pair" in str(caught.value)


def test_the_shipped_engine_scenario_is_as_the_readme_quotes():
    """scenario_c_llama70b.yaml: Llama-3-70B on 4 x H100-SXM per server, 24,494 KV blocks, the reduction over the 45
    sequences they hold within 0.8 % on decode steps and full chunks, and above the engine at shorter chunks."""
    e = optfleet.load(PLACEMENT / "scenario_c_llama70b.yaml").problem.engines[0]
    assert e.kv_capacity_blocks == 24_494
    assert e.timing_reduction == ("affine over 45 sequences and 12,745 tokens: within 0.8 % on decode steps and 2,048-token chunks, "
                                  "+4 to +59 % on chunks of 1/64 to 1/2 of that")
    readme = " ".join(documentation_text().split())
    assert "24,494" in readme and "within 0.8 % on decode steps and full chunks, and +4 to +59 % on chunks of 1/64 to 1/2" in readme


def test_the_short_chunk_error_of_an_affine_engine_is_zero_and_of_the_roofline_positive():
    """An affine engine is its own form at every chunk; the roofline's form overstates short chunks (they read the
    weights at the memory's pace, the form charges them the compute slope) and never understates them."""
    from optfleet.engine.reduce import short_chunk_error
    from optfleet.engine.step import AffineStep

    affine = AffineStep(5.0, 0.1, 1e-5, 0.05, 1e-6)
    assert short_chunk_error(affine, affine_reduction(affine, 16, 8000, 1024), 16, 8000, 1024) == (0.0, 0.0)
    roofline = roofline_engine("H100-SXM", "Llama-3-70B", 4)
    low, high = short_chunk_error(roofline, affine_reduction(roofline, 45, 12745, 2048), 45, 12745, 2048)
    assert 0 < low < high
