"""A pool option: one GPU configuration serving at one context window.

Service model (FleetOpt, Chen et al. 2026), per request with ``L_in``, ``L_out``:

    t_iter = W + H n_max                       (scaling "flat", the paper's text)
    t_iter = W + H n_max L_total / L_scale     (scaling "length_scaled", inference-fleet-sim)
    S      = (ceil(L_in / C_chunk) + L_out) t_iter

where ``n_max`` is the pool's KV slots per GPU instance at its window.  Each
instance is priced at ``tp x $/GPU-hour``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True)
class PoolConfig:
    """Hardware of one pool option; ``length_scale_tokens`` is None for flat iteration time."""

    window_tokens: int
    slots_per_gpu: int
    w_ms: float
    h_ms_per_slot: float
    chunk_tokens: int
    length_scale_tokens: int | None
    cost_per_gpu_hour: float
    gpu: str

    def iteration_ms(self, l_total: ArrayLike) -> NDArray[np.float64]:
        """``t_iter`` of a request of total length ``l_total`` (a constant when flat)."""
        scale = np.ones_like(np.asarray(l_total, dtype=np.float64))
        if self.length_scale_tokens is not None:
            scale = np.asarray(l_total, dtype=np.float64) / self.length_scale_tokens
        return self.w_ms + self.h_ms_per_slot * self.slots_per_gpu * scale

    def prefill_chunks(self, l_in: ArrayLike) -> NDArray[np.int64]:
        """``ceil(L_in / C_chunk)`` prefill iterations."""
        return -(-np.asarray(l_in, dtype=np.int64) // self.chunk_tokens)

    def service_ms(self, l_in: ArrayLike, l_out: ArrayLike) -> NDArray[np.float64]:
        """``S = (ceil(L_in/C_chunk) + L_out) t_iter`` in milliseconds."""
        l_in = np.asarray(l_in, dtype=np.int64)
        l_out = np.asarray(l_out, dtype=np.int64)
        return (self.prefill_chunks(l_in) + l_out) * self.iteration_ms(l_in + l_out)
