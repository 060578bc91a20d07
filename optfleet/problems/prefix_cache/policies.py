"""Eviction policies of a prefix-tree KV cache: vLLM's LRU, SGLang's leaf LRU, LFU, T-LRU and its oracle variants on trees.

A policy gives every resident block a key when a request touches it;
:func:`~optfleet.problems.prefix_cache.replay.replay` evicts the block with
the smallest key among the candidates (leaves only, or any block: the
eviction setting), never a block of the request being served.  Touch stamps
grow by one per block, and a request's path is stamped from its deepest block
up, so a parent's stamp is always above its children's: ordered by stamp,
a block is never evicted before its descendants.

* ``lru`` (vLLM automatic prefix caching): key ``(stamp,)``.  vLLM frees a
  finished request's blocks tail first into one LRU queue; the stamp order is
  that queue.  Because parents outrank children it only ever evicts leaves,
  so it is the same schedule under both eviction settings.
* ``leaf-lru`` (SGLang RadixAttention): the LRU leaf, evicted with its whole
  radix node.  Our reading of a node: the chain of blocks above the leaf up to
  the nearest block with another resident child (or a pinned block), as a
  compressed radix tree stores it; SGLang frees a node whole, so it may
  evict more than one block for one missing slot.
* ``lfu``: key ``(accesses, stamp)``: fewest accesses first, then LRU.  A
  parent is accessed whenever a child is, so this too evicts leaves only.
* ``t-lru`` (Tail-Optimized Caching for LLM Inference, Zhang et al., Algorithm 1,
  applied to a tree): after request ``r`` with ``L = input_tokens[r]`` the
  TEL-safe budget ``b = clip(ceil(L + Q_hat - s), 0, L)``
  (:func:`optfleet.problems.caching.policies.tel_safe_budget_tokens`, ``s =
  (xi - beta) / alpha``) keeps the first ``ceil(b / block_tokens)`` blocks
  of its path in the keep tier; deeper blocks go to the surplus tier, evicted
  first: key ``(tier, stamp)``.  The tier is set by the block's latest
  request.  Under the leaves setting a surplus block with a resident child
  waits until it is a leaf.  ``Q_hat`` defaults to the trace's mean of new
  tokens per request (tokens in blocks no earlier request had).

The two oracle variants of the seed paper (the caching kind's
``end-aware-t-lru`` and ``length-aware-t-lru``), read on a tree.  A block
that occurs again later brings its ancestors with it (a path holds every
ancestor), so the blocks of ``r``'s path that are ever used again are a
prefix, its first ``u_r`` blocks (:func:`reused_depth`); ``r``'s
*continuation* is the request of the next occurrence of its block ``b_{u_r}``,
the next request that reuses the most of ``r``'s path
(:func:`continuation`).  On a conversation trace ``u_r`` is the whole path
while the conversation goes on, and the prefix other conversations share
(a system prompt) after its last turn.

* ``end-aware-t-lru``: the keep tier is the first ``min(ceil(b /
  block_tokens), u_r)`` blocks: T-LRU told which blocks will never be used
  again (the paper's bit "this conversation has ended" becomes "how much of
  this path is used again").
* ``length-aware-t-lru``: T-LRU with the exact length of the continuation
  ``r'``: ``Q = input_tokens[r'] - L`` in the budget, so ``b = clip(ceil(
  input_tokens[r'] - s), 0, L)``, the fewest cached tokens that bring ``r'``
  within ``xi`` (``Q_hat`` when ``r`` has no continuation).

ET-LRU (the paper's Algorithm 2) has no tree version here: its eviction
key ranks a conversation's tokens by the survival of the next prompt length
and cuts its cached prefix step by step, and a tree's shared prefixes have
no single next prompt.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.errors import InputError
from optfleet.problems.caching.evaluate import TtftModel
from optfleet.problems.caching.policies import tel_safe_budget_tokens
from optfleet.problems.prefix_cache.trace import BlockTrace

SURPLUS_TIER, KEEP_TIER = 0, 1


@dataclass(frozen=True)
class RadixContext:
    """What a policy may look at: the trace, the capacity in blocks, the eviction setting, the TTFT model and ``xi``."""

    trace: BlockTrace
    capacity_blocks: int
    eviction: str
    ttft: TtftModel
    xi_ms: float


class RadixPolicy:
    """Base class: LRU keys; subclasses change :meth:`key` (and ``evicts_node``)."""

    name = "lru"
    evicts_node = False

    def bind(self, context: RadixContext) -> None:
        """Called once before a replay."""
        self.context = context

    def key(self, block: int, occurrence: int, stamp: int) -> tuple:
        """The key of ``block``, touched at ``occurrence`` with ``stamp``: the smallest key is evicted first."""
        return (stamp,)

    def describe(self) -> str:
        return self.name


class LRU(RadixPolicy):
    """vLLM's prefix-cache LRU (module docstring)."""

    name = "lru"


