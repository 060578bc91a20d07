"""A routing instance in numbers: the fleet plan's two pools, the stream, the calibrators and the dispatcher.

``prepare`` loads the fleet instance the routing instance names (``fleet.instance``), takes its plan (a fleet
method's, or the one written out), checks that the plan has two pools with instances, builds the stream
(stream.py) and the calibrator variants (calibrator.py), and the dispatch and spill rules.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from optfleet.errors import InfeasibleError, InputError
from optfleet.instance.loader import LoadedInstance, load_instance
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.problems.routing.calibrator import Calibrator, PaperCalibrator, RouterCalibrator, StaticCalibrator
from optfleet.problems.routing.dispatcher import DispatchRule
from optfleet.problems.routing.schema import RoutingInstanceSpec
from optfleet.problems.routing.spill import SpillRule
from optfleet.problems.routing.stream import Stream, read_stream, synthesise


@dataclass(frozen=True)
class RoutingProblem:
    """A validated routing instance: the fleet, its plan, the stream and the router's rules."""

    spec: RoutingInstanceSpec
    fleet: FleetProblem
    plan: Plan
    stream: Stream
    compressible: tuple[int, ...]
    calibrators: dict[str, Calibrator]
    rule: DispatchRule
    spill: SpillRule

    @property
    def pools(self) -> tuple[PoolConfig, PoolConfig]:
        short, long = self.plan.pools
        return self.fleet.pool(short.window_tokens, short.gpu), self.fleet.pool(long.window_tokens, long.gpu)

    @property
    def instances(self) -> tuple[int, int]:
        return self.plan.pools[0].instances, self.plan.pools[1].instances

    @property
    def slots(self) -> tuple[int, int]:
        return tuple(g * c.slots_per_instance for g, c in zip(self.instances, self.pools, strict=True))  # type: ignore[return-value]

    @property
    def rho_max(self) -> float:
        return self.spec.exact.rho_max if self.spec.exact.rho_max is not None else self.fleet.rho_max


MAX_CAPACITY_WINDOWS = 100_000
"""Capacity windows a stream may be cut into (each is a pair of rows of the hindsight model and of the evaluator)."""


def capacity_window_count(span_s: float, window_s: float | None) -> int:
    """``W = max(1, round(T / window_s))`` windows over the stream's span ``T`` (one without ``exact.window_s``); an
    InputError naming ``exact.window_s`` above :data:`MAX_CAPACITY_WINDOWS`."""
    if window_s is None:
        return 1
    count = span_s / window_s
    if not count <= MAX_CAPACITY_WINDOWS:
        raise InputError("exact.window_s", window_s, f"cuts the stream's {span_s:,.4g} s into {count:,.4g} capacity windows; at most "
                         f"{MAX_CAPACITY_WINDOWS:,} (a window of at least {span_s / MAX_CAPACITY_WINDOWS:.4g} s)")
    return max(1, int(round(count)))


def prepare(loaded: LoadedInstance) -> RoutingProblem:
    """The routing problem of a loaded instance (module docstring)."""
    from optfleet.problems.fleet.problem import prepare as prepare_fleet

    spec: RoutingInstanceSpec = loaded.spec
    try:
        fleet_loaded = load_instance(loaded.resolve(spec.fleet.instance, "fleet.instance"), slo__ttft_p99_ms=spec.fleet.ttft_p99_ms)
    except InputError as exc:  # the file itself under this instance's field; a field inside it named with its file
        if exc.field == "instance":
            raise InputError("fleet.instance", spec.fleet.instance, exc.problem) from exc
        raise InputError(f"fleet.instance ({spec.fleet.instance}): {exc.field}", exc.value, exc.problem) from exc
    if fleet_loaded.kind != "fleet":
        raise InputError("fleet.instance", spec.fleet.instance, f"names a {fleet_loaded.kind} instance, not a fleet one")
    fleet = prepare_fleet(fleet_loaded)
    plan = _plan(spec, fleet)
    names = tuple(c.name for c in spec.categories)
    ratios = np.array([c.bytes_per_token for c in spec.categories])
    if spec.stream.file is not None:
        stream = read_stream(loaded.resolve(spec.stream.file, "stream.file"), names, ratios, spec.unknown_category)
    else:
        mix = fleet.mix
        stream = synthesise(mix.l_in, mix.l_out, mix.prob, fleet.rate_rps, ratios, np.array([c.share for c in spec.categories]), names,
                            spec.stream.bytes_per_token_spread, spec.stream.requests, spec.stream.seed,
                            integer_mix=fleet_loaded.spec.workload.lengths.trace_file is None)
    if stream.span_s <= 0.0:
        field, value = ("stream.file", spec.stream.file) if spec.stream.file is not None else ("stream.requests", spec.stream.requests)
        raise InputError(field, value, f"the stream's {len(stream)} arrival(s) fall at one instant (span 0 s): the arrival rate, and every "
                         "pool's load, is undefined; give at least two distinct arrival times")
    if stream.total_tokens.max() > plan.pools[1].window_tokens:
        i = int(np.argmax(stream.total_tokens))
        field = "stream.file" if spec.stream.file is not None else "fleet.instance"
        raise InputError(field, spec.stream.file or spec.fleet.instance, f"request {i} (in arrival order) needs {int(stream.total_tokens[i]):,} "
                         f"tokens (input + output), above the long pool's window of {plan.pools[1].window_tokens:,}")
    capacity_window_count(stream.span_s, spec.exact.window_s)  # a window too narrow for the stream is refused here, before any run
    compressible = tuple(k for k, c in enumerate(spec.categories) if c.compressible)
    d = spec.dispatcher
    short_window = plan.pools[0].window_tokens
    gamma = d.compress_gamma if d.compress_gamma is not None else plan.gamma
    rule = DispatchRule(d.b_short_tokens if d.b_short_tokens is not None else short_window, short_window, gamma, compressible)
    problem = RoutingProblem(spec, fleet, plan, stream, compressible, calibrators(spec), rule, SpillRule(d.queue_limit, d.pressure_limit))
    from optfleet.problems.routing.design import rules

    rules(problem)  # the design grid's windows are checked here, so that validate refuses what the design would
    return problem


