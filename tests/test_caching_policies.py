"""Online caching policies and their replay: hand-worked values, an independent token-level replay, properties.

Why Length-aware T-LRU is never worse than LRU in TEL (checked below on
random traces).  Both replay LRU order by last turn; a conversation's cached
amount at any time is at most ``max(0, C - S)``, with ``S`` the tokens held
by more recent conversations, and equals that bound under LRU, whose
admitted sizes (whole histories) only grow.  T-LRU admits budgets
``b <= L`` (the history), so for every conversation the more recent ones
hold no more under T-LRU than under LRU (``b_k(t') <= L_k(t') <= L_k(t)``
for earlier ``t'``), and its cached prefix is ``>= min(b, x_LRU)``.  With
the exact next prompt length, ``b`` covers every token that can lower the
next turn's excess, so each turn's excess is at most LRU's: per turn
``TTFT_LA <= max(TTFT_LRU, xi)``, hence TEL and the violations above ``xi``
are at most LRU's.  With an estimate ``Q_hat`` below the next prompt the
trim itself costs excess, and T-LRU can lose to LRU
(:func:`test_t_lru_with_an_estimate_can_lose_to_lru`; on the ShareGPT-like
instance it does at capacities >= 6,000 tokens).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from optfleet.problems.caching.belady import tail_optimized_belady
from optfleet.problems.caching.evaluate import TtftModel, evaluate_schedule
from optfleet.problems.caching.policies import (
    ETLRU,
    LRU,
    POLICIES,
    TLRU,
    CachePolicy,
    EndAwareTLRU,
    LengthAwareTLRU,
    ReplayContext,
    make_policy,
    tel_safe_budget_tokens,
)
from optfleet.problems.caching.replay import replay
from optfleet.problems.caching.trace import ConversationTrace, build_trace
from optfleet.errors import InputError
import optfleet

from support import REPO

pytestmark = pytest.mark.unit

TINY = REPO / "instances" / "caching" / "tiny.yaml"
UNIT_TTFT = TtftModel(1.0, 0.0)

# Every policy's TEL on the tiny instance, worked out by hand (xi = 50 ms, 1 ms per token):
#   C = 100: LRU 110 (A cut to 0 by B's and C's inserts, B evicted by A's last turn);
#     Threshold-LRU(50) 90 (C's 40 tokens are not cached, A keeps 20);
#     T-LRU (Q_hat = mean prompt 32: budgets L - 18) 94 (A keeps 16);
#     End-aware T-LRU 12 (C and the last turns keep nothing: A keeps 38, B 62);
#     Length-aware T-LRU 92 (budgets 50 for A, 60 for B: A keeps 18);
#     ET-LRU 80 (S(y) = P(Q > y) steps 1, 0.8, 0.4, 0 at 20, 30, 40; mu = 1/(3 s x 5/3) = 0.2/s:
#       A keeps 30 of 40 after C's insert, B is cut to 0 by A's last turn);
#     Tail-Optimized Belady and the hindsight LP 10 (A keeps 50, B 50).
#   C = 200: LRU 20 (A's last turn evicts 40 of B); Threshold-LRU 0; T-LRU 8 and End-aware 8 (A keeps 42);
#     Length-aware 0; ET-LRU 0 (A's last turn costs B only its 0.4-step tokens, B keeps 60); Belady 0.
TINY_TEL_MS = {
    100: {"lru": 110, "threshold-lru": 90, "t-lru": 94, "end-aware-t-lru": 12, "length-aware-t-lru": 92, "et-lru": 80, "belady": 10},
    200: {"lru": 20, "threshold-lru": 0, "t-lru": 8, "end-aware-t-lru": 8, "length-aware-t-lru": 0, "et-lru": 0, "belady": 0},
}


@pytest.fixture(scope="module")
def tiny():
    return optfleet.load(TINY).problem


def _tel(trace: ConversationTrace, kept, capacity: int, ttft: TtftModel = UNIT_TTFT, xi_ms: float = 50.0) -> float:
    return evaluate_schedule(trace, kept, capacity, ttft, xi_ms).tel_ms


@pytest.mark.parametrize("capacity", [100, 200])
def test_tiny_instance_matches_the_hand_worked_tel(tiny, capacity):
    for entry in tiny.policies:
        if entry.is_hindsight:
            kept = tail_optimized_belady(tiny.trace, capacity, tiny.ttft, tiny.xi_ms)
        else:
            kept = replay(tiny.trace, entry.make(), capacity, tiny.ttft, tiny.xi_ms).kept_tokens
        assert _tel(tiny.trace, kept, capacity) == TINY_TEL_MS[capacity][entry.label], entry.label


def test_tiny_schedules_in_detail(tiny):
    lru = replay(tiny.trace, LRU(), 100, UNIT_TTFT, 50.0).kept_tokens
    np.testing.assert_array_equal(lru, [0, 0, 0, 0, 0])  # A and B return to nothing
    end_aware = replay(tiny.trace, EndAwareTLRU(), 100, UNIT_TTFT, 50.0).kept_tokens
    np.testing.assert_array_equal(end_aware, [38, 62, 0, 0, 0])
    et = ETLRU()
    np.testing.assert_array_equal(replay(tiny.trace, et, 100, UNIT_TTFT, 50.0).kept_tokens, [30, 0, 0, 0, 0])
    assert et.mu_used == pytest.approx(0.2)


def test_tiny_forced_caching_by_hand(tiny):
    """Forced caching, C = 200: A's last turn must insert all 120 tokens (T-LRU's surplus above the budget
    of 102 stays); T-LRU first drops B's and C's surplus (18 each) and then 4 of B (TEL 2);
    End-aware drops B's surplus and 22 of C's 40 useless tokens (TEL 0); LRU evicts 40 of B (TEL 20)."""
    expected = {LRU: 20, TLRU: 2, EndAwareTLRU: 0}
    for cls, tel in expected.items():
        kept = replay(tiny.trace, cls(), 200, UNIT_TTFT, 50.0, forced_caching=True).kept_tokens
        assert _tel(tiny.trace, kept, 200) == tel, cls.name
    assert _tel(tiny.trace, replay(tiny.trace, TLRU(), 100, UNIT_TTFT, 50.0, forced_caching=True).kept_tokens, 100) == 110


def test_tel_safe_budget():
    # L + Q - s, clipped to [0, L]; a fractional s rounds the budget up (the next turn must stay within xi).
    np.testing.assert_array_equal(tel_safe_budget_tokens([100, 100, 10, 100], [50, 50, 5, 0], 80.0), [70, 70, 0, 20])
    np.testing.assert_array_equal(tel_safe_budget_tokens([100], [50], 79.5), [71])
    np.testing.assert_array_equal(tel_safe_budget_tokens([100], [50], -10.0), [100])


# ---------------------------------------------------------------- an independent replay, one token at a time


def reference_replay(trace: ConversationTrace, policy: CachePolicy, capacity: int, ttft: TtftModel, xi_ms: float,
                     forced: bool) -> np.ndarray:
    """The replay contract read literally: admit, then evict single tokens from the smallest (tier, key, last turn)."""
    policy.bind(ReplayContext(trace, capacity, ttft, xi_ms, forced))
    cached: dict[int, int] = {}
    last: dict[int, int] = {}
    kept = np.zeros(len(trace), dtype=np.int64)
    for row in range(len(trace)):
        c = int(trace.conversation[row])
        if trace.prev_turn[row] >= 0:
            kept[trace.prev_turn[row]] = cached.get(c, 0)
        history = int(trace.history_after_tokens[row])
        cached[c] = min(history if forced else policy.admit_tokens(row), capacity)
        last[c] = row
        while sum(cached.values()) > capacity:
            candidates = [j for j, x in cached.items() if x > 0 and not (forced and j == c)]
            j = min(candidates, key=lambda j: (*policy.eviction_key(j, cached[j], last[j])[:2], last[j]))
            cached[j] -= 1
    return kept


def random_trace(rng: np.random.Generator, conversations: int = 5, turns: int = 14) -> ConversationTrace:
    conv = rng.integers(0, conversations, turns)
    t = np.sort(rng.integers(0, 6, turns)).astype(float)  # shared times: ET-LRU keys tie
    return build_trace(conv, t, rng.integers(1, 60, turns), rng.integers(0, 60, turns))


@pytest.mark.parametrize("seed", range(12))
def test_heap_replay_equals_token_by_token_replay(seed):
    rng = np.random.default_rng(seed)
    trace = random_trace(rng)
    capacity = int(rng.integers(20, 250))
    xi_ms = float(rng.integers(0, 80))
    for forced in (False, True):
        for name in POLICIES:
            fast = replay(trace, make_policy(name), capacity, UNIT_TTFT, xi_ms, forced_caching=forced).kept_tokens
            slow = reference_replay(trace, make_policy(name), capacity, UNIT_TTFT, xi_ms, forced)
            np.testing.assert_array_equal(fast, slow, err_msg=f"{name} forced={forced}")


# ---------------------------------------------------------------- properties on random traces

turns_strategy = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(1, 80), st.integers(0, 80)),  # conversation, time step, q, a
    min_size=1, max_size=24,
)


def _trace(turns) -> ConversationTrace:
    conv, step, q, a = zip(*turns, strict=True)
    return build_trace(conv, np.cumsum(step).astype(float), q, a)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=turns_strategy, capacity=st.integers(1, 300), xi_ms=st.integers(0, 120), forced=st.booleans())
def test_every_policy_schedule_passes_the_evaluator(turns, capacity, xi_ms, forced):
    trace = _trace(turns)
    for name in POLICIES:
        kept = replay(trace, make_policy(name), capacity, UNIT_TTFT, float(xi_ms), forced_caching=forced).kept_tokens
        evaluate_schedule(trace, kept, capacity, UNIT_TTFT, float(xi_ms), policy=name)  # raises on any violation


@settings(max_examples=150, deadline=None)
@given(turns=turns_strategy, capacity=st.integers(1, 300), xi_ms=st.integers(0, 120))
def test_length_aware_t_lru_is_never_worse_than_lru(turns, capacity, xi_ms):
    trace = _trace(turns)
    lru = evaluate_schedule(trace, replay(trace, LRU(), capacity, UNIT_TTFT, xi_ms).kept_tokens, capacity, UNIT_TTFT, xi_ms)
    aware = evaluate_schedule(trace, replay(trace, LengthAwareTLRU(), capacity, UNIT_TTFT, xi_ms).kept_tokens, capacity, UNIT_TTFT, xi_ms)
    assert aware.tel_ms <= lru.tel_ms
    assert np.all(aware.ttft_ms <= np.maximum(lru.ttft_ms, xi_ms))  # turn by turn
    assert aware.violations <= lru.violations


def test_t_lru_with_an_estimate_can_lose_to_lru():
    """One conversation, a cache that holds everything: LRU keeps the whole history (TEL 0); T-LRU with
    Q_hat = 10 keeps L + 10 - s = 30 of 100 tokens, and the next prompt of 40 tokens then prefills 110 > 80."""
    trace = build_trace(["a", "a"], [0.0, 1.0], [50, 40], [50, 0])
    lru = replay(trace, LRU(), 1000, UNIT_TTFT, 80.0).kept_tokens
    t_lru = replay(trace, TLRU(q_hat_tokens=10), 1000, UNIT_TTFT, 80.0).kept_tokens
    assert (lru[0], t_lru[0]) == (100, 30)
    assert _tel(trace, lru, 1000, xi_ms=80.0) == 0 and _tel(trace, t_lru, 1000, xi_ms=80.0) == 30


@settings(max_examples=100, deadline=None)
@given(turns=turns_strategy, capacity=st.integers(1, 300), xi_ms=st.integers(0, 120))
def test_belady_is_at_least_as_good_as_every_online_policy(turns, capacity, xi_ms):
    """Optional caching, whole xi_tokens (alpha = 1 ms/token, integer xi): Belady's TEL is optimal (Theorem 1)."""
    trace = _trace(turns)
    best = _tel(trace, tail_optimized_belady(trace, capacity, UNIT_TTFT, xi_ms), capacity, xi_ms=xi_ms)
    for name in POLICIES:
        kept = replay(trace, make_policy(name), capacity, UNIT_TTFT, xi_ms).kept_tokens
        assert best <= _tel(trace, kept, capacity, xi_ms=xi_ms), name


