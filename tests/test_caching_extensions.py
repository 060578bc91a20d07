"""Extensions of the hindsight model, each checked by brute force on tiny traces.

(a) per-turn weights and per-conversation xi (SLO tiers), and fractional
    ``xi_tokens``: the LP stays exact; the greedy is strictly worse on the
    instances below;
(b) forced caching: an LP (still an interval matrix), checked against an
    event-level search that does not assume the constant-through-the-gap
    reduction; the forced greedy matches it;
(c) two tiers with a reload cost: a MILP, checked by enumerating every
    (fast, slow) split; the cascade greedy is strictly worse below.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optfleet.problems.caching import TtftModel, build_trace
from optfleet.problems.caching.belady import tail_optimized_belady
from optfleet.problems.caching.hindsight import solve_hindsight, solve_two_tier
from optfleet.problems.caching.tiers import evaluate_two_tier, two_tier_belady

from test_caching_hindsight import TEL_TOL, brute_force_tel, event_level_optimum, settings_, tel, traces

pytestmark = pytest.mark.solved

UNIT = TtftModel(1.0, 0.0)


def tiny_trace(seed: int, turns: int = 5, max_tokens: int = 2):
    rng = np.random.default_rng(seed)
    labels = ["a", "b", "a", "c", "b", "a"][:turns]
    return build_trace(labels, rng.integers(0, 6, turns).cumsum(), rng.integers(0, max_tokens + 1, turns), rng.integers(0, max_tokens + 1, turns))


# --- (a) weights, SLO tiers, fractional xi_tokens ------------------------------------------------


def test_weighted_tier_greedy_is_strictly_worse():
    """Room for one history: the greedy keeps the nearer next turn, the LP the premium conversation."""
    # a (premium, weight 3): turn at 0 (H after = 10), next at 10; b (weight 1): turn at 1 (H after = 10), next at 5.
    trace = build_trace(["a", "b", "b", "a"], [0, 1, 5, 10], [5, 5, 0, 0], [5, 5, 0, 0])
    weights = np.where(trace.conversation == 0, 3.0, 1.0)
    greedy = tail_optimized_belady(trace, 10, UNIT, 0.0)
    result = solve_hindsight(trace, 10, UNIT, 0.0, weights=weights)
    assert greedy.tolist() == [0, 10, 0, 0]
    assert result.kept_tokens.tolist() == [10, 0, 0, 0] and result.proven_optimal
    # First turns 3 x 5 + 5 ms; then the greedy pays 3 x 10 for a, the LP 1 x 10 for b.
    assert tel(trace, greedy, 10, UNIT, 0.0, weights) == pytest.approx(50.0)
    assert result.objective == pytest.approx(30.0)
    assert brute_force_tel(trace, 10, UNIT, 0.0, weights) == pytest.approx(30.0)


@pytest.mark.parametrize("seed", range(6))
def test_tiers_lp_matches_brute_force(seed):
    """Per-conversation weights and xi (premium: weight 4, xi 0; standard: weight 1, xi 2)."""
    trace = tiny_trace(seed)
    premium = trace.conversation == seed % trace.n_conversations
    weights = np.where(premium, 4.0, 1.0)
    xi = np.where(premium, 0.0, 2.0)
    capacity = 2 + seed % 4
    brute = brute_force_tel(trace, capacity, UNIT, xi, weights)
    for path in ("highspy", "pyomo"):
        result = solve_hindsight(trace, capacity, UNIT, xi, weights=weights, path=path)
        assert result.proven_optimal and result.objective == pytest.approx(brute, abs=TEL_TOL)
    assert tel(trace, tail_optimized_belady(trace, capacity, UNIT, xi), capacity, UNIT, xi, weights) >= brute - TEL_TOL


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), setting=settings_(), capacity=st.integers(0, 250), data=st.data())
def test_per_conversation_xi_alone_keeps_the_greedy_optimal(trace, setting, capacity, data):
    """Unit weights, whole xi_tokens per conversation: every kept token is still worth alpha, Theorem 1 holds."""
    ttft, _ = setting
    per_conversation = data.draw(st.lists(st.integers(0, 60), min_size=trace.n_conversations, max_size=trace.n_conversations))
    xi = ttft.beta_ms + ttft.alpha_ms_per_token * np.asarray(per_conversation, dtype=float)[trace.conversation]
    result = solve_hindsight(trace, capacity, ttft, xi)
    assert result.proven_optimal
    assert result.objective == pytest.approx(tel(trace, tail_optimized_belady(trace, capacity, ttft, xi), capacity, ttft, xi), abs=TEL_TOL)


def test_fractional_xi_tokens_greedy_is_strictly_worse():
    """xi_tokens = 0.5: a turn's last TEL-unsafe token is worth only 0.5 ms, the others 1 ms."""
    # a: H after 6, next at 10 (need 5.5 -> keep 6); b: H after 6, next at 5 (same); room for 10 of 12.
    trace = build_trace(["a", "b", "b", "a"], [0, 1, 5, 10], [3, 3, 0, 0], [3, 3, 0, 0])
    greedy = tail_optimized_belady(trace, 10, UNIT, 0.5)
    result = solve_hindsight(trace, 10, UNIT, 0.5)
    # Greedy evicts two tokens of a (the furthest): 0.5 + 1 ms; the LP one half-value token of each: 0.5 + 0.5 ms.
    assert greedy.tolist() == [4, 6, 0, 0]
    assert result.kept_tokens.tolist() == [5, 5, 0, 0] and result.integral and result.proven_optimal
    assert tel(trace, greedy, 10, UNIT, 0.5) == pytest.approx(6.5)
    assert result.objective == pytest.approx(6.0) == brute_force_tel(trace, 10, UNIT, 0.5)


