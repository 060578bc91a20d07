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

:func:`relaxation_bound` scales to any trace (no MILP; the third part up to kv_bound.MAX_ARCS LP variables): the
largest of

* the per-request floor ``sum_r min_k (n_rk (beta_k + kappa_k T_r) + alpha_k w_r + gamma_k q(w_r))``, ``w_r`` the
  prompt tokens no earlier request can let it reuse (``reuse_upper_bound``), ``T_r`` its blocks ``ceil((P + O) / B)``,
  ``n_rk = ceil(w_r / b_k)`` the fewest iterations that compute ``w_r`` tokens within server ``k``'s prefill budget
  ``b_k``, ``kappa_k`` the time per held KV block, ``gamma_k`` the time per query-key pair and
  ``q(w) = w (P - w) + w (w + 1) / 2`` the pairs of prefilling the last ``w`` of its ``P`` prompt tokens.  Request
  ``r`` computes ``u >= w_r`` prompt tokens in iterations that start at or after ``a_r``, each computing at most
  ``b_k`` prefill tokens (decode tokens take the budget first, server.py), so there are at least ``ceil(u / b_k)`` of
  them; each lasts at least ``beta_k + kappa_k H`` with ``H >= T_r`` the held blocks (``r`` holds a block for each of
  its ``T_r`` positions from admission on: reused ones shared, the rest reserved; a published copy replaces a
  private one, cache.py), and together they add ``alpha_k u`` for its tokens and ``gamma_k q(u)`` for its pairs
  (however the prompt is chunked, the chunks' pairs sum to ``q(u)``, which grows with ``u`` up to ``P``);
* the fast single-machine relaxation: all servers as one machine working at ``sum_k 1/alpha_k`` per ms, preemptive,
  one request's work at any rate, request ``r`` needing ``min_k (alpha_k w_r + gamma_k q(w_r) + (beta_k + kappa_k T_r)
  w_r / b_k) / alpha_k``.  Any simulator run is a schedule of it: an iteration of server ``k`` lasting
  ``t >= beta_k + kappa_k H + alpha_k P + gamma_k Q`` (``P <= b_k`` prefill tokens in chunks ``c_i``, ``Q`` pairs)
  gives each chunk ``alpha_k c_i + gamma_k Q_i + (beta_k + kappa_k H) c_i / P`` of it, which sums to at most ``t``
  and is at least ``alpha_k c_i + gamma_k Q_i + (beta_k + kappa_k T_i) c_i / b_k``; spread over the iteration and
  scaled by ``1/alpha_k``, server ``k`` supplies at most ``1/alpha_k`` per ms and request ``r`` has its whole work
  by its first token.  Shortest-remaining-work-first is optimal for the total completion time of that machine
  (Schrage 1968), so ``sum_r (C_r - a_r)`` bounds the total TTFT.  With ``beta = kappa = gamma = 0`` it is the
  prompt-token machine of rate ``sum_k 1/alpha_k``; the per-iteration overhead spread over a full budget is the
  prefill throughput's best point, ``b_k / (beta_k + alpha_k b_k)`` tokens per ms;
* the KV-hold relaxation (kv_bound.py): the servers' KV blocks and sequence slots pooled, each request holding at
  least the blocks no earlier request names from its admission to the end of its decode floor (its prefill floor
  ``f_rk`` above and ``O_r - 1`` lone decode iterations), a fluid of those block-time areas whose least total mean
  busy date bounds the total admission wait; its value is that wait's mean plus the mean per-request floor.

The first two do not see the KV cache's admission queue (a request waits for blocks that running requests hold until
their last decode iteration); the third does, but only as far as the floors make the holds long (on the shipped
loaded scenarios the pooled blocks hold every floor-length request at once: docs/guide/placement.md).

For ``ttft_excess`` only the per-request bound applies (``sum_r max(0, min_k(...) - SLO)``).
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING

import numpy as np

from optfleet.engine.step import prefill_pairs
from optfleet.problems.placement.kv_bound import kv_wait_bound_ms

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


def _iteration_terms(problem: "PlacementProblem") -> tuple[np.ndarray, ...]:
    """Per request (rows) and server (columns): the prefill time ``alpha_k w_r + gamma_k q(w_r)`` of its least work
    ``w_r`` and the overhead ``beta_k + kappa_k T_r`` of each iteration it prefills in (module docstring); and
    ``w_r``, the servers' ``alpha_k`` and budgets ``b_k``."""
    q = problem.requests
    alpha = np.array([e.prefill_ms_per_token for e in problem.engines])
    beta = np.array([e.step_base_ms for e in problem.engines])
    kappa = np.array([e.step_ms_per_kv_block for e in problem.engines])
    gamma = np.array([e.prefill_ms_per_pair for e in problem.engines])
    budget = np.array([e.prefill_budget_tokens for e in problem.engines], dtype=float)
    work = (q.prompt_tokens - reuse_upper_bound(problem)).astype(float)
    pairs = prefill_pairs(work, q.prompt_tokens - work)
    prefill = work[:, None] * alpha[None, :] + pairs[:, None] * gamma[None, :]
    overhead = beta[None, :] + kappa[None, :] * problem.total_blocks[:, None].astype(float)
    return prefill, overhead, work, alpha, budget


def prefill_floors_ms(problem: "PlacementProblem") -> np.ndarray:
    """``f_rk = n_rk (beta_k + kappa_k T_r) + alpha_k w_r + gamma_k q(w_r)``, requests x servers (module docstring):
    the least time from ``r``'s admission on server ``k`` to its first token."""
    prefill, overhead, work, _, budget = _iteration_terms(problem)
    return np.ceil(work[:, None] / budget[None, :]) * overhead + prefill


def relaxation_bound(problem: "PlacementProblem") -> tuple[float, dict[str, float]]:
    """The mean-TTFT (or mean-excess) lower bound of the module docstring, and its parts (ms)."""
    q = problem.requests
    prefill, overhead, work, alpha, budget = _iteration_terms(problem)
    floors = prefill_floors_ms(problem)
    per_request = floors.min(axis=1)
    n = len(q)
    if problem.objective == "ttft_excess":
        value = float(np.maximum(0.0, per_request - problem.slo.ttft_ms).mean())
        return value, {"per_request_ms": value}
    machine_work = ((prefill + overhead * work[:, None] / budget[None, :]) / alpha[None, :]).min(axis=1)
    fast = srpt_total_flow_ms(q.arrival_ms, machine_work, float((1.0 / alpha).sum())) / n
    parts = {"per_request_ms": float(per_request.mean()), "fast_machine_ms": fast}
    kv_hold = kv_wait_bound_ms(problem, floors, time_limit_s=problem.solve.time_limit_s)  # left out past the limit
    if kv_hold is not None:
        parts["kv_hold_ms"] = kv_hold
    return max(parts.values()), parts
