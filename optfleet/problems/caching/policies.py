"""Online prompt-caching policies: a small pluggable interface and the paper's policies.

Source: "Tail-Optimized Caching for LLM Inference" (Zhang, Li, Moallemi, Peng,
NeurIPS 2025, arXiv:2510.15152).  Notation: after turn ``j`` of a conversation
its history is ``L = H_j + q_j + a_j`` tokens (``trace.history_after_tokens``);
the next turn adds ``Q`` prompt tokens, so it must prefill ``L + Q - x``
tokens when ``x`` tokens of the history are still cached.  With ``TTFT =
alpha * uncached + beta`` its tail excess ``max(TTFT - xi, 0)`` is zero iff
``L + Q - x <= s`` where ``s = (xi - beta) / alpha``
(:meth:`~optfleet.problems.caching.evaluate.TtftModel.safe_uncached_tokens`).  So only
the first ``b = clip(ceil(L + Q - s), 0, L)`` tokens can ever lower TEL: the
*TEL-safe budget* (:func:`tel_safe_budget_tokens`).

How a policy is replayed (:func:`optfleet.problems.caching.replay.replay`): the cache
holds, per conversation, a prefix of its history.  Events are the trace's
turns in order.  When turn ``row`` of conversation ``c`` arrives, whatever is
cached of ``c`` is its cached prefix; after serving it:

1. *admission* — under optional caching (the default) the policy says how many
   tokens of ``c``'s new history stay cached, :meth:`CachePolicy.admit_tokens`
   (0 .. ``L``); under forced caching all ``L`` tokens are inserted
   (``min(L, C)``) and ``c`` is not evicted in this event;
2. *eviction* — while the cache holds more than ``C`` tokens, the conversation
   with the smallest :meth:`CachePolicy.eviction_key` loses tokens from the end
   of its cached prefix, down to the key's floor at most, and is then asked for
   a new key.

Writing a policy
----------------
Subclass :class:`CachePolicy`, give it a ``name``, implement ``admit_tokens``
and, if plain LRU order is not what you want, ``eviction_key``.  A key is
``(tier, key, floor_tokens)``: lower ``(tier, key)`` is evicted first (on a
tie, the conversation with the older last turn), and the key holds for the
tokens above ``floor_tokens``.  It may depend on the
conversation's state (its last turn ``row`` and ``cached_tokens``) but not on
the current time, except through a term common to every conversation (which
does not change the order).  Register it to use it by name in instance files::

    from optfleet.problems.caching.policies import CachePolicy, register_policy

    class ShortestHistoryFirst(CachePolicy):
        '''Cache every history; evict the conversation with the shortest history first.'''

        name = "shortest-history-first"

        def admit_tokens(self, row: int) -> int:
            return int(self.context.trace.history_after_tokens[row])

        def eviction_key(self, conversation: int, cached_tokens: int, row: int) -> tuple[int, float, int]:
            return (0, float(self.context.trace.history_after_tokens[row]), 0)

    register_policy(ShortestHistoryFirst.name, ShortestHistoryFirst)

The replay checks nothing about the policy's choices beyond the bounds above;
its ``kept_tokens`` then go through :func:`~optfleet.problems.caching.evaluate.evaluate_schedule`
like every schedule.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.errors import InputError
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.caching.trace import ConversationTrace

# A tier-0 key is evicted before any tier-1 key: tokens a policy holds only
# because forced caching inserted them (beyond its admission budget).
SURPLUS_TIER = 0
KEEP_TIER = 1


@dataclass(frozen=True)
class ReplayContext:
    """What a policy may look at: the trace (with its oracle columns), capacity, TTFT model, threshold."""

    trace: ConversationTrace
    capacity_tokens: int
    ttft: TtftModel
    xi_ms: float
    forced_caching: bool = False

    @property
    def safe_uncached_tokens(self) -> float:
        """``s = (xi - beta) / alpha``: uncached tokens a turn may prefill without tail excess."""
        return float(self.ttft.safe_uncached_tokens(self.xi_ms))


class CachePolicy:
    """Base class of online caching policies (see the module docstring for the replay contract)."""

    name = "policy"

    def __init__(self) -> None:
        self.context: ReplayContext | None = None

    def bind(self, context: ReplayContext) -> None:
        """Called once before a replay; precompute per-row quantities here."""
        self.context = context

    def admit_tokens(self, row: int) -> int:
        """Tokens of ``trace.history_after_tokens[row]`` to keep after serving ``row`` (optional caching)."""
        raise NotImplementedError

    def eviction_key(self, conversation: int, cached_tokens: int, row: int) -> tuple[int, float, int]:
        """``(tier, key, floor_tokens)`` of the conversation's cached tail; default: LRU by its last turn.

        Recency is the last turn's row (event order: arrival time, ties in
        trace order), so no two conversations share an LRU key.
        """
        return (KEEP_TIER, row, 0)

    def describe(self) -> str:
        """One line naming the policy and its parameters (for reports)."""
        return self.name


def tel_safe_budget_tokens(history_tokens: ArrayLike, next_prompt_tokens: ArrayLike, safe_uncached_tokens: float) -> NDArray[np.int64]:
    """``b = clip(ceil(L + Q - s), 0, L)``: the cached prefix beyond which no token lowers the next turn's TEL.

    With ``x >= b`` cached tokens the next turn prefills ``L + Q - x <= s``
    tokens, so its TTFT is at most ``xi``.  This is T-LRU's cache size
    ``min(L, (L + Q_hat - xi)^+)`` (Tail-Optimized Caching for LLM Inference,
    Algorithm 1, lengths in blocks and ``xi`` in tokens there).  Only the
    algorithm's header (inputs: threshold ``xi``, next-turn estimates
    ``Q_hat_i``, cache sizes ``X_i``) and the authors' vLLM integration notes
    (TEL-safe bound ``B = max(0, H + Q_hat - xi)``) were available to us; the
    formula is read from those.
    """
    history = np.asarray(history_tokens, dtype=float)
    raw = np.ceil(history + np.asarray(next_prompt_tokens, dtype=float) - safe_uncached_tokens - 1e-9)
    return np.clip(raw, 0, history).astype(np.int64)


class BudgetLRU(CachePolicy):
    """LRU over per-turn budgets: admit ``budget[row]`` tokens, evict the least recently used first.

    Subclasses set :meth:`budget_tokens`.  Under forced caching the tokens a
    conversation holds above its budget form a surplus tier evicted first (in
    LRU order among themselves), as in the T-LRU vLLM integration's "TEL-safe
    queue"; under optional caching they are never admitted.
    """

    def bind(self, context: ReplayContext) -> None:
        super().bind(context)
        self._budget = self.budget_tokens(context).tolist()

    def budget_tokens(self, context: ReplayContext) -> NDArray[np.int64]:
        raise NotImplementedError

    def admit_tokens(self, row: int) -> int:
        return self._budget[row]

    def eviction_key(self, conversation: int, cached_tokens: int, row: int) -> tuple[int, float, int]:
        budget = self._budget[row]
        if cached_tokens > budget:
            return (SURPLUS_TIER, row, budget)
        return (KEEP_TIER, row, 0)


class LRU(BudgetLRU):
    """Least recently used: cache the whole history after every turn; evict the stalest conversation's tail."""

    name = "lru"

    def budget_tokens(self, context: ReplayContext) -> NDArray[np.int64]:
        return context.trace.history_after_tokens


