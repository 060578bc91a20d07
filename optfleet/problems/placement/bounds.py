"""Lower bounds on the simulator's best placement, and the reuse the exact views may assume.

Why the MILP's service model (models/placement.py) bounds the simulator from below.  Fix a placement.  On a
server, prefill is first come, first served (admission is FCFS and the token budget goes to the earliest admitted
request first, server.py), so when request ``r``'s first token comes (the end of the iteration computing its last
prompt token), every prompt token of the requests ``j..r`` placed there before it has been computed, in
iterations that started at or after ``a_j`` and each lasted at least ``beta + alpha x (its prefill tokens)`` (the
step's other terms, the prefill attention pairs among them, are >= 0 and left out):

    first_token_r >= a_j + alpha * sum_{i=j..r} u_i + beta     for every earlier j on the server,

with ``u_i`` the uncached prompt tokens, which the model under-estimates (it lets a request reuse its group's
system prompt, or its whole prompt, as soon as an earlier request of the group, or conversation, is on the server,
and never evicts).  The right side is the model's TTFT (its Lindley recursion); so, placement by placement, the
model's objective is at most the simulator's, for the mean TTFT and for the mean excess over an SLO (both grow
with every TTFT), and the MILP's bound is a lower bound on the simulator's best placement.

:func:`relaxation_bound` scales to any trace (no MILP): the larger of

* the per-request bound ``sum_r min_k (alpha_k w_r + gamma_k q(w_r) + beta_k)``, ``w_r`` the prompt tokens no
  earlier request can let it reuse (``reuse_upper_bound``), ``gamma_k`` the server's time per query-key pair and
  ``q(w) = w (P - w) + w (w + 1) / 2`` the pairs of prefilling the last ``w`` of its ``P`` prompt tokens: however they
  are chunked, the chunks' pairs sum to ``q(u)`` for the ``u >= w`` tokens it computes, and ``q`` grows with ``u``
  up to ``P``;
* the fast single-machine relaxation: all servers as one machine computing ``sum_k 1/alpha_k`` prompt tokens per
  ms, preemptive, one request's tokens at any rate; shortest-remaining-work-first is optimal for its total
  completion time (Schrage 1968), and any simulator run is a schedule of it (spread each iteration's prefill
  tokens over its last ``alpha x tokens`` ms), so ``sum_r (C_r - a_r)`` bounds the total TTFT (no ``beta``).

For ``ttft_excess`` only the per-request bound applies (``sum_r max(0, min_k(...) - SLO)``).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

import numpy as np

from optfleet.engine.step import prefill_pairs

if TYPE_CHECKING:
    from optfleet.problems.placement.problem import PlacementProblem


def reusable_tokens(problem: "PlacementProblem") -> tuple[np.ndarray, np.ndarray]:
    """Per request: ``G_r`` (its group's system prompt as whole blocks it may reuse) and ``H_r`` (its whole
    reusable prompt: ``B floor((P - 1) / B)``, cache.py's limit)."""
    q = problem.requests
    block = problem.block_tokens
    cap = block * ((q.prompt_tokens - 1) // block)
    group = np.where(q.group >= 0, np.minimum(block * (q.shared_tokens // block), cap), 0)
    return group.astype(np.int64), cap.astype(np.int64)


def reuse_upper_bound(problem: "PlacementProblem") -> np.ndarray:
    """Tokens each request could at most reuse wherever it runs: ``H_r`` after an earlier turn of its conversation,
    ``G_r`` after an earlier request of its group, else 0."""
    q = problem.requests
    group_tokens, cap = reusable_tokens(problem)
    seen_sessions, seen_groups = set(), set()
    reuse = np.zeros(len(q), dtype=np.int64)
    for r in range(len(q)):
        s, g = int(q.session[r]), int(q.group[r])
        if s in seen_sessions:
            reuse[r] = cap[r]
        elif g >= 0 and g in seen_groups:
            reuse[r] = group_tokens[r]
        seen_sessions.add(s)
        seen_groups.add(g)
    return reuse


def srpt_total_flow_ms(release_ms: np.ndarray, work: np.ndarray, rate_per_ms: float) -> float:
    """``sum_r (C_r - a_r)`` of preemptive shortest-remaining-work-first on one machine of ``rate_per_ms`` (jobs in
    release order): the optimum of that relaxation (Schrage 1968)."""
    total, now, heap, i, n = 0.0, 0.0, [], 0, len(work)
    while i < n or heap:
        if not heap:
            now = max(now, float(release_ms[i]))
        while i < n and release_ms[i] <= now:
            heapq.heappush(heap, (float(work[i]) / rate_per_ms, i))
            i += 1
        remaining, j = heapq.heappop(heap)
        next_release = float(release_ms[i]) if i < n else np.inf
        if now + remaining <= next_release:
            now += remaining
            total += now - float(release_ms[j])
        else:
            heapq.heappush(heap, (remaining - (next_release - now), j))
            now = next_release
    return total


def relaxation_bound(problem: "PlacementProblem") -> tuple[float, dict[str, float]]:
    """The mean-TTFT (or mean-excess) lower bound of the module docstring, and its two parts (ms)."""
    q = problem.requests
    alpha = np.array([e.prefill_ms_per_token for e in problem.engines])
    beta = np.array([e.step_base_ms for e in problem.engines])
    gamma = np.array([e.prefill_ms_per_pair for e in problem.engines])
    work = (q.prompt_tokens - reuse_upper_bound(problem)).astype(float)
    pairs = prefill_pairs(work, q.prompt_tokens - work)
    per_request = (work[:, None] * alpha[None, :] + pairs[:, None] * gamma[None, :] + beta[None, :]).min(axis=1)
    n = len(q)
    if problem.objective == "ttft_excess":
        value = float(np.maximum(0.0, per_request - problem.slo.ttft_ms).mean())
        return value, {"per_request_ms": value}
    fast = srpt_total_flow_ms(q.arrival_ms, work, float((1.0 / alpha).sum())) / n
    parts = {"per_request_ms": float(per_request.mean()), "fast_machine_ms": fast}
    return max(parts.values()), parts
