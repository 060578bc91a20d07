"""Typed schema of a ``kind: capacity_plan`` instance file (validated with pydantic).

A capacity plan buys GPUs period by period for several models whose demand changes: each GPU type is offered as
reserved capacity (held and paid for a whole term), on demand (paid per period) and spot (cheap, capped per period,
preempted with a stated probability).  Each model is described as a fleet service (its ``service`` block holds a
fleet instance's blocks); the fleet kind sizes it on every GPU type at every period's rate.  Cross-field rules
(terms within the horizon, GPU types a model names, demand that covers every period) are checked when the
instance is prepared (problem.py), each naming its field.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from optfleet.instance.shared_schema import GpuCount, GpuMixConstraint, GpusPerInstance, Integer, Real, Strict, at_most
from optfleet.problems.reserved.schema import TraceSpec

MAX_PERIODS = 8784
"""Periods of a horizon: a leap year of hours.  Every period adds a row per GPU type and a column per model and type."""

MAX_SPOT_GPUS = 4096
"""A spot availability cap: the model encodes every spot count up to the cap with one binary (the survivor quantile
table, models/capacity_plan.py), so a cap is a size of the model, not only a number."""

Price = Annotated[Real, Field(ge=0.0), at_most(1e6, "$ per GPU-hour", "a million dollars an hour per GPU is a typo")]
SpotCap = Annotated[Integer, Field(ge=0), at_most(MAX_SPOT_GPUS, "spot GPUs", "one binary per spot count in the model")]


def _one_or_each(value: Any) -> str:
    """The member of :data:`SpotCaps` a value is validated as: a list is one cap per period, anything else one cap
    (so an error names the bad entry of a list, not the union's other member)."""
    return "list" if isinstance(value, list) else "int"


SpotCaps = Annotated[Annotated[SpotCap, Tag("int")] | Annotated[list[SpotCap], Field(min_length=1), Tag("list")], Discriminator(_one_or_each)]
Name = Annotated[str, Field(min_length=1)]
"""A model's or a GPU type's name: other fields name it (the demand, ``tp``, reservations, constraints), so it is not empty."""


class ReservedOptionSpec(Strict):
    """Reserved GPUs: bought at the start of a period and held (and paid) for ``term_periods`` periods, even past
    the horizon's end."""

    term_periods: Integer = Field(ge=1)
    """How many periods a reservation lasts; at most the horizon's ``periods``."""
    price_per_gpu_hour: Price
    """What a reserved GPU costs per hour of its term, $."""
    upfront_per_gpu: Annotated[Real, Field(ge=0.0), at_most(1e9, "$ per GPU", "a typo")] = 0.0
    """A one-off payment per reserved GPU when the reservation starts, $."""
    max_gpus: GpuCount | None = Field(None, ge=0)
    """Most reserved GPUs of this type that the plan buys held at once (left out: no cap); the reservations
    already held (``reservations``) are on top of it."""


class OnDemandOptionSpec(Strict):
    """On-demand GPUs: bought for one period at a time."""

    price_per_gpu_hour: Price | None = None
    """What an on-demand GPU costs per hour, $; left out: the type's ``skypilot_catalog`` price."""
    max_gpus: GpuCount | None = Field(None, ge=0)
    """Most on-demand GPUs of this type in any period (left out: no cap)."""


class SpotTraceSpec(Strict):
    """A spot availability trace in the format of skypilot-org/spot-traces (a JSON document ``{"metadata":
    {"gap_seconds": G}, "data": [v0, v1, ...]}``, one value per tick of ``G`` seconds) read as one spot cap per
    period: the fewest instances available at any tick in force during the period, times ``gpus_per_instance``
    (spot_trace.py)."""

    file: str
    """The trace: a path relative to the instance, or a registered trace, ``dataset:spot-traces-aws-2023-08/us-east-2b``
    (``optfleet data list``; fetched with ``optfleet data fetch``)."""
    values: Literal["available_instances", "preempted"]
    """What a tick's value is: ``available_instances``, the number of spot instances available (the repository's
    multi-node traces); ``preempted``, 1 when the one probe instance was preempted or unavailable and 0 when it
    ran (its single-node traces)."""
    gpus_per_instance: GpusPerInstance = 1
    """Spot GPUs each available instance gives (``p3.16xlarge``: 8 V100s)."""
    start_hour: Annotated[Real, Field(ge=0.0), at_most(1e6, "hours", "a century of ticks")] = 0.0
    """The hour of the trace at which period 0 starts (to plan against a later week of a long trace)."""


class SpotOptionSpec(Strict):
    """Spot GPUs: bought for one period, each preempted independently with ``preemption_probability`` during it.
    Spot GPUs count toward a model's SLO only at ``confidence``: the plan may rely on the number of spot GPUs that
    survive with at least that probability (the binomial quantile); on-demand GPUs cover the rest, and the
    evaluator buys on-demand fallback for the preemptions beyond it."""

    price_per_gpu_hour: Price | None = None
    """What a spot GPU costs per hour, $; left out: the type's ``skypilot_catalog`` spot price."""
    max_gpus: SpotCaps | None = None
    """Spot GPUs available: one cap for every period, or a list with one cap per period; give it or
    ``availability_trace``."""
    availability_trace: SpotTraceSpec | None = None
    """Spot GPUs available per period read from a spot availability trace; give it or ``max_gpus``."""
    preemption_probability: Real = Field(ge=0.0, lt=1.0)
    """The probability that a spot GPU is preempted during a period (independently of the others)."""
    confidence: Real = Field(gt=0.0, le=1.0)
    """The probability, in (0, 1], with which the spot GPUs a plan relies on must survive a period."""


class SkyPilotCatalogSpec(Strict):
    """Prices read from a SkyPilot catalog's ``vms.csv`` (skypilot.py lists the columns read)."""

    file: str
    """The catalog table (a path relative to the instance), e.g. skypilot-catalog's ``catalogs/v7/aws/vms.csv``."""
    instance_type: str
    """The instance type whose prices are read (``p5.48xlarge``); its ``AcceleratorName`` must be the type's GPU."""
    region: str
    """The region whose prices are read (``us-east-1``)."""


class GpuTypeSpec(Strict):
    """One GPU type and the ways to buy it; give at least one of ``reserved``, ``on_demand``, ``spot``."""

    name: Name
    """The type's name in the plan (``H100``); models' ``tp`` and constraints name types by it."""
    gpu: str
    """The catalog GPU (``H100-SXM``, ``optfleet catalog``): the fleet kind sizes every model on it."""
    reserved: ReservedOptionSpec | None = None
    """The reserved purchase option (left out: not offered)."""
    on_demand: OnDemandOptionSpec | None = None
    """The on-demand purchase option (left out: not offered)."""
    spot: SpotOptionSpec | None = None
    """The spot purchase option (left out: not offered)."""
    skypilot_catalog: SkyPilotCatalogSpec | None = None
    """Where the on-demand and spot prices left out are read from (per GPU: the instance's price over its GPUs)."""


class ModelSpec(Strict):
    """One served model: its service as the fleet kind describes it, its replica floor and its load time."""

    name: Name
    """The model's name; the demand names models by it."""
    service: dict[str, Any]
    """A fleet instance's blocks without ``kind``, ``name`` and the rate: ``workload`` (``lengths``, ``split``),
    ``hardware`` (``model``, engine settings), ``pools`` (``long_window_tokens``), ``slo`` (TTFT and TPOT targets),
    optionally ``preset`` and ``compression``.  The fleet kind's reference lists their fields; ``hardware.gpu`` and
    ``hardware.tp`` are set per GPU type."""
    tp: dict[str, Annotated[GpusPerInstance, Field(ge=1)]] = {}
    """GPUs per instance of this model on each GPU type, ``{type name: tp}``; a type left out takes the service's
    ``hardware.tp`` (default 1)."""
    min_replicas: Annotated[Integer, Field(ge=0), at_most(10**6, "instances", "a typo")] = 1
    """The fewest instances the model keeps in every period, whatever its demand."""
    load_time_s: Annotated[Real, Field(ge=0.0), at_most(86_400.0, "s", "a day to load a model is a typo")] = 0.0
    """Seconds a GPU spends loading the model when it starts serving it (a new or reassigned instance)."""


class GeneratedDemandSpec(Strict):
    """A diurnal and weekly rate: ``rate(h) = mean_rps (1 + daily_amplitude cos(2 pi (h - peak_hour) / 24))``,
    times ``weekend_factor`` on Saturdays and Sundays, with ``h`` the hour of day at the middle of the period and
    period 0 starting Monday 00:00."""

    mean_rps: Annotated[Real, Field(gt=0.0), at_most(1e9, "req/s", "a typo")]
    """The weekday mean arrival rate, requests per second."""
    daily_amplitude: Real = Field(0.5, ge=0.0, le=1.0)
    """The relative swing of the daily cycle: the rate runs from ``(1 - a)`` to ``(1 + a)`` times the mean."""
    peak_hour: Real = Field(14.0, ge=0.0, lt=24.0)
    """The hour of day (0-24) at which the daily cycle peaks."""
    weekend_factor: Real = Field(1.0, ge=0.0, le=10.0)
    """The rate on Saturdays and Sundays relative to weekdays."""


class DemandSpec(Strict):
    """Each model's arrival rate per period: exactly one of a forecast table, a generator or request traces."""

    forecast_file: str | None = None
    """A CSV or Parquet table with columns ``period`` (0, 1, ...), ``model`` and ``rate_rps``: one row per model and
    period, every period of the horizon."""
    generator: dict[str, GeneratedDemandSpec] | None = None
    """A diurnal/weekly rate per model name, ``{model: {mean_rps: ...}}``."""
    traces: dict[str, TraceSpec] | None = None
    """A request trace per model name, ``{model: {file: ..., time_unit: s}}`` (the reserved kind's trace formats,
    Azure 2023 included): its requests counted per period from its first request, over the period's seconds."""
    growth_per_day: Real = Field(0.0, ge=-0.5, le=1.0)
    """Growth of every model's rate per day, compounded, on top of the source above: period ``t``'s rate is
    multiplied by ``(1 + growth_per_day)^(t period_hours / 24)`` (0.01: 1 % a day; negative: decline)."""


class HeldReservationSpec(Strict):
    """GPUs already reserved before the plan is made (a contract signed earlier): they count as capacity in their
    periods, cost the plan nothing (their cost is sunk: reported beside the plan's cost, never in it) and new
    reservations are bought on top.  Periods ``start_period`` to ``end_period - 1`` (or ``start_period +
    term_periods - 1``); periods past the horizon are neither planned nor reported."""

    gpu_type: str
    """The GPU type held (a ``gpus[].name``)."""
    gpus: Annotated[Integer, Field(ge=0), at_most(MAX_SPOT_GPUS, "GPUs", "a typo")]
    """How many GPUs of the type the reservation holds in each of its periods."""
    start_period: Integer = Field(0, ge=0)
    """The first period held (0: the horizon's first); a reservation that began before the horizon starts at 0."""
    end_period: Integer | None = Field(None, ge=1)
    """The first period no longer held (exclusive); give it or ``term_periods``.  It may lie past the horizon."""
    term_periods: Integer | None = Field(None, ge=1)
    """How many periods are held from ``start_period``; give it or ``end_period``."""
    model: str | None = None
    """The model the GPUs are pinned to (a ``models[].name``): only it may use them; left out, any model may."""
    price_per_gpu_hour: Price = 0.0
    """What a held GPU costs per hour, $: only for the sunk cost reported beside the plan's (not optimised)."""


class BudgetConstraint(Strict):
    """Cap on the plan's total cost over the horizon."""

    kind: Literal["budget"]
    max_cost: Annotated[Real, Field(gt=0.0), at_most(1e15, "$", "a typo")]
    """The most the plan may cost over the horizon, $ (reservations at their full term; the reservations already
    held are sunk and not counted)."""


UserConstraint = Annotated[BudgetConstraint | GpuMixConstraint, Field(discriminator="kind")]

METHODS = ("milp", "rolling_horizon", "static_peak", "per_period_on_demand", "reserve_percentile", "spot_fallback", "greedy_packing")


class SolveSpec(Strict):
    """The default method and the MILP's options."""

    method: Literal[METHODS] | None = None  # type: ignore[valid-type]
    """The method ``optfleet solve`` runs (default ``milp``)."""
    time_limit_s: Real = Field(60.0, gt=0.0, le=86_400.0)
    """The MILP's time limit, seconds; a run stopped by it reports its incumbent, bound and gap."""
    mip_gap: Real = Field(1e-4, ge=0.0, le=1.0)
    """The relative gap at which HiGHS stops."""
    solver: str = "highs"
    """The Pyomo solver (``highs``, or another installed MILP solver)."""


class RollingSpec(Strict):
    """The rolling-horizon method's windows (rolling.py)."""

    window_periods: Annotated[Integer, Field(ge=1), at_most(MAX_PERIODS, "periods", "the horizon's limit")] = 48
    """Periods each window's MILP plans (at least ``step_periods``)."""
    step_periods: Annotated[Integer, Field(ge=1), at_most(MAX_PERIODS, "periods", "the horizon's limit")] = 24
    """Periods committed from each window before it moves on."""


class EvaluationSpec(Strict):
    """The evaluator's replay against sampled spot preemptions."""

    samples: Annotated[Integer, Field(ge=1), at_most(100_000, "samples", "the replay draws one per period and type")] = 200
    """Preemption scenarios drawn (seeded) per GPU type and period."""
    seed: Integer = Field(0, ge=0)
    """The seed of the preemption draws (the same seed, the same scenarios for every method)."""


class BaselinesSpec(Strict):
    """The parameters of the practitioners' rules (baselines.py)."""

    reserve_percentile: Real = Field(0.5, gt=0.0, le=1.0)
    """``reserve_percentile``: the percentile of each type's GPU use over the periods that is reserved."""
    spot_extra_gpus: Annotated[Integer, Field(ge=0), at_most(MAX_SPOT_GPUS, "GPUs", "the spot cap's limit")] = 1
    """``spot_fallback``: spot GPUs bought beyond the need, per type and period (SkyServe's over-provisioning)."""
    on_demand_floor_gpus: Annotated[Integer, Field(ge=0), at_most(MAX_SPOT_GPUS, "GPUs", "the spot cap's limit")] = 0
    """``spot_fallback``: on-demand GPUs kept under the spot ones wherever a type is used (SkyPilot's
    ``base_ondemand_fallback_replicas``)."""


class CapacityPlanInstanceSpec(Strict):
    """The whole ``kind: capacity_plan`` instance file."""

    kind: Literal["capacity_plan"]
    name: str
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    period_hours: Annotated[Real, Field(gt=0.0), at_most(744.0, "hours", "a month per period")] = 1.0
    """The length of one period, hours."""
    periods: Annotated[Integer, Field(ge=1), at_most(MAX_PERIODS, "periods", "a leap year of hours")]
    """How many periods the plan covers (the horizon)."""
    models: Annotated[list[ModelSpec], Field(min_length=1)]
    """The served models."""
    gpus: Annotated[list[GpuTypeSpec], Field(min_length=1)]
    """The GPU types and their purchase options."""
    demand: DemandSpec
    """Each model's arrival rate per period."""
    reservations: list[HeldReservationSpec] = []
    """GPUs already reserved when the plan is made (sunk cost; new purchases are bought on top)."""
    constraints: list[UserConstraint] = []
    """Budget (total $) and GPU-mix (a type's share of the GPUs held, in every period) constraints."""
    solve: SolveSpec = SolveSpec()
    """The default method and the MILP's options."""
    rolling: RollingSpec = RollingSpec()
    """The rolling-horizon method's windows."""
    evaluation: EvaluationSpec = EvaluationSpec()
    """The evaluator's preemption replay."""
    baselines: BaselinesSpec = BaselinesSpec()
    """The practitioners' rules' parameters."""
