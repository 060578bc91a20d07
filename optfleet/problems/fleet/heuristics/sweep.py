"""FleetOpt's Algorithm 1, made joint: every hardware-feasible boundary B x every gamma.

For each candidate (B, gamma) the two pools' exact statistics come from
:class:`~optfleet.problems.fleet.heuristics.candidate_stats.CandidateTables`, each pool is
sized to its minimum instance count (utilisation cap and P99 TTFT, pool_stats.py),
and the cheapest feasible candidate wins; the single long pool (homogeneous)
is a candidate too, so the sweep is never worse than it.  Ties go to fewer
GPUs, then smaller gamma, then larger B.  The winning plan is re-scored by the
evaluator, like every other plan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from optfleet.errors import InfeasibleError
from optfleet.problems.fleet.batching_pool import batching_workload, min_instances_batching
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.heuristics.candidate_stats import CandidateStats, CandidateTables
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.plan_sizing import infeasible_pool_message
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.pool_stats import size_pools
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.problems.fleet.routing import route


@dataclass(frozen=True)
class SweepResult:
    """The best plan and the full candidate table (one row per (B, gamma), plus homogeneous)."""

    plan: Plan
    candidates: pd.DataFrame
    seconds: float


def candidate_table(problem: FleetProblem, gammas: tuple[float, ...] | None = None, boundaries: tuple[int, ...] | None = None) -> pd.DataFrame:
    """Size every candidate; columns B, gamma, n_short, n_long, instances, cost_per_hour, feasible.

    The first row is the homogeneous fleet (B = the long window, no short pool).
    All candidates are sized in two vectorised calls (one per pool role).
    """
    gammas = problem.gammas if gammas is None else gammas
    boundaries = problem.boundary_candidates if boundaries is None else boundaries
    b = np.concatenate([[problem.long_window_tokens], np.repeat(boundaries, len(gammas))]).astype(np.int64)
    g = np.concatenate([[1.0], np.tile(gammas, len(boundaries))])
    short_pools = [problem.pool(int(x)) for x in (problem.long_window_tokens, *boundaries)]
    per_boundary = np.concatenate(([1], np.full(len(boundaries), len(gammas))))
    short_price = np.repeat([p.cost_per_instance_hour for p in short_pools], per_boundary)
    long_price = problem.pool(problem.long_window_tokens).cost_per_instance_hour
    if problem.service_model == "batching":
        n_short, n_long = _size_batching(problem, b, g)
    else:
        tables = CandidateTables(problem, boundaries, gammas)
        short, long = tables.two_pool()
        empty = CandidateStats(*(np.zeros(1) for _ in fields(CandidateStats)))
        n_short = _size(problem, _stack([empty, short]), [p for p, count in zip(short_pools, per_boundary, strict=True) for _ in range(count)])
        n_long = _size(problem, _stack([tables.homogeneous(), long]), [tables.long] * len(b))
    feasible = (n_short >= 0) & (n_long >= 0)
    return pd.DataFrame({
        "B": b,
        "gamma": g,
        "n_short": n_short,
        "n_long": n_long,
        "feasible": feasible,
        "instances": np.where(feasible, n_short + n_long, -1),
        "cost_per_hour": np.where(feasible, n_short * short_price + n_long * long_price, np.inf),
    })


def _stack(stats: list[CandidateStats]) -> CandidateStats:
    return CandidateStats(*(np.concatenate([getattr(s, f.name) for s in stats]) for f in fields(CandidateStats)))


def _size(problem: FleetProblem, stats: CandidateStats, pools: list[PoolConfig]) -> np.ndarray:
    """Each candidate's pool sized (``pools[i]`` its configuration), TTFT and TPOT targets included."""
    rate = problem.rate_rps * stats.share
    tpot = problem.tpot_targets.min_instances(rate, stats.mean_prefill_compute_ms, np.array([p.window_step_ms for p in pools]),
                                         np.array([p.tpot_bound_ms for p in pools])) if problem.tpot_targets.any else None
    return size_pools(rate, stats.mean_service_ms, stats.service_scv, stats.ttft_floor_ms, np.array([p.slots_per_instance for p in pools]),
                      problem.ttft_p99_ms, problem.rho_max, tpot, problem.ttft_quantile)


