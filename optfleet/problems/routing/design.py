"""Threshold design: the short window ``C``, the routing threshold ``B <= C``, the C&R multiplier ``gamma`` and
each pool's GPU configuration and instance count, with the least fleet cost whose mis-route probability stays
within ``epsilon`` and which meets the fleet instance's constraints.

Every routing rule of the grid (``design.short_windows_tokens`` x ``threshold_fractions`` x ``gammas``, and the
plan's own dispatcher, so the design is never worse than the plan's whatever the grid) routes the stream by the
chosen calibrator's ratios (no spillover) and is scored:

* mis-route probability = the share of requests placed short, uncompressed, whose true budget exceeds ``C`` (the
  calibrator's error distribution is the stream's own: no parametric model);
* for each pool and each GPU configuration of the fleet instance (its ``gpu_catalog``'s, and the plan's own): the
  fleet evaluator's fewest instances for the requests the pool receives (``optfleet.problems.fleet.evaluator``'s
  sizing: P99 TTFT within the fleet instance's SLO under its TTFT rule and service model, the M/G/c slot model's
  Erlang-C wait or the batching model, and utilisation within ``rho_max``), at the stream's rate
  ``requests / span``.  A configuration whose pool cannot meet the SLO at any size (its TTFT floor alone breaks
  it), or holds no KV slot at the window, is left out.

The MILP (models/routing_design.py) then picks one rule, one configuration per pool and the instance counts, at
least cost, under ``sum p_c z_c <= epsilon`` and the fleet instance's ``constraints:`` (availability, GPU mix,
whole nodes, type count, budget as a cost cap, pinned pools).  It is exact over the grid and the configurations:
this is the fleet MILP's choice of GPU configurations and counts for two pools, made jointly with the router's
threshold under its own errors.  What it does not do: choose windows off the grid (the long pool keeps the plan's
window), share traffic between pools other than by the rule (the fleet MILP's split routing), or design the spill
limit, whose effect depends on the queue dynamics (``spill_design.py`` chooses it for the design's fleet by replay).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import product
from types import SimpleNamespace
from typing import Any

import numpy as np

from optfleet.errors import InputError
from optfleet.problems.fleet.batching_pool import batching_workload, min_instances_batching
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.pool_stats import pool_stats, size_pools
from optfleet.problems.fleet.problem import PoolFactory
from optfleet.problems.routing.calibrator import calibrate, observed_ratios
from optfleet.problems.routing.dispatcher import SHORT, DispatchRule, compression, estimated_total, route
from optfleet.problems.routing.problem import RoutingProblem

POOL_NAMES = ("short", "long")


@dataclass(frozen=True)
class DesignCandidate:
    """A short window, a routing threshold, a C&R multiplier, each pool's GPU configuration (a label) and, when a
    model chose them, the pools' instances (None: each pool's fewest)."""

    short_window_tokens: int
    b_short_tokens: int
    gamma: float
    short_gpu: str
    long_gpu: str
    instances: tuple[int, int] | None = None

    @property
    def rule(self) -> tuple[int, int, float]:
        return self.short_window_tokens, self.b_short_tokens, self.gamma

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"short_window_tokens": self.short_window_tokens, "b_short_tokens": self.b_short_tokens, "gamma": self.gamma,
                                "short_gpu": self.short_gpu, "long_gpu": self.long_gpu}
        if self.instances is not None:
            data["instances"] = list(self.instances)
        return data


@dataclass(frozen=True)
class DesignEvaluation:
    """A candidate scored (module docstring): ``fewest`` are the pools' fewest instances (-1: none meets the SLO),
    ``plan`` the two pools bought (``instances`` or the fewest), ``violations`` the fleet constraints it breaks."""

    candidate: DesignCandidate
    misroute_probability: float
    short_share: float
    fewest: tuple[int, int]
    plan: Plan
    cost_per_hour: float
    violations: tuple[str, ...] = field(default=())
    epsilon: float = 0.0

    @property
    def sized(self) -> bool:
        """Both pools can meet the SLO at some size, and the plan buys at least that."""
        return min(self.fewest) >= 0 and all(p.instances >= f for p, f in zip(self.plan.pools, self.fewest, strict=True))

    @property
    def feasible(self) -> bool:
        return self.sized and self.misroute_probability <= self.epsilon + 1e-12 and not self.violations

    @property
    def short_instances(self) -> int:
        return self.plan.pools[0].instances

    @property
    def long_instances(self) -> int:
        return self.plan.pools[1].instances


@dataclass(frozen=True)
class RuleTraffic:
    """What one routing rule sends each pool (prompt and output tokens), and its mis-route probability."""

    misroute_probability: float
    short_share: float
    traffic: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def configurations(problem: RoutingProblem) -> tuple[PoolFactory, ...]:
    """The GPU configurations a design pool may use: the fleet instance's catalog and the plan's own."""
    fleet = problem.fleet
    own = [fleet.configuration(p.gpu) for p in problem.plan.pools]
    return tuple({c.label: c for c in (*fleet.options, *own)}.values())


def plan_design(problem: RoutingProblem) -> DesignCandidate:
    """The instance's own dispatcher and the plan's GPU configurations, each pool at its fewest instances."""
    r, fleet = problem.rule, problem.fleet
    short, long = (fleet.configuration(p.gpu).label for p in problem.plan.pools)
    return DesignCandidate(r.short_window_tokens, r.b_short_tokens, r.compress_gamma, short, long)


def rules(problem: RoutingProblem) -> list[tuple[int, int, float]]:
    """The design grid's routing rules ``(C, B, gamma)`` and the plan's own (module docstring); thresholds are whole
    tokens, at least 1, duplicates dropped.  A window must lie below the long pool's and hold a KV slot on some
    configuration."""
    d = problem.spec.design
    windows = d.short_windows_tokens or [problem.rule.short_window_tokens]
    long_window = problem.plan.pools[1].window_tokens
    configs = configurations(problem)
    for c in windows:
        if c >= long_window:
            raise InputError("design.short_windows_tokens", c, f"a short window must lie below the long pool's {long_window} tokens")
        if max(config.slots_per_instance(c) for config in configs) < 1:
            raise InputError("design.short_windows_tokens", c, "holds no KV slot on any of the fleet's GPU configurations "
                             f"({', '.join(config.label for config in configs)})")
    grid = {(int(c), max(1, int(f * c)), float(g)) for c, f, g in product(windows, d.threshold_fractions, d.gammas)}
    grid.add(plan_design(problem).rule)
    return sorted(grid)


def candidates(problem: RoutingProblem) -> list[DesignCandidate]:
    """Every rule with every pair of configurations, each pool at its fewest instances: the set the MILP
    chooses from when the fleet instance has no constraints."""
    labels = [c.label for c in configurations(problem)]
    return [DesignCandidate(*rule, short, long) for rule in rules(problem) for short in labels for long in labels]


def rule_traffic(problem: RoutingProblem, rule: tuple[int, int, float], ratios: np.ndarray) -> RuleTraffic:
    """Route the stream by ``rule`` on the calibrator's ``ratios`` (no spillover): the mis-route probability and
    each pool's requests (a mis-routed request, or one the compressor refuses, is served long; a compressed one
    short at ``T_c``; dispatcher.py ``compression``)."""
    s = problem.stream
    window, b, gamma = rule
    rule_ = DispatchRule(b, window, gamma, problem.compressible)
    dispatch = route(rule_, estimated_total(s.bytes, ratios, s.output_tokens), s.output_tokens, s.category)
    on_short = dispatch.pool == SHORT
    compressor = compression(rule_, dispatch.compressed, s.total_tokens)
    misrouted = on_short & ~dispatch.compressed & (s.total_tokens > window)
    served_short = on_short & ~misrouted & ~compressor.refused
    l_in = np.where(compressor.compressed, dispatch.compressed_input_tokens, s.input_tokens)
    traffic = ((l_in[served_short], s.output_tokens[served_short]), (s.input_tokens[~served_short], s.output_tokens[~served_short]))
    return RuleTraffic(float(misrouted.mean()), float(served_short.mean()), traffic)


def fewest_instances(problem: RoutingProblem, traffic: RuleTraffic, pool: int, config: PoolFactory, window_tokens: int) -> int:
    """The fleet evaluator's fewest instances of ``config`` at ``window_tokens`` for the pool's traffic; -1 when
    none meets the SLO or the configuration holds no KV slot there."""
    if config.slots_per_instance(window_tokens) < 1:
        return -1
    l_in, l_out = traffic.traffic[pool]
    return sized_instances(problem, config.pool(window_tokens), l_in, l_out, max(problem.stream.span_s, 1e-9))


def pool_windows(problem: RoutingProblem, candidate: DesignCandidate) -> tuple[int, int]:
    return candidate.short_window_tokens, problem.plan.pools[1].window_tokens


def evaluate_design(problem: RoutingProblem, candidate: DesignCandidate, ratios: np.ndarray | None = None) -> DesignEvaluation:
    """Score one candidate; ``ratios`` are the calibrator's routing ratios (computed when not given)."""
    if ratios is None:
        ratios = design_ratios(problem)
    traffic = rule_traffic(problem, candidate.rule, ratios)
    configs = [problem.fleet.configuration(label, "design") for label in (candidate.short_gpu, candidate.long_gpu)]
    windows = pool_windows(problem, candidate)
    fewest = tuple(fewest_instances(problem, traffic, p, configs[p], windows[p]) for p in range(2))
    bought = candidate.instances if candidate.instances is not None else (max(fewest[0], 0), max(fewest[1], 0))
    plan = design_fleet(problem, candidate, bought, "design")
    cost = float(sum(n * c.cost_per_instance_hour for n, c in zip(bought, configs, strict=True))) if min(fewest) >= 0 else float("inf")
    return DesignEvaluation(candidate, traffic.misroute_probability, traffic.short_share, fewest, plan, cost,  # type: ignore[arg-type]
                            constraint_violations(problem, plan, cost), problem.spec.design.epsilon)


