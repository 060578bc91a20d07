"""The one evaluator of prefix-cache schedules: tree and capacity checks, hits, TTFT, TEL and tail metrics.

Every producer (a policy's replay, the hindsight MILP) reports a schedule as
``kept[o]`` per occurrence ``o`` (optfleet.problems.prefix_cache.trace): the
block stays resident from its request ``r1`` until its next occurrence's
request ``r2``, occupying a slot after each of the events ``r1 .. r2 - 1``.
A block enters the cache only when a request computes it, so a block
resident at ``r2`` was resident through the whole gap: the representation
loses nothing the next request can see.  Checks (a failure names the first
offending occurrence and is a producer's bug):

* only occurrences with a next occurrence are kept;
* capacity: after every event at most ``capacity_blocks`` kept gaps are open;
* ``leaves`` setting (the cache's resident set is closed under parents):
  a kept block's parent is kept through the same gap, i.e. every occurrence
  of the parent from the one in ``r1`` up to (not including) the one in
  ``r2`` is kept.

Hits: request ``r`` hits the longest prefix of its path whose previous
occurrences are all kept, ``h_r`` blocks; its hit tokens are those blocks'
tokens.  Its prefill takes the caching kind's engine model
(:class:`~optfleet.problems.caching.evaluate.TtftModel`), the prefill of the
missed suffix: ``S_r = alpha * (input_tokens - hit_tokens) + beta`` ms.

Service (the ``fcfs_server`` setting).  Without it service is instantaneous
and ``TTFT_r = S_r``.  With it the cache serves one FCFS prefill server:
request ``r`` starts at ``start_r = max(a_r, finish_{r-1})`` and finishes at
``finish_r = start_r + S_r`` (``a_r`` its arrival), so ``TTFT_r = W_r + S_r``
with the wait ``W_r = start_r - a_r`` of Lindley's recursion
``W_r = max(0, W_{r-1} + S_{r-1} - (a_r - a_{r-1}))`` (Lindley, 1952), solved
in closed form as ``finish_r = C_r + max_{k <= r} (a_k - C_{k-1})`` with
``C_r = S_0 + .. + S_r`` (:func:`fcfs_wait_ms`).  The hit is the one found
when the request starts: the replay (optfleet.problems.prefix_cache.replay)
serves requests in that order, one at a time, with the running request's
path pinned, so the schedule ``kept`` does not depend on the times.

``TEL(xi) = sum_r max(TTFT_r - xi, 0)`` (Tail-Optimized Caching for LLM
Inference, Zhang et al.) and the SLO violations ``#{r : TTFT_r > slo}``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.problems.caching.evaluate import PERCENTILES, TtftModel
from optfleet.problems.prefix_cache.trace import BlockTrace


@dataclass(frozen=True)
class PrefixEvaluation:
    """Per-request hits and TTFT and the schedule's summary metrics (tokens, ms)."""

    policy: str
    hit_blocks: NDArray[np.int64]
    hit_tokens: NDArray[np.int64]
    ttft_ms: NDArray[np.float64]
    hit_tokens_total: int
    hit_rate: float
    tel_ms: float
    mean_ttft_ms: float
    percentile_ttft_ms: dict[int, float]
    wait_ms: NDArray[np.float64]           # queueing before the prefill (zeros without the FCFS server)
    slo_ms: float
    violations: int
    peak_occupancy_blocks: int
    capacity_blocks: int


