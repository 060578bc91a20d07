"""A model server's KV blocks and prefix cache: block-hash LRU over ``B``-token blocks, with reference counts.

Block ``k`` of a request (tokens ``[kB, (k+1)B)``) is named by its content's origin (workload.py): ``(group, k)``
while the block lies inside the group's shared system prompt (``(k+1)B <= shared_tokens``), else
``(session, k)``.  Two requests name a block alike exactly when its tokens and every token before it agree,
which is what the chained block hashes of vLLM's automatic prefix caching identify.

* **Memory.** ``C`` blocks per server.  A running request holds its blocks: the cached prefix it reuses (shared,
  reference counted) and ``ceil((prompt + output) / B) - hit`` new ones (reserved at admission for the whole
  output, so no request is ever preempted).  Blocks no running request holds stay cached (evictable, LRU) until
  an admission needs their room: ``held + cached <= C`` at all times.
* **Publication.** When its prefill completes, a request's full prompt blocks become shared (a later request can
  reuse them); when it completes, so do the full blocks of prompt + answer (the next turn's history).  A block
  another request published meanwhile is reused and the private copy freed.
* **Release.** A completing request releases its blocks deepest first, as vLLM's free-block queue does, so each
  origin's cached blocks stay a prefix ``[start, end)``: the reusable prefix of a request is found from two
  counters, not by scanning blocks.
* **Hit.** A request reuses the longest run of cached blocks from block 0, at most ``floor((prompt - 1) / B)``
  blocks (one prompt token is always computed, as in vLLM).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optfleet.problems.placement.server import Live


class BlockCache:
    """One server's KV blocks (module docstring)."""

    __slots__ = ("capacity_blocks", "block_tokens", "held_blocks", "_ref", "_lru", "_end")

    def __init__(self, capacity_blocks: int, block_tokens: int) -> None:
        self.capacity_blocks = capacity_blocks
        self.block_tokens = block_tokens
        self.held_blocks = 0  # blocks some running request holds (shared ones once, plus private ones)
        self._ref: dict[tuple, int] = {}  # shared block -> running requests holding it
        self._lru: OrderedDict[tuple, None] = OrderedDict()  # cached blocks nobody holds, least recently used first
        self._end: dict[tuple, int] = {}  # origin -> one past its last published block

    @property
    def cached_blocks(self) -> int:
        return len(self._lru)

    def _origins(self, r: "Live") -> tuple[tuple, tuple, int]:
        return ("g", r.group), ("s", r.session), (r.shared_tokens // self.block_tokens if r.group >= 0 else 0)

    def hit_blocks(self, r: "Live") -> int:
        """Blocks of the longest cached prefix request ``r`` reuses (module docstring)."""
        g, s, n_shared = self._origins(r)
        g_end = self._end.get(g, 0) if n_shared else 0
        hit = g_end if g_end < n_shared else self._end.get(s, n_shared)
        return min(hit, (r.prompt - 1) // self.block_tokens)

    @staticmethod
    def _key(k: int, g: tuple, s: tuple, n_shared: int) -> tuple:
        return (g, k) if k < n_shared else (s, k)

    def admission_blocks(self, r: "Live", hit: int) -> int:
        """Blocks admitting ``r`` adds to the held ones: its new ``total - hit`` and the reused blocks nobody holds."""
        g, s, n_shared = self._origins(r)
        idle = sum(1 for k in range(hit) if self._key(k, g, s, n_shared) in self._lru)
        return r.total_blocks - hit + idle

    def admit(self, r: "Live", hit: int) -> None:
        """Hold the ``hit`` reused blocks and ``total - hit`` private ones; evict LRU blocks to keep
        ``held + cached <= C``.  The caller checked the room (:meth:`admission_blocks`)."""
        g, s, n_shared = self._origins(r)
        for k in range(hit):
            self._hold(self._key(k, g, s, n_shared))
        self.held_blocks += r.total_blocks - hit
        self._evict()

    def publish(self, r: "Live", first: int, last: int) -> None:
        """Share blocks ``[first, last)`` of running request ``r`` (it holds ``[0, first)``), which were private: a
        block already published is reused and the private copy freed, else the private block becomes shared."""
        g, s, n_shared = self._origins(r)
        for k in range(first, last):
            key = self._key(k, g, s, n_shared)
            if key in self._ref or key in self._lru:
                self._hold(key)
                self.held_blocks -= 1  # the private copy
            else:
                self._ref[key] = 1
                self._end[key[0]] = k + 1

    def release(self, r: "Live") -> None:
        """Completing request ``r`` lets go of its shared blocks ``[0, r.shared_upto)``, deepest first, and frees its
        private ones."""
        g, s, n_shared = self._origins(r)
        for k in range(r.shared_upto - 1, -1, -1):
            key = self._key(k, g, s, n_shared)
            count = self._ref[key] - 1
            if count:
                self._ref[key] = count
            else:
                del self._ref[key]
                self._lru[key] = None
                self.held_blocks -= 1
        self.held_blocks -= r.total_blocks - r.shared_upto

    def _hold(self, key: tuple) -> None:
        count = self._ref.get(key, 0)
        if count == 0:
            self._lru.pop(key)
            self.held_blocks += 1
        self._ref[key] = count + 1

    def _evict(self) -> None:
        while self.held_blocks + len(self._lru) > self.capacity_blocks:
            origin, k = self._lru.popitem(last=False)[0]
            self._end[origin] = k  # deepest first: the origin's cached prefix now ends before k


class FrozenCache:
    """The forecast's view of a server's blocks (forecast.py): hits as the real cache has them now (it is read,
    never changed), and held blocks counted without sharing: an admission holds ``total - hit`` more, a completion
    frees what its request added, and when the last running request completes nothing is held (as in the real
    cache: reused blocks nobody holds are cached, not held).  Optimistic about room (reused blocks are taken as held
    already); without that last rule, the reused blocks of requests gone would stay held for ever and could keep the
    forecast request out of an empty server."""

    __slots__ = ("real", "capacity_blocks", "block_tokens", "held_blocks", "holders")

    def __init__(self, real: BlockCache, holders: int) -> None:
        self.real = real
        self.capacity_blocks = real.capacity_blocks
        self.block_tokens = real.block_tokens
        self.held_blocks = real.held_blocks
        self.holders = holders  # running requests

    def hit_blocks(self, r: "Live") -> int:
        return self.real.hit_blocks(r)

    def admission_blocks(self, r: "Live", hit: int) -> int:
        return r.total_blocks - hit

    def admit(self, r: "Live", hit: int) -> None:
        self.held_blocks += r.total_blocks - hit
        self.holders += 1

    def publish(self, r: "Live", first: int, last: int) -> None:
        """Nothing is published in a forecast (its hits are the real cache's)."""

    def release(self, r: "Live") -> None:
        self.holders -= 1
        self.held_blocks = self.held_blocks - (r.total_blocks - r.hit) if self.holders else 0
