"""First-principles GPU profiles: published cross-checks, the FleetOpt calibration, properties.

Every published point below names its source, the measured value, the
tolerance, and whether it was used to choose a calibrated constant
(``calibration``: DECODE_BANDWIDTH_EFFICIENCY, COMPUTE_EFFICIENCY,
RUNTIME_OVERHEAD_GB_PER_GPU) or not (``independent``).  Units: 1 GiB = 2**30
bytes (what vLLM logs print), 1 GB = 1e9 bytes (the catalog).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.errors import InputError
from optfleet.hardware import (
    GPUS,
    MODELS,
    GpuProfile,
    GpuSpec,
    ModelSpec,
    ProfileAssumptions,
    ProfileOverrides,
    derive_profile,
    get_gpu,
    get_model,
    pool_profiles,
    profile_grid,
)
from optfleet.hardware.profiles import activation_gb_per_gpu
from optfleet.problems.fleet.presets import HARDWARE_PROFILES

pytestmark = pytest.mark.unit

GIB = 2**30

# Models measured by the publications but absent from the catalog (config.json values).
LLAMA2_70B = ModelSpec(  # meta-llama/Llama-2-70b-hf: 80 layers, 8 KV heads, 128 head_dim, 8192 / 28672
    "Llama-2-70B", 80, 8, 128, 68.98, "meta-llama/Llama-2-70b-hf config.json", hidden_size=8192, intermediate_size=28672
)
LLAMA2_7B = ModelSpec(  # meta-llama/Llama-2-7b-hf: 32 layers, 32 KV heads (MHA), 4096 / 11008
    "Llama-2-7B", 32, 32, 128, 6.74, "meta-llama/Llama-2-7b-hf config.json", hidden_size=4096, intermediate_size=11008
)
GPTJ_6B = ModelSpec(  # EleutherAI/gpt-j-6b: 28 layers, 16 heads x 256, n_embd 4096, n_inner 16384
    "GPT-J-6B", 28, 16, 256, 6.05, "EleutherAI/gpt-j-6b config.json", hidden_size=4096, intermediate_size=16384
)
# Llama-3.1-8B and Llama-3.3-70B share Llama-3-8B's and Llama-3-70B's shapes and sizes.
LLAMA3_8B = get_model("Llama-3-8B")
LLAMA3_70B = get_model("Llama-3-70B")
FP8_WEIGHTS = ProfileAssumptions(weight_bytes_per_param=1.0)


@dataclasses.dataclass(frozen=True)
class Published:
    """A published measurement, the derivation that predicts it, and the tolerance."""

    name: str
    source: str
    measured: float
    predict: Callable[[], float]
    tolerance: float
    role: str

    def error(self) -> float:
        return self.predict() / self.measured - 1.0


def _decode_e2e_ms(gpu: str, model: ModelSpec, tp: int, batch: int, input_tokens: int, output_tokens: int) -> float:
    """A vLLM latency run: ``output_tokens`` forward passes of ``batch`` slots at mean context ``in + out/2``."""
    profile = derive_profile(gpu, model, tp, input_tokens + output_tokens // 2)
    return output_tokens * profile.step_ms(decode_slots=batch)


def _itl_ms(gpu: str, model: ModelSpec, tp: int, context_tokens: int, assumptions: ProfileAssumptions) -> float:
    """Inter-token latency at concurrency 1: one decode step holding ``context_tokens``."""
    return derive_profile(gpu, model, tp, context_tokens, assumptions=assumptions).step_ms(decode_slots=1)


def _prefill_ms(gpu: str, model: ModelSpec, tp: int, prompt_tokens: int) -> float:
    """First-token latency at batch 1: one forward pass over the prompt."""
    return derive_profile(gpu, model, tp, 4096).step_ms(prefill_tokens=prompt_tokens)


NIM = "NVIDIA NIM LLM benchmarking, Performance, docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance"
VLLM_CI = "vLLM performance benchmark, buildkite.com/vllm/performance-benchmark/builds/9515, latency tests"
TRTLLM = "NVIDIA/TensorRT-LLM docs/source/performance.md, Low Latency, A100 GPUs (FP16), TensorRT-LLM v0.5"

DECODE_POINTS = [
    # Llama-3.3-70B-Instruct, NIM 1.8.0 (TensorRT-LLM), 2 x H100 80G, fp8 TP2, 5000 in / 500 out,
    # concurrency 1: ITL 18.58 ms.  Mean context 5,250 tokens; KV taken as BF16 (not stated).
    Published("NIM Llama-3.3-70B FP8 2xH100 5000/500 ITL", NIM, 18.58,
              lambda: _itl_ms("H100-SXM", LLAMA3_70B, 2, 5250, FP8_WEIGHTS), 0.20, "calibration"),
    # Same table, 500 in / 2000 out, concurrency 1: ITL 18.91 ms (mean context 1,500 tokens).
    Published("NIM Llama-3.3-70B FP8 2xH100 500/2000 ITL", NIM, 18.91,
              lambda: _itl_ms("H100-SXM", LLAMA3_70B, 2, 1500, FP8_WEIGHTS), 0.20, "independent"),
    # latency_llama8B_tp1 on H200: batch 8, 32 in / 128 out, mean end-to-end 833.421 ms.
    Published("vLLM Llama-3.1-8B H200 TP1 batch 8 e2e", VLLM_CI, 833.421,
              lambda: _decode_e2e_ms("H200", LLAMA3_8B, 1, 8, 32, 128), 0.20, "calibration"),
    # latency_llama70B_tp4 on H200: batch 8, 32 in / 128 out, mean end-to-end 2077.53 ms.
    Published("vLLM Llama-3-70B H200 TP4 batch 8 e2e", VLLM_CI, 2077.53,
              lambda: _decode_e2e_ms("H200", LLAMA3_70B, 4, 8, 32, 128), 0.20, "independent"),
]

PREFILL_POINTS = [
    # 1st token latency, batch 1, 2,048 input tokens: LLaMA 70B TP4 377 ms, LLaMA 7B TP1 133 ms,
    # GPT-J 6B TP1 129 ms.  Compute bound: the regime prefill_tokens_per_ms models.
    Published("TRT-LLM Llama-2-70B 4xA100 2048-token prefill", TRTLLM, 377.0,
              lambda: _prefill_ms("A100-80GB", LLAMA2_70B, 4, 2048), 0.15, "calibration"),
    Published("TRT-LLM Llama-2-7B A100 2048-token prefill", TRTLLM, 133.0,
              lambda: _prefill_ms("A100-80GB", LLAMA2_7B, 1, 2048), 0.15, "independent"),
    Published("TRT-LLM GPT-J-6B A100 2048-token prefill", TRTLLM, 129.0,
              lambda: _prefill_ms("A100-80GB", GPTJ_6B, 1, 2048), 0.15, "independent"),
]

SHORT_PREFILL_POINTS = [
    # Same table, 128 input tokens: 47 ms (LLaMA 70B TP4), 16 ms (LLaMA 7B), 12 ms (GPT-J 6B).  Between
    # the two roofs neither the weight read nor the FLOPs run at their calibrated efficiency; the
    # derivation is optimistic here by up to a third (a known limitation, asserted as such).
    Published("TRT-LLM Llama-2-70B 4xA100 128-token prefill", TRTLLM, 47.0,
              lambda: _prefill_ms("A100-80GB", LLAMA2_70B, 4, 128), 0.35, "independent"),
    Published("TRT-LLM Llama-2-7B A100 128-token prefill", TRTLLM, 16.0,
              lambda: _prefill_ms("A100-80GB", LLAMA2_7B, 1, 128), 0.35, "independent"),
    Published("TRT-LLM GPT-J-6B A100 128-token prefill", TRTLLM, 12.0,
              lambda: _prefill_ms("A100-80GB", GPTJ_6B, 1, 128), 0.35, "independent"),
]

# vllm-project/vllm PR #10511 (memory profiling overhaul), comment 2024-12-14: `vllm serve
# meta-llama/Meta-Llama-3-8B` on an 80 GB GPU reporting total_gpu_memory 79.22 GiB (PR #12126 by the
# same author names the machine H100-80G), gpu_memory_utilization 0.90, weights 14.96 GiB,
# non_torch_memory 1.79 GiB, activation peak 1.26 GiB, available_kv_cache_memory 53.29 GiB.
H100_LOGGED = dataclasses.replace(get_gpu("H100-SXM"), hbm_gb=79.22 * GIB / 1e9)
# vllm-project/vllm issue #10517, comment 2024-12-02: Llama-3.1-8B-Instruct on an RTX 3090,
# total_gpu_memory 23.58 GiB, u 0.90, weights 14.9888 GB, non_torch_memory 0.35 GiB; max_model_len 20k:
# peak_torch_memory 17.06 GiB, kv_cache_size 3.81 GiB; 29k: peak_torch_memory 17.98 GiB.
RTX3090_LOGGED = GpuSpec("RTX-3090", 23.58 * GIB / 1e9, 0.936, 71.0, 0.0, "log of vllm issue #10517")
KV_BYTES_L3_8B = 131072

KV_POINTS = [
    Published("vLLM Llama-3-8B H100 TP1 KV tokens (53.29 GiB)", "vllm-project/vllm PR #10511", 53.29 * GIB / KV_BYTES_L3_8B,
              lambda: derive_profile(H100_LOGGED, LLAMA3_8B, 1, 8192).kv_tokens, 0.03, "calibration"),
    # With the run's own logged non-torch memory (0.35 GiB) and its 20,000-token profiling pass, the
    # weights and activation terms reproduce the KV size.
    Published("vLLM Llama-3.1-8B RTX 3090 KV tokens (3.81 GiB)", "vllm-project/vllm issue #10517", 3.81 * GIB / KV_BYTES_L3_8B,
              lambda: derive_profile(
                  RTX3090_LOGGED, LLAMA3_8B, 1, 8192,
                  assumptions=ProfileAssumptions(runtime_overhead_gb_per_gpu=0.35 * GIB / 1e9, activation_tokens=20000),
              ).kv_tokens, 0.03, "independent"),
    # Activation peak = peak_torch_memory - weights: 17.06 - 14.9888 and 17.98 - 14.9888 GiB.
    Published("vLLM Llama-3.1-8B activation peak, 20,000 tokens", "vllm-project/vllm issue #10517", 2.07,
              lambda: activation_gb_per_gpu(LLAMA3_8B, 1, 20000) * 1e9 / GIB, 0.02, "independent"),
    Published("vLLM Llama-3.1-8B activation peak, 29,000 tokens", "vllm-project/vllm issue #10517", 2.99,
              lambda: activation_gb_per_gpu(LLAMA3_8B, 1, 29000) * 1e9 / GIB, 0.02, "independent"),
]


@pytest.mark.parametrize("point", DECODE_POINTS + PREFILL_POINTS + KV_POINTS, ids=lambda p: p.name)
def test_published_measurement_within_tolerance(point: Published) -> None:
    assert point.source and point.role in {"calibration", "independent"}
    assert abs(point.error()) <= point.tolerance, f"{point.name}: error {point.error():+.1%}"


@pytest.mark.parametrize("point", SHORT_PREFILL_POINTS, ids=lambda p: p.name)
def test_short_prefill_is_optimistic_but_bounded(point: Published) -> None:
    assert -point.tolerance <= point.error() < 0.0, f"{point.name}: error {point.error():+.1%}"


def test_cross_check_table_is_what_the_report_states() -> None:
    """Pins the derived-vs-published errors (rounded to 1 %), so a constant change shows up here."""
    errors = {p.name: round(100 * p.error()) for p in DECODE_POINTS + PREFILL_POINTS + SHORT_PREFILL_POINTS + KV_POINTS}
    assert errors == {
        "NIM Llama-3.3-70B FP8 2xH100 5000/500 ITL": 9,
        "NIM Llama-3.3-70B FP8 2xH100 500/2000 ITL": 5,
        "vLLM Llama-3.1-8B H200 TP1 batch 8 e2e": -11,
        "vLLM Llama-3-70B H200 TP4 batch 8 e2e": -11,
        "TRT-LLM Llama-2-70B 4xA100 2048-token prefill": 0,
        "TRT-LLM Llama-2-7B A100 2048-token prefill": 1,
        "TRT-LLM GPT-J-6B A100 2048-token prefill": -7,
        "TRT-LLM Llama-2-70B 4xA100 128-token prefill": -30,
        "TRT-LLM Llama-2-7B A100 128-token prefill": -29,
        "TRT-LLM GPT-J-6B A100 128-token prefill": -15,
        "vLLM Llama-3-8B H100 TP1 KV tokens (53.29 GiB)": 1,
        "vLLM Llama-3.1-8B RTX 3090 KV tokens (3.81 GiB)": 1,
        "vLLM Llama-3.1-8B activation peak, 20,000 tokens": 0,
        "vLLM Llama-3.1-8B activation peak, 29,000 tokens": 0,
    }


# --- the FleetOpt calibration (optfleet.problems.fleet.presets) against the derivation -------------------


def test_fleetopt_calibration_compared_with_derivation() -> None:
    """The FleetOpt A100-80GB / Llama-3-70B constants are not one physical GPU's.

    Its 1,048,576 KV tokens "per GPU" are 4.3x what an 80 GB GPU could hold
    if all of its HBM were Llama-3-70B BF16 KV cache, and close to the
    derived capacity of a whole 8-GPU instance; its W is half the derived W
    of that instance; its H equals the derived per-slot time at 8,192 tokens
    of context of a 4-GPU instance.  Reported, not tuned to.
    """
    calibration = HARDWARE_PROFILES["fleetopt_a100_llama3_70b"]
    kv_per_gpu = calibration["slots"]["kv_tokens_per_gpu"]
    w_ms = calibration["iteration"]["w_ms"]
    h_ms = calibration["iteration"]["h_ms_per_slot"]
    gpu, model = get_gpu(calibration["gpu"]), get_model(calibration["model"])

    whole_hbm_tokens = gpu.hbm_bytes / model.kv_bytes_per_token()
    assert kv_per_gpu / whole_hbm_tokens == pytest.approx(4.29, abs=0.01)
    assert not derive_profile(gpu, model, 1, 65536).feasible  # 141 GB of BF16 weights on one 80 GB GPU

    tp8 = derive_profile(gpu, model, 8, 65536)
    tp4 = derive_profile(gpu, model, 4, 8192)
    assert kv_per_gpu / tp8.kv_tokens == pytest.approx(0.86, abs=0.01)  # vs the whole 8-GPU instance
    assert kv_per_gpu / (tp8.kv_tokens / 8) == pytest.approx(6.88, abs=0.01)  # vs one of its GPUs
    assert w_ms / tp8.iteration_base_ms == pytest.approx(0.48, abs=0.01)
    assert h_ms / tp4.per_slot_ms == pytest.approx(1.11, abs=0.01)
    # Full-occupancy iteration at the calibration's 65,536-token table: 8 + 0.65 x 16 ms.
    fleetopt_iteration_ms = w_ms + h_ms * (kv_per_gpu // 65536)
    assert fleetopt_iteration_ms / tp8.iteration_ms() == pytest.approx(0.32, abs=0.01)


def test_fleetopt_calibration_as_measured_overrides() -> None:
    calibration = HARDWARE_PROFILES["fleetopt_a100_llama3_70b"]
    it = calibration["iteration"]
    measured = ProfileOverrides(
        iteration_base_ms=it["w_ms"],
        per_slot_ms=it["h_ms_per_slot"],
        kv_tokens=calibration["slots"]["kv_tokens_per_gpu"],
        chunk_tokens=it["chunk_tokens"],
        source="FleetOpt paper calibration",
    )
    profile = derive_profile(calibration["gpu"], calibration["model"], 1, 65536, overrides=measured)
    assert profile.feasible and profile.slots == 16 and profile.kv_tokens == 1048576
    assert profile.iteration_ms() == pytest.approx(8.0 + 0.65 * 16)
    assert profile.chunk_tokens == 512
    assert profile.cost_per_instance_hour == pytest.approx(calibration["cost_per_gpu_hour"])
    assert profile.overridden == ("iteration_base_ms", "per_slot_ms", "kv_tokens", "chunk_tokens")
    assert "FleetOpt paper calibration" in profile.derivation
    assert "weights 141.20 GB exceed" in profile.derivation  # the derived verdict stays on record


# --- the derivation by hand -------------------------------------------------------------------------


def test_hand_computed_a100_x8_llama3_70b() -> None:
    p = derive_profile("A100-80GB", "Llama-3-70B", 8, 8192)
    activation = 8192 * 2 * (3 * 8192 + 3 * 28672 / 8)
    per_gpu = 0.9 * 80e9 - activation - (1.92e9 + 1.92e9)
    kv_tokens = math.floor((8 * per_gpu - 70.6e9 * 2) / 327680)
    assert p.kv_tokens == kv_tokens
    assert p.slots == kv_tokens // 8192 == 148
    bandwidth = 8 * 2.039e12 * 0.58
    weight_read = 141.2e9 / bandwidth * 1e3
    assert p.iteration_base_ms == pytest.approx(weight_read + 2 * 80 * 0.010)
    kv_read = 327680 * 8192 / bandwidth * 1e3
    allreduce = 2 * 80 * (2 * 7 / 8) * 8192 * 2 / (300e9 * 0.8) * 1e3
    compute = 2 * 70.6e9 / (8 * 312e12 * 0.66) * 1e3
    chord = max(0.0, 148 * compute - weight_read) / 148
    assert p.per_slot_ms == pytest.approx(kv_read + allreduce + chord)
    assert p.prefill_tokens_per_ms == pytest.approx(1 / (compute + allreduce))
    assert p.chunk_tokens == math.floor(p.iteration_ms() * p.prefill_tokens_per_ms)
    assert p.cost_per_instance_hour == pytest.approx(8 * 2.21)
    assert p.label == "A100-80GB x8" and p.feasible and p.overridden == ()


def test_linear_iteration_is_the_chord_of_the_roofline() -> None:
    # Llama-3-8B on one H200 at 1k tokens: ~800 slots, past the ridge (~234 slots) the step is compute bound.
    p = derive_profile("H200", "Llama-3-8B", 1, 1024)
    assert p.terms.compute_ms_per_slot > 0
    assert p.iteration_ms() == pytest.approx(p.step_ms(decode_slots=p.slots))
    assert p.iteration_ms(0) == pytest.approx(p.step_ms())
    for n in (1, p.slots // 3, p.slots // 2, p.slots - 1):
        assert p.iteration_ms(n) >= p.step_ms(decode_slots=n) - 1e-9


def test_context_fraction_scales_only_the_kv_read() -> None:
    full = derive_profile("H100-SXM", "Llama-3-70B", 4, 32768)
    half = derive_profile("H100-SXM", "Llama-3-70B", 4, 32768, assumptions=ProfileAssumptions(context_fraction=0.5))
    assert half.terms.kv_read_ms_per_slot == pytest.approx(full.terms.kv_read_ms_per_slot / 2)
    assert half.iteration_base_ms == full.iteration_base_ms and half.slots == full.slots


def test_mixture_of_experts_uses_active_params_for_flops_and_all_weights_for_memory() -> None:
    moe = get_model("Qwen3-235B-A22B")
    dense = dataclasses.replace(moe, active_params_billion=None)
    p_moe = derive_profile("H200", moe, 8, 8192)
    p_dense = derive_profile("H200", dense, 8, 8192)
    assert p_moe.terms.compute_ms_per_token == pytest.approx(p_dense.terms.compute_ms_per_token * 22 / 235)
    assert p_moe.kv_tokens == p_dense.kv_tokens and p_moe.iteration_base_ms == p_dense.iteration_base_ms


def test_kv_heads_are_replicated_beyond_tp_equal_kv_heads() -> None:
    moe = get_model("Qwen3-235B-A22B")  # 4 KV heads: at TP 8 each head lives on two GPUs
    p4 = derive_profile("H200", moe, 4, 8192)
    p8 = derive_profile("H200", moe, 8, 8192)
    assert "/ 192512 B)" in p4.derivation and "/ 385024 B)" in p8.derivation


# --- infeasible configurations and bad input --------------------------------------------------------


@pytest.mark.parametrize(
    ("gpu", "model", "tp", "window", "reason"),
    [
        ("A100-80GB", "Llama-3-70B", 1, 8192, "weights 141.20 GB exceed the 68.27 GB usable on 1 x A100-80GB"),
        ("A10G", "Llama-3-8B", 1, 131072, "KV budget of 20706 tokens holds no full window of 131072 tokens"),
        ("H100-SXM", "Llama-3-70B", 16, 8192, "tp 16 exceeds one 8-GPU node"),
        ("H100-SXM", "Llama-3-70B", 3, 8192, "tp 3 does not divide 8 KV heads"),
    ],
)
def test_infeasible_gives_zero_slots_and_a_reason(gpu: str, model: str, tp: int, window: int, reason: str) -> None:
    p = derive_profile(gpu, model, tp, window)
    assert not p.feasible and p.slots == 0
    assert p.infeasible_reason is not None and reason in p.infeasible_reason
    assert reason in p.derivation


def test_structurally_infeasible_profile_has_no_timing() -> None:
    p = derive_profile("H100-SXM", "Llama-3-70B", 16, 8192, overrides=ProfileOverrides(kv_tokens=10**6))
    assert not p.feasible and p.chunk_tokens == 0 and p.overridden == ()
    assert math.isnan(p.iteration_base_ms) and math.isnan(p.per_slot_ms)
    assert "ignored" in p.derivation


def test_gpu_without_link_data_is_infeasible_beyond_tp1() -> None:
    bare = GpuSpec("Bare-80", 80.0, 2.0, 300.0, 1.0, "test")
    assert derive_profile(bare, "Llama-3-8B", 1, 8192).feasible
    p = derive_profile(bare, "Llama-3-8B", 2, 8192)
    assert not p.feasible and "no interconnect data" in p.infeasible_reason


def test_model_without_widths_raises() -> None:
    narrow = ModelSpec("No-Widths", 32, 8, 128, 8.0, "test")
    with pytest.raises(InputError) as err:
        derive_profile("H100-SXM", narrow, 1, 8192)
    assert err.value.field == "model.hidden_size"


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: derive_profile("V100", "Llama-3-8B", 1, 8192), "gpu"),
        (lambda: derive_profile("H100-SXM", "GPT-5", 1, 8192), "model"),
        (lambda: derive_profile("H100-SXM", "Llama-3-8B", 0, 8192), "tp"),
        (lambda: derive_profile("H100-SXM", "Llama-3-8B", 2.0, 8192), "tp"),
        (lambda: derive_profile("H100-SXM", "Llama-3-8B", True, 8192), "tp"),
        (lambda: derive_profile("H100-SXM", "Llama-3-8B", 1, 0), "window_tokens"),
        (lambda: derive_profile("H100-SXM", "Llama-3-8B", 1, 8192, cost_per_gpu_hour=-1.0), "cost_per_gpu_hour"),
        (lambda: ProfileAssumptions(bandwidth_efficiency=0.0), "assumptions.bandwidth_efficiency"),
        (lambda: ProfileAssumptions(memory_utilisation=1.2), "assumptions.memory_utilisation"),
        (lambda: ProfileAssumptions(context_fraction=-0.5), "assumptions.context_fraction"),
        (lambda: ProfileAssumptions(runtime_overhead_gb_per_gpu=-1.0), "assumptions.runtime_overhead_gb_per_gpu"),
        (lambda: ProfileAssumptions(allreduce_latency_ms=math.inf), "assumptions.allreduce_latency_ms"),
        (lambda: ProfileAssumptions(activation_tokens=0), "assumptions.activation_tokens"),
        (lambda: ProfileAssumptions(weight_bytes_per_param=0.0), "assumptions.weight_bytes_per_param"),
        (lambda: ProfileOverrides(per_slot_ms=-0.1), "overrides.per_slot_ms"),
        (lambda: ProfileOverrides(slots=1.5), "overrides.slots"),
        (lambda: ProfileOverrides(chunk_tokens=0), "overrides.chunk_tokens"),
        (lambda: ProfileOverrides(slots=4, kv_tokens=4096), "overrides.slots"),
        (lambda: derive_profile("H100-SXM", "Llama-3-8B", 1, 8192).iteration_ms(-1), "active_slots"),
        (lambda: derive_profile("H100-SXM", "Llama-3-8B", 1, 8192).step_ms(prefill_tokens=-1), "prefill_tokens"),
    ],
)
def test_bad_input_names_the_field(call: Callable[[], object], field: str) -> None:
    with pytest.raises(InputError) as err:
        call()
    assert err.value.field == field


# --- overrides ------------------------------------------------------------------------------------


def test_slots_override_stands_for_full_windows() -> None:
    p = derive_profile("L4", "Llama-3-8B", 1, 8192, overrides=ProfileOverrides(slots=3, source="measured"))
    assert p.slots == 3 and p.kv_tokens == 3 * 8192 and p.feasible
    assert p.overridden == ("slots",)
    derived = derive_profile("L4", "Llama-3-8B", 1, 8192)
    assert p.iteration_base_ms == derived.iteration_base_ms  # timing still derived


def test_zero_measured_capacity_is_infeasible() -> None:
    p = derive_profile("H100-SXM", "Llama-3-8B", 1, 8192, overrides=ProfileOverrides(kv_tokens=4096))
    assert not p.feasible and "holds no full window" in p.infeasible_reason


@settings(max_examples=40, deadline=None)
@given(
    gpu=st.sampled_from(sorted(GPUS)),
    model=st.sampled_from(sorted(MODELS)),
    tp=st.sampled_from([1, 2, 4, 8]),
    window=st.sampled_from([2048, 8192, 32768]),
    w=st.floats(min_value=0.0, max_value=100.0),
    h=st.floats(min_value=0.0, max_value=10.0),
    kv=st.integers(min_value=0, max_value=10**7),
    chunk=st.integers(min_value=1, max_value=8192),
)
def test_overrides_are_respected(gpu: str, model: str, tp: int, window: int, w: float, h: float, kv: int, chunk: int) -> None:
    measured = ProfileOverrides(iteration_base_ms=w, per_slot_ms=h, kv_tokens=kv, chunk_tokens=chunk, source="bench")
    p = derive_profile(gpu, model, tp, window, overrides=measured)
    assert p.iteration_base_ms == w and p.per_slot_ms == h and p.chunk_tokens == chunk
    assert p.kv_tokens == kv and p.slots == (kv // window if kv >= window else 0)
    assert p.feasible == (kv >= window)
    assert "bench" in p.derivation


# --- properties -----------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    gpu=st.sampled_from(sorted(GPUS)),
    model=st.sampled_from(sorted(MODELS)),
    tp=st.sampled_from([1, 2, 4]),
    window=st.integers(min_value=256, max_value=1 << 18),
    extra_window=st.integers(min_value=0, max_value=1 << 18),
    extra_hbm_gb=st.floats(min_value=0.0, max_value=200.0),
)
def test_slots_monotone_in_window_tp_and_hbm(
    gpu: str, model: str, tp: int, window: int, extra_window: int, extra_hbm_gb: float
) -> None:
    base = derive_profile(gpu, model, tp, window)
    assert base.slots >= 0
    assert derive_profile(gpu, model, tp, window + extra_window).slots <= base.slots
    assert derive_profile(gpu, model, 2 * tp, window).slots >= base.slots
    bigger = dataclasses.replace(GPUS[gpu], hbm_gb=GPUS[gpu].hbm_gb + extra_hbm_gb)
    assert derive_profile(bigger, model, tp, window).slots >= base.slots


@settings(max_examples=40, deadline=None)
@given(
    gpu=st.sampled_from(sorted(GPUS)),
    model=st.sampled_from(sorted(MODELS)),
    tp=st.sampled_from([1, 2, 4, 8]),
    factor=st.floats(min_value=1.01, max_value=8.0),
)
def test_w_and_h_decrease_with_bandwidth(gpu: str, model: str, tp: int, factor: float) -> None:
    slow = derive_profile(gpu, model, tp, 8192)
    fast = derive_profile(dataclasses.replace(GPUS[gpu], hbm_tb_s=GPUS[gpu].hbm_tb_s * factor), model, tp, 8192)
    assert fast.terms.weight_read_ms < slow.terms.weight_read_ms
    assert fast.iteration_base_ms < slow.iteration_base_ms
    assert fast.terms.kv_read_ms_per_slot < slow.terms.kv_read_ms_per_slot


@settings(max_examples=40, deadline=None)
@given(gpu=st.sampled_from(sorted(GPUS)), model=st.sampled_from(sorted(MODELS)), tp=st.sampled_from([1, 2, 4, 8]))
def test_h_grows_with_window_and_w_does_not_depend_on_it(gpu: str, model: str, tp: int) -> None:
    short, long = derive_profile(gpu, model, tp, 4096), derive_profile(gpu, model, tp, 16384)
    assert long.iteration_base_ms == short.iteration_base_ms
    assert long.terms.kv_read_ms_per_slot == pytest.approx(4 * short.terms.kv_read_ms_per_slot)


# --- catalog-wide enumeration --------------------------------------------------------------------


def test_pool_profiles_skip_infeasible_and_keep_reasons() -> None:
    windows = (4096, 32768)
    grid = profile_grid("Llama-3-70B", tps=(1, 2, 4, 8), windows=windows)
    assert len(grid) == len(GPUS) * 4 * len(windows)
    feasible = pool_profiles("Llama-3-70B", tps=(1, 2, 4, 8), windows=windows)
    assert feasible == [p for p in grid if p.feasible]
    assert all(isinstance(p, GpuProfile) and p.slots >= 1 for p in feasible)
    skipped = {p.label for p in grid if not p.feasible}
    assert {"A100-80GB", "A100-80GB x2", "L4 x8", "H200"} <= skipped
    assert {"A100-80GB x4", "A100-80GB x8", "H200 x2", "MI300X"} <= {p.label for p in feasible}
    assert all(p.infeasible_reason for p in grid if not p.feasible)


def test_pool_profiles_apply_overrides_by_gpu_and_tp() -> None:
    measured = {("H100-SXM", 4): ProfileOverrides(iteration_base_ms=12.5, kv_tokens=500000, source="bench")}
    profiles = pool_profiles("Llama-3-70B", gpus=["H100-SXM", "a100-80gb"], tps=(4,), windows=(8192, 16384), overrides=measured)
    by_label = {(p.label, p.window_tokens): p for p in profiles}
    assert by_label[("H100-SXM x4", 8192)].iteration_base_ms == 12.5
    assert by_label[("H100-SXM x4", 16384)].slots == 500000 // 16384
    assert by_label[("A100-80GB x4", 8192)].overridden == ()


def test_grid_prices_replace_catalog_prices() -> None:
    grid = profile_grid("Llama-3-8B", gpus=["L4", "H100-SXM"], tps=(1, 2), prices={"L4": 0.8})
    by_label = {p.label: p.cost_per_instance_hour for p in grid}
    assert by_label["L4"] == pytest.approx(0.8) and by_label["L4 x2"] == pytest.approx(1.6)
    assert by_label["H100-SXM x2"] == pytest.approx(2 * GPUS["H100-SXM"].cost_per_gpu_hour)


def test_grid_refuses_per_window_slot_overrides_over_several_windows() -> None:
    with pytest.raises(InputError) as err:
        profile_grid("Llama-3-8B", gpus=["L4"], tps=(1,), windows=(4096, 8192), overrides={("L4", 1): ProfileOverrides(slots=2)})
    assert err.value.field == "overrides[('L4', 1)].slots"
    single = profile_grid("Llama-3-8B", gpus=["L4"], tps=(1,), windows=(4096,), overrides={("L4", 1): ProfileOverrides(slots=2)})
    assert single[0].slots == 2