@pytest.mark.parametrize("seed", range(5))
def test_fractional_xi_tokens_lp_matches_brute_force(seed):
    trace = tiny_trace(seed, max_tokens=3)
    ttft, xi, capacity = TtftModel(0.8, 0.3), 1.1 + 0.37 * seed, 3 + seed % 3  # xi_tokens = (xi - 0.3) / 0.8, fractional
    brute = brute_force_tel(trace, capacity, ttft, xi)
    for path in ("highspy", "pyomo"):
        result = solve_hindsight(trace, capacity, ttft, xi, path=path)
        assert result.proven_optimal and result.integral
        assert result.objective == pytest.approx(brute, abs=TEL_TOL)


# --- (b) forced caching --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_forced_lp_matches_event_level_search_and_brute_force(seed):
    """The forced LP's rows (5) are the right model: an event-level search over cache states agrees."""
    trace = tiny_trace(seed, turns=4 + seed % 2)
    capacity, xi = 2 + seed % 4, float(seed % 2)
    search = event_level_optimum(trace, capacity, UNIT, xi, forced=True)
    assert brute_force_tel(trace, capacity, UNIT, xi, forced=True) == pytest.approx(search, abs=TEL_TOL)
    for path in ("highspy", "pyomo"):
        result = solve_hindsight(trace, capacity, UNIT, xi, forced=True, path=path)
        assert result.proven_optimal and result.integral
        assert result.objective == pytest.approx(search, abs=TEL_TOL)
    forced_greedy = tail_optimized_belady(trace, capacity, UNIT, xi, forced=True)
    assert tel(trace, forced_greedy, capacity, UNIT, xi) == pytest.approx(search, abs=TEL_TOL)


def test_forced_caching_costs_more_than_optional():
    """A long single-turn conversation forces the others out under forced caching only."""
    # a: turn at 0 (H after 6), next at 3; b: one turn at 1 with 8 tokens; capacity 8.
    trace = build_trace(["a", "b", "a"], [0, 1, 3], [3, 4, 0], [3, 4, 0])
    optional = solve_hindsight(trace, 8, UNIT, 0.0)
    forced = solve_hindsight(trace, 8, UNIT, 0.0, forced=True)
    assert optional.kept_tokens.tolist() == [6, 0, 0] and forced.kept_tokens.tolist() == [0, 0, 0]
    assert forced.objective - optional.objective == pytest.approx(6.0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), setting=settings_(), capacity=st.integers(0, 250))
def test_forced_greedy_equals_forced_lp(trace, setting, capacity):
    ttft, xi = setting
    result = solve_hindsight(trace, capacity, ttft, xi, forced=True)
    greedy = tail_optimized_belady(trace, capacity, ttft, xi, forced=True)
    assert result.proven_optimal and result.integral
    assert result.objective == pytest.approx(tel(trace, greedy, capacity, ttft, xi), abs=TEL_TOL)
    assert result.objective >= solve_hindsight(trace, capacity, ttft, xi).objective - TEL_TOL


# --- (c) two tiers -------------------------------------------------------------------------------


