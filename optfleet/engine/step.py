"""The engine model: how long one iteration (forward pass) of a serving engine takes.

A continuously batching engine (vLLM, SGLang, TensorRT-LLM) runs iterations that
mix chunked prefill with decode under a token budget (vLLM's
``max_num_batched_tokens``).  One iteration computes

* ``p`` prompt tokens of a prefill chunk that starts ``o`` tokens into its
  prompt (its attention reads the ``o`` tokens already cached plus the chunk
  itself under the causal mask: ``pairs(p, o) = p o + p (p + 1) / 2``
  query-key pairs), and
* one token for each of ``b`` decoding sequences, whose attention reads ``k``
  cached KV tokens in all (the sum of their contexts).

Its time is ``t(p, o, b, k)``.  Every source (first principles, measured
tables, a fit to the user's benchmark) implements :meth:`EngineModel.step_ms`;
the queueing models and the simulators see an engine only through it, or
through its :class:`AffineStep` reduction (reduce.py), which is itself an
engine:

    t = base + per_seq b + per_kv_token k + per_prefill_token p + per_prefill_pair pairs(p, o)   (ms).

Over a whole prompt of ``L`` tokens the pairs sum to ``L (L + 1) / 2``
whatever the chunking, so the compute a prompt adds to the iterations that
carry it is ``per_prefill_token L + per_prefill_pair L (L + 1) / 2``
(:meth:`AffineStep.prefill_compute_ms`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, fields

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.errors import InputError


def prefill_pairs(prefill_tokens: ArrayLike, offset_tokens: ArrayLike = 0) -> NDArray[np.float64]:
    """Query-key pairs of a prefill chunk: ``p o + p (p + 1) / 2`` (causal attention over ``o`` cached tokens and
    the chunk)."""
    p = np.asarray(prefill_tokens, dtype=np.float64)
    o = np.asarray(offset_tokens, dtype=np.float64)
    return p * o + p * (p + 1.0) / 2.0


class EngineModel(ABC):
    """The iteration time of one serving configuration (a GPU type x TP degree x model x engine)."""

    @property
    @abstractmethod
    def source(self) -> str:
        """Where the numbers come from, one line (``"roofline"``, ``"measured: ..."``, ``"fit: ..."``)."""

    @abstractmethod
    def step_ms(self, prefill_tokens: ArrayLike, decode_seqs: ArrayLike, decode_kv_tokens: ArrayLike,
                prefill_offset_tokens: ArrayLike = 0) -> NDArray[np.float64]:
        """``t(p, o, b, k)`` in ms (module docstring), broadcast over the arguments."""

    def prefill_ms(self, prompt_tokens: ArrayLike, decode_seqs: ArrayLike = 0, decode_kv_tokens: ArrayLike = 0) -> NDArray[np.float64]:
        """One iteration that prefills a whole prompt of ``L`` tokens at once (with ``b`` decodes alongside)."""
        return self.step_ms(prompt_tokens, decode_seqs, decode_kv_tokens, 0)

    def decode_ms(self, decode_seqs: ArrayLike, context_tokens: ArrayLike) -> NDArray[np.float64]:
        """One decode step of ``b`` sequences of ``context_tokens`` each (``k = b x context``)."""
        b = np.asarray(decode_seqs, dtype=np.float64)
        return self.step_ms(0, b, b * np.asarray(context_tokens, dtype=np.float64), 0)


MIN_BASE_MS = 1e-3
"""The least base step, 1 us: no GPU forward pass is shorter (a kernel launch alone takes a few us), and the queueing
models divide by moments of the iteration time."""

AFFINE_FIELDS = ("base_ms", "per_seq_ms", "per_kv_token_ms", "per_prefill_token_ms", "per_prefill_pair_ms")


@dataclass(frozen=True)
class AffineStep(EngineModel):
    """``t = base + per_seq b + per_kv_token k + per_prefill_token p + per_prefill_pair pairs(p, o)`` (ms).

    The form every queueing model and simulator uses: the first-principles and measured engines are reduced to it
    over a pool's operating region (reduce.py), a user's benchmark is fitted to it (fit.py).  ``label`` names the
    source; ``max_error`` is the largest relative error of the reduction over its region (0 for an exact form).
    """

    base_ms: float
    per_seq_ms: float
    per_kv_token_ms: float
    per_prefill_token_ms: float
    per_prefill_pair_ms: float
    label: str = "affine"
    max_error: float = 0.0

    def __post_init__(self) -> None:
        for name in AFFINE_FIELDS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InputError(f"step.{name}", value, "must be a finite number >= 0")
        if self.base_ms < MIN_BASE_MS:
            raise InputError("step.base_ms", self.base_ms, f"must be at least {MIN_BASE_MS:g} ms: no GPU iteration is shorter")

    @property
    def source(self) -> str:
        return self.label

    def step_ms(self, prefill_tokens: ArrayLike, decode_seqs: ArrayLike, decode_kv_tokens: ArrayLike,
                prefill_offset_tokens: ArrayLike = 0) -> NDArray[np.float64]:
        p = np.asarray(prefill_tokens, dtype=np.float64)
        return (self.base_ms + self.per_seq_ms * np.asarray(decode_seqs, dtype=np.float64)
                + self.per_kv_token_ms * np.asarray(decode_kv_tokens, dtype=np.float64)
                + self.per_prefill_token_ms * p + self.per_prefill_pair_ms * prefill_pairs(p, prefill_offset_tokens))

    def prefill_compute_ms(self, prompt_tokens: ArrayLike) -> NDArray[np.float64]:
        """What a prompt of ``L`` tokens adds to the iterations that carry its chunks, whatever the chunking:
        ``per_prefill_token L + per_prefill_pair L (L + 1) / 2``."""
        return self.per_prefill_token_ms * np.asarray(prompt_tokens, dtype=np.float64) + self.per_prefill_pair_ms * prefill_pairs(prompt_tokens)

    def seq_step_ms(self, context_tokens: ArrayLike) -> NDArray[np.float64]:
        """What one decoding sequence of ``context_tokens`` adds to an iteration: ``per_seq + per_kv_token x context``."""
        return self.per_seq_ms + self.per_kv_token_ms * np.asarray(context_tokens, dtype=np.float64)

    def decode_work_ms(self, prompt_tokens: ArrayLike, decode_steps: ArrayLike) -> NDArray[np.float64]:
        """What a request adds to the ``L`` decode steps it takes part in, its context growing from ``L_in``:
        ``per_seq L + per_kv_token (L L_in + L (L - 1) / 2)``."""
        steps = np.asarray(decode_steps, dtype=np.float64)
        return self.per_seq_ms * steps + self.per_kv_token_ms * (steps * np.asarray(prompt_tokens, dtype=np.float64) + steps * (steps - 1.0) / 2.0)

    def coefficients(self) -> dict[str, float]:
        """The five coefficients by name."""
        return {f.name: float(getattr(self, f.name)) for f in fields(self) if f.name in AFFINE_FIELDS}
