"""First-principles GPU profiles: KV slots, iteration time ``W + H n``, prefill chunk, cost.

A profile describes one *instance* -- ``tp`` GPUs of one type serving one
model with tensor parallelism -- at one context window ``C``, in the terms of
optfleet's service model (FleetOpt, Chen et al. 2026, ``optfleet.problems.fleet.pool_config``):

    t_iter = W + H n          (n active slots; the flat model charges n = n_max)
    S      = (ceil(L_in / C_chunk) + L_out) t_iter

Units: 1 GB = 1e9 bytes, 1 TB/s = 1e12 bytes/s, times in ms.  Notation: ``M``
HBM bytes per GPU, ``B`` peak HBM bandwidth per GPU, ``F`` peak dense BF16
FLOP/s per GPU, ``P`` resident weights, ``P_a`` weights one token multiplies
(``P`` for a dense model), ``w`` bytes per weight, ``b`` KV bytes per token
(``2 layers kv_heads head_dim kv_dtype_bytes``, times the head replication
``r = tp / kv_heads`` when ``tp > kv_heads``), ``d`` hidden size, ``I`` MLP
width, ``L`` layers, ``a`` = 2 activation bytes (BF16).

KV capacity (vLLM's accounting: a budget ``u M`` per GPU, minus weights,
minus the activation peak of a profiling forward pass, minus non-torch
runtime memory; the remainder is KV cache):

    kv_tokens = floor((tp (u M - R_act - R_run) - P w) / b)
    R_act     = T_prof a (3 d + 3 I / tp)          activation peak per GPU
    R_run     = RUNTIME_OVERHEAD (+ TP_COMMUNICATION_OVERHEAD when tp > 1)
    n_max     = floor(kv_tokens / C)                slots per instance

``R_act`` counts, per token of a ``T_prof``-token profiling pass, three
hidden-width buffers (residual stream, normalised input, layer output) and
three MLP-width buffers (the merged gate/up projection of width ``2 I/tp`` and
the activation output of width ``I/tp``).

Decode step (roofline: weight GEMMs take the longer of their HBM read and
their FLOPs; attention reads every active slot's KV; Megatron tensor
parallelism all-reduces twice per layer):

    W_read  = P w / (tp B eta_bw)                     weights streamed once per step
    W_ar    = 2 L alpha                                all-reduce latency (tp > 1)
    kv      = b (f C) / (tp B eta_bw)                  one slot's KV read per step
    ar      = 2 L (2 (tp-1)/tp) d a / (link eta_ar)    one token's all-reduce traffic
    c       = 2 P_a / (tp F eta_f)                     one token's GEMM FLOPs
    t(n)    = max(W_read, n c) + W_ar + n (kv + ar)

``f`` is the mean fraction of the window a slot holds (``context_fraction``).
The flat model is linear in ``n``; the profile reports

    W = W_read + W_ar
    H = kv + ar + max(0, n_max c - W_read) / n_max

i.e. the chord of the convex ``t(n)`` from ``n = 0`` to ``n = n_max``: exact
at ``n_max`` (where the flat model evaluates it) and an upper bound of the
roofline below it.  **What H means**: the time one more active slot adds to a
decode step -- chiefly reading that slot's KV cache.  With the default
``f = 1`` every slot is charged a *full window* of context, consistent with a
slot being a full-window KV reservation; ``W + H n_max`` is then about the time
to stream the whole used HBM once.  Pass the workload's mean held context
over ``C`` (e.g. ``(mean L_in + mean L_out / 2) / C`` for requests routed to
the pool) for a sharper, smaller H.  H therefore scales with the window
(``kv`` is proportional to ``C``), unlike a single calibrated constant.

Prefill: a prompt token costs ``c + ar`` (GEMM FLOPs and its all-reduce
traffic), so ``prefill_tokens_per_ms = 1 / (c + ar)``.  Attention FLOPs --
``4 L d_q`` per query-key pair, about ``2 L d_q L_in`` per prompt token under
the causal mask -- are not counted, which underestimates long prompts: by
about 8 % for Llama-3-70B at 8,192 tokens, 30 % at 32,768.  The service model charges one
iteration per prefill chunk; the profile's chunk is the number of prompt
tokens the instance computes in one full iteration,
``C_chunk = floor(t(n_max) prefill_tokens_per_ms)``, so that
``ceil(L_in / C_chunk) t_iter`` is the compute-bound prefill time of ``L_in``
tokens.  This is exact for a prompt on an otherwise idle instance and
optimistic under load, where the chunk's FLOPs also lengthen the other
slots' steps (the flat model has no term for that).

Cost: ``tp x $/GPU-hour`` per instance.

Every efficiency constant below names its source.
``DECODE_BANDWIDTH_EFFICIENCY`` and ``COMPUTE_EFFICIENCY`` are calibrated on
published serving measurements, and ``RUNTIME_OVERHEAD_GB_PER_GPU`` and
``TP_COMMUNICATION_OVERHEAD_GB_PER_GPU`` are read off one published vLLM log
(said where they are defined); the cross-check tests
(tests/test_hardware_profiles.py) mark which published points were used to
choose them and which are independent.

Overrides: measured ``iteration_base_ms`` (W), ``per_slot_ms`` (H), ``slots``
or ``kv_tokens``, and ``chunk_tokens`` replace the derived values; the
derivation string records both.  A measured capacity also overrides the
memory-fit verdict (the measurement shows the configuration runs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from types import MappingProxyType

from optfleet.errors import InputError
from optfleet.hardware.catalog import (
    GPUS,
    GpuSpec,
    ModelSpec,
    check_positive_int,
    get_gpu,
    get_model,
    instance_cost_per_hour,
)

_BYTES_PER_GB = 1e9
_MS_PER_S = 1e3

# ---------------------------------------------------------------------------
# Efficiency constants and their sources
# ---------------------------------------------------------------------------

DEFAULT_MEMORY_UTILISATION = 0.90
"""Share of each GPU's memory the engine may use: vLLM's ``gpu_memory_utilization``
default (lowered from 0.95 to 0.9 because start-up profiling can be inaccurate;
vllm-project/vllm issue #1018)."""

DECODE_BANDWIDTH_EFFICIENCY = 0.58
"""Achieved share of peak HBM bandwidth in a decode step (model bandwidth
utilisation): what a whole decode step achieves, kernel launches, norms and
small GEMVs included, and it differs by engine.  Published small-batch steps imply 0.64
for TensorRT-LLM (NVIDIA NIM 1.8.0, Llama-3.3-70B FP8 on 2x H100, concurrency 1,
5,000/500 tokens, ITL 18.58 ms; docs.nvidia.com/nim/benchmarking/llm/1.0.0/
performance) and 0.52 for vLLM (Llama-3.1-8B on one H200, batch 8, 32/128
tokens, 833.42 ms; vLLM performance-benchmark buildkite build 9515).
Calibrated: 0.58 is the mean of those two, which are therefore not
independent checks; the other points in tests/test_hardware_profiles.py are."""

COMPUTE_EFFICIENCY = 0.66
"""Achieved share of peak dense BF16 FLOP/s in weight GEMMs (model FLOPs
utilisation).  Calibrated: it makes the derived prefill of TensorRT-LLM v0.5's
published first-token latency of Llama-2-70B on 4x A100 (FP16, batch 1, 2,048
input tokens, 377 ms; NVIDIA/TensorRT-LLM docs/source/performance.md) exact.
The same table's Llama-2-7B and GPT-J points are independent checks;
FlashAttention-2 reports 50-73 % of A100 peak (Dao, 2023)."""

ALLREDUCE_BANDWIDTH_EFFICIENCY = 0.80
"""Share of the per-direction link bandwidth a ring all-reduce achieves: NCCL
reaches ~370 of H100 NVLink's 450 GB/s line rate, the rest is protocol overhead
(NCCL maintainer, NVIDIA/nccl-tests issue #212); A100 runs report ~200 of
300 GB/s busbw (nccl-tests issues #149, #178).  That is the large-message
rate: messages of 256 KB-1 MB reach only 0.13-0.15 of NVLink line rate (vLLM
custom all-reduce on H100, table in sgl-project/sglang PR #2904).  Decode
all-reduces carry ``n d a`` bytes (~2.4 MB for 148 Llama-3-70B slots), between
the two, so the per-slot term ``ar`` is optimistic: at TP 8 on H100 it is
0.013 ms/slot here and would be ~0.08 ms/slot at the 0.13 rate, against a
0.17 ms/slot KV read at 8,192 tokens."""

ALLREDUCE_LATENCY_MS: Mapping[str, float] = MappingProxyType(
    {"nvlink": 0.010, "xgmi": 0.010, "pcie": 0.020}
)
"""Fixed cost of one small all-reduce, by link family.  NVLink: vLLM's custom
all-reduce on H100 takes 8.5-11.8 us for 512 B-32 KB at TP 2/4/8 (table in
sgl-project/sglang PR #2904).  PCIe: NCCL inside a CUDA graph over a PCIe
switch takes 19.4-24.2 us for 4-32 KB on 4 GPUs (haohervchb/sglang-V100 PR #2).
xGMI (MI300X Infinity Fabric): no published figure found; the NVLink value is
assumed."""

ALLREDUCES_PER_LAYER = 2
"""Megatron-LM tensor parallelism all-reduces twice per transformer layer in a
forward pass, after the attention output and after the MLP down projection
(Shoeybi et al., 2019, section 3)."""

ACTIVATION_BYTES = 2
"""Activations and all-reduce payloads are BF16/FP16, also with FP8 weights."""

ACTIVATION_PROFILE_TOKENS = 8192
"""Tokens in vLLM's profiling forward pass (``max_num_batched_tokens``): 8,192
for the OpenAI server on >= 70 GiB GPUs other than A100, 2,048 otherwise
(vLLM ``EngineArgs.get_batch_defaults``); the larger, conservative value."""

ACTIVATION_HIDDEN_BUFFERS = 3
ACTIVATION_MLP_BUFFERS = 3
"""Live buffers per token at the activation peak, in hidden widths (residual,
normalised input, layer output) and MLP widths (gate/up output 2 I, activation
output I).  Independent check: a vLLM log for Llama-3.1-8B on an RTX 3090 shows
activation peaks of 2.07 GiB at 20,000 and 2.99 GiB at 29,000 batched tokens
(vllm-project/vllm issue #10517); this rule gives 2.06 and 2.99 GiB."""

RUNTIME_OVERHEAD_GB_PER_GPU = 1.92
"""Non-torch memory per GPU (CUDA context growth, cuBLAS workspaces, graphs):
1.79 GiB = 1.92 GB measured by vLLM for Meta-Llama-3-8B at TP 1 on an 80 GB
GPU (vllm-project/vllm PR #10511).  Version dependent: another vLLM log shows
0.35 GiB (issue #10517)."""

TP_COMMUNICATION_OVERHEAD_GB_PER_GPU = 1.92
"""Extra non-torch memory per GPU when ``tp > 1`` (NCCL and custom all-reduce
buffers): the same PR #10511 log shows 3.58 GiB at TP 2 against 1.79 GiB at
TP 1."""

MAX_TENSOR_PARALLEL = 8
"""Largest TP degree modelled: one HGX/DGX node, and the largest cloud
instance of each catalogued GPU (p4d/p5/p5e, g5/g6/g6e .48xlarge, MI300X
8-GPU platforms), holds 8 GPUs; cross-node all-reduce is not modelled."""

DEFAULT_CONTEXT_FRACTION = 1.0
"""Mean share of the window a slot holds, for H: 1.0 charges every slot a full
window (a slot *is* a full-window KV reservation), an upper bound."""


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class ProfileAssumptions:
    """The knobs of a derivation; the defaults are the module constants above.

    ``allreduce_latency_ms`` None means "by the GPU's link family"
    (:data:`ALLREDUCE_LATENCY_MS`); ``weight_bytes_per_param`` and
    ``kv_dtype_bytes`` None mean "the model's own" (a ``config.json``'s
    quantisation, :func:`resolved_assumptions`), else BF16 (2 bytes).
    Invalid values raise :class:`InputError` on ``assumptions.<field>``.
    """

    memory_utilisation: float = DEFAULT_MEMORY_UTILISATION
    bandwidth_efficiency: float = DECODE_BANDWIDTH_EFFICIENCY
    compute_efficiency: float = COMPUTE_EFFICIENCY
    allreduce_bandwidth_efficiency: float = ALLREDUCE_BANDWIDTH_EFFICIENCY
    allreduce_latency_ms: float | None = None
    runtime_overhead_gb_per_gpu: float = RUNTIME_OVERHEAD_GB_PER_GPU
    tp_overhead_gb_per_gpu: float = TP_COMMUNICATION_OVERHEAD_GB_PER_GPU
    activation_tokens: int = ACTIVATION_PROFILE_TOKENS
    context_fraction: float = DEFAULT_CONTEXT_FRACTION
    weight_bytes_per_param: float | None = None
    kv_dtype_bytes: int | None = None

    def __post_init__(self) -> None:
        for name in (
            "memory_utilisation",
            "bandwidth_efficiency",
            "compute_efficiency",
            "allreduce_bandwidth_efficiency",
            "context_fraction",
        ):
            value = getattr(self, name)
            if not (_is_number(value) and 0 < value <= 1):
                raise InputError(f"assumptions.{name}", value, "must be in (0, 1]")
        for name in ("allreduce_latency_ms", "runtime_overhead_gb_per_gpu", "tp_overhead_gb_per_gpu"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and value >= 0):
                raise InputError(f"assumptions.{name}", value, "must be finite and >= 0")
        if self.weight_bytes_per_param is not None and not (_is_number(self.weight_bytes_per_param) and self.weight_bytes_per_param > 0):
            raise InputError("assumptions.weight_bytes_per_param", self.weight_bytes_per_param, "must be finite and > 0")
        for name in ("activation_tokens", "kv_dtype_bytes"):
            value = getattr(self, name)
            if value is None and name == "kv_dtype_bytes":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"assumptions.{name}", value, "must be an integer >= 1")


