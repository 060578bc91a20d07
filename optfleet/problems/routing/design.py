"""Threshold design: the short window ``C``, the routing threshold ``B <= C`` and the C&R multiplier ``gamma`` with
the least fleet cost whose mis-route probability stays within ``epsilon``.

Every candidate of the grid (``design.short_windows_tokens`` x ``threshold_fractions`` x ``gammas``, and the plan's
own dispatcher, so the design is never worse than the plan's whatever the grid) is scored by
:func:`evaluate_design` on the stream, routed by the chosen calibrator's ratios (no spillover):

* mis-route probability = the share of requests placed short, uncompressed, whose true budget exceeds ``C`` (the
  calibrator's error distribution is the stream's own: no parametric model);
* fleet cost = ``sum_p n_p x $/h``, ``n_p`` the fleet evaluator's least GPU count for the requests the pool
  receives (``optfleet.problems.fleet.evaluator``'s sizing: P99 TTFT within the fleet instance's SLO under its
  TTFT rule and service model, the M/G/c slot model's Erlang-C wait or the batching model, and utilisation
  within ``rho_max``), at the stream's rate ``requests / span``: the fleet ``optfleet solve`` would buy for that
  traffic, pool by pool.  A candidate whose pool cannot meet the SLO at any size (its TTFT floor alone breaks
  it) is left out.

The MILP (models/routing.py, one-hot over the grid) is exact over the grid: its optimum is the grid's cheapest
candidate meeting epsilon.  It is not joint with the fleet MILP's choice of windows and GPU types: the short
window is the grid's, both pools keep the plan's GPU types, and each pool is sized alone.  The spill limit is not
designed: its effect depends on the queue dynamics, which this static score does not model, so designs are
scored without spillover.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from optfleet.errors import InfeasibleError, InputError
from optfleet.problems.fleet.batching_pool import batching_workload, min_gpus_batching
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.pool_stats import pool_stats, size_pools
from optfleet.problems.routing.calibrator import calibrate, observed_ratios
from optfleet.problems.routing.dispatcher import SHORT, DispatchRule, estimated_total, route
from optfleet.problems.routing.problem import RoutingProblem
from optfleet.solvers.report import SolveReport


@dataclass(frozen=True)
class DesignCandidate:
    """A short window, a routing threshold and a C&R multiplier."""

    short_window_tokens: int
    b_short_tokens: int
    gamma: float

    def to_dict(self) -> dict[str, Any]:
        return {"short_window_tokens": self.short_window_tokens, "b_short_tokens": self.b_short_tokens, "gamma": self.gamma}


@dataclass(frozen=True)
class DesignEvaluation:
    """A candidate scored (module docstring)."""

    candidate: DesignCandidate
    misroute_probability: float
    short_share: float
    short_gpus: int
    long_gpus: int
    cost_per_hour: float
    feasible: bool


def plan_design(problem: RoutingProblem) -> DesignCandidate:
    """The instance's own dispatcher: the plan's short window, its threshold and band."""
    r = problem.rule
    return DesignCandidate(r.short_window_tokens, r.b_short_tokens, r.compress_gamma)


def candidates(problem: RoutingProblem) -> list[DesignCandidate]:
    """The design grid and the plan's own dispatcher (module docstring); thresholds are whole tokens, at least 1,
    duplicates dropped."""
    d = problem.spec.design
    windows = d.short_windows_tokens or [problem.rule.short_window_tokens]
    long_window, gpu = problem.plan.pools[1].window_tokens, problem.plan.pools[0].gpu
    for c in windows:
        if c >= long_window or problem.fleet.configuration(gpu).slots_per_gpu(c) < 1:
            raise InputError("design.short_windows_tokens", c, f"a short window must lie below the long pool's {long_window} tokens "
                             "and hold a KV slot on the short pool's GPU")
    grid = {DesignCandidate(int(c), max(1, int(f * c)), float(g)) for c, f, g in product(windows, d.threshold_fractions, d.gammas)}
    grid.add(plan_design(problem))
    return sorted(grid, key=lambda c: (c.short_window_tokens, c.b_short_tokens, c.gamma))


def evaluate_design(problem: RoutingProblem, candidate: DesignCandidate, ratios: np.ndarray | None = None) -> DesignEvaluation:
    """Score one candidate; ``ratios`` are the calibrator's routing ratios (computed when not given)."""
    s = problem.stream
    if ratios is None:
        ratios = design_ratios(problem)
    short_plan, long_plan = problem.plan.pools
    short, long = problem.fleet.pool(candidate.short_window_tokens, short_plan.gpu), problem.pools[1]
    rule = DispatchRule(candidate.b_short_tokens, candidate.short_window_tokens, candidate.gamma, problem.compressible)
    dispatch = route(rule, estimated_total(s.bytes, ratios, s.output_tokens), s.output_tokens, s.category)
    on_short = dispatch.pool == SHORT
    misrouted = on_short & ~dispatch.compressed & (s.total_tokens > candidate.short_window_tokens)
    served_short = on_short & ~misrouted
    l_in = np.where(dispatch.compressed, dispatch.compressed_input_tokens, s.input_tokens)
    span = max(s.span_s, 1e-9)
    gpus = [sized_gpus(problem, short, l_in[served_short], s.output_tokens[served_short], span),
            sized_gpus(problem, long, s.input_tokens[~served_short], s.output_tokens[~served_short], span)]
    sized = min(gpus) >= 0
    cost = gpus[0] * short.cost_per_gpu_hour + gpus[1] * long.cost_per_gpu_hour if sized else float("inf")
    p = float(misrouted.mean())
    return DesignEvaluation(candidate, p, float(served_short.mean()), gpus[0], gpus[1], cost, sized and p <= problem.spec.design.epsilon + 1e-12)


