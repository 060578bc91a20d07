"""Eviction policies of a prefix-tree KV cache: vLLM's LRU, SGLang's leaf LRU, LFU and T-LRU on trees.

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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

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


class TLRU(RadixPolicy):
    """T-LRU on a tree: surplus tier beyond the TEL-safe budget, evicted first (module docstring)."""

    name = "t-lru"

    def __init__(self, q_hat_tokens: float | None = None) -> None:
        if q_hat_tokens is not None and not q_hat_tokens >= 0:
            raise InputError("policies.t-lru.q_hat_tokens", q_hat_tokens, "must be >= 0")
        self.q_hat_tokens = q_hat_tokens

    def bind(self, context: RadixContext) -> None:
        super().bind(context)
        trace = context.trace
        self.q_hat = mean_new_tokens(trace) if self.q_hat_tokens is None else float(self.q_hat_tokens)
        safe = float(context.ttft.safe_uncached_tokens(context.xi_ms))
        budget_tokens = tel_safe_budget_tokens(trace.input_tokens, np.full(len(trace), self.q_hat), safe)
        self._budget_blocks = -(-budget_tokens // trace.block_tokens)

    def key(self, block: int, occurrence: int, stamp: int) -> tuple:
        trace = self.context.trace
        tier = KEEP_TIER if trace.occ_depth[occurrence] <= self._budget_blocks[trace.occ_request[occurrence]] else SURPLUS_TIER
        return (tier, stamp)

    def describe(self) -> str:
        return f"{self.name} (Q_hat {self.q_hat:,.1f} tokens)" if hasattr(self, "q_hat") else self.name


POLICIES: dict[str, Callable[..., RadixPolicy]] = {"lru": LRU, "leaf-lru": LeafLRU, "lfu": LFU, "t-lru": TLRU}