def calibrators(spec: RoutingInstanceSpec) -> dict[str, Calibrator]:
    """The three variants with the instance's options (their constructors check the ranges)."""
    c = spec.calibrator
    return {
        "paper": PaperCalibrator(beta=c.beta, gamma=c.gamma, cold_start=c.cold_start, min_ratio=c.min_ratio),
        "router": RouterCalibrator(decay=c.decay, below=c.below, above=c.above, cold_start=c.cold_start, warmup_samples=c.warmup_samples,
                                   max_categories=c.max_categories, min_ratio=c.min_ratio),
        "static": StaticCalibrator(ratio=c.static_ratio),
    }


def _plan(spec: RoutingInstanceSpec, fleet: FleetProblem) -> Plan:
    """The fleet plan the routing instance names; it must have a short and a long pool, each with instances."""
    from optfleet.problems.fleet.heuristics import FLEET_METHODS, size_plan
    from optfleet.problems.fleet.plan import PoolPlan, check_plan

    if spec.fleet.method is not None:
        if spec.fleet.method not in FLEET_METHODS:
            raise InputError("fleet.method", spec.fleet.method, f"not a fleet heuristic; known: {', '.join(FLEET_METHODS)}")
        plan = _sized(lambda: FLEET_METHODS[spec.fleet.method](fleet), f"fleet.method {spec.fleet.method}")
    elif spec.fleet.plan is not None:
        try:
            plan = Plan.from_dict(spec.fleet.plan)
            check_plan(fleet, plan)
        except InputError as exc:  # the plan's own paths (plan.pools[0].gpu) under this instance's fleet block
            raise InputError(f"fleet.{exc.field}", exc.value, exc.problem) from exc
    else:
        boundary = spec.fleet.boundary_tokens
        if boundary >= fleet.long_window_tokens:
            raise InputError("fleet.boundary_tokens", boundary, f"must be below the fleet's long window of {fleet.long_window_tokens} tokens")
        if fleet.hardware.slots_per_instance(boundary) < 1:
            raise InputError("fleet.boundary_tokens", boundary, f"holds no KV slot on the fleet's {fleet.hardware.label} (hardware block)")
        pools = (PoolPlan("short", boundary, 0), PoolPlan("long", fleet.long_window_tokens, 0))
        plan = _sized(lambda: size_plan(fleet, Plan(pools=pools, gamma=spec.fleet.gamma, method=f"boundary {boundary}")),
                      f"fleet.boundary_tokens {boundary}")
    if len(plan.pools) != 2 or plan.rules is not None:
        field, value = ("fleet.method", spec.fleet.method) if spec.fleet.method is not None else ("fleet.plan.pools", len(plan.pools))
        raise InputError(field, value, f"the plan has {len(plan.pools)} pools"
                         + (" and split routing rules" if plan.rules is not None else "") + "; token-budget routing needs a short and a long pool")
    for i, pool in enumerate(plan.pools):
        if pool.instances < 1:
            where = "fleet.method" if spec.fleet.method is not None else f"fleet.plan.pools[{i}].instances"
            raise InputError(where, spec.fleet.method or pool.instances, f"the plan's pool {pool.name} has no instance: token-budget routing needs both pools")
    return plan


def _sized(make_plan: Callable[[], Plan], what: str) -> Plan:
    """The plan ``make_plan`` sizes; when no size meets the fleet's SLO, the reason and what to give instead."""
    try:
        return make_plan()
    except InfeasibleError as exc:
        raise InfeasibleError(f"{exc}; the plan that {what} names cannot be sized at this SLO: give fleet.plan with explicit pools "
                              "and instance counts to replay the routers and run the threshold design on it") from exc
