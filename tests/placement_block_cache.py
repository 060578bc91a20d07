"""The per-block reference of the placement simulator's prefix cache (optfleet/problems/placement/cache.py).

The simulator's cache keeps each origin's blocks as ranges; this one keeps every block in dicts, the way the
rules in cache.py's docstring read block by block.  tests/test_placement_cache.py runs the simulator with both
and asserts identical timelines and block counts."""

from __future__ import annotations

from collections import OrderedDict


class PerBlockCache:
    """The block cache kept block by block (a dict of reference counts and an LRU of single blocks): the
    reference optfleet.problems.placement.cache.BlockCache's ranges are checked against."""

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

    def _origins(self, r: object) -> tuple[tuple, tuple, int]:
        return ("g", r.group), ("s", r.session), (r.shared_tokens // self.block_tokens if r.group >= 0 else 0)

    def hit_blocks(self, r: object) -> int:
        """Blocks of the longest cached prefix request ``r`` reuses (cache.py)."""
        g, s, n_shared = self._origins(r)
        g_end = self._end.get(g, 0) if n_shared else 0
        hit = g_end if g_end < n_shared else self._end.get(s, n_shared)
        return min(hit, (r.prompt - 1) // self.block_tokens)

    @staticmethod
    def _key(k: int, g: tuple, s: tuple, n_shared: int) -> tuple:
        return (g, k) if k < n_shared else (s, k)

    def admission_blocks(self, r: object, hit: int) -> int:
        """Blocks admitting ``r`` adds to the held ones: its new ``total - hit`` and the reused blocks nobody holds."""
        g, s, n_shared = self._origins(r)
        idle = sum(1 for k in range(hit) if self._key(k, g, s, n_shared) in self._lru)
        return r.total_blocks - hit + idle

    def admit(self, r: object, hit: int) -> None:
        """Hold the ``hit`` reused blocks and ``total - hit`` private ones; evict LRU blocks to keep
        ``held + cached <= C``.  The caller checked the room (:meth:`admission_blocks`)."""
        g, s, n_shared = self._origins(r)
        for k in range(hit):
            self._hold(self._key(k, g, s, n_shared))
        self.held_blocks += r.total_blocks - hit
        self._evict()

    def publish(self, r: object, first: int, last: int) -> None:
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

    def release(self, r: object) -> None:
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
