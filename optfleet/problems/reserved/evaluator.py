"""The one evaluator of reserved plans: whoever made a plan, it is scored here, by these rules.

A plan is a unit count (:class:`UnitsPlan`) or a commitment schedule (:class:`CommitmentPlan`).  For a unit
count ``G`` (a schedule is scored by its cost rule only):

* **hybrid $/h** (slosizer's rule, at ``cost_window_s``): ``c G + (1/H) sum_n p_n (D_n - a G)+``;
* **backlog $/h** (when ``plans.backlog`` is set): the same units, work waits in a FCFS fluid queue and what
  would wait longer than ``W`` spills, newest work first (an online rule: at the end of window ``n`` the backlog
  is ``q_n = min(tau W G, max(0, q_{n-1} + D_n - a G))`` and the excess spills at window ``n``'s price).  The
  backlog model's optimum (hindsight spill) is a lower bound on it;
* **windows**: mean, p95, p99 and peak of ``X_n``, overload probability, expected overflow and spare at every
  width of ``windows_s`` (stats.py);
* **latency**: ``R_j = L_base,j + W_j`` with every request on the ``G`` units (latency.py): p50/p99 end to end,
  p99 queue delay, and the share of requests meeting the latency target;
* **scenarios** (robust question): the hybrid $/h in every scenario and the worst;
* **commitment** (a schedule): ``(1/H)[c R H + c_od h_blk T sum_b v_b + sum_mn p_mn (D_mn - a_m G_m,b(n))+]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from optfleet.problems.reserved.latency import queue_delay_s
from optfleet.problems.reserved.problem import ReservedProblem
from optfleet.problems.reserved.stats import WindowStats, quantile, weighted_excess, window_stats
from optfleet.problems.reserved.windows import WindowSeries


@dataclass(frozen=True)
class UnitsPlan:
    """Buy ``units`` reserved units for the whole trace."""

    units: int


@dataclass(frozen=True)
class CommitmentPlan:
    """A reservation, on-demand lots bought per block (each lasting ``term_blocks``) and the units deployed per
    model and block (``deployed[model, block]``)."""

    reservation_units: int
    lots: NDArray[np.int64]
    deployed: NDArray[np.int64]


@dataclass(frozen=True)
class Latency:
    p50_e2e_s: float
    p99_e2e_s: float
    p99_queue_s: float
    target_value_s: float | None  # the target's percentile of its metric
    attainment: float | None  # share of requests within the target's threshold


@dataclass(frozen=True)
class Evaluation:
    """A plan's figures (module docstring); None where the instance lacks what a figure needs (prices, a target)."""

    units: float
    reserved_per_hour: float | None
    spill_per_hour: float | None
    backlog_spill_per_hour: float | None
    windows: tuple[WindowStats, ...]
    latency: Latency | None
    scenario_per_hour: dict[str, float]
    commitment_per_hour: float | None = None

    @property
    def total_per_hour(self) -> float | None:
        return None if self.reserved_per_hour is None else self.reserved_per_hour + self.spill_per_hour

    @property
    def backlog_total_per_hour(self) -> float | None:
        return None if self.backlog_spill_per_hour is None else self.reserved_per_hour + self.backlog_spill_per_hour

    @property
    def worst_scenario_per_hour(self) -> float | None:
        return max(self.scenario_per_hour.values()) if self.scenario_per_hour else None

    @property
    def max_overload_probability(self) -> float:
        return max(w.overload_probability for w in self.windows)


def spill_per_hour(series: WindowSeries, units: float) -> float:
    """``(1/H) sum_n p_n (D_n - a G)+`` (slosizer's pro-rata spill)."""
    excess = np.maximum(series.work - series.work_per_unit * units, 0.0)
    return float(np.dot(series.price_per_work, excess)) / series.hours


def spill_per_hour_on_grid(series: WindowSeries, units: NDArray) -> NDArray[np.float64]:
    """:func:`spill_per_hour` at every unit count of ``units``, from one sort (stats.weighted_excess):
    ``sum_n pi_n (X_n - G)+`` with ``pi_n = p_n tau Delta``, over ``H``."""
    return weighted_excess(series.units_needed, series.price_per_work * series.work_per_unit, units) / series.hours


