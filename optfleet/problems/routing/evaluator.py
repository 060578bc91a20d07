"""The one evaluator of the routing kind: every placement of the stream (a router's, or the hindsight model's)
is scored here.

* **busy GPU instances** (the objective): the work the placement asks of the fleet, ``sum_i S_p(i)(i) / n_max,p``
  over the stream's span ``T`` (``S`` the service time in the request's pool, ``n_max,p`` the pool's KV slots
  per GPU instance): the mean number of instances kept busy.  A short-pool slot-second costs less than a
  long-pool one (more slots per instance), so every request placed long that would fit short costs extra;
* **capacity** (the rule a placement must meet): in every capacity window ``w`` (``exact.window_s``, default the
  whole stream) and pool ``p`` the offered slot-seconds of the requests arriving in ``w`` stay within
  ``rho_max x slots_p x |w|``; the **overflow** ``sum_p,w (work_p,w - rho_max slots_p |w|)^+`` is the work above
  it (the objective under ``exact.objective: overflow``);
* counts: mis-routes, compressed requests and the compressor's refusals (replay.py), wasted long placements (served long although the true
  budget ``L_in + L_out <= B``), spills; per category the mis-route rate and the calibration error
  ``|c_hat_k(n) - c_k| / c_k`` after ``n`` observations;
* per pool, from the fleet simulator's models (simulate.py): P50/P99 TTFT and TPOT, SLO attainment, and the
  fewest GPU instances that keep the pool's busy instances within ``rho_max`` of them and whose slot-mode replay
  of the same placement meets the P99 TTFT SLO; the cost of the plan's fleet against that fleet.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.routing.dispatcher import LONG, SHORT
from optfleet.problems.routing.problem import RoutingProblem, capacity_window_count
from optfleet.problems.routing.replay import Routing, service_s
from optfleet.problems.routing.simulate import fewest_instances, pool_latency

CHECKPOINTS = (10, 50, 100, 1000, 10_000)
"""Observations per category after which the calibration error is reported."""


@dataclass(frozen=True)
class PoolOutcome:
    """One pool under a placement: its requests, work, simulated latency and the GPUs it needed."""

    name: str
    window_tokens: int
    instances: int
    requests: int
    busy_instances: float
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    slo_attainment: float | None
    needed_instances: int | None
    cost_per_instance_hour: float

    @property
    def cost_per_hour(self) -> float:
        return self.instances * self.cost_per_instance_hour


@dataclass(frozen=True)
class RoutingEvaluation:
    """A placement scored (module docstring)."""

    requests: int
    misroutes: int
    wasted_long: int
    spills: int
    compressed: int
    short_share: float
    busy_instances: float
    overloaded_windows: tuple[int, int]
    overflow_slot_s: float
    pools: tuple[PoolOutcome, PoolOutcome]
    misroute_rate_by_category: dict[str, float] = field(default_factory=dict)
    calibration_error: dict[str, dict[int, float]] = field(default_factory=dict)
    ratio_at_50: dict[str, float] = field(default_factory=dict)
    refused: int = 0

    @property
    def plan_cost_per_hour(self) -> float:
        return sum(p.cost_per_hour for p in self.pools)

    @property
    def needed_cost_per_hour(self) -> float | None:
        if any(p.needed_instances is None for p in self.pools):
            return None
        return sum(p.needed_instances * p.cost_per_instance_hour for p in self.pools)

    @property
    def capacity_ok(self) -> bool:
        return self.overloaded_windows == (0, 0)


def capacity_windows(problem: RoutingProblem) -> tuple[NDArray[np.int64], float, int]:
    """Every request's capacity window, the windows' width (s) and count: ``W = max(1, round(T / window_s))``
    equal windows over the span ``T`` (one window without ``exact.window_s``)."""
    s = problem.stream
    span = max(s.span_s, 1e-9)
    count = capacity_window_count(span, problem.spec.exact.window_s)
    index = np.minimum(((s.arrival_s - s.arrival_s[0]) / (span / count)).astype(np.int64), count - 1)
    return index, span / count, count


def work_slot_s(problem: RoutingProblem, routing: Routing) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Every request's slot-seconds in its own pool, split by pool (zero in the other)."""
    short_s, long_s = service_s(problem, routing.input_tokens)
    on_short = routing.pool == SHORT
    return np.where(on_short, short_s, 0.0), np.where(on_short, 0.0, long_s)