@dataclass(frozen=True)
class ProfileOverrides:
    """Measured values that replace derived ones (None = derive).

    ``slots`` and ``kv_tokens`` are per instance and mutually exclusive: a
    measured ``kv_tokens`` gives ``floor(kv_tokens / C)`` slots, a measured
    ``slots`` stands for ``slots x C`` KV tokens.  ``source`` names the
    measurement and is recorded in the profile's derivation.
    """

    iteration_base_ms: float | None = None
    per_slot_ms: float | None = None
    slots: int | None = None
    kv_tokens: int | None = None
    chunk_tokens: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        for name in ("iteration_base_ms", "per_slot_ms"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and value >= 0):
                raise InputError(f"overrides.{name}", value, "must be finite and >= 0")
        for name, minimum in (("slots", 0), ("kv_tokens", 0), ("chunk_tokens", 1)):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < minimum):
                raise InputError(f"overrides.{name}", value, f"must be an integer >= {minimum}")
        if self.slots is not None and self.kv_tokens is not None:
            raise InputError("overrides.slots", self.slots, "give slots or kv_tokens, not both")

    @property
    def given(self) -> tuple[str, ...]:
        """Names of the overridden quantities, in field order."""
        return tuple(f.name for f in fields(self) if f.name != "source" and getattr(self, f.name) is not None)


