"""Stage 3 of a disaggregated pool (roles.py): continuous batching on each decode instance.

Every transferred request joins the decode instance drawn for it (uniformly at random, by the caller).  The instances
never interact, so each is simulated alone over its own arrivals (their transfer ends, sorted):

* an instance runs at most ``max_batch`` sequences; a request that finds it full waits in its FCFS queue;
* waiting requests are admitted at iteration boundaries (a request arriving mid-iteration joins the next one); an
  idle instance starts an iteration when a request arrives (every request arriving at that instant joins it);
* an iteration with ``b`` running sequences whose contexts total ``k`` tokens takes ``step_ms(0, b, k)`` and gives
  each of them one token; a request's context is ``L_in`` in its first iteration and grows by one per iteration; it
  leaves after ``L_out`` iterations, its first token at the end of the first.

Between two changes of the running set (an admission or a completion) the iterations change only linearly: with
``n`` the instance's iteration counter and ``K`` the sum of ``L_in - n_join`` over the running requests, the context
is ``k(n) = K + b n``, so under the affine step ``t = base + per_seq b + per_kv_token k`` (optfleet/engine/step.py)
iteration ``j`` of a run lasts ``a + s j`` with ``a = t(0, b, k(n))`` and ``s = per_kv_token b``; ``r`` of them last
``r a + s r (r - 1) / 2`` (fleet/simulate/batching.py: ``run_seconds``, ``iterations_done``).  Each run ends at the
next completion (the smallest ``n_join + L_out`` of the running requests, kept in a heap) or at the end of the
iteration in progress when a request arrives at a non-full instance.  The work is a few heap operations per request,
none per token or per running sequence.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.engine.step import AffineStep
from optfleet.errors import InputError
from optfleet.problems.fleet.simulate.batching import iterations_done, run_seconds
from optfleet.problems.pd_fleet.roles import DecodeRole


@dataclass(frozen=True)
class DecodeTimes:
    """Per request (the order given): admission, first token and last token (s); per run of iterations (every
    instance's, in no particular order): its start and end (s) and its running sequences; and the tokens emitted."""

    admit_s: NDArray[np.float64]
    first_token_s: NDArray[np.float64]
    finish_s: NDArray[np.float64]
    run_start_s: NDArray[np.float64]
    run_end_s: NDArray[np.float64]
    run_batch: NDArray[np.int64]
    tokens: int


def decode_step(role: DecodeRole) -> AffineStep:
    """The decode engine as the affine step the runs need; any other engine is refused naming ``decode.step``."""
    if not isinstance(role.step, AffineStep):
        raise InputError("decode.step", role.step.source, "the simulator times decode runs in closed form and needs an affine "
                         "step: reduce the engine first (optfleet.engine.affine_reduction over the decode region)")
    return role.step


def simulate_decode(role: DecodeRole, arrival_s: NDArray[np.float64], l_in: NDArray[np.int64], l_out: NDArray[np.int64],
                    instance: NDArray[np.int64]) -> DecodeTimes:
    """Serve each request (decode arrival ``arrival_s``, lengths, its decode ``instance``) on its instance."""
    step = decode_step(role)
    count = len(arrival_s)
    admit, first, finish = np.full(count, np.nan), np.full(count, np.nan), np.full(count, np.nan)
    order = np.lexsort((arrival_s, instance))  # by instance, then by arrival (stable: ties keep the request order)
    bounds = np.searchsorted(instance[order], np.arange(role.instances + 1))
    runs: tuple[list[float], list[float], list[int]] = ([], [], [])
    tokens = 0
    for g in np.flatnonzero(np.diff(bounds)).tolist():  # the instances that received requests
        mine = order[bounds[g]:bounds[g + 1]]
        tokens += _one_instance(step, role.max_batch, mine, arrival_s, l_in, l_out, (admit, first, finish), runs)
    return DecodeTimes(admit, first, finish, np.array(runs[0]), np.array(runs[1]), np.array(runs[2], dtype=np.int64), tokens)


def _one_instance(step: AffineStep, max_batch: int, mine: NDArray[np.int64], arrival_s: NDArray[np.float64],
                  l_in: NDArray[np.int64], l_out: NDArray[np.int64],
                  times: tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]],
                  runs: tuple[list[float], list[float], list[int]]) -> int:
    """One instance's runs (module docstring) over its requests ``mine`` (sorted by arrival); fills ``times`` (admit,
    first token, finish) and appends to ``runs`` (start, end, batch); returns the tokens it emitted."""
    admit, first, finish = times
    run_start, run_end, run_batch = runs
    base_s, per_seq_s, per_kv_s = step.base_ms / 1e3, step.per_seq_ms / 1e3, step.per_kv_token_ms / 1e3
    arrive, prompt, steps = arrival_s[mine].tolist(), l_in[mine].tolist(), l_out[mine].tolist()
    ids = mine.tolist()
    count = len(ids)
    now, n, b, context_offset, tokens, nxt = 0.0, 0, 0, 0, 0, 0
    running: list[tuple[int, int]] = []  # (iteration counter at which the request completes, its position)
    waiting: deque[int] = deque()
    while True:
        while nxt < count and arrive[nxt] <= now:
            waiting.append(nxt)
            nxt += 1
        joined = []
        while waiting and b < max_batch:
            p = waiting.popleft()
            heapq.heappush(running, (n + steps[p], p))
            context_offset += prompt[p] - n
            b += 1
            joined.append(p)
            admit[ids[p]] = now
        if b == 0:
            if nxt == count:
                return tokens
            now = arrive[nxt]
            continue
        a = base_s + per_seq_s * b + per_kv_s * (context_offset + b * n)
        s = per_kv_s * b
        r = running[0][0] - n
        end = now + run_seconds(a, s, r)
        if b < max_batch and nxt < count and arrive[nxt] < end:
            elapsed = arrive[nxt] - now
            done = iterations_done(a, s, elapsed)
            if done > 0 and run_seconds(a, s, done) == elapsed:
                r, end = done, arrive[nxt]  # it arrives at a boundary: it joins the iteration that starts then
            else:
                r, end = done + 1, now + run_seconds(a, s, done + 1)
        for p in joined:
            first[ids[p]] = now + a
        run_start.append(now)
        run_end.append(end)
        run_batch.append(b)
        tokens += b * r
        now, n = end, n + r
        while running and running[0][0] == n:
            p = heapq.heappop(running)[1]
            finish[ids[p]] = now
            context_offset -= prompt[p] - (n - steps[p])
            b -= 1
