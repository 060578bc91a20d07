"""Tail-Optimized Belady: the hindsight greedy that minimises TEL (Tail-Optimized Caching for LLM Inference, Theorem 1).

Notation (optfleet/problems/caching/trace.py, evaluate.py): turn ``n`` with previous
turn ``r`` (its *gap* is ``r``) reuses ``c_n = kept[r]`` cached tokens, and

    TTFT_n = alpha * (H_n + q_n - c_n) + beta,   excess_n = max(TTFT_n - xi_n, 0)
           = alpha * max(need_n - c_n, 0),       need_n = H_n + q_n - xi_tokens_n,

with ``xi_tokens = (xi - beta) / alpha`` the largest uncached count that stays
within ``xi`` (``TtftModel.safe_uncached_tokens``).  Tokens kept beyond
``need_n`` do not lower TEL, so gap ``r`` never needs more than its *TEL-safe
keep* ``u_r = min(H_n, ceil(need_n^+))`` (``H_n`` = the history turn ``r``
leaves behind; 0 for a conversation's last turn).

The greedy, in event order: at turn ``k`` release the conversation's previous
gap (its tokens are being reused), cache ``u_k`` tokens for the new gap, then
while the cache holds more than ``C`` tokens evict -- partially -- from the open
gap whose next turn is furthest in the future.  Keeping a gap's tokens is an
interval ``[k, next(k))`` of unit value per token; packing such intervals under
a capacity by dropping the furthest-ending one is optimal (the paper's
Theorem 1; it is the classical optimality of furthest-end greedy for
interval packing, Carlisle & Lloyd 1995, Faigle & Nawijn 1995, and of
Belady's rule), which is why the hindsight LP (models/caching.py) must reach
the same TEL.  The argument needs every kept token to be worth the same
``alpha``: it holds for any per-turn ``xi`` as long as ``xi_tokens`` is a
whole number, and fails for per-turn *weights* and for fractional
``xi_tokens`` (the last TEL-unsafe token of a turn is then worth only the
fraction ``alpha * frac(need)``); the LP stays exact in those cases.

*Forced caching* (``forced=True``): the served turn's whole history, up to the
capacity (``F_k = min(H_after_k, C)``), must be in the cache right after turn
``k``, so at event ``k`` the other open gaps must fit in ``C - F_k``; from the
next event on the new gap keeps at most ``min(u_k, C)``.  The same greedy
(evict the furthest next turn first) runs against that capacity profile.

Runs in ``O(n log n)`` with a heap keyed by the next arrival (event index) and
lazy deletion: a released gap stays in the heap, but every open gap's next
turn lies after the current event and every released one's at or before it,
so a released entry never reaches the top while an eviction is due.
"""

from __future__ import annotations

import heapq

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.caching.trace import ConversationTrace

# xi_tokens within this relative distance of a whole number is that number
# (``(xi - beta) / alpha`` of round inputs carries float noise).
XI_SNAP_RELATIVE = 1e-9


def safe_uncached_tokens(trace: ConversationTrace, ttft: TtftModel, xi_ms: float | ArrayLike) -> NDArray[np.float64]:
    """Per turn ``xi_tokens_n = (xi_n - beta) / alpha``, snapped to whole tokens within float noise."""
    tokens = np.broadcast_to(ttft.safe_uncached_tokens(xi_ms), (len(trace),)).astype(float)
    whole = np.round(tokens)
    close = np.abs(tokens - whole) <= XI_SNAP_RELATIVE * np.maximum(1.0, np.abs(tokens))
    return np.where(close, whole, tokens)


def tel_need_tokens(trace: ConversationTrace, ttft: TtftModel, xi_ms: float | ArrayLike) -> NDArray[np.float64]:
    """Per turn ``need_n = H_n + q_n - xi_tokens_n``: excess is ``alpha * max(need_n - c_n, 0)``; may be < 0 or fractional."""
    return trace.context_tokens - safe_uncached_tokens(trace, ttft, xi_ms)


