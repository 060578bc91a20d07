"""One model server: a continuous-batching engine with chunked prefill over its own prefix cache (cache.py).

Iteration by iteration (times in ms), as vLLM's scheduler with chunked prefill does:

1. every running request whose prompt is computed decodes one token; each takes one token of the budget
   ``prefill_budget_tokens``;
2. running requests still prefilling get the rest of the budget in admission order (a chunk each);
3. waiting requests are admitted first come, first served (the head blocks the rest) while the budget lasts,
   fewer than ``max_running_seqs`` run and the KV blocks have room for the whole request (cache.py: its prompt
   and output are reserved at admission, so nothing is ever preempted); each reuses the longest cached prefix of
   its prompt and prefills the rest in chunks.

The iteration lasts ``t = step_base_ms + step_ms_per_seq * n_decode + step_ms_per_kv_block * held_blocks +
prefill_ms_per_token * prefill_tokens + prefill_ms_per_pair * prefill_pairs`` (schema.TimingSpec), the pairs summed
over the iteration's chunks: a chunk of ``p`` tokens starting ``o`` tokens into its prompt (reused ones included)
attends to ``p o + p (p + 1) / 2`` query-key pairs (:func:`chunk_pairs`, engine/step.py's ``prefill_pairs``).
A request's first token comes at the end of the iteration that computes its last prompt token; then one token per
iteration.  TTFT = first token - arrival, TPOT = (completion - first token) / (output - 1), E2E = completion -
arrival.

When no request prefills and none can be admitted, iterations repeat identically until the first running request
completes: they run as one stretch of ``k`` iterations (the same times as one by one).  A request arriving in the
middle cuts the stretch at the end of the iteration in flight, where it is first considered; one arriving exactly
when an iteration ends is considered then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from optfleet.problems.placement.cache import BlockCache

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    Count = int | NDArray[np.int64]


@dataclass(slots=True)
class Live:
    """A request on a server: its lengths and origins (workload.py), its progress and its times (ms)."""

    index: int
    arrival_ms: float
    prompt: int
    output: int
    group: int
    session: int
    shared_tokens: int
    total_blocks: int
    hit: int = 0  # reused blocks (set at admission)
    computed: int = 0  # prompt tokens computed (reused ones included)
    decoded: int = 0  # output tokens produced
    shared_upto: int = 0  # blocks [0, shared_upto) are shared (reused or published)
    chunk: int = 0  # prompt tokens it computes in the iteration in flight
    first_token_ms: float = math.nan
    done_ms: float = math.nan


@dataclass(frozen=True)
class Engine:
    """A server's numbers (schema.ServerSpec); ``timing_source`` says where its timing came from ("given", or the
    engine model's source) and ``timing_reduction`` how far its affine form is from that engine (server_hardware.py)."""

    name: str
    max_running_seqs: int
    kv_capacity_blocks: int
    prefill_budget_tokens: int
    prefill_ms_per_token: float
    step_base_ms: float
    step_ms_per_seq: float
    step_ms_per_kv_block: float
    prefill_ms_per_pair: float = 0.0
    timing_source: str = "given"
    timing_reduction: str = ""

    def iteration_ms(self, n_decode: int, held_blocks: int, prefill_tokens: int, prefill_pairs: int = 0) -> float:
        """One iteration's time ``step_base_ms + step_ms_per_seq * n_decode + step_ms_per_kv_block * held_blocks +
        prefill_ms_per_token * prefill_tokens + prefill_ms_per_pair * prefill_pairs`` (ms), summed left to right (the
        forecast relies on the order; with no pair term the last one adds exactly 0)."""
        return (self.step_base_ms + self.step_ms_per_seq * n_decode + self.step_ms_per_kv_block * held_blocks
                + self.prefill_ms_per_token * prefill_tokens + self.prefill_ms_per_pair * prefill_pairs)


def chunk_pairs(chunk_tokens: Count, offset_tokens: Count) -> Count:
    """Query-key pairs of a prefill chunk of ``chunk_tokens`` starting ``offset_tokens`` into its prompt: ``p o + p (p +
    1) / 2`` (causal attention over the cached tokens and the chunk), in integers (Python ints, or int64 arrays for the
    forecast's board), so every implementation sums the same exact count."""
    return chunk_tokens * offset_tokens + chunk_tokens * (chunk_tokens + 1) // 2


