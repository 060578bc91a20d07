"""The one evaluator of pd_fleet plans: whoever made a plan (MILP, baseline, a file), it is scored here.

Per pool, an aggregated choice ``(option, n)`` is the fleet kind's batching pool at ``n`` instances (sizing.py); a
disaggregated choice ``(prefill, x, decode, y)`` is the analytic model at ``(x, y)`` (analytic.py) over the link of
its GPU pair.  A pool with traffic and no choice is a violation.  Then over the fleet:

    cost   = sum over pools and roles of instances x tp x price_per_gpu_hour     ($/h)
    GPUs_g = sum over pools and roles on GPU type g of instances x tp
    power  = sum_g GPUs_g power_g                                                (W)

and every instance constraint is re-checked by its registered check (constraints.py).  ``binding`` names, per pool,
what breaks with one instance fewer of each role.  The verdict lists every violation in words; ``feasible`` means
none.  Every evaluation carries the approximations of the models that scored its pools: the analytic model's
(analytic.APPROXIMATIONS) for disaggregated pools, :data:`AGGREGATED_APPROXIMATION` for aggregated ones.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from optfleet.errors import InputError
from optfleet.problems.pd_fleet.analytic import APPROXIMATIONS, PoolMetrics
from optfleet.problems.profiled_fleet.evaluator import ConstraintCheck
from optfleet.problems.pd_fleet.plan import AggregatedPoolPlan, DisaggregatedPoolPlan, PdPlan
from optfleet.problems.pd_fleet.problem import AggregatedOption, Config, DecodeOption, PdProblem, PoolTraffic, PrefillOption
from optfleet.problems.pd_fleet.sizing import AggregatedState, aggregated_minimum, aggregated_states, disaggregated_pool

TOLERANCE = 1e-7  # relative slack on the caps (solver tolerances)

AGGREGATED_APPROXIMATION = ("aggregated pools: the fleet kind's continuous-batching model (approximate; with long prompts "
                            "taking half of one instance's time its P99 TPOT ran up to 16 % below the simulator, and its "
                            "P99 TTFT from 12 % below on one instance to 13 % above on two: check with optfleet "
                            "simulate)")
"""What is approximate in an aggregated pool's figures (docs/guide/pd-fleet.md, "Not yet here")."""


def approximations_of(modes: set[str]) -> tuple[str, ...]:
    """The approximations behind pools of these modes: the analytic model's for disaggregated pools, the batching
    model's for aggregated ones."""
    return (APPROXIMATIONS if "disaggregated" in modes else ()) + ((AGGREGATED_APPROXIMATION,) if "aggregated" in modes else ())


@dataclass(frozen=True)
class PoolEvaluation:
    """One pool of a plan: its choice in words, cost, GPUs per type, latencies, utilisations, what binds, what breaks."""

    index: int
    label: str
    mode: str
    choice: str
    rate_rps: float
    cost_per_hour: float
    gpus: dict[str, int]
    ttft_p99_ms: float | None
    tpot_p99_ms: float | None
    tpot_mean_ms: float | None
    utilisation: dict[str, float]
    binding: str
    violations: tuple[str, ...]
    metrics: PoolMetrics | AggregatedState | None = None


@dataclass(frozen=True)
class PdEvaluation:
    """A scored plan: its pools, cost ($/h), GPUs and power per type, constraint checks, violations."""

    plan: PdPlan
    pools: tuple[PoolEvaluation, ...]
    cost_per_hour: float
    gpus: dict[str, int]
    power_w: float | None
    checks: tuple[ConstraintCheck, ...]
    violations: tuple[str, ...]
    approximations: tuple[str, ...] = APPROXIMATIONS

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def disaggregated_pools(self) -> int:
        return sum(1 for p in self.pools if p.mode == "disaggregated")

    def describe(self) -> str:
        """``"pool 0: 8 x P H100-SXM x4 B8192 + 2 x D ...; pool 1: ..."``."""
        return "; ".join(f"pool {p.index}: {p.choice}" for p in self.pools if p.mode != "idle") or "no instances"


def _add(gpus: dict[str, int], option: Config, instances: int) -> float:
    """Count ``instances`` of ``option`` into ``gpus``; return their cost per hour."""
    gpus[option.gpu] = gpus.get(option.gpu, 0) + instances * option.tp
    return instances * option.cost_per_instance_hour


def evaluate(problem: PdProblem, plan: PdPlan) -> PdEvaluation:
    """Score ``plan`` on ``problem`` (module docstring)."""
    if len(plan.pools) != len(problem.pools):
        raise InputError("plan.pools", len(plan.pools), f"needs one entry per pool ({len(problem.pools)})")
    pools = tuple(_evaluate_pool(problem, pool, choice) for pool, choice in zip(problem.pools, plan.pools, strict=True))
    gpus: dict[str, int] = {}
    for p in pools:
        for name, count in p.gpus.items():
            gpus[name] = gpus.get(name, 0) + count
    known = all(problem.power_of(g) is not None for g in gpus)
    power = sum(count * (problem.power_of(g) or 0.0) for g, count in gpus.items()) if known else None
    violations = tuple(f"{p.label}: {v}" for p in pools for v in p.violations)
    evaluation = PdEvaluation(plan, pools, sum(p.cost_per_hour for p in pools), gpus, power, (), violations,
                              approximations_of({p.mode for p in pools}))
    return _with_constraint_checks(problem, evaluation) if problem.constraints else evaluation


