"""The KV-hold part of the placement bound (kv_bound.py): its blocks and holds by hand, a case where it is tight, and
its validity against every registered policy (and random placements) under the simulator on small cases with tight
KV budgets, where admissions wait."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.problems.placement.bounds import prefill_floors_ms, relaxation_bound
from optfleet.problems.placement.evaluate import evaluate
from optfleet.problems.placement.kv_bound import hold_floor_ms, own_blocks
from optfleet.problems.placement.policies import POLICIES, make_policy, route

from test_placement import instance, with_requests


def test_own_blocks_count_the_tail_and_the_prompt_blocks_nobody_before_names():
    """16-token blocks.  r0: P = 100, O = 2, group 0 with a 32-token system prompt, session 0: T = 7, full prompt
    blocks 6, nobody before it: h = 7.  r1: same group and session (the next turn, P = 150, O = 10): T = 10, its 9
    full prompt blocks are named (g0, 0-1) and (s0, 2-8), of which r0 named (g0, 0-1) and (s0, 2-6): h = 1 tail +
    2 (s0, 7-8) = 3.  r2: group 0, new session 5 (P = 40, O = 1): T = 3, full 2 = the group's, named: h = 3 - 2 = 1."""
    problem = with_requests(instance(), [(0.0, 100, 2, 32, 0, 0), (1.0, 150, 10, 32, 0, 0), (2.0, 40, 1, 32, 0, 5)])
    assert own_blocks(problem).tolist() == [7, 3, 1]


def test_two_requests_that_cannot_share_the_kv_wait_one_hold_and_the_bound_is_tight():
    """One server whose 3 KV blocks hold one request (P = 40, O = 5, 3 blocks; test_placement.py's timing): both
    arrive at 0, the first's TTFT is f = 4 + 0.25 x 3 + 0.5 x 40 = 24.75 ms and it holds its blocks for L = f + 4 x
    5.75 = 47.75 ms; the second is admitted when they are released and its TTFT is 47.75 + 24.75.  The fluid can do
    no better than one after the other (equal areas, the whole pool each), so the bound is f + L / 2 = 48.625 ms, the
    simulated mean, less at most one grid slot (143.25 / 400 ms) for the slots' lower-end dates.  The per-request
    floor sees 24.75 ms and the fast machine (0.5 x 40 + 4.75 x 40 / 1000 = 20.19 ms of work each, one after the
    other) 30.285 ms."""
    problem = with_requests(instance(kv=3), [(0.0, 40, 5, 0, -1, 0), (0.0, 40, 5, 0, -1, 1)])
    assert hold_floor_ms(problem, prefill_floors_ms(problem)).tolist() == pytest.approx([47.75, 47.75])
    bound, parts = relaxation_bound(problem)
    simulated = evaluate(problem, np.zeros(2, dtype=int)).objective_ms
    assert simulated == pytest.approx(48.625)
    assert parts["per_request_ms"] == pytest.approx(24.75) and parts["fast_machine_ms"] == pytest.approx(30.285)
    assert bound == parts["kv_hold_ms"]
    assert 48.625 - 143.25 / 400 <= bound <= 48.625 + 1e-6


def _tight_kv(seed: int, n: int, servers: int):
    """``n`` requests over 300 ms on ``servers`` servers (the last slower), random prompt and output lengths (up to 40
    output tokens, so holds outlast prefills), two groups with a 32-token system prompt, sessions within groups, KV
    room for one to three of the largest requests (admissions wait) and 2-8 sequences per server."""
    rng = np.random.default_rng(seed)
    rows = [(float(t), int(p), int(o), 32, int(g), 10 * int(g) + int(s)) for t, p, o, g, s in
            zip(np.sort(rng.uniform(0, 300, n)), rng.integers(20, 160, n), rng.integers(1, 41, n), rng.integers(0, 2, n),
                rng.integers(0, 4, n), strict=True)]
    largest = max(-(-(p + o) // 16) for _, p, o, *_ in rows)
    doc = instance(servers=servers, kv=int(largest * rng.uniform(1.0, 3.0)), seqs=int(rng.integers(2, 9)),
                   budget=int(rng.integers(16, 200)))
    problem = with_requests(doc, rows)
    slow = replace(problem.engines[-1], prefill_ms_per_token=0.8, step_base_ms=6.0, step_ms_per_kv_block=0.4)
    return replace(problem, engines=(*problem.engines[:-1], slow))


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(5, 30), servers=st.integers(1, 3))
def test_no_policy_and_no_random_placement_beats_the_bound_under_tight_kv(seed, n, servers):
    """Every registered policy's placement and three random ones, scored by the simulator, are at or above the
    bound (all its parts) on small cases where requests wait for KV blocks."""
    problem = _tight_kv(seed, n, servers)
    bound, parts = relaxation_bound(problem)
    rng = np.random.default_rng(seed)
    placements = [route(problem, make_policy(problem, name, {}, "test")) for name in POLICIES]
    placements += [rng.integers(0, servers, n) for _ in range(3)]
    best = min(evaluate(problem, np.asarray(p)).objective_ms for p in placements)
    assert bound == max(parts.values())
    assert bound <= best + 1e-6, (parts, best)


@pytest.mark.slow
@pytest.mark.solved
def test_the_lookahead_milp_does_not_beat_the_bound_under_tight_kv():
    """Twenty requests with tight KV on two servers: the look-ahead MILP's placement (windows of 6, committing 3),
    scored by the simulator, is at or above the bound."""
    from optfleet.problems.placement.exact import lookahead

    problem = _tight_kv(3, 20, 2)
    problem = replace(problem, solve=problem.solve.model_copy(update={"lookahead_requests": 6, "lookahead_commit": 3, "time_limit_s": 30.0}))
    bound, _ = relaxation_bound(problem)
    assert evaluate(problem, lookahead(problem)[0]).objective_ms >= bound - 1e-6


def test_the_kv_part_is_left_out_when_its_lp_passes_the_time_limit():
    # the KV-hold LP obeys solve.time_limit_s: stopped by HiGHS (a limit of 0 s), it gives no part rather than an
    # unproven value, and the bound falls back to the other two parts
    problem = with_requests(instance(kv=3), [(0.0, 40, 5, 0, -1, 0), (0.0, 40, 5, 0, -1, 1)])
    limited = replace(problem, solve=problem.solve.model_copy(update={"time_limit_s": 0.0}))
    bound, parts = relaxation_bound(limited)
    assert "kv_hold_ms" not in parts and bound == max(parts.values())
    assert "kv_hold_ms" in relaxation_bound(problem)[1]