def backlog_spill_per_hour(series: WindowSeries, units: float, max_wait_s: float) -> float:
    """The online backlog rule's spill in $/h (module docstring)."""
    served = series.work_per_unit * units
    cap = series.tau_tokens_per_s_per_unit * max_wait_s * units
    backlog = spilled = 0.0
    for work, price in zip(series.work.tolist(), series.price_per_work.tolist(), strict=True):
        level = backlog + work - served
        if level > cap:
            spilled += price * (level - cap)
            backlog = cap
        else:
            backlog = level if level > 0.0 else 0.0
    return spilled / series.hours


def latency(problem: ReservedProblem, units: float) -> Latency:
    """The latency figures of ``units`` (module docstring)."""
    delay = queue_delay_s(problem.trace.arrival_s, problem.work, units * problem.profile.tau_tokens_per_s_per_unit)
    e2e = problem.baseline_latency_s + delay
    method = problem.spec.quantile_method
    target = problem.plans.latency
    value = attainment = None
    if target is not None:
        metric = e2e if target.metric == "e2e" else delay
        value = quantile(metric, target.percentile, method)
        attainment = float(np.mean(metric <= target.threshold_s))
    return Latency(quantile(e2e, 0.5, method), quantile(e2e, 0.99, method), quantile(delay, 0.99, method), value, attainment)


def latency_met(problem: ReservedProblem, units: float) -> bool:
    """Whether ``units`` meet the latency target: its percentile of its metric within the threshold."""
    lat = latency(problem, units)
    return lat.target_value_s is not None and lat.target_value_s <= problem.plans.latency.threshold_s


def evaluate(problem: ReservedProblem, plan: UnitsPlan | CommitmentPlan) -> Evaluation:
    """Score ``plan`` (module docstring)."""
    if isinstance(plan, CommitmentPlan):
        return _evaluate_commitment(problem, plan)
    g = plan.units
    prices = problem.prices
    reserved = spill = backlog = None
    scenarios: dict[str, float] = {}
    if prices is not None:
        reserved = prices.unit_per_hour * g
        spill = spill_per_hour(problem.cost_windows, g)
        if problem.plans.backlog is not None:
            backlog = backlog_spill_per_hour(problem.cost_windows, g, problem.plans.backlog.max_wait_s)
        scenarios = {s.name: reserved + spill_per_hour(s.cost_windows, g) for s in problem.scenarios}
    stats = tuple(window_stats(s, g, problem.spec.quantile_method) for s in problem.windows)
    lat = latency(problem, g) if g > 0 else None
    return Evaluation(float(g), reserved, spill, backlog, stats, lat, scenarios)


def commitment_per_hour(problem: ReservedProblem, plan: CommitmentPlan) -> float:
    """The commitment rule's $/h of a schedule (module docstring)."""
    commitment = problem.plans.commitment
    hours = problem.cost_windows.hours
    block_of_window = block_index(problem)
    spill = 0.0
    for i, model in enumerate(problem.commitment_models):
        units = plan.deployed[i][block_of_window]
        series = model.cost_windows
        spill += float(np.dot(series.price_per_work, np.maximum(series.work - series.work_per_unit * units, 0.0)))
    lots = commitment.on_demand_per_unit_hour * commitment.block_s / 3600.0 * commitment.term_blocks * float(plan.lots.sum())
    return problem.prices.unit_per_hour * plan.reservation_units + (lots + spill) / hours


def block_index(problem: ReservedProblem) -> NDArray[np.int64]:
    """The commitment block of every cost window: ``floor(n Delta / block_s)``."""
    series = problem.cost_windows
    return np.floor(np.arange(series.n_windows) * series.width_s / problem.plans.commitment.block_s + 1e-9).astype(np.int64)


def schedule_is_covered(problem: ReservedProblem, plan: CommitmentPlan) -> bool:
    """Whether every block's deployments fit in the reservation plus the on-demand lots active in it."""
    term = problem.plans.commitment.term_blocks
    active = np.convolve(plan.lots, np.ones(term, dtype=np.int64))[: len(plan.lots)]
    return bool(np.all(plan.deployed.sum(axis=0) <= plan.reservation_units + active))


def _evaluate_commitment(problem: ReservedProblem, plan: CommitmentPlan) -> Evaluation:
    mean_units = float(plan.deployed.sum(axis=0).mean())
    return Evaluation(mean_units, None, None, None, (), None, {}, commitment_per_hour(problem, plan))
