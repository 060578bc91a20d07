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
    """Requests with more input tokens than this take these weights instead of the profile's."""
    w_in: Weight
    """Adjusted tokens per uncached input token of a long-context request."""
    w_cache: Weight
    """Adjusted tokens per cached input token of a long-context request."""
    w_out: Weight
    """Adjusted tokens per output token of a long-context request."""
    w_think: Weight | None = None
    """Adjusted tokens per thinking token of a long-context request (default: ``w_out``)."""


class _ProfileBase(Strict):
    """What every profile may override: the purchase grid (first purchase ``min_units``, then steps of
    ``increment_units``)."""

    min_units: Annotated[Integer, UNITS_LIMIT] | None = Field(None, ge=1)
    """The first purchase, in units (default: the profile's; 1 for Vertex and custom, 15 or 50 PTUs for Azure by
    ``deployment``)."""
    increment_units: Annotated[Integer, UNITS_LIMIT] | None = Field(None, ge=1)
    """Units per purchase step above ``min_units`` (default: the profile's; 1 for Vertex and custom, 5 or 50 PTUs for
    Azure)."""


class VertexProfileSpec(_ProfileBase):
    """A Vertex AI model from the shipped catalog (``optfleet catalog``-style list: provider_profiles.yaml)."""

    provider: Literal["vertex"]
    model: str
    """The Vertex AI model, by its name in the shipped catalog (e.g. ``gemini-2.5-flash``), which gives tau and the
    weights."""


class AzurePtuProfileSpec(_ProfileBase):
    """An Azure OpenAI PTU deployment: the user supplies ``tau`` (PTU throughput is workload-specific);
    weights default to the shipped Azure profile, the grid to the ``deployment`` type."""

    provider: Literal["azure_ptu"]
    model: str = "azure-ptu"
    """A name for the deployed model (free text)."""
    tau_tokens_per_s_per_unit: Tau
    """Adjusted tokens per second one PTU serves: your own calibration (PTU throughput is workload-specific)."""
    deployment: Literal["global", "regional"] = "global"
    """The deployment type, which sets the purchase grid: ``global`` (15 PTUs, then steps of 5) or ``regional`` (50,
    then steps of 50)."""
    w_in: Weight | None = None
    """Adjusted tokens per uncached input token (default: the shipped Azure profile's, 1)."""
    w_cache: Weight | None = None
    """Adjusted tokens per cached input token (default: the shipped Azure profile's, 0)."""
    w_out: Weight | None = None
    """Adjusted tokens per output token (default: the shipped Azure profile's, 4)."""
    w_think: Weight | None = None
    """Adjusted tokens per thinking token (default: ``w_out``)."""


class CustomProfileSpec(_ProfileBase):
    """A profile given inline: every weight and ``tau`` (``w_think`` defaults to ``w_out``)."""

    provider: Literal["custom"]
    model: str = "custom"
    """A name for the model (free text)."""
    unit_name: str = "unit"
    """What one reserved unit is called in reports (e.g. ``GSU``, ``PTU``)."""
    tau_tokens_per_s_per_unit: Tau
    """Adjusted tokens per second one unit serves."""
    w_in: Weight = 1.0
    """Adjusted tokens per uncached input token."""
    w_cache: Weight = 0.0
    """Adjusted tokens per cached input token."""
    w_out: Weight = 1.0
    """Adjusted tokens per output token."""
    w_think: Weight | None = None
    """Adjusted tokens per thinking token (default: ``w_out``)."""
    long_context: LongContextSpec | None = None
    """Other weights for requests whose input exceeds a threshold (optional)."""


ProfileSpec = Annotated[VertexProfileSpec | AzurePtuProfileSpec | CustomProfileSpec, Field(discriminator="provider")]


class LengthSpec(Strict):
    """A lognormal token count: mean ``mean_tokens``, ``sigma`` the standard deviation of its logarithm
    (0: constant); drawn counts are rounded to whole tokens."""

    mean_tokens: Annotated[Real, TOKEN_LIMIT] = Field(ge=0.0)
    """Mean token count per request."""
    sigma: Real = Field(0.0, ge=0.0, le=5.0)
    """Standard deviation of the count's logarithm (0: every request has the mean)."""


