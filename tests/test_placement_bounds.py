"""The placement relaxation bound (bounds.py): its two parts against hand-worked cases, and its validity against the
simulator: below every placement of small bursty cases (brute force, so below every policy and every MILP), and
below every policy and the look-ahead MILP on a larger one."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.problems.placement.bounds import relaxation_bound, reuse_upper_bound, srpt_total_flow_ms
from optfleet.problems.placement.evaluate import evaluate
from optfleet.problems.placement.policies import POLICIES, make_policy, route

from test_placement import instance, with_requests

PAIR_TIMING = {"prefill_ms_per_token": 0.5, "step_base_ms": 4.0, "step_ms_per_seq": 1.0, "step_ms_per_kv_block": 0.25,
               "prefill_ms_per_pair": 0.01}


@pytest.mark.parametrize("budget", [40, 100, 1000])
def test_a_lone_requests_bound_is_its_simulated_ttft(budget):
    """P = 100, O = 2 (7 blocks) alone on a server: ceil(100 / budget) iterations of 4 + 0.25 x 7 ms, 0.5 ms per token
    and 0.01 ms per pair of its 5,050 (test_placement_engine.py times it): the per-request floor is exact, and the
    fast machine (the overhead spread per token, 5.75 x 100 / budget ms) is no larger."""
    problem = with_requests(instance(budget=budget, timing=PAIR_TIMING), [(0.0, 100, 2, 0, -1, 0)])
    bound, parts = relaxation_bound(problem)
    simulated = evaluate(problem, np.zeros(1, dtype=int)).ttft_ms[0]
    assert parts["per_request_ms"] == pytest.approx(-(-100 // budget) * (4 + 0.25 * 7) + 0.5 * 100 + 0.01 * 5050)
    assert parts["fast_machine_ms"] == pytest.approx(5.75 * 100 / budget + 0.5 * 100 + 0.01 * 5050)
    assert bound == pytest.approx(simulated)


def test_the_fast_machine_charges_each_token_its_share_of_the_iteration_overhead():
    """Two requests at t = 0 on one server (0.5 ms per token, 4 ms + 0.25 ms per block per iteration, budget 1,000):
    P = 40, O = 5 (3 blocks) needs 0.5 x 40 + (4 + 0.75) x 40 / 1000 = 20.19 ms of the machine, P = 100, O = 2
    (7 blocks) 50 + 5.75 x 0.1 = 50.575 ms; shortest first, their TTFTs are 20.19 and 70.765 ms, mean 45.4775, above
    the per-request floor's (24.75 + 55.75) / 2 = 40.25.  Their 10 blocks fit the 64 at once, so the KV hold adds
    no wait to that floor.  Simulated, both prefill in one iteration of 4 + 0.25 x 10 + 0.5 x 140 = 76.5 ms."""
    problem = with_requests(instance(), [(0.0, 40, 5, 0, -1, 0), (0.0, 100, 2, 0, -1, 1)])
    bound, parts = relaxation_bound(problem)
    assert parts == pytest.approx({"per_request_ms": 40.25, "fast_machine_ms": 45.4775, "kv_hold_ms": 40.25})
    assert bound == pytest.approx(45.4775)
    assert evaluate(problem, np.zeros(2, dtype=int)).objective_ms == pytest.approx(76.5)


def _bursty(seed: int, n: int, servers: int):
    """``n`` requests within 5 ms (queueing dominates) on ``servers`` servers, the last one slower to prefill with a
    larger step and KV term; random lengths, two groups of 32-token system prompts, sessions within groups (later
    turns reuse, and publish over, earlier ones), KV room from the largest request's blocks to 96 (admissions wait)."""
    rng = np.random.default_rng(seed)
    rows = [(float(t), int(p), int(o), 32, int(g), 10 * int(g) + int(s)) for t, p, o, g, s in
            zip(np.sort(rng.uniform(0, 5, n)), rng.integers(40, 160, n), rng.integers(1, 6, n), rng.integers(0, 2, n), rng.integers(0, 3, n),
                strict=True)]
    problem = with_requests(instance(servers=servers, kv=int(rng.integers(11, 97)), budget=int(rng.integers(16, 200)), timing=PAIR_TIMING), rows)
    slow = replace(problem.engines[-1], prefill_ms_per_token=0.8, step_base_ms=6.0, step_ms_per_kv_block=0.4,
                   prefill_budget_tokens=int(rng.integers(16, 200)))
    return replace(problem, engines=(*problem.engines[:-1], slow))


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 6), excess=st.booleans())
def test_the_bound_is_below_every_placement_of_a_burst(seed, n, excess):
    """Up to six requests in a 5 ms burst on two unlike servers: the bound (mean TTFT, or mean excess over a 40 ms SLO)
    is below the simulated objective of each of the 2^n placements (every policy's and every MILP's among them),
    and its fast machine is at least the prompt-token machine of rate sum_k 1/alpha_k it tightens."""
    problem = _bursty(seed, n, 2)
    if excess:
        problem = replace(problem, slo=problem.slo.model_copy(update={"ttft_ms": 40.0}),
                          solve=problem.solve.model_copy(update={"objective": "ttft_excess"}))
    bound, parts = relaxation_bound(problem)
    best = min(evaluate(problem, np.array(p)).objective_ms for p in itertools.product(range(2), repeat=n))
    assert bound <= best + 1e-6
    if not excess:
        q = problem.requests
        rate = sum(1.0 / e.prefill_ms_per_token for e in problem.engines)
        tokens_only = srpt_total_flow_ms(q.arrival_ms, (q.prompt_tokens - reuse_upper_bound(problem)).astype(float), rate) / n
        assert parts["fast_machine_ms"] > tokens_only


@pytest.mark.solved
def test_no_policy_and_not_the_lookahead_milp_beats_the_bound():
    """Twelve requests in a burst on three unlike servers: every registered policy's placement and the look-ahead
    MILP's (windows of 6, committing 3), scored by the simulator, are at or above the bound."""
    from optfleet.problems.placement.exact import lookahead

    problem = _bursty(0, 12, 3)
    problem = replace(problem, solve=problem.solve.model_copy(update={"lookahead_requests": 6, "lookahead_commit": 3, "time_limit_s": 30.0}))
    bound, _ = relaxation_bound(problem)
    placements = {name: route(problem, make_policy(problem, name, {}, "test")) for name in POLICIES}
    placements["lookahead_milp"] = lookahead(problem)[0]
    objectives = {name: evaluate(problem, p).objective_ms for name, p in placements.items()}
    assert all(value >= bound - 1e-6 for value in objectives.values()), (bound, objectives)
