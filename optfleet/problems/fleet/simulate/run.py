"""Simulate a fleet plan: replications, warm-up discard, per-pool and fleet metrics, confidence intervals.

Measured quantities (per pool and for the fleet), over the requests that
arrive after the warm-up.  Slot mode starts every pool in equilibrium
(slots.stationary_backlog) and discards ``warmup_share`` of the run.
Batching mode starts empty, so its warm-up is the larger of ``warmup_share``
of the run and the time ``t`` after which an empty pool holds all but 0.5 %
of its steady-state busy slots: starting empty, the expected busy slots at
time ``t`` (below saturation) are ``lambda E[min(S, t)]``, short of the
steady state by ``lambda E[(S - t)^+]``, so ``t`` solves
``E[(S - t)^+] = 0.005 E[S]`` on the sampled service times of the slowest pool;
a run too short for that is refused.

* utilisation = busy slot-time inside the measured window / (slots x window);
* wait (arrival to slot admission), TTFT (arrival to first token) at P50/P90/P99;
* SLO attainment = share of requests with TTFT <= the SLO;
* queue length seen by arriving requests at P50/P90/P99 (per pool);
* batching mode only, time per output token of each measured request with
  ``L_out >= 2``: ``TPOT = (finish - first token) / (L_out - 1)`` (the decode
  time per token after the first), as ``tpot_mean_ms``, ``tpot_p{50,90,99}_ms``
  and ``tpot_max_ms``, and ``tpot_attainment`` = share of those requests with
  ``TPOT <= T``, ``T`` the strictest of the instance's TPOT percentile targets
  (``TpotTargets.percentile_ms``: a request within it is within every one of
  them).  A mean target alone gives no per-request verdict, so no attainment
  then.  Slot mode reports no TPOT: it times a request's slot as a whole
  (its service time), not token by token, so its decode has no per-token
  timing to measure.

In slot mode the first token comes at the pool model's TTFT floor (``(ceil(L_in/C_chunk) + 1) t_iter``
after admission, the evaluator's TTFT model (pool_stats.py); in batching mode
it is simulated (batching.py).  With ``R`` replications (seeds ``seed..seed+R-1``)
each metric is reported as a mean and a 95 % Student-t half-width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from optfleet.errors import InputError
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.problems.fleet.simulate.batching import simulate_batching
from optfleet.problems.fleet.simulate.requests import RequestStream, sample_requests
from optfleet.problems.fleet.simulate.slots import fcfs_starts, queue_lengths, stationary_backlog

MODES = ("slots", "batching")
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class SimulationResult:
    """Per-pool and fleet metrics: ``{scope: {metric: (mean, half_width)}}``; scope is a pool name or 'fleet'."""

    mode: str
    requests: int
    reps: int
    seed: int
    warmup_share: float
    metrics: dict[str, dict[str, tuple[float, float]]] = field(default_factory=dict)


def simulate_plan(
    problem: FleetProblem,
    plan: Plan,
    *,
    requests: int = 100_000,
    reps: int = 1,
    seed: int = 0,
    mode: str = "slots",
    warmup_share: float = 0.1,
    progress: Callable[[int, int], None] | None = None,
) -> SimulationResult:
    """Simulate ``plan`` ``reps`` times with ``requests`` arrivals each; see the module docstring."""
    if mode not in MODES:
        raise InputError("mode", mode, f"unknown simulation mode; known: {', '.join(MODES)}")
    check_run_size(requests, reps)
    if not 0 <= warmup_share < 1:
        raise InputError("warmup_share", warmup_share, "must be in [0, 1)")
    samples: dict[str, dict[str, list[float]]] = {}
    for rep in range(reps):
        rng = np.random.default_rng(seed + rep)
        stream = sample_requests(problem, plan, requests, rng)
        for scope, values in _one_replication(problem, plan, stream, mode, warmup_share, rng).items():
            for metric, value in values.items():
                samples.setdefault(scope, {}).setdefault(metric, []).append(value)
        if progress is not None:
            progress(rep + 1, reps)
    metrics = {scope: {m: mean_ci95(v) for m, v in values.items()} for scope, values in samples.items()}
    return SimulationResult(mode, requests, reps, seed, warmup_share, metrics)


MAX_REQUESTS = 20_000_000
"""Arrivals per replication at most.  A replication holds every request's arrays at once: its peak is about
190 bytes per request (measured: 1.8 GB for 10^7 requests on the Azure instance), so 2 x 10^7 stays under 4 GB,
a sixth of the 24 GB reference machine; 10^9 would need some 190 GB."""

MAX_REPS = 1_000
"""Replications at most: each costs a fixed 1-3 ms besides its requests (measured), and from 1,000 on the Student-t
quantile of the 95 % interval is within 0.2 % of the normal one: more precision comes from longer replications."""

MAX_SIMULATED_REQUESTS = 200_000_000
"""Requests x replications at most: slot mode simulates about 10^6 requests per 1.3 s on one core of the reference
machine (2 cores), so the largest run takes some 5 minutes (batching mode is about 15 times slower per request)."""


def check_run_size(requests: int, reps: int, *, requests_field: str = "requests", reps_field: str = "reps") -> None:
    """Refuse a run the simulator cannot do: fewer than two requests or one replication, or more than the limits
    above (each message states the limit); ``*_field`` names the options as the caller's user wrote them."""
    if requests < 2:
        raise InputError(requests_field, requests, "need at least two requests per replication (a run is measured from its "
                         "first measured arrival to its last)")
    if requests > MAX_REQUESTS:
        raise InputError(requests_field, requests, f"above the limit of {MAX_REQUESTS:,} requests per replication "
                         f"(about 190 bytes each at the peak: 4 GB); use more --reps instead")
    if reps < 1:
        raise InputError(reps_field, reps, "need at least one replication")
    if reps > MAX_REPS:
        raise InputError(reps_field, reps, f"above the limit of {MAX_REPS:,} replications (beyond it the 95 % interval "
                         "no longer narrows by its t quantile; use more requests per replication)")
    if requests * reps > MAX_SIMULATED_REQUESTS:
        raise InputError(reps_field, reps, f"{requests:,} requests x {reps:,} replications is above the limit of "
                         f"{MAX_SIMULATED_REQUESTS:,} simulated requests (about 5 minutes in slot mode)")


