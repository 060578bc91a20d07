"""One pass, every capacity: the LRU hit curve of a prefix-tree cache from stack distances (Mattson et al., 1970).

Claim.  Let the priority of a block be its latest touch stamp
(optfleet.problems.prefix_cache.policies: a request stamps its path deepest
block first, so a parent always outranks its children).  For every capacity
``C``, replaying ``lru`` (vLLM's LRU, under either eviction setting) leaves
the cache holding exactly the ``C`` seen blocks of highest priority.

Proof by induction over requests.  Before the first request both sides are
empty.  Let the claim hold after request ``r - 1`` and let request ``r`` have
path ``P`` (``n`` blocks).  Serving ``r`` (optfleet.problems.prefix_cache.replay)
inserts the missing path blocks, each time evicting the non-path block of
smallest stamp.  That block is a leaf: a parent's stamp exceeds its child's,
so a block with a resident child is never the minimum, and a non-path block
never has a child on ``P`` (``P`` holds every ancestor of its blocks); so the
leaves setting changes nothing.  When ``n <= C`` the result is ``P`` plus
the ``C - n`` non-path blocks of highest priority that were resident, which by
the induction hypothesis are the ``C - n`` non-path blocks of highest priority
among all seen blocks; when ``n > C`` it is ``b_1 .. b_C``.  Re-stamping
``P`` gives its blocks the ``n`` highest priorities, ``b_1`` first.  In both
cases the cache is the top ``C`` by priority.  QED.

So a block touched at request ``r`` is a hit at capacity ``C`` iff its *stack
distance* (its rank by priority among seen blocks when ``r`` arrives) is at
most ``C``; ranks grow along a path (parents outrank children), so the hits
form a prefix, as the tree semantics require.  One pass computing every
touched block's rank (a Fenwick tree over stamps, ``O(occurrences log)``)
gives the hits at every capacity at once.  The inclusion property is what
makes this work, and it holds for ``lru`` only: not for ``leaf-lru`` (a node
may free more than one block, so contents depend on ``C`` through node
boundaries), ``lfu`` or ``t-lru`` (admission tiers), whose curves take a
replay per capacity.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.prefix_cache.trace import BlockTrace

UNSEEN = np.iinfo(np.int64).max


@dataclass(frozen=True)
class StackDistances:
    """``rank[o]``: occurrence ``o``'s block's stack distance when its request arrives (:data:`UNSEEN` on a first use)."""

    trace: BlockTrace
    rank: NDArray[np.int64]

    def kept(self, capacity_blocks: int) -> NDArray[np.bool_]:
        """LRU's schedule at ``capacity_blocks``: a previous occurrence is kept iff the block's rank is within capacity."""
        kept = np.zeros(len(self.rank), dtype=bool)
        hit = self.rank <= capacity_blocks
        kept[self.trace.occ_prev[hit]] = True
        return kept

    def hit_tokens(self, capacities_blocks: list[int] | NDArray[np.int64]) -> NDArray[np.int64]:
        """Total hit tokens at each capacity: the tokens of occurrences whose rank is within it."""
        seen = self.rank != UNSEEN
        order = np.argsort(self.rank[seen], kind="stable")
        ranks, tokens = self.rank[seen][order], np.cumsum(self.trace.occ_tokens[seen][order])
        upto = np.searchsorted(ranks, np.asarray(capacities_blocks), side="right")
        return np.where(upto > 0, tokens[np.maximum(upto - 1, 0)], 0).astype(np.int64) if len(ranks) else np.zeros(len(upto), np.int64)


def stack_distances(trace: BlockTrace) -> StackDistances:
    """Every occurrence's stack distance in one pass (module docstring)."""
    n = len(trace.occ_block)
    tree = np.zeros(n + 1, dtype=np.int64).tolist()  # Fenwick tree over stamps 1..n: 1 where a block holds that stamp

    def add(i: int, v: int) -> None:
        while i <= n:
            tree[i] += v
            i += i & -i

    def below(i: int) -> int:  # blocks with a stamp <= i
        s = 0
        while i > 0:
            s += tree[i]
            i -= i & -i
        return s

    stamp = [0] * trace.n_blocks
    rank = np.full(n, UNSEEN, dtype=np.int64)
    blocks, starts = trace.occ_block.tolist(), trace.path_start.tolist()
    seen, clock = 0, 0
    for r in range(len(trace)):
        first, end = starts[r], starts[r + 1]
        for o in range(first, end):
            s = stamp[blocks[o]]
            if s:
                rank[o] = seen - below(s - 1)
        for o in range(end - 1, first - 1, -1):
            b = blocks[o]
            if stamp[b]:
                add(stamp[b], -1)
            else:
                seen += 1
            clock += 1
            stamp[b] = clock
            add(clock, 1)
    return StackDistances(trace, rank)
