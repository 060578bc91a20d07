"""The oracle predictor: the simulator's own expected TTFT and TPOT of a request on a server, given its state now.

A copy of the server's state (its waiting and running requests, the iteration in flight) runs forward with the
request enqueued now and no later arrival, until the request completes; its first token and completion give
TTFT and TPOT.  The copy's KV blocks are :class:`~optfleet.problems.placement.cache.FrozenCache`: reuse as the
server's cache has it now, held blocks without sharing.  So the forecast is the simulator's answer exactly when
no request arrives at this server before the forecast one completes and the cache's contents do not change the
queued requests' reuse meanwhile; otherwise it is the simulator's expectation from what is known now (the
predictor error the oracle leaves is that of not knowing the future, not of a learned model).

Two implementations of that one forward run:

* :func:`oracle_latency`, the reference: it copies the server (its :class:`~optfleet.problems.placement.server.Live`
  requests) and runs the simulator's own ``Server.step`` on the copy;
* :func:`forecast` over a :class:`Snapshot`, the fast one the oracle predictor uses.  A snapshot is the server's
  state as plain integers (per running request: prompt, output, computed and decoded tokens, blocks its admission
  added ``total - hit``, chunk in flight; per waiting request: prompt, output, ``total - hit`` and reused tokens,
  its hit read from the real cache), taken once per server state (``Server.version``) and shared by every request
  forecast before the server changes.  The forward run applies the same rules (server.py) to those integers, in the
  same order of floating-point operations (``Engine.iteration_ms``, end times accumulated ``end + repeats * step``),
  (and FrozenCache's held-block rules), so the two agree bit for bit (tests/test_placement_predictor.py checks it on constructed and random states).
  Once the forecast request is admitted, the waiting queue is empty and every running request decodes, the rest is
  decode-only stretches ended by completions: with the remaining tokens ``m_1 <= m_2 <= ...`` of the running
  requests (``n`` of them, ``H`` frozen held blocks), stretch ``j`` lasts ``(m_j - m_{j-1}) * iteration_ms(n_j, H_j,
  0)`` where ``n_j`` and ``H_j`` drop by the requests (and their ``total - hit`` blocks) completed at ``m_{j-1}``; the
  forecast request completes at the end of the stretch reaching its own remaining tokens.  That closed form is the
  reference's stretch loop with the per-request bookkeeping left out (same sums, same order).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

from optfleet.problems.placement.cache import FrozenCache
from optfleet.problems.placement.server import Engine, Live, Server

PROMPT, OUTPUT, COMPUTED, DECODED, ADDED, CHUNK = range(6)  # fields of a running request in a snapshot


def _copy_state(server: Server) -> Server:
    clone = Server(server.engine, FrozenCache(server.cache, len(server.running)))
    copies: dict[int, Live] = {}

    def twin(r: Live) -> Live:
        c = copies.get(id(r))
        if c is None:
            c = copies[id(r)] = copy.copy(r)
        return c

    clone.waiting = [twin(r) for r in server.waiting[server._head:]]
    clone.running = [twin(r) for r in server.running]
    clone._decoding = [twin(r) for r in server._decoding]
    clone._prefilling = [twin(r) for r in server._prefilling]
    clone.iteration_end_ms = server.iteration_end_ms
    clone._start_ms, clone._step_ms, clone._repeats = server._start_ms, server._step_ms, server._repeats
    clone.input_tokens_in_flight = server.input_tokens_in_flight
    return clone


def oracle_latency(server: Server, r: Live, t_ms: float) -> tuple[float, float]:
    """(TTFT, TPOT) in ms of request ``r`` enqueued at ``t_ms`` on ``server`` (advanced to ``t_ms``), by the
    forward run of the module docstring.  TPOT is 0 for a one-token answer."""
    clone = _copy_state(server)
    mine = copy.copy(r)
    clone.enqueue(mine, t_ms)
    while math.isnan(mine.done_ms):
        clone.step()
    ttft = mine.first_token_ms - t_ms
    tpot = (mine.done_ms - mine.first_token_ms) / (mine.output - 1) if mine.output > 1 else 0.0
    return ttft, tpot


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A server's state as integers (module docstring): ``running`` rows (prompt, output, computed, decoded, added
    blocks, chunk) in admission order, the in-flight iteration's decoding and prefilling rows (positions in
    ``running``), ``waiting`` rows (prompt, output, added blocks, reused tokens) in FCFS order, the held blocks and
    the iteration (or decode-only stretch) in flight: its end (None: idle), start, one iteration's time, repeats."""

    engine: Engine
    version: int
    running: tuple[tuple[int, int, int, int, int, int], ...]
    decoding: tuple[int, ...]
    prefilling: tuple[int, ...]
    waiting: tuple[tuple[int, int, int, int], ...]
    held_blocks: int
    iteration_end_ms: float | None
    start_ms: float
    step_ms: float
    repeats: int


