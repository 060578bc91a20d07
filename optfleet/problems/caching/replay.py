"""Replay a conversation trace through an online caching policy.

The cache holds, per conversation, a prefix of its history (tokens).  Events
are the trace's rows in order (see :mod:`optfleet.problems.caching.policies` for what
the policy decides at each).  The replay's output is the schedule
``kept_tokens[r]``: tokens of the history turn ``r`` leaves behind that are
still cached when the conversation's next turn arrives (0 for last turns).
A conversation's cached amount only shrinks between its own turns, so that is
the amount at the moment of arrival.  Scoring is
:func:`~optfleet.problems.caching.evaluate.evaluate_schedule`'s job, never the replay's.

Data structures: one binary heap of ``(tier, key, last row, stamp,
conversation, floor)`` with lazy deletion — an entry is live while its stamp is the
conversation's latest; equal ``(tier, key)`` go to the older last turn first — compacted when stale entries outnumber live ones, so
a replay costs ``O(log n)`` per admission and per eviction step.  A popped
conversation is cut level by level while its next key stays strictly below
the heap's top; a policy with many key levels per conversation may offer
``floor_below(conversation, cached_tokens, row, tier, key)`` (the smallest
cached amount whose tokens above it all have keys below ``(tier, key)``) so
that this takes one call (ET-LRU does).
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.caching.policies import CachePolicy, ReplayContext
from optfleet.problems.caching.trace import ConversationTrace


@dataclass(frozen=True)
class ReplayResult:
    """A replayed schedule: ``kept_tokens`` per row, and the replay's own wall time."""

    policy: str
    description: str
    kept_tokens: NDArray[np.int64]
    capacity_tokens: int
    forced_caching: bool
    seconds: float
    evicted_tokens: int


def replay(
    trace: ConversationTrace,
    policy: CachePolicy,
    capacity_tokens: int,
    ttft: TtftModel,
    xi_ms: float,
    *,
    forced_caching: bool = False,
) -> ReplayResult:
    """Replay ``trace`` through ``policy`` with a cache of ``capacity_tokens``; return the schedule.

    Under optional caching (default) the policy's ``admit_tokens`` sets how
    much of the just-served conversation stays cached; under forced caching
    its whole history is inserted (at most ``C``) and only the other
    conversations are evicted in that event.  After every event the cached
    total is at most ``C``.
    """
    if not capacity_tokens > 0:
        raise InputError("capacity_tokens", capacity_tokens, "must be > 0")
    capacity = int(capacity_tokens)
    start = time.perf_counter()
    policy.bind(ReplayContext(trace, capacity, ttft, float(xi_ms), forced_caching))
    admit = policy.admit_tokens
    key_of = policy.eviction_key
    floor_below = getattr(policy, "floor_below", None)
    conversation = trace.conversation.tolist()
    prev_turn = trace.prev_turn.tolist()
    history_after = trace.history_after_tokens.tolist()

    n_conv = trace.n_conversations
    cached = [0] * n_conv
    stamp = [0] * n_conv
    kept = [0] * len(trace)
    heap: list[tuple[int, float, int, int, int, int]] = []  # (tier, key, last row, stamp, conversation, floor)
    push, pop = heapq.heappush, heapq.heappop
    occupancy = 0
    seq = 0
    live = 0  # conversations with a live heap entry
    evicted = 0

    for row in range(len(trace)):
        c = conversation[row]
        p = prev_turn[row]
        if p >= 0:
            kept[p] = cached[c]
        history = history_after[row]
        target = history if forced_caching else admit(row)
        if not 0 <= target <= history:
            raise ValueError(f"{policy.name}: admit_tokens({row}) = {target} is outside [0, {history}]")
        if target > capacity:
            target = capacity
        if cached[c] > 0:
            live -= 1
        occupancy += target - cached[c]
        cached[c] = target
        seq += 1
        stamp[c] = seq  # retires c's older heap entry
        if target > 0 and not forced_caching:
            tier, key, floor = key_of(c, target, row)
            push(heap, (tier, key, row, seq, c, floor))
            live += 1
        while occupancy > capacity:
            tier, key, r, s, j, floor = pop(heap)
            if stamp[j] != s:
                continue
            live -= 1
            while True:  # cut j level by level while it stays strictly the cheapest
                if floor_below is not None:
                    floor = min(floor, floor_below(j, cached[j], r, heap[0][0], heap[0][1]) if heap else 0)
                cut = min(occupancy - capacity, cached[j] - floor)
                cached[j] -= cut
                occupancy -= cut
                evicted += cut
                if cached[j] == 0:
                    break
                tier, key, floor = key_of(j, cached[j], r)
                if occupancy > capacity and (not heap or (tier, key, r) < heap[0][:3]):
                    continue
                seq += 1
                stamp[j] = seq
                push(heap, (tier, key, r, seq, j, floor))
                live += 1
                break
        if forced_caching and target > 0:
            seq += 1
            stamp[c] = seq
            tier, key, floor = key_of(c, target, row)
            push(heap, (tier, key, row, seq, c, floor))
            live += 1
        if len(heap) > 2 * live + 1024:
            heap = [entry for entry in heap if stamp[entry[4]] == entry[3]]
            heapq.heapify(heap)

    kept_tokens = np.asarray(kept, dtype=np.int64)
    return ReplayResult(policy.name, policy.describe(), kept_tokens, capacity, forced_caching, time.perf_counter() - start, evicted)
