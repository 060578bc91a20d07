"""The literature's sizing rules (baselines.py) as methods of the kind: ``dynamo_sla`` and ``xpyd_ratio``.

For every busy pool, the rule sizes every (prefill option, decode option) pair of the instance, with the pool's own
request atoms and rate, the prefill option's engine and token budget, the decode option's affine step at the pool's
window (the step the analytic model and the simulator use: DecodeOption.decode_step) and its ``max_batch``, the
instance's P99 targets read as the rule reads them (means), and, for ``xpyd_ratio``, the GPUs per instance of each
role.  Of the pairs it sizes, the pool takes the one **the rule itself would choose: the cheapest in $/h at the
rule's own counts**, ``x c_p + y c_d`` (the first pair in the instance's option order on a tie) -- not the cheapest
feasible one, since the rule cannot see a P99.  A pair the rule finds no configuration for (xpyd_ratio's
InfeasibleError) is skipped; a pool with no pair sized makes the method planless, with the rule's reasons.

The plan is scored by the one evaluator (evaluator.py) like any other: a plan that misses a P99 target is reported
infeasible with the evaluator's reason, not repaired.  Aggregated options are not part of these baselines (the
rules size disaggregated deployments only).
"""

from __future__ import annotations

from dataclasses import dataclass

from optfleet.errors import InfeasibleError
from optfleet.problems.pd_fleet.baselines import SIZING_RULES, DynamoSizing, PoolSizing, XpydSizing
from optfleet.problems.pd_fleet.plan import DisaggregatedPoolPlan, PdPlan, PoolPlan
from optfleet.problems.pd_fleet.problem import DecodeOption, PdProblem, PoolTraffic, PrefillOption

DYNAMO_SLA = "dynamo_sla"
XPYD_RATIO = "xpyd_ratio"
RULE_OF_METHOD = {DYNAMO_SLA: DynamoSizing.method, XPYD_RATIO: XpydSizing.method}
"""Method name -> the rule's name in :data:`baselines.SIZING_RULES`."""


@dataclass(frozen=True)
class RulePlan:
    """A rule's plan and, per pool, the sizing it chose (None: an idle pool)."""

    plan: PdPlan
    sizings: tuple[PoolSizing | None, ...]


def size_pair(problem: PdProblem, pool: PoolTraffic, prefill: PrefillOption, decode: DecodeOption, method: str) -> PoolSizing:
    """The rule of ``method`` on ``pool`` over the pair ``(prefill, decode)`` (module docstring)."""
    extra = {"prefill_gpus": prefill.tp, "decode_gpus": decode.tp} if method == XPYD_RATIO else {}
    return SIZING_RULES[RULE_OF_METHOD[method]](
        pool.l_in, pool.l_out, pool.weight, pool.rate_rps, prefill_step=prefill.engine, token_budget=prefill.token_budget,
        decode_step=decode.decode_step(pool.window_tokens), max_batch=decode.max_batch, ttft_ms=problem.ttft_p99_ms,
        tpot_ms=problem.tpot_p99_ms, **extra)


def rule_plan(problem: PdProblem, method: str) -> RulePlan:
    """Every busy pool on the pair the rule of ``method`` picks (module docstring); InfeasibleError when a pool has
    none."""
    pools: list[PoolPlan] = [None] * len(problem.pools)
    sizings: list[PoolSizing | None] = [None] * len(problem.pools)
    for pool in problem.busy_pools:
        best: tuple[float, DisaggregatedPoolPlan, PoolSizing] | None = None
        reasons = []
        for prefill in problem.prefill:
            for decode in problem.decode:
                try:
                    sizing = size_pair(problem, pool, prefill, decode, method)
                except InfeasibleError as exc:
                    reasons.append(f"{prefill.label} + {decode.label}: {exc}")
                    continue
                x, y = sizing.prefill_instances, sizing.decode_instances
                cost = x * prefill.cost_per_instance_hour + y * decode.cost_per_instance_hour
                if best is None or cost < best[0]:
                    best = (cost, DisaggregatedPoolPlan(prefill.label, x, decode.label, y), sizing)
        if best is None:
            raise InfeasibleError(f"{method}: {pool.label}: the rule sizes no (prefill, decode) pair"
                                  + (f" ({'; '.join(reasons)})" if reasons else " (the instance has no prefill or decode option)"))
        pools[pool.index], sizings[pool.index] = best[1], best[2]
    return RulePlan(PdPlan(method, tuple(pools)), tuple(sizings))
