"""The oracle predictor: the simulator's own expected TTFT and TPOT of a request on a server, given its state now.

A copy of the server's state (its waiting and running requests, the iteration in flight) runs forward with the
request enqueued now and no later arrival, until the request completes; its first token and completion give
TTFT and TPOT.  The copy's KV blocks are :class:`~optfleet.problems.placement.cache.FrozenCache`: reuse as the
server's cache has it now, held blocks without sharing.  So the forecast is the simulator's answer exactly when
no request arrives at this server before the forecast one completes and the cache's contents do not change the
queued requests' reuse meanwhile; otherwise it is the simulator's expectation from what is known now (the
predictor error the oracle leaves is that of not knowing the future, not of a learned model).
"""

from __future__ import annotations

import copy
import math

from optfleet.problems.placement.cache import FrozenCache
from optfleet.problems.placement.server import Live, Server


def _copy_state(server: Server) -> Server:
    clone = Server(server.engine, FrozenCache(server.cache))
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