class SyntheticClassSpec(Strict):
    """One request class of a synthetic trace: its share of the arrivals and its token counts; ``cached_fraction``
    of each input is cached."""

    name: str
    """The class's name (its requests' ``class``), unique within the trace."""
    share: Share = Field(gt=0.0)
    """Relative share of the arrivals (only the ratios between classes count)."""
    input_tokens: LengthSpec
    """Input tokens per request."""
    output_tokens: LengthSpec
    """Output tokens per request."""
    thinking_tokens: LengthSpec = LengthSpec(mean_tokens=0.0)
    """Thinking tokens per request (default: none)."""
    cached_fraction: Real = Field(0.0, ge=0.0, le=1.0)
    """Share of each request's input tokens that is cached."""


class SyntheticSpec(Strict):
    """A seeded non-homogeneous Poisson trace with a diurnal rate (optfleet.problems.reserved.synthetic):
    ``rate(t) = mean_rps (1 + a cos(2 pi (t - peak_hour h) / 1 day))`` with ``a = (r - 1) / (r + 1)`` for the
    peak-to-trough ratio ``r``."""

    seed: Integer = Field(0, ge=0)
    """Seed of the random generator: the same seed draws the same trace."""
    days: Real = Field(gt=0.0, le=60.0)
    """Length of the trace, in days."""
    mean_rps: Real = Field(gt=0.0)
    """Mean arrival rate over a day, requests per second."""
    peak_to_trough: Real = Field(1.0, ge=1.0, le=1000.0)
    """Ratio r of the daily peak rate to the trough (1: a constant rate)."""
    peak_hour: Real = Field(14.0, ge=0.0, lt=24.0)
    """Hour of the day of the peak rate (0 to 24)."""
    classes: list[SyntheticClassSpec] = Field(min_length=1)
    """The request classes, with their shares and token counts."""

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
    """Trace file(s): generic CSV or Parquet (``t``, ``input_tokens``, ``output_tokens``, optional ``cached_tokens``,
    ``thinking_tokens``, ``latency_s``, ``class``) or Azure 2023."""
    synthetic: SyntheticSpec | None = None
    """A seeded synthetic trace with a daily cycle, instead of a file."""
    frame: Any = None
    """A pandas DataFrame with the generic columns (from Python only)."""
    time_unit: Literal["s", "ms", "us", "datetime"] | None = None
    """What the generic ``t`` column counts: ``s``, ``ms``, ``us`` or ``datetime``; required for a generic file or
    frame, ``datetime`` or left out for Azure files."""

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
    """Price of one reserved unit, $ per unit-hour."""
    paygo_input_per_million: Price = 0.0
    """Pay-as-you-go price of input tokens, $ per million."""
    paygo_cached_per_million: Price | None = None
    """Pay-as-you-go price of cached input tokens, $ per million (default: the input price)."""
    paygo_output_per_million: Price = 0.0
    """Pay-as-you-go price of output tokens, $ per million; thinking tokens are billed at it too."""


class LatencyTargetSpec(Strict):
    """The ``percentile`` of ``metric`` (``e2e`` = base latency + queue delay, or ``queue`` = queue delay only)
    at most ``threshold_s``."""

    metric: Literal["e2e", "queue"] = "e2e"
    """``e2e``: baseline latency + queue delay; ``queue``: the queue delay only."""
    percentile: Probability = 0.99
    """The percentile of the metric that must meet the target (0.99: P99)."""
    threshold_s: PositiveReal
    """The target, in seconds."""


class BaselineLatencySpec(Strict):
    """``L_base = intercept_s + per_input_s I + per_cached_s C + per_output_s O + per_thinking_s H`` given
    outright (default: fitted to the trace's ``latency_s`` when it has 20 or more, else slosizer's fallback)."""

    intercept_s: Real = Field(ge=0.0)
    """Fixed part of a request's baseline latency, in seconds."""
    per_input_s: Real = Field(0.0, ge=0.0)
    """Seconds per input token (all of them, cached ones included)."""
    per_cached_s: Real = Field(0.0, ge=0.0)
    """Seconds added per cached input token."""
    per_output_s: Real = Field(0.0, ge=0.0)
    """Seconds per output token."""
    per_thinking_s: Real = Field(0.0, ge=0.0)
    """Seconds per thinking token."""


class BacklogSpec(Strict):
    """Hybrid with backlog carried between cost windows: queued work waits at most ``max_wait_s`` (the backlog
    at a window's end drains within it), the rest spills to pay-as-you-go."""

    max_wait_s: Real = Field(ge=0.0, le=86_400.0)
    """Longest time queued work may wait for the units, in seconds; the rest spills to pay-as-you-go."""


