"""Batching-mode simulation: iteration-level continuous batching on every GPU of a pool.

A model of what a vLLM-style engine does, to measure how far the slot model
is from batching dynamics (not a calibrated engine simulator):

* a pool has ``n`` GPUs with ``n_max`` slots each and one FCFS queue; an
  arriving request takes a slot on the GPU with the most free slots, or waits;
* a busy GPU runs back-to-back iterations of length
  ``W + H * sum_active phi_i`` (``phi = 1`` flat, ``L_total / L_scale``
  length-scaled): the slot model's ``t_iter`` with the *actual* active
  sequences instead of a full GPU;
* each iteration spends a prefill budget of ``C_chunk`` tokens on the GPU's
  prefilling requests in admission order, and gives one decode token to every
  request whose prefill finished in an earlier iteration; a request admitted
  during an iteration joins at the next one, one admitted as an iteration
  starts joins that one;
* a request's first token comes at the end of its first decode iteration
  (the slot model's "prefill + one iteration"); it leaves, freeing its slot,
  after ``L_out`` decode iterations (at least one).

Iterations between two changes of a GPU's active set are identical, so the
simulation advances a GPU by a whole run of them at once (until its first
decode completion, prefill completion or admission): the event count grows
with the number of requests, not with the number of iterations.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.fleet.pool_config import PoolConfig


@dataclass(frozen=True)
class BatchingTimes:
    """Per request (pool arrival order): admission, first token and completion times in seconds."""

    start_s: NDArray[np.float64]
    first_token_s: NDArray[np.float64]
    finish_s: NDArray[np.float64]


class _Gpu:
    """One GPU: its decoding and prefilling requests, those joining, and the run of iterations under way."""

    __slots__ = ("decoding", "prefilling", "joining", "free", "version", "run_start", "iteration", "run_length")

    def __init__(self, slots: int) -> None:
        self.decoding: list[list] = []  # [request, decode iterations left]
        self.prefilling: deque[list] = deque()  # [request, prefill tokens left]
        self.joining: list[int] = []
        self.free = slots
        self.version = 0
        self.run_start = 0.0
        self.iteration = 0.0
        self.run_length = 0


def simulate_batching(
    config: PoolConfig, gpus: int, arrival_s: NDArray[np.float64], l_in: NDArray[np.int64], l_out: NDArray[np.int64]
) -> BatchingTimes:
    """Run the pool's requests (sorted by arrival) through ``gpus`` continuously batching GPUs.

    Not built yet for the engine model (``config.step``): its iterations would have to charge each chunk's compute;
    such a pool is refused on ``mode``."""
    if config.step is not None:
        raise InputError("mode", "batching", "the batching simulator does not charge prefill compute yet: under preset engine "
                         "simulate with --mode slots, or set preset: paper")
    count = len(arrival_s)
    start = np.full(count, np.nan)
    first = np.full(count, np.nan)
    finish = np.full(count, np.nan)
    w_s, h_s = config.w_ms / 1000.0, config.h_ms_per_slot / 1000.0
    scale = config.length_scale_tokens
    phi = ((l_in + l_out) / scale if scale is not None else np.ones(count)).tolist()
    prefill_tokens = l_in.tolist()
    decode_tokens = np.maximum(l_out, 1).tolist()
    chunk = config.chunk_tokens
    # GPUs beyond the request count change nothing (every arrival finds an idle GPU, the lowest-numbered, either way),
    # so a plan's huge count costs no memory.
    gpus = min(gpus, count)
    machines = [_Gpu(config.slots_per_gpu) for _ in range(gpus)]
    most_free = [(-config.slots_per_gpu, g) for g in range(gpus)]  # lazy max-heap of free slots
    heapq.heapify(most_free)
    events: list[tuple[float, int, int, int]] = [(t, 1, i, 0) for i, t in enumerate(arrival_s.tolist())]
    heapq.heapify(events)  # (time, kind: 0 end of a run / 1 arrival, index, version)
    waiting: deque[int] = deque()

    def plan_run(g: int, now: float) -> None:
        """Start the next run of identical iterations on GPU g (or leave it idle)."""
        gpu = machines[g]
        for r in gpu.joining:
            if prefill_tokens[r] > 0:
                gpu.prefilling.append([r, prefill_tokens[r]])
            else:
                gpu.decoding.append([r, decode_tokens[r]])
        gpu.joining = []
        if not gpu.decoding and not gpu.prefilling:
            gpu.run_length = 0
            return
        weight = sum(phi[e[0]] for e in gpu.decoding) + sum(phi[e[0]] for e in gpu.prefilling)
        runs = [e[1] for e in gpu.decoding]
        if gpu.prefilling:
            runs.append(-(-gpu.prefilling[0][1] // chunk))
        gpu.run_start, gpu.iteration, gpu.run_length = now, w_s + h_s * weight, min(runs)
        gpu.version += 1
        heapq.heappush(events, (now + gpu.run_length * gpu.iteration, 0, g, gpu.version))

    def finish_run(g: int, now: float) -> None:
        """Apply the run's iterations: decode tokens, prefill chunks, completions."""
        gpu = machines[g]
        done = gpu.run_length
        first_end = gpu.run_start + gpu.iteration
        still = []
        for entry in gpu.decoding:
            r = entry[0]
            if first[r] != first[r]:  # NaN: its first decode iteration is the run's first
                first[r] = first_end
            entry[1] -= done
            if entry[1] <= 0:
                finish[r] = now
                gpu.free += 1
                heapq.heappush(most_free, (-gpu.free, g))
            else:
                still.append(entry)
        gpu.decoding = still
        if gpu.prefilling:
            gpu.prefilling[0][1] -= (done - 1) * chunk
            budget = chunk
            while gpu.prefilling and budget > 0:
                head = gpu.prefilling[0]
                used = min(budget, head[1])
                head[1] -= used
                budget -= used
                if head[1] == 0:
                    gpu.prefilling.popleft()
                    gpu.decoding.append([head[0], decode_tokens[head[0]]])

    def interrupt(g: int, now: float) -> None:
        """A request joined GPU g mid-run: end the run with the iteration now under way.  A run that starts now (no
        iteration begun: a slot freed, or a request arrived, at this instant) is planned again with the request in
        it, which joins this iteration rather than the next."""
        gpu = machines[g]
        if gpu.run_length == 0 or now == gpu.run_start:
            plan_run(g, now)
            return
        in_progress = int((now - gpu.run_start) / gpu.iteration) + 1
        if in_progress < gpu.run_length:
            gpu.run_length = in_progress
            gpu.version += 1
            heapq.heappush(events, (gpu.run_start + in_progress * gpu.iteration, 0, g, gpu.version))

    def admit(now: float) -> None:
        while waiting and most_free:
            free, g = most_free[0]
            if -free != machines[g].free:
                heapq.heappop(most_free)  # stale entry
                continue
            if free == 0:
                return
            heapq.heappop(most_free)
            gpu = machines[g]
            gpu.free -= 1
            heapq.heappush(most_free, (-gpu.free, g))
            r = waiting.popleft()
            start[r] = now
            gpu.joining.append(r)
            interrupt(g, now)

    while events:
        now, kind, index, version = heapq.heappop(events)
        if kind == 1:
            waiting.append(index)
            admit(now)
        elif version == machines[index].version:
            finish_run(index, now)
            plan_run(index, now)
            admit(now)
    return BatchingTimes(start, first, finish)
