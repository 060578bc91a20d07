"""The fleet MILP's moment-ratio levels (models/fleet_moments.py, optfleet/problems/fleet/milp_moments.py).

The validity of both ends rests on one fact, checked here over the tables' range: at a fixed instance count and floor
level, the Erlang table's largest load ``a_max`` never rises with ``R = E[S^2]/E[S]`` (Kimura's W99 is linear in R at
fixed servers and load).  On a three-pool instance whose pools sit below their table sizes, split routing with K = 3
is then proven optimal, at the cost of the cheapest plan found by brute force over a grid of routings (every routing
scored by the evaluator at its least instance counts), and the bound is below every plan the evaluator accepts.
"""

from __future__ import annotations

import numpy as np
import pyomo.environ as pyo
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet.problems.fleet.milp as milp_driver
from optfleet.instance import load_instance
from optfleet.models.fleet_moments import RatioLevels
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.milp_data import PoolOption
from optfleet.problems.fleet.milp_moments import PoolState, critical_ratio_ms, initial_grid, refine
from optfleet.problems.fleet.plan import Plan, PoolPlan, RouteRule
from optfleet.problems.fleet.problem import prepare
from optfleet.queueing import erlang_tables
from optfleet.queueing.kimura import wait_quantile_s

pytestmark = pytest.mark.solved

NAMES, WINDOWS = ("w1000", "w2000", "long"), (1000, 2000, 4000)
CLASSES = ((0, 1000), (1000, 2000), (2000, 4000))  # L_total = 1000, 2000, 4000 tokens: 50 %, 30 %, 20 % of requests


def _three_pools(tmp_path, rate_rps: float, slo_ms: float, rule: str = "paper"):
    """Three request sizes and three windows (8, 4 and 2 slots per GPU), a flat 1 ms iteration, no compression: at these
    rates every pool has a few GPUs, below its table size, so the Erlang tables and their moments decide the plan."""
    doc = {
        "kind": "fleet", "preset": "paper", "name": "three-pools",
        "workload": {"rate_rps": rate_rps, "lengths": {"cdf": [[999, 0.0], [1000, 0.5], [1999, 0.5], [2000, 0.8], [3999, 0.8], [4000, 1.0]]},
                     "split": {"rule": "fixed_output_fraction", "output_fraction": 0.25}},
        "hardware": {"gpu": "A100-80GB", "model": "Llama-3-8B", "iteration": {"w_ms": 1.0, "h_ms_per_slot": 0.0, "chunk_tokens": 1000},
                     "slots": {"table": {1000: 8, 2000: 4, 4000: 2}}},
        "pools": {"long_window_tokens": 4000, "short_window_candidates": [1000, 2000]},
        "compression": {"enabled": False},
        "cost": {"cost_per_gpu_hour": 1.0},
        "slo": {"ttft_p99_ms": slo_ms, "rho_max": 0.9, "ttft_rule": rule},
        "solve": {"routing": "split", "max_pools": 3},
    }
    path = tmp_path / "three_pools.yaml"
    path.write_text(yaml.safe_dump(doc))
    return prepare(load_instance(path))


def _accepted_costs(problem, steps: int) -> list[float]:
    """The cost of every routing on a grid of ``1/steps`` shares (class 1 over all three pools, class 2 over the two that
    hold it, class 3 to the long pool) that the evaluator accepts at its least instance counts."""
    grid = np.arange(steps + 1) / steps
    costs = []
    for a in grid:
        for b in grid[grid <= 1 - a + 1e-12]:
            for c in grid:
                shares = ((a, b, 1 - a - b), (0.0, c, 1 - c), (0.0, 0.0, 1.0))
                rules = tuple(RouteRule(low, high, tuple((name, float(v)) for name, v in zip(NAMES, row, strict=True) if v > 0))
                              for (low, high), row in zip(CLASSES, shares, strict=True))
                used = [i for i in range(3) if any(row[i] > 0 for row in shares)]
                plan = Plan(tuple(PoolPlan(NAMES[i], WINDOWS[i], 1) for i in used), rules=rules)
                least = [pool.min_instances for pool in evaluate(problem, plan).pools]
                if min(least) < 0:
                    continue
                sized = evaluate(problem, plan.with_instances(least))
                if sized.meets_slo:
                    costs.append(sized.cost_per_hour)
    return costs


def _check_against_brute_force(problem, steps: int) -> tuple[float, float]:
    """The MILP's proven cost and the brute force's least cost on ``steps``."""
    result = milp_driver.solve_milp(problem)
    costs = _accepted_costs(problem, steps)
    assert result.evaluation.meets_slo and result.report.status == "optimal"
    assert result.report.bound <= min(costs) + 1e-9  # the bound is below every plan the evaluator accepts
    assert result.evaluation.cost_per_hour <= min(costs) + 1e-9  # exact over all routings, not only the grid's
    return result.evaluation.cost_per_hour, min(costs)


