"""A two-tier prompt cache: its evaluator (built on evaluate_schedule) and a cascade greedy.

Tiers: a fast tier of ``C1`` tokens (GPU memory; reuse is free) and a slow
tier of ``C2`` tokens (host memory or disk) whose reused tokens must be
reloaded, ``reload_ms_per_token`` = ``g`` ms each, on the turn's critical
path.  A schedule keeps, through gap ``r``, ``fast[r]`` tokens in the fast
and ``slow[r]`` tokens in the slow tier (static placement: set at the end of
turn ``r``, unchanged until the next turn; both are parts of the same prefix,
``fast + slow <= H_after``).  The next turn ``n`` then has

    TTFT_n = alpha * (H_n + q_n - c1_n - c2_n) + g * c2_n + beta          (ms)
    TEL    = sum_n w_n * max(TTFT_n - xi_n, 0)

with ``c1_n = fast[r]``, ``c2_n = slow[r]``, and each tier's occupancy after
every event within its own capacity.  (Demoting tokens from the fast to the
slow tier in the middle of a gap is not modelled.)  A reload is worth it only
when ``g < alpha`` (recomputing costs ``alpha`` per token).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.problems.caching.belady import keep_furthest_in_future, tail_optimized_belady, tel_need_tokens
from optfleet.problems.caching.evaluate import PERCENTILES, CacheEvaluation, TtftModel, evaluate_schedule, occupancy_tokens
from optfleet.problems.caching.trace import ConversationTrace

# A ratio within this of a whole number is that number (float noise in need / (alpha - g)).
_CEIL_EPS = 1e-9


@dataclass(frozen=True)
class TwoTierEvaluation:
    """The two-tier schedule's TTFT (reload included) and metrics; ``base`` is evaluate_schedule's view of ``fast + slow``.

    ``base`` checks the union against ``C1 + C2`` and the histories and gives
    the cached tokens and hit rate; its TTFT and TEL ignore the reload.  The
    fields here include it.
    """

    base: CacheEvaluation
    fast_cached_tokens: NDArray[np.int64]
    slow_cached_tokens: NDArray[np.int64]
    ttft_ms: NDArray[np.float64]
    tel_ms: float
    mean_ttft_ms: float
    percentile_ttft_ms: dict[int, float]
    violations: int
    reload_ms: float
    peak_fast_tokens: int
    peak_slow_tokens: int

    def summary(self) -> dict[str, float | int | str]:
        """One flat row for tables and JSON."""
        row: dict[str, float | int | str] = {"policy": self.base.policy, "tel_ms": self.tel_ms, "mean_ttft_ms": self.mean_ttft_ms}
        row.update({f"p{p}_ttft_ms": v for p, v in self.percentile_ttft_ms.items()})
        row.update(violations=self.violations, hit_rate=self.base.hit_rate, reload_ms=self.reload_ms,
                   peak_fast_tokens=self.peak_fast_tokens, peak_slow_tokens=self.peak_slow_tokens)
        return row


def evaluate_two_tier(
    trace: ConversationTrace,
    fast_tokens: ArrayLike,
    slow_tokens: ArrayLike,
    fast_capacity_tokens: int,
    slow_capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float | ArrayLike,
    reload_ms_per_token: float,
    slo_ms: float | None = None,
    weights: ArrayLike | None = None,
    policy: str = "two-tier schedule",
) -> TwoTierEvaluation:
    """Check a two-tier schedule and score it (module docstring); ``ValueError`` names the first offending row."""
    fast = np.asarray(fast_tokens)
    slow = np.asarray(slow_tokens)
    if fast.shape != slow.shape:
        raise ValueError(f"{policy}: fast and slow tokens differ in shape ({fast.shape} vs {slow.shape})")
    if not (np.isfinite(reload_ms_per_token) and reload_ms_per_token >= 0):
        raise ValueError(f"reload_ms_per_token must be >= 0, got {reload_ms_per_token!r}")
    if slo_ms is None and np.ndim(xi_ms) != 0:
        raise ValueError("slo_ms is required when xi varies per turn")
    base = evaluate_schedule(trace, fast + slow, fast_capacity_tokens + slow_capacity_tokens, ttft, xi_ms,
                             slo_ms=slo_ms, weights=weights, policy=policy)
    fast, slow = fast.astype(np.int64), slow.astype(np.int64)
    peaks = []
    for tier, kept, capacity in (("fast", fast, fast_capacity_tokens), ("slow", slow, slow_capacity_tokens)):
        if np.any(kept < 0):
            raise ValueError(f"{policy}: {tier} tier keeps a negative amount at row {int(np.flatnonzero(kept < 0)[0])}")
        occupancy = occupancy_tokens(trace, kept)
        over = np.flatnonzero(occupancy > capacity)
        if over.size:
            raise ValueError(f"{policy}: schedule exceeds the {tier} tier's capacity of {capacity} tokens at row {int(over[0])}")
        peaks.append(int(occupancy.max(initial=0)))
    has_prev = trace.prev_turn >= 0
    prev = np.maximum(trace.prev_turn, 0)
    fast_cached = np.where(has_prev, fast[prev], 0)
    slow_cached = np.where(has_prev, slow[prev], 0)
    ttft_ms = base.ttft_ms + reload_ms_per_token * slow_cached
    xi = np.broadcast_to(np.asarray(xi_ms, dtype=float), ttft_ms.shape)
    w = np.ones_like(ttft_ms) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), ttft_ms.shape)
    return TwoTierEvaluation(
        base=base,
        fast_cached_tokens=fast_cached,
        slow_cached_tokens=slow_cached,
        ttft_ms=ttft_ms,
        tel_ms=float(np.sum(w * np.maximum(ttft_ms - xi, 0.0))),
        mean_ttft_ms=float(ttft_ms.mean()),
        percentile_ttft_ms={p: float(np.quantile(ttft_ms, p / 100, method="inverted_cdf")) for p in PERCENTILES},
        violations=int(np.count_nonzero(ttft_ms > base.slo_ms)),
        reload_ms=float(reload_ms_per_token * slow_cached.sum()),
        peak_fast_tokens=peaks[0],
        peak_slow_tokens=peaks[1],
    )


def two_tier_belady(
    trace: ConversationTrace,
    fast_capacity_tokens: int,
    slow_capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float | ArrayLike,
    reload_ms_per_token: float,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Cascade greedy: Tail-Optimized Belady on the fast tier, then on the slow tier for what still pays.

    After the fast tier keeps ``f_r``, the next turn's remaining excess is
    ``alpha (need - f_r)^+``; each slow token removes ``alpha - g`` of it, so
    the slow tier wants ``min(H_after - f_r, ceil(alpha (need - f_r)^+ / (alpha - g)))``
    tokens (none when ``g >= alpha``) and evicts by furthest next turn.
    A heuristic: it ignores the reload when sharing the fast tier.
    """
    fast = tail_optimized_belady(trace, fast_capacity_tokens, ttft, xi_ms)
    alpha = ttft.alpha_ms_per_token
    has_next = trace.next_turn >= 0
    need = tel_need_tokens(trace, ttft, xi_ms)[np.where(has_next, trace.next_turn, 0)]
    if reload_ms_per_token >= alpha:
        wanted = np.zeros(len(trace), dtype=np.int64)
    else:
        ratio = alpha * np.maximum(need - fast, 0.0) / (alpha - reload_ms_per_token)
        wanted = np.ceil(ratio - _CEIL_EPS).astype(np.int64)
    caps = np.where(has_next, np.minimum(trace.history_after_tokens - fast, np.maximum(wanted, 0)), 0)
    return fast, keep_furthest_in_future(trace, caps, slow_capacity_tokens)