def tel_safe_keep_tokens(trace: ConversationTrace, ttft: TtftModel, xi_ms: float | ArrayLike) -> NDArray[np.int64]:
    """Per gap row ``r``: ``u_r = min(H_after_r, ceil(need_next(r)^+))``, 0 for a conversation's last turn.

    Keeping ``u_r`` tokens makes the next turn's excess zero (or as small as
    the history allows); more never lowers TEL.
    """
    need = tel_need_tokens(trace, ttft, xi_ms)
    has_next = trace.next_turn >= 0
    nxt = np.where(has_next, trace.next_turn, 0)
    need_next = np.where(has_next, np.ceil(np.maximum(need[nxt], 0.0)), 0.0)
    return np.minimum(trace.history_after_tokens, need_next.astype(np.int64)).astype(np.int64)


def forced_tokens(trace: ConversationTrace, capacity_tokens: int) -> NDArray[np.int64]:
    """Under forced caching, what turn ``k`` occupies right after it is served: ``min(H_after_k, C)``."""
    return np.minimum(trace.history_after_tokens, int(capacity_tokens)).astype(np.int64)


def tail_optimized_belady(
    trace: ConversationTrace,
    capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float | ArrayLike,
    *,
    forced: bool = False,
) -> NDArray[np.int64]:
    """Tail-Optimized Belady's ``kept_tokens`` (see the module docstring); TEL-optimal for unit weights and whole ``xi_tokens``."""
    _check_capacity(capacity_tokens)
    caps = tel_safe_keep_tokens(trace, ttft, xi_ms)
    if forced:
        return keep_furthest_in_future(trace, np.minimum(caps, capacity_tokens), capacity_tokens, forced_tokens(trace, capacity_tokens))
    return keep_furthest_in_future(trace, caps, capacity_tokens)


def keep_furthest_in_future(
    trace: ConversationTrace,
    caps_tokens: ArrayLike,
    capacity_tokens: int,
    forced_tokens: ArrayLike | None = None,
) -> NDArray[np.int64]:
    """Keep up to ``caps_tokens[r]`` per gap; over capacity, evict from the gap whose next turn is furthest.

    Without ``forced_tokens``: at event ``k`` the new gap is added, then the
    open gaps are trimmed to ``C``.  With ``forced_tokens`` ``F``: the open
    gaps other than the new one are trimmed to ``C - F_k`` first, then the new
    gap is added (it is checked from the next event on).  Returns kept tokens
    per row; 0 for last turns (their caps must be 0).
    """
    _check_capacity(capacity_tokens)
    kept = np.asarray(caps_tokens, dtype=np.int64).tolist()
    prev = trace.prev_turn.tolist()
    nxt = trace.next_turn.tolist()
    limits = [int(capacity_tokens)] * len(kept) if forced_tokens is None else (int(capacity_tokens) - np.asarray(forced_tokens, dtype=np.int64)).tolist()
    add_first = forced_tokens is None
    heap: list[int] = []  # -next_turn of open gaps with tokens; the gap is prev[next_turn]
    occupancy = 0
    push, pop = heapq.heappush, heapq.heappop
    for k in range(len(kept)):
        p = prev[k]
        if p >= 0:
            occupancy -= kept[p]
        if add_first and kept[k] > 0:
            occupancy += kept[k]
            push(heap, -nxt[k])
        limit = limits[k]
        while occupancy > limit:
            r = prev[-heap[0]]
            take = min(kept[r], occupancy - limit)
            kept[r] -= take
            occupancy -= take
            if kept[r] == 0:
                pop(heap)
        if not add_first and kept[k] > 0:
            occupancy += kept[k]
            push(heap, -nxt[k])
    return np.asarray(kept, dtype=np.int64)


def _check_capacity(capacity_tokens: int) -> None:
    if int(capacity_tokens) != capacity_tokens or capacity_tokens < 0:
        raise ValueError(f"capacity_tokens must be a whole number >= 0, got {capacity_tokens!r}")
