"""Typed schema of a ``kind: routing`` instance file (token-budget pool routing replayed on a fleet plan).

An instance names a two-pool fleet (a fleet instance and a plan for it: a fleet method's or a given one), the
traffic categories with their bytes per token, the request stream (synthesised from the fleet instance's token
mix, or a CSV file), the calibrator options, the dispatcher, the replay mode and the exact views.  Example::

    kind: routing
    name: tiny
    fleet: {instance: ../fleet/toy.yaml, method: pool-routing}
    categories:
      - {name: prose, bytes_per_token: 4.48, share: 0.5, compressible: true}
      - {name: code, bytes_per_token: 3.52, share: 0.5}
    stream: {requests: 2000, seed: 0}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from optfleet.instance.shared_schema import TOKEN_LIMIT, Integer, Real, Share, Strict, at_most
from optfleet.problems.fleet.schema import Gamma

MAX_REQUESTS = 5_000_000
"""Requests a replayed stream may hold: every request's arrays are held at once (about 200 bytes each at the
peak, 1 GB) and the spill and slot simulations step through them one by one (about 1 s per 10^6)."""

MAX_CATEGORIES = 4096
PositiveReal = Annotated[Real, Field(gt=0.0)]
BytesPerToken = Annotated[Real, Field(ge=0.1, le=1000.0)]
"""A bytes-per-token ratio: a token covers at least one byte of UTF-8 text and rarely more than a few dozen; the
bounds, wider than that, keep every byte count and token estimate derived from a ratio finite (1e300 overflowed)."""
Probability = Annotated[Real, Field(gt=0.0, lt=1.0)]


class CategorySpec(Strict):
    """A traffic category: its mean bytes per token, its share of a synthesised stream and whether
    Compress-and-Route may compress it (code may not: the FleetOpt paper's safety gate)."""

    name: str = Field(min_length=1)
    """The category's name, as the stream's ``category`` column writes it."""
    bytes_per_token: BytesPerToken
    """Mean bytes of text per token of the category."""
    share: Share = Field(1.0, gt=0.0)
    """Relative share of the category in a synthesised stream (only the ratios count)."""
    compressible: bool = False
    """Whether Compress-and-Route may compress the category's prompts (code may not)."""


class FleetSpec(Strict):
    """The fleet the requests are replayed on: a fleet instance (relative to this file) and exactly one of
    ``method`` (a fleet heuristic's plan, e.g. ``pool-routing``), ``plan`` (a plan written out: ``optfleet solve
    --json``'s form) or ``boundary_tokens`` (a short pool at that window and a long pool at the instance's long
    window, C&R multiplier ``gamma``, sized to the fleet evaluator's fewest instances).  The plan must have two pools
    with instances: short and long.  ``ttft_p99_ms`` replaces the fleet instance's TTFT SLO (e.g. the token-budget
    routing paper's 2 s)."""

    instance: str
    """The fleet instance (``kind: fleet``) the requests are replayed on, a path relative to this file."""
    method: str | None = None
    """Take the plan of this fleet heuristic (e.g. ``pool-routing``)."""
    plan: dict[str, Any] | None = None
    """A plan written out, in the form of ``optfleet solve --json``."""
    boundary_tokens: Annotated[Integer, TOKEN_LIMIT] | None = Field(None, ge=1)
    """A short pool at this window (tokens) and a long pool at the instance's long window, sized to the fewest instances."""
    gamma: Gamma = 1.0
    """The Compress-and-Route multiplier of a plan made from ``boundary_tokens`` (1: no compression)."""
    ttft_p99_ms: Real | None = Field(None, gt=0.0)
    """P99 TTFT target in ms, replacing the fleet instance's (default: the instance's)."""

    @model_validator(mode="after")
    def _one_plan(self) -> "FleetSpec":
        given = [name for name in ("method", "plan", "boundary_tokens") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(f"give exactly one of method, plan, boundary_tokens (given: {', '.join(given) or 'none'})")
        return self


class StreamSpec(Strict):
    """The request stream: ``file`` (CSV, relative to the instance, columns ``arrival_s, bytes, input_tokens,
    output_tokens, category``) or, without a file, ``requests`` Poisson arrivals at the fleet instance's rate with
    token counts drawn from its mix and categories by share.  A synthesised request's bytes are
    ``round(L_in c_k e^{s Z})``, ``Z`` standard normal, ``s = bytes_per_token_spread`` (the log-spread of a
    request's ratio around its category mean; the mean ratio is kept: ``c_k`` is scaled by ``e^{-s^2/2}``)."""

    file: str | None = None
    """A CSV stream (columns ``arrival_s, bytes, input_tokens, output_tokens, category``); default: a synthesised
    stream."""
    requests: Annotated[Integer, at_most(MAX_REQUESTS, "requests", "the replay holds every request's arrays")] = Field(100_000, ge=1)
    """Requests of a synthesised stream (Poisson arrivals at the fleet instance's rate)."""
    seed: Integer = Field(0, ge=0)
    """Seed of the synthesised stream: the same seed draws the same stream."""
    bytes_per_token_spread: Real = Field(0.10, ge=0.0, le=2.0)
    """Log-spread ``s`` of a synthesised request's bytes per token around its category's mean (0: every request at the
    mean)."""


class CalibratorSpec(Strict):
    """Options of the calibrator variants (calibrator.py): the paper's ``beta``, ``gamma``; the public router's
    ``decay``, ``below``, ``above``, ``warmup_samples``, ``max_categories``; both: ``cold_start`` (bytes/token
    before feedback) and ``min_ratio``; ``static_ratio`` for the global static baseline."""

    beta: Real = 0.95
    """The paper's calibrator: EMA weight of the old estimate in ``c_k <- beta c_k + (1 - beta) c_obs``."""
    gamma: Real = 1.0
    """The paper's calibrator: routes with ``c_k - gamma sigma_k``, gamma deviations below the mean ratio."""
    decay: Real = 0.995
    """The router's calibrator: EMA decay ``d`` of its mean estimate."""
    below: Real = 0.90
    """The router's calibrator: step of its conservative tracker when an observation lies below it."""
    above: Real = 0.10
    """The router's calibrator: step of its conservative tracker when an observation lies at or above it."""
    warmup_samples: Integer = 10
    """The router's calibrator: observations of a category before its tracker is used (the cold-start ratio until
    then)."""
    max_categories: Integer = 256
    """The router's calibrator: categories tracked, the first seen; the others share one default tracker."""
    cold_start: BytesPerToken = 4.0
    """Bytes per token a category is routed with before any feedback (paper's and router's calibrators)."""
    min_ratio: BytesPerToken = 1.0
    """Floor of the routing ratio in bytes per token (paper's and router's calibrators)."""
    static_ratio: BytesPerToken = 4.0
    """The one global bytes-per-token ratio of the static baseline."""


class DispatcherSpec(Strict):
    """``b_short_tokens`` (default: the short pool's window; at most it), the C&R band multiplier
    ``compress_gamma`` (default: the plan's gamma), spillover limits (``queue_limit`` waiting requests,
    ``pressure_limit`` requests per GPU instance: the fleet simulator's rule uses 0.85; None = off)."""

    b_short_tokens: Annotated[Integer, TOKEN_LIMIT] | None = None
    """The routing threshold B in tokens: a request whose estimated budget is at most B goes short (default and maximum:
    the short window)."""
    compress_gamma: Gamma | None = None
    """The Compress-and-Route band multiplier: compressible requests with ``B < L <= gamma B`` are compressed (default:
    the plan's gamma)."""
    queue_limit: Integer | None = Field(None, ge=0)
    """Spill to the other pool when the target pool has more than this many waiting requests (default: off)."""
    pressure_limit: Real | None = Field(None, gt=0.0)
    """Spill when the target pool's requests per GPU instance reach this (the fleet simulator's rule uses 0.85; default:
    off)."""


class ReplaySpec(Strict):
    """How the routed stream is simulated (the fleet simulator's modes) and the share of arrivals discarded as
    warm-up."""

    mode: Literal["slots", "batching"] = "slots"
    """How the routed stream is simulated: ``slots`` (FCFS queues of KV slots) or ``batching`` (continuous batching)."""
    warmup_share: Real = Field(0.1, ge=0.0, lt=1.0)
    """Share of the first arrivals discarded as warm-up from the statistics."""


class DesignSpec(Strict):
    """Threshold design: the mis-route probability allowed (``epsilon``), the calibrator whose errors the design
    must absorb, the short windows tried (default: the plan's), the thresholds tried as fractions of the window,
    the C&R multipliers tried; the spill design's queue limits (waiting requests; null = no spillover; default
    null, 0, 4, 16, 64; given, ``gap`` runs the spill design too)."""

    epsilon: Real = Field(0.01, ge=0.0, lt=1.0)
    """Largest mis-route probability the threshold design allows (requests placed short whose true budget exceeds the
    window)."""
    calibrator: Literal["paper", "router", "static"] = "paper"
    """The calibrator whose errors the design must absorb: ``paper``, ``router`` or ``static``."""
    short_windows_tokens: list[Annotated[Integer, TOKEN_LIMIT, Field(ge=1)]] | None = Field(None, min_length=1)
    """Short windows the design tries, in tokens (default: the plan's)."""
    threshold_fractions: list[Annotated[Real, Field(gt=0.0, le=1.0)]] = Field([1.0, 0.95, 0.9, 0.85, 0.8, 0.7], min_length=1)
    """Thresholds the design tries, as fractions of the short window."""
    gammas: list[Gamma] = Field([1.0], min_length=1)
    """Compress-and-Route multipliers the design tries."""
    queue_limits: list[Annotated[Integer, Field(ge=0)] | None] | None = Field(None, min_length=1, max_length=32)
    """Queue limits the spill design tries (null: no spillover); given, ``gap`` runs the spill design too (default:
    null, 0, 4, 16, 64)."""


class ExactSpec(Strict):
    """Hindsight routing: the capacity windows' width (default: the whole stream), the utilisation cap
    (default: the fleet instance's ``rho_max``) and the routing question's objective: ``busy_instances`` (the work
    the placement asks of the fleet, every capacity window within the cap) or ``overflow`` (the slot-seconds
    above the capacity windows: the work that must queue beyond ``rho_max``, for a fleet too small for the stream)."""

    window_s: PositiveReal | None = None
    """Width of the capacity windows of hindsight routing, in seconds (default: the whole stream)."""
    rho_max: Probability | None = None
    """Utilisation cap of hindsight routing (default: the fleet instance's ``rho_max``)."""
    objective: Literal["busy_instances", "overflow"] = "busy_instances"
    """``busy_instances``: the work asked of the fleet, every window within the cap; ``overflow``: the slot-seconds
    above the windows' capacity."""


class SolveSpec(Strict):
    """What ``solve`` runs by default, and the exact models' options."""

    method: str | None = None
    """The method ``optfleet solve`` runs (default: ``paper``, the paper's calibrator)."""
    time_limit_s: Real | None = Field(None, gt=0.0)
    """Time limit of each exact model's solve, in seconds (default: none)."""
    solver: str = "highs"
    """``highs`` (embedded) or a Pyomo solver installed here, by its Pyomo name."""


class RoutingInstanceSpec(Strict):
    """The whole ``kind: routing`` instance file; ``unknown_category`` says what a stream category that no
    ``categories`` entry names does: ``default`` (treated as a non-compressible category of its own) or ``reject``
    (an error)."""

    kind: Literal["routing"]
    name: str
    """The instance's name, shown in every report."""
    description: str = ""
    """Free text describing the instance."""
    fleet: FleetSpec
    """The two-pool fleet the requests are replayed on: a fleet instance and a plan for it."""
    categories: list[CategorySpec] = Field(min_length=1, max_length=MAX_CATEGORIES)
    """The traffic categories, with their bytes per token, shares and compressibility."""
    unknown_category: Literal["default", "reject"] = "reject"
    """What a stream category no ``categories`` entry names does: ``default`` (a non-compressible category of its own)
    or ``reject`` (an error)."""
    stream: StreamSpec = StreamSpec()
    """The request stream: a CSV file, or synthesised from the fleet instance's token mix."""
    calibrator: CalibratorSpec = CalibratorSpec()
    """Options of the bytes-per-token calibrators."""
    dispatcher: DispatcherSpec = DispatcherSpec()
    """The routing threshold, the Compress-and-Route band and the spillover limits."""
    replay: ReplaySpec = ReplaySpec()
    """How the routed stream is simulated."""
    exact: ExactSpec = ExactSpec()
    """Options of hindsight routing."""
    design: DesignSpec = DesignSpec()
    """Options of the threshold design and the spill design."""
    solve: SolveSpec = SolveSpec()
    """The default method and the exact models' options."""

    @model_validator(mode="after")
    def _unique_categories(self) -> "RoutingInstanceSpec":
        names = [c.name for c in self.categories]
        if len(set(names)) != len(names):
            raise ValueError(f"category names must be unique: {names}")
        return self
