"""The analytic disaggregated-pool model (analytic.py) against the pool simulator (simulate/): the issue's agreement
targets -- P99 TTFT and P99 TPOT within 10 %, utilisation within 5 %, attainment >= 99 % -- on a small pool (fast) and
on every disaggregated pool of the shipped instances' MILP plans (slow)."""

from __future__ import annotations

import numpy as np
import pytest

from optfleet.engine import AffineStep
from optfleet.instance import load_instance
from optfleet.problems.pd_fleet.analytic import DisaggregatedPool, PoolTargets
from optfleet.problems.pd_fleet.evaluator import evaluate
from optfleet.problems.pd_fleet.exact import solve_pd
from optfleet.problems.pd_fleet.plan import DisaggregatedPoolPlan
from optfleet.problems.pd_fleet.problem import prepare
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole, TransferLink
from optfleet.problems.pd_fleet.simulate import simulate_pool
from optfleet.problems.pd_fleet.simulate.outcome import simulate_choice

from support import REPO

LATENCIES = (("ttft_p99_ms", "ttft_p99_ms"), ("tpot_p99_ms", "tpot_p99_ms"))
UTILISATIONS = (("prefill_utilisation", "prefill_busy_share"), ("link_utilisation", "link_busy_share"))


def _agree(analytic: float, simulated: float, tolerance: float) -> bool:
    """``|analytic / simulated - 1| <= tolerance`` (the ratio bench_pd_agreement.py prints).  Measured against the
    simulated value; against the analytic one (``optfleet simulate``'s rel. error) the RAG pool's decode utilisation
    is 5.1 % off (0.187 vs 0.1965) and its P99 TPOT 9.8 %: at the edge of the targets either way."""
    return abs(analytic / simulated - 1.0) <= tolerance


@pytest.mark.unit
def test_a_small_pool_agrees_with_its_simulation():
    engine = AffineStep(base_ms=8.0, per_seq_ms=0.05, per_kv_token_ms=2e-4, per_prefill_token_ms=0.02, per_prefill_pair_ms=1e-7)
    prefill, link, decode = PrefillRole(2, engine, 2048), TransferLink(25.0, 160e3), DecodeRole(4, engine, 64)
    l_in, l_out, weight = np.array([1000, 3000]), np.array([200, 400]), np.array([0.5, 0.5])
    model = DisaggregatedPool.of_roles(l_in, l_out, weight, 6.0, prefill, link, decode, 4000, PoolTargets(500.0, 25.0, 0.85))
    metrics = model.metrics(2, 4)
    assert metrics.feasible
    simulated = simulate_pool(prefill, link, decode, rate_rps=6.0, l_in_tokens=l_in, l_out_tokens=l_out, weights=weight,
                              requests=20_000, reps=2, ttft_target_ms=500.0, tpot_target_ms=25.0).metrics
    for ours, theirs in LATENCIES:
        assert _agree(getattr(metrics, ours), simulated[theirs][0], 0.10), ours
    for ours, theirs in UTILISATIONS:
        assert _agree(getattr(metrics, ours), simulated[theirs][0], 0.05), ours
    assert simulated["attainment"][0] >= 0.99


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mixed_gpus", "rag_long_prompt"])  # the shipped instances whose optimum disaggregates a pool
def test_the_shipped_disaggregated_plans_agree_with_simulation(name):
    problem = prepare(load_instance(REPO / "instances" / "pd_fleet" / f"{name}.yaml"))
    plan = solve_pd(problem).plan
    evaluation = evaluate(problem, plan)
    assert evaluation.disaggregated_pools >= 1
    for pool, choice, scored in zip(problem.pools, plan.pools, evaluation.pools, strict=True):
        if not isinstance(choice, DisaggregatedPoolPlan):
            continue
        simulated = simulate_choice(problem, pool, choice, requests=40_000, reps=3, seed=0)
        for ours, theirs in LATENCIES:
            assert _agree(getattr(scored, ours), simulated[theirs][0], 0.10), (pool.label, ours)
        for role, figure in (("prefill", "prefill_busy_share"), ("link", "link_busy_share"), ("decode", "decode_occupancy_share")):
            assert _agree(scored.utilisation[role], simulated[figure][0], 0.05), (pool.label, role)
        assert simulated["attainment"][0] >= 0.99, pool.label
