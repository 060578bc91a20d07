"""Typed schema of a ``kind: reserved`` instance file (reserved capacity: provisioned throughput units).

An instance names a request trace, a provider profile (how a request becomes
adjusted tokens and what one unit serves), the purchase grid, the prices and
the plans to make.  Units are in the field names; every model forbids
unknown keys.  Example::

    kind: reserved
    name: tiny
    trace: {file: tiny.csv, time_unit: s}
    profile: {provider: vertex, model: gemini-2.5-flash}
    prices: {unit_per_hour: 3.70, paygo_input_per_million: 0.30, paygo_output_per_million: 2.50}
    plans:
      percentiles: [0.95, 0.99]
      latency: {metric: e2e, percentile: 0.99, threshold_s: 1.5}
      backlog: {max_wait_s: 2}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from optfleet.instance.shared_schema import TOKEN_LIMIT, Integer, Real, Share, Strict, at_most

MAX_SYNTHETIC_REQUESTS = 20_000_000
"""Requests a synthetic trace may hold (mean rate x days): three times the 7-day benchmark trace; the windowed
sums, the fluid queue and the scans all scale with it."""

MAX_WINDOWS = 5_000_000
"""Windows of the cost window over the trace's span (about 58 days at 1 s): the exact models have a row per
window, so a longer span is refused before any array is made (``problem.py`` checks it)."""

MAX_UNITS = 1_000_000
UNITS_LIMIT = at_most(MAX_UNITS, "units", "the purchase grid is scanned unit step by unit step")

Probability = Annotated[Real, Field(gt=0.0, lt=1.0)]
PositiveReal = Annotated[Real, Field(gt=0.0)]
Tau = Annotated[Real, Field(gt=0.0), at_most(1e9, "adjusted tokens/s per unit", "a million times the fastest published unit")]
MAX_PRICE = 1e6
"""A price in $ per unit-hour or per million tokens: ten thousand times the dearest published one (units cost $1-$100
an hour, tokens $0.1-$100 a million); 1e308 overflowed the cost sums to inf and a hybrid MILP's objective to nan."""
Price = Annotated[Real, Field(ge=0.0), at_most(MAX_PRICE, "$", "ten thousand times the dearest published price; far larger ones overflow the costs")]
MAX_WEIGHT = 1000.0
"""A burndown weight (adjusted tokens per token): the published ones lie between 0.1 and 12 (provider_profiles.yaml);
1e308 overflowed a request's work to inf and the purchase grid's size to an internal error, and 1e300 was blamed on tau."""
Weight = Annotated[Real, Field(ge=0.0), at_most(MAX_WEIGHT, "adjusted tokens per token", "about a hundred times the largest published "
                                                "weight; far larger ones overflow the work")]
MAX_WINDOW_S = 1e9
"""A window width in seconds (about 32 years, longer than any trace): 1e308 overflowed ``tau x width`` to inf and the
statistics to NaN."""
WindowSeconds = Annotated[Real, Field(gt=0.0), at_most(MAX_WINDOW_S, "s", "longer than any trace; far longer ones overflow tau x width")]


class LongContextSpec(Strict):
    """Weights of requests whose input exceeds ``threshold_input_tokens`` (``w_think`` defaults to ``w_out``)."""

    threshold_input_tokens: Annotated[Integer, TOKEN_LIMIT] = Field(ge=0)
    w_in: Weight
    w_cache: Weight
    w_out: Weight
    w_think: Weight | None = None


class _ProfileBase(Strict):
    """What every profile may override: the purchase grid (first purchase ``min_units``, then steps of
    ``increment_units``)."""

    min_units: Annotated[Integer, UNITS_LIMIT] | None = Field(None, ge=1)
    increment_units: Annotated[Integer, UNITS_LIMIT] | None = Field(None, ge=1)


class VertexProfileSpec(_ProfileBase):
    """A Vertex AI model from the shipped catalog (``optfleet catalog``-style list: provider_profiles.yaml)."""

    provider: Literal["vertex"]
    model: str


class AzurePtuProfileSpec(_ProfileBase):
    """An Azure OpenAI PTU deployment: the user supplies ``tau`` (PTU throughput is workload-specific);
    weights default to the shipped Azure profile, the grid to the ``deployment`` type."""

    provider: Literal["azure_ptu"]
    model: str = "azure-ptu"
    tau_tokens_per_s_per_unit: Tau
    deployment: Literal["global", "regional"] = "global"
    w_in: Weight | None = None
    w_cache: Weight | None = None
    w_out: Weight | None = None
    w_think: Weight | None = None


class CustomProfileSpec(_ProfileBase):
    """A profile given inline: every weight and ``tau`` (``w_think`` defaults to ``w_out``)."""

    provider: Literal["custom"]
    model: str = "custom"
    unit_name: str = "unit"
    tau_tokens_per_s_per_unit: Tau
    w_in: Weight = 1.0
    w_cache: Weight = 0.0
    w_out: Weight = 1.0
    w_think: Weight | None = None
    long_context: LongContextSpec | None = None