@settings(max_examples=60, deadline=None)
@given(turns=turns_strategy, capacity=st.integers(1, 300), xi_ms=st.integers(0, 120), forced=st.booleans(),
       prompt=st.integers(1, 80), mu=st.floats(0.01, 10.0))
def test_et_lru_with_one_prompt_length_is_t_lru(turns, capacity, xi_ms, forced, prompt, mu):
    """With every prompt of the same length Q, ET-LRU's survival is a single step at Q: it is T-LRU with Q_hat = Q."""
    trace = _trace([(c, s, prompt, a) for c, s, _, a in turns])
    et = replay(trace, ETLRU(end_rate_per_s=mu), capacity, UNIT_TTFT, xi_ms, forced_caching=forced).kept_tokens
    t = replay(trace, TLRU(q_hat_tokens=prompt), capacity, UNIT_TTFT, xi_ms, forced_caching=forced).kept_tokens
    np.testing.assert_array_equal(et, t)


@settings(max_examples=60, deadline=None)
@given(turns=turns_strategy, capacity=st.integers(1, 300), xi_ms=st.integers(0, 120))
def test_forced_lru_equals_optional_lru(turns, capacity, xi_ms):
    """LRU admits every history and the served conversation is always the most recent: forcing changes nothing."""
    trace = _trace(turns)
    optional = replay(trace, LRU(), capacity, UNIT_TTFT, xi_ms).kept_tokens
    np.testing.assert_array_equal(optional, replay(trace, LRU(), capacity, UNIT_TTFT, xi_ms, forced_caching=True).kept_tokens)


