"""Replay a block trace through a prefix-tree (radix) KV cache of ``capacity_blocks`` blocks under a policy.

Semantics (the same for every policy, and the constraints of the hindsight
model, optfleet.problems.prefix_cache.hindsight):

* requests are served one at a time in trace order: each at its arrival
  (instantaneous service), or, with the ``fcfs_server`` setting of the
  evaluator, when the cache's one FCFS prefill server takes it up (its wait
  and prefill times: optfleet.problems.prefix_cache.evaluate).  Either way no
  two prefills overlap, and no request changes the cache while it waits;
* request ``r``'s hit is the longest prefix ``b_1 .. b_h`` of its path whose
  blocks are all resident when it arrives: a block is reused only while every
  ancestor is resident;
* its path is then inserted, shallowest block first; while the cache is full
  the policy evicts a candidate: a resident block that is not on ``r``'s path,
  and under the ``leaves``
  setting has no resident child (SGLang and vLLM), under ``any`` any
  block; when every resident block is pinned the rest of the path is not
  cached (a path longer than the capacity keeps its first blocks);
* the policy then re-keys every resident block of the path.

Pinning.  The blocks of the running request (its hit and the suffix it
computes) are pinned from the start of its prefill to its end, as vLLM and
SGLang lock a request's blocks when they schedule it, not when it arrives: a
waiting request holds nothing, and its hit is the one found at its start.
With one server the only evictions during ``r``'s prefill are those its own
insertion makes, so ``r``'s path is exactly the pinned set at every eviction
(``record_states`` logs the evictions; tests/test_prefix_cache.py checks that
none takes a pinned block).  A request that cannot fit because every resident
block is pinned (its path is longer than the capacity) is still served: its
first blocks are cached and the rest of its suffix is computed without being
cached (its hit and TTFT are unchanged by that).

The result is the schedule as the evaluator reads it: ``kept[o]`` says whether
occurrence ``o``'s block was still resident at its next occurrence (so it was
resident through the whole gap: blocks enter only when a request computes
them).  It does not depend on arrival times or prefill durations: with zero
waits (or without the server) the TTFTs are those of instantaneous service.
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.prefix_cache.policies import RadixContext, RadixPolicy
from optfleet.problems.prefix_cache.trace import BlockTrace

EVICTION_SETTINGS = ("leaves", "any")


@dataclass(frozen=True)
class RadixReplay:
    """A replay's schedule (``kept`` per occurrence), wall time and description and, when recorded, the resident set
    after each request and every eviction as ``(request being served, block evicted)``."""

    kept: NDArray[np.bool_]
    seconds: float
    description: str
    states: tuple[frozenset[int], ...] = ()
    evictions: tuple[tuple[int, int], ...] = ()


def replay(trace: BlockTrace, policy: RadixPolicy, capacity_blocks: int, eviction: str = "leaves", ttft: TtftModel | None = None,
           xi_ms: float = 0.0, record_states: bool = False) -> RadixReplay:
    """Replay ``trace`` under ``policy`` (module docstring); ``record_states`` keeps the resident set after each request
    and the evictions."""
    if eviction not in EVICTION_SETTINGS:
        raise InputError("eviction", eviction, f"one of {', '.join(EVICTION_SETTINGS)}")
    if capacity_blocks < 0:
        raise InputError("capacity_blocks", capacity_blocks, "must be >= 0")
    start = time.perf_counter()
    policy.bind(RadixContext(trace, capacity_blocks, eviction, ttft or TtftModel(1.0), xi_ms))
    cache = _RadixCache(trace, policy, capacity_blocks, leaves_only=eviction == "leaves", log_evictions=record_states)
    kept = np.zeros(len(trace.occ_block), dtype=bool)
    states = []
    stamp = 0
    for r in range(len(trace)):
        first, end = int(trace.path_start[r]), int(trace.path_start[r + 1])
        path = trace.occ_block[first:end].tolist()
        for o, b in zip(range(first, end), path, strict=True):
            if cache.resident[b]:
                kept[trace.occ_prev[o]] = True
        cache.serving = r
        cache.insert(path)
        for o in range(end - 1, first - 1, -1):
            stamp += 1
            cache.touch(path[o - first], o, stamp)
        cache.release(path)
        if record_states:
            states.append(frozenset(np.flatnonzero(cache.resident).tolist()))
    return RadixReplay(kept, time.perf_counter() - start, f"{policy.describe()}, {eviction} eviction", tuple(states), tuple(cache.evictions))


class _RadixCache:
    """Resident blocks, resident-children counts and a lazy heap of (key, version, block)."""

    def __init__(self, trace: BlockTrace, policy: RadixPolicy, capacity_blocks: int, leaves_only: bool, log_evictions: bool = False) -> None:
        self.parent = trace.block_parent.tolist()
        self.policy, self.capacity, self.leaves_only = policy, capacity_blocks, leaves_only
        n = trace.n_blocks
        self.resident = np.zeros(n, dtype=bool)
        self.children = [0] * n
        self.version = [0] * n
        self.key: list[tuple] = [()] * n
        self.pinned = np.zeros(n, dtype=bool)
        self.heap: list[tuple] = []
        self.deferred: list[tuple] = []
        self.count = 0
        self.serving = -1
        self.log_evictions = log_evictions
        self.evictions: list[tuple[int, int]] = []

    def insert(self, path: list[int]) -> None:
        self.pinned[path] = True
        for b in path:
            if self.resident[b]:
                continue
            if self.count >= self.capacity and not self._evict():
                return
            self.resident[b] = True
            self.count += 1
            if self.parent[b] >= 0:
                self.children[self.parent[b]] += 1

    def touch(self, block: int, occurrence: int, stamp: int) -> None:
        key = self.policy.key(block, occurrence, stamp)
        if self.resident[block]:
            self.version[block] += 1
            self.key[block] = key
            heapq.heappush(self.heap, (key, self.version[block], block))

    def release(self, path: list[int]) -> None:
        self.pinned[path] = False
        for entry in self.deferred:
            heapq.heappush(self.heap, entry)
        self.deferred.clear()

    def _evict(self) -> bool:
        """Evict the candidate with the smallest key (and its node for a node-evicting policy); False if none."""
        while self.heap:
            entry = heapq.heappop(self.heap)
            _, version, b = entry
            if not self.resident[b] or version != self.version[b]:
                continue
            if self.pinned[b]:
                self.deferred.append(entry)
                continue
            if self.leaves_only and self.children[b] > 0:
                continue  # pushed again when its last resident child leaves
            self._remove(b)
            p = self.parent[b]
            while self.policy.evicts_node and p >= 0 and self.resident[p] and self.children[p] == 0 and not self.pinned[p]:
                self._remove(p)
                p = self.parent[p]
            return True
        return False

    def _remove(self, b: int) -> None:
        if self.log_evictions:
            self.evictions.append((self.serving, b))
        self.resident[b] = False
        self.count -= 1
        p = self.parent[b]
        if p >= 0:
            self.children[p] -= 1
            if self.leaves_only and self.children[p] == 0 and self.resident[p]:
                heapq.heappush(self.heap, (self.key[p], self.version[p], p))
