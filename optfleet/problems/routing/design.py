"""Threshold design: the short window ``C``, the routing threshold ``B <= C`` and the C&R multiplier ``gamma`` with
the least fleet cost whose mis-route probability stays within ``epsilon``.

Every candidate of the grid (``design.short_windows_tokens`` x ``threshold_fractions`` x ``gammas``, and the plan's
own dispatcher, so the design is never worse than the plan's whatever the grid) is scored by
:func:`evaluate_design` on the stream, routed by the chosen calibrator's ratios (no spillover):

* mis-route probability = the share of requests placed short, uncompressed, whose true budget exceeds ``C`` (the
  calibrator's error distribution is the stream's own: no parametric model);
* fleet cost = ``sum_p ceil(W_p / (rho_max n_max,p T)) x $/h``, ``W_p`` the slot-seconds the pool receives,
  ``n_max,p`` its KV slots per GPU instance at its window, ``T`` the span: the utilisation cap only, not the TTFT
  SLO (a lower bound on what the fleet evaluator would size).

The MILP (models/routing.py, one-hot over the grid) is exact over the grid: its optimum is the grid's cheapest
candidate meeting epsilon.  The spill limit is not designed: its effect depends on the queue dynamics, which this
static score does not model, so designs are scored without spillover.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Any

import numpy as np

from optfleet.errors import InfeasibleError, InputError
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
    work_short = float((short.service_ms(l_in, s.output_tokens) / 1000.0)[served_short].sum())
    work_long = float((long.service_ms(s.input_tokens, s.output_tokens) / 1000.0)[~served_short].sum())
    gpus = [int(np.ceil(w / (problem.rho_max * pool.slots_per_gpu * span) - 1e-9)) for w, pool in ((work_short, short), (work_long, long))]
    cost = gpus[0] * short.cost_per_gpu_hour + gpus[1] * long.cost_per_gpu_hour
    p = float(misrouted.mean())
    return DesignEvaluation(candidate, p, float(served_short.mean()), gpus[0], gpus[1], cost, p <= problem.spec.design.epsilon + 1e-12)


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
    cost = np.array([e.cost_per_hour for e in scored])
    misroute = np.array([e.misroute_probability for e in scored])
    eps = problem.spec.design.epsilon
    report, values = highs.solve_arrays(design_arrays(cost, misroute, eps), what="the threshold design model",
                                        time_limit=problem.spec.solve.time_limit_s)
    if values is None:
        raise InfeasibleError(f"threshold design: no candidate of the {len(grid)} keeps the mis-route probability within {100 * eps:.3g} % "
                              f"(the least is {100 * misroute.min():.3g} %); try lower threshold fractions")
    return grid[int(np.argmax(values))], report


def design_columns(e: DesignEvaluation) -> dict[str, Any]:
    return {**e.candidate.to_dict(), "misroute_pct": 100.0 * e.misroute_probability, "short_share_pct": 100.0 * e.short_share,
            "short_gpus": e.short_gpus, "long_gpus": e.long_gpus}
