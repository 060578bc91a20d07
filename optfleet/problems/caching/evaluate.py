"""The one evaluator of cache schedules: capacity check, TTFT, TEL and tail metrics.

Every producer of a schedule (an online policy's replay, Tail-Optimized Belady,
the hindsight LP) reports ``kept_tokens[r]``: how many tokens of the history
turn ``r`` leaves behind are still cached when the conversation's next turn
arrives.  Within a gap a conversation's cached amount can only shrink (it grows
only at its own turns), so holding ``kept_tokens[r]`` constantly through the gap
never needs more space than the producer used; the capacity check below is
therefore exact for any producer (Tail-Optimized Caching for LLM Inference,
the "constant through each gap" reduction).

For turn ``r`` with previous turn ``p`` the cached prefix is ``c_r =
kept[p]`` (0 for a first turn) and

    TTFT_r = alpha * (H_r + q_r - c_r) + beta                (ms)
    TEL(xi) = sum_r w_r * max(TTFT_r - xi_r, 0)               (ms)

with weights ``w`` (default 1) and thresholds ``xi`` (scalar or per turn).
Capacity: after event ``k`` is served, ``sum_{r <= k < next(r)} kept[r] <= C``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.errors import InputError
from optfleet.problems.caching.trace import ConversationTrace

PERCENTILES = (50, 90, 95, 99)


MAX_TTFT_TERM_MS = 1e270
"""Largest ``alpha_ms_per_token`` and ``beta_ms``.  A TTFT is ``alpha`` x tokens + ``beta`` with token counts in int64
(below 9.3e18) and TEL sums it over the turns: 1e270 x 9.3e18 leaves 19 decades for the number of turns before a
TEL could overflow double precision (1.8e308) and hide as an infinite (null) objective."""


@dataclass(frozen=True)
class TtftModel:
    """Linear time to first token: ``alpha_ms_per_token * uncached_tokens + beta_ms``."""

    alpha_ms_per_token: float
    beta_ms: float = 0.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.alpha_ms_per_token) and self.alpha_ms_per_token > 0):
            raise InputError("ttft.alpha_ms_per_token", self.alpha_ms_per_token, "must be > 0")
        if not (np.isfinite(self.beta_ms) and self.beta_ms >= 0):
            raise InputError("ttft.beta_ms", self.beta_ms, "must be >= 0")
        for field, value in (("ttft.alpha_ms_per_token", self.alpha_ms_per_token), ("ttft.beta_ms", self.beta_ms)):
            if value > MAX_TTFT_TERM_MS:
                raise InputError(field, value, f"above the limit of {MAX_TTFT_TERM_MS:g} ms that keeps every TTFT and TEL "
                                 "finite in double precision")

    def ttft_ms(self, uncached_tokens: ArrayLike) -> NDArray[np.float64]:
        return self.alpha_ms_per_token * np.asarray(uncached_tokens, dtype=float) + self.beta_ms

    def safe_uncached_tokens(self, xi_ms: ArrayLike) -> NDArray[np.float64]:
        """Largest uncached token count whose TTFT stays within ``xi``: ``(xi - beta) / alpha``."""
        return (np.asarray(xi_ms, dtype=float) - self.beta_ms) / self.alpha_ms_per_token


@dataclass(frozen=True)
class CacheEvaluation:
    """Per-turn TTFT and the run's summary metrics (times in ms, TEL in ms)."""

    policy: str
    cached_tokens: NDArray[np.int64]
    ttft_ms: NDArray[np.float64]
    tel_ms: float
    mean_ttft_ms: float
    percentile_ttft_ms: dict[int, float]
    slo_ms: float
    violations: int
    hit_rate: float
    peak_occupancy_tokens: int
    capacity_tokens: int

    def summary(self) -> dict[str, float | int | str]:
        """One flat row for tables and JSON."""
        row: dict[str, float | int | str] = {"policy": self.policy, "tel_ms": self.tel_ms, "mean_ttft_ms": self.mean_ttft_ms}
        row.update({f"p{p}_ttft_ms": v for p, v in self.percentile_ttft_ms.items()})
        row.update(violations=self.violations, hit_rate=self.hit_rate, peak_occupancy_tokens=self.peak_occupancy_tokens)
        return row


