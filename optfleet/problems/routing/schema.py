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
    bytes_per_token: BytesPerToken
    share: Share = Field(1.0, gt=0.0)
    compressible: bool = False


class FleetSpec(Strict):
    """The fleet the requests are replayed on: a fleet instance (relative to this file) and exactly one of
    ``method`` (a fleet heuristic's plan, e.g. ``pool-routing``), ``plan`` (a plan written out: ``optfleet solve
    --json``'s form) or ``boundary_tokens`` (a short pool at that window and a long pool at the instance's long
    window, C&R multiplier ``gamma``, sized to the fleet evaluator's fewest GPUs).  The plan must have two pools
    with GPUs: short and long.  ``ttft_p99_ms`` replaces the fleet instance's TTFT SLO (e.g. the token-budget
    routing paper's 2 s)."""

    instance: str
    method: str | None = None
    plan: dict[str, Any] | None = None
    boundary_tokens: Annotated[Integer, TOKEN_LIMIT] | None = Field(None, ge=1)
    gamma: Gamma = 1.0
    ttft_p99_ms: Real | None = Field(None, gt=0.0)

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
    requests: Annotated[Integer, at_most(MAX_REQUESTS, "requests", "the replay holds every request's arrays")] = Field(100_000, ge=1)
    seed: Integer = Field(0, ge=0)
    bytes_per_token_spread: Real = Field(0.10, ge=0.0, le=2.0)


class CalibratorSpec(Strict):
    """Options of the calibrator variants (calibrator.py): the paper's ``beta``, ``gamma``; the public router's
    ``decay``, ``below``, ``above``, ``warmup_samples``, ``max_categories``; both: ``cold_start`` (bytes/token
    before feedback) and ``min_ratio``; ``static_ratio`` for the global static baseline."""

    beta: Real = 0.95
    gamma: Real = 1.0
    decay: Real = 0.995
    below: Real = 0.90
    above: Real = 0.10
    warmup_samples: Integer = 10
    max_categories: Integer = 256
    cold_start: BytesPerToken = 4.0
    min_ratio: BytesPerToken = 1.0
    static_ratio: BytesPerToken = 4.0


class DispatcherSpec(Strict):
    """``b_short_tokens`` (default: the short pool's window; at most it), the C&R band multiplier
    ``compress_gamma`` (default: the plan's gamma), spillover limits (``queue_limit`` waiting requests,
    ``pressure_limit`` requests per GPU instance: the fleet simulator's rule uses 0.85; None = off)."""

    b_short_tokens: Annotated[Integer, TOKEN_LIMIT] | None = None
    compress_gamma: Gamma | None = None
    queue_limit: Integer | None = Field(None, ge=0)
    pressure_limit: Real | None = Field(None, gt=0.0)


class ReplaySpec(Strict):
    """How the routed stream is simulated (the fleet simulator's modes) and the share of arrivals discarded as
    warm-up."""

    mode: Literal["slots", "batching"] = "slots"
    warmup_share: Real = Field(0.1, ge=0.0, lt=1.0)


class DesignSpec(Strict):
    """Threshold design: the mis-route probability allowed (``epsilon``), the calibrator whose errors the design
    must absorb, the short windows tried (default: the plan's), the thresholds tried as fractions of the window,
    the C&R multipliers tried; the spill design's queue limits (waiting requests; null = no spillover; default
    null, 0, 4, 16, 64; given, ``gap`` runs the spill design too)."""

    epsilon: Real = Field(0.01, ge=0.0, lt=1.0)
    calibrator: Literal["paper", "router", "static"] = "paper"
    short_windows_tokens: list[Annotated[Integer, TOKEN_LIMIT, Field(ge=1)]] | None = Field(None, min_length=1)
    threshold_fractions: list[Annotated[Real, Field(gt=0.0, le=1.0)]] = Field([1.0, 0.95, 0.9, 0.85, 0.8, 0.7], min_length=1)
    gammas: list[Gamma] = Field([1.0], min_length=1)
    queue_limits: list[Annotated[Integer, Field(ge=0)] | None] | None = Field(None, min_length=1, max_length=32)


class ExactSpec(Strict):
    """Hindsight routing: the capacity windows' width (default: the whole stream), the utilisation cap
    (default: the fleet instance's ``rho_max``) and the routing question's objective: ``busy_instances`` (the work
    the placement asks of the fleet, every capacity window within the cap) or ``overflow`` (the slot-seconds
    above the capacity windows: the work that must queue beyond ``rho_max``, for a fleet too small for the stream)."""

    window_s: PositiveReal | None = None
    rho_max: Probability | None = None
    objective: Literal["busy_instances", "overflow"] = "busy_instances"


class SolveSpec(Strict):
    """What ``solve`` runs by default, and the exact models' options."""

    method: str | None = None
    time_limit_s: Real | None = Field(None, gt=0.0)
    solver: str = "highs"


class RoutingInstanceSpec(Strict):
    """The whole ``kind: routing`` instance file; ``unknown_category`` says what a stream category that no
    ``categories`` entry names does: ``default`` (treated as a non-compressible category of its own) or ``reject``
    (an error)."""

    kind: Literal["routing"]
    name: str
    description: str = ""
    fleet: FleetSpec
    categories: list[CategorySpec] = Field(min_length=1, max_length=MAX_CATEGORIES)
    unknown_category: Literal["default", "reject"] = "reject"
    stream: StreamSpec = StreamSpec()
    calibrator: CalibratorSpec = CalibratorSpec()
    dispatcher: DispatcherSpec = DispatcherSpec()
    replay: ReplaySpec = ReplaySpec()
    exact: ExactSpec = ExactSpec()
    design: DesignSpec = DesignSpec()
    solve: SolveSpec = SolveSpec()

    @model_validator(mode="after")
    def _unique_categories(self) -> "RoutingInstanceSpec":
        names = [c.name for c in self.categories]
        if len(set(names)) != len(names):
            raise ValueError(f"category names must be unique: {names}")
        return self