# ---------------------------------------------------------------- the pluggable interface


def _docstring_example() -> str:
    """The indented code block of optfleet.problems.caching.policies' "Writing a policy" section, dedented."""
    import textwrap

    import optfleet.problems.caching.policies as module

    block = module.__doc__.split("instance files::\n", 1)[1].split("\nThe replay checks", 1)[0]
    return textwrap.dedent(block)


def test_a_user_policy_registers_and_replays(tiny):
    exec(_docstring_example(), {})  # defines and registers the docstring's ShortestHistoryFirst
    try:
        policy = make_policy("shortest-history-first")
        kept = replay(tiny.trace, policy, 100, tiny.ttft, tiny.xi_ms).kept_tokens
        # B's insert (80) evicts 40 of A (60, shorter); C's insert (40, shortest) evicts itself;
        # A's last turn inserts 100 of its 120 tokens and evicts B (80 < 120): TEL 30 + 60.
        np.testing.assert_array_equal(kept, [20, 0, 0, 0, 0])
        assert _tel(tiny.trace, kept, 100) == 90
        assert np.array_equal(kept, reference_replay(tiny.trace, make_policy("shortest-history-first"), 100, tiny.ttft, tiny.xi_ms, False))
    finally:
        POLICIES.pop("shortest-history-first")


