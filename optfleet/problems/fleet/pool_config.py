"""A pool option: one GPU configuration serving at one context window, and its slot service model.

A pool instance has ``s`` KV slots (``n_max``) at its window ``C_w`` and
prefills in chunks of ``C`` tokens.  Per request with ``L_in``, ``L_out`` it
holds a slot for ``u = ceil(L_in / C) + L_out`` iterations.  Two service models:

**The paper's** (``step`` None; FleetOpt, Chen et al. 2026): every iteration
is the full-batch iteration and prefill costs no compute,

    t_iter = W + H s                       (scaling "flat", the paper's text)
    t_iter = W + H s L_total / L_scale     (scaling "length_scaled", inference-fleet-sim)
    S      = u t_iter,   first token after (ceil(L_in / C) + 1) t_iter.

**The engine model** (``step``, an :class:`~optfleet.engine.step.AffineStep`
reduced from the instance's engine over this pool's region): an iteration of
``b`` decoding sequences reading ``k`` KV tokens that carries ``p`` prompt
tokens takes ``base + per_seq b + per_kv_token k + per_prefill_token p +
per_prefill_pair pairs(p, o)``.  The slot model keeps the paper's full batch
of ``s`` sequences and charges

* **load** by time sharing: a decoding sequence adds ``sigma_i = per_seq +
  per_kv_token kappa_i`` to each iteration, ``kappa_i = L_in + (L_out - 1)/2``
  its mean context; its prompt adds ``P_i = per_prefill_token L_in +
  per_prefill_pair L_in (L_in + 1) / 2`` of compute to the iterations that
  carry it, during which the instance's ``s`` slots all wait, so

      S_i = u_i (base + s sigma_i) + s P_i   (slot-ms),

  whose mean over a pool is exactly the slot-time a full batch of the pool's
  own requests uses (``E[S] = E[u] base + s E[u sigma + P]``, as the
  length-scaled model's); utilisation ``lambda E[S] / (n s)`` is then the share
  of each instance's time the pool's work takes;
* **latency** on the pool's longest decode step, the full batch at the full
  window, ``t_w = base + s (per_seq + per_kv_token C_w)``: a request with
  ``m`` chunks has its first token after

      F(m) = (m + 1) t_w + P(m C),   P(L) = per_prefill_token L + per_prefill_pair L (L + 1)/2,

  its ``m`` chunk iterations charged full chunks (under load a prompt's short
  last chunk shares its iteration with the next prompt's tokens) -- a function
  of ``m`` only, so the MILP's floor levels stay exact.  **Left out: the wait
  for the token budget behind other prompts' chunks** (the slot model has no
  prefill queue).  Under a heavy prefill load that makes the TTFT optimistic:
  on the shipped ``azure_2023_h100_engine`` plan, whose instances spend about
  75 % of their time on prefill, the batching simulator measures P99 TTFT
  379 and 633 ms where this floor gives 278 and 497 ms (60,000 requests, 2
  replications; benchmarks/bench_engine.py);
* **time per output token**: every iteration is at most ``t_w`` plus a full
  budget of prompt tokens at their deepest, ``t_w + per_prefill_token C +
  per_prefill_pair C (C_w + 1/2)`` (pieces ``p_i`` of prompts at offsets
  ``o_i <= C_w - p_i`` have ``sum p_i o_i + p_i (p_i + 1)/2 <= C (C_w + 1/2)``
  pairs), which bounds every TPOT percentile (a conservative bound); the
  mean TPOT at a per-instance rate ``lambda_g`` is taken as ``t_w / (1 -
  lambda_g E[P])`` (the full-window decode step stretched by the prefill
  compute it carries), an upper estimate.  Both are loose: on the shipped
  ``azure_2023_h100_engine`` plan the batching simulator measures mean TPOT
  34 and 22 ms, P99 46 and 24 ms, against 86 and 52 ms (mean) and 121 and
  127 ms (bound) here (benchmarks/bench_engine.py).

With ``per_kv_token = per_prefill_token = per_prefill_pair = 0`` and
``per_seq = H`` the engine model is the paper's flat model.  Each instance is
priced at ``tp x $/GPU-hour``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.engine.step import AffineStep, prefill_pairs


@dataclass(frozen=True)
class PoolConfig:
    """Hardware of one pool option; ``length_scale_tokens`` is None for flat iteration time, ``step`` None for the
    paper's service model (module docstring)."""

    window_tokens: int
    slots_per_instance: int
    w_ms: float
    h_ms_per_slot: float
    chunk_tokens: int
    length_scale_tokens: int | None
    cost_per_instance_hour: float
    gpu: str
    step: AffineStep | None = None

    @property
    def charges_prefill(self) -> bool:
        """True under the engine model (prefill compute charged), False under the paper's."""
        return self.step is not None

    def iteration_ms(self, l_total: ArrayLike) -> NDArray[np.float64]:
        """The latency-side iteration of a request of total length ``l_total``: the paper's ``t_iter`` (a constant
        when flat), or the engine model's full-window full-batch step ``t_w``."""
        if self.step is not None:
            return np.full(np.shape(l_total), self.window_step_ms)
        scale = np.ones_like(np.asarray(l_total, dtype=np.float64))
        if self.length_scale_tokens is not None:
            scale = np.asarray(l_total, dtype=np.float64) / self.length_scale_tokens
        return self.w_ms + self.h_ms_per_slot * self.slots_per_instance * scale

    @property
    def window_step_ms(self) -> float:
        """``t_w``: the decode step of a full batch at the full window (the paper's flat ``t_iter``)."""
        if self.step is None:
            return float(self.w_ms + self.h_ms_per_slot * self.slots_per_instance)
        return float(self.step.base_ms + self.slots_per_instance * self.step.seq_step_ms(self.window_tokens))

    def prefill_chunks(self, l_in: ArrayLike) -> NDArray[np.int64]:
        """``ceil(L_in / C_chunk)`` prefill iterations."""
        return -(-np.asarray(l_in, dtype=np.int64) // self.chunk_tokens)

    def held_iterations(self, l_in: ArrayLike, l_out: ArrayLike) -> NDArray[np.int64]:
        """``u = ceil(L_in/C) + L_out``: the iterations a request holds its slot."""
        return self.prefill_chunks(l_in) + np.asarray(l_out, dtype=np.int64)

    def prefill_compute_ms(self, l_in: ArrayLike) -> NDArray[np.float64]:
        """``P``: the compute a prompt adds to the iterations that carry it (0 under the paper's model)."""
        if self.step is None:
            return np.zeros(np.shape(l_in))
        return self.step.prefill_compute_ms(l_in)

    def slot_work_basis(self, l_in: ArrayLike, l_out: ArrayLike) -> NDArray[np.float64]:
        """Per request the row ``a = (u, u kappa, L_in, L_in (L_in + 1)/2, u L_total)`` with ``v = a . beta``
        (:attr:`slot_work_coefficients`): one basis for both service models, so the sweep can sum its monomials once
        for pools whose coefficients differ (heuristics/candidate_stats.py)."""
        l_in = np.asarray(l_in, dtype=np.float64)
        l_out = np.asarray(l_out, dtype=np.float64)
        u = self.held_iterations(l_in.astype(np.int64), l_out.astype(np.int64)).astype(np.float64)
        return np.stack([u, u * (l_in + (l_out - 1.0) / 2.0), l_in, prefill_pairs(l_in), u * (l_in + l_out)], axis=-1)

    @property
    def slot_work_coefficients(self) -> NDArray[np.float64]:
        """``beta`` of ``v = a . beta``: ``(H, 0, 0, 0, 0)`` (flat paper), ``(0, 0, 0, 0, H / L_scale)``
        (length-scaled paper), ``(per_seq, per_kv_token, per_prefill_token, per_prefill_pair, 0)`` (engine)."""
        if self.step is None:
            if self.length_scale_tokens is None:
                return np.array([self.h_ms_per_slot, 0.0, 0.0, 0.0, 0.0])
            return np.array([0.0, 0.0, 0.0, 0.0, self.h_ms_per_slot / self.length_scale_tokens])
        st = self.step
        return np.array([st.per_seq_ms, st.per_kv_token_ms, st.per_prefill_token_ms, st.per_prefill_pair_ms, 0.0])

    def slot_work_ms(self, l_in: ArrayLike, l_out: ArrayLike) -> NDArray[np.float64]:
        """``v``, with ``S = W u + s v``: ``u H phi`` (paper) or ``u sigma + P`` (engine; module docstring)."""
        return self.slot_work_basis(l_in, l_out) @ self.slot_work_coefficients

    @property
    def base_ms(self) -> float:
        """``W`` of ``S = W u + s v``: the paper's W or the engine's base step."""
        return float(self.w_ms if self.step is None else self.step.base_ms)

    def service_ms(self, l_in: ArrayLike, l_out: ArrayLike) -> NDArray[np.float64]:
        """``S = W u + s v`` in slot-milliseconds (module docstring)."""
        return self.base_ms * self.held_iterations(l_in, l_out) + self.slots_per_instance * self.slot_work_ms(l_in, l_out)

    def chunk_floor_ms(self, chunks: ArrayLike) -> NDArray[np.float64]:
        """``F(m)``: a request with ``m`` chunks gets its first token after ``(m + 1) t_w + P(m C)`` with no wait
        (``(m + 1) t_iter`` under the flat paper model)."""
        m = np.asarray(chunks, dtype=np.float64)
        compute = 0.0 if self.step is None else self.step.prefill_compute_ms(m * self.chunk_tokens)
        return (m + 1.0) * self.window_step_ms + compute

    def first_token_ms(self, l_in: ArrayLike, l_out: ArrayLike) -> NDArray[np.float64]:
        """Per request, its first token's time after taking a slot: ``(ceil(L_in/C) + 1) t_iter(L_total)`` (paper),
        ``F(ceil(L_in/C))`` (engine)."""
        chunks = self.prefill_chunks(l_in)
        if self.step is None:
            return (chunks + 1) * self.iteration_ms(np.asarray(l_in) + np.asarray(l_out))
        return self.chunk_floor_ms(chunks)

    @property
    def tpot_bound_ms(self) -> float:
        """The longest iteration: ``t_w`` plus the deepest full chunk's compute (engine); the paper's largest
        ``t_iter`` (flat: ``t_iter``; length-scaled: at the window)."""
        if self.step is None:
            return float(self.iteration_ms(self.window_tokens))
        chunk, window = self.chunk_tokens, self.window_tokens
        return self.window_step_ms + self.step.per_prefill_token_ms * chunk + self.step.per_prefill_pair_ms * chunk * (window + 0.5)

    def mean_tpot_ms(self, rate_per_gpu_rps: ArrayLike, mean_prefill_ms: ArrayLike) -> NDArray[np.float64]:
        """``t_w / (1 - lambda_g E[P])`` (inf at or beyond a prefill load of 1); ``t_iter`` under the paper's model."""
        load = np.asarray(rate_per_gpu_rps, dtype=np.float64) * np.asarray(mean_prefill_ms, dtype=np.float64) / 1000.0
        with np.errstate(divide="ignore"):
            return np.where(load < 1.0, self.window_step_ms / np.maximum(1.0 - load, 0.0), np.inf)