class ThresholdLRU(BudgetLRU):
    """LRU that caches a conversation only when its history exceeds ``threshold_tokens`` (default 1024)."""

    name = "threshold-lru"

    def __init__(self, threshold_tokens: int = 1024) -> None:
        super().__init__()
        if threshold_tokens < 0:
            raise InputError("policies.threshold-lru.threshold_tokens", threshold_tokens, "must be >= 0")
        self.threshold_tokens = int(threshold_tokens)

    def budget_tokens(self, context: ReplayContext) -> NDArray[np.int64]:
        history = context.trace.history_after_tokens
        return np.where(history > self.threshold_tokens, history, 0)

    def describe(self) -> str:
        return f"{self.name} (threshold {self.threshold_tokens} tokens)"


class TLRU(BudgetLRU):
    """Tail-Optimized LRU (the paper's Algorithm 1): trim to ``clip(ceil(L + Q_hat - s), 0, L)``, then LRU.

    ``q_hat_tokens`` estimates the next prompt length; by default the mean
    prompt length of the replayed trace (a calibration from the same data,
    as for any stationary estimate).
    """

    name = "t-lru"

    def __init__(self, q_hat_tokens: float | None = None) -> None:
        super().__init__()
        if q_hat_tokens is not None and not q_hat_tokens >= 0:
            raise InputError(f"policies.{self.name}.q_hat_tokens", q_hat_tokens, "must be >= 0")
        self.q_hat_tokens = q_hat_tokens
        self._q_hat_used: float | None = None

    def q_hat(self, trace: ConversationTrace) -> float:
        return float(trace.prompt_tokens.mean()) if self.q_hat_tokens is None else float(self.q_hat_tokens)

    def next_prompt_estimate(self, trace: ConversationTrace) -> NDArray[np.float64]:
        """Per row, the next prompt length the budget assumes (``Q_hat`` everywhere for T-LRU)."""
        self._q_hat_used = self.q_hat(trace)
        return np.full(len(trace), self._q_hat_used)

    def budget_tokens(self, context: ReplayContext) -> NDArray[np.int64]:
        trace = context.trace
        return tel_safe_budget_tokens(trace.history_after_tokens, self.next_prompt_estimate(trace), context.safe_uncached_tokens)

    def describe(self) -> str:
        q = self._q_hat_used if self._q_hat_used is not None else self.q_hat_tokens
        return f"{self.name} (Q_hat {q:.1f} tokens)" if q is not None else f"{self.name} (Q_hat = mean prompt)"


