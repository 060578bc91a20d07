"""The first-principles engine: a roofline of one forward pass (optfleet/hardware/profiles.py's physics).

For ``tp`` GPUs serving a model, with ``T = p + b`` tokens in the pass (the
chunk's prompt tokens and one per decoding sequence):

    t(p, o, b, k) = max(W_read, T c) + W_ar + T ar + k kv + pairs(p, o) a

* ``W_read = P w / (tp B eta_bw)``: the weights streamed once per pass;
* ``c = 2 P_a / (tp F eta_f)``: one token's weight-GEMM FLOPs (the GEMMs take
  the longer of their weight read and their FLOPs);
* ``W_ar = 2 L alpha`` and ``ar``: the tensor-parallel all-reduces' latency
  and one token's traffic;
* ``kv = b_kv r / (tp B eta_bw)``: reading one cached token's KV in a decode
  step (``k`` tokens in all);
* ``a = 4 L h_q d_h / (tp F eta_f)``: the attention FLOPs of one query-key pair
  of the prefill (``Q K^T`` and ``P V``, two FLOPs per multiply-add, ``h_q``
  query heads of width ``d_h``), FlashAttention-style compute bound; a chunk
  has ``pairs(p, o) = p o + p (p + 1) / 2`` (step.py).

Left out, each small against the terms kept: a chunk's read of its own prompt's
``o`` cached tokens (``o kv``, about 0.3 ms for a 14k-token offset on
Llama-3-70B at TP 8 on H100, against ~60 ms of compute), the KV writes, the
embedding and the final logits.  The efficiency factors are the profile's
:class:`~optfleet.hardware.profiles.ProfileAssumptions`, each overridable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from optfleet.errors import InputError
from optfleet.engine.step import EngineModel, prefill_pairs
from optfleet.hardware.catalog import GpuSpec, ModelSpec, get_gpu, get_model
from optfleet.hardware.profiles import (
    ProfileAssumptions,
    allreduce_latency_ms,
    allreduce_ms_per_token,
    compute_ms_per_token,
    kv_read_ms_per_token,
    resolved_assumptions,
    structural_problem,
    weight_read_ms,
)

FLOPS_PER_ATTENTION_PAIR_PER_HEAD_DIM = 4
"""``Q K^T`` and ``P V`` each cost one multiply-add (2 FLOPs) per query-key pair per head dimension."""


def query_heads(model: ModelSpec) -> int:
    """The model's query heads: ``attention_heads`` when the spec has it, else ``hidden_size / head_dim`` (the
    usual ``num_attention_heads``; models whose attention width differs from the hidden size must state it)."""
    heads = getattr(model, "attention_heads", None)
    if heads:
        return int(heads)
    if model.hidden_size is None:
        raise InputError("model.attention_heads", None, f"{model.name} has neither attention_heads nor hidden_size")
    return max(1, model.hidden_size // model.head_dim)


def attention_ms_per_pair(gpu: GpuSpec, model: ModelSpec, tp: int, assumptions: ProfileAssumptions) -> float:
    """``4 L h_q d_h / (tp F eta_f)``: one prefill query-key pair's attention FLOPs at the compute roof, in ms."""
    flops = FLOPS_PER_ATTENTION_PAIR_PER_HEAD_DIM * model.layers * query_heads(model) * model.head_dim
    return flops / (tp * gpu.bf16_dense_tflops * 1e12 * assumptions.compute_efficiency) * 1e3


@dataclass(frozen=True)
class RooflineEngine(EngineModel):
    """The roofline of one configuration; the terms are in ms (module docstring)."""

    gpu: str
    model: str
    tp: int
    weight_read_ms: float
    allreduce_latency_ms: float
    compute_ms_per_token: float
    allreduce_ms_per_token: float
    kv_read_ms_per_token: float
    attention_ms_per_pair: float

    @property
    def source(self) -> str:
        return f"roofline: {self.gpu} x{self.tp}, {self.model}"

    def step_ms(self, prefill_tokens: ArrayLike, decode_seqs: ArrayLike, decode_kv_tokens: ArrayLike,
                prefill_offset_tokens: ArrayLike = 0) -> NDArray[np.float64]:
        p = np.asarray(prefill_tokens, dtype=np.float64)
        tokens = p + np.asarray(decode_seqs, dtype=np.float64)
        gemm = np.maximum(self.weight_read_ms, tokens * self.compute_ms_per_token)
        return (gemm + self.allreduce_latency_ms + tokens * self.allreduce_ms_per_token
                + np.asarray(decode_kv_tokens, dtype=np.float64) * self.kv_read_ms_per_token
                + prefill_pairs(p, prefill_offset_tokens) * self.attention_ms_per_pair)


def roofline_engine(gpu: GpuSpec | str, model: ModelSpec | str, tp: int, assumptions: ProfileAssumptions | None = None) -> RooflineEngine:
    """The :class:`RooflineEngine` of ``tp`` x ``gpu`` serving ``model``; a configuration outside the physics (TP
    beyond one node, split KV heads, no link data) is an :class:`InputError` on ``hardware.tp``."""
    g = gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu)
    m = model if isinstance(model, ModelSpec) else get_model(model)
    a = resolved_assumptions(m, assumptions)
    problem = structural_problem(g, m, tp)
    if problem is not None:
        raise InputError("hardware.tp", tp, problem)
    return RooflineEngine(
        gpu=g.name, model=m.name, tp=tp,
        weight_read_ms=weight_read_ms(g, m, tp, a),
        allreduce_latency_ms=allreduce_latency_ms(g, m, tp, a),
        compute_ms_per_token=compute_ms_per_token(g, m, tp, a),
        allreduce_ms_per_token=allreduce_ms_per_token(g, m, tp, a),
        kv_read_ms_per_token=kv_read_ms_per_token(g, m, tp, a),
        attention_ms_per_pair=attention_ms_per_pair(g, m, tp, a),
    )
