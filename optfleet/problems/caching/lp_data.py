"""The hindsight caching LP's numbers, prepared from a trace before the model is built (models/caching.py).

:func:`prepare` computes the arrays of LP (2)-(5) of models/caching.py once
(columns, row ranges, bounds, values) and :func:`prepare_two_tier` those of
the two-tier MILP (6)-(8); models/caching.py turns them into a Pyomo model or
into highspy's arrays.  Notation of optfleet/problems/caching/belady.py: the
need of turn ``n`` is ``H_n + q_n - xi_tokens_n`` tokens.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.models.caching import CacheLpData, TwoTierData, binding_rows
from optfleet.problems.caching.belady import forced_tokens, tel_need_tokens
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.caching.trace import ConversationTrace

# A fractional part of need below this is float noise, not a partial token.
FRACTION_EPS = 1e-9


def turn_weights(weights: ArrayLike | None, n: int) -> NDArray[np.float64]:
    """Per-turn TEL weights: ``weights`` per turn or scalar (default 1), finite and >= 0."""
    w = np.ones(n) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), (n,)).astype(float)
    if np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be finite and >= 0")
    return w


def prepare(
    trace: ConversationTrace,
    capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float | ArrayLike,
    weights: ArrayLike | None = None,
    forced: bool = False,
) -> CacheLpData:
    """The arrays of LP (2)-(4), or (2),(4),(5) with ``forced``; weights and ``xi`` per turn or scalar."""
    if int(capacity_tokens) != capacity_tokens or capacity_tokens < 0:
        raise ValueError(f"capacity_tokens must be a whole number >= 0, got {capacity_tokens!r}")
    capacity_tokens = int(capacity_tokens)
    n = len(trace)
    alpha = ttft.alpha_ms_per_token
    w = turn_weights(weights, n)
    need_pos = np.maximum(tel_need_tokens(trace, ttft, xi_ms), 0.0)
    tel_constant = float(alpha * np.dot(w, need_pos))

    gaps = np.flatnonzero(trace.next_turn >= 0)
    nxt = trace.next_turn[gaps]
    history = trace.history_after_tokens[gaps]
    whole = np.floor(need_pos[nxt])
    fraction = need_pos[nxt] - whole
    limit = np.minimum(history, capacity_tokens) if forced else history
    full_upper = np.minimum(limit, whole).astype(np.int64)
    has_part = (fraction > FRACTION_EPS) & (whole + 1 <= limit)
    value = alpha * w[nxt]
    keep_full = (full_upper > 0) & (value > 0)
    keep_part = has_part & (value > 0)
    col_gap = np.concatenate([gaps[keep_full], gaps[keep_part]]).astype(np.int64)
    col_upper = np.concatenate([full_upper[keep_full], np.ones(int(keep_part.sum()), dtype=np.int64)])
    col_value = np.concatenate([value[keep_full], value[keep_part] * fraction[keep_part]])
    col_next = trace.next_turn[col_gap]

    if forced:
        # (5): a row after every event, columns cover r+1 .. next(r)-1.
        row_event = np.arange(n, dtype=np.int64)
        row_capacity = capacity_tokens - forced_tokens(trace, capacity_tokens)
        lo, hi = col_gap + 1, col_next - 1
    else:
        # (3): rows only where some column's interval r .. next(r)-1 ends.
        lo, hi = col_gap, col_next - 1
        row_event = np.unique(hi).astype(np.int64)
        row_capacity = np.full(len(row_event), capacity_tokens, dtype=np.int64)
    row_event, row_capacity, first, end = binding_rows(row_event, row_capacity, lo, hi, col_upper)
    return CacheLpData(
        n_turns=n, capacity_tokens=capacity_tokens, forced=forced, n_full=int(keep_full.sum()),
        col_gap=col_gap, col_upper=col_upper, col_value_ms=col_value, col_first_row=first, col_end_row=end,
        row_event=row_event, row_capacity=row_capacity, tel_constant_ms=tel_constant,
    )


def prepare_two_tier(
    trace: ConversationTrace,
    fast_capacity_tokens: int,
    slow_capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float | ArrayLike,
    reload_ms_per_token: float,
    weights: ArrayLike | None = None,
) -> TwoTierData:
    """The arrays of MILP (6)-(8); ``reload_ms_per_token >= 0`` (at ``>= alpha`` the slow tier is never worth using)."""
    for name, value in (("fast_capacity_tokens", fast_capacity_tokens), ("slow_capacity_tokens", slow_capacity_tokens)):
        if int(value) != value or value < 0:
            raise ValueError(f"{name} must be a whole number >= 0, got {value!r}")
    if not (np.isfinite(reload_ms_per_token) and reload_ms_per_token >= 0):
        raise ValueError(f"reload_ms_per_token must be >= 0, got {reload_ms_per_token!r}")
    n = len(trace)
    alpha = ttft.alpha_ms_per_token
    w = turn_weights(weights, n)
    need_pos = np.maximum(tel_need_tokens(trace, ttft, xi_ms), 0.0)
    returning = trace.prev_turn >= 0
    tel_constant = float(alpha * np.dot(w[~returning], need_pos[~returning]))
    gaps = np.flatnonzero(trace.next_turn >= 0)
    nxt = trace.next_turn[gaps]
    useful = (need_pos[nxt] > 0) & (w[nxt] > 0) & (trace.history_after_tokens[gaps] > 0)
    # Returning turns left out of the model keep their excess with nothing cached.
    left_out = nxt[~useful]
    tel_constant += float(alpha * np.dot(w[left_out], need_pos[left_out]))
    gaps, nxt = gaps[useful], nxt[useful]
    history = trace.history_after_tokens[gaps]
    fast_upper = np.minimum(history, np.ceil(need_pos[nxt]).astype(np.int64))
    row_event = np.flatnonzero(returning).astype(np.int64) - 1
    tiers = []
    for capacity, upper in ((int(fast_capacity_tokens), fast_upper), (int(slow_capacity_tokens), history)):
        events, _, first, end = binding_rows(row_event, np.full(len(row_event), capacity, dtype=np.int64), gaps, trace.next_turn[gaps] - 1, upper)
        tiers.append((events, first, end))
    return TwoTierData(
        n_turns=n, fast_capacity_tokens=int(fast_capacity_tokens), slow_capacity_tokens=int(slow_capacity_tokens),
        alpha_ms_per_token=alpha, reload_ms_per_token=float(reload_ms_per_token), gap=gaps.astype(np.int64),
        history_tokens=history.astype(np.int64), fast_upper=fast_upper.astype(np.int64), need_tokens=need_pos[nxt],
        weight=w[nxt], fast_rows=tiers[0], slow_rows=tiers[1], tel_constant_ms=tel_constant,
    )