def brute_force_two_tier(trace, fast_capacity, slow_capacity, ttft, xi, reload_ms) -> float:
    """Least two-tier TEL over every whole-token (fast, slow) split per gap, scored by evaluate_two_tier."""
    gaps = np.flatnonzero(trace.next_turn >= 0)
    splits = [[(f, s) for f in range(h + 1) for s in range(h + 1 - f)] for h in trace.history_after_tokens[gaps].tolist()]
    fast, slow = np.zeros(len(trace), dtype=np.int64), np.zeros(len(trace), dtype=np.int64)
    best = np.inf
    for choice in itertools.product(*splits):
        fast[gaps] = [f for f, _ in choice]
        slow[gaps] = [s for _, s in choice]
        try:
            best = min(best, evaluate_two_tier(trace, fast, slow, fast_capacity, slow_capacity, ttft, xi, reload_ms).tel_ms)
        except ValueError:
            continue
    return best


@pytest.mark.parametrize("seed", range(6))
def test_two_tier_milp_matches_brute_force(seed):
    trace = tiny_trace(seed, turns=4 + seed % 2, max_tokens=2)
    fast_capacity, slow_capacity, xi, reload_ms = 1 + seed % 3, 2 + seed % 2, float(seed % 2), (0.25, 0.5, 1.5)[seed % 3]
    brute = brute_force_two_tier(trace, fast_capacity, slow_capacity, UNIT, xi, reload_ms)
    result = solve_two_tier(trace, fast_capacity, slow_capacity, UNIT, xi, reload_ms)
    assert result.status == "optimal" and result.gap == 0.0
    assert result.objective == pytest.approx(brute, abs=TEL_TOL)
    fast, slow = two_tier_belady(trace, fast_capacity, slow_capacity, UNIT, xi, reload_ms)
    assert evaluate_two_tier(trace, fast, slow, fast_capacity, slow_capacity, UNIT, xi, reload_ms).tel_ms >= brute - TEL_TOL


def test_two_tier_cascade_greedy_is_strictly_worse():
    """b's reload hides under xi, a's does not: the fast tier belongs to a, the greedy splits it."""
    # a: H after 4, next at 10 with q = 2 (need 4); b: H after 4, next at 5 (need 2); fast 4, slow 8, reload 0.5 ms/token.
    trace = build_trace(["a", "b", "b", "a"], [0, 1, 5, 10], [2, 2, 0, 2], [2, 2, 0, 0])
    fast, slow = two_tier_belady(trace, 4, 8, UNIT, 2.0, 0.5)
    greedy = evaluate_two_tier(trace, fast, slow, 4, 8, UNIT, 2.0, 0.5)
    result = solve_two_tier(trace, 4, 8, UNIT, 2.0, 0.5)
    assert (fast.tolist(), slow.tolist()) == ([2, 2, 0, 0], [2, 0, 0, 0])
    assert greedy.tel_ms == pytest.approx(1.0)  # a: 2 uncached + 2 reloaded x 0.5 = 3 ms, xi 2
    assert result.objective == pytest.approx(0.0) == brute_force_two_tier(trace, 4, 8, UNIT, 2.0, 0.5)
    assert result.fast_tokens[0] == 4 and result.slow_tokens[1] == 4


def test_two_tier_evaluator_adds_the_reload_and_checks_each_tier():
    trace = build_trace(["a", "a"], [0, 1], [4, 2], [4, 0])
    ttft = TtftModel(1.0, 2.0)
    evaluation = evaluate_two_tier(trace, [3, 0], [5, 0], 3, 5, ttft, 0.0, 0.25)
    # Second turn: context 10, 8 cached (3 fast + 5 slow): 1 x 2 uncached + 0.25 x 5 reloaded + 2.
    assert evaluation.ttft_ms.tolist() == pytest.approx([6.0, 5.25])
    assert evaluation.base.cached_tokens.tolist() == [0, 8] and evaluation.reload_ms == pytest.approx(1.25)
    with pytest.raises(ValueError, match="fast tier"):
        evaluate_two_tier(trace, [4, 0], [4, 0], 3, 5, ttft, 0.0, 0.25)


def test_two_tier_reduces_to_one_tier():
    """No slow tier: the single-tier LP.  Free reload and no fast tier: a single tier of the slow capacity."""
    trace = tiny_trace(2, turns=6, max_tokens=3)
    for capacity in (2, 5):
        one_tier = solve_hindsight(trace, capacity, UNIT, 1.0).objective
        assert solve_two_tier(trace, capacity, 0, UNIT, 1.0, 0.5).objective == pytest.approx(one_tier)
        assert solve_two_tier(trace, 0, capacity, UNIT, 1.0, 0.0).objective == pytest.approx(one_tier)