def test_three_pools_split_k3_is_proven_at_the_brute_force_optimum(tmp_path):
    cost, brute = _check_against_brute_force(_three_pools(tmp_path, 20.0, 300.0), steps=4)
    assert cost == brute == 6.0  # 2 GPUs at 2,000 tokens, 4 at 4,000


def test_with_a_python_hook_the_restrictions_plans_close_the_gap(tmp_path):
    # A hook may need more instances than the evaluator's least, so the candidate plans come from the restriction.
    problem = _three_pools(tmp_path, 20.0, 300.0)
    result = milp_driver.solve_milp(problem, customize=lambda m: setattr(m, "cap", pyo.Constraint(expr=m.cost <= 100)))
    assert result.evaluation.meets_slo and result.report.status == "optimal" and result.evaluation.cost_per_hour == 6.0


@pytest.mark.slow
@pytest.mark.parametrize("rate_rps, slo_ms, rule, steps", [(20.0, 150.0, "paper", 8), (40.0, 150.0, "paper", 8), (20.0, 300.0, "paper", 8), (60.0, 200.0, "paper", 8),
                                                          (20.0, 60.0, "fleetsim", 8)])
def test_three_pools_against_a_finer_brute_force(tmp_path, rate_rps, slo_ms, rule, steps, monkeypatch):
    problem = _three_pools(tmp_path, rate_rps, slo_ms, rule)
    cost, brute = _check_against_brute_force(problem, steps)
    assert cost == brute
    monkeypatch.setattr(milp_driver, "MOMENT_ROUNDS", 0)  # the bound at each pool's least class ratio alone leaves a gap
    assert milp_driver.solve_milp(problem).report.status == "unproven"


@settings(max_examples=60, deadline=None)
@given(slots=st.integers(1, 64), rho_max=st.floats(0.5, 0.95), slo_ms=st.floats(50.0, 5000.0), floor_share=st.floats(0.0, 0.9),
       low_ms=st.floats(1.0, 1e6), factor=st.floats(1.0, 100.0))
def test_erlang_tables_never_grow_with_the_moment_ratio(slots, rho_max, slo_ms, floor_share, low_ms, factor):
    # What makes a ratio level's table conservative at its top and a relaxation at its bottom.
    option = PoolOption("p", 1000, slots, 1.0, (0.0, floor_share * slo_ms), 12, "g", "g", 1)
    low, high = erlang_tables([option, option], np.array([low_ms, low_ms * factor]), slo_ms, rho_max)
    assert np.all(high <= low)


@settings(max_examples=60, deadline=None)
@given(servers=st.integers(1, 400), utilisation=st.floats(0.05, 0.99), ratio_ms=st.floats(1.0, 1e6))
def test_kimura_wait_is_linear_in_the_moment_ratio(servers, utilisation, ratio_ms):
    load = utilisation * servers
    per_second = float(wait_quantile_s(servers, load, 1.0, 0.0))
    assert float(wait_quantile_s(servers, load, ratio_ms / 1000.0, 0.0)) == pytest.approx(per_second * ratio_ms / 1000.0, rel=1e-9, abs=1e-15)


def test_a_refined_grid_cuts_off_the_relaxations_plan(tmp_path):
    problem = _three_pools(tmp_path, 20.0, 150.0)
    data = milp_driver.prepare_milp_data(problem)
    long = len(data.pools) - 1
    grid = initial_grid(data, {})
    assert grid[long][0] == data.least_ratio_ms[long] and grid[long][-1] == data.greatest_ratio_ms[long]
    option = data.pools[long]
    # A pool of 3 GPUs at the least ratio's full table, holding traffic at a ratio well above it: the relaxation's plan.
    load = float(erlang_tables([option], data.least_ratio_ms[[long]], problem.ttft_p99_ms, problem.rho_max)[0][3, 0])
    state = PoolState(long, 3, load, 0.9 * float(data.greatest_ratio_ms[long]))
    critical = critical_ratio_ms(data, state)
    assert grid[long][0] < critical < state.ratio_ms
    refined, added = refine(data, grid, [state])
    assert added == 2
    bottoms = RatioLevels(refined, "bottom").table_ratios_ms(long)
    interval = int(np.searchsorted(refined[long], state.ratio_ms) - 1)
    table = erlang_tables([option], bottoms[[interval]], problem.ttft_p99_ms, problem.rho_max)[0]
    assert table[3, 0] < load  # its interval's table no longer admits its load at 3 GPUs


def test_ratio_levels_need_increasing_edges():
    with pytest.raises(ValueError, match="increasing"):
        RatioLevels((np.array([2.0, 1.0]),), "top")
    with pytest.raises(ValueError, match="end"):
        RatioLevels((None,), "middle")