ProfileSpec = Annotated[VertexProfileSpec | AzurePtuProfileSpec | CustomProfileSpec, Field(discriminator="provider")]


class LengthSpec(Strict):
    """A lognormal token count: mean ``mean_tokens``, ``sigma`` the standard deviation of its logarithm
    (0: constant); drawn counts are rounded to whole tokens."""

    mean_tokens: Annotated[Real, TOKEN_LIMIT] = Field(ge=0.0)
    sigma: Real = Field(0.0, ge=0.0, le=5.0)


class SyntheticClassSpec(Strict):
    """One request class of a synthetic trace: its share of the arrivals and its token counts; ``cached_fraction``
    of each input is cached."""

    name: str
    share: Share = Field(gt=0.0)
    input_tokens: LengthSpec
    output_tokens: LengthSpec
    thinking_tokens: LengthSpec = LengthSpec(mean_tokens=0.0)
    cached_fraction: Real = Field(0.0, ge=0.0, le=1.0)


class SyntheticSpec(Strict):
    """A seeded non-homogeneous Poisson trace with a diurnal rate (optfleet.problems.reserved.synthetic):
    ``rate(t) = mean_rps (1 + a cos(2 pi (t - peak_hour h) / 1 day))`` with ``a = (r - 1) / (r + 1)`` for the
    peak-to-trough ratio ``r``."""

    seed: Integer = Field(0, ge=0)
    days: Real = Field(gt=0.0, le=60.0)
    mean_rps: Real = Field(gt=0.0)
    peak_to_trough: Real = Field(1.0, ge=1.0, le=1000.0)
    peak_hour: Real = Field(14.0, ge=0.0, lt=24.0)
    classes: list[SyntheticClassSpec] = Field(min_length=1)

    @model_validator(mode="after")
    def _size(self) -> "SyntheticSpec":
        expected = self.mean_rps * self.days * 86_400
        if expected > MAX_SYNTHETIC_REQUESTS:
            raise ValueError(f"mean_rps x days makes about {expected:,.0f} requests, above the limit of "
                             f"{MAX_SYNTHETIC_REQUESTS:,} (memory and time grow with the trace)")
        names = [c.name for c in self.classes]
        if len(set(names)) != len(names):
            raise ValueError(f"class names must be unique: {names}")
        return self


