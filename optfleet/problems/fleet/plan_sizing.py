"""Size a plan's pools to their minimum feasible instance counts, or say why a pool cannot be."""

from __future__ import annotations

import math
import sys

import numpy as np

from optfleet.errors import InfeasibleError
from optfleet.problems.fleet.batching_pool import batching_workload, state_at
from optfleet.problems.fleet.evaluator import FleetEvaluation, PoolMetrics, evaluate, floor_fits
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.problems.fleet.routing import route
from optfleet.queueing import MAX_GPUS, RELATIVE_TOLERANCE
from optfleet.queueing.batching import BatchingState
from optfleet.queueing.batching_engine import EngineBatchingState


def size_plan(problem: FleetProblem, plan: Plan) -> Plan:
    """``plan`` with every pool at its minimum feasible instance count; InfeasibleError says which pool cannot be."""
    evaluation = evaluate(problem, plan)
    for pool in evaluation.pools:
        if pool.min_instances < 0:
            raise InfeasibleError(infeasible_pool_message(problem, evaluation, pool.name))
    return plan.with_instances([p.min_instances for p in evaluation.pools])


def infeasible_pool_message(problem: FleetProblem, evaluation: FleetEvaluation, pool_name: str) -> str:
    """``infeasible: pool <name> needs P99 prefill X ms + one iteration Y ms > SLO Z ms`` (paper rule).

    Under the fleetsim TTFT rule the floor is the pool's mean prefill at one active slot; under the batching model,
    the in-GPU time to first token of the idle pool (iteration ``W``, no wait), which the model tends to as GPUs
    are added.  A pool whose floor fits the SLO but which needs more than ``MAX_GPUS`` GPUs (queueing/sizing.py)
    is told so, with its load.
    """
    j, pool = next((j, p) for j, p in enumerate(evaluation.pools) if p.name == pool_name)
    tpot = _tpot_reason(problem, pool)
    if evaluation.service_model == "batching":
        idle = _idle_batching_state(problem, evaluation.plan, j)
        in_gpu_ms, iteration_ms = float(idle.in_gpu_p99_ms[0]), float(idle.iteration_ms[0])
        fits = floor_fits(in_gpu_ms, evaluation.ttft_slo_ms)
        floor = f"an in-GPU time to first token of {in_gpu_ms:.1f} ms even when idle (P99 prefill and first decode at {iteration_ms:.1f} ms per iteration)"
        if isinstance(idle, EngineBatchingState):
            tpot = _idle_tpot_reason(problem, idle)
    else:
        fits = floor_fits(pool.prefill_p99_ms + pool.first_iteration_ms, evaluation.ttft_slo_ms)
        floor = (f"mean prefill {pool.prefill_p99_ms:.1f} ms (fleetsim rule)" if evaluation.ttft_rule == "fleetsim"
                 else f"P99 prefill {pool.prefill_p99_ms:.1f} ms + one iteration {pool.first_iteration_ms:.1f} ms")
    if fits and tpot is not None:
        return f"infeasible: pool {pool.name} (window {pool.window_tokens} tokens): {tpot}"
    if fits:
        return (
            f"infeasible: pool {pool.name} (window {pool.window_tokens} tokens) needs more than {MAX_GPUS:,} instances (2^53), the "
            f"most the queueing model counts exactly: {pool.rate_rps:.4g} req/s at rho_max {evaluation.rho_max:g} with "
            f"{pool.slots_per_instance} slots per instance" + (f" (mean service {pool.mean_service_ms:.4g} ms = {_erlangs(pool.load_erlangs)} of load)"
                                                     if evaluation.service_model != "batching" else "")
        )
    return (
        f"infeasible: pool {pool.name} (window {pool.window_tokens} tokens) needs {floor} "
        f"> SLO {evaluation.ttft_slo_ms:g} ms, before any queueing{_floor_remedy(problem, pool)}"
    )


def _floor_remedy(problem: FleetProblem, pool: PoolMetrics) -> str:
    """What lowers a prefill floor: a larger prefill chunk (fewer iterations per prompt), a smaller window (shorter
    prompts), a faster configuration."""
    chunk = problem.pool(pool.window_tokens, pool.gpu).chunk_tokens
    field = "hardware.iteration.chunk_tokens" + (" or hardware.engine.max_num_batched_tokens" if problem.charges_prefill else "")
    return (f"; a larger prefill chunk ({field}, now {chunk:,} tokens: fewer iterations per prompt), a smaller long window "
            "or a faster GPU configuration lowers it")


def _tpot_reason(problem: FleetProblem, pool: PoolMetrics) -> str | None:
    """Why the pool meets no TPOT target at any count (pool_stats.py), or None."""
    targets = problem.tpot_targets
    if targets.percentile_ms is not None and not bool(targets.bound_fits(pool.tpot_bound_ms)):
        if not problem.charges_prefill:
            return (f"its iteration, {pool.tpot_bound_ms:.1f} ms (the paper's full-batch t_iter at the window), is above the TPOT "
                    f"target {targets.percentile_ms:g} ms; a smaller window lowers it")
        return (f"its longest iteration, {pool.tpot_bound_ms:.1f} ms (a full batch at the window plus a full budget of prompt tokens), "
                f"is above the TPOT target {targets.percentile_ms:g} ms, which every TPOT percentile must meet in the slot model; "
                "a smaller chunk (hardware.engine.max_num_batched_tokens) or a smaller window lowers it")
    config = problem.pool(pool.window_tokens, pool.gpu)
    if targets.mean_ms is not None and float(targets.mean_capacity(config.window_step_ms)) <= 0:
        return f"its decode step at the window, {config.window_step_ms:.1f} ms, is already above the mean TPOT target {targets.mean_ms:g} ms"
    return None


def _idle_batching_state(problem: FleetProblem, plan: Plan, j: int) -> BatchingState:
    """Pool ``j`` of ``plan`` under the batching model with no traffic (what the model tends to as GPUs are added)."""
    served = route(problem.mix, plan, problem.compressible_fraction)[j]
    config = problem.pool(plan.pools[j].window_tokens, plan.pools[j].gpu)
    return state_at(batching_workload([config], [(served.l_in, served.l_out, served.weight)], np.zeros(1)), [config], np.ones(1))


def _idle_tpot_reason(problem: FleetProblem, idle: EngineBatchingState) -> str | None:
    """Why the pool meets no TPOT target under the engine's batching model: its idle P99 or mean TPOT (each request
    decoding alone) above the target, or None."""
    targets = problem.tpot_targets
    p99, mean = float(idle.tpot_p99_ms[0]), float(idle.tpot_mean_ms[0])
    if targets.percentile_ms is not None and p99 > targets.percentile_ms * (1 + RELATIVE_TOLERANCE):
        return (f"its P99 TPOT is {p99:.1f} ms even when idle (each request decoding alone, the batching model), above the strictest "
                f"TPOT percentile target {targets.percentile_ms:g} ms; a smaller window or a faster configuration lowers it")
    if targets.mean_ms is not None and mean > targets.mean_ms * (1 + RELATIVE_TOLERANCE):
        return f"its mean TPOT is {mean:.1f} ms even when idle (the batching model), above the mean TPOT target {targets.mean_ms:g} ms"
    return None


def _erlangs(load_erlangs: float) -> str:
    """The offered load in words; beyond float64 (rate x mean service overflowed) it says so rather than "inf"."""
    if math.isfinite(load_erlangs):
        return f"{load_erlangs:.4g} erlangs"
    return f"over {sys.float_info.max:.4g} erlangs (past a float's range)"