class RobustSpec(Strict):
    """Scenario-robust sizing: one unit count for every scenario, at least worst-case $/h.  Scenarios are the
    trace cut into consecutive pieces of ``split_s`` seconds (e.g. days), and/or further traces in
    ``traces``; ``max_overload_probability`` (optional) must hold in every scenario at every window."""

    split_s: Real | None = Field(None, gt=0.0)
    """Cut the trace into consecutive scenarios of this many seconds (86400: one per day)."""
    traces: list[TraceSpec] = []
    """Further traces, one scenario each."""
    max_overload_probability: Probability | None = None
    """Largest overload probability allowed in every scenario at every window (optional)."""

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
    """Length of a deployment block, in seconds (3600: hourly)."""
    on_demand_per_unit_hour: Price
    """Price of an on-demand unit beyond the reservation, $ per unit-hour."""
    term_blocks: Integer = Field(1, ge=1, le=10_000)
    """Fewest consecutive blocks an on-demand purchase lasts."""
    models: dict[str, ProfileSpec] = {}
    """Trace class -> the profile of the model that serves it (default: the instance's profile serves every class)."""


class PlansSpec(Strict):
    """The questions to answer (methods follow from them, see optfleet.problems.reserved.methods)."""

    percentiles: list[Probability] = [0.95, 0.99]
    """Percentiles of the windows' load to size for, one overload question each (``percentile_pXX``,
    ``overload_scan_pXX``, ``chance_pXX``)."""
    latency: LatencyTargetSpec | None = None
    """A latency target: asks for the fewest units that meet it (optional)."""
    hybrid: bool = True
    """Whether to ask the hybrid question (least $/h of units plus pay-as-you-go spill); asked only with ``prices``."""
    backlog: BacklogSpec | None = None
    """Ask for the least $/h with backlog carried between windows within a wait limit (optional; needs ``prices``)."""
    robust: RobustSpec | None = None
    """Ask for one unit count for every scenario at the least worst-case $/h (optional; needs ``prices``)."""
    commitment: CommitmentSpec | None = None
    """Ask for a shared reservation with on-demand units, deployed per model and block (optional; needs ``prices``)."""

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
    """The method ``optfleet solve`` runs; default: ``hybrid`` when prices are given, else the first exact method asked
    for."""
    time_limit_s: Real | None = Field(None, gt=0.0)
    """Time limit of each exact model's solve, in seconds (default: none)."""
    solver: str = "highs"
    """``highs`` (embedded) or a Pyomo solver installed here, by its Pyomo name."""


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
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    trace: TraceSpec
    """The request trace: file(s), a synthetic trace or a DataFrame."""
    profile: ProfileSpec
    """The provider profile: how a request becomes adjusted tokens, what one unit serves and the purchase grid."""
    prices: PricesSpec | None = None
    """Unit and pay-as-you-go prices; without them there is no hybrid question, and backlog, robust and commitment are
    refused."""
    windows_s: list[WindowSeconds] = Field([1.0, 5.0, 30.0], min_length=1)
    """Window lengths of the statistics and of the percentile and overload plans, in seconds."""
    cost_window_s: WindowSeconds = 1.0
    """Window of the pay-as-you-go spill, in seconds (slosizer's hybrid uses 1 s)."""
    quantile_method: Literal["linear", "inverted_cdf"] = "linear"
    """``linear``: pandas' interpolated quantile; ``inverted_cdf``: the empirical quantile, on which percentile and
    overload plans agree."""
    headroom_fraction: Real = Field(0.0, ge=0.0, le=10.0)
    """Headroom the heuristics add: units ``round_up(G (1 + headroom))``; the exact models take none."""
    max_units: Annotated[Integer, UNITS_LIMIT] | None = Field(None, ge=1)
    """Top of the purchase grid scanned, in units (default: enough for the busiest window)."""
    baseline_latency: BaselineLatencySpec | None = None
    """The baseline latency given outright (default: fitted to the trace's ``latency_s`` when it has 20 or more, else
    slosizer's fallback)."""
    plans: PlansSpec = PlansSpec()
    """The questions to answer; the methods follow from them."""
    solve: SolveSpec = SolveSpec()
    """The default method and the exact models' options."""

    @field_validator("windows_s")
    @classmethod
    def _distinct_widths(cls, value: list[float]) -> list[float]:
        if len(set(value)) != len(value):
            raise ValueError(f"window widths must differ: {value}")
        return value


def percentile_label(p: float) -> str:
    """``0.95`` -> ``p95``, ``0.999`` -> ``p99.9``: how a percentile names its methods."""
    return f"p{round(100 * p, 8):.10g}"
