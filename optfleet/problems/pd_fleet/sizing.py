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

from dataclasses import dataclass

import numpy as np

from optfleet.problems.fleet.batching_pool import batching_workload, meets_slo, min_instances_batching, state_at
from optfleet.problems.fleet.pool_stats import TpotTargets
from optfleet.problems.pd_fleet.analytic import DisaggregatedPool, PoolTargets
from optfleet.problems.pd_fleet.problem import AggregatedOption, DecodeOption, PdProblem, PoolTraffic, PrefillOption
from optfleet.queueing.batching_engine import EngineBatchingState


@dataclass(frozen=True)
class AggregatedState:
    """An aggregated pool at ``instances``: the fleet's batching model's P99 TTFT, TPOT (P99 bound and mean) and slot
    occupancy, whether it meets the SLO, and the least count that does (-1: none)."""

    instances: int
    ttft_p99_ms: float
    tpot_p99_ms: float
    tpot_mean_ms: float
    utilisation: float
    stable: bool
    meets_slo: bool
    min_instances: int


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


def aggregated_state(problem: PdProblem, pool: PoolTraffic, option: AggregatedOption, instances: int) -> AggregatedState | None:
    """The fleet's batching model of ``pool`` on ``option`` at ``instances`` (None: the window fits no sequence)."""
    config = option.pool(pool.window_tokens)
    if config is None:
        return None
    workload = batching_workload([config], [(pool.l_in, pool.l_out, pool.weight)], pool.rate_rps)
    tpot = TpotTargets(problem.tpot_p99_ms, None)
    need = int(min_instances_batching(workload, [config], problem.ttft_p99_ms, problem.rho_max, tpot)[0])
    state = state_at(workload, [config], np.array([max(instances, 1)]))
    assert isinstance(state, EngineBatchingState)
    ok = bool(meets_slo(state, problem.ttft_p99_ms, problem.rho_max, tpot)[0]) and instances >= 1
    return AggregatedState(instances, float(state.ttft_p99_ms[0]), float(state.tpot_p99_ms[0]), float(state.tpot_mean_ms[0]),
                           float(state.utilisation[0]), bool(state.stable[0]), ok, need)


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
            state = aggregated_state(problem, pool, option, 1)
            if state is not None and state.min_instances >= 1:
                found.append(AggregatedCandidate(pool.index, a, state.min_instances))
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
