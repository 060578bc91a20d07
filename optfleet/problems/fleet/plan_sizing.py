"""Size a plan's pools to their minimum feasible GPU counts, or say why a pool cannot be."""

from __future__ import annotations

from optfleet.errors import InfeasibleError
from optfleet.problems.fleet.evaluator import FleetEvaluation, evaluate, floor_fits
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.queueing import MAX_GPUS


def size_plan(problem: FleetProblem, plan: Plan) -> Plan:
    """``plan`` with every pool at its minimum feasible GPU count; InfeasibleError says which pool cannot be."""
    evaluation = evaluate(problem, plan)
    for pool in evaluation.pools:
        if pool.min_gpus < 0:
            raise InfeasibleError(infeasible_pool_message(evaluation, pool.name))
    return plan.with_gpus([p.min_gpus for p in evaluation.pools])


def infeasible_pool_message(evaluation: FleetEvaluation, pool_name: str) -> str:
    """``infeasible: pool <name> needs P99 prefill X ms + one iteration Y ms > SLO Z ms`` (paper rule).

    Under the fleetsim TTFT rule the floor is the pool's mean prefill at one active slot.  A pool whose floor fits
    the SLO but which needs more than ``MAX_GPUS`` GPUs (queueing/sizing.py) is told so, with its load.
    """
    pool = next(p for p in evaluation.pools if p.name == pool_name)
    if floor_fits(pool.prefill_p99_ms + pool.first_iteration_ms, evaluation.ttft_slo_ms):
        return (
            f"infeasible: pool {pool.name} (window {pool.window_tokens} tokens) needs more than {MAX_GPUS:,} GPUs (2^53), the "
            f"most the queueing model counts exactly: {pool.rate_rps:.4g} req/s x mean service {pool.mean_service_ms:.4g} ms "
            f"= {pool.load_erlangs:.4g} erlangs of load at rho_max {evaluation.rho_max:g} with {pool.slots_per_gpu} slots per GPU"
        )
    if evaluation.ttft_rule == "fleetsim":
        floor = f"mean prefill {pool.prefill_p99_ms:.1f} ms (fleetsim rule)"
    else:
        floor = f"P99 prefill {pool.prefill_p99_ms:.1f} ms + one iteration {pool.first_iteration_ms:.1f} ms"
    return (
        f"infeasible: pool {pool.name} (window {pool.window_tokens} tokens) needs {floor} "
        f"> SLO {evaluation.ttft_slo_ms:g} ms, before any queueing"
    )
