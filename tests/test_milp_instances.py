"""Regression pins of the MILP instances (paper preset, A100 at $2.21/h); K = 3 and budget runs are slow."""

from __future__ import annotations

import pytest

from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.heuristics import sweep

from support import fleet_problem

pytestmark = pytest.mark.solved


def _solve(name: str):
    problem = fleet_problem(name)
    return problem, solve_milp(problem, routing=problem.milp_routing, max_pools=problem.max_pools, time_limit_s=problem.time_limit_s)


def test_split_beats_threshold_on_azure():
    problem, split = _solve("azure_2023_split")
    assert split.report.proven_optimal and split.evaluation.meets_slo
    assert split.evaluation.cost_per_hour == pytest.approx(658.58)
    threshold = solve_milp(problem, routing="threshold")
    assert threshold.evaluation.cost_per_hour == pytest.approx(663.00)
    assert split.evaluation.cost_per_hour < threshold.evaluation.cost_per_hour


@pytest.mark.slow
def test_budget_instance_serves_the_largest_share_it_can_afford():
    problem, result = _solve("azure_2023_budget")
    assert result.report.proven_optimal
    assert result.evaluation.cost_per_hour <= 600 + 1e-9 and result.evaluation.meets_slo
    assert result.plan.served_share == pytest.approx(0.9101, abs=1e-3)


@pytest.mark.slow
def test_three_pools_on_azure():
    problem, result = _solve("azure_2023_k3")
    assert result.report.proven_optimal and result.evaluation.meets_slo
    assert result.evaluation.cost_per_hour == pytest.approx(640.90)
    assert len(result.plan.pools) == 3
    assert result.evaluation.cost_per_hour <= evaluate(problem, sweep(problem).plan).cost_per_hour