def evaluate(problem: RoutingProblem, routing: Routing, *, needed: bool = True) -> RoutingEvaluation:
    """Score ``routing`` (module docstring); ``needed=False`` skips the search for the fleet the replay needed."""
    s = problem.stream
    short, long = problem.pools
    work = work_slot_s(problem, routing)
    span = max(s.span_s, 1e-9)
    busy = float(work[0].sum() / short.slots_per_instance + work[1].sum() / long.slots_per_instance) / span
    index, width, count = capacity_windows(problem)
    per_window = [np.bincount(index, weights=w, minlength=count) for w in work]
    capacity = [problem.rho_max * slots * width for slots in problem.slots]
    overloaded = tuple(int((w > cap * (1 + 1e-9)).sum()) for w, cap in zip(per_window, capacity, strict=True))
    overflow = float(sum(np.maximum(w - cap, 0.0).sum() for w, cap in zip(per_window, capacity, strict=True)))
    measured_from = float(s.arrival_s[int(problem.spec.replay.warmup_share * (len(s) - 1))])
    rng = np.random.default_rng(problem.spec.stream.seed)
    pools = tuple(_pool(problem, routing, p, measured_from, rng, needed) for p in (SHORT, LONG))
    wasted = int(((routing.pool == LONG) & (s.total_tokens <= problem.rule.b_short_tokens)).sum())
    by_category = {name: float(routing.misrouted[s.category == k].mean()) for k, name in enumerate(s.names) if (s.category == k).any()}
    errors, at_50 = _calibration(problem, routing)
    refused = 0 if routing.refused is None else int(routing.refused.sum())
    return RoutingEvaluation(len(s), int(routing.misrouted.sum()), wasted, int(routing.spilled.sum()), int(routing.compressed.sum()),
                             float((routing.pool == SHORT).mean()), busy, overloaded, overflow, pools, by_category, errors, at_50,  # type: ignore[arg-type]
                             refused)


def _pool(problem: RoutingProblem, routing: Routing, p: int, measured_from: float, rng: np.random.Generator, needed: bool) -> PoolOutcome:
    s = problem.stream
    config, plan_pool, instances = problem.pools[p], problem.plan.pools[p], problem.instances[p]
    mine = routing.pool == p
    arrival, l_in, l_out = s.arrival_s[mine], routing.input_tokens[mine], s.output_tokens[mine]
    service = config.service_ms(l_in, l_out) / 1000.0
    busy = float(service.sum()) / config.slots_per_instance / max(s.span_s, 1e-9)
    if not mine.any():
        return PoolOutcome(plan_pool.name, config.window_tokens, instances, 0, 0.0, None, None, None, None, None, 0, config.cost_per_instance_hour)
    latency = pool_latency(config, instances, arrival, l_in, l_out, problem.spec.replay.mode, measured_from, rng)
    slo = problem.fleet.ttft_p99_ms
    attainment = float((latency.ttft_ms <= slo).mean()) if len(latency.ttft_ms) else None
    floor = int(np.ceil(busy / problem.rho_max - 1e-9))
    fewest = fewest_instances(config, arrival, l_in, l_out, measured_from, slo, floor, instances, problem.spec.stream.seed) if needed else None
    return PoolOutcome(plan_pool.name, config.window_tokens, instances, int(mine.sum()), busy, latency.percentile("ttft_ms", 50),
                       latency.percentile("ttft_ms", 99), latency.percentile("tpot_ms", 50), latency.percentile("tpot_ms", 99), attainment,
                       fewest, config.cost_per_instance_hour)


def _calibration(problem: RoutingProblem, routing: Routing) -> tuple[dict[str, dict[int, float]], dict[str, float]]:
    """Per category: ``|c_hat(n) - c_k| / c_k`` at the checkpoints, and ``c_hat(50)``: the estimate the
    ``(n+1)``-th request of the category met."""
    if routing.mean_ratio is None:
        return {}, {}
    s = problem.stream
    errors: dict[str, dict[int, float]] = {}
    at_50: dict[str, float] = {}
    for k, name in enumerate(s.names):
        estimates = routing.mean_ratio[s.category == k]
        truth = float(s.true_ratio[k])
        errors[name] = {n: abs(float(estimates[n]) - truth) / truth for n in CHECKPOINTS if n < len(estimates)}
        if len(estimates) > 50:
            at_50[name] = float(estimates[50])
    return errors, at_50
