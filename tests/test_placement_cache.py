"""The placement simulator's range-based prefix cache (optfleet/problems/placement/cache.py) against the per-block
reference (placement_block_cache.py): on random workloads with shared system prompts, multi-turn sessions and KV
pressure (eviction, waiting), every request's reuse, first token and completion agree exactly, and so do the held
and cached block counts after every arrival; and the ranges keep their invariants."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from placement_block_cache import PerBlockCache
from test_placement import instance, with_requests

from optfleet.problems.placement.cache import BlockCache
from optfleet.problems.placement.evaluate import live_request, timeline_of
from optfleet.problems.placement.server import Server


def _workload(seed: int, n: int, servers: int, kv: int):
    """``n`` requests of up to 3 groups (system prompts of 0, 40 or 70 tokens: 0, 2 or 4 whole blocks of 16) and
    up to 6 sessions each, prompts of 20-200 tokens, answers of 1-40, on ``servers`` servers of ``kv`` blocks (at
    least one request's worth)."""
    rng = np.random.default_rng(seed)
    shared = (0, 40, 70)
    groups = rng.integers(-1, 3, n)
    rows = []
    for t, g, s, p, o in zip(np.sort(rng.uniform(0, 400, n)), groups, rng.integers(0, 6, n), rng.integers(20, 200, n),
                             rng.integers(1, 40, n), strict=True):
        sys_tokens = shared[g] if g >= 0 else 0
        rows.append((float(t), int(max(p, sys_tokens + 1)), int(o), sys_tokens, int(g), 10 * int(g) + int(s)))
    problem = with_requests(instance(servers=servers, seqs=4, budget=64), rows)
    kv = max(kv, int(problem.total_blocks.max()))
    return replace(problem, engines=tuple(replace(e, kv_capacity_blocks=kv) for e in problem.engines))


def _run(problem, placement: np.ndarray, make_cache) -> tuple[object, list[tuple[int, int]]]:
    servers = [Server(e, make_cache(e.kv_capacity_blocks, problem.block_tokens)) for e in problem.engines]
    counts = []
    for i in range(len(problem.requests)):
        r = live_request(problem, i)
        server = servers[placement[i]]
        server.advance(r.arrival_ms)
        server.enqueue(r, r.arrival_ms)
        server.step()  # plan the arrival's iteration: admission and eviction happen now
        counts.extend((s.cache.held_blocks, s.cache.cached_blocks) for s in servers)
    return timeline_of(problem, servers, placement), counts


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(1, 40), servers=st.integers(1, 2), kv=st.integers(8, 60))
def test_the_range_cache_replays_exactly_as_the_per_block_reference(seed, n, servers, kv):
    problem = _workload(seed, n, servers, kv)
    placement = np.random.default_rng(seed + 1).integers(0, servers, n)
    ranges, range_counts = _run(problem, placement, BlockCache)
    blocks, block_counts = _run(problem, placement, PerBlockCache)
    assert ranges.hit_tokens.tolist() == blocks.hit_tokens.tolist()
    assert ranges.first_token_ms.tolist() == blocks.first_token_ms.tolist()
    assert ranges.done_ms.tolist() == blocks.done_ms.tolist()
    assert range_counts == block_counts


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(1, 30), kv=st.integers(8, 40))
def test_the_ranges_keep_their_invariants(seed, n, kv):
    """After every arrival: held + cached <= C; per origin ``start <= top <= end``, its cached segments chain from
    ``top`` to ``end``; the cached count is their sum; the held count is the origins' held ranges plus the running
    requests' private blocks."""
    problem = _workload(seed, n, 1, kv)
    server = Server(problem.engines[0], BlockCache(problem.engines[0].kv_capacity_blocks, problem.block_tokens))
    for i in range(n):
        r = live_request(problem, i)
        server.advance(r.arrival_ms)
        server.enqueue(r, r.arrival_ms)
        server.step()
        cache = server.cache
        assert cache.held_blocks + cache.cached_blocks <= cache.capacity_blocks
        cached = 0
        for o in cache._origins.values():
            assert o.start <= o.top <= o.end
            assert o.top == max(o.holders, default=o.start)
            edge = o.top
            for lo, hi, _ in reversed(o.segments):
                assert lo == edge and hi > lo
                edge = hi
            assert edge == o.end
            cached += o.end - o.top
        assert cache.cached_blocks == cached
        held = sum(o.top - o.start for o in cache._origins.values())
        assert cache.held_blocks == held + sum(q.total_blocks - q.shared_upto for q in server.running)