def test_a_policy_admitting_more_than_the_history_is_a_bug(tiny):
    class Greedy(LRU):
        def admit_tokens(self, row: int) -> int:
            return int(self.context.trace.history_after_tokens[row]) + 1

    with pytest.raises(ValueError, match="outside"):
        replay(tiny.trace, Greedy(), 100, tiny.ttft, tiny.xi_ms)


def test_policy_construction_errors():
    with pytest.raises(InputError, match="unknown policy"):
        make_policy("mru")
    with pytest.raises(InputError, match="bad parameters"):
        make_policy("lru", threshold_tokens=3)
    with pytest.raises(InputError):
        make_policy("threshold-lru", threshold_tokens=-1)
    with pytest.raises(InputError, match="capacity_tokens"):
        replay(build_trace(["a"], [0.0], [1], [1]), LRU(), 0, UNIT_TTFT, 1.0)


def test_a_registered_policy_can_be_named_in_an_instance_file():
    from optfleet.problems.caching.policies import POLICIES, register_policy

    document = {"kind": "caching", "name": "registered", "trace": {"file": str(TINY.parent / "tiny.csv")}, "capacity_tokens": [100],
                "ttft": {"alpha_ms_per_token": 1.0}, "xi_ms": 50, "policies": ["lru", {"name": "plain-lru", "label": "mine"}]}
    with pytest.raises(InputError, match=r"policies\.1.*unknown policy; registered policies: lru, .*belady"):
        optfleet.load(document)
    register_policy("plain-lru", POLICIES["lru"])
    try:
        rows = {r["method"]: r for r in optfleet.run_gap(document, ["lru", "mine"]).rows}
        assert rows["mine"]["objective"] == rows["lru"]["objective"] == 110.0
    finally:
        POLICIES.pop("plain-lru")