def design_fleet(problem: RoutingProblem, candidate: DesignCandidate, instances: tuple[int, int], method: str) -> Plan:
    """The two pools a design buys: its short window and the plan's long one, its GPU configurations, ``instances``."""
    pools = zip(POOL_NAMES, pool_windows(problem, candidate), instances, (candidate.short_gpu, candidate.long_gpu), strict=True)
    return Plan(pools=tuple(PoolPlan(name, w, n, gpu) for name, w, n, gpu in pools), gamma=candidate.gamma, method=method)


def constraint_violations(problem: RoutingProblem, plan: Plan, cost_per_hour: float) -> tuple[str, ...]:
    """The fleet instance's constraints that ``plan`` breaks, checked by the fleet's own plan checks."""
    from optfleet.problems.fleet.constraints import FLEET_CONSTRAINTS

    scored = SimpleNamespace(plan=plan, cost_per_hour=cost_per_hour)  # what the fleet's constraint checks read
    return tuple(f"constraints[{i}] {spec.kind}: {verdict.detail}"
                 for i, spec, verdict in FLEET_CONSTRAINTS.verdicts(problem.fleet, scored, problem.fleet.constraints) if not verdict.holds)


def sized_instances(problem: RoutingProblem, config: PoolConfig, l_in: np.ndarray, l_out: np.ndarray, span_s: float) -> int:
    """The fleet evaluator's least instance count for a pool serving these requests at ``len / span_s`` per second (module
    docstring); 0 for none, -1 when no count meets the SLO."""
    if len(l_in) == 0:
        return 0
    fleet, rate, weight = problem.fleet, len(l_in) / span_s, np.full(len(l_in), 1.0 / len(l_in))
    if fleet.service_model == "batching":
        workload = batching_workload([config], [(l_in, l_out, weight)], np.array([rate]))
        return int(min_instances_batching(workload, [config], fleet.ttft_p99_ms, problem.rho_max, fleet.tpot_targets)[0])
    stats = pool_stats(config, l_in, l_out, weight, fleet.ttft_rule, fleet.ttft_quantile)
    tpot = fleet.tpot_targets.min_instances(rate, stats.mean_prefill_compute_ms, config.window_step_ms, config.tpot_bound_ms)
    return int(size_pools(rate, stats.mean_service_ms, stats.service_scv, stats.ttft_floor_ms, config.slots_per_instance,
                          fleet.ttft_p99_ms, problem.rho_max, tpot, quantile=fleet.ttft_quantile))


def design_ratios(problem: RoutingProblem) -> np.ndarray:
    s = problem.stream
    calibrator = problem.calibrators[problem.spec.design.calibrator]
    return calibrate(calibrator, s.category, observed_ratios(s.bytes, s.input_tokens)).route_ratio