def mean_ci95(values: list[float]) -> tuple[float, float]:
    """Mean and 95 % Student-t half-width over replications (NaN half-width for one replication)."""
    data = np.asarray(values, dtype=np.float64)
    if len(data) < 2:
        return float(data.mean()), float("nan")
    return float(data.mean()), float(stats.t.ppf(0.975, len(data) - 1) * data.std(ddof=1) / np.sqrt(len(data)))


WARMUP_DEFICIT = 0.005


def _fill_time_s(service_s: NDArray[np.float64]) -> float:
    """Smallest t with mean((S - t)^+) <= WARMUP_DEFICIT mean(S) (bisection; the left side falls in t)."""
    target = WARMUP_DEFICIT * float(service_s.mean())
    lo, hi = 0.0, float(service_s.max())
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if float(np.maximum(service_s - mid, 0.0).mean()) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def _warmup_end_s(problem: FleetProblem, plan: Plan, stream: RequestStream, mode: str, warmup_share: float) -> float:
    """Start of the measured window; an error if a batching run is too short to reach steady state."""
    horizon = float(stream.arrival_s[-1])
    if mode == "slots":
        return float(stream.arrival_s[int(warmup_share * (len(stream) - 1))])
    fill = 0.0
    for j, pool in enumerate(plan.pools):
        mine = stream.pool == j
        if mine.any():
            service_s = problem.pool(pool.window_tokens, pool.gpu).service_ms(stream.l_in[mine], stream.l_out[mine]) / 1000.0
            fill = max(fill, _fill_time_s(service_s))
    start = max(warmup_share * horizon, fill)
    if start > 0.5 * horizon:
        needed = int(np.ceil(2 * start * problem.rate_rps))
        raise InputError(
            "requests", len(stream),
            f"too few to reach steady state: they span {horizon:.0f} s but the slowest pool needs a {start:.0f} s "
            f"warm-up; use at least {needed} requests",
        )
    return start


