"""The roles of a prefill/decode-disaggregated pool and the serving policy they follow.

A disaggregated pool (xPyD: ``x`` prefill and ``y`` decode instances) serves each of its requests in three stages.
The analytic model (analytic.py) and the simulator (simulate/) assume the same policy, stated here once:

1. **Prefill** (:class:`PrefillRole`): the pool's requests wait in one FCFS queue for the first free prefill
   instance (an M/G/c queue with ``c = x``).  An instance serves one prompt at a time, in chunks of at most
   ``token_budget`` tokens, one chunk per iteration: a prompt of ``L`` tokens takes ``m = ceil(L / B)``
   iterations, chunk ``i`` of ``p_i`` tokens at offset ``o_i`` taking ``step_ms(p_i, 0, 0, o_i)`` (the engine model,
   optfleet/engine/step.py).  Packing several short prompts into one iteration is not modelled.
2. **KV transfer** (:class:`TransferLink`): when its prefill ends, the request's KV cache, ``L x
   kv_bytes_per_token`` bytes, is sent over its prefill instance's link of ``gb_per_s`` GB/s (1e9 bytes per
   second), FCFS, one transfer at a time per prefill instance; the link works while the instance prefills the next
   prompt.
3. **Decode** (:class:`DecodeRole`): the transferred request joins one of the ``y`` decode instances chosen
   uniformly at random (so each sees a Poisson stream at ``lambda / y``); an instance runs at most ``max_batch``
   sequences and queues the rest FCFS.  Each iteration of an instance with ``b`` running sequences whose contexts
   total ``k`` tokens takes ``step_ms(0, b, k)`` and gives every running sequence one token; a request needs
   ``L_out`` decode iterations, its context growing from ``L_in`` by one token per iteration.

TTFT is measured from arrival to the end of the request's first decode iteration (prefill wait + prefill +
transfer wait + transfer + decode admission wait + first decode step: the issue's definition, which counts the
first decode step); TPOT is ``(t_last - t_first) / (L_out - 1)`` over requests with ``L_out >= 2``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.engine.step import EngineModel
from optfleet.errors import InputError

BYTES_PER_GB = 1e9


@dataclass(frozen=True)
class PrefillRole:
    """``instances`` prefill instances of one configuration: its engine (``step``) and per-iteration token budget."""

    instances: int
    step: EngineModel
    token_budget: int

    def __post_init__(self) -> None:
        _check_count("prefill.instances", self.instances)
        _check_count("prefill.token_budget", self.token_budget)


@dataclass(frozen=True)
class TransferLink:
    """The link each prefill instance sends KV caches over: ``gb_per_s`` GB/s, ``kv_bytes_per_token`` per token."""

    gb_per_s: float
    kv_bytes_per_token: float

    def __post_init__(self) -> None:
        if not self.gb_per_s > 0 or self.gb_per_s == float("inf"):
            raise InputError("link.gb_per_s", self.gb_per_s, "must be a finite bandwidth > 0 GB/s")
        if not self.kv_bytes_per_token > 0 or self.kv_bytes_per_token == float("inf"):
            raise InputError("link.kv_bytes_per_token", self.kv_bytes_per_token, "must be finite and > 0")

    def transfer_ms(self, prompt_tokens: float) -> float:
        """Time to send the KV cache of ``prompt_tokens`` tokens: ``L x bytes / (gb_per_s x 1e9)`` s, in ms."""
        return 1e3 * prompt_tokens * self.kv_bytes_per_token / (self.gb_per_s * BYTES_PER_GB)


@dataclass(frozen=True)
class DecodeRole:
    """``instances`` decode instances of one configuration: its engine (``step``) and its most running sequences."""

    instances: int
    step: EngineModel
    max_batch: int

    def __post_init__(self) -> None:
        _check_count("decode.instances", self.instances)
        _check_count("decode.max_batch", self.max_batch)


def chunked_prefill_ms(step: EngineModel, prompt_tokens: ArrayLike, token_budget: int) -> NDArray[np.float64]:
    """Stage 1's service time of each prompt: ``S(L) = sum_{i < m} step_ms(p_i, 0, 0, o_i)`` with ``m = ceil(L / B)``,
    ``o_i = i B`` and ``p_i = min(B, L - o_i)`` (ms; 0 for an empty prompt).  ``L`` may be a mean (a float)."""
    length = np.atleast_1d(np.asarray(prompt_tokens, dtype=np.float64))
    chunks = np.ceil(length / token_budget).astype(np.int64)
    first = np.cumsum(chunks) - chunks
    owner = np.repeat(np.arange(len(length)), chunks)
    offset = (np.arange(int(chunks.sum())) - first[owner]) * float(token_budget)
    times = step.step_ms(np.minimum(float(token_budget), length[owner] - offset), 0, 0, offset)
    return np.bincount(owner, weights=np.asarray(times, dtype=np.float64), minlength=len(length))


def _check_count(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(field, value, "must be an integer >= 1")
