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
    """A CDF table of ``L_total``: JSON (a list of ``[tokens, cumulative_probability]`` or ``{cdf: [...]}``) or CSV with
    columns ``tokens,cumulative_probability``."""
    cdf: list[list[Number]] | None = None  # checked by optfleet.problems.fleet.workload.cdf (integers kept exact)
    """The CDF table of ``L_total`` inline, ``[[tokens, cumulative_probability], ...]``; each bin's mass is spread
    evenly over its integer lengths."""
    trace_file: Annotated[list[str], Field(min_length=1)] | str | None = None
    """Trace file(s) read request by request: the Azure format ``TIMESTAMP,ContextTokens,GeneratedTokens`` or
    ``l_in,l_out[,t,category]``, CSV or Parquet."""

    @model_validator(mode="after")
    def _exactly_one(self) -> "LengthsSpec":
        given = [k for k in ("cdf_file", "cdf", "trace_file") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of cdf_file, cdf, trace_file (got {given or 'none'})")
        return self


class SplitSpec(Strict):
    """How ``L_total`` divides into input and output tokens (see optfleet.problems.fleet.workload.mix)."""

    rule: Literal["from_trace", "fixed_output_fraction", "output_fraction_normal"] = "fixed_output_fraction"
    """``from_trace``: each request's own input and output (trace files only); ``fixed_output_fraction``:
    ``L_out = round(f L_total)``; ``output_fraction_normal``: a normal fraction."""
    output_fraction: Real = Field(0.2, gt=0.0, lt=1.0)
    """The output share f of ``L_total`` under ``rule: fixed_output_fraction``."""
    mean: Real = Field(0.10, gt=0.0, lt=1.0)
    """Mean of the normal output fraction under ``rule: output_fraction_normal``."""
    sd: Real = Field(0.05, ge=0.0)
    """Standard deviation of the normal output fraction under ``rule: output_fraction_normal`` (the fraction is clipped
    to [0.02, 0.95])."""
    quadrature_nodes: Integer = Field(16, ge=1, le=256)
    """Equal-probability quadrature nodes that integrate the normal output fraction (``rule: output_fraction_normal``
    only)."""


class WorkloadSpec(Strict):
    rate_rps: RequestRate = Field(gt=0.0)
    """Total arrival rate of the requests, per second (Poisson arrivals)."""
    lengths: LengthsSpec
    """Where the request lengths ``L_total`` (input + output tokens) come from."""
    split: SplitSpec = SplitSpec()
    """How each ``L_total`` divides into input and output tokens."""


StepCoefficient = Annotated[Real, Field(ge=0.0), at_most(1e5, "ms", "a 100 s iteration")]
"""An iteration-time term in ms: at most 100 s, beyond any real forward pass (1e308 overflowed the tables to inf)."""


class IterationSpec(Strict):
    """Iteration time ``t_iter = W + H n_max`` (flat) or ``W + H n_max L_total / L_scale`` (length_scaled).

    ``w_ms`` / ``h_ms_per_slot`` left out are derived from first principles
    (optfleet/hardware/profiles.py: weight and KV bytes over effective bandwidth).
    """

    w_ms: StepCoefficient | None = Field(None, gt=0.0)  # an iteration always takes time: W = 0 makes the batching fixed point 0
    """W, the fixed time of an iteration in ms; only under ``preset: paper`` or ``fleetsim_compatible``. Left out:
    derived from first principles."""
    h_ms_per_slot: StepCoefficient | None = None
    """H, the time each KV slot adds to an iteration, ms per slot; only under ``preset: paper`` or
    ``fleetsim_compatible``. Left out: derived from first principles."""
    chunk_tokens: Tokens = Field(512, gt=0)
    """Prompt tokens prefilled per iteration (chunked prefill). Default 512, or
    ``hardware.engine.max_num_batched_tokens`` when that is given."""
    scaling: Literal["flat", "length_scaled"] = "flat"
    """``flat``: ``W + H n_max``; ``length_scaled``: ``W + H n_max L_total / length_scale_tokens`` (not under
    ``preset: engine``)."""
    length_scale_tokens: Tokens = Field(8192, gt=0)
    """The length ``L_scale`` that ``scaling: length_scaled`` divides ``L_total`` by, in tokens."""


class MemorySlotsSpec(Strict):
    """Slots from memory: ``floor((tp (u HBM - reserved) - weights) / (kv_bytes_per_token C))``."""

    memory_utilisation: Real = Field(0.90, gt=0.0, le=1.0)
    """Share of each GPU's memory the engine may use, ``u`` (vLLM's ``gpu_memory_utilization``)."""
    reserved_gb_per_gpu: Real = Field(0.0, ge=0.0)
    """Memory of each GPU held back from weights and KV cache, in GB."""
    weight_bytes_per_param: Real = Field(2.0, gt=0.0)
    """Bytes per model weight (2 for BF16 or FP16, 1 for FP8)."""
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
    """Slots per instance given per window, ``{window_tokens: slots}``."""
    kv_tokens_per_gpu: Tokens | None = Field(None, gt=0)
    """KV-cache tokens one GPU holds: slots at window C are ``floor(kv_tokens_per_gpu / C)``."""
    from_memory: MemorySlotsSpec | None = None
    """Slots derived from the catalog's HBM and the model's KV bytes per token."""
    formula: Literal["fleetsim", "profile"] | None = None
    """``profile``: the first-principles profile's KV capacity (vLLM's memory accounting); ``fleetsim``:
    ``min(128*8192//C, 65536//ceil(C/16))``."""

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
    """``vllm``: what is not given takes vLLM's defaults for the GPU (1,024 sequences and 8,192 tokens on GPUs of 70 GiB
    or more other than the A100; 256 and 2,048 on the others)."""
    max_num_seqs: Slots | None = Field(None, gt=0)
    """Most sequences an instance runs at once (vLLM's name): slots per instance are ``min(KV slots, max_num_seqs)``."""
    max_num_batched_tokens: Tokens | None = Field(None, gt=0)
    """Token budget of one iteration (vLLM's name): the prefill chunk when ``iteration.chunk_tokens`` is not given; a
    larger chunk is refused."""

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
      per_prefill_token_ms p + per_prefill_pair_ms pairs(p, o)`` (engine/step.py);
    * ``profile``: a published profile (engine/published_profiles.py): ``file`` is DistServe's profiler JSON or
      Splitwise's ``perf_model.csv``, ``profile_model`` (and for Splitwise ``profile_hardware``) picks the rows, at
      the hardware block's ``tp``.
    """

    source: Literal["roofline", "measured", "fit", "affine", "profile"] = "roofline"
    """Where iteration times come from: ``roofline`` (first principles), ``measured`` (aiconfigurator's database),
    ``fit`` (your measurements), ``affine`` (given) or ``profile`` (DistServe's or Splitwise's published profile)."""
    bandwidth_efficiency: Efficiency | None = None
    """Achieved share of peak HBM bandwidth in a decode step (``source: roofline``); default: the calibrated value
    ``optfleet catalog`` shows (0.58)."""
    compute_efficiency: Efficiency | None = None
    """Achieved share of peak dense FLOP/s in the weight GEMMs (``source: roofline``); default: the calibrated value
    ``optfleet catalog`` shows (0.66)."""
    allreduce_bandwidth_efficiency: Efficiency | None = None
    """Share of the link bandwidth a tensor-parallel all-reduce achieves (``source: roofline``); default: the calibrated
    value ``optfleet catalog`` shows (0.8)."""
    system: str | None = None
    """aiconfigurator's name of the GPU system (``source: measured``); default: the GPU's, e.g. ``h100_sxm``
    (``optfleet catalog`` lists them)."""
    backend: Literal["vllm", "sglang", "trtllm"] | None = None
    """The engine whose measurements are used (``source: measured``); default ``vllm``."""
    version: str | None = None
    """The backend's version in the database (``source: measured``); default: the database's current one."""
    model: str | None = None
    """The measured model (``source: measured``, required): a Hugging Face id the database bundles, or a folder holding
    its config.json."""
    ep: GpusPerInstance | None = Field(None, ge=1)
    """Expert-parallel degree of a mixture-of-experts model (``source: measured``); default 1, must divide ``tp``."""
    gemm_quant: str | None = None
    """Quantisation mode of the weight GEMMs (``source: measured``); default: the checkpoint's."""
    moe_quant: str | None = None
    """Quantisation mode of the expert GEMMs of a mixture of experts (``source: measured``); default: the
    checkpoint's."""
    kvcache_quant: str | None = None
    """Quantisation mode of the KV cache (``source: measured``); default: the checkpoint's."""
    fmha_quant: str | None = None
    """Quantisation mode of the attention kernels (``source: measured``); default: the checkpoint's."""
    file: Annotated[list[str], Field(min_length=1)] | str | None = None
    """The measurements (``source: fit``, required): one file or a list, each a table of measured iterations or a vLLM
    ``bench serve``, AIPerf or GuideLLM result file; the profile (``source: profile``, required, one file): a DistServe
    profiler JSON or a Splitwise ``perf_model.csv``."""
    profile_model: str | None = None
    """The model's name in the profile (``source: profile``), e.g. ``facebook/opt-13b`` (DistServe) or ``llama2-70b``
    (Splitwise); may be left out when the file profiles one model."""
    profile_hardware: str | None = None
    """The ``hardware`` value of the Splitwise rows to use (``source: profile``), e.g. ``a100-80gb``; may be left out
    when the model is measured on one."""
    fixed: dict[Literal["base_ms", "per_seq_ms", "per_kv_token_ms", "per_prefill_token_ms", "per_prefill_pair_ms"], StepCoefficient] | None = None
    """Coefficients pinned in ms instead of fitted (``source: fit``), e.g. ``{per_prefill_pair_ms: 0}``."""
    base_ms: Annotated[Real, Field(ge=MIN_BASE_MS), at_most(1e5, "ms", "a 100 s iteration")] | None = None
    """Time of every iteration, whatever it carries, in ms (``source: affine``, required)."""
    per_seq_ms: StepCoefficient | None = None
    """ms each decoding sequence adds to an iteration (``source: affine``; default 0)."""
    per_kv_token_ms: StepCoefficient | None = None
    """ms each cached token the decodes read adds, summed over their contexts (``source: affine``; default 0)."""
    per_prefill_token_ms: StepCoefficient | None = None
    """ms each prompt token of the iteration's prefill chunk adds (``source: affine``; default 0)."""
    per_prefill_pair_ms: StepCoefficient | None = None
    """ms per query-key pair of the prefill chunk, ``p o + p (p + 1) / 2`` with o tokens cached before it
    (``source: affine``; default 0)."""

    @model_validator(mode="after")
    def _fields_of_the_source(self) -> "PerformanceSpec":
        own = {
            "roofline": ("bandwidth_efficiency", "compute_efficiency", "allreduce_bandwidth_efficiency"),
            "measured": ("system", "backend", "version", "model", "ep", "gemm_quant", "moe_quant", "kvcache_quant", "fmha_quant"),
            "fit": ("file", "fixed"),
            "affine": AFFINE_FIELDS,
            "profile": ("file", "profile_model", "profile_hardware"),
        }
        foreign = [k for k in dict.fromkeys(name for names in own.values() for name in names)
                   if k not in own[self.source] and getattr(self, k) is not None]
        if foreign:
            raise ValueError(f"{', '.join(foreign)} do not apply to source {self.source}")
        if self.source == "affine" and self.base_ms is None:
            raise ValueError("source affine needs base_ms (and any of per_seq_ms, per_kv_token_ms, per_prefill_token_ms, "
                             "per_prefill_pair_ms; those left out are 0)")
        if self.source == "fit" and self.file is None:
            raise ValueError("source fit needs file: a table of measured iterations or a serving benchmark's results (or a list of them)")
        if self.source == "profile" and not isinstance(self.file, str):
            raise ValueError("source profile needs file: one DistServe profiler JSON or Splitwise perf_model.csv")
        if self.source == "measured" and self.model is None:
            raise ValueError("source measured needs model: the Hugging Face id of the measured model (or a folder holding its config.json)")
        return self


class ModelOnGpusSpec(Strict):
    """A model served on ``tp`` GPUs of one type: catalog names (or a model's ``config.json`` in ``config_json``, read
    locally: ``model`` then only names it) and where iteration times come from under the engine model
    (``performance``).  The fleet's ``hardware`` block extends it; a placement server's ``hardware`` is one."""

    gpu: str
    """The GPU type, by its catalog name (``optfleet catalog``); a fleet's ``hardware.profile`` fills it in."""
    model: str | None = None
    """The served model, by its catalog name; with ``config_json`` it only names the model. A fleet's
    ``hardware.profile`` fills it in."""
    config_json: str | None = None
    """A Hugging Face model's ``config.json``, read locally: the weights, KV bytes per token and memory fit come from it
    instead of the catalog."""
    tp: GpusPerInstance = Field(1, ge=1)
    """Tensor-parallel degree: the GPUs that serve one model instance."""
    performance: PerformanceSpec = PerformanceSpec()
    """Where iteration times come from (the engine model); in a fleet it applies under ``preset: engine`` only."""

    @model_validator(mode="after")
    def _a_model(self) -> "ModelOnGpusSpec":
        if self.model is None and self.config_json is None:
            raise ValueError("give model (a catalog name: optfleet catalog lists them) or config_json (a Hugging Face model's config.json)")
        return self


class HardwareSpec(ModelOnGpusSpec):
    """One GPU configuration (:class:`ModelOnGpusSpec`) with its iteration constants, slot rule, engine limits and
    an optional named ``profile``; ``performance`` applies under ``preset: engine``."""

    profile: str | None = None
    """A named hardware profile merged under this block (``fleetopt_a100_llama3_70b``), the file's own fields winning;
    with no ``preset`` given, it sets ``preset: paper``."""
    iteration: IterationSpec = IterationSpec()
    """The prefill chunk and, under ``preset: paper`` or ``fleetsim_compatible``, the iteration time's W and H."""
    slots: SlotsSpec = SlotsSpec(formula="profile")
    """The rule for KV slots per instance at each context window (default: ``formula: profile``)."""
    engine: EngineLimitsSpec | None = None
    """The serving engine's batch limits; left out: no limits (the FleetOpt paper's model)."""


class CatalogOverrideSpec(Strict):
    """Measured numbers replacing the derived ones for one GPU type (all TP degrees, or one)."""

    gpu: str
    """The GPU type whose numbers are replaced, by catalog name (one of ``gpu_catalog.gpus``)."""
    tp: GpusPerInstance | None = Field(None, ge=1)
    """The tensor-parallel degree overridden; default: every degree of ``gpu_catalog.tp``."""
    w_ms: StepCoefficient | None = Field(None, gt=0.0)
    """Measured W in ms, replacing the derived one (not under ``preset: engine``)."""
    h_ms_per_slot: StepCoefficient | None = None
    """Measured H in ms per slot, replacing the derived one (not under ``preset: engine``)."""
    kv_tokens_per_gpu: Tokens | None = Field(None, gt=0)
    """KV-cache tokens one GPU holds, replacing the profile's slots: ``floor(kv_tokens_per_gpu / C)`` at window C."""
    cost_per_gpu_hour: Real | None = Field(None, gt=0.0)
    """Price of one GPU in $ per hour, replacing the catalog's."""


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
    """The GPU types the plan may use, by catalog name."""
    tp: list[Annotated[GpusPerInstance, Field(ge=1)]] = Field([1], min_length=1)
    """The tensor-parallel degrees offered for every GPU type."""
    windows: list[Tokens] | None = None
    """Context windows offered, in tokens; default: the boundary candidates and the long window."""
    overrides: list[CatalogOverrideSpec] = []
    """Measured numbers replacing the derived W, H, KV capacity or price of one GPU type (at every TP degree, or
    one)."""


class PoolsSpec(Strict):
    long_window_tokens: Tokens = Field(gt=0)
    """Context window of the long pool, in tokens: the longest request the fleet serves."""
    short_window_candidates: list[Tokens] | None = None
    """Extra short-pool windows (boundaries B) the sweep and the MILP may open, in tokens, added to the CDF's
    breakpoints (or a standard grid for a trace)."""
    pool_routing_boundary_tokens: Tokens | None = None
    """The boundary B of the ``pool-routing`` and ``retrofit`` baselines, in tokens; default: the best B of the gamma =
    1 sweep."""


class CompressionSpec(Strict):
    """Compress-and-Route: band ``B < L_total <= gamma B``, compressible share ``p_c``.  Off unless the instance turns
    it on (``enabled: true``): compression changes every prompt in the band, so a plan must never assume it silently."""

    enabled: bool = False
    """Whether compressible prompts in the band ``B < L_total <= gamma B`` are cut to B and served by the short pool."""
    compressible_fraction: Real = Field(1.0, ge=0.0, le=1.0)
    """The share ``p_c`` of requests that may be compressed (with ``enabled: true``)."""
    gamma_max: Gamma = 2.0
    """Largest compression ratio gamma the sweep and the MILP try (with ``enabled: true``)."""
    gamma_step: Real = Field(0.1, gt=0.0)
    """Step of the gamma grid ``1, 1 + gamma_step, ..., gamma_max``."""
    retrofit_gamma: Gamma = 1.5
    """The gamma of the ``retrofit`` baseline."""

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
    """Target P99 time to first token, in ms (``optfleet explain`` prices other percentiles: ``--curve
    percentile=0.95,0.99``)."""
    tpot_p50_ms: Real | None = Field(None, gt=0.0)
    """Target median time per output token, in ms (optional)."""
    tpot_p90_ms: Real | None = Field(None, gt=0.0)
    """Target P90 time per output token, in ms (optional)."""
    tpot_p99_ms: Real | None = Field(None, gt=0.0)
    """Target P99 time per output token, in ms (optional)."""
    tpot_mean_ms: Real | None = Field(None, gt=0.0)
    """Target mean time per output token, in ms (optional)."""
    rho_max: Real = Field(0.85, gt=0.0, lt=1.0)
    """Utilisation cap of every pool (the share of its capacity its load may take)."""
    ttft_rule: Literal["paper", "fleetsim"] = "paper"
    """``paper``: P99 wait + P99 over the pool of (prefill + one iteration); ``fleetsim``: P99 wait + mean prefill at
    one active slot (not under ``preset: engine``)."""
    service_model: Literal["slots", "batching"] = "slots"
    """``slots``: the FleetOpt slot model; ``batching``: the load-dependent continuous-batching model."""

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
    """Price of one GPU of the ``hardware`` block in $ per hour; default: the catalog's price (or the hardware
    profile's)."""


class SolveSpec(Strict):
    """Default method and the MILP's options (routing mode, max pools K, time limit, relative gap, solver).

    ``method`` is a registered method of the kind (``optfleet.problems.fleet.kind.methods``; checked when
    the problem is prepared, since ``milp:<type>`` depends on the GPU catalog); ``solver`` is ``highs`` (the
    embedded default) or any Pyomo solver installed here, by its Pyomo name.
    """

    method: str = "sweep"
    """The method ``optfleet solve`` runs: ``homogeneous``, ``pool-routing``, ``retrofit``, ``sweep``, ``milp`` or, over
    a multi-type catalog, ``milp:<GPU type>``."""
    routing: Literal["threshold", "split", "sweep"] = "threshold"
    """The MILP's routing space: ``threshold`` (one pool per length segment), ``split`` (any shares) or ``sweep`` (the
    sweep's policies)."""
    max_pools: PlanParts = Field(2, ge=1)
    """K, the most pools the MILP may open."""
    time_limit_s: Real = Field(60.0, gt=0.0)
    """Time limit of each MILP solve, in seconds."""
    mip_gap: Real = Field(1e-6, ge=0.0)
    """Relative gap at which the MILP solve stops as optimal."""
    solver: str = "highs"
    """``highs`` (embedded) or a Pyomo solver installed here, by its Pyomo name."""


class BudgetConstraint(Strict):
    """Cap on $/hour; the MILP then maximises the served rate (a uniform admitted share of every class)."""

    kind: Literal["budget"]
    max_cost_per_hour: Real = Field(gt=0.0)
    """The cost cap, $ per hour; the MILP then maximises the served rate."""


class MaxPoolsConstraint(Strict):
    kind: Literal["max_pools"]
    count: PlanParts = Field(ge=1)
    """Most pools the plan may open."""


class NodeMultipleConstraint(Strict):
    """Whole nodes: the GPUs of one type (or of every type) come in multiples of ``gpus_per_node``."""

    kind: Literal["node_multiple"]
    gpus_per_node: GpuCount = Field(ge=1)
    """GPUs per node: each type's GPU count is a multiple of it."""
    gpu: str | None = None
    """The GPU type that comes in whole nodes, by catalog name; default: every type."""


class FixedConstraint(Strict):
    """Pin the instance count of the pool with this window (opening it if ``instances > 0``).

    With a ``gpu_catalog``, ``gpu`` and ``tp`` pick the configuration (default:
    the ``hardware`` block's); ``instances`` of tensor-parallel degree ``tp`` hold ``instances x tp`` GPUs.
    """

    kind: Literal["fixed"]
    window_tokens: Tokens = Field(gt=0)
    """Context window of the pinned pool, in tokens."""
    instances: InstanceCount = Field(ge=0)
    """Instances the pool holds (0 closes it); each holds ``tp`` GPUs."""
    gpu: str | None = None
    """The GPU type of the pinned pool (with a ``gpu_catalog``); default: the ``hardware`` block's."""
    tp: GpusPerInstance | None = Field(None, ge=1)
    """Tensor-parallel degree of the pinned pool (with a ``gpu_catalog``); default: the ``hardware`` block's."""

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
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    preset: Literal["engine", "paper", "fleetsim_compatible"] = "engine"
    """The service model: ``engine`` (prefill compute charged), ``paper`` (FleetOpt's) or ``fleetsim_compatible``;
    default ``paper`` when ``hardware.profile`` is given, else ``engine``."""
    workload: WorkloadSpec
    """Arrival rate and request lengths."""
    hardware: HardwareSpec
    """The GPU configuration that serves the model, and its iteration, slot and engine settings."""
    gpu_catalog: GpuCatalogSpec | None = None
    """Several GPU types and TP degrees to choose from (default: the ``hardware`` block's configuration only)."""
    pools: PoolsSpec
    """The long window and the candidate short windows."""
    compression: CompressionSpec = CompressionSpec()
    """Compress-and-Route: off unless ``enabled: true``."""
    slo: SloSpec
    """Latency targets and the utilisation cap."""
    cost: CostSpec = CostSpec()
    """The GPU price."""
    solve: SolveSpec = SolveSpec()
    """The default method and the MILP's options."""
    constraints: list[UserConstraint] = []
    """Budget, availability, GPU-mix, pool-count, type-count, whole-node and fixed-pool constraints (the MILP enforces
    them; heuristic plans are checked)."""