def _one_replication(
    problem: FleetProblem, plan: Plan, stream: RequestStream, mode: str, warmup_share: float, rng: np.random.Generator
) -> dict[str, dict[str, float]]:
    measured_from = _warmup_end_s(problem, plan, stream, mode, warmup_share)
    window_end = stream.arrival_s[-1]
    tpot_target_ms = problem.tpot_targets.percentile_ms
    waits, ttfts, tpots = [], [], []
    busy_total = capacity_total = 0.0
    result: dict[str, dict[str, float]] = {}
    for j, pool in enumerate(plan.pools):
        mine = stream.pool == j
        if not mine.any():
            continue
        config = problem.pool(pool.window_tokens, pool.gpu)
        if pool.instances < 1:
            raise InputError(f"plan.pools[{j}].instances", pool.instances, f"pool {pool.name} receives requests but has no GPU")
        arrival, l_in, l_out = stream.arrival_s[mine], stream.l_in[mine], stream.l_out[mine]
        slots = pool.instances * config.slots_per_instance
        backlog = np.zeros(0)
        if mode == "slots":
            service = config.service_ms(l_in, l_out) / 1000.0
            backlog = stationary_backlog(service, len(arrival) / window_end, slots, rng)
            start = fcfs_starts(arrival, service, slots, backlog)
            first = start + config.first_token_ms(l_in, l_out) / 1000.0
            finish = start + service
        else:
            times = simulate_batching(config, pool.instances, arrival, l_in, l_out)
            start, first, finish = times.start_s, times.first_token_s, times.finish_s
        keep = arrival >= measured_from
        busy = np.clip(np.minimum(finish, window_end) - np.maximum(start, measured_from), 0.0, None).sum()
        busy += np.clip(np.minimum(backlog, window_end) - measured_from, 0.0, None).sum()
        capacity = slots * (window_end - measured_from)
        wait_ms, ttft_ms = 1000.0 * (start - arrival)[keep], 1000.0 * (first - arrival)[keep]
        queue = queue_lengths(arrival, start)[keep]
        tpot = request_tpot_ms(first[keep], finish[keep], l_out[keep]) if mode == "batching" else None
        result[pool.name] = _summary(busy / capacity, wait_ms, ttft_ms, queue, problem.ttft_p99_ms, tpot, tpot_target_ms)
        waits.append(wait_ms)
        ttfts.append(ttft_ms)
        tpots.append(tpot)
        busy_total += busy
        capacity_total += capacity
    fleet_tpot = np.concatenate(tpots) if mode == "batching" else None
    result["fleet"] = _summary(busy_total / capacity_total, np.concatenate(waits), np.concatenate(ttfts), None, problem.ttft_p99_ms,
                               fleet_tpot, tpot_target_ms)
    return result


def request_tpot_ms(first_token_s: NDArray[np.float64], finish_s: NDArray[np.float64], l_out: NDArray[np.int64]) -> NDArray[np.float64]:
    """``1000 (finish - first token) / (L_out - 1)`` ms for each request with ``L_out >= 2`` (the others have no
    token after the first), in the requests' order."""
    decoding = l_out >= 2
    return 1000.0 * (finish_s - first_token_s)[decoding] / (l_out[decoding] - 1)


def _measured(values: NDArray, statistic: Callable[[NDArray], float]) -> float:
    """``statistic(values)``; NaN for no value (no measured request: null in JSON, "-" in tables)."""
    return float(statistic(values)) if len(values) else float("nan")


def _summary(utilisation: float, wait_ms: NDArray, ttft_ms: NDArray, queue: NDArray | None, slo_ms: float,
             tpot_ms: NDArray | None = None, tpot_target_ms: float | None = None) -> dict[str, float]:
    """Metrics of one scope; queue percentiles only for a pool (the fleet has no single queue), TPOT only when given
    (batching mode).  A scope whose requests all arrived in the warm-up has no latency figure (NaN: null in JSON,
    "-" in tables)."""
    out = {"utilisation": float(utilisation), "requests": float(len(wait_ms))}
    for p in PERCENTILES:
        out[f"wait_p{p}_ms"] = _measured(wait_ms, partial(np.percentile, q=p))
        out[f"ttft_p{p}_ms"] = _measured(ttft_ms, partial(np.percentile, q=p))
        if queue is not None:
            out[f"queue_p{p}"] = _measured(queue, partial(np.percentile, q=p))
    out["slo_attainment"] = _measured(ttft_ms <= slo_ms, np.mean)
    if tpot_ms is not None:
        out.update(tpot_summary(tpot_ms, tpot_target_ms))
    return out


def tpot_summary(tpot_ms: NDArray, target_ms: float | None) -> dict[str, float]:
    """Mean, P50/P90/P99 and largest TPOT of a scope's measured requests, and the share within ``target_ms`` (the
    strictest percentile target, module docstring; left out without one)."""
    out = {"tpot_mean_ms": _measured(tpot_ms, np.mean)}
    out.update({f"tpot_p{p}_ms": _measured(tpot_ms, partial(np.percentile, q=p)) for p in PERCENTILES})
    out["tpot_max_ms"] = _measured(tpot_ms, np.max)
    if target_ms is not None:
        out["tpot_attainment"] = _measured(tpot_ms <= target_ms, np.mean)
    return out