def _evaluate_pool(problem: PdProblem, pool: PoolTraffic, choice) -> PoolEvaluation:
    if choice is None:
        broken = (f"carries {pool.rate_rps:.4g} req/s and has no instances",) if pool.busy else ()
        return PoolEvaluation(pool.index, pool.label, "idle", "none", pool.rate_rps, 0.0, {}, None, None, None, {}, "", broken)
    gpus: dict[str, int] = {}
    if isinstance(choice, AggregatedPoolPlan):
        option = problem.option(choice.option, f"plan.pools[{pool.index}].aggregated")
        assert isinstance(option, AggregatedOption)
        cost = _add(gpus, option, choice.instances)
        return _aggregated(problem, pool, option, choice, cost, gpus)
    assert isinstance(choice, DisaggregatedPoolPlan)
    prefill = problem.option(choice.prefill, f"plan.pools[{pool.index}].prefill")
    decode = problem.option(choice.decode, f"plan.pools[{pool.index}].decode")
    assert isinstance(prefill, PrefillOption) and isinstance(decode, DecodeOption)
    cost = _add(gpus, prefill, choice.prefill_instances) + _add(gpus, decode, choice.decode_instances)
    model = disaggregated_pool(problem, pool, prefill, decode)
    x, y = choice.prefill_instances, choice.decode_instances
    m = model.metrics(x, y)
    binding = []
    if m.feasible:
        if x > 1 and not model.metrics(x - 1, y).feasible:
            binding.append(f"prefill ({'; '.join(model.metrics(x - 1, y).violations)} at x = {x - 1})")
        if y > 1 and not model.metrics(x, y - 1).feasible:
            binding.append(f"decode ({'; '.join(model.metrics(x, y - 1).violations)} at y = {y - 1})")
    return PoolEvaluation(
        pool.index, pool.label, "disaggregated", choice.describe(), pool.rate_rps, cost, gpus, m.ttft_p99_ms, m.tpot_p99_ms,
        m.tpot_mean_ms, {"prefill": m.prefill_utilisation, "link": m.link_utilisation, "decode": m.decode_utilisation},
        "; ".join(binding) or ("none (slack in both roles)" if m.feasible else ""), m.violations, m)


def _aggregated(problem: PdProblem, pool: PoolTraffic, option: AggregatedOption, choice: AggregatedPoolPlan, cost: float,
                gpus: dict[str, int]) -> PoolEvaluation:
    states = aggregated_states(problem, pool, option, [choice.instances])
    if states is None:
        return PoolEvaluation(pool.index, pool.label, "aggregated", choice.describe(), pool.rate_rps, cost, gpus, None, None, None, {},
                              "", (f"{option.label} holds no sequence of the {pool.window_tokens:,}-token window",))
    state = states[0]
    broken = []
    if not state.meets_slo:
        need = aggregated_minimum(problem, pool, option)
        broken.append(f"{choice.instances} instance(s) of {option.label} miss the SLO under the fleet's batching model "
                      f"(P99 TTFT {state.ttft_p99_ms:.4g} ms, P99 TPOT {state.tpot_p99_ms:.4g} ms, occupancy "
                      f"{state.utilisation:.3g}); it needs {need if need > 0 else 'more than any count'}")
        binding = ""
    elif choice.instances > 1 and not aggregated_states(problem, pool, option, [choice.instances - 1])[0].meets_slo:
        binding = "instances (one fewer misses the SLO)"
    else:
        binding = "none (slack)"
    return PoolEvaluation(pool.index, pool.label, "aggregated", choice.describe(), pool.rate_rps, cost, gpus, state.ttft_p99_ms,
                          state.tpot_p99_ms, state.tpot_mean_ms, {"slots": state.utilisation}, binding, tuple(broken), state)


def _with_constraint_checks(problem: PdProblem, evaluation: PdEvaluation) -> PdEvaluation:
    """``evaluation`` with each instance constraint re-checked, and the broken ones among its violations."""
    from optfleet.problems.pd_fleet.constraints import PD_CONSTRAINTS, describe_constraint  # Pyomo (the formulations) only here

    checks = tuple(ConstraintCheck(describe_constraint(i, c), c.kind, verdict.holds, verdict.detail)
                   for i, c, verdict in PD_CONSTRAINTS.verdicts(problem, evaluation, problem.constraints))
    broken = tuple(f"{check.label} is violated: {check.detail}" for check in checks if not check.holds)
    return replace(evaluation, checks=checks, violations=evaluation.violations + broken)