def _size_batching(problem: FleetProblem, boundaries: np.ndarray, gammas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(n_short, n_long)`` of every candidate under the batching service model: each candidate is routed
    (routing.py) and all its pools sized in one vectorised call (batching_pool.py).  The batching model needs
    each pool's chunk mix and prefill moments, which the prefix tables of candidate_stats.py do not hold."""
    long_window = problem.long_window_tokens
    configs, traffic = [], []
    for boundary, gamma in zip(boundaries.tolist(), gammas.tolist(), strict=True):
        plan = plan_from_row(problem, pd.Series({"B": boundary, "gamma": gamma, "n_short": 0, "n_long": 0}), "sweep")
        routed = route(problem.mix, plan, problem.compressible_fraction)
        if len(plan.pools) == 1:  # the homogeneous row: an empty short pool
            configs.append(problem.pool(long_window))
            traffic.append((np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)))
        for pool, served in zip(plan.pools, routed, strict=True):
            configs.append(problem.pool(pool.window_tokens))
            traffic.append((served.l_in, served.l_out, served.weight))
    rates = problem.rate_rps * np.array([float(np.sum(w)) for _, _, w in traffic])
    need = min_instances_batching(batching_workload(configs, traffic, rates), configs, problem.ttft_p99_ms, problem.rho_max, problem.tpot_targets)
    return need[0::2], need[1::2]


def best_plan(problem: FleetProblem, table: pd.DataFrame, method: str) -> Plan:
    """The cheapest feasible row of ``table`` as a Plan (ties: fewer GPUs, smaller gamma, larger B).

    With no feasible row, the error names the pool with the lowest TTFT floor that still breaks the SLO.
    """
    feasible = table["feasible"].to_numpy()
    if not feasible.any():
        raise InfeasibleError(f"none of {len(table)} (B, gamma) candidates meets the SLO; {_why_none(problem, table)}")
    cost, instances, gamma, boundary = (table[c].to_numpy() for c in ("cost_per_hour", "instances", "gamma", "B"))
    order = np.lexsort((-boundary, gamma, instances, cost))
    return plan_from_row(problem, table.iloc[order[0]], method)


def _why_none(problem: FleetProblem, table: pd.DataFrame) -> str:
    """Explain infeasibility by the candidate with the largest B (the homogeneous fleet when present)."""
    row = table.loc[table["B"].idxmax()].copy()
    row[["n_short", "n_long"]] = 0
    evaluation = evaluate(problem, plan_from_row(problem, row, "sweep"))
    broken = [p for p in evaluation.pools if p.min_instances < 0]
    return infeasible_pool_message(problem, evaluation, broken[0].name) if broken else "no pool size meets the SLO"


def plan_from_row(problem: FleetProblem, row: pd.Series, method: str) -> Plan:
    """The Plan of one candidate row (a single long pool when B is the long window)."""
    long_pool = PoolPlan("long", problem.long_window_tokens, int(row["n_long"]))
    if int(row["B"]) >= problem.long_window_tokens:
        return Plan((long_pool,), gamma=1.0, method=method)
    short_pool = PoolPlan("short", int(row["B"]), int(row["n_short"]))
    return Plan((short_pool, long_pool), gamma=float(row["gamma"]), method=method)


def sweep(problem: FleetProblem) -> SweepResult:
    """Joint B x gamma sweep (FleetOpt Algorithm 1 over all candidates).  With no feasible candidate and compression
    off, the error says whether compression at the instance's settings would make the instance feasible."""
    start = time.perf_counter()
    table = candidate_table(problem)
    try:
        plan = best_plan(problem, table, "sweep")
    except InfeasibleError as exc:
        raise InfeasibleError(f"{exc}{compression_hint(problem)}") from None
    return SweepResult(plan=plan, candidates=table, seconds=time.perf_counter() - start)


def compression_hint(problem: FleetProblem) -> str:
    """For an infeasible instance that leaves compression off: whether the sweep with Compress-and-Route on (the
    instance's ``compressible_fraction`` and gamma grid) finds a plan, and at what cost; empty when compression is on
    or no prompt is compressible."""
    if problem.compression_enabled or problem.compressible_fraction <= 0:
        return ""
    compressed = problem.with_compression_on()
    table = candidate_table(compressed)
    setting = (f"compression.enabled: true, compressible share {problem.compressible_fraction:g}, gamma up to "
               f"{max(compressed.gammas):g}")
    if not table["feasible"].any():
        return f"; compression would not make it feasible either ({setting})"
    best = best_plan(compressed, table, "sweep")
    cost = float(table.loc[table["feasible"], "cost_per_hour"].min())
    return (f"; with compression on ({setting}: prompts between B and gamma B are cut to B), the sweep finds a plan at "
            f"${cost:,.2f}/h (B = {best.boundary_tokens}, gamma = {best.gamma:g})")
