"""Typed schema of a ``kind: pd_fleet`` instance file: fleets of aggregated or prefill/decode-disaggregated pools.

The workload block is the fleet kind's (optfleet/problems/fleet/schema.py: a CDF or a trace, an input/output
split); the served model is named as in the fleet's hardware block (``model:`` or ``config_json:``) and every
iteration time comes from one ``performance:`` source (default ``roofline``) evaluated at each option's GPU and TP.

Requests go to pools by fixed windows: a request with ``L_in + L_out = L`` goes to the smallest window of
``pools.windows_tokens`` that holds ``L``; a request above the largest window is an input error naming
``pools.windows_tokens`` (a plan that silently drops traffic would look cheaper than it is).

Each pool then picks one option: an **aggregated** configuration (``aggregated:``: GPU type, TP, token budget;
sized as the fleet kind sizes a pool under ``preset: engine, service_model: batching``) or a **disaggregated**
pair of a prefill configuration (``prefill:``: GPU type, TP, token budget) and a decode configuration
(``decode:``: GPU type, TP, max batch), whose KV caches cross a link of ``links:`` GB/s.  Lists are candidates;
the MILP chooses.  Only what one field can check is checked here; cross-field rules (TP against the model, max
batch against KV capacity, GPU names in constraints, a model or config_json, both roles or neither, some option
left) are checked in problem.py, naming the field.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from optfleet.instance.shared_schema import (AvailabilityConstraint, GpuCount, GpuMixConstraint, GpusPerInstance, Integer, Real,
                                             Strict, Tokens, at_most)
from optfleet.problems.fleet.schema import PerformanceSpec, WorkloadSpec

MAX_BATCH = 100_000
"""Most sequences one decode instance may run at once: far above any engine's limit (vLLM's default is 256 to 1,024),
and the occupancy law is evaluated up to it."""

MAX_WINDOWS = 16
"""Most pools (windows) an instance may have: each pool is one selection of the MILP."""

MIN_LINK_GB_PER_S, MAX_LINK_GB_PER_S = 1e-3, 1e6
BandwidthGbPerS = Annotated[Real, Field(ge=MIN_LINK_GB_PER_S), at_most(MAX_LINK_GB_PER_S, "GB/s", "a thousand times NVLink 5")]
MAX_PRICE_PER_GPU_HOUR = 1e6
"""A link bandwidth in GB/s (1e9 bytes per second): at least 1 MB/s (a link of 0 GB/s never delivers a KV cache, and
1e-300 GB/s overflowed the transfer times' moments)."""



def _each_once(values: list) -> list:
    """A candidate list names each candidate once (the error is then on the list's own field, ``decode.gpus``)."""
    for i, value in enumerate(values):
        if value in values[:i]:
            raise ValueError(f"lists {value!r} twice; give each candidate once")
    return values


EachOnce = AfterValidator(_each_once)
TpList = Annotated[list[Annotated[GpusPerInstance, Field(ge=1)]], Field(min_length=1), EachOnce]
GpuList = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1), EachOnce]
MaxBatch = Annotated[Integer, Field(ge=1), at_most(MAX_BATCH, "sequences", "far above any engine's batch limit")]
MaxBatches = Annotated[list[MaxBatch], Field(min_length=1), EachOnce]
TokenBudgets = Annotated[list[Annotated[Tokens, Field(gt=0)]], Field(min_length=1), EachOnce]


class PdPoolsSpec(Strict):
    """Pools by fixed windows: a request of ``L_in + L_out`` tokens goes to the smallest window holding it."""

    windows_tokens: list[Annotated[Tokens, Field(gt=0)]] = Field(min_length=1, max_length=MAX_WINDOWS)
    """Context windows of the pools in tokens, strictly increasing; a request above the largest is an input error."""

    @field_validator("windows_tokens")
    @classmethod
    def _increasing(cls, windows: list[int]) -> list[int]:
        for lower, upper in zip(windows, windows[1:]):
            if upper <= lower:
                raise ValueError(f"windows must increase strictly (got {lower} then {upper})")
        return windows


