"""Typed schema of a ``kind: fleet`` instance file (validated with pydantic).

Units are in the field names.  Every model forbids unknown keys, so a typo is
an error naming the field rather than a silently ignored setting.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from optfleet.engine.step import AFFINE_FIELDS, MIN_BASE_MS
from optfleet.instance.shared_schema import (
    AvailabilityConstraint,
    GpuCount,
    GpuMixConstraint,
    INSTANCE_COUNT_RENAMED,
    GpusPerInstance,
    InstanceCount,
    Integer,
    MaxTypesConstraint,
    Number,
    PlanParts,
    Real,
    RequestRate,
    Strict,
    Tokens,
    at_most,
    refuse_renamed,
)

MAX_SLOTS_PER_INSTANCE = 1_000_000
"""KV slots of one GPU instance in a slot table: at most a million, the number of servers up to which the Erlang
formulas (optfleet.queueing.erlang) are stable; one instance with more slots is already a pool beyond them."""

Slots = Annotated[Integer, Field(ge=0), at_most(MAX_SLOTS_PER_INSTANCE, "slots", "the Erlang formulas are stable up to 1e6 servers")]

MAX_GAMMA = 100.0
"""Compression ratios are at most 100: five times the largest ratio prompt compressors report (LLMLingua, 20x).
With ``gamma_step`` it also bounds the ratio grid (:data:`MAX_GAMMA_POINTS`)."""

Gamma = Annotated[Real, Field(ge=1.0), at_most(MAX_GAMMA, "x compression", "5x the largest ratio prompt compressors report")]

MAX_GAMMA_POINTS = 1000
"""Ratios in the grid ``1, 1 + gamma_step, ..., gamma_max``: each one is a column of the sweep's candidate tables
(one per boundary), so 1,000 ratios cost about 0.3 GB and two seconds on the Azure 2023 instance and 10,000 cost
1.3 GB and six; the default grid has 11."""


class LengthsSpec(Strict):
    """Where request lengths come from: exactly one of a CDF file, an inline CDF, or trace file(s).  A file is a
    path (relative to the instance) or a dataset's file, ``dataset:NAME/PART``; ``trace_file: dataset:NAME`` reads
    every file of the dataset (``optfleet data list``)."""

    cdf_file: str | None = None
    cdf: list[list[Number]] | None = None  # checked by optfleet.problems.fleet.workload.cdf (integers kept exact)
    trace_file: Annotated[list[str], Field(min_length=1)] | str | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "LengthsSpec":
        given = [k for k in ("cdf_file", "cdf", "trace_file") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of cdf_file, cdf, trace_file (got {given or 'none'})")
        return self


class SplitSpec(Strict):
    """How ``L_total`` divides into input and output tokens (see optfleet.problems.fleet.workload.mix)."""

    rule: Literal["from_trace", "fixed_output_fraction", "output_fraction_normal"] = "fixed_output_fraction"
    output_fraction: Real = Field(0.2, gt=0.0, lt=1.0)
    mean: Real = Field(0.10, gt=0.0, lt=1.0)
    sd: Real = Field(0.05, ge=0.0)
    quadrature_nodes: Integer = Field(16, ge=1, le=256)


class WorkloadSpec(Strict):
    rate_rps: RequestRate = Field(gt=0.0)
    lengths: LengthsSpec
    split: SplitSpec = SplitSpec()


StepCoefficient = Annotated[Real, Field(ge=0.0), at_most(1e5, "ms", "a 100 s iteration")]
"""An iteration-time term in ms: at most 100 s, beyond any real forward pass (1e308 overflowed the tables to inf)."""


class IterationSpec(Strict):
    """Iteration time ``t_iter = W + H n_max`` (flat) or ``W + H n_max L_total / L_scale`` (length_scaled).

    ``w_ms`` / ``h_ms_per_slot`` left out are derived from first principles
    (optfleet/hardware/profiles.py: weight and KV bytes over effective bandwidth).
    """

    w_ms: StepCoefficient | None = Field(None, gt=0.0)  # an iteration always takes time: W = 0 makes the batching fixed point 0
    h_ms_per_slot: StepCoefficient | None = None
    chunk_tokens: Tokens = Field(512, gt=0)
    scaling: Literal["flat", "length_scaled"] = "flat"
    length_scale_tokens: Tokens = Field(8192, gt=0)


class MemorySlotsSpec(Strict):
    """Slots from memory: ``floor((tp (u HBM - reserved) - weights) / (kv_bytes_per_token C))``."""

    memory_utilisation: Real = Field(0.90, gt=0.0, le=1.0)
    reserved_gb_per_gpu: Real = Field(0.0, ge=0.0)
    weight_bytes_per_param: Real = Field(2.0, gt=0.0)
    kv_dtype_bytes: Integer = Field(2, gt=0, le=8)  # 1 (fp8) to 4 (fp32); 8 leaves room for fp64


class SlotsSpec(Strict):
    """KV slots per GPU instance at a context window C: exactly one rule.

    * ``table``: explicit ``{window_tokens: slots}``;
    * ``kv_tokens_per_gpu``: ``floor(kv_tokens_per_gpu / C)``;
    * ``from_memory``: derived from the catalog's HBM and the model's KV size;
    * ``formula: fleetsim``: inference-fleet-sim's ``min(128*8192//C, 65536//ceil(C/16))``;
    * ``formula: profile`` (the default): the first-principles profile's KV capacity
      (optfleet/hardware/profiles.py: vLLM's memory accounting with activation and runtime reserves).
    """

    table: dict[Tokens, Slots] | None = None
    kv_tokens_per_gpu: Tokens | None = Field(None, gt=0)
    from_memory: MemorySlotsSpec | None = None
    formula: Literal["fleetsim", "profile"] | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> "SlotsSpec":
        given = [k for k in ("table", "kv_tokens_per_gpu", "from_memory", "formula") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of table, kv_tokens_per_gpu, from_memory, formula (got {given or 'none'})")
        return self


class EngineLimitsSpec(Strict):
    """A serving engine's batch limits (optfleet/problems/fleet/engine_limits.py): slots per instance
    ``min(KV slots, max_num_seqs)``, prefill chunk ``min(chunk_tokens, max_num_batched_tokens)``;
    ``defaults: vllm`` fills what is not given with vLLM's OpenAI-server defaults for the GPU.
    Left out: no limits (the FleetOpt paper's model)."""

    defaults: Literal["vllm"] | None = None
    max_num_seqs: Slots | None = Field(None, gt=0)
    max_num_batched_tokens: Tokens | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _consistent(self) -> "EngineLimitsSpec":
        if self.defaults is None and self.max_num_seqs is None and self.max_num_batched_tokens is None:
            raise ValueError("give max_num_seqs, max_num_batched_tokens or defaults: vllm (or leave the engine block out)")
        if self.max_num_seqs is not None and self.max_num_batched_tokens is not None and self.max_num_batched_tokens < self.max_num_seqs:
            raise ValueError(f"max_num_batched_tokens {self.max_num_batched_tokens} is below max_num_seqs {self.max_num_seqs}: "
                             "every running sequence needs a token in an iteration (vLLM refuses this too)")
        return self


Efficiency = Annotated[Real, Field(ge=0.01, le=1.0)]  # a share of peak; below 1 % is a misconfiguration, not a GPU


class PerformanceSpec(Strict):
    """Where an iteration's time comes from under ``preset: engine`` (optfleet/engine/): one source.

    * ``roofline`` (default): first principles from the GPU's and the model's specs (engine/roofline.py); the
      efficiency factors default to the calibrated values of optfleet/hardware/profiles.py;
    * ``measured``: NVIDIA aiconfigurator's per-operation database measured on real GPUs (engine/measured.py; the
      ``measured`` extra): ``system`` (default: the GPU's, e.g. ``h100_sxm``), ``backend``, ``version`` (default:
      the database's current one), ``model`` (a Hugging Face id it bundles, or a folder holding a config.json), and
      for a mixture of experts ``ep``; the ``*_quant`` modes default to the checkpoint's;
    * ``fit``: a least-squares fit to the user's measurements (engine/fit.py): ``file`` (one or several: tables of
      measured iterations, or vLLM ``bench serve``, AIPerf or GuideLLM result files), ``fixed`` pins coefficients;
    * ``affine``: the iteration time given directly, ``base_ms + per_seq_ms b + per_kv_token_ms k +
      per_prefill_token_ms p + per_prefill_pair_ms pairs(p, o)`` (engine/step.py).
    """

    source: Literal["roofline", "measured", "fit", "affine"] = "roofline"
    bandwidth_efficiency: Efficiency | None = None
    compute_efficiency: Efficiency | None = None
    allreduce_bandwidth_efficiency: Efficiency | None = None
    system: str | None = None
    backend: Literal["vllm", "sglang", "trtllm"] | None = None
    version: str | None = None
    model: str | None = None
    ep: GpusPerInstance | None = Field(None, ge=1)
    gemm_quant: str | None = None
    moe_quant: str | None = None
    kvcache_quant: str | None = None
    fmha_quant: str | None = None
    file: Annotated[list[str], Field(min_length=1)] | str | None = None
    fixed: dict[Literal["base_ms", "per_seq_ms", "per_kv_token_ms", "per_prefill_token_ms", "per_prefill_pair_ms"], StepCoefficient] | None = None
    base_ms: Annotated[Real, Field(ge=MIN_BASE_MS), at_most(1e5, "ms", "a 100 s iteration")] | None = None
    per_seq_ms: StepCoefficient | None = None
    per_kv_token_ms: StepCoefficient | None = None
    per_prefill_token_ms: StepCoefficient | None = None
    per_prefill_pair_ms: StepCoefficient | None = None

    @model_validator(mode="after")
    def _fields_of_the_source(self) -> "PerformanceSpec":
        own = {
            "roofline": ("bandwidth_efficiency", "compute_efficiency", "allreduce_bandwidth_efficiency"),
            "measured": ("system", "backend", "version", "model", "ep", "gemm_quant", "moe_quant", "kvcache_quant", "fmha_quant"),
            "fit": ("file", "fixed"),
            "affine": AFFINE_FIELDS,
        }
        foreign = [k for source, names in own.items() if source != self.source for k in names if getattr(self, k) is not None]
        if foreign:
            raise ValueError(f"{', '.join(foreign)} do not apply to source {self.source}")
        if self.source == "affine" and self.base_ms is None:
            raise ValueError("source affine needs base_ms (and any of per_seq_ms, per_kv_token_ms, per_prefill_token_ms, "
                             "per_prefill_pair_ms; those left out are 0)")
        if self.source == "fit" and self.file is None:
            raise ValueError("source fit needs file: a table of measured iterations or a serving benchmark's results (or a list of them)")
        if self.source == "measured" and self.model is None:
            raise ValueError("source measured needs model: the Hugging Face id of the measured model (or a folder holding its config.json)")
        return self


class ModelOnGpusSpec(Strict):
    """A model served on ``tp`` GPUs of one type: catalog names (or a model's ``config.json`` in ``config_json``, read
    locally: ``model`` then only names it) and where iteration times come from under the engine model
    (``performance``).  The fleet's ``hardware`` block extends it; a placement server's ``hardware`` is one."""

    gpu: str
    model: str | None = None
    config_json: str | None = None
    tp: GpusPerInstance = Field(1, ge=1)
    performance: PerformanceSpec = PerformanceSpec()

    @model_validator(mode="after")
    def _a_model(self) -> "ModelOnGpusSpec":
        if self.model is None and self.config_json is None:
            raise ValueError("give model (a catalog name: optfleet catalog lists them) or config_json (a Hugging Face model's config.json)")
        return self


class HardwareSpec(ModelOnGpusSpec):
    """One GPU configuration (:class:`ModelOnGpusSpec`) with its iteration constants, slot rule, engine limits and
    an optional named ``profile``; ``performance`` applies under ``preset: engine``."""

    profile: str | None = None
    iteration: IterationSpec = IterationSpec()
    slots: SlotsSpec = SlotsSpec(formula="profile")
    engine: EngineLimitsSpec | None = None


class CatalogOverrideSpec(Strict):
    """Measured numbers replacing the derived ones for one GPU type (all TP degrees, or one)."""

    gpu: str
    tp: GpusPerInstance | None = Field(None, ge=1)
    w_ms: StepCoefficient | None = Field(None, gt=0.0)
    h_ms_per_slot: StepCoefficient | None = None
    kv_tokens_per_gpu: Tokens | None = Field(None, gt=0)
    cost_per_gpu_hour: Real | None = Field(None, gt=0.0)


class GpuCatalogSpec(Strict):
    """Catalog-wide pool options: every GPU type x TP degree x window (the FleetOpt model over a GPU catalog).

    Each (gpu, tp) serves ``hardware.model`` with ``hardware.iteration.chunk_tokens``
    (one prefill chunk for every option, as the MILP's floor levels need); its
    slots and W/H come from the first-principles profile unless overridden, its
    price from the catalog unless overridden (the ``hardware`` block's own
    configuration takes its numbers from that block).  ``windows`` are
    the context windows offered (default: the boundary candidates and the long
    window); options with no KV slot at a window are left out.  When ``hardware``'s
    own (gpu, tp) is listed, its constants (e.g. a measured profile) are used.
    """

    gpus: list[str] = Field(min_length=1)
    tp: list[Annotated[GpusPerInstance, Field(ge=1)]] = Field([1], min_length=1)
    windows: list[Tokens] | None = None
    overrides: list[CatalogOverrideSpec] = []


class PoolsSpec(Strict):
    long_window_tokens: Tokens = Field(gt=0)
    short_window_candidates: list[Tokens] | None = None
    pool_routing_boundary_tokens: Tokens | None = None


class CompressionSpec(Strict):
    """Compress-and-Route: band ``B < L_total <= gamma B``, compressible share ``p_c``.  Off unless the instance turns
    it on (``enabled: true``): compression changes every prompt in the band, so a plan must never assume it silently."""

    enabled: bool = False
    compressible_fraction: Real = Field(1.0, ge=0.0, le=1.0)
    gamma_max: Gamma = 2.0
    gamma_step: Real = Field(0.1, gt=0.0)
    retrofit_gamma: Gamma = 1.5

    @field_validator("gamma_step")
    @classmethod
    def _grid_size(cls, step: float, info: ValidationInfo) -> float:
        """At most :data:`MAX_GAMMA_POINTS` ratios (counted before the grid is built: a tiny step is refused at once)."""
        gamma_max = info.data.get("gamma_max")
        points = 1 if gamma_max is None else math.floor((gamma_max - 1.0) / step + 1e-9) + 1
        if points > MAX_GAMMA_POINTS:
            raise ValueError(f"the ratios 1 to gamma_max {gamma_max:g} in steps of {step:g} are {points:,}, above the limit of "
                             f"{MAX_GAMMA_POINTS:,} (each ratio is a column of the sweep's candidate tables); take a larger step")
        return step


class SloSpec(Strict):
    """P99 TTFT target, time-per-output-token targets (each optional) and utilisation cap.

    ``ttft_rule: paper`` checks ``W99 + P99_pool(prefill + one iteration)``;
    ``fleetsim`` checks inference-fleet-sim's ``W99 + mean_pool(ceil(L_in/chunk)) (W + H)``.
    ``service_model: slots`` (default) is the FleetOpt slot model (every request holds a slot at the
    full-batch iteration); ``batching`` is the load-dependent continuous-batching model
    (optfleet/queueing/batching.py), which defines its own P99 TTFT and takes only ``ttft_rule: paper``.
    """

    ttft_p99_ms: Real = Field(gt=0.0)
    tpot_p50_ms: Real | None = Field(None, gt=0.0)
    tpot_p90_ms: Real | None = Field(None, gt=0.0)
    tpot_p99_ms: Real | None = Field(None, gt=0.0)
    tpot_mean_ms: Real | None = Field(None, gt=0.0)
    rho_max: Real = Field(0.85, gt=0.0, lt=1.0)
    ttft_rule: Literal["paper", "fleetsim"] = "paper"
    service_model: Literal["slots", "batching"] = "slots"

    @field_validator("service_model")
    @classmethod
    def _batching_defines_ttft(cls, model: str, info: ValidationInfo) -> str:
        if model == "batching" and info.data.get("ttft_rule") == "fleetsim":
            raise ValueError("the batching service model computes its own P99 TTFT (slot wait + in-GPU time to first token); "
                             "it does not take ttft_rule: fleetsim (set slo.ttft_rule: paper; the fleetsim_compatible preset sets "
                             "fleetsim and cannot be combined with the batching model)")
        return model


class CostSpec(Strict):
    cost_per_gpu_hour: Real | None = Field(None, gt=0.0)


class SolveSpec(Strict):
    """Default method and the MILP's options (routing mode, max pools K, time limit, relative gap, solver).

    ``method`` is a registered method of the kind (``optfleet.problems.fleet.kind.methods``; checked when
    the problem is prepared, since ``milp:<type>`` depends on the GPU catalog); ``solver`` is ``highs`` (the
    embedded default) or any Pyomo solver installed here, by its Pyomo name.
    """

    method: str = "sweep"
    routing: Literal["threshold", "split", "sweep"] = "threshold"
    max_pools: PlanParts = Field(2, ge=1)
    time_limit_s: Real = Field(60.0, gt=0.0)
    mip_gap: Real = Field(1e-6, ge=0.0)
    solver: str = "highs"


class BudgetConstraint(Strict):
    """Cap on $/hour; the MILP then maximises the served rate (a uniform admitted share of every class)."""

    kind: Literal["budget"]
    max_cost_per_hour: Real = Field(gt=0.0)


class MaxPoolsConstraint(Strict):
    kind: Literal["max_pools"]
    count: PlanParts = Field(ge=1)


class NodeMultipleConstraint(Strict):
    """Whole nodes: the GPUs of one type (or of every type) come in multiples of ``gpus_per_node``."""

    kind: Literal["node_multiple"]
    gpus_per_node: GpuCount = Field(ge=1)
    gpu: str | None = None


class FixedConstraint(Strict):
    """Pin the instance count of the pool with this window (opening it if ``instances > 0``).

    With a ``gpu_catalog``, ``gpu`` and ``tp`` pick the configuration (default:
    the ``hardware`` block's); ``instances`` of tensor-parallel degree ``tp`` hold ``instances x tp`` GPUs.
    """

    kind: Literal["fixed"]
    window_tokens: Tokens = Field(gt=0)
    instances: InstanceCount = Field(ge=0)
    gpu: str | None = None
    tp: GpusPerInstance | None = Field(None, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return refuse_renamed(data, INSTANCE_COUNT_RENAMED)


UserConstraint = Annotated[
    BudgetConstraint | AvailabilityConstraint | GpuMixConstraint | MaxPoolsConstraint | MaxTypesConstraint
    | NodeMultipleConstraint | FixedConstraint,
    Field(discriminator="kind"),
]


class FleetInstanceSpec(Strict):
    """The whole ``kind: fleet`` instance file."""

    kind: Literal["fleet"]
    name: str
    description: str = ""
    preset: Literal["engine", "paper", "fleetsim_compatible"] = "engine"
    workload: WorkloadSpec
    hardware: HardwareSpec
    gpu_catalog: GpuCatalogSpec | None = None
    pools: PoolsSpec
    compression: CompressionSpec = CompressionSpec()
    slo: SloSpec
    cost: CostSpec = CostSpec()
    solve: SolveSpec = SolveSpec()
    constraints: list[UserConstraint] = []
