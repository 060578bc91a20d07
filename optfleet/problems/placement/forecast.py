"""The oracle predictor: the simulator's own expected TTFT and TPOT of a request on a server, given its state now.

A copy of the server's state (its waiting and running requests, the iteration in flight) runs forward with the
request enqueued now and no later arrival, until the request completes; its first token and completion give
TTFT and TPOT.  The copy's KV blocks are :class:`~optfleet.problems.placement.cache.FrozenCache`: reuse as the
server's cache has it now, held blocks without sharing.  So the forecast is the simulator's answer exactly when
no request arrives at this server before the forecast one completes and the cache's contents do not change the
queued requests' reuse meanwhile; otherwise it is the simulator's expectation from what is known now (the
predictor error the oracle leaves is that of not knowing the future, not of a learned model).

Three implementations of that one forward run, equal bit for bit (tests/test_placement_forecast.py checks it on
constructed, random and ShareGPT-like states):

* :func:`oracle_latency`, the reference: it copies the server (its :class:`~optfleet.problems.placement.server.Live`
  requests) and runs the simulator's own ``Server.step`` on the copy;
* :func:`forecast` over a :class:`Snapshot`, one server without copying it.  A snapshot is the server's
  state as plain integers (per running request: prompt, output, computed and decoded tokens, blocks its admission
  added ``total - hit``, chunk in flight; per waiting request: prompt, output, ``total - hit`` and reused tokens,
  its hit read from the real cache), taken once per server state (``Server.version``) and shared by every request
  forecast before the server changes.  The forward run applies the same rules (server.py, and FrozenCache's for
  held blocks) to those integers, in the same order of floating-point operations (``Engine.iteration_ms``, end
  times accumulated ``end + repeats * step``).  Once the forecast request is admitted, the waiting queue is empty
  and every running request decodes, the rest is decode-only stretches ended by completions: with the remaining tokens ``m_1 <= m_2 <= ...`` of the running
  requests (``n`` of them, ``H`` frozen held blocks), stretch ``j`` lasts ``(m_j - m_{j-1}) * iteration_ms(n_j, H_j,
  0)`` where ``n_j`` and ``H_j`` drop by the requests (and their ``total - hit`` blocks) completed at ``m_{j-1}``; the
  forecast request completes at the end of the stretch reaching its own remaining tokens.  That closed form is the
  reference's stretch loop with the per-request bookkeeping left out (same sums, same order);
* :class:`OracleBoard`, the one the oracle predictor uses: every server at once, numpy over the servers in the
  common case (nothing waiting, every running request decoding), :func:`forecast` on the others.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from optfleet.problems.placement.cache import FrozenCache
from optfleet.problems.placement.server import Engine, Live, Server, chunk_pairs

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


def _finish(decoding: list[list[int]], prefilling: list[list[int]], repeats: int) -> bool:
    """Server._finish_iteration on snapshot rows: the decoding rows decode ``repeats`` tokens, the prefilling ones
    compute their chunk (a completed prompt has its first token); whether some row completes."""
    finished = False
    for r in decoding:
        r[DECODED] += repeats
        finished = finished or r[DECODED] >= r[OUTPUT]
    for r in prefilling:
        r[COMPUTED] += r[CHUNK]
        r[CHUNK] = 0
        if r[COMPUTED] == r[PROMPT]:
            r[DECODED] = 1
            finished = finished or r[OUTPUT] == 1
    return finished


def _release(run: list[list[int]], held: int) -> tuple[list[list[int]], int]:
    """The rows still running and the frozen held blocks after the completed rows release theirs
    (FrozenCache.release: ``total - hit`` each, and nothing once nothing runs)."""
    for r in run:
        if r[DECODED] >= r[OUTPUT]:
            held -= r[ADDED]
    run = [r for r in run if r[DECODED] < r[OUTPUT]]
    return run, (held if run else 0)


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
        finished = _finish(decoding, prefilling, repeats)  # the iteration ending at `end`
        if mine is not None and math.isnan(first) and mine[COMPUTED] == mine[PROMPT]:
            first = end
        if finished:
            if mine is not None and mine[DECODED] >= mine[OUTPUT]:
                return first - t_ms, ((end - first) / (output - 1) if output > 1 else 0.0)
            run, held = _release(run, held)
        decoding = [r for r in run if r[COMPUTED] == r[PROMPT]]  # plan the next iteration at `end` (Server._plan)
        budget = max(0, e.prefill_budget_tokens - len(decoding))
        prefilling, tokens, pairs = [], 0, 0
        for r in run:
            if r[COMPUTED] < r[PROMPT] and budget > 0:
                r[CHUNK] = min(r[PROMPT] - r[COMPUTED], budget)
                budget -= r[CHUNK]
                tokens += r[CHUNK]
                pairs += chunk_pairs(r[CHUNK], r[COMPUTED])
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
            pairs += chunk_pairs(chunk, w_reused)
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
        end = end + repeats * e.iteration_ms(len(decoding), held, tokens, pairs)


_PAD = 1 << 40  # remaining tokens of an empty slot: past every goal


class OracleBoard:
    """The forecast for one request on every server at once: numpy over the servers in the common case, the
    snapshot's forward run (:func:`forecast`) elsewhere; the same numbers as :func:`forecast`, bit for bit.

    Per server, kept until its state changes (``Server.version``, as the cluster tracks it): its snapshot, and the
    decoding rows' remaining tokens sorted ascending with the blocks each frees, padded to ``W`` slots (:class:`_Rows`):
    for a decode-only stretch in flight the state now (an arrival in the stretch's last iteration takes the state at
    its end from them, :meth:`_Rows.after_stretch`), else the state at the end of the iteration in flight
    (completions released).  The parts of each slot's iteration time that do not depend on the request are
    integer or per-(server, n) tables, so the request's own terms are added in the same order as the forward run.
    The request (``u`` uncached prompt tokens, ``a = total - hit`` added blocks, ``o`` output tokens) arriving at
    ``t`` is admitted at the first planning point ``T``: ``t`` when idle, ``start + c * step`` when it cuts a
    stretch (``c = max(1, ceil((t - start) / step)) < repeats``, every remaining count less ``c``), else the end of
    the iteration in flight.  The common case: there nothing waits and every running request decodes (``n`` of them, ``H`` held blocks), and the
    request fits (``n < max_running_seqs``, ``budget > n``, ``H + a <= C``).  Then ``p`` prefill iterations compute
    its prompt, pass ``i`` a chunk ``min(u left, budget - n_i)`` in ``iteration_ms(n_i, H + a - (blocks of the
    decoders done), chunk, chunk_pairs(chunk, prompt - u left))``, ``n_i`` the decoders not done after ``i - 1``
    passes (each decodes one token a pass); its first token comes at the end of the last pass, and the decode-only
    stretches follow (module docstring) with
    the sorted remaining counts less ``p``, clipped to ``[0, o - 1]`` (the goal): with those ``c_j``, slot ``j``
    adds ``(c_j - c_{j-1}) * iteration_ms(1 + (n - j)^+, H + a - sum_{i<j} b_i, 0)``, a tie, a request done during
    the prefill or a slot past the goal adding exactly 0, summed left to right
    (``np.add.accumulate``, sequential) from the first token.  Anything else (a queue, a request still prefilling, no
    room) takes the forward run."""

    def __init__(self, servers: list[Server]) -> None:
        engines = [s.engine for s in servers]
        k = len(servers)
        self.servers = servers
        self.width = max(e.max_running_seqs for e in engines) + 1
        self.block_tokens = servers[0].cache.block_tokens
        column = (lambda name, dtype=float: np.array([getattr(e, name) for e in engines], dtype=dtype))
        self.base, self.per_seq, self.per_block = column("step_base_ms"), column("step_ms_per_seq"), column("step_ms_per_kv_block")
        self.per_token, self.per_pair = column("prefill_ms_per_token"), column("prefill_ms_per_pair")
        self.budget, self.seats, self.capacity = (column(name, np.int64) for name in ("prefill_budget_tokens", "max_running_seqs",
                                                                                     "kv_capacity_blocks"))
        self.snapshots: list[Snapshot | None] = [None] * k
        self.versions = np.full(k, -1, dtype=np.int64)  # the servers' versions the snapshots and rows are of
        self.idle = np.zeros(k, dtype=bool)
        self.stretch = np.zeros(k, dtype=bool)  # a decode-only stretch in flight, nothing waiting, everyone decoding
        self.simple_after = np.zeros(k, dtype=bool)  # nothing waits and everyone decodes after the iteration in flight
        self.end, self.start, self.step = np.zeros(k), np.zeros(k), np.ones(k)
        self.repeats = np.ones(k, dtype=np.int64)
        self.rows = _Rows(k, self.width)  # the decoders now (stretch) or after the iteration in flight (simple_after)
        seats = np.arange(self.width)
        # per server and decoder count n, per slot j: step_base_ms + step_ms_per_seq (1 + (n - j)^+)
        self.base_seq = np.array([[e.step_base_ms + e.step_ms_per_seq * (1 + np.maximum(0, n - seats)) for n in range(self.width)]
                                  for e in engines])
        self.every = np.arange(k)
        self.common_last = 0  # servers forecast in the common case at the last call (a measure for tests and benchmarks)

    def _refresh(self, k: int) -> None:
        """Server ``k`` changed: its snapshot and rows anew."""
        s = self.snapshots[k] = snapshot(self.servers[k])
        self.idle[k] = s.iteration_end_ms is None
        self.end[k] = s.iteration_end_ms if s.iteration_end_ms is not None else 0.0
        self.start[k], self.step[k], self.repeats[k] = s.start_ms, (s.step_ms if s.repeats > 1 else 1.0), s.repeats
        quiet = not s.waiting
        self.stretch[k] = quiet and s.iteration_end_ms is not None and s.repeats > 1 and len(s.decoding) == len(s.running)
        self.simple_after[k] = False
        if self.stretch[k]:
            self.rows.fill(k, s.running, s.held_blocks)
            return
        run, held = [list(r) for r in s.running], s.held_blocks
        if s.iteration_end_ms is not None and _finish([run[j] for j in s.decoding], [run[j] for j in s.prefilling], s.repeats):
            run, held = _release(run, held)
        self.simple_after[k] = quiet and all(r[COMPUTED] == r[PROMPT] for r in run)
        if self.simple_after[k]:
            self.rows.fill(k, run, held)

    def predict(self, t_ms: float, prompt: int, output: int, total_blocks: int, hit_blocks: np.ndarray,
                versions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(TTFT, TPOT) arrays (ms) of a request enqueued at ``t_ms`` on each server (advanced to ``t_ms``; their
        ``versions`` now), which reuses ``hit_blocks[k]`` blocks on server ``k``: :func:`forecast` on every server
        (class docstring)."""
        for k in np.flatnonzero(versions != self.versions).tolist():
            self._refresh(k)
        self.versions = versions.copy()
        uncached = prompt - hit_blocks * self.block_tokens
        added = total_blocks - hit_blocks
        cut = np.maximum(1.0, np.ceil((t_ms - self.start) / self.step))
        is_cut = self.stretch & (cut < self.repeats)
        last = self.stretch & ~is_cut
        rows = self.rows.after_stretch(last, self.repeats) if last.any() else self.rows
        n, held = rows.n, rows.held + added
        common = (self.stretch | self.simple_after) & (self.budget - n > 0) & (n < self.seats) & (held <= self.capacity)
        end = np.where(self.idle, t_ms, np.where(is_cut, self.start + cut * self.step, self.end))
        width = int(n.max()) + 1  # the slots in use, and one padded (the request's own last stretch)
        remaining = rows.remaining[:, :width] - np.where(is_cut, cut, 0).astype(np.int64)[:, None]
        # the first prefill pass: no decoder is done yet (every remaining count is >= 1)
        chunk = np.minimum(uncached, self.budget - n)
        reused = prompt - uncached
        first = end + (self.base + self.per_seq * n + self.per_block * held + self.per_token * chunk
                       + self.per_pair * chunk_pairs(chunk, reused))
        left = uncached - chunk
        passes = np.ones_like(n)
        more = np.flatnonzero(common & (left > 0))
        if more.size:
            first[more], passes[more] = self._later_passes(more, first[more], prompt, left[more], n[more], held[more],
                                                           remaining[more], rows.blocks[more, :width])
        capped = np.minimum(np.maximum(remaining - passes[:, None], 0), output - 1)
        sums = np.empty((len(n), width + 1))
        sums[:, 0] = first
        np.subtract(capped, np.concatenate((np.zeros((len(n), 1), dtype=np.int64), capped[:, :-1]), axis=1), out=capped)
        step_j = self.base_seq[self.every, n, :width] + self.per_block[:, None] * (rows.held_less[:, :width] + added[:, None])
        np.multiply(capped, step_j, out=sums[:, 1:])
        done = np.add.accumulate(sums, axis=1)[:, -1]
        ttft = first - t_ms
        tpot = (done - first) / (output - 1) if output > 1 else np.zeros_like(first)
        self.common_last = int(common.sum())
        for k in np.flatnonzero(~common).tolist():
            hit = int(hit_blocks[k])
            ttft[k], tpot[k] = forecast(self.snapshots[k], prompt, output, total_blocks - hit, hit * self.block_tokens, t_ms)
        return ttft, tpot

    def _later_passes(self, rows: np.ndarray, end: np.ndarray, prompt: int, left: np.ndarray, n: np.ndarray, held: np.ndarray,
                      remaining: np.ndarray, blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The prefill passes after the first on the servers ``rows`` whose prompt needs more than one (class
        docstring): each pass's decoders are those not done in the earlier passes, its chunk starts ``prompt - left``
        tokens in.  Returns the first token's time and the passes."""
        budget, base, per_seq, per_block, per_token, per_pair = (
            a[rows] for a in (self.budget, self.base, self.per_seq, self.per_block, self.per_token, self.per_pair))
        valid = np.arange(remaining.shape[1]) < n[:, None]
        passes, active = np.ones_like(n), np.ones(len(rows), dtype=bool)
        while active.any():
            gone = valid & (remaining <= passes[:, None])  # decoders done in the earlier passes
            n_now = n - gone.sum(axis=1)
            chunk = np.minimum(left, budget - n_now)
            step = (base + per_seq * n_now + per_block * (held - (blocks * gone).sum(axis=1)) + per_token * chunk
                    + per_pair * chunk_pairs(chunk, prompt - left))
            end = np.where(active, end + step, end)
            left = np.where(active, left - chunk, left)
            passes += active
            active &= left > 0
        return end, passes


class _Rows:
    """Per server, the requests decoding in one state (now, in a decode-only stretch; or after the iteration in
    flight): ``n`` of them, ``held`` blocks, their remaining tokens ascending and the blocks each frees (padded to
    the width), and per slot ``j`` the held blocks less those the earlier slots free, ``held_less = held -
    sum_{i<j} b_i`` (the request adds its ``a`` blocks)."""

    def __init__(self, k: int, width: int) -> None:
        self.n, self.held = np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)
        self.remaining, self.blocks = np.full((k, width), _PAD, dtype=np.int64), np.zeros((k, width), dtype=np.int64)
        self.held_less = np.zeros((k, width), dtype=np.int64)
        self.width = width

    def fill(self, k: int, run, held: int) -> None:
        """Row ``k`` from the running rows ``run`` (all decoding) and ``held`` blocks."""
        pairs = sorted((r[OUTPUT] - r[DECODED], r[ADDED]) for r in run)
        n = len(pairs)
        self.n[k], self.held[k] = n, held
        pad = self.width - n
        remaining, blocks = (list(x) for x in zip(*pairs, strict=True)) if pairs else ([], [])
        self.remaining[k] = remaining + [_PAD] * pad
        self.blocks[k] = blocks + [0] * pad
        less = [held]
        for b in blocks:
            less.append(less[-1] - b)
        self.held_less[k] = less + [less[-1]] * (pad - 1)

    def after_stretch(self, last: np.ndarray, repeats: np.ndarray) -> "_Rows":
        """These rows where a request arrives in a decode-only stretch's last iteration (``last``) replaced by the
        state at its end: every decoder has decoded ``repeats`` more tokens, those with ``repeats`` left (a prefix of
        the ascending rows) are done and release their blocks (nothing stays held once none runs, FrozenCache)."""
        out = _Rows.__new__(_Rows)
        out.width = self.width
        out.n, out.held = self.n.copy(), self.held.copy()
        out.remaining, out.blocks, out.held_less = self.remaining.copy(), self.blocks.copy(), self.held_less.copy()
        for k in np.flatnonzero(last).tolist():
            done = int(np.count_nonzero(self.remaining[k] == repeats[k]))
            keep = self.width - done  # the last slot is always padding, so the shifted rows end padded
            out.n[k] -= done
            out.remaining[k, :keep] = self.remaining[k, done:] - repeats[k]
            out.blocks[k, :keep], out.held_less[k, :keep] = self.blocks[k, done:], self.held_less[k, done:]
            out.remaining[k, keep:], out.blocks[k, keep:], out.held_less[k, keep:] = _PAD, 0, self.held_less[k, -1]
            out.held[k] = out.held_less[k, 0]
            if out.n[k] == 0:
                out.held[k] = 0
                out.held_less[k] = 0
        return out
