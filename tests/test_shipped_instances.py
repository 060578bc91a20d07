"""Regression pins: every shipped fleet instance's answers, per method and preset.

The numbers were produced by this code (``optfleet solve``) and reviewed
against the hand checks and the evaluator; a change that moves any of them
must say why.  Costs are $2.21 per A100-80GB hour.
"""

from __future__ import annotations

import pytest

from optfleet.errors import InfeasibleError
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.heuristics import homogeneous, pool_routing, retrofit, sweep

from support import fleet_problem

pytestmark = pytest.mark.unit

# (instance, preset) -> homogeneous GPUs, sweep (B, gamma, GPUs per pool), pool routing (B, GPUs per pool)
PINS = {
    ("azure_2023", "paper"): (445, (24576, 1.0, [325, 0]), (24576, [325, 0])),
    ("azure_2023", "fleetsim_compatible"): (292, (4096, 2.0, [80, 33]), (8192, [123, 1])),
    ("lmsys_multiturn", "paper"): (187, (None, 1.0, [187]), None),
    ("lmsys_multiturn", "fleetsim_compatible"): (127, (6144, 1.9, [29, 28]), (8192, [31, 30])),
    ("agent_heavy", "fleetsim_compatible"): (2517, (16384, 2.0, [1222, 629]), (24576, [1371, 735])),
}


@pytest.mark.parametrize(("name", "preset"), list(PINS), ids=[f"{n}-{p}" for n, p in PINS])
def test_pinned_answers(name, preset):
    problem = fleet_problem(name, preset)
    n_homogeneous, (b, gamma, gpus), routed = PINS[(name, preset)]
    assert homogeneous(problem).pools[0].instances == n_homogeneous
    plan = sweep(problem).plan
    assert (plan.boundary_tokens, plan.gamma, [p.instances for p in plan.pools]) == (b, gamma, gpus)
    evaluation = evaluate(problem, plan)
    assert evaluation.meets_slo
    assert evaluation.cost_per_hour == pytest.approx(2.21 * sum(gpus))
    if routed is None:
        with pytest.raises(InfeasibleError):
            pool_routing(problem)
    else:
        plan = pool_routing(problem)
        assert (plan.boundary_tokens, [p.instances for p in plan.pools]) == routed


def test_lmsys_fleetsim_retrofit_keeps_the_long_pool():
    plan = retrofit(fleet_problem("lmsys_multiturn", "fleetsim_compatible"))
    assert (plan.boundary_tokens, plan.gamma, [p.instances for p in plan.pools]) == (8192, 1.5, [34, 30])


def test_agent_heavy_is_infeasible_under_the_paper_ttft_rule():
    problem = fleet_problem("agent_heavy")
    with pytest.raises(InfeasibleError, match=r"pool long \(window 65536 tokens\) needs P99 prefill 938.4 ms \+ one iteration 18.4 ms > SLO 500 ms"):
        homogeneous(problem)
    with pytest.raises(InfeasibleError, match="none of 166"):
        sweep(problem)


@pytest.mark.parametrize(("preset", "n_homogeneous", "expected"), [
    ("paper", 213, (32768, 1.0, [167, 0])),
    ("fleetsim_compatible", 277, (4096, 1.9, [77, 29])),
])
def test_raw_azure_trace_instance(preset, n_homogeneous, expected):
    problem = fleet_problem("azure_2023_trace", preset)
    assert homogeneous(problem).pools[0].instances == n_homogeneous
    plan = sweep(problem).plan
    assert (plan.boundary_tokens, plan.gamma, [p.instances for p in plan.pools]) == expected