def snapshot(server: Server) -> Snapshot:
    """``server``'s state now as a :class:`Snapshot` (reused hits of the waiting requests from its cache now)."""
    cache, block = server.cache, server.cache.block_tokens
    position = {id(r): j for j, r in enumerate(server.running)}
    running = tuple((r.prompt, r.output, r.computed, r.decoded, r.total_blocks - r.hit, r.chunk) for r in server.running)
    waiting = []
    for r in server.waiting[server._head:]:
        hit = cache.hit_blocks(r)
        waiting.append((r.prompt, r.output, r.total_blocks - hit, hit * block))
    busy = server.iteration_end_ms is not None
    return Snapshot(server.engine, server.version, running,
                    tuple(position[id(r)] for r in server._decoding) if busy else (),
                    tuple(position[id(r)] for r in server._prefilling) if busy else (),
                    tuple(waiting), cache.held_blocks, server.iteration_end_ms, server._start_ms, server._step_ms, server._repeats)


def _decode_tail(e: Engine, run: list[list[int]], mine: list[int], held: int, end_ms: float) -> float:
    """Completion time of ``mine`` when every request in ``run`` decodes and nothing else will run (module
    docstring's closed form), planning at ``end_ms`` with ``held`` frozen blocks."""
    remaining = sorted((r[OUTPUT] - r[DECODED], r[ADDED]) for r in run)
    goal = mine[OUTPUT] - mine[DECODED]
    n, done, j = len(run), 0, 0
    while True:
        m = remaining[j][0]
        end_ms = end_ms + (m - done) * e.iteration_ms(n, held, 0)
        if m >= goal:
            return end_ms
        while remaining[j][0] == m:
            held -= remaining[j][1]
            n -= 1
            j += 1
        done = m


def forecast(s: Snapshot, prompt: int, output: int, added_blocks: int, reused_tokens: int, t_ms: float) -> tuple[float, float]:
    """(TTFT, TPOT) in ms of a request (``prompt`` and ``output`` tokens, ``reused_tokens`` cached on the server,
    its admission adding ``added_blocks = total - hit`` blocks) enqueued at ``t_ms`` on the server of snapshot ``s``
    (taken at ``t_ms``): the forward run of the module docstring, as :func:`oracle_latency` computes it."""
    e = s.engine
    run = [list(row) for row in s.running]
    if s.iteration_end_ms is None:  # idle: wakes at t_ms (Server.enqueue)
        decoding, prefilling, repeats, end = [], [], 1, t_ms
    else:
        decoding, prefilling = [run[j] for j in s.decoding], [run[j] for j in s.prefilling]
        repeats, end = s.repeats, s.iteration_end_ms
        if repeats > 1:  # the arrival cuts the decode-only stretch (Server.enqueue)
            cut = max(1, math.ceil((t_ms - s.start_ms) / s.step_ms))
            if cut < repeats:
                repeats, end = cut, s.start_ms + cut * s.step_ms
    waiting = (*s.waiting, (prompt, output, added_blocks, reused_tokens))
    head, held, mine, first = 0, s.held_blocks, None, math.nan
    while True:
        finished = False  # finish the iteration ending at `end` (Server._finish_iteration)
        for r in decoding:
            r[DECODED] += repeats
            finished = finished or r[DECODED] >= r[OUTPUT]
        for r in prefilling:
            r[COMPUTED] += r[CHUNK]
            r[CHUNK] = 0
            if r[COMPUTED] == r[PROMPT]:
                r[DECODED] = 1
                if r is mine:
                    first = end
                finished = finished or r[OUTPUT] == 1
        if finished:
            if mine is not None and mine[DECODED] >= mine[OUTPUT]:
                return first - t_ms, ((end - first) / (output - 1) if output > 1 else 0.0)
            for r in run:
                if r[DECODED] >= r[OUTPUT]:
                    held -= r[ADDED]
            run = [r for r in run if r[DECODED] < r[OUTPUT]]
            if not run:
                held = 0  # FrozenCache.release: nothing running holds nothing
        decoding = [r for r in run if r[COMPUTED] == r[PROMPT]]  # plan the next iteration at `end` (Server._plan)
        budget = max(0, e.prefill_budget_tokens - len(decoding))
        prefilling, tokens = [], 0
        for r in run:
            if r[COMPUTED] < r[PROMPT] and budget > 0:
                r[CHUNK] = min(r[PROMPT] - r[COMPUTED], budget)
                budget -= r[CHUNK]
                tokens += r[CHUNK]
                prefilling.append(r)
        while budget > 0 and head < len(waiting) and len(run) < e.max_running_seqs:
            w_prompt, w_output, w_added, w_reused = waiting[head]
            if held + w_added > e.kv_capacity_blocks:
                break
            held += w_added
            chunk = min(w_prompt - w_reused, budget)
            r = [w_prompt, w_output, w_reused, 0, w_added, chunk]
            budget -= chunk
            tokens += chunk
            prefilling.append(r)
            run.append(r)
            head += 1
            if head == len(waiting):
                mine = r
        if not prefilling:
            if mine is not None and len(decoding) == len(run):
                done = _decode_tail(e, run, mine, held, end)
                return first - t_ms, ((done - first) / (output - 1) if output > 1 else 0.0)
            if not decoding:
                raise RuntimeError("the forecast request can never be admitted (frozen KV blocks)")
            repeats = min(r[OUTPUT] - r[DECODED] for r in decoding)
        else:
            repeats = 1
        end = end + repeats * e.iteration_ms(len(decoding), held, tokens)
