"""Tail-Optimized Belady and the hindsight LP: Theorem 1 on random traces, integrality, both paths, brute force.

Random traces use whole ``xi_tokens = (xi - beta) / alpha`` (Theorem 1's
setting; tests/test_caching_extensions.py covers the fractional case) and
alpha a power of two so that TTFT sums are exact in floating point.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyomo.environ as pyo
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optfleet.problems.caching import TtftModel, build_trace, evaluate_schedule
from optfleet.problems.caching.belady import tail_optimized_belady, tel_safe_keep_tokens
from optfleet.problems.caching.hindsight import solve_hindsight
from optfleet.problems.caching.lp_data import prepare
from optfleet.problems.caching.trace import ConversationTrace
from optfleet.models import caching as lp

pytestmark = pytest.mark.solved

TEL_TOL = 1e-6


@st.composite
def traces(draw, max_conversations: int = 8, max_turns: int = 4, max_tokens: int = 40, horizon: int = 30) -> ConversationTrace:
    """Random conversations: integer times (ties happen), token counts from 0 to ``max_tokens``."""
    conversation, t, q, a = [], [], [], []
    for c in range(draw(st.integers(1, max_conversations))):
        k = draw(st.integers(1, max_turns))
        times = np.cumsum(draw(st.lists(st.integers(0, horizon // 2), min_size=k, max_size=k)))
        for j in range(k):
            conversation.append(f"c{c}")
            t.append(int(times[j]))
            q.append(draw(st.integers(0, max_tokens)))
            a.append(draw(st.integers(0, max_tokens)))
    return build_trace(conversation, t, q, a)


@st.composite
def settings_(draw) -> tuple[TtftModel, float]:
    """A TTFT model and an xi whose ``xi_tokens`` is a whole number."""
    alpha = draw(st.sampled_from([0.25, 0.5, 1.0, 2.0]))
    beta = draw(st.sampled_from([0.0, 3.0]))
    return TtftModel(alpha, beta), beta + alpha * draw(st.integers(0, 60))


def tel(trace, kept, capacity, ttft, xi, weights=None) -> float:
    slo = float(np.max(xi)) if np.ndim(xi) else None
    return evaluate_schedule(trace, kept, capacity, ttft, xi, slo_ms=slo, weights=weights).tel_ms


def brute_force_tel(trace, capacity, ttft, xi, weights=None, forced: bool = False) -> float:
    """Least TEL over every whole-token ``kept`` (0 .. H_after per gap), scored by evaluate_schedule.

    With ``forced`` only schedules meeting the forced rows (5) of models/caching.py count.
    """
    gaps = np.flatnonzero(trace.next_turn >= 0)
    ranges = [range(int(trace.history_after_tokens[r]) + 1) for r in gaps]
    best = np.inf
    kept = np.zeros(len(trace), dtype=np.int64)
    for choice in itertools.product(*ranges):
        kept[gaps] = choice
        if forced and not meets_forced_rows(trace, kept, capacity):
            continue
        try:
            best = min(best, tel(trace, kept, capacity, ttft, xi, weights))
        except ValueError:  # over capacity
            continue
    return best


def meets_forced_rows(trace, kept, capacity) -> bool:
    """After each event k: the served turn's min(H_after_k, C) plus the other open gaps' kept tokens fit in C."""
    forced = np.minimum(trace.history_after_tokens, capacity)
    for k in range(len(trace)):
        others = sum(int(kept[r]) for r in range(k) if trace.next_turn[r] > k)
        if forced[k] + others > capacity or kept[k] > capacity:
            return False
    return True


def event_level_optimum(trace, capacity, ttft, xi, weights=None, forced: bool = False) -> float:
    """Least TEL over *event-level* cache states, without the constant-through-the-gap reduction.

    State after each event: the tokens each conversation holds.  At event k
    the conversation's holding is reused (TTFT), then it holds any amount up
    to its history (``forced``: exactly ``min(H_after, C)``), and every
    holding may shrink, freely, as long as the total fits ``C``.
    """
    n_conv = trace.n_conversations
    w = np.ones(len(trace)) if weights is None else np.broadcast_to(weights, (len(trace),))
    xi_row = np.broadcast_to(np.asarray(xi, dtype=float), (len(trace),))
    states = {tuple([0] * n_conv): 0.0}
    for k in range(len(trace)):
        c = int(trace.conversation[k])
        history = int(trace.history_after_tokens[k])
        new_states: dict[tuple[int, ...], float] = {}
        for state, cost in states.items():
            ttft_ms = float(ttft.ttft_ms(trace.context_tokens[k] - state[c]))
            cost = cost + w[k] * max(ttft_ms - xi_row[k], 0.0)
            own = [min(history, capacity)] if forced else range(history + 1)
            for mine in own:
                ranges = [range(state[i] + 1) if i != c else [mine] for i in range(n_conv)]
                for nxt in itertools.product(*ranges):
                    if sum(nxt) <= capacity and cost < new_states.get(nxt, np.inf):
                        new_states[nxt] = cost
        states = new_states
    return min(states.values())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(), setting=settings_(), capacity=st.integers(0, 250))
def test_lp_equals_tail_optimized_belady(trace, setting, capacity):
    """Theorem 1: the LP's TEL equals the greedy's; the LP vertex is whole; both pass the evaluator."""
    ttft, xi = setting
    greedy = tail_optimized_belady(trace, capacity, ttft, xi)
    greedy_tel = tel(trace, greedy, capacity, ttft, xi)
    result = solve_hindsight(trace, capacity, ttft, xi, path="highspy")
    assert result.status == "optimal" and result.integral and result.proven_optimal
    assert result.bound == result.objective and result.gap == 0.0
    assert result.objective == pytest.approx(tel(trace, result.kept_tokens, capacity, ttft, xi), abs=TEL_TOL)
    assert result.objective == pytest.approx(greedy_tel, abs=TEL_TOL)
    assert result.lp_objective == pytest.approx(result.objective, rel=1e-9, abs=TEL_TOL)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=traces(max_conversations=6), setting=settings_(), capacity=st.integers(0, 200), forced=st.booleans())
def test_pyomo_path_equals_highspy_path(trace, setting, capacity, forced):
    ttft, xi = setting
    weights = np.arange(len(trace)) % 3 + 1.0
    pyomo_run = solve_hindsight(trace, capacity, ttft, xi, weights=weights, path="pyomo", forced=forced)
    highs_run = solve_hindsight(trace, capacity, ttft, xi, weights=weights, path="highspy", forced=forced)
    whole_run = solve_hindsight(trace, capacity, ttft, xi, weights=weights, path="highspy", forced=forced, decompose=False)
    assert pyomo_run.integral and highs_run.integral and whole_run.integral
    assert pyomo_run.proven_optimal and highs_run.proven_optimal and whole_run.proven_optimal
    assert pyomo_run.objective == pytest.approx(highs_run.objective, abs=TEL_TOL)
    assert whole_run.objective == pytest.approx(highs_run.objective, abs=TEL_TOL)


@pytest.mark.parametrize("seed", range(6))
def test_brute_force_on_tiny_traces(seed):
    """Enumerating every whole-token schedule, and every event-level cache state, finds the LP's and the greedy's TEL."""
    rng = np.random.default_rng(seed)
    trace = build_trace(["a", "b", "a", "c", "b", "a"][: 4 + seed % 3], rng.integers(0, 6, 4 + seed % 3).cumsum(),
                        rng.integers(0, 3, 4 + seed % 3), rng.integers(0, 3, 4 + seed % 3))
    ttft, xi, capacity = TtftModel(1.0, 0.0), float(seed % 3), int(rng.integers(1, 7))
    brute = brute_force_tel(trace, capacity, ttft, xi)
    result = solve_hindsight(trace, capacity, ttft, xi)
    assert result.objective == pytest.approx(brute, abs=TEL_TOL)
    assert tel(trace, tail_optimized_belady(trace, capacity, ttft, xi), capacity, ttft, xi) == pytest.approx(brute, abs=TEL_TOL)
    assert event_level_optimum(trace, capacity, ttft, xi) == pytest.approx(brute, abs=TEL_TOL)


def test_greedy_keeps_at_most_the_tel_safe_budget_and_evicts_the_furthest():
    """Two conversations, room for one: the one whose next turn comes first keeps its TEL-safe need."""
    # a: turn at 0 (q=4, a=6), next at 10 with q=2; b: turn at 1 (q=3, a=3), next at 4 with q=1.
    trace = build_trace(["a", "b", "b", "a"], [0, 1, 4, 10], [4, 3, 1, 2], [6, 3, 0, 0])
    ttft = TtftModel(1.0, 0.0)
    caps = tel_safe_keep_tokens(trace, ttft, 5.0)
    # a's next turn: H = 10, q = 2 -> need 7 -> keep 7; b's: H = 6, q = 1 -> need 2.
    assert caps.tolist() == [7, 2, 0, 0]
    kept = tail_optimized_belady(trace, 8, ttft, 5.0)
    assert kept.tolist() == [6, 2, 0, 0]  # over by 1 after b's turn: a (next at 10) loses one token
    assert solve_hindsight(trace, 8, ttft, 5.0).objective == pytest.approx(tel(trace, kept, 8, ttft, 5.0))


def test_only_gap_end_rows_are_built_and_the_matrix_is_an_interval_matrix():
    trace = build_trace(["a", "b", "c", "a", "b", "c"], [0, 1, 2, 3, 4, 5], [5] * 6, [5] * 6)
    data = prepare(trace, 5, TtftModel(1.0, 0.0), 0.0)
    # Gaps 0, 1, 2 end at events 3, 4, 5: rows after events 2, 3, 4, never after 0 or 1.
    assert data.row_event.tolist() == [2, 3, 4]
    # With room for two histories only the row after event 2 (three open gaps, 30 tokens) can bind.
    assert prepare(trace, 20, TtftModel(1.0, 0.0), 0.0).row_event.tolist() == [2]
    start, index = lp.column_rows(data)
    for j in range(data.n_columns):
        rows = index[start[j]:start[j + 1]]
        assert np.array_equal(rows, np.arange(rows[0], rows[0] + len(rows)))


def test_time_limited_run_is_not_proven_optimal_and_keeps_a_valid_bound():
    rng = np.random.default_rng(3)
    n = 400
    trace = build_trace(rng.integers(0, 60, n), np.sort(rng.uniform(0, 200, n)), rng.integers(1, 80, n), rng.integers(1, 200, n))
    ttft = TtftModel(0.5, 0.0)
    optimum = solve_hindsight(trace, 600, ttft, 40.0)
    stopped = solve_hindsight(trace, 600, ttft, 40.0, time_limit_s=1e-9)
    assert stopped.status == "time_limit" and not stopped.proven_optimal
    assert stopped.bound <= optimum.objective + TEL_TOL <= stopped.objective + 2 * TEL_TOL
    assert stopped.gap is not None and stopped.gap >= 0
    # The incumbent is at least as good as Tail-Optimized Belady's schedule (here: equal, Theorem 1).
    assert stopped.objective == pytest.approx(tel(trace, tail_optimized_belady(trace, 600, ttft, 40.0), 600, ttft, 40.0))


def test_lagrangian_bound_at_the_optimal_duals_equals_the_optimum():
    rng = np.random.default_rng(4)
    n = 120
    trace = build_trace(rng.integers(0, 20, n), np.sort(rng.uniform(0, 60, n)), rng.integers(1, 50, n), rng.integers(1, 90, n))
    data = prepare(trace, 300, TtftModel(1.0, 0.0), 20.0)
    model = lp.build(data)
    model.dual = pyo.Suffix(direction=pyo.Suffix.IMPORT)
    pyo.SolverFactory("appsi_highs").solve(model)
    duals = np.array([-model.dual[model.capacity[k]] for k in data.row_event.tolist()])
    assert lp.lagrangian_bound_ms(data, duals) == pytest.approx(pyo.value(model.tel), rel=1e-9)
    assert lp.lagrangian_bound_ms(data, np.zeros(data.n_rows)) == pytest.approx(data.unlimited_cache_bound_ms())


def test_customize_adds_a_constraint_by_name():
    trace = build_trace(["a", "b", "b", "a"], [0, 1, 4, 10], [4, 3, 1, 2], [6, 3, 0, 0])
    ttft = TtftModel(1.0, 0.0)
    free = solve_hindsight(trace, 8, ttft, 5.0)

    def no_cache_for_gap_0(m: pyo.ConcreteModel) -> None:
        m.pin = pyo.Constraint(expr=m.kept[0] == 0)

    pinned = solve_hindsight(trace, 8, ttft, 5.0, customize=no_cache_for_gap_0)
    assert pinned.path == "pyomo" and pinned.kept_tokens[0] == 0 and pinned.proven_optimal
    assert pinned.objective >= free.objective


def test_nothing_to_cache():
    trace = build_trace(["a", "a"], [0, 1], [3, 3], [3, 3])
    ttft = TtftModel(1.0, 0.0)
    for capacity, xi in ((0, 0.0), (100, 50.0)):
        result = solve_hindsight(trace, capacity, ttft, xi)
        assert result.kept_tokens.tolist() == [0, 0] and result.proven_optimal
        assert result.objective == pytest.approx(tel(trace, np.zeros(2, dtype=np.int64), capacity, ttft, xi))


@pytest.mark.slow
def test_lp_equals_greedy_on_a_generated_trace_of_1e5_turns():
    from optfleet.problems.caching.generate import ConversationModel, LengthModel, generate_trace

    model = ConversationModel.from_summary(1.0, 3.5, 3.0, LengthModel("lognormal", 100, 1.0), LengthModel("lognormal", 300, 1.0))
    trace = generate_trace(model, 28_600, seed=11)
    ttft = TtftModel(0.5, 0.0)
    for capacity in (1_000, 3_000, 10_000):
        result = solve_hindsight(trace, capacity, ttft, 100.0)
        greedy = tail_optimized_belady(trace, capacity, ttft, 100.0)
        assert result.proven_optimal and result.integral
        assert result.objective == pytest.approx(tel(trace, greedy, capacity, ttft, 100.0), rel=1e-12)
