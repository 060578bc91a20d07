"""Stages 1 and 2 of a disaggregated pool (roles.py): the FCFS prefill queue over ``x`` instances and each
instance's FCFS KV link.

Prefill time of a prompt of ``L`` tokens at token budget ``B``: ``m = ceil(L / B)`` iterations, chunk ``i`` of
``p_i = min(B, L - i B)`` tokens at offset ``o_i = i B`` taking ``step_ms(p_i, 0, 0, o_i)``, so

    S(L) = sum_{i < m} step_ms(p_i, 0, 0, o_i)   (ms; roles.py, stage 1).

The queue is FCFS G/G/c with ``c = x``: request ``i`` starts on the instance that frees first, at
``max(arrival_i, its free time)`` (ties go to the lowest-numbered instance).  When its prefill ends it is sent over
that instance's link: one transfer at a time per instance, FCFS in prefill-end order (an instance's prefills end in
the order it served them), ``link_start = max(prefill_end, link_free)``, lasting ``tau = L x kv_bytes_per_token /
(gb_per_s x 1e9)`` s (TransferLink.transfer_ms); the link works while its instance prefills the next prompt.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.pd_fleet.roles import PrefillRole, chunked_prefill_ms

MAX_PREFILL_CHUNKS = 20_000_000
"""Prefill chunks of one replication at most: their sizes, offsets and times are held at once (some 100 bytes per
chunk at the peak, 2 GB); a run above it has a token budget far below its prompts (raise the budget or simulate fewer
requests)."""


def prefill_service_ms(role: PrefillRole, l_in: NDArray[np.int64]) -> NDArray[np.float64]:
    """``S(L)`` of every prompt (module docstring): the engine's time of each of its chunks, summed (ms)."""
    budget = role.token_budget
    chunks = -(-l_in // budget)
    total = int(chunks.sum())
    if total > MAX_PREFILL_CHUNKS:
        raise InputError("prefill.token_budget", budget, f"cuts these prompts into {total:,} chunks, above the limit of "
                         f"{MAX_PREFILL_CHUNKS:,} per replication (raise the budget or simulate fewer requests)")
    return chunked_prefill_ms(role.step, l_in, budget)


@dataclass(frozen=True)
class UpstreamTimes:
    """Per request (arrival order): the prefill instance, prefill start and end, KV transfer start and end (s)."""

    instance: NDArray[np.int64]
    prefill_start_s: NDArray[np.float64]
    prefill_end_s: NDArray[np.float64]
    link_start_s: NDArray[np.float64]
    link_end_s: NDArray[np.float64]


def prefill_and_transfer(arrival_s: NDArray[np.float64], prefill_s: NDArray[np.float64], transfer_s: NDArray[np.float64],
                         instances: int) -> UpstreamTimes:
    """Run the requests (sorted by arrival) through the FCFS prefill queue and their instances' links."""
    count = len(arrival_s)
    used = min(instances, count)  # instances beyond the request count stay idle whatever they are
    free = [(0.0, g) for g in range(used)]  # (free time, instance): the heap's head is the first free instance
    link_free = [0.0] * used
    instance = np.empty(count, dtype=np.int64)
    start, end = np.empty(count), np.empty(count)
    link_start, link_end = np.empty(count), np.empty(count)
    replace = heapq.heapreplace
    for i, (arrive, service, transfer) in enumerate(zip(arrival_s.tolist(), prefill_s.tolist(), transfer_s.tolist(), strict=True)):
        ready, g = free[0]
        begin = ready if ready > arrive else arrive
        done = begin + service
        replace(free, (done, g))
        send = done if done > link_free[g] else link_free[g]
        link_free[g] = send + transfer
        instance[i], start[i], end[i], link_start[i], link_end[i] = g, begin, done, send, send + transfer
    return UpstreamTimes(instance, start, end, link_start, link_end)
