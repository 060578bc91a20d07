"""Pools under the continuous-batching service model (``slo.service_model: batching``; optfleet/queueing/batching.py).

A pool meets the SLO at ``n`` GPUs when the model is stable there, its slot occupancy is at most ``rho_max``
and its P99 TTFT (slot wait + in-GPU time to first token) is at most the SLO.  More GPUs lower the per-GPU
arrival rate, hence the iteration time, the prefill load, the occupancy and both waits, so the feasible
counts are an up-set of ``n`` and the minimum is found by doubling and bisection (queueing/sizing.py),
vectorised over pools.  The evaluator and the sweep size every pool with :func:`min_gpus_batching`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import fields, replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.queueing import RELATIVE_TOLERANCE
from optfleet.queueing.batching import PREFILL_BINS, BatchingState, BatchingWorkload, batching_state, workload_moments
from optfleet.queueing.sizing import MAX_GPUS, smallest_feasible


def chunk_columns(configs: Sequence[PoolConfig]) -> int:
    """Width of the chunk-share rows: one more than the most prefill chunks any window holds."""
    return max(-(-c.window_tokens // c.chunk_tokens) for c in configs) + 1


def batching_workload(configs: Sequence[PoolConfig], traffic: Sequence[tuple[ArrayLike, ArrayLike, ArrayLike]],
                      rate_rps: ArrayLike) -> BatchingWorkload:
    """The :class:`BatchingWorkload` of pools ``configs`` serving ``traffic`` (per pool: ``l_in, l_out, weight``)
    at ``rate_rps`` requests per second each (a pool with no traffic gets zero moments)."""
    columns = chunk_columns(configs)
    rows = []
    for config, (l_in, l_out, weight) in zip(configs, traffic, strict=True):
        if float(np.sum(weight)) <= 0:
            rows.append((0.0, 0.0, 1.0, np.eye(1, columns * PREFILL_BINS)[0], np.eye(1, columns)[0]))
        else:
            rows.append(workload_moments(l_in, l_out, weight, config.chunk_tokens, config.length_scale_tokens, columns))
    ex, scv, phi, prefill, shares = zip(*rows, strict=True)
    return BatchingWorkload(np.asarray(rate_rps, dtype=np.float64) * np.ones(len(rows)), np.array(ex), np.array(scv), np.array(phi),
                            np.vstack(prefill), np.vstack(shares))


def take(workload: BatchingWorkload, rows: NDArray[np.int64]) -> BatchingWorkload:
    """The pools ``rows`` of ``workload``."""
    return BatchingWorkload(*(np.asarray(getattr(workload, f.name))[rows] for f in fields(workload)))


def pool_arrays(configs: Sequence[PoolConfig]) -> tuple[NDArray[np.int64], NDArray[np.float64], NDArray[np.float64]]:
    """``(slots per GPU, W ms, H ms per slot)`` of each pool."""
    return (np.array([c.slots_per_gpu for c in configs]), np.array([c.w_ms for c in configs]), np.array([c.h_ms_per_slot for c in configs]))


def state_at(workload: BatchingWorkload, configs: Sequence[PoolConfig], gpus: ArrayLike) -> BatchingState:
    """The model of every pool at ``gpus`` GPUs (each at least 1)."""
    slots, w_ms, h_ms = pool_arrays(configs)
    return batching_state(workload, gpus, slots, w_ms, h_ms)


def meets_slo(state: BatchingState, slo_ms: float, rho_max: float) -> NDArray[np.bool_]:
    """Stable, occupancy within ``rho_max`` and P99 TTFT within the SLO (relative tolerance as in sizing.py)."""
    return state.stable & (state.utilisation <= rho_max * (1 + RELATIVE_TOLERANCE)) & (state.ttft_p99_ms <= slo_ms * (1 + RELATIVE_TOLERANCE))


def min_gpus_batching(workload: BatchingWorkload, configs: Sequence[PoolConfig], slo_ms: float, rho_max: float) -> NDArray[np.int64]:
    """Fewest GPUs per pool meeting the SLO under the batching model; 0 for a pool with no traffic, -1 for none.

    The search starts at the full-batch bound: a pool needs ``lambda E[X] (W + H phi s) < n s`` to be stable.
    A pool whose in-GPU time to first token alone breaks the SLO at any count is answered -1 at once: as
    ``n`` grows the model tends to the idle pool (iteration ``W``, no prefill wait, no slot wait), which is
    checked first.
    """
    slots, w_ms, h_ms = pool_arrays(configs)
    lam = np.asarray(workload.rate_rps, dtype=np.float64)
    busy = lam > 0
    full_s = (w_ms + h_ms * workload.phi * slots) / 1000.0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        lo = np.floor(lam * workload.mean_iterations * full_s / slots) + 1.0
    countable = ~busy | (lo <= MAX_GPUS)
    lo = np.where(busy & countable, lo, 1.0).astype(np.int64)
    idle = batching_state(replace(workload, rate_rps=np.zeros(len(slots))), np.ones(len(slots)), slots, w_ms, h_ms)
    reachable = meets_slo(idle, slo_ms, rho_max)

    known: dict[tuple[int, int], bool] = {}  # (pool, count) -> verdict: the search asks settled pools again

    def feasible(n: NDArray[np.int64]) -> NDArray[np.bool_]:
        asked = [(j, int(c)) for j, c in enumerate(n)]
        new = np.array([j for j, key in enumerate(asked) if busy[j] and key not in known], dtype=np.int64)
        if len(new):
            verdict = meets_slo(batching_state(take(workload, new), n[new], slots[new], w_ms[new], h_ms[new]), slo_ms, rho_max)
            known.update(zip((asked[j] for j in new), verdict.tolist(), strict=True))
        return np.array([not busy[j] or known[key] for j, key in enumerate(asked)], dtype=bool)

    need = smallest_feasible(lo, feasible, countable & (reachable | ~busy))
    return np.where(busy, need, 0)