def occupancy_tokens(trace: ConversationTrace, kept_tokens: NDArray[np.int64]) -> NDArray[np.int64]:
    """Cached tokens after each event: ``sum_{r <= k < next(r)} kept[r]`` for every row ``k``."""
    delta = np.zeros(len(trace) + 1, dtype=np.int64)
    np.add.at(delta, np.arange(len(trace)), kept_tokens)
    has_next = trace.next_turn >= 0
    np.add.at(delta, trace.next_turn[has_next], -kept_tokens[has_next])
    return np.cumsum(delta[:-1])


def evaluate_schedule(
    trace: ConversationTrace,
    kept_tokens: ArrayLike,
    capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float | ArrayLike,
    slo_ms: float | None = None,
    weights: ArrayLike | None = None,
    policy: str = "schedule",
) -> CacheEvaluation:
    """Check a schedule against the trace and the capacity, and score it.

    Raises ``ValueError`` naming the first offending row when the schedule
    keeps more than the history, keeps anything after a conversation's last
    turn, or exceeds the capacity after some event; a producer that fails
    here has a bug.  ``slo_ms`` (default: ``xi`` when it is a scalar) sets the
    violation count ``#{r : TTFT_r > slo}``.  ``hit_rate`` is the share of
    prompt-side tokens served from the cache, ``sum c / sum (H + q)``.
    """
    kept = np.asarray(kept_tokens)
    if kept.shape != (len(trace),):
        raise ValueError(f"{policy}: kept_tokens has shape {kept.shape}, expected ({len(trace)},)")
    if not np.all(np.isfinite(kept)) or np.any(kept != np.round(kept)):
        raise ValueError(f"{policy}: kept_tokens must be whole tokens")
    kept = kept.astype(np.int64)
    _first_bad(policy, "keeps a negative amount", kept < 0)
    _first_bad(policy, "keeps more than the history it leaves behind", kept > trace.history_after_tokens)
    _first_bad(policy, "keeps tokens after a conversation's last turn", (trace.next_turn < 0) & (kept > 0))
    occupancy = occupancy_tokens(trace, kept)
    _first_bad(policy, f"exceeds the capacity of {capacity_tokens} tokens", occupancy > capacity_tokens)

    cached = np.where(trace.prev_turn >= 0, kept[np.maximum(trace.prev_turn, 0)], 0)
    ttft_ms = ttft.ttft_ms(trace.context_tokens - cached)
    xi = np.broadcast_to(np.asarray(xi_ms, dtype=float), ttft_ms.shape)
    w = np.ones_like(ttft_ms) if weights is None else np.broadcast_to(np.asarray(weights, dtype=float), ttft_ms.shape)
    if slo_ms is None:
        if np.ndim(xi_ms) != 0:
            raise ValueError("slo_ms is required when xi varies per turn")
        slo_ms = float(xi_ms)
    context_total = int(trace.context_tokens.sum())
    return CacheEvaluation(
        policy=policy,
        cached_tokens=cached,
        ttft_ms=ttft_ms,
        tel_ms=float(np.sum(w * np.maximum(ttft_ms - xi, 0.0))),
        mean_ttft_ms=float(ttft_ms.mean()),
        percentile_ttft_ms={p: float(np.quantile(ttft_ms, p / 100, method="inverted_cdf")) for p in PERCENTILES},
        slo_ms=float(slo_ms),
        violations=int(np.count_nonzero(ttft_ms > slo_ms)),
        hit_rate=float(cached.sum() / context_total) if context_total else 0.0,
        peak_occupancy_tokens=int(occupancy.max(initial=0)),
        capacity_tokens=int(capacity_tokens),
    )


def _first_bad(policy: str, problem: str, mask: NDArray[np.bool_]) -> None:
    rows = np.flatnonzero(mask)
    if rows.size:
        raise ValueError(f"{policy}: schedule {problem} at row {int(rows[0])}")