class PdSloSpec(Strict):
    """Latency targets every pool meets, and the utilisation cap of every server (prefill, link, decode)."""

    ttft_p99_ms: Real = Field(gt=0.0)
    """Target P99 time to first token in ms: prefill wait + prefill + KV transfer + first decode step."""
    tpot_p99_ms: Real = Field(gt=0.0)
    """Target P99 time per output token in ms (a request's mean decode step over its lifetime)."""
    rho_max: Real = Field(0.85, gt=0.0, lt=1.0)
    """Utilisation cap of every prefill instance, link and decode instance (and of an aggregated pool's slots)."""


class RoleOptionsSpec(Strict):
    """The options of one role: every GPU type x TP degree listed (x the role's own list); each list names each
    candidate once."""

    gpus: GpuList
    """GPU types of the role's instances, by catalog name (at least one)."""
    tp: TpList = [1]
    """Tensor-parallel degrees offered for every GPU type of the role."""


class AggregatedSpec(RoleOptionsSpec):
    """Aggregated options: instances that prefill and decode together, every GPU x TP x token budget listed."""

    enabled: bool = True
    """``false`` offers no aggregated option (every pool is then disaggregated)."""
    max_num_batched_tokens: TokenBudgets = [8192]
    """Token budgets per iteration offered (vLLM's name): the prefill chunk of the aggregated engine."""


class PrefillSpec(RoleOptionsSpec):
    """Prefill options: every GPU x TP x token budget listed; an instance prefills one prompt at a time in chunks."""

    token_budget: TokenBudgets = [8192]
    """Prompt tokens per prefill iteration offered (the chunk): a prompt of L tokens takes ceil(L / budget) iterations."""


class DecodeSpec(RoleOptionsSpec):
    """Decode options: every GPU x TP x max batch listed."""

    max_batch: MaxBatches = [256]
    """Most sequences one decode instance runs at once (vLLM's max_num_seqs), offered for every decode GPU type that
    ``max_batch_by_gpu`` does not list; each must fit the KV cache at the largest window."""
    max_batch_by_gpu: dict[str, MaxBatches] = {}
    """Per decode GPU type (a name of ``gpus``), its own max batches in place of ``max_batch``: for GPU types whose KV
    caches hold different numbers of sequences, e.g. ``{L40S: [32], A100-80GB: [64, 128]}``."""


class LinkPairSpec(Strict):
    """The KV-transfer bandwidth between one prefill GPU type and one decode GPU type."""

    prefill_gpu: str
    """The prefill instance's GPU type, by catalog name."""
    decode_gpu: str
    """The decode instance's GPU type, by catalog name."""
    gb_per_s: BandwidthGbPerS
    """Bandwidth of one prefill instance's link for this pair, GB/s."""


class LinksSpec(Strict):
    """KV-transfer bandwidth of each prefill instance's link, in GB/s (1e9 bytes/s): one default and per-pair overrides.

    Typical figures: NVLink 4 450 GB/s per direction, 8 x 400 Gb/s InfiniBand 400 GB/s per node (50 per GPU),
    100 Gb/s Ethernet 12.5 GB/s.
    """

    default_gb_per_s: BandwidthGbPerS = 50.0
    """Bandwidth of a prefill instance's link when no pair override applies, GB/s (default 50: one 400 Gb/s NIC)."""
    pairs: list[LinkPairSpec] = []
    """Per (prefill GPU, decode GPU) overrides of the bandwidth."""


class GpuOverrideSpec(Strict):
    """The catalog's price or power of one GPU type, replaced for this instance."""

    gpu: str
    """The GPU type, by catalog name."""
    cost_per_gpu_hour: Annotated[Real, Field(gt=0.0), at_most(MAX_PRICE_PER_GPU_HOUR, "$ per GPU-hour",
                                                              "a million dollars an hour per GPU is a typo")] | None = None
    """Price of one GPU in $ per hour, replacing the catalog's (at most 1e6: 1e308 overflowed the plan's cost)."""
    power_w: Annotated[Real, Field(gt=0.0), at_most(1e6, "W per GPU", "a megawatt per GPU is a typo; a B200 draws 1 kW")] | None = None
    """Power of one GPU in watts, replacing the catalog's datasheet TDP (at most 1e6: 1e308 overflowed the plan's power)."""


