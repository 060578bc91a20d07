"""Batching-mode simulation: iteration-level continuous batching on every GPU of a pool.

A model of what a vLLM-style engine does, to measure how far the analytic
service models are from batching dynamics (not a calibrated engine simulator):

* a pool has ``n`` GPUs with ``n_max`` slots each and one FCFS queue; an
  arriving request takes a slot on the GPU with the most free slots, or waits;
* each iteration spends a prefill budget of ``C_chunk`` tokens on the GPU's
  prefilling requests in admission order, and gives one decode token to every
  request whose prefill finished in an earlier iteration; a request admitted
  during an iteration joins at the next one, one admitted as an iteration
  starts joins that one;
* an iteration lasts, under the paper's model, ``W + H * sum_active phi_i``
  (``phi = 1`` flat, ``L_total / L_scale`` length-scaled: the slot model's
  ``t_iter`` with the *actual* active sequences instead of a full GPU); under
  the engine model (``config.step``, pool_config.py), what it carries:
  ``base + per_seq b + per_kv_token k + per_prefill_token p + per_prefill_pair
  pairs``, with ``b`` the decoding sequences, ``k`` their contexts (a
  sequence's prompt and the tokens it has decoded), ``p`` the prompt tokens of
  the iteration and ``pairs`` their attention pairs at their offsets;
* a request's first token comes at the end of its first decode iteration
  (the slot model's "prefill + one iteration"); it leaves, freeing its slot,
  after ``L_out`` decode iterations (at least one).

Between two changes of a GPU's active set the iterations change only linearly
(each decode adds a token of context, each full chunk of one prompt moves on
by a chunk), so the simulation advances a GPU by a whole run of them at once
(until its first decode completion, the end of its head prompt's full chunks,
or an admission): iteration ``j`` of a run lasts ``a + s j`` and ``r`` of them
``r a + s r (r - 1) / 2``.  A prompt's last, partial chunk shares its iteration
with the next prompts' tokens (one iteration, a run of its own).  The event
count grows with the number of requests, not with the number of iterations.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.engine.step import prefill_pairs
from optfleet.problems.fleet.pool_config import PoolConfig


@dataclass(frozen=True)
class BatchingTimes:
    """Per request (pool arrival order): admission, first token and completion times in seconds."""

    start_s: NDArray[np.float64]
    first_token_s: NDArray[np.float64]
    finish_s: NDArray[np.float64]


class _Gpu:
    """One GPU: its decoding and prefilling requests, those joining, and the run of iterations under way (its first
    iteration's length ``first`` and the growth ``slope`` of each next one, in seconds)."""

    __slots__ = ("decoding", "prefilling", "joining", "free", "version", "run_start", "first", "slope", "run_length", "prefilled")

    def __init__(self, slots: int) -> None:
        self.decoding: list[list] = []  # [request, decode iterations left, context tokens]
        self.prefilling: deque[list] = deque()  # [request, prefill tokens left]
        self.joining: list[int] = []
        self.free = slots
        self.version = 0
        self.run_start = 0.0
        self.first = 0.0
        self.slope = 0.0
        self.run_length = 0
        self.prefilled: list[int] = []  # prompt tokens each prefilling request gets in the run's iterations (a partial-chunk run)


def run_seconds(first: float, slope: float, iterations: int) -> float:
    """``r a + s r (r - 1) / 2``: the length of ``r`` iterations of a run."""
    return iterations * first + slope * iterations * (iterations - 1) / 2.0


def iterations_done(first: float, slope: float, elapsed: float) -> int:
    """The iterations of a run complete ``elapsed`` seconds after its start: the largest ``j`` with ``T(j) <= elapsed``."""
    if slope <= 0.0:
        j = int(elapsed / first)
    else:
        b = first - slope / 2.0
        j = int((-b + math.sqrt(b * b + 2.0 * slope * elapsed)) / slope)
    while j > 0 and run_seconds(first, slope, j) > elapsed:
        j -= 1
    while run_seconds(first, slope, j + 1) <= elapsed:
        j += 1
    return j


def simulate_batching(
    config: PoolConfig, gpus: int, arrival_s: NDArray[np.float64], l_in: NDArray[np.int64], l_out: NDArray[np.int64]
) -> BatchingTimes:
    """Run the pool's requests (sorted by arrival) through ``gpus`` continuously batching GPUs."""
    count = len(arrival_s)
    start = np.full(count, np.nan)
    first = np.full(count, np.nan)
    finish = np.full(count, np.nan)
    step = config.step
    w_s, h_s = config.w_ms / 1000.0, config.h_ms_per_slot / 1000.0
    scale = config.length_scale_tokens
    phi = ((l_in + l_out) / scale if scale is not None else np.ones(count)).tolist()
    prefill_tokens = l_in.tolist()
    decode_tokens = np.maximum(l_out, 1).tolist()
    chunk = config.chunk_tokens
    # GPUs beyond the request count change nothing (every arrival finds an idle GPU, the lowest-numbered, either way),
    # so a plan's huge count costs no memory.
    gpus = min(gpus, count)
    machines = [_Gpu(config.slots_per_instance) for _ in range(gpus)]
    most_free = [(-config.slots_per_instance, g) for g in range(gpus)]  # lazy max-heap of free slots
    heapq.heapify(most_free)
    events: list[tuple[float, int, int, int]] = [(t, 1, i, 0) for i, t in enumerate(arrival_s.tolist())]
    heapq.heapify(events)  # (time, kind: 0 end of a run / 1 arrival, index, version)
    waiting: deque[int] = deque()

    def shares(gpu: _Gpu) -> list[int]:
        """The prompt tokens each prefilling request gets in one iteration that spreads the budget in order."""
        out, budget = [], chunk
        for _, left in gpu.prefilling:
            used = min(budget, left)
            out.append(used)
            budget -= used
            if budget == 0:
                break
        return out

    def timing(gpu: _Gpu, full_chunks: bool) -> tuple[float, float]:
        """``(a, s)`` of the run: its first iteration's length and each next one's growth, in seconds."""
        if step is None:
            weight = sum(phi[e[0]] for e in gpu.decoding) + sum(phi[e[0]] for e in gpu.prefilling)
            return w_s + h_s * weight, 0.0
        b = len(gpu.decoding)
        context = sum(e[2] for e in gpu.decoding)
        if full_chunks:
            head = gpu.prefilling[0]
            tokens, pairs = chunk, float(prefill_pairs(chunk, prefill_tokens[head[0]] - head[1]))
        else:
            tokens, pairs = sum(gpu.prefilled), sum(float(prefill_pairs(used, prefill_tokens[r] - left))
                                                    for (r, left), used in zip(gpu.prefilling, gpu.prefilled))
        first_ms = (step.base_ms + step.per_seq_ms * b + step.per_kv_token_ms * context + step.per_prefill_token_ms * tokens
                    + step.per_prefill_pair_ms * pairs)
        slope_ms = step.per_kv_token_ms * b + (step.per_prefill_pair_ms * chunk * chunk if full_chunks else 0.0)
        return first_ms / 1000.0, slope_ms / 1000.0

    def plan_run(g: int, now: float) -> None:
        """Start the next run on GPU g (or leave it idle)."""
        gpu = machines[g]
        for r in gpu.joining:
            if prefill_tokens[r] > 0:
                gpu.prefilling.append([r, prefill_tokens[r]])
            else:
                gpu.decoding.append([r, decode_tokens[r], prefill_tokens[r]])
        gpu.joining = []
        if not gpu.decoding and not gpu.prefilling:
            gpu.run_length = 0
            return
        runs = [e[1] for e in gpu.decoding]
        full_chunks = bool(gpu.prefilling) and gpu.prefilling[0][1] >= chunk
        gpu.prefilled = []
        if full_chunks:
            runs.append(gpu.prefilling[0][1] // chunk)
        elif gpu.prefilling:
            gpu.prefilled = shares(gpu)
            runs.append(1)
        gpu.first, gpu.slope = timing(gpu, full_chunks)
        gpu.run_start, gpu.run_length = now, min(runs)
        gpu.version += 1
        heapq.heappush(events, (now + run_seconds(gpu.first, gpu.slope, gpu.run_length), 0, g, gpu.version))

    def finish_run(g: int, now: float) -> None:
        """Apply the run's iterations: decode tokens, prefill chunks, completions."""
        gpu = machines[g]
        done = gpu.run_length
        first_end = gpu.run_start + gpu.first
        still = []
        for entry in gpu.decoding:
            r = entry[0]
            if first[r] != first[r]:  # NaN: its first decode iteration is the run's first
                first[r] = first_end
            entry[1] -= done
            entry[2] += done
            if entry[1] <= 0:
                finish[r] = now
                gpu.free += 1
                heapq.heappush(most_free, (-gpu.free, g))
            else:
                still.append(entry)
        gpu.decoding = still
        if not gpu.prefilling:
            return
        if not gpu.prefilled:  # full chunks of the head prompt
            gpu.prefilling[0][1] -= done * chunk
        else:
            for entry, used in zip(list(gpu.prefilling), gpu.prefilled):
                entry[1] -= used
        while gpu.prefilling and gpu.prefilling[0][1] == 0:
            head = gpu.prefilling.popleft()
            gpu.decoding.append([head[0], decode_tokens[head[0]], prefill_tokens[head[0]]])

    def interrupt(g: int, now: float) -> None:
        """A request joined GPU g mid-run: end the run with the iteration now under way.  A run that starts now (no
        iteration begun: a slot freed, or a request arrived, at this instant) is planned again with the request in
        it, which joins this iteration rather than the next."""
        gpu = machines[g]
        if gpu.run_length == 0 or now == gpu.run_start:
            plan_run(g, now)
            return
        in_progress = iterations_done(gpu.first, gpu.slope, now - gpu.run_start) + 1
        if in_progress < gpu.run_length:
            gpu.run_length = in_progress
            gpu.version += 1
            heapq.heappush(events, (gpu.run_start + run_seconds(gpu.first, gpu.slope, in_progress), 0, g, gpu.version))

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