class EndAwareTLRU(TLRU):
    """T-LRU with an oracle bit: a conversation's last turn keeps nothing (budget 0)."""

    name = "end-aware-t-lru"

    def budget_tokens(self, context: ReplayContext) -> NDArray[np.int64]:
        return np.where(context.trace.next_turn >= 0, super().budget_tokens(context), 0)


class LengthAwareTLRU(TLRU):
    """T-LRU with an oracle of the exact next prompt length ``q_next`` (``Q_hat`` on last turns).

    The oracle reveals the length of the next prompt when there is one; it does
    not reveal that a conversation has ended (that is End-aware T-LRU's bit),
    so a last turn is trimmed with ``Q_hat`` as in T-LRU.  With exact lengths
    every budget covers all the tokens that can lower the next turn's TEL, and
    every budget is at most the history, which is why this policy's TEL never
    exceeds LRU's (see tests/test_caching_policies.py for the argument and the
    property test).
    """

    name = "length-aware-t-lru"

    def next_prompt_estimate(self, trace: ConversationTrace) -> NDArray[np.float64]:
        estimate = super().next_prompt_estimate(trace)
        has_next = trace.next_turn >= 0
        estimate[has_next] = trace.prompt_tokens[trace.next_turn[has_next]]
        return estimate


@dataclass(frozen=True)
class PromptSurvival:
    """Step survival function ``S(y) = P(Q > y)`` of the next prompt length on a grid ``v_0 < ... < v_{m-1}``.

    ``S(y) = 1`` for ``y < v_0``, ``S(y) = P(Q > v_k)`` for ``v_k <= y < v_{k+1}``,
    and 0 from ``v_{m-1}`` on.  Built from a sample of prompt lengths; with more
    than ``levels`` distinct values the grid is the sample's quantiles, which
    keeps the exact survival at the grid points and rounds it up in between.
    """

    values_tokens: tuple[float, ...]
    log_survival: tuple[float, ...]  # log P(Q > v_k); -inf for the last value

    @classmethod
    def from_sample(cls, prompt_tokens: ArrayLike, levels: int = 64) -> "PromptSurvival":
        sample = np.sort(np.asarray(prompt_tokens, dtype=float))
        if sample.size == 0:
            raise InputError("policies.et-lru.prompt_tokens", [], "needs at least one prompt length")
        grid = np.unique(sample)
        if grid.size > levels:
            grid = np.unique(np.quantile(sample, np.linspace(0.0, 1.0, levels), method="inverted_cdf"))
        survival = 1.0 - np.searchsorted(sample, grid, side="right") / sample.size
        with np.errstate(divide="ignore"):
            logs = np.where(survival > 0, np.log(np.maximum(survival, 1e-300)), -np.inf)
        return cls(tuple(grid.tolist()), tuple(logs.tolist()))

    @property
    def max_tokens(self) -> float:
        return self.values_tokens[-1]