class PdSolveSpec(Strict):
    """The method ``optfleet solve`` runs and the MILP's options."""

    method: Literal["milp", "best_aggregated", "splitwise_grid"] = "milp"
    """``milp`` (the exact choice over every option), ``best_aggregated`` (the MILP over aggregated options only) or
    ``splitwise_grid`` (Splitwise-style brute force over a 39 x 39 grid of prefill and decode counts)."""
    time_limit_s: Real = Field(60.0, gt=0.0)
    """Time limit of each MILP solve, in seconds."""
    mip_gap: Real = Field(1e-6, ge=0.0)
    """Relative gap at which the MILP solve stops as optimal."""
    solver: str = "highs"
    """``highs`` (embedded) or a Pyomo solver installed here, by its Pyomo name."""


class PdBudgetConstraint(Strict):
    """Cap on the fleet's cost, $/hour (the MILP still minimises cost: the cap only rules plans out)."""

    kind: Literal["budget"]
    max_cost_per_hour: Real = Field(gt=0.0)
    """The cost cap, $ per hour."""


class PdPowerConstraint(Strict):
    """Cap on the fleet's power: the sum over GPU types of GPUs x power per GPU (catalog TDP or ``gpus[].power_w``)."""

    kind: Literal["power"]
    max_power_w: Real = Field(gt=0.0)
    """The power cap in watts, over every GPU of both roles and every pool."""


class PdFixedConstraint(Strict):
    """Pin the number of GPUs of one type, counted over both roles and every pool."""

    kind: Literal["fixed"]
    gpu: str
    """The GPU type pinned, by catalog name."""
    gpus: GpuCount = Field(ge=0)
    """GPUs of that type the plan holds exactly (an instance of TP t counts t GPUs)."""


PdConstraint = Annotated[
    PdBudgetConstraint | PdPowerConstraint | AvailabilityConstraint | GpuMixConstraint | PdFixedConstraint,
    Field(discriminator="kind"),
]


class PdFleetSpec(Strict):
    """The whole ``kind: pd_fleet`` instance file."""

    kind: Literal["pd_fleet"]
    name: str
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    workload: WorkloadSpec
    """Arrival rate and request lengths (the fleet kind's block)."""
    model: str | None = None
    """The served model, by catalog name; with ``config_json`` it only names the model."""
    config_json: str | None = None
    """A Hugging Face model's ``config.json``, read locally: weights, KV bytes per token and memory fit come from it."""
    performance: PerformanceSpec = PerformanceSpec()
    """Where iteration times come from (the engine model), for every option's GPU and TP; default ``roofline``."""
    pools: PdPoolsSpec
    """The pools' context windows."""
    slo: PdSloSpec
    """P99 TTFT and TPOT targets and the utilisation cap."""
    aggregated: AggregatedSpec | None = None
    """The aggregated options (left out, or ``enabled: false``: none)."""
    prefill: PrefillSpec | None = None
    """The prefill options of disaggregated pools (with ``decode``; left out: aggregated pools only)."""
    decode: DecodeSpec | None = None
    """The decode options of disaggregated pools (with ``prefill``)."""
    links: LinksSpec = LinksSpec()
    """KV-transfer bandwidth from prefill to decode instances."""
    gpus: list[GpuOverrideSpec] = []
    """Per GPU type: price and power replacing the catalog's."""
    constraints: list[PdConstraint] = []
    """Budget, power, availability, GPU-mix and fixed-count constraints, over both roles and every pool."""
    solve: PdSolveSpec = PdSolveSpec()
    """The default method and the MILP's options."""