def sized_gpus(problem: RoutingProblem, config: PoolConfig, l_in: np.ndarray, l_out: np.ndarray, span_s: float) -> int:
    """The fleet evaluator's least GPU count for a pool serving these requests at ``len / span_s`` per second (module
    docstring); 0 for none, -1 when no count meets the SLO."""
    if len(l_in) == 0:
        return 0
    fleet, rate, weight = problem.fleet, len(l_in) / span_s, np.full(len(l_in), 1.0 / len(l_in))
    if fleet.service_model == "batching":
        workload = batching_workload([config], [(l_in, l_out, weight)], np.array([rate]))
        return int(min_gpus_batching(workload, [config], fleet.ttft_p99_ms, problem.rho_max)[0])
    stats = pool_stats(config, l_in, l_out, weight, fleet.ttft_rule)
    return int(size_pools(rate, stats.mean_service_ms, stats.service_scv, stats.ttft_floor_ms, config.slots_per_gpu,
                          fleet.ttft_p99_ms, problem.rho_max))


def design_ratios(problem: RoutingProblem) -> np.ndarray:
    s = problem.stream
    calibrator = problem.calibrators[problem.spec.design.calibrator]
    return calibrate(calibrator, s.category, observed_ratios(s.bytes, s.input_tokens)).route_ratio


def solve_design(problem: RoutingProblem) -> tuple[DesignCandidate, SolveReport]:
    """The one-hot MILP over the grid (models/routing.py); InfeasibleError when no candidate meets epsilon."""
    from optfleet.models.routing import design_arrays
    from optfleet.problems.routing.exact import check_solver
    from optfleet.solvers import highs

    check_solver(problem)
    ratios = design_ratios(problem)
    grid = candidates(problem)
    scored = [evaluate_design(problem, c, ratios) for c in grid]
    sized = [e for e in scored if np.isfinite(e.cost_per_hour)]
    if not sized:
        raise InfeasibleError(f"threshold design: in none of the {len(grid)} candidates can both pools meet the P99 TTFT SLO of "
                              f"{problem.fleet.ttft_p99_ms:g} ms at any size (a TTFT floor alone breaks it)")
    cost = np.array([e.cost_per_hour for e in sized])
    misroute = np.array([e.misroute_probability for e in sized])
    eps = problem.spec.design.epsilon
    report, values = highs.solve_arrays(design_arrays(cost, misroute, eps), what="the threshold design model",
                                        time_limit=problem.spec.solve.time_limit_s)
    if values is None:
        raise InfeasibleError(f"threshold design: no candidate of the {len(sized)} whose pools can meet the SLO keeps the mis-route "
                              f"probability within {100 * eps:.3g} % (the least is {100 * misroute.min():.3g} %); try lower threshold fractions")
    return sized[int(np.argmax(values))].candidate, report


def design_columns(e: DesignEvaluation) -> dict[str, Any]:
    return {**e.candidate.to_dict(), "misroute_pct": 100.0 * e.misroute_probability, "short_share_pct": 100.0 * e.short_share,
            "short_gpus": e.short_gpus, "long_gpus": e.long_gpus}
