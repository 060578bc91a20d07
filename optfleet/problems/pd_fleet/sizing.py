"""Every pool's options in numbers: an aggregated option's least instance count, a disaggregated pair's frontier.

* An aggregated option is the fleet kind's continuous-batching pool under the engine model (``preset: engine,
  service_model: batching``): its state at ``n`` instances and its least count come from
  optfleet/problems/fleet/batching_pool.py (``state_at``, ``meets_slo``, ``min_instances_batching``) with the pool's
  P99 TTFT target, ``rho_max`` and P99 TPOT target -- the fleet kind's own sizing, not a second one.
* A disaggregated (prefill, decode) pair is the analytic model of analytic.py on the pool's traffic and the link of
  the pair's GPU types; its Pareto frontier lists the least ``(x, y)`` counts.

The MILP (models/pd_fleet.py), the baselines and the evaluator all take their numbers from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from optfleet.problems.fleet.batching_pool import batching_workload, meets_slo, min_instances_batching, state_at
from optfleet.problems.fleet.pool_stats import TpotTargets
from optfleet.problems.pd_fleet.analytic import DisaggregatedPool, PoolTargets
from optfleet.problems.pd_fleet.problem import AggregatedOption, DecodeOption, PdProblem, PoolTraffic, PrefillOption
from optfleet.queueing.batching import take_rows
from optfleet.queueing.batching_engine import EngineBatchingState


@dataclass(frozen=True)
class AggregatedState:
    """An aggregated pool at ``instances``: the fleet's batching model's P99 TTFT, TPOT (P99 bound and mean) and slot
    occupancy, and whether it meets the SLO."""

    instances: int
    ttft_p99_ms: float
    tpot_p99_ms: float
    tpot_mean_ms: float
    utilisation: float
    stable: bool
    meets_slo: bool


@dataclass(frozen=True)
class AggregatedCandidate:
    """Pool ``pool`` on aggregated option ``option`` (its index in ``problem.aggregated``) at ``min_instances``."""

    pool: int
    option: int
    min_instances: int


@dataclass(frozen=True)
class PairCandidate:
    """Pool ``pool`` on prefill option ``prefill`` and decode option ``decode`` (indices), with its frontier
    ``((x, y), ...)``."""

    pool: int
    prefill: int
    decode: int
    frontier: tuple[tuple[int, int], ...]


def targets(problem: PdProblem) -> PoolTargets:
    return PoolTargets(problem.ttft_p99_ms, problem.tpot_p99_ms, problem.rho_max)


def _batching(problem: PdProblem, pool: PoolTraffic, option: AggregatedOption):
    """``(config, workload, TPOT targets)`` of ``pool`` on ``option`` under the fleet's batching model (None: the window
    fits no sequence)."""
    config = option.pool(pool.window_tokens)
    if config is None:
        return None
    return config, batching_workload([config], [(pool.l_in, pool.l_out, pool.weight)], pool.rate_rps), TpotTargets(problem.tpot_p99_ms, None)


def aggregated_minimum(problem: PdProblem, pool: PoolTraffic, option: AggregatedOption) -> int:
    """The fleet's least instance count of ``pool`` on ``option`` (``min_instances_batching``); -1: none, or the window
    fits no sequence."""
    batching = _batching(problem, pool, option)
    if batching is None:
        return -1
    config, workload, tpot = batching
    return int(min_instances_batching(workload, [config], problem.ttft_p99_ms, problem.rho_max, tpot)[0])


def aggregated_states(problem: PdProblem, pool: PoolTraffic, option: AggregatedOption, counts: Sequence[int]) -> list[AggregatedState] | None:
    """The fleet's batching model of ``pool`` on ``option`` at each of ``counts`` instances, in one vectorised call
    (None: the window fits no sequence)."""
    batching = _batching(problem, pool, option)
    if batching is None:
        return None
    config, workload, tpot = batching
    rows = np.zeros(len(counts), dtype=np.int64)
    state = state_at(take_rows(workload, rows), [config] * len(counts), np.maximum(np.asarray(counts), 1))
    assert isinstance(state, EngineBatchingState)
    ok = meets_slo(state, problem.ttft_p99_ms, problem.rho_max, tpot)
    return [AggregatedState(int(n), float(state.ttft_p99_ms[i]), float(state.tpot_p99_ms[i]), float(state.tpot_mean_ms[i]),
                            float(state.utilisation[i]), bool(state.stable[i]), bool(ok[i]) and n >= 1) for i, n in enumerate(counts)]


def disaggregated_pool(problem: PdProblem, pool: PoolTraffic, prefill: PrefillOption, decode: DecodeOption) -> DisaggregatedPool:
    """The analytic model of ``pool`` on ``prefill`` -> link -> ``decode``."""
    return DisaggregatedPool(pool.l_in, pool.l_out, pool.weight, pool.rate_rps, prefill.engine, prefill.token_budget,
                             problem.link(prefill.gpu, decode.gpu), decode.decode_step(pool.window_tokens), decode.max_batch,
                             pool.window_tokens, targets(problem))


def aggregated_candidates(problem: PdProblem) -> list[AggregatedCandidate]:
    """Every (busy pool, aggregated option) that some count serves, at its least count (the fleet's sizing)."""
    found = []
    for pool in problem.busy_pools:
        for a, option in enumerate(problem.aggregated):
            need = aggregated_minimum(problem, pool, option)
            if need >= 1:
                found.append(AggregatedCandidate(pool.index, a, need))
    return found


def pair_candidates(problem: PdProblem) -> list[PairCandidate]:
    """Every (busy pool, prefill option, decode option) with a non-empty frontier."""
    found = []
    for pool in problem.busy_pools:
        for p, prefill in enumerate(problem.prefill):
            for d, decode in enumerate(problem.decode):
                frontier = disaggregated_pool(problem, pool, prefill, decode).frontier()
                if frontier:
                    found.append(PairCandidate(pool.index, p, d, frontier))
    return found
