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
* **Ranges.**  A running request holds a prefix of each origin's blocks (the group's ``[0, u)``, its session's
  ``[n_shared, u)``), so an origin's held blocks are ``[start, top)`` (``top`` the deepest holder's end) and its
  cached ones ``[top, end)``.  Those enter the LRU a release at a time, deepest first, so the cached range is a
  stack of segments, older ones deeper: eviction trims the oldest segment from its deep end, a new holder takes
  blocks from the newest one's shallow end.  Every operation is a few integer updates per origin, not one per
  block (tests/placement_block_cache.py keeps the block-by-block reference it is checked against).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from optfleet.problems.placement.server import Live


class _Origin:
    """One origin's blocks on a server: present ``[start, end)``, held ``[start, top)``, cached ``[top, end)`` as
    segments (oldest first in ``segments``), and its holders' ends (end -> running requests holding up to it)."""

    __slots__ = ("name", "start", "end", "top", "holders", "segments")

    def __init__(self, name: tuple, start: int) -> None:
        self.name = name
        self.start = self.end = self.top = start
        self.holders: dict[int, int] = {}
        self.segments: list[list] = []  # [lo, hi, origin] cached ranges, oldest (deepest) first


class BlockCache:
    """One server's KV blocks (module docstring): per origin the ranges of :class:`_Origin`, and one LRU of cached
    segments ``[lo, hi, origin]`` over the origins, least recently used first (emptied ones are skipped)."""

    __slots__ = ("capacity_blocks", "block_tokens", "held_blocks", "cached_blocks", "_origins", "_lru", "_empty")

    def __init__(self, capacity_blocks: int, block_tokens: int) -> None:
        self.capacity_blocks = capacity_blocks
        self.block_tokens = block_tokens
        self.held_blocks = 0  # blocks some running request holds (shared ones once, plus private ones)
        self.cached_blocks = 0  # blocks nobody holds, kept for reuse
        self._origins: dict[tuple, _Origin] = {}
        self._lru: deque[list] = deque()
        self._empty = 0  # emptied segments still in the LRU

    def _parts(self, r: "Live") -> tuple[tuple, tuple, int]:
        """The group's and the session's origin names and the blocks of the shared system prompt."""
        return ("g", r.group), ("s", r.session), (r.shared_tokens // self.block_tokens if r.group >= 0 else 0)

    def _origin(self, name: tuple, start: int) -> _Origin:
        o = self._origins.get(name)
        if o is None:
            o = self._origins[name] = _Origin(name, start)
        return o

    def end_of(self, name: tuple, default: int) -> int:
        """One past the last cached block of origin ``name`` (``default`` when it has none)."""
        o = self._origins.get(name)
        return default if o is None or o.end == o.start else o.end

    def hit_blocks(self, r: "Live") -> int:
        """Blocks of the longest cached prefix request ``r`` reuses (module docstring)."""
        g, s, n_shared = self._parts(r)
        g_end = self.end_of(g, 0) if n_shared else 0
        hit = g_end if g_end < n_shared else self.end_of(s, n_shared)
        return min(hit, (r.prompt - 1) // self.block_tokens)

    def _spans(self, r: "Live", lo: int, hi: int):
        """Blocks ``[lo, hi)`` of ``r`` cut by origin: (origin name, its start, lo, hi) for each non-empty part, the
        group's first."""
        g, s, n_shared = self._parts(r)
        if lo < min(hi, n_shared):
            yield g, 0, lo, min(hi, n_shared)
        if hi > max(lo, n_shared):
            yield s, n_shared, max(lo, n_shared), hi

    def admission_blocks(self, r: "Live", hit: int) -> int:
        """Blocks admitting ``r`` adds to the held ones: its new ``total - hit`` and the reused blocks nobody holds."""
        idle = 0
        for name, start, lo, hi in self._spans(r, 0, hit):
            o = self._origins.get(name)
            idle += max(0, hi - max(lo, o.top if o is not None else start))
        return r.total_blocks - hit + idle

    def admit(self, r: "Live", hit: int) -> None:
        """Hold the ``hit`` reused blocks and ``total - hit`` private ones; evict LRU blocks to keep
        ``held + cached <= C``.  The caller checked the room (:meth:`admission_blocks`)."""
        for name, start, lo, hi in self._spans(r, 0, hit):
            self._hold(self._origin(name, start), lo, hi)
        self.held_blocks += r.total_blocks - hit
        self._evict()

    def publish(self, r: "Live", first: int, last: int) -> None:
        """Share blocks ``[first, last)`` of running request ``r`` (it holds ``[0, first)``), which were private: a
        block already published is reused and the private copy freed, else the private block becomes shared."""
        for name, start, lo, hi in self._spans(r, first, last):
            o = self._origin(name, start)
            reused = min(hi, o.end) - lo
            self._hold(o, lo, hi)
            self.held_blocks -= max(0, reused)  # the private copies
            o.end = max(o.end, hi)

    def _hold(self, o: _Origin, lo: int, hi: int) -> None:
        """A running request that held ``[start, lo)`` of origin ``o`` now holds ``[start, hi)``: the cached blocks
        among them, the newest segments' shallow ends, become held."""
        if lo > o.start:
            self._drop_holder(o, lo)
        o.holders[hi] = o.holders.get(hi, 0) + 1
        take = max(0, min(hi, o.end) - o.top)
        o.top = max(o.top, hi)
        self.held_blocks += take
        self.cached_blocks -= take
        while take:
            seg = o.segments[-1]
            step = min(take, seg[1] - seg[0])
            seg[0] += step
            take -= step
            if seg[0] == seg[1]:
                o.segments.pop()
                self._empty += 1

    @staticmethod
    def _drop_holder(o: _Origin, upto: int) -> None:
        count = o.holders[upto] - 1
        if count:
            o.holders[upto] = count
        else:
            del o.holders[upto]

    def release(self, r: "Live") -> None:
        """Completing request ``r`` lets go of its shared blocks ``[0, r.shared_upto)``, deepest first (its session's,
        then its group's), and frees its private ones."""
        for name, start, lo, hi in reversed(list(self._spans(r, 0, r.shared_upto))):
            o = self._origins[name]
            self._drop_holder(o, hi)
            top = max(o.holders) if o.holders else o.start
            if top < o.top:
                seg = [top, o.top, o]
                o.segments.append(seg)
                self._lru.append(seg)
                freed = o.top - top
                self.held_blocks -= freed
                self.cached_blocks += freed
                o.top = top
        self.held_blocks -= r.total_blocks - r.shared_upto

    def _evict(self) -> None:
        """Evict the least recently used blocks, deepest first, while ``held + cached > C``."""
        excess = self.held_blocks + self.cached_blocks - self.capacity_blocks
        while excess > 0:
            seg = self._lru[0]
            lo, hi, o = seg
            step = min(excess, hi - lo)
            if step:
                seg[1] = o.end = hi - step
                self.cached_blocks -= step
                excess -= step
            if seg[0] == seg[1]:
                self._lru.popleft()
                if step:
                    o.segments.pop(0)
                    if o.end == o.start:  # nothing left of it (so nothing held): forget it
                        del self._origins[o.name]
                else:
                    self._empty -= 1
        if self._empty > 64 and 2 * self._empty > len(self._lru):
            self._lru = deque(seg for seg in self._lru if seg[0] < seg[1])
            self._empty = 0


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