class Server:
    """One server's state and its iteration loop (module docstring).  ``advance(t)`` runs every iteration that
    ends by ``t``; ``enqueue(request, t)`` adds an arrival at ``t`` (after ``advance(t)``); finished requests are
    appended to ``finished``.  ``version`` counts the changes of state (iterations finished, arrivals), so a reader
    can tell that nothing changed since it last looked."""

    def __init__(self, engine: Engine, cache) -> None:
        self.engine = engine
        self.cache = cache
        self.waiting: list[Live] = []  # FCFS; the head is waiting[self._head]
        self._head = 0
        self.running: list[Live] = []
        self.finished: list[Live] = []
        self.iteration_end_ms: float | None = None  # None: idle
        self._start_ms = 0.0
        self._step_ms = 0.0
        self._repeats = 1  # iterations in the stretch in flight (1 unless decode-only)
        self._decoding: list[Live] = []
        self._prefilling: list[Live] = []
        self.input_tokens_in_flight = 0  # prompt tokens of requests waiting or running
        self.version = 0

    @property
    def queue_depth(self) -> int:
        return len(self.waiting) - self._head

    @property
    def kv_usage(self) -> float:
        return self.cache.held_blocks / self.engine.kv_capacity_blocks

    def advance(self, t_ms: float) -> None:
        """Run every iteration that ends before ``t_ms`` (one ending at ``t_ms`` sees the arrivals at ``t_ms``)."""
        while self.iteration_end_ms is not None and self.iteration_end_ms < t_ms:
            self.step()

    def step(self) -> None:
        """Finish the iteration in flight and plan the next one at its end."""
        end = self.iteration_end_ms
        self.version += 1
        self._finish_iteration(end)
        self._plan(end)

    def enqueue(self, r: Live, t_ms: float) -> None:
        """Request ``r`` arrives at ``t_ms`` (the server was advanced to ``t_ms``).  An idle server wakes at
        ``t_ms`` (an empty iteration ending then), so every arrival at the same instant is planned together."""
        self.waiting.append(r)
        self.version += 1
        self.input_tokens_in_flight += r.prompt
        if self.iteration_end_ms is None:
            self._decoding, self._prefilling, self._repeats = [], [], 1
            self.iteration_end_ms = t_ms
        elif self._repeats > 1:  # cut the decode-only stretch at the end of the iteration in flight
            done = max(1, math.ceil((t_ms - self._start_ms) / self._step_ms))
            if done < self._repeats:
                self._repeats = done
                self.iteration_end_ms = self._start_ms + done * self._step_ms

    def drain(self) -> None:
        self.advance(math.inf)

    def _plan(self, t_ms: float) -> None:
        e = self.engine
        decoding = [r for r in self.running if r.computed == r.prompt]
        budget = max(0, e.prefill_budget_tokens - len(decoding))
        prefilling, prefill_tokens, pairs = [], 0, 0
        for r in self.running:
            if r.computed < r.prompt and budget > 0:
                r.chunk = min(r.prompt - r.computed, budget)
                budget -= r.chunk
                prefill_tokens += r.chunk
                pairs += chunk_pairs(r.chunk, r.computed)
                prefilling.append(r)
        while budget > 0 and self._head < len(self.waiting) and len(self.running) < e.max_running_seqs:
            r = self.waiting[self._head]
            hit = self.cache.hit_blocks(r)
            if self.cache.held_blocks + self.cache.admission_blocks(r, hit) > e.kv_capacity_blocks:
                break
            self.cache.admit(r, hit)
            r.hit, r.shared_upto = hit, hit
            r.computed = hit * self.cache.block_tokens
            r.chunk = min(r.prompt - r.computed, budget)
            budget -= r.chunk
            prefill_tokens += r.chunk
            pairs += chunk_pairs(r.chunk, r.computed)
            prefilling.append(r)
            self.running.append(r)
            self._head += 1
        if self._head > 64 and self._head * 2 > len(self.waiting):
            del self.waiting[: self._head]
            self._head = 0
        if not decoding and not prefilling:
            self.iteration_end_ms = None
            return
        step = e.iteration_ms(len(decoding), self.cache.held_blocks, prefill_tokens, pairs)
        repeats = 1
        if not prefilling:  # decode-only: repeats identically until the first completion (module docstring)
            repeats = min(r.output - r.decoded for r in decoding)
        self._decoding, self._prefilling = decoding, prefilling
        self._start_ms, self._step_ms, self._repeats = t_ms, step, repeats
        self.iteration_end_ms = t_ms + repeats * step

    def _finish_iteration(self, end_ms: float) -> None:
        block = self.cache.block_tokens
        done = []
        for r in self._decoding:
            r.decoded += self._repeats
            if r.decoded >= r.output:
                done.append(r)
        for r in self._prefilling:
            r.computed += r.chunk
            r.chunk = 0
            if r.computed == r.prompt:
                r.first_token_ms = end_ms
                r.decoded = 1
                full = r.prompt // block
                if full > r.shared_upto:
                    self.cache.publish(r, r.shared_upto, full)
                    r.shared_upto = full
                if r.output == 1:
                    done.append(r)
        if done:
            for r in done:
                r.done_ms = end_ms
                full = (r.prompt + r.output) // block
                if full > r.shared_upto:
                    self.cache.publish(r, r.shared_upto, full)
                    r.shared_upto = full
                self.cache.release(r)
                self.input_tokens_in_flight -= r.prompt
                self.finished.append(r)
            finished = set(id(r) for r in done)
            self.running = [r for r in self.running if id(r) not in finished]
        self.iteration_end_ms = None


def make_server(engine: Engine, block_tokens: int) -> Server:
    return Server(engine, BlockCache(engine.kv_capacity_blocks, block_tokens))