class ETLRU(CachePolicy):
    """ET-LRU: expected-TEL LRU, this module's reading of the paper's Algorithm 2.

    The text of Algorithm 2 was not available to us; this is our reading of
    the paper's description ("belief ``lambda_i exp(-mu (t - last))``").
    Under the stochastic model (conversation life ``Exp(mu)``, turns at rate
    ``lambda`` while alive) the belief that conversation ``i`` is still alive
    and returns at time ``t`` is ``lambda exp(-mu (t - tau_i))``, ``tau_i`` its
    last turn.  Its next prompt ``Q`` has survival ``S`` (:class:`PromptSurvival`).
    Keeping the ``x``-th token of its history (``L`` tokens) lowers the next
    turn's TEL by ``alpha`` exactly when ``Q > x - 1 + s - L``, so, weighted
    by the belief, that token is worth
    ``lambda exp(-mu (t - tau_i)) * alpha * S(x - 1 + s - L)``: decreasing in
    ``x`` (a prefix cache keeps the most valuable tokens first) and with a
    factor ``lambda alpha exp(-mu t)`` common to every conversation.
    The policy therefore

    * admits ``clip(ceil(L + v_max - s), 0, L)`` tokens, where ``v_max`` is the
      largest prompt length of ``S`` (beyond it every token's value is 0), and
    * evicts the conversation whose last cached token has the smallest
      ``mu tau_i + log S(x - 1 + s - L)`` (zero-value tokens first, in LRU
      order), cutting it down to the next step of ``S`` at most.

    Limits: with a degenerate ``S`` (all mass at ``Q_hat``) and ``mu > 0`` this
    is T-LRU; as ``mu -> 0`` it ignores recency.  ``end_rate_per_s`` (``mu``)
    defaults to the trace's estimate ``1 / (mean gap * mean turns)`` (the
    model's ``E[N] = 1 + lambda/mu`` and mean gap ``1/(lambda + mu)``), and the
    prompt distribution to the replayed trace's prompt lengths; ``lambda``
    cancels from every comparison, so it is not a parameter.

    ``prompt_levels`` (default 16) bounds the steps of ``S``.  Each step a
    conversation's cut crosses costs the replay one heap operation (greedy
    eviction by marginal value alternates between conversations step by step),
    so 16 steps keep ET-LRU near 3 million turns a minute; on the 1e6-turn
    ShareGPT-like benchmark trace 64 steps ran about 2.7x slower for a TEL no
    better (0.3 % higher at 2,000 tokens, 5 % at 8,000;
    benchmarks/results/caching_replay.md).
    """

    name = "et-lru"

    def __init__(self, end_rate_per_s: float | None = None, prompt_levels: int = 16) -> None:
        super().__init__()
        if end_rate_per_s is not None and not (math.isfinite(end_rate_per_s) and end_rate_per_s >= 0):
            raise InputError("policies.et-lru.end_rate_per_s", end_rate_per_s, "must be >= 0")
        if prompt_levels < 1:
            raise InputError("policies.et-lru.prompt_levels", prompt_levels, "must be >= 1")
        self.end_rate_per_s = end_rate_per_s
        self.prompt_levels = int(prompt_levels)
        self.mu_used: float | None = None

    def bind(self, context: ReplayContext) -> None:
        super().bind(context)
        trace = context.trace
        self.survival = PromptSurvival.from_sample(trace.prompt_tokens, self.prompt_levels)
        self.mu_used = estimate_end_rate_per_s(trace) if self.end_rate_per_s is None else float(self.end_rate_per_s)
        s = context.safe_uncached_tokens
        self._budget = tel_safe_budget_tokens(trace.history_after_tokens, self.survival.max_tokens, s).tolist()
        self._history = trace.history_after_tokens.tolist()
        self._arrival = trace.arrival_s.tolist()
        self._values = list(self.survival.values_tokens)
        self._logs = list(self.survival.log_survival)
        self._safe = s

    def admit_tokens(self, row: int) -> int:
        return self._budget[row]

    def eviction_key(self, conversation: int, cached_tokens: int, row: int) -> tuple[int, float, int]:
        offset = self._safe - self._history[row]  # y = x - 1 + s - L
        y = cached_tokens - 1 + offset
        k = bisect.bisect_right(self._values, y)
        if k == 0:
            return (KEEP_TIER, self.mu_used * self._arrival[row], 0)
        step = self._values[k - 1]
        floor = max(0, math.ceil(step + 1 - offset - 1e-9) - 1)
        log_s = self._logs[k - 1]
        if log_s == -math.inf:
            return (SURPLUS_TIER, row, floor)
        return (KEEP_TIER, self.mu_used * self._arrival[row] + log_s, floor)

    def floor_below(self, conversation: int, cached_tokens: int, row: int, tier: int, key: float) -> int:
        """Smallest cached amount whose tokens above it all have keys below ``(tier, key)`` (one bisection)."""
        offset = self._safe - self._history[row]
        if tier == SURPLUS_TIER:
            if not row < key:
                return cached_tokens
            level = len(self._values) - 1
        else:
            base = self.mu_used * self._arrival[row]
            if base < key:  # even the S = 1 tokens are cheaper
                return 0
            # First level whose key base + log S_k (computed as eviction_key does) is below the bound.
            level = bisect.bisect_right(self._logs, -key, key=lambda log_s: -(base + log_s))
        return min(cached_tokens, max(0, math.ceil(self._values[level] + 1 - offset - 1e-9) - 1))

    def describe(self) -> str:
        mu = self.mu_used if self.mu_used is not None else self.end_rate_per_s
        return f"{self.name} (mu {mu:.4g}/s)" if mu is not None else f"{self.name} (mu from the trace)"


