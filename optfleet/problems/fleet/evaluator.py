"""The analytical evaluator: the one place every fleet plan is scored.

Whoever produced a plan (a baseline, the sweep, a MILP, a user's JSON file),
``evaluate(problem, plan)`` routes the exact request mix through it
(routing.py), computes each pool's exact statistics (pool_stats.py) and its
M/G/c queue at the plan's instance count (FleetOpt, Chen et al. 2026):

    c = n n_max,  a = lambda_j E[S],  rho = a / c,
    C = ErlangC(c, a),  W99 = Kimura P99 wait,  TTFT99 = W99 + floor,

with the SLO verdict ``rho <= rho_max and TTFT99 <= SLO`` and the term that
binds.  It also reports each pool's minimum feasible instance count, so a plan
with too few GPUs is told how many it needs.

Under ``slo.service_model: batching`` the same fields come from the
continuous-batching model instead (optfleet/queueing/batching.py,
batching_pool.py): utilisation is the slot occupancy at the load-dependent
iteration time, ``erlang_c`` the chain's probability of waiting for a slot,
``mean_service_ms`` a request's mean slot-holding time, ``first_iteration_ms``
the iteration time at the pool's load and ``prefill_p99_ms`` the rest of the
in-GPU P99 time to first token.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from optfleet.problems.fleet.batching_pool import batching_workload, meets_slo, min_instances_batching, state_at
from optfleet.problems.fleet.plan import Plan
from optfleet.problems.fleet.pool_config import PoolConfig
from optfleet.problems.fleet.pool_stats import PoolStats, pool_stats, size_pools
from optfleet.problems.fleet.problem import HOURS_PER_YEAR, FleetProblem
from optfleet.problems.fleet.routing import route
from optfleet.queueing import INFEASIBLE, RELATIVE_TOLERANCE, erlang_c, wait_quantile_s
from optfleet.queueing.batching import JOIN_ITERATIONS
from optfleet.queueing.batching_engine import EngineBatchingState


@dataclass(frozen=True)
class PoolMetrics:
    """Everything the evaluator knows about one pool of a plan."""

    name: str
    gpu: str
    window_tokens: int
    instances: int
    slots_per_instance: int
    servers: int
    share: float
    compressed_share: float
    rate_rps: float
    mean_service_ms: float
    service_scv: float
    load_erlangs: float
    utilisation: float
    erlang_c: float
    wait_p99_ms: float
    prefill_p99_ms: float
    first_iteration_ms: float
    ttft_p99_ms: float
    min_instances: int
    meets_slo: bool
    binding: str
    cost_per_hour: float
    tpot_bound_ms: float = 0.0
    tpot_mean_ms: float = 0.0
    tpot_p99_ms: float | None = None  # the batching model's under the engine model (the slot model has the bound)


@dataclass(frozen=True)
class FleetEvaluation:
    """A scored plan: pools, totals and the SLO verdict."""

    plan: Plan
    pools: tuple[PoolMetrics, ...]
    ttft_slo_ms: float
    rho_max: float
    ttft_rule: str
    service_model: str = "slots"

    @property
    def total_instances(self) -> int:
        return sum(p.instances for p in self.pools)

    @property
    def cost_per_hour(self) -> float:
        return sum(p.cost_per_hour for p in self.pools)

    @property
    def cost_per_year(self) -> float:
        return self.cost_per_hour * HOURS_PER_YEAR

    @property
    def meets_slo(self) -> bool:
        return all(p.meets_slo for p in self.pools)

    def to_dict(self) -> dict[str, Any]:
        return {
            "plan": self.plan.to_dict(),
            "total_instances": self.total_instances,
            "cost_per_hour": self.cost_per_hour,
            "cost_per_year": self.cost_per_year,
            "meets_slo": self.meets_slo,
            "ttft_slo_ms": self.ttft_slo_ms,
            "rho_max": self.rho_max,
            "ttft_rule": self.ttft_rule,
            "service_model": self.service_model,
            "pools": [asdict(p) for p in self.pools],
        }


def evaluate(problem: FleetProblem, plan: Plan) -> FleetEvaluation:
    """Score ``plan`` on ``problem`` with the analytical M/G/c model (or the batching model, module docstring)."""
    traffic = route(problem.mix, plan, problem.compressible_fraction)
    if problem.service_model == "batching":
        return _evaluate_batching(problem, plan, traffic)
    pools = []
    for pool_plan, served in zip(plan.pools, traffic, strict=True):
        config = problem.pool(pool_plan.window_tokens, pool_plan.gpu)
        stats = pool_stats(config, served.l_in, served.l_out, served.weight, problem.ttft_rule, problem.ttft_quantile)
        pools.append(_pool_metrics(problem, pool_plan.name, pool_plan.instances, config, stats, served.compressed_share))
    return FleetEvaluation(plan=plan, pools=tuple(pools), ttft_slo_ms=problem.ttft_p99_ms, rho_max=problem.rho_max, ttft_rule=problem.ttft_rule)


def _evaluate_batching(problem: FleetProblem, plan: Plan, traffic: list) -> FleetEvaluation:
    """Every pool of ``plan`` under the continuous-batching model, at its instance count and at its minimum count."""
    configs = [problem.pool(p.window_tokens, p.gpu) for p in plan.pools]
    shares = np.array([float(t.weight.sum()) for t in traffic])
    workload = batching_workload(configs, [(t.l_in, t.l_out, t.weight) for t in traffic], problem.rate_rps * shares)
    gpus = np.array([p.instances for p in plan.pools])
    state = state_at(workload, configs, np.maximum(gpus, 1))
    engine = isinstance(state, EngineBatchingState)
    targets = problem.tpot_targets if engine else None
    need = min_instances_batching(workload, configs, problem.ttft_p99_ms, problem.rho_max, targets)
    below = state_at(workload, configs, np.maximum(need - 1, 1))  # what breaks one GPU short of the minimum
    below_ok = {"utilisation": meets_slo(below, np.inf, problem.rho_max), "ttft": meets_slo(below, problem.ttft_p99_ms, problem.rho_max)}
    idle = state_at(replace(workload, rate_rps=np.zeros(len(configs))), configs, np.ones(len(configs)))
    idle_ttft_ok = meets_slo(idle, problem.ttft_p99_ms, problem.rho_max)
    tpot_ok = meets_slo(state, np.inf, np.inf, targets)
    pools = []
    for j, (pool_plan, config, served) in enumerate(zip(plan.pools, configs, traffic, strict=True)):
        rate = float(workload.rate_rps[j])
        empty = rate <= 0
        working = pool_plan.instances >= 1 or empty
        if engine:
            hold_ms, scv = float(state.hold_ms[j]), float(state.hold_scv[j])
        else:
            hold_ms = float((workload.mean_iterations[j] + JOIN_ITERATIONS + state.prefill_wait_iterations[j]) * state.iteration_ms[j])
            scv = float(workload.iterations_scv[j])
        utilisation = float(state.utilisation[j]) if working and not empty else (0.0 if empty else np.inf)
        ttft = 0.0 if empty else (float(state.ttft_p99_ms[j]) if working else np.inf)
        cap_ok = utilisation <= problem.rho_max * (1.0 + RELATIVE_TOLERANCE)
        ttft_ok = ttft <= problem.ttft_p99_ms * (1.0 + RELATIVE_TOLERANCE)
        tpot_met = empty or (working and bool(tpot_ok[j]))
        if empty:
            binding = "empty"
        elif need[j] == INFEASIBLE:
            binding = "tpot" if bool(idle_ttft_ok[j]) else "ttft floor"
        elif not working or not bool(state.stable[j]) or not cap_ok:
            binding = "utilisation (violated)"
        elif not ttft_ok:
            binding = "ttft (violated)"
        elif not tpot_met:
            binding = "tpot (violated)"
        elif need[j] <= 1 or not bool(below_ok["utilisation"][j]):
            binding = "utilisation"
        else:
            binding = "tpot" if bool(below_ok["ttft"][j]) else "ttft"
        pools.append(PoolMetrics(
            name=pool_plan.name, gpu=config.gpu, window_tokens=pool_plan.window_tokens, instances=pool_plan.instances,
            slots_per_instance=config.slots_per_instance, servers=pool_plan.instances * config.slots_per_instance, share=float(shares[j]),
            compressed_share=served.compressed_share, rate_rps=rate, mean_service_ms=0.0 if empty else hold_ms,
            service_scv=scv, load_erlangs=0.0 if empty else rate * hold_ms / 1000.0,
            utilisation=utilisation, erlang_c=0.0 if empty else (float(state.wait_probability[j]) if working else 1.0),
            wait_p99_ms=0.0 if empty else (float(state.wait_p99_ms[j]) if working else np.inf),
            prefill_p99_ms=0.0 if empty else float(state.in_gpu_p99_ms[j] - state.iteration_ms[j]),
            first_iteration_ms=0.0 if empty else float(state.iteration_ms[j]), ttft_p99_ms=ttft, min_instances=int(need[j]),
            meets_slo=bool(empty or (working and state.stable[j] and cap_ok and ttft_ok and tpot_met)), binding=binding,
            cost_per_hour=pool_plan.instances * config.cost_per_instance_hour,
            **(_batching_tpot(config, state, j, empty, working) if engine else {}),
        ))
    return FleetEvaluation(plan=plan, pools=tuple(pools), ttft_slo_ms=problem.ttft_p99_ms, rho_max=problem.rho_max,
                           ttft_rule=problem.ttft_rule, service_model="batching")


def _batching_tpot(config: PoolConfig, state: EngineBatchingState, j: int, empty: bool, working: bool) -> dict[str, float]:
    """Pool ``j``'s TPOT figures under the engine's batching model: its P99 and mean, and the longest iteration."""
    if empty:
        return {"tpot_bound_ms": 0.0, "tpot_mean_ms": 0.0, "tpot_p99_ms": 0.0}
    return {"tpot_bound_ms": config.tpot_bound_ms, "tpot_mean_ms": float(state.tpot_mean_ms[j]) if working else np.inf,
            "tpot_p99_ms": float(state.tpot_p99_ms[j]) if working else np.inf}


def _pool_metrics(problem: FleetProblem, name: str, instances: int, config: PoolConfig, stats: PoolStats, compressed_share: float) -> PoolMetrics:
    slots_per_instance = config.slots_per_instance
    rate = problem.rate_rps * stats.share
    load = rate * stats.mean_service_ms / 1000.0
    servers = instances * slots_per_instance
    targets = problem.tpot_targets
    tpot_need = int(targets.min_instances(rate, stats.mean_prefill_compute_ms, config.window_step_ms, config.tpot_bound_ms))
    need = int(size_pools(rate, stats.mean_service_ms, stats.service_scv, stats.ttft_floor_ms, slots_per_instance, problem.ttft_p99_ms,
                          problem.rho_max, tpot_need, problem.ttft_quantile))
    if servers > 0:
        utilisation = load / servers
        prob_wait = float(erlang_c(servers, load))
        wait_ms = float(wait_quantile_s(servers, load, stats.mean_service_ms / 1000.0, stats.service_scv, problem.ttft_quantile)) * 1000.0
    else:
        utilisation, prob_wait, wait_ms = (0.0, 0.0, 0.0) if load == 0 else (np.inf, 1.0, np.inf)
    ttft = wait_ms + stats.ttft_floor_ms if stats.share > 0 else 0.0
    cap_ok = utilisation <= problem.rho_max * (1.0 + RELATIVE_TOLERANCE)
    ttft_ok = ttft <= problem.ttft_p99_ms * (1.0 + RELATIVE_TOLERANCE)
    busy = stats.share > 0
    tpot_mean = float(config.mean_tpot_ms(rate / instances, stats.mean_prefill_compute_ms)) if busy and instances > 0 else (np.inf if busy else 0.0)
    tpot_bound = config.tpot_bound_ms if busy else 0.0
    tpot_ok = not busy or (bool(targets.bound_fits(tpot_bound)) and (targets.mean_ms is None or tpot_mean <= targets.mean_ms * (1.0 + RELATIVE_TOLERANCE)))
    return PoolMetrics(
        name=name,
        gpu=config.gpu,
        window_tokens=config.window_tokens,
        instances=instances,
        slots_per_instance=slots_per_instance,
        servers=servers,
        share=stats.share,
        compressed_share=compressed_share,
        rate_rps=rate,
        mean_service_ms=stats.mean_service_ms,
        service_scv=stats.service_scv,
        load_erlangs=load,
        utilisation=utilisation,
        erlang_c=prob_wait,
        wait_p99_ms=wait_ms,
        prefill_p99_ms=stats.prefill_ms,
        first_iteration_ms=stats.first_iteration_ms,
        ttft_p99_ms=ttft,
        min_instances=need,
        meets_slo=bool(cap_ok and ttft_ok and tpot_ok),
        binding=_binding(need, load, slots_per_instance, problem.rho_max, (cap_ok, ttft_ok, tpot_ok), stats, problem.ttft_p99_ms, tpot_need),
        cost_per_hour=instances * config.cost_per_instance_hour,
        tpot_bound_ms=tpot_bound,
        tpot_mean_ms=tpot_mean,
    )


def floor_fits(ttft_floor_ms: float, slo_ms: float) -> bool:
    """Whether the TTFT floor leaves a positive wait budget: else no instance count meets the SLO (queueing/sizing.py);
    a pool without a feasible count whose floor fits needs more than ``MAX_GPUS`` GPUs."""
    return ttft_floor_ms < slo_ms


def _binding(need: int, load: float, slots_per_instance: int, rho_max: float, verdicts: tuple[bool, bool, bool], stats: PoolStats,
             slo_ms: float, tpot_need: int) -> str:
    """Which term decides the pool: the violated one, else the one that sets its minimum instance count (``tpot`` when
    the mean-TPOT target needs more instances than the utilisation cap and the TTFT)."""
    if stats.share <= 0:
        return "empty"
    if need == INFEASIBLE:
        if not floor_fits(stats.ttft_floor_ms, slo_ms):
            return "ttft floor"
        return "tpot" if tpot_need == INFEASIBLE else "gpu count limit"
    cap_ok, ttft_ok, tpot_ok = verdicts
    if not cap_ok:
        return "utilisation (violated)"
    if not ttft_ok:
        return "ttft (violated)"
    if not tpot_ok:
        return "tpot (violated)"
    cap_only = int(np.ceil(load / (rho_max * slots_per_instance) * (1.0 - RELATIVE_TOLERANCE)))
    if need <= max(cap_only, 1):
        return "utilisation"
    return "tpot" if need <= tpot_need else "ttft"
