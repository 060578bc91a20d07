"""Hardware catalog: GPU and model specs, KV-cache slot formulas, instance cost.

Units: 1 GB = 1e9 bytes and 1 TB/s = 1e12 bytes/s throughout.  The vendors
below quote memory in GB; AWS lists the A10G as "24 GiB", read here as 24 GB,
the smaller of the two readings.  Throughput is dense BF16 tensor
TFLOPS, i.e. without 2:4 structured sparsity (NVIDIA datasheets print the
sparse figure, twice this, with an asterisk).

Interconnect (``interconnect``, ``interconnect_gb_s``) is what tensor
parallelism all-reduces over: the GPU-to-GPU bandwidth per GPU and per
direction, i.e. half the bidirectional figure the datasheets print.  The
model fields ``hidden_size`` and ``intermediate_size`` size the all-reduce
messages and the activation memory of :mod:`optfleet.hardware.profiles`.

Prices are representative public on-demand or marketplace rates per GPU-hour,
taken from the page named in each entry's ``source``.  They differ 2-4x between
providers and move month to month; override them per instance
(``cost_per_gpu_hour``) rather than trusting the defaults.

Slot formulas (FleetOpt, Chen et al. 2026): a slot is one request's KV cache at the
pool's context window ``C``.  From memory, one instance of ``tp`` GPUs holds

    kv_tokens = floor((tp * (u * M_gpu - R) - W_model) / b_kv)

tokens, where ``u`` is the memory utilisation, ``M_gpu`` the HBM bytes per GPU,
``R`` the bytes reserved per GPU (activations, CUDA graphs, runtime),
``W_model`` the weight bytes and ``b_kv = 2 * layers * kv_heads * head_dim *
dtype_bytes`` the KV bytes per token (multi-head latent attention:
``layers * (kv_lora_rank + qk_rope_head_dim) * dtype_bytes``); the instance
then has ``floor(kv_tokens / C)`` slots.  :mod:`optfleet.hardware.hf_config`
builds a :class:`ModelSpec` from a Hugging Face ``config.json``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType
from typing import Any

from optfleet.errors import InputError

_BYTES_PER_GB = 1e9


def check_positive_int(field: str, value: object) -> None:
    """InputError on ``field`` unless ``value`` is an int >= 1 (a bool is not a count)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(field, value, "must be an integer >= 1")