@dataclass(frozen=True)
class IterationTerms:
    """The derived additive terms of W and H, in ms, before any override.

    ``W = weight_read_ms + allreduce_latency_ms``;
    ``H = kv_read_ms_per_slot + allreduce_ms_per_slot + compute_ms_per_slot``
    (the last is the roofline chord, 0 while the step is memory bound).
    ``compute_ms_per_token`` is ``c``, one token's weight-GEMM time at the
    compute roof; ``allreduce_ms_per_slot`` is also each prompt token's
    all-reduce traffic.
    """

    weight_read_ms: float
    allreduce_latency_ms: float
    kv_read_ms_per_slot: float
    allreduce_ms_per_slot: float
    compute_ms_per_slot: float
    compute_ms_per_token: float


@dataclass(frozen=True)
class GpuProfile:
    """One instance of ``tp`` GPUs serving ``model`` at ``window_tokens``.

    ``slots`` and ``kv_tokens`` are per instance; ``iteration_base_ms`` (W)
    and ``per_slot_ms`` (H) give ``t_iter = W + H n``; ``chunk_tokens`` is
    the prefill chunk of the service model and ``prefill_tokens_per_ms`` the
    instance's compute-bound prefill rate.  ``infeasible_reason`` is None
    for a usable profile; otherwise ``slots`` is 0 and the timing fields are
    not for sizing: the physics at one slot when the weights or the window do
    not fit, NaN (and ``chunk_tokens`` 0) when the configuration is outside the
    model (TP beyond one node, split KV heads, no link data).  ``derivation``
    states the numbers and the overrides.
    """

    gpu: str
    model: str
    tp: int
    window_tokens: int
    kv_tokens: int
    slots: int
    iteration_base_ms: float
    per_slot_ms: float
    chunk_tokens: int
    prefill_tokens_per_ms: float
    cost_per_instance_hour: float
    terms: IterationTerms
    overridden: tuple[str, ...]
    infeasible_reason: str | None
    derivation: str

    @property
    def feasible(self) -> bool:
        """True when the instance holds at least one slot at its window."""
        return self.infeasible_reason is None

    @property
    def label(self) -> str:
        """``"A100-80GB x4"`` (``"A100-80GB"`` when tp is 1), as pool options name GPUs."""
        return f"{self.gpu} x{self.tp}" if self.tp > 1 else self.gpu

    def step_ms(self, decode_slots: int = 0, prefill_tokens: int = 0) -> float:
        """Roofline time of one forward pass over ``d`` decoding slots and ``p`` prompt tokens.

        ``max(W_read, (d + p) c) + W_ar + (d + p) ar + d kv`` from the derived
        terms (overrides of W and H do not apply): the convex step time the
        linear ``iteration_ms`` is the chord of.  A prefill of ``p`` tokens
        alone is ``step_ms(prefill_tokens=p)``.
        """
        for field, value in (("decode_slots", decode_slots), ("prefill_tokens", prefill_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise InputError(field, value, "must be an integer >= 0")
        t = self.terms
        tokens = decode_slots + prefill_tokens
        gemm = max(t.weight_read_ms, tokens * t.compute_ms_per_token)
        return gemm + t.allreduce_latency_ms + tokens * t.allreduce_ms_per_slot + decode_slots * t.kv_read_ms_per_slot

    def iteration_ms(self, active_slots: int | None = None) -> float:
        """``W + H n`` with ``n = active_slots`` (default: all ``slots``)."""
        n = self.slots if active_slots is None else active_slots
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise InputError("active_slots", active_slots, "must be an integer >= 0")
        return self.iteration_base_ms + self.per_slot_ms * n


# ---------------------------------------------------------------------------
# Physics, one function per quantity
# ---------------------------------------------------------------------------


def _require(model: ModelSpec, name: str) -> float:
    value = getattr(model, name)
    if value is None:
        raise InputError(f"model.{name}", None, f"{model.name} has no {name}; profiles need it")
    return value


def resolved_assumptions(model: ModelSpec, assumptions: ProfileAssumptions | None = None) -> ProfileAssumptions:
    """``assumptions`` (default: the module's) with the weight width and KV dtype settled: the assumption's when it
    gives one, else the model's (a ``config.json``'s quantisation), else BF16 (2 bytes)."""
    a = ProfileAssumptions() if assumptions is None else assumptions
    weight = a.weight_bytes_per_param if a.weight_bytes_per_param is not None else model.weight_bytes_per_param
    kv = a.kv_dtype_bytes if a.kv_dtype_bytes is not None else model.kv_dtype_bytes
    return replace(a, weight_bytes_per_param=2.0 if weight is None else weight, kv_dtype_bytes=2 if kv is None else kv)


def kv_head_replication(model: ModelSpec, tp: int) -> int:
    """``r = tp / kv_heads`` when ``tp > kv_heads`` (each GPU keeps a full KV head), else 1."""
    return tp // model.kv_heads if tp > model.kv_heads else 1


def activation_gb_per_gpu(model: ModelSpec, tp: int, tokens: int) -> float:
    """Activation peak per GPU: ``T a (3 d + 3 I / tp)`` bytes, in GB."""
    hidden = _require(model, "hidden_size")
    mlp = _require(model, "intermediate_size")
    per_token = ACTIVATION_BYTES * (ACTIVATION_HIDDEN_BUFFERS * hidden + ACTIVATION_MLP_BUFFERS * mlp / tp)
    return tokens * per_token / _BYTES_PER_GB


def runtime_gb_per_gpu(tp: int, assumptions: ProfileAssumptions) -> float:
    """Non-torch runtime memory per GPU: ``R_run`` (+ the TP communication buffers when tp > 1)."""
    extra = assumptions.tp_overhead_gb_per_gpu if tp > 1 else 0.0
    return assumptions.runtime_overhead_gb_per_gpu + extra


def instance_kv_bytes_per_token(model: ModelSpec, tp: int, kv_dtype_bytes: int) -> int:
    """KV bytes per token over the instance: ``b_kv x r`` (replicated heads count twice)."""
    return model.kv_bytes_per_token(kv_dtype_bytes) * kv_head_replication(model, tp)


def kv_free_bytes(gpu: GpuSpec, model: ModelSpec, tp: int, assumptions: ProfileAssumptions) -> float:
    """``tp (u M - R_act - R_run) - P w``: bytes left for KV cache (negative: weights do not fit)."""
    per_gpu = (
        assumptions.memory_utilisation * gpu.hbm_bytes
        - activation_gb_per_gpu(model, tp, assumptions.activation_tokens) * _BYTES_PER_GB
        - runtime_gb_per_gpu(tp, assumptions) * _BYTES_PER_GB
    )
    return tp * per_gpu - model.weight_bytes(assumptions.weight_bytes_per_param)


def _effective_bandwidth(gpu: GpuSpec, tp: int, assumptions: ProfileAssumptions) -> float:
    """Instance HBM bytes/s actually streamed: ``tp B eta_bw``."""
    return tp * gpu.hbm_tb_s * 1e12 * assumptions.bandwidth_efficiency


def weight_read_ms(gpu: GpuSpec, model: ModelSpec, tp: int, assumptions: ProfileAssumptions) -> float:
    """``P w / (tp B eta_bw)``: one pass over the weights (all experts of a MoE, conservatively)."""
    return model.weight_bytes(assumptions.weight_bytes_per_param) / _effective_bandwidth(gpu, tp, assumptions) * _MS_PER_S


def kv_read_ms_per_token(gpu: GpuSpec, model: ModelSpec, tp: int, assumptions: ProfileAssumptions) -> float:
    """``b r / (tp B eta_bw)``: reading one cached token's KV in a decode step."""
    kv_bytes = instance_kv_bytes_per_token(model, tp, assumptions.kv_dtype_bytes)
    return kv_bytes / _effective_bandwidth(gpu, tp, assumptions) * _MS_PER_S


def kv_read_ms_per_slot(
    gpu: GpuSpec, model: ModelSpec, tp: int, window_tokens: int, assumptions: ProfileAssumptions
) -> float:
    """``b r f C / (tp B eta_bw)``: one slot's KV cache read in one decode step."""
    return kv_read_ms_per_token(gpu, model, tp, assumptions) * assumptions.context_fraction * window_tokens


def _link_latency_ms(gpu: GpuSpec, assumptions: ProfileAssumptions) -> float:
    if assumptions.allreduce_latency_ms is not None:
        return assumptions.allreduce_latency_ms
    if gpu.interconnect not in ALLREDUCE_LATENCY_MS:
        raise InputError("gpu.interconnect", gpu.interconnect, f"unknown link family; known: {', '.join(ALLREDUCE_LATENCY_MS)}")
    return ALLREDUCE_LATENCY_MS[gpu.interconnect]


def allreduce_latency_ms(gpu: GpuSpec, model: ModelSpec, tp: int, assumptions: ProfileAssumptions) -> float:
    """``2 L alpha`` per forward pass when tp > 1, else 0."""
    if tp == 1:
        return 0.0
    return ALLREDUCES_PER_LAYER * model.layers * _link_latency_ms(gpu, assumptions)


def allreduce_ms_per_token(gpu: GpuSpec, model: ModelSpec, tp: int, assumptions: ProfileAssumptions) -> float:
    """``2 L (2 (tp-1)/tp) d a / (link eta_ar)``: one token's ring all-reduce traffic, 0 when tp is 1."""
    if tp == 1:
        return 0.0
    link = gpu.interconnect_gb_s
    if link is None:
        raise InputError("gpu.interconnect_gb_s", None, f"{gpu.name} has no interconnect bandwidth; needed for tp > 1")
    ring = 2.0 * (tp - 1) / tp
    payload = _require(model, "hidden_size") * ACTIVATION_BYTES
    per_call = ring * payload / (link * _BYTES_PER_GB * assumptions.allreduce_bandwidth_efficiency)
    return ALLREDUCES_PER_LAYER * model.layers * per_call * _MS_PER_S


def compute_ms_per_token(gpu: GpuSpec, model: ModelSpec, tp: int, assumptions: ProfileAssumptions) -> float:
    """``2 P_a / (tp F eta_f)``: one token's weight-GEMM FLOPs (BF16 peak; FP8 tensor cores not modelled)."""
    flops = tp * gpu.bf16_dense_tflops * 1e12 * assumptions.compute_efficiency
    return 2.0 * model.active_params / flops * _MS_PER_S


# ---------------------------------------------------------------------------
# Derivation
# ---------------------------------------------------------------------------


def structural_problem(gpu: GpuSpec, model: ModelSpec, tp: int) -> str | None:
    """Why (gpu, model, tp) cannot be derived at all, or None."""
    if tp > MAX_TENSOR_PARALLEL:
        return f"tp {tp} exceeds one {MAX_TENSOR_PARALLEL}-GPU node; cross-node tensor parallelism is not modelled"
    if model.tp_problem(tp) is not None:
        return f"tp {tp} {model.tp_problem(tp)}"
    if tp > 1 and (gpu.interconnect is None or gpu.interconnect_gb_s is None):
        return f"{gpu.name} has no interconnect data; tp > 1 needs it"
    return None


def _fmt_gb(value_bytes: float) -> str:
    return f"{value_bytes / _BYTES_PER_GB:.2f} GB"


def derive_profile(
    gpu: GpuSpec | str,
    model: ModelSpec | str,
    tp: int,
    window_tokens: int,
    *,
    assumptions: ProfileAssumptions | None = None,
    overrides: ProfileOverrides | None = None,
    cost_per_gpu_hour: float | None = None,
) -> GpuProfile:
    """The :class:`GpuProfile` of ``tp`` x ``gpu`` serving ``model`` at ``window_tokens``.

    Names are looked up in the catalog (case-insensitive); specs are used as
    given.  A configuration that cannot run -- weights that do not fit, no
    full window in the KV budget, an unmodelled TP degree -- is returned with
    ``slots = 0`` and ``infeasible_reason`` set, never raised, so catalog-wide
    enumeration can skip it.  Invalid arguments (unknown names, ``tp`` or
    ``window_tokens`` not an integer >= 1, out-of-range assumptions) raise
    :class:`InputError`.  ``cost_per_gpu_hour`` overrides the catalog price.
    """
    gpu_spec = gpu if isinstance(gpu, GpuSpec) else get_gpu(gpu, field="gpu")
    model_spec = model if isinstance(model, ModelSpec) else get_model(model, field="model")
    check_positive_int("tp", tp)
    check_positive_int("window_tokens", window_tokens)
    a = resolved_assumptions(model_spec, assumptions)
    o = ProfileOverrides() if overrides is None else overrides
    cost = instance_cost_per_hour(gpu_spec, tp, cost_per_gpu_hour)

    lines = [f"{gpu_spec.name} x{tp}, {model_spec.name}, window {window_tokens} tokens"]
    reason = structural_problem(gpu_spec, model_spec, tp)
    if reason is not None:
        return _underivable(gpu_spec, model_spec, tp, window_tokens, cost, o, reason, lines)
    terms = _derive_terms(gpu_spec, model_spec, tp, window_tokens, a, lines)
    kv_tokens, reason = _derive_capacity(gpu_spec, model_spec, tp, a, lines)

    if o.kv_tokens is not None or o.slots is not None:
        measured = o.kv_tokens if o.kv_tokens is not None else o.slots * window_tokens
        lines.append(f"capacity overridden: {measured} KV tokens measured (derived {kv_tokens})")
        if reason is not None:
            lines.append(f"derived verdict overridden by the measurement: {reason}")
        kv_tokens = measured
        reason = None
    slots = o.slots if o.slots is not None else kv_tokens // window_tokens
    if reason is None and slots < 1:
        reason = f"KV budget of {kv_tokens} tokens holds no full window of {window_tokens} tokens"
    if reason is not None:
        slots = 0

    n = max(slots, 1)
    derived_w = terms.weight_read_ms + terms.allreduce_latency_ms
    chord = max(0.0, n * terms.compute_ms_per_token - terms.weight_read_ms) / n
    terms = replace(terms, compute_ms_per_slot=chord)
    derived_h = terms.kv_read_ms_per_slot + terms.allreduce_ms_per_slot + chord
    w = derived_w if o.iteration_base_ms is None else float(o.iteration_base_ms)
    h = derived_h if o.per_slot_ms is None else float(o.per_slot_ms)
    lines.append(
        f"W = {terms.weight_read_ms:.3f} weight read + {terms.allreduce_latency_ms:.3f} all-reduce latency "
        f"= {derived_w:.3f} ms" + (f"; overridden: {w:.3f} ms" if o.iteration_base_ms is not None else "")
    )
    lines.append(
        f"H = {terms.kv_read_ms_per_slot:.4f} KV read + {terms.allreduce_ms_per_slot:.4f} all-reduce "
        f"+ {chord:.4f} compute chord at n_max {n} = {derived_h:.4f} ms/slot"
        + (f"; overridden: {h:.4f} ms/slot" if o.per_slot_ms is not None else "")
    )

    prefill_rate = 1.0 / (terms.compute_ms_per_token + terms.allreduce_ms_per_slot)
    full_iteration = w + h * n
    derived_chunk = max(1, math.floor(full_iteration * prefill_rate))
    chunk = derived_chunk if o.chunk_tokens is None else o.chunk_tokens
    lines.append(
        f"prefill {prefill_rate:.2f} tokens/ms; chunk = floor({full_iteration:.2f} ms x rate) = {derived_chunk}"
        + (f"; overridden: {chunk}" if o.chunk_tokens is not None else "")
    )
    lines.append(f"cost {cost:.4g} $/instance-hour ({tp} x {cost / tp:.4g})")
    if o.given:
        lines.append(f"overrides {', '.join(o.given)}" + (f" from {o.source}" if o.source else ""))
    if reason is not None:
        lines.append(f"infeasible: {reason}")
    return GpuProfile(
        gpu=gpu_spec.name,
        model=model_spec.name,
        tp=tp,
        window_tokens=window_tokens,
        kv_tokens=kv_tokens,
        slots=slots,
        iteration_base_ms=w,
        per_slot_ms=h,
        chunk_tokens=chunk,
        prefill_tokens_per_ms=prefill_rate,
        cost_per_instance_hour=cost,
        terms=terms,
        overridden=o.given,
        infeasible_reason=reason,
        derivation="\n".join(lines),
    )


def _underivable(
    gpu: GpuSpec,
    model: ModelSpec,
    tp: int,
    window_tokens: int,
    cost: float,
    o: ProfileOverrides,
    reason: str,
    lines: list[str],
) -> GpuProfile:
    """The profile of a configuration the model does not cover: no slots, timing NaN.

    Overrides are recorded but do not make it feasible: the derivation's
    structure (one node, whole KV heads per GPU, a known link) is missing.
    """
    nan = math.nan
    if o.given:
        lines.append(f"overrides {', '.join(o.given)} ignored" + (f" ({o.source})" if o.source else ""))
    lines.append(f"infeasible: {reason}")
    return GpuProfile(
        gpu=gpu.name,
        model=model.name,
        tp=tp,
        window_tokens=window_tokens,
        kv_tokens=0,
        slots=0,
        iteration_base_ms=nan,
        per_slot_ms=nan,
        chunk_tokens=0,
        prefill_tokens_per_ms=nan,
        cost_per_instance_hour=cost,
        terms=IterationTerms(nan, nan, nan, nan, nan, nan),
        overridden=(),
        infeasible_reason=reason,
        derivation="\n".join(lines),
    )


def _derive_terms(
    gpu: GpuSpec, model: ModelSpec, tp: int, window_tokens: int, a: ProfileAssumptions, lines: list[str]
) -> IterationTerms:
    """All timing terms except the compute chord (which needs the slot count)."""
    terms = IterationTerms(
        weight_read_ms=weight_read_ms(gpu, model, tp, a),
        allreduce_latency_ms=allreduce_latency_ms(gpu, model, tp, a),
        kv_read_ms_per_slot=kv_read_ms_per_slot(gpu, model, tp, window_tokens, a),
        allreduce_ms_per_slot=allreduce_ms_per_token(gpu, model, tp, a),
        compute_ms_per_slot=0.0,
        compute_ms_per_token=compute_ms_per_token(gpu, model, tp, a),
    )
    lines.append(
        f"bandwidth {tp} x {gpu.hbm_tb_s:g} TB/s x {a.bandwidth_efficiency:g}; compute {tp} x "
        f"{gpu.bf16_dense_tflops:g} TFLOPS x {a.compute_efficiency:g}; context {a.context_fraction:g} x window"
    )
    return terms


def _derive_capacity(
    gpu: GpuSpec, model: ModelSpec, tp: int, a: ProfileAssumptions, lines: list[str]
) -> tuple[int, str | None]:
    """``(kv_tokens, reason)``: KV tokens per instance and why it holds nothing (or None)."""
    free = kv_free_bytes(gpu, model, tp, a)
    kv_bytes = instance_kv_bytes_per_token(model, tp, a.kv_dtype_bytes)
    weights = model.weight_bytes(a.weight_bytes_per_param)
    act = activation_gb_per_gpu(model, tp, a.activation_tokens)
    run = runtime_gb_per_gpu(tp, a)
    kv_tokens = max(0, math.floor(free / kv_bytes))
    lines.append(
        f"kv_tokens = floor(({tp} x ({a.memory_utilisation:g} x {gpu.hbm_gb:g} GB - {act:.2f} GB activations "
        f"- {run:.2f} GB runtime) - {_fmt_gb(weights)} weights) / {kv_bytes} B) = {kv_tokens}"
    )
    if free <= 0:
        usable = free + weights
        return 0, f"weights {_fmt_gb(weights)} exceed the {_fmt_gb(usable)} usable on {tp} x {gpu.name}"
    return kv_tokens, None


def profile_grid(
    model: ModelSpec | str,
    gpus: Iterable[GpuSpec | str] | None = None,
    tps: Iterable[int] = (1, 2, 4, 8),
    windows: Iterable[int] = (8192,),
    *,
    assumptions: ProfileAssumptions | None = None,
    overrides: Mapping[tuple[str, int], ProfileOverrides] | None = None,
    prices: Mapping[str, float] | None = None,
) -> list[GpuProfile]:
    """Every (gpu, tp, window) profile of ``model``, feasible or not, in input order.

    ``gpus`` defaults to the whole catalog.  ``overrides`` maps ``(gpu name,
    tp)`` to measured values; a ``slots`` override is per window, so it is
    refused when more than one window is enumerated (give ``kv_tokens``).
    ``prices`` maps a GPU name to its $/GPU-hour, replacing the catalog price.
    """
    gpu_specs = [g if isinstance(g, GpuSpec) else get_gpu(g, field="gpus") for g in (GPUS.values() if gpus is None else gpus)]
    tp_list = list(tps)
    window_list = list(windows)
    measured = dict(overrides or {})
    if len(window_list) > 1:
        for key, value in measured.items():
            if value.slots is not None:
                raise InputError(
                    f"overrides[{key!r}].slots", value.slots, "is per window; give kv_tokens when enumerating several windows"
                )
    return [
        derive_profile(
            g,
            model,
            tp,
            window,
            assumptions=assumptions,
            overrides=measured.get((g.name, tp)),
            cost_per_gpu_hour=(prices or {}).get(g.name),
        )
        for g in gpu_specs
        for tp in tp_list
        for window in window_list
    ]


def pool_profiles(
    model: ModelSpec | str,
    gpus: Iterable[GpuSpec | str] | None = None,
    tps: Iterable[int] = (1, 2, 4, 8),
    windows: Iterable[int] = (8192,),
    *,
    assumptions: ProfileAssumptions | None = None,
    overrides: Mapping[tuple[str, int], ProfileOverrides] | None = None,
    prices: Mapping[str, float] | None = None,
) -> list[GpuProfile]:
    """The feasible profiles of :func:`profile_grid` (the pool options of a catalog-wide model).

    The skipped ones, with their ``infeasible_reason``, are
    ``[p for p in profile_grid(...) if not p.feasible]``.
    """
    grid = profile_grid(model, gpus, tps, windows, assumptions=assumptions, overrides=overrides, prices=prices)
    return [p for p in grid if p.feasible]