class TraceSpec(Strict):
    """Exactly one of ``file`` (one path or a list, relative to the instance, or a dataset, ``dataset:NAME`` or
    ``dataset:NAME/PART``; CSV or Parquet, generic or the Azure LLM inference 2023 format), ``synthetic`` or
    ``frame`` (a pandas DataFrame, from Python).

    ``time_unit`` says what the generic ``t`` column counts: ``s``, ``ms``, ``us`` or ``datetime``; the Azure
    format's TIMESTAMP is always ``datetime`` and a list of Azure files gets ``class`` = the file's stem suffix
    (``code``, ``conv``).  Timestamps become seconds since the first request."""

    file: str | list[str] | None = None
    synthetic: SyntheticSpec | None = None
    frame: Any = None
    time_unit: Literal["s", "ms", "us", "datetime"] | None = None

    @field_validator("frame")
    @classmethod
    def _a_frame(cls, value: Any) -> Any:
        if value is None:
            return value
        import pandas as pd

        if not isinstance(value, pd.DataFrame):
            raise ValueError(f"must be a pandas DataFrame, not {type(value).__name__}")
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> "TraceSpec":
        given = [name for name in ("file", "synthetic", "frame") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of file, synthetic, frame (given: {', '.join(given) or 'none'})")
        if isinstance(self.file, list) and not self.file:
            raise ValueError("file: give at least one path")
        return self


class PricesSpec(Strict):
    """Reserved units in $ per unit-hour; pay-as-you-go in $ per million tokens.  Cached input is priced
    at ``paygo_cached_per_million`` (default: the input price, as slosizer does); thinking tokens at the
    output price (providers bill thinking as output)."""

    unit_per_hour: Price
    paygo_input_per_million: Price = 0.0
    paygo_cached_per_million: Price | None = None
    paygo_output_per_million: Price = 0.0


class LatencyTargetSpec(Strict):
    """The ``percentile`` of ``metric`` (``e2e`` = base latency + queue delay, or ``queue`` = queue delay only)
    at most ``threshold_s``."""

    metric: Literal["e2e", "queue"] = "e2e"
    percentile: Probability = 0.99
    threshold_s: PositiveReal


class BaselineLatencySpec(Strict):
    """``L_base = intercept_s + per_input_s I + per_cached_s C + per_output_s O + per_thinking_s H`` given
    outright (default: fitted to the trace's ``latency_s`` when it has 20 or more, else slosizer's fallback)."""

    intercept_s: Real = Field(ge=0.0)
    per_input_s: Real = Field(0.0, ge=0.0)
    per_cached_s: Real = Field(0.0, ge=0.0)
    per_output_s: Real = Field(0.0, ge=0.0)
    per_thinking_s: Real = Field(0.0, ge=0.0)


class BacklogSpec(Strict):
    """Hybrid with backlog carried between cost windows: queued work waits at most ``max_wait_s`` (the backlog
    at a window's end drains within it), the rest spills to pay-as-you-go."""

    max_wait_s: Real = Field(ge=0.0, le=86_400.0)


class RobustSpec(Strict):
    """Scenario-robust sizing: one unit count for every scenario, at least worst-case $/h.  Scenarios are the
    trace cut into consecutive pieces of ``split_s`` seconds (e.g. days), and/or further traces in
    ``traces``; ``max_overload_probability`` (optional) must hold in every scenario at every window."""

    split_s: Real | None = Field(None, gt=0.0)
    traces: list[TraceSpec] = []
    max_overload_probability: Probability | None = None

    @model_validator(mode="after")
    def _some_scenarios(self) -> "RobustSpec":
        if self.split_s is None and not self.traces:
            raise ValueError("give split_s, traces or both (the scenarios)")
        return self


class CommitmentSpec(Strict):
    """A shared commitment: a reservation of units priced at ``prices.unit_per_hour`` for the whole trace,
    units deployed per model and per block of ``block_s`` seconds (each model's deployment on its purchase
    grid, or 0), and on-demand units beyond the reservation at ``on_demand_per_unit_hour``, bought for at least
    ``term_blocks`` consecutive blocks.  ``models`` maps trace classes to profiles (default: one model, the
    instance's profile, serving every class)."""

    block_s: Real = Field(3600.0, gt=0.0)
    on_demand_per_unit_hour: Price
    term_blocks: Integer = Field(1, ge=1, le=10_000)
    models: dict[str, ProfileSpec] = {}


class PlansSpec(Strict):
    """The questions to answer (methods follow from them, see optfleet.problems.reserved.methods)."""

    percentiles: list[Probability] = [0.95, 0.99]
    latency: LatencyTargetSpec | None = None
    hybrid: bool = True
    backlog: BacklogSpec | None = None
    robust: RobustSpec | None = None
    commitment: CommitmentSpec | None = None

    @field_validator("percentiles")
    @classmethod
    def _distinct(cls, value: list[float]) -> list[float]:
        labels = [percentile_label(p) for p in value]
        if len(set(labels)) != len(labels):
            raise ValueError(f"percentiles must differ in their label (p95, p99.9, ...): {labels}")
        return value


class SolveSpec(Strict):
    """What ``solve`` runs by default, and the exact models' options."""

    method: str | None = None
    time_limit_s: Real | None = Field(None, gt=0.0)
    solver: str = "highs"


class ReservedInstanceSpec(Strict):
    """The whole ``kind: reserved`` instance file.

    ``windows_s``: the window lengths of the statistics and of the percentile and overload plans;
    ``cost_window_s``: the window of the pay-as-you-go spill (slosizer's hybrid uses 1 s);
    ``quantile_method``: pandas' ``linear`` interpolation, or ``inverted_cdf`` (the empirical quantile, under
    which a percentile plan and the overload chance constraint agree exactly);
    ``headroom_fraction``: the heuristics' ``1 + headroom`` factor (the exact models take none);
    ``max_units``: the top of the purchase grid scanned (default: enough for the busiest window).
    """

    kind: Literal["reserved"]
    name: str
    description: str = ""
    trace: TraceSpec
    profile: ProfileSpec
    prices: PricesSpec | None = None
    windows_s: list[WindowSeconds] = Field([1.0, 5.0, 30.0], min_length=1)
    cost_window_s: WindowSeconds = 1.0
    quantile_method: Literal["linear", "inverted_cdf"] = "linear"
    headroom_fraction: Real = Field(0.0, ge=0.0, le=10.0)
    max_units: Annotated[Integer, UNITS_LIMIT] | None = Field(None, ge=1)
    baseline_latency: BaselineLatencySpec | None = None
    plans: PlansSpec = PlansSpec()
    solve: SolveSpec = SolveSpec()

    @field_validator("windows_s")
    @classmethod
    def _distinct_widths(cls, value: list[float]) -> list[float]:
        if len(set(value)) != len(value):
            raise ValueError(f"window widths must differ: {value}")
        return value


def percentile_label(p: float) -> str:
    """``0.95`` -> ``p95``, ``0.999`` -> ``p99.9``: how a percentile names its methods."""
    return f"p{round(100 * p, 8):.10g}"