def check_positive_real(field: str, value: object) -> None:
    """InputError on ``field`` unless ``value`` is a finite number > 0 (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise InputError(field, value, "must be finite and > 0")


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator type (per GPU, not per board or node).

    ``hbm_gb`` is device memory in GB (1e9 bytes; GDDR for A10G/L4/L40S),
    ``hbm_tb_s`` peak memory bandwidth in TB/s, ``bf16_dense_tflops`` peak
    dense BF16 tensor throughput, ``cost_per_gpu_hour`` a representative
    on-demand price in USD, ``source`` the datasheet and price page used.
    ``interconnect`` is the GPU-to-GPU link family tensor parallelism uses
    (``"nvlink"``, ``"xgmi"`` or ``"pcie"``) and ``interconnect_gb_s`` its
    bandwidth per GPU and per direction in GB/s; both are None when unknown
    (a profile then refuses ``tp > 1``).  ``power_w`` is the board's maximum power (TDP) in watts from the
    datasheet named in ``power_source`` (None when unknown): what a power cap counts per GPU.
    """

    name: str
    hbm_gb: float
    hbm_tb_s: float
    bf16_dense_tflops: float
    cost_per_gpu_hour: float
    source: str
    interconnect: str | None = None
    interconnect_gb_s: float | None = None
    power_w: float | None = None
    power_source: str | None = None

    @property
    def hbm_bytes(self) -> float:
        """Device memory in bytes: ``hbm_gb * 1e9``."""
        return self.hbm_gb * _BYTES_PER_GB


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer, as far as KV-cache sizing and the engine model need it.

    ``layers``, ``kv_heads`` and ``head_dim`` are the Hugging Face config.json
    fields ``num_hidden_layers``, ``num_key_value_heads`` and ``head_dim`` (or
    ``hidden_size / num_attention_heads``); ``params_billion`` counts all
    weights (for a mixture-of-experts model, every expert: all must be
    resident).  ``hidden_size`` is config.json's ``hidden_size``;
    ``intermediate_size`` the MLP width one token passes through (for a
    mixture of experts, ``num_experts_per_tok * moe_intermediate_size`` plus
    any shared experts' width);
    ``active_params_billion`` the weights one token multiplies (None: all of
    them, a dense model).  The three are optional for KV sizing and required
    by :mod:`optfleet.hardware.profiles`.

    Optional, None by default (every use that predates them is unchanged):

    * ``attention_heads``: query heads, config.json's ``num_attention_heads``
      (prefill attention costs ``4 layers attention_heads head_dim`` FLOPs per
      query-key pair);
    * ``kv_elements_per_token_per_layer``: cached elements per token and layer
      when they are not ``2 kv_heads head_dim`` -- multi-head latent attention
      (DeepSeek-V2/V3) caches one compressed latent plus the shared RoPE key,
      ``kv_lora_rank + qk_rope_head_dim``, and is described with
      ``kv_heads = 1`` (one latent every query head reads, kept whole on every
      tensor-parallel GPU);
    * ``experts`` and ``experts_per_token``: routed experts per MoE layer and
      how many one token uses (None: a dense model);
    * ``architecture``: config.json's ``architectures[0]``;
    * ``weight_bytes_per_param``: the checkpoint's mean bytes per weight (2.0
      BF16/FP16, 1.0 FP8/INT8, ~0.5 4-bit; None: the caller's default);
    * ``kv_dtype_bytes``: bytes per cached KV element (None: the caller's
      default, 2 = BF16);
    * ``tied_embedding_params_billion``: the embedding matrix's parameters
      when the output layer shares it (``tie_word_embeddings``; counted once
      in ``params_billion``), None otherwise.
    """

    name: str
    layers: int
    kv_heads: int
    head_dim: int
    params_billion: float
    source: str
    hidden_size: int | None = None
    intermediate_size: int | None = None
    active_params_billion: float | None = None
    attention_heads: int | None = None
    kv_elements_per_token_per_layer: int | None = None
    experts: int | None = None
    experts_per_token: int | None = None
    architecture: str | None = None
    weight_bytes_per_param: float | None = None
    kv_dtype_bytes: int | None = None
    tied_embedding_params_billion: float | None = None

    def __post_init__(self) -> None:
        for name in ("attention_heads", "kv_elements_per_token_per_layer", "experts", "experts_per_token", "kv_dtype_bytes"):
            value = getattr(self, name)
            if value is not None:
                check_positive_int(f"model.{name}", value)
        if self.weight_bytes_per_param is not None:
            check_positive_real("model.weight_bytes_per_param", self.weight_bytes_per_param)
        if (self.experts is None) != (self.experts_per_token is None) or (self.experts or 0) < (self.experts_per_token or 0):
            raise InputError("model.experts_per_token", self.experts_per_token, f"needs experts >= it (experts = {self.experts})")

    @property
    def kv_elements_per_token(self) -> int:
        """Cached elements per token and layer: ``kv_elements_per_token_per_layer``, else ``2 kv_heads head_dim``."""
        if self.kv_elements_per_token_per_layer is not None:
            return self.kv_elements_per_token_per_layer
        return 2 * self.kv_heads * self.head_dim

    def kv_bytes_per_token(self, dtype_bytes: int | None = None) -> int:
        """KV-cache bytes per token: ``layers * e * dtype_bytes`` with ``e = 2 * kv_heads * head_dim``.

        The 2 counts K and V; an MLA model's ``e`` is its latent width
        (:attr:`kv_elements_per_token`).  ``dtype_bytes`` is 2 for BF16/FP16, 1
        for FP8; None takes the spec's ``kv_dtype_bytes``, else 2.
        """
        if dtype_bytes is None:
            dtype_bytes = 2 if self.kv_dtype_bytes is None else self.kv_dtype_bytes
        if dtype_bytes < 1:
            raise InputError("dtype_bytes", dtype_bytes, "must be >= 1")
        return self.layers * self.kv_elements_per_token * dtype_bytes

    def weight_bytes(self, bytes_per_param: float | None = None) -> float:
        """Weight bytes: ``params_billion * 1e9 * bytes_per_param``.

        ``bytes_per_param`` None takes the spec's ``weight_bytes_per_param``, else 2.0 (BF16).
        """
        if bytes_per_param is None:
            bytes_per_param = 2.0 if self.weight_bytes_per_param is None else self.weight_bytes_per_param
        if not bytes_per_param > 0:
            raise InputError("bytes_per_param", bytes_per_param, "must be > 0")
        return self.params_billion * 1e9 * bytes_per_param

    @property
    def active_params(self) -> float:
        """Weights one token multiplies: ``active_params_billion`` (else ``params_billion``) x 1e9."""
        active = self.params_billion if self.active_params_billion is None else self.active_params_billion
        return active * 1e9

    def tp_problem(self, tp: int) -> str | None:
        """Why tensor parallelism of degree ``tp`` cannot shard this model's KV cache, or None.

        Each GPU of a TP group holds whole KV heads: ``kv_heads / tp`` of them when ``tp`` divides ``kv_heads``,
        or one head replicated ``tp / kv_heads`` times when ``tp`` is a multiple of ``kv_heads`` (vLLM's rule).
        Any other degree would split a head across GPUs, which no serving engine does.  Query heads are never
        replicated: when ``attention_heads`` is known, ``tp`` must divide it (vLLM asserts
        ``num_attention_heads % tp == 0``).
        """
        if self.kv_heads % tp != 0 and tp % self.kv_heads != 0:
            return f"does not divide {self.kv_heads} KV heads nor is a multiple of them"
        if self.attention_heads is not None and self.attention_heads % tp != 0:
            return f"does not divide {self.attention_heads} query heads"
        return None


_PRICE_NOTE = "prices vary by provider, region and month"

_GPU_LIST = (
    GpuSpec(
        # NVIDIA publishes no A10G datasheet (AWS-only part). Memory and
        # bandwidth are shared with the A10 (24 GB GDDR6, 600 GB/s; AWS lists
        # "24 GiB", read here as 24 GB, the conservative reading). Tensor
        # throughput is lower than the A10's 125 dense BF16 TFLOPS; ~70 is the
        # figure commonly quoted for the A10G (uncertain).
        name="A10G",
        hbm_gb=24.0,
        hbm_tb_s=0.6,
        bf16_dense_tflops=70.0,
        cost_per_gpu_hour=1.006,
        source=(
            "AWS EC2 G5 docs (24 GB GDDR6, 600 GB/s, shared with NVIDIA A10); "
            "~70 dense BF16 TFLOPS as commonly quoted for A10G (Baseten, A10 vs "
            "A10G), uncertain; interconnect: PCIe Gen4 x16, 64 GB/s "
            "bidirectional (NVIDIA A10 datasheet; G5 has no NVLink); price: AWS "
            "EC2 g5.xlarge on-demand, us-east-1, 1 GPU incl. host; " + _PRICE_NOTE
        ),
        interconnect="pcie",
        interconnect_gb_s=32.0,
        power_w=300.0,
        power_source="AWS EC2 G5 (A10G power limit 300 W as nvidia-smi reports it; NVIDIA publishes no A10G datasheet)",
    ),
    GpuSpec(
        # Datasheet: 24 GB GDDR6, 300 GB/s, BF16 242 TFLOPS with sparsity.
        name="L4",
        hbm_gb=24.0,
        hbm_tb_s=0.3,
        bf16_dense_tflops=121.0,
        cost_per_gpu_hour=0.44,
        source=(
            "NVIDIA L4 datasheet (24 GB GDDR6, 300 GB/s, BF16 242 TFLOPS "
            "sparse -> 121 dense; PCIe Gen4 x16, 64 GB/s bidirectional, no "
            "NVLink); price: RunPod L4 per-GPU rate (deploybase.ai RunPod "
            "pricing guide, Mar 2026); " + _PRICE_NOTE
        ),
        interconnect="pcie",
        interconnect_gb_s=32.0,
        power_w=72.0,
        power_source="NVIDIA L4 datasheet, max thermal design power 72 W",
    ),
    GpuSpec(
        # Datasheet: 48 GB GDDR6, 864 GB/s, BF16 362.05 dense / 733 sparse.
        name="L40S",
        hbm_gb=48.0,
        hbm_tb_s=0.864,
        bf16_dense_tflops=362.05,
        cost_per_gpu_hour=0.79,
        source=(
            "NVIDIA L40S datasheet (48 GB GDDR6, 864 GB/s, BF16 362.05 dense; "
            "PCIe Gen4 x16, 64 GB/s bidirectional, no NVLink); price: RunPod "
            "L40S per-GPU rate (deploybase.ai RunPod pricing guide, Mar 2026); "
            + _PRICE_NOTE
        ),
        interconnect="pcie",
        interconnect_gb_s=32.0,
        power_w=350.0,
        power_source="NVIDIA L40S datasheet, max power consumption 350 W",
    ),
    GpuSpec(
        # A100 40GB SXM4: HBM2, 1,555 GB/s, BF16 312 dense / 624 sparse.
        name="A100-40GB",
        hbm_gb=40.0,
        hbm_tb_s=1.555,
        bf16_dense_tflops=312.0,
        cost_per_gpu_hour=1.29,
        source=(
            "NVIDIA A100 datasheet (40 GB HBM2 SXM4, 1,555 GB/s, BF16 312 "
            "dense, NVLink 3 600 GB/s bidirectional per GPU); price: Lambda "
            "on-demand 1x A100 40GB SXM4 list price (not re-verified; check "
            "before use); " + _PRICE_NOTE
        ),
        interconnect="nvlink",
        interconnect_gb_s=300.0,
        power_w=400.0,
        power_source="NVIDIA A100 datasheet, SXM max TDP 400 W",
    ),
    GpuSpec(
        # A100 80GB SXM4: HBM2e, 2,039 GB/s, BF16 312 dense / 624 sparse.
        # Price fixed at the FleetOpt paper's calibration, 2.21 $/GPU-h, so the
        # paper's fleet costs reproduce.
        name="A100-80GB",
        hbm_gb=80.0,
        hbm_tb_s=2.039,
        bf16_dense_tflops=312.0,
        cost_per_gpu_hour=2.21,
        source=(
            "NVIDIA A100 datasheet (80 GB HBM2e SXM4, 2,039 GB/s, BF16 312 "
            "dense, NVLink 3 600 GB/s bidirectional per GPU); price: 2.21 "
            "$/GPU-h, the FleetOpt paper's calibration (kept so published fleet "
            "costs reproduce); " + _PRICE_NOTE
        ),
        interconnect="nvlink",
        interconnect_gb_s=300.0,
        power_w=400.0,
        power_source="NVIDIA A100 datasheet, SXM max TDP 400 W",
    ),
    GpuSpec(
        # H100 SXM5: 80 GB HBM3, 3.35 TB/s; datasheet BF16 1,979 with sparsity,
        # Hopper whitepaper 989.4 dense.
        name="H100-SXM",
        hbm_gb=80.0,
        hbm_tb_s=3.35,
        bf16_dense_tflops=989.4,
        cost_per_gpu_hour=2.69,
        source=(
            "NVIDIA H100 datasheet (SXM: 80 GB HBM3, 3.35 TB/s, BF16 1,979 "
            "sparse -> 989.4 dense per Hopper whitepaper; NVLink 4 900 GB/s "
            "bidirectional per GPU); price: RunPod Secure Cloud H100 SXM "
            "on-demand (Spheron / deploybase.ai, 2026); " + _PRICE_NOTE
        ),
        interconnect="nvlink",
        interconnect_gb_s=450.0,
        power_w=700.0,
        power_source="NVIDIA H100 datasheet, SXM max TDP up to 700 W (configurable)",
    ),
    GpuSpec(
        # H200 SXM: 141 GB HBM3e, 4.8 TB/s; same GH100 compute as H100 SXM.
        name="H200",
        hbm_gb=141.0,
        hbm_tb_s=4.8,
        bf16_dense_tflops=989.4,
        cost_per_gpu_hour=3.59,
        source=(
            "NVIDIA H200 datasheet (SXM: 141 GB HBM3e, 4.8 TB/s, BF16 1,979 "
            "sparse -> 989.4 dense, same compute as H100 SXM; NVLink 4 900 "
            "GB/s bidirectional per GPU); price: RunPod H200 per-GPU rate "
            "(deploybase.ai, Mar 2026); " + _PRICE_NOTE
        ),
        interconnect="nvlink",
        interconnect_gb_s=450.0,
        power_w=700.0,
        power_source="NVIDIA H200 datasheet, SXM max TDP up to 700 W (configurable)",
    ),
    GpuSpec(
        # HGX/DGX B200: 180 GB HBM3e per GPU (DGX B200: 1,440 GB over 8 GPUs;
        # 192 GB is the raw capacity of the 8 stacks, not what is exposed).
        # Bandwidth 8 TB/s (DGX B200: 64 TB/s over 8 GPUs; one HGX B200 table
        # revision says 7.7 TB/s). BF16 4.5 PFLOPS sparse -> 2,250 dense (HGX,
        # 1,000 W configuration).
        name="B200",
        hbm_gb=180.0,
        hbm_tb_s=8.0,
        bf16_dense_tflops=2250.0,
        cost_per_gpu_hour=5.98,
        source=(
            "NVIDIA HGX/DGX B200 datasheet (180 GB HBM3e per GPU, 8 TB/s, "
            "BF16 4.5 PFLOPS sparse -> 2,250 dense; NVLink 5 1.8 TB/s "
            "bidirectional per GPU); price: RunPod B200 per-GPU rate "
            "(deploybase.ai, Mar 2026); " + _PRICE_NOTE
        ),
        interconnect="nvlink",
        interconnect_gb_s=900.0,
        power_w=1000.0,
        power_source="NVIDIA HGX B200 datasheet, 1,000 W per GPU configuration",
    ),
    GpuSpec(
        # AMD: 192 GB HBM3, 5.3 TB/s, peak BF16 1,307.4 dense (2,614.9 sparse).
        name="MI300X",
        hbm_gb=192.0,
        hbm_tb_s=5.3,
        bf16_dense_tflops=1307.4,
        cost_per_gpu_hour=1.85,
        source=(
            "AMD Instinct MI300X datasheet (192 GB HBM3, 5.3 TB/s, BF16 "
            "1,307.4 dense; Infinity Fabric 7 links x 128 GB/s bidirectional = "
            "896 GB/s per GPU); price: Vultr MI300X on-demand (cliffcenter.com "
            "AMD inference economics note, May 2026); " + _PRICE_NOTE
        ),
        interconnect="xgmi",
        interconnect_gb_s=448.0,
        power_w=750.0,
        power_source="AMD Instinct MI300X datasheet, peak board power 750 W",
    ),
)

_MODEL_LIST = (
    ModelSpec(
        # num_hidden_layers 32, num_key_value_heads 8, 4096 / 32 heads = 128.
        name="Llama-3-8B",
        layers=32,
        kv_heads=8,
        head_dim=128,
        params_billion=8.03,
        source=(
            "meta-llama/Meta-Llama-3-8B config.json (num_hidden_layers 32, "
            "num_key_value_heads 8, hidden_size 4096 / num_attention_heads 32 "
            "= 128, intermediate_size 14336, architectures LlamaForCausalLM); "
            "8.03B params (model card)"
        ),
        hidden_size=4096,
        intermediate_size=14336,
        attention_heads=32,
        architecture="LlamaForCausalLM",
    ),
    ModelSpec(
        # num_hidden_layers 80, num_key_value_heads 8, 8192 / 64 heads = 128.
        name="Llama-3-70B",
        layers=80,
        kv_heads=8,
        head_dim=128,
        params_billion=70.6,
        source=(
            "meta-llama/Meta-Llama-3-70B config.json (num_hidden_layers 80, "
            "num_key_value_heads 8, hidden_size 8192 / num_attention_heads 64 "
            "= 128, intermediate_size 28672, architectures LlamaForCausalLM); "
            "70.6B params (model card)"
        ),
        hidden_size=8192,
        intermediate_size=28672,
        attention_heads=64,
        architecture="LlamaForCausalLM",
    ),
    ModelSpec(
        # num_hidden_layers 64, num_key_value_heads 8, head_dim 128 (explicit).
        name="Qwen3-32B",
        layers=64,
        kv_heads=8,
        head_dim=128,
        params_billion=32.8,
        source=(
            "Qwen/Qwen3-32B config.json (num_hidden_layers 64, "
            "num_key_value_heads 8, num_attention_heads 64, head_dim 128, "
            "hidden_size 5120, intermediate_size 25600, architectures "
            "Qwen3ForCausalLM); 32.8B params (model card)"
        ),
        hidden_size=5120,
        intermediate_size=25600,
        attention_heads=64,
        architecture="Qwen3ForCausalLM",
    ),
    ModelSpec(
        # MoE: num_hidden_layers 94, num_key_value_heads 4, head_dim 128;
        # 235B total params (all resident), 22B active per token.
        name="Qwen3-235B-A22B",
        layers=94,
        kv_heads=4,
        head_dim=128,
        params_billion=235.0,
        source=(
            "Qwen/Qwen3-235B-A22B config.json (num_hidden_layers 94, "
            "num_key_value_heads 4, num_attention_heads 64, head_dim 128, "
            "hidden_size 4096, num_experts 128, num_experts_per_tok 8 x "
            "moe_intermediate_size 1536 = 12288 per token, architectures "
            "Qwen3MoeForCausalLM); 235B total params, 22B active per token "
            "(model card); weights use the total"
        ),
        hidden_size=4096,
        intermediate_size=12288,
        active_params_billion=22.0,
        attention_heads=64,
        experts=128,
        experts_per_token=8,
        architecture="Qwen3MoeForCausalLM",
    ),
)

GPUS: Mapping[str, GpuSpec] = MappingProxyType({g.name: g for g in _GPU_LIST})
MODELS: Mapping[str, ModelSpec] = MappingProxyType({m.name: m for m in _MODEL_LIST})


def _normalise(name: str) -> str:
    """Lookup key: lower case, without '-', '_' or whitespace."""
    return re.sub(r"[-_\s]", "", name).lower()


_GPU_KEYS = {_normalise(n): g for n, g in GPUS.items()}
_MODEL_KEYS = {_normalise(n): m for n, m in MODELS.items()}


def _lookup(keys: Mapping[str, Any], known: Mapping[str, Any], name: str, field: str, kind: str) -> Any:
    spec = keys.get(_normalise(name)) if isinstance(name, str) else None
    if spec is None:
        raise InputError(field, name, f"unknown {kind}; known: " + ", ".join(known))
    return spec


def get_gpu(name: str, field: str = "hardware.gpu") -> GpuSpec:
    """The GPU called ``name`` (case-insensitive; '-', '_' and spaces ignored).

    Raises :class:`InputError` on ``field`` listing the known names otherwise.
    """
    return _lookup(_GPU_KEYS, GPUS, name, field, "GPU")


def get_model(name: str, field: str = "hardware.model") -> ModelSpec:
    """The model called ``name`` (case-insensitive; '-', '_' and spaces ignored).

    Raises :class:`InputError` on ``field`` listing the known names otherwise.
    """
    return _lookup(_MODEL_KEYS, MODELS, name, field, "model")


def check_tensor_parallel(model: ModelSpec, tp: object, field: str = "hardware.tp") -> None:
    """InputError on ``field`` unless ``tp`` is a TP degree that can shard ``model``'s KV heads
    (:meth:`ModelSpec.tp_problem`), whatever the rest of the hardware block gives (a slot table, a KV budget)."""
    check_positive_int(field, tp)
    assert isinstance(tp, int)
    problem = model.tp_problem(tp)
    if problem is not None:
        raise InputError(field, tp, f"{model.name}: tp {tp} {problem} (each GPU must hold whole heads)")


def slots_from_kv_tokens(kv_tokens_per_gpu: int, window_tokens: int) -> int:
    """Slots per GPU from a KV budget: ``floor(kv_tokens_per_gpu / window_tokens)``."""
    if not kv_tokens_per_gpu >= 0:
        raise InputError("kv_tokens_per_gpu", kv_tokens_per_gpu, "must be >= 0")
    check_positive_int("window_tokens", window_tokens)
    return int(kv_tokens_per_gpu // window_tokens)


def kv_tokens_from_memory(
    gpu: GpuSpec,
    model: ModelSpec,
    tp: int = 1,
    memory_utilisation: float = 0.90,
    reserved_gb_per_gpu: float = 0.0,
    weight_bytes_per_param: float = 2.0,
    kv_dtype_bytes: int = 2,
) -> int:
    """KV tokens one instance of ``tp`` GPUs holds after loading the weights.

    ``floor((tp * (u * M_gpu - R) - W_model) / b_kv)``, clipped at 0, with
    ``u = memory_utilisation``, ``M_gpu = gpu.hbm_bytes``, ``R =
    reserved_gb_per_gpu * 1e9``, ``W_model = model.weight_bytes(
    weight_bytes_per_param)`` and ``b_kv = model.kv_bytes_per_token(
    kv_dtype_bytes)``.  0 means the model does not fit.
    """
    check_positive_int("tp", tp)
    if not 0 < memory_utilisation <= 1:
        raise InputError("memory_utilisation", memory_utilisation, "must be in (0, 1]")
    if not (math.isfinite(reserved_gb_per_gpu) and reserved_gb_per_gpu >= 0):
        raise InputError("reserved_gb_per_gpu", reserved_gb_per_gpu, "must be finite and >= 0")
    if not (math.isfinite(weight_bytes_per_param) and weight_bytes_per_param > 0):
        raise InputError(
            "weight_bytes_per_param", weight_bytes_per_param, "must be finite and > 0"
        )
    check_positive_int("kv_dtype_bytes", kv_dtype_bytes)
    free_bytes = tp * (memory_utilisation * gpu.hbm_bytes - reserved_gb_per_gpu * _BYTES_PER_GB)
    free_bytes -= model.weight_bytes(weight_bytes_per_param)
    return max(0, math.floor(free_bytes / model.kv_bytes_per_token(kv_dtype_bytes)))


def slots_from_memory(
    gpu: GpuSpec,
    model: ModelSpec,
    window_tokens: int,
    tp: int = 1,
    memory_utilisation: float = 0.90,
    reserved_gb_per_gpu: float = 0.0,
    weight_bytes_per_param: float = 2.0,
    kv_dtype_bytes: int = 2,
) -> int:
    """Slots per instance: ``floor(kv_tokens_from_memory(...) / window_tokens)``.

    0 when the model does not fit or a single window does not; callers turn 0
    into an error.
    """
    check_positive_int("window_tokens", window_tokens)
    kv_tokens = kv_tokens_from_memory(
        gpu,
        model,
        tp=tp,
        memory_utilisation=memory_utilisation,
        reserved_gb_per_gpu=reserved_gb_per_gpu,
        weight_bytes_per_param=weight_bytes_per_param,
        kv_dtype_bytes=kv_dtype_bytes,
    )
    return kv_tokens // window_tokens


def instance_cost_per_hour(
    gpu: GpuSpec, tp: int = 1, cost_per_gpu_hour: float | None = None
) -> float:
    """USD per instance-hour: ``tp * price``.

    ``price`` is ``cost_per_gpu_hour`` when given, else ``gpu.cost_per_gpu_hour``.
    """
    check_positive_int("tp", tp)
    price = gpu.cost_per_gpu_hour if cost_per_gpu_hour is None else cost_per_gpu_hour
    if not price >= 0:
        raise InputError("cost_per_gpu_hour", price, "must be >= 0")
    return tp * price


def catalog_rows() -> list[dict[str, Any]]:
    """One row per GPU, then per model, for a CLI table.

    Keys: ``kind`` ("gpu" or "model"), ``name``, the numeric fields (models
    also get ``kv_bytes_per_token`` at BF16), ``source`` last.
    """
    rows: list[dict[str, Any]] = []
    for gpu in GPUS.values():
        row = {"kind": "gpu", **asdict(gpu)}
        power_source = row.pop("power_source")
        row["source"] = row.pop("source") + (f"; power: {power_source}" if power_source else "")
        rows.append(row)
    for model in MODELS.values():
        row = {"kind": "model", **asdict(model)}
        source = row.pop("source")
        row["kv_bytes_per_token"] = model.kv_bytes_per_token()
        row["source"] = source
        rows.append(row)
    return rows