def occupancy_blocks(trace: BlockTrace, kept: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Kept gaps open after each event: ``sum_{o kept} [r1(o) <= k < r2(o)]``."""
    o = np.flatnonzero(kept)
    change = np.zeros(len(trace) + 1, dtype=np.int64)
    np.add.at(change, trace.occ_request[o], 1)
    np.add.at(change, trace.occ_request[trace.occ_next[o]], -1)
    return np.cumsum(change[:-1])


def hit_blocks_of(trace: BlockTrace, kept: NDArray[np.bool_]) -> NDArray[np.int64]:
    """``h_r``: the length of the leading run of path blocks whose previous occurrence is kept."""
    served = (trace.occ_prev >= 0) & kept[np.maximum(trace.occ_prev, 0)]
    miss_position = np.where(served, np.iinfo(np.int64).max, trace.occ_depth - 1)
    first_miss = np.minimum.reduceat(miss_position, trace.path_start[:-1]) if len(miss_position) else np.zeros(0, dtype=np.int64)
    lengths = np.diff(trace.path_start)
    first_miss = np.where(lengths > 0, first_miss, 0)
    return np.minimum(first_miss, lengths).astype(np.int64)


def check_schedule(trace: BlockTrace, kept: ArrayLike, capacity_blocks: int, eviction: str, policy: str = "schedule") -> NDArray[np.bool_]:
    """The schedule as booleans, after the checks of the module docstring (``ValueError`` naming the occurrence)."""
    kept = np.asarray(kept)
    if kept.shape != trace.occ_block.shape:
        raise ValueError(f"{policy}: kept has shape {kept.shape}, expected {trace.occ_block.shape}")
    kept = kept.astype(bool)
    _first_bad(policy, "keeps a block that is never used again", kept & (trace.occ_next < 0))
    occupancy = occupancy_blocks(trace, kept)
    over = np.flatnonzero(occupancy > capacity_blocks)
    if over.size:
        raise ValueError(f"{policy}: schedule holds {int(occupancy[over[0]])} blocks after request {int(over[0])}, "
                         f"above the capacity of {capacity_blocks}")
    if eviction == "leaves":
        _first_bad(policy, "keeps a block whose parent is evicted during the gap", orphaned(trace, kept))
    return kept


def orphaned(trace: BlockTrace, kept: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Kept occurrences whose parent is not kept through the same gap (module docstring, ``leaves``)."""
    order = np.lexsort((np.arange(len(kept)), trace.occ_block))
    position = np.empty(len(kept), dtype=np.int64)
    position[order] = np.arange(len(kept))
    dropped = np.concatenate([[0], np.cumsum(~kept[order])])
    child = np.flatnonzero(kept & (trace.occ_depth > 1))
    q1, q2 = child - 1, trace.occ_next[child] - 1   # the parent's occurrences in r1 and in r2 (the path before the child)
    bad = np.zeros(len(kept), dtype=bool)
    bad[child] = dropped[position[q2]] - dropped[position[q1]] > 0
    return bad


def fcfs_wait_ms(arrival_s: NDArray[np.float64], service_ms: NDArray[np.float64]) -> NDArray[np.float64]:
    """Waits ``W_r`` of one FCFS server, requests in arrival order (module docstring): ``finish_r = C_r + max_{k <= r}
    (a_k - C_{k-1})`` and ``W_r = finish_r - S_r - a_r``, clipped at 0 against rounding."""
    arrival_ms = 1000.0 * np.asarray(arrival_s, dtype=float)
    done = np.cumsum(service_ms)
    finish_ms = done + np.maximum.accumulate(arrival_ms - (done - service_ms))
    return np.maximum(finish_ms - service_ms - arrival_ms, 0.0)


def evaluate_schedule(trace: BlockTrace, kept: ArrayLike, capacity_blocks: int, eviction: str, ttft: TtftModel, xi_ms: float,
                      slo_ms: float | None = None, policy: str = "schedule", fcfs_server: bool = False) -> PrefixEvaluation:
    """Check ``kept`` and score it (module docstring); ``slo_ms`` defaults to ``xi_ms``; ``fcfs_server`` adds the FCFS
    prefill server's queueing to every TTFT."""
    kept = check_schedule(trace, kept, capacity_blocks, eviction, policy)
    hit_blocks = hit_blocks_of(trace, kept)
    cumulative = np.concatenate([[0], np.cumsum(trace.occ_tokens)])
    hit_tokens = cumulative[trace.path_start[:-1] + hit_blocks] - cumulative[trace.path_start[:-1]]
    prefill_ms = ttft.ttft_ms(trace.input_tokens - hit_tokens)
    wait_ms = fcfs_wait_ms(trace.arrival_s, prefill_ms) if fcfs_server else np.zeros(len(trace))
    ttft_ms = wait_ms + prefill_ms
    slo = xi_ms if slo_ms is None else slo_ms
    total_input = int(trace.input_tokens.sum())
    return PrefixEvaluation(
        policy=policy, hit_blocks=hit_blocks, hit_tokens=hit_tokens.astype(np.int64), ttft_ms=ttft_ms,
        hit_tokens_total=int(hit_tokens.sum()), hit_rate=float(hit_tokens.sum() / total_input) if total_input else 0.0,
        tel_ms=float(np.maximum(ttft_ms - xi_ms, 0.0).sum()), mean_ttft_ms=float(ttft_ms.mean()),
        percentile_ttft_ms={p: float(np.quantile(ttft_ms, p / 100, method="inverted_cdf")) for p in PERCENTILES}, wait_ms=wait_ms,
        slo_ms=float(slo), violations=int(np.count_nonzero(ttft_ms > slo)),
        peak_occupancy_blocks=int(occupancy_blocks(trace, kept).max(initial=0)), capacity_blocks=int(capacity_blocks),
    )


def _first_bad(policy: str, problem: str, mask: NDArray[np.bool_]) -> None:
    bad = np.flatnonzero(mask)
    if bad.size:
        raise ValueError(f"{policy}: schedule {problem} at occurrence {int(bad[0])}")