class LeafLRU(RadixPolicy):
    """SGLang's radix-tree LRU: the least recently used leaf, with its node (module docstring)."""

    name = "leaf-lru"
    evicts_node = True


class LFU(RadixPolicy):
    """Least frequently used block first, ties by LRU."""

    name = "lfu"

    def bind(self, context: RadixContext) -> None:
        super().bind(context)
        self._accesses = np.zeros(context.trace.n_blocks, dtype=np.int64)

    def key(self, block: int, occurrence: int, stamp: int) -> tuple:
        self._accesses[block] += 1
        return (int(self._accesses[block]), stamp)


def mean_new_tokens(trace: BlockTrace) -> float:
    """Mean over requests of the tokens in blocks no earlier request had: T-LRU's default ``Q_hat``."""
    first = trace.occ_prev < 0
    return float(trace.occ_tokens[first].sum() / len(trace))


def reused_depth(trace: BlockTrace) -> NDArray[np.int64]:
    """``u_r``: how many blocks of request ``r``'s path occur again later (they are its first ``u_r``; module docstring)."""
    return np.bincount(trace.occ_request, weights=trace.occ_next >= 0, minlength=len(trace)).astype(np.int64)


def continuation(trace: BlockTrace) -> NDArray[np.int64]:
    """``r'``: the request of the next occurrence of ``r``'s deepest block used again (-1 when ``u_r = 0``)."""
    depth = reused_depth(trace)
    following = np.full(len(trace), -1, dtype=np.int64)
    has = depth > 0
    deepest = trace.path_start[:-1][has] + depth[has] - 1
    following[has] = trace.occ_request[trace.occ_next[deepest]]
    return following


class TLRU(RadixPolicy):
    """T-LRU on a tree: surplus tier beyond the TEL-safe budget, evicted first (module docstring).

    Subclasses change the next request's new tokens (:meth:`next_new_tokens`) or the keep tier (:meth:`keep_blocks`)."""

    name = "t-lru"

    def __init__(self, q_hat_tokens: float | None = None) -> None:
        if q_hat_tokens is not None and not q_hat_tokens >= 0:
            raise InputError(f"policies.{self.name}.q_hat_tokens", q_hat_tokens, "must be >= 0")
        self.q_hat_tokens = q_hat_tokens

    def bind(self, context: RadixContext) -> None:
        super().bind(context)
        trace = context.trace
        self.q_hat = mean_new_tokens(trace) if self.q_hat_tokens is None else float(self.q_hat_tokens)
        safe = float(context.ttft.safe_uncached_tokens(context.xi_ms))
        budget_tokens = tel_safe_budget_tokens(trace.input_tokens, self.next_new_tokens(trace), safe)
        self._budget_blocks = self.keep_blocks(trace, -(-budget_tokens // trace.block_tokens))

    def next_new_tokens(self, trace: BlockTrace) -> NDArray[np.float64]:
        """Per request, the ``Q`` of its budget: ``Q_hat`` for T-LRU."""
        return np.full(len(trace), self.q_hat)

    def keep_blocks(self, trace: BlockTrace, budget_blocks: NDArray[np.int64]) -> NDArray[np.int64]:
        """Per request, how many leading blocks of its path go to the keep tier: the budget's for T-LRU."""
        return budget_blocks

    def key(self, block: int, occurrence: int, stamp: int) -> tuple:
        trace = self.context.trace
        tier = KEEP_TIER if trace.occ_depth[occurrence] <= self._budget_blocks[trace.occ_request[occurrence]] else SURPLUS_TIER
        return (tier, stamp)

    def describe(self) -> str:
        return f"{self.name} (Q_hat {self.q_hat:,.1f} tokens)" if hasattr(self, "q_hat") else self.name


class EndAwareTLRU(TLRU):
    """T-LRU that knows which blocks of a path are used again: keep tier ``min(budget, u_r)`` (module docstring)."""

    name = "end-aware-t-lru"

    def keep_blocks(self, trace: BlockTrace, budget_blocks: NDArray[np.int64]) -> NDArray[np.int64]:
        return np.minimum(budget_blocks, reused_depth(trace))


class LengthAwareTLRU(TLRU):
    """T-LRU with the exact input length of each request's continuation (module docstring)."""

    name = "length-aware-t-lru"

    def next_new_tokens(self, trace: BlockTrace) -> NDArray[np.float64]:
        estimate = super().next_new_tokens(trace)
        following = continuation(trace)
        has = following >= 0
        estimate[has] = trace.input_tokens[following[has]] - trace.input_tokens[has]
        return estimate


POLICIES: dict[str, Callable[..., RadixPolicy]] = {"lru": LRU, "leaf-lru": LeafLRU, "lfu": LFU, "t-lru": TLRU,
                                                   EndAwareTLRU.name: EndAwareTLRU, LengthAwareTLRU.name: LengthAwareTLRU}