def estimate_end_rate_per_s(trace: ConversationTrace) -> float:
    """``mu = 1 / (mean gap * mean turns)`` from the trace (1/s when it has no gaps)."""
    has_next = trace.next_turn >= 0
    if not has_next.any():
        return 1.0
    mean_gap_s = float(np.mean(trace.arrival_s[trace.next_turn[has_next]] - trace.arrival_s[has_next]))
    mean_turns = len(trace) / trace.n_conversations
    return 1.0 / (mean_gap_s * mean_turns) if mean_gap_s > 0 else 1.0


PolicyFactory = Callable[..., CachePolicy]

POLICIES: dict[str, PolicyFactory] = {
    LRU.name: LRU,
    ThresholdLRU.name: ThresholdLRU,
    TLRU.name: TLRU,
    EndAwareTLRU.name: EndAwareTLRU,
    LengthAwareTLRU.name: LengthAwareTLRU,
    ETLRU.name: ETLRU,
}


def register_policy(name: str, factory: PolicyFactory) -> None:
    """Make ``factory(**params)`` available by ``name`` (instance files, ``--policies``)."""
    POLICIES[name] = factory


def make_policy(name: str, field: str = "policies", **params: object) -> CachePolicy:
    """A fresh policy by registered name; unknown names and parameters are input errors naming ``field``."""
    if name not in POLICIES:
        raise InputError(field, name, f"unknown policy; known: {', '.join(POLICIES)}")
    try:
        return POLICIES[name](**params)
    except TypeError as exc:
        raise InputError(field, params, f"bad parameters for {name}: {exc}") from None
