"""The pd_fleet kind: the MILP against brute force, disaggregation chosen exactly when cheaper, the slow link, the
analytic pool model's monotonicity (hypothesis), bad inputs through the CLI and the shipped instances' costs."""

from __future__ import annotations

import copy
import itertools
import json
import math

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.cli import main
from optfleet.engine.step import AffineStep
from optfleet.errors import EXIT_BAD_INPUT, InfeasibleError
from optfleet.instance import load_instance
from optfleet.problems.pd_fleet.analytic import DisaggregatedPool, PoolTargets
from optfleet.problems.pd_fleet.evaluator import evaluate
from optfleet.problems.pd_fleet.exact import candidates, solve_pd
from optfleet.problems.pd_fleet.grid import splitwise_grid
from optfleet.problems.pd_fleet.plan import AggregatedPoolPlan, DisaggregatedPoolPlan, PdPlan, plan_from_dict
from optfleet.problems.pd_fleet.problem import prepare
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole, TransferLink
from optfleet.problems.pd_fleet.sizing import aggregated_states, disaggregated_pool

from support import REPO

INSTANCES = REPO / "instances" / "pd_fleet"
GPUS = ["L40S", "A100-80GB"]


def small(tpot_p99_ms: float = 40.0, rate_rps: float = 10.0, link_gb_per_s: float = 25.0, aggregated: bool = True,
          constraints: list | None = None, ttft_p99_ms: float = 1500.0) -> dict:
    """Llama-3-8B with two prompt lengths (1,000 and 3,000 tokens: one per pool) on L40S and A100-80GB, tp 1."""
    return {
        "kind": "pd_fleet", "name": "small",
        "workload": {"rate_rps": rate_rps, "lengths": {"cdf": [[999, 0], [1000, 0.6], [2999, 0.6], [3000, 1.0]]},
                     "split": {"rule": "fixed_output_fraction", "output_fraction": 0.1}},
        "model": "Llama-3-8B", "pools": {"windows_tokens": [2048, 4096]},
        "slo": {"ttft_p99_ms": ttft_p99_ms, "tpot_p99_ms": tpot_p99_ms},
        "aggregated": {"enabled": aggregated, "gpus": GPUS, "max_num_batched_tokens": [2048]},
        "prefill": {"gpus": GPUS, "token_budget": [2048]}, "decode": {"gpus": GPUS, "max_batch": [16]},
        "links": {"default_gb_per_s": link_gb_per_s}, "constraints": constraints or [],
    }


def problem_of(document: dict):
    return prepare(load_instance(document))


def pool_choices(problem, pool, grid: int) -> list[tuple[float, dict[str, int], object]]:
    """Every feasible choice of ``pool`` with counts up to ``grid`` (aggregated: up to 4 x grid), by brute force over
    the evaluator's own pool models: ``(cost, GPUs per type, choice)``."""
    found = []
    for option in problem.aggregated:
        for state in aggregated_states(problem, pool, option, range(1, 4 * grid + 1)) or []:
            if state.meets_slo:
                n = state.instances
                found.append((n * option.cost_per_instance_hour, {option.gpu: n * option.tp}, AggregatedPoolPlan(option.label, n)))
    for prefill, decode in itertools.product(problem.prefill, problem.decode):
        model = disaggregated_pool(problem, pool, prefill, decode)
        for x, y in itertools.product(range(1, grid + 1), repeat=2):
            if model.metrics(x, y).feasible:
                gpus = {prefill.gpu: x * prefill.tp}
                gpus[decode.gpu] = gpus.get(decode.gpu, 0) + y * decode.tp
                cost = x * prefill.cost_per_instance_hour + y * decode.cost_per_instance_hour
                found.append((cost, gpus, DisaggregatedPoolPlan(prefill.label, x, decode.label, y)))
    return found


@pytest.fixture(scope="module")
def brute_force_choices():
    """Every pool's feasible choices on the small instance at a 28 ms TPOT target (where pool 1 is cheapest
    disaggregated), counts up to 5 (aggregated up to 15)."""
    problem = problem_of(small(28.0))
    return problem, [pool_choices(problem, pool, grid=5) for pool in problem.pools]


CAPS = {"free": [], "power": [{"kind": "power", "max_power_w": 2600}],
        "availability": [{"kind": "availability", "gpu": "L40S", "max_gpus": 1}]}


def _within(problem, gpus: dict[str, int], constraints: list) -> bool:
    """The caps of ``constraints`` checked by hand on GPU counts (power from the catalog's TDPs)."""
    for c in constraints:
        if c["kind"] == "power" and sum(n * problem.gpus[g].power_w for g, n in gpus.items()) > c["max_power_w"]:
            return False
        if c["kind"] == "availability" and gpus.get(c["gpu"], 0) > c["max_gpus"]:
            return False
    return True


@pytest.mark.solved
@pytest.mark.parametrize("caps", list(CAPS))
def test_the_milp_equals_brute_force_over_small_xpyd_grids(caps, brute_force_choices):
    """The cheapest combination of per-pool choices within the caps costs what the MILP proves optimal (the grid holds
    every pool's frontier here, so it holds the optimum), and the evaluator passes it."""
    problem = brute_force_choices[0].with_constraints(prepare(load_instance(small(28.0, constraints=CAPS[caps]))).constraints)
    best, best_plan = math.inf, None
    for combo in itertools.product(*brute_force_choices[1]):
        gpus: dict[str, int] = {}
        for _, counts, _ in combo:
            for g, n in counts.items():
                gpus[g] = gpus.get(g, 0) + n
        cost = sum(c for c, _, _ in combo)
        if cost < best - 1e-9 and _within(problem, gpus, CAPS[caps]):
            best, best_plan = cost, PdPlan("brute", tuple(choice for _, _, choice in combo))
    assert evaluate(problem, best_plan).feasible
    result = solve_pd(problem)
    assert result.report.proven_optimal
    assert result.evaluation.cost_per_hour == pytest.approx(best, rel=1e-9)
    assert result.report.bound == pytest.approx(best, rel=1e-6)


@pytest.mark.solved
@pytest.mark.parametrize("tpot_p99_ms, modes", [(28.0, {"disaggregated", "aggregated"}), (60.0, {"aggregated"})])
def test_disaggregation_is_chosen_exactly_when_it_is_cheaper(tpot_p99_ms, modes):
    """Per pool (no constraint couples them), the MILP takes a disaggregated pair iff the cheapest pair (by brute force
    over every pair's frontier) costs less than the cheapest aggregated option (the fleet's sizing); a tight TPOT target
    makes it so in pool 1 only (its 3,000-token prompts), a loose one nowhere."""
    problem = problem_of(small(tpot_p99_ms))
    aggs, pairs = candidates(problem)
    result = solve_pd(problem)
    for pool in result.evaluation.pools:
        aggregated = min((problem.aggregated[a.option].cost_per_instance_hour * a.min_instances for a in aggs if a.pool == pool.index),
                         default=math.inf)
        disaggregated = min((problem.prefill[p.prefill].cost_per_instance_hour * x + problem.decode[p.decode].cost_per_instance_hour * y
                             for p in pairs if p.pool == pool.index for x, y in p.frontier), default=math.inf)
        assert (pool.mode == "disaggregated") == (disaggregated < aggregated - 1e-9)
        assert pool.cost_per_hour == pytest.approx(min(aggregated, disaggregated))
    assert {pool.mode for pool in result.evaluation.pools} == modes


@pytest.mark.solved
def test_an_infeasible_constraint_is_named(brute_force_choices):
    capped = prepare(load_instance(small(28.0, constraints=[{"kind": "power", "max_power_w": 500}])))
    with pytest.raises(InfeasibleError, match=r"constraints\[0\] \(power"):
        solve_pd(brute_force_choices[0].with_constraints(capped.constraints))
    with pytest.raises(InfeasibleError, match="pool 0 .* no option .* TPOT"):
        solve_pd(problem_of(small(tpot_p99_ms=5.0)))


@pytest.mark.solved
def test_the_splitwise_grid_is_never_cheaper_than_the_milp_and_the_plan_reads_back():
    problem = problem_of(small(aggregated=False))
    grid = evaluate(problem, splitwise_grid(problem))
    exact = solve_pd(problem)
    assert grid.feasible and grid.cost_per_hour >= exact.evaluation.cost_per_hour - 1e-9
    again = plan_from_dict(problem, json.loads(json.dumps(exact.plan.to_dict())))
    assert evaluate(problem, again).cost_per_hour == exact.evaluation.cost_per_hour


# ------------------------------------------------------------------ the analytic pool model (hypothesis)

steps = st.builds(lambda base, seq, kv, tok: AffineStep(base, seq, kv, tok, 0.0),
                  st.floats(5.0, 40.0), st.floats(0.0, 0.5), st.floats(0.0, 1e-4), st.floats(0.005, 0.1))
mixes = st.lists(st.tuples(st.integers(16, 8000), st.integers(1, 600), st.floats(0.1, 1.0)), min_size=1, max_size=5)


def _pool(mix, rate, prefill, decode, gb_per_s=10.0, targets=PoolTargets(4000.0, 80.0, 0.85)):
    l_in, l_out, w = (np.array(v) for v in zip(*mix, strict=True))
    return DisaggregatedPool(l_in, l_out, w, rate, prefill, 2048, TransferLink(gb_per_s, 131072.0), decode, 256, 8192 + 600, targets)


@pytest.mark.unit
@settings(max_examples=25, deadline=None)
@given(mixes, st.floats(0.5, 20.0), steps, steps, st.integers(1, 30), st.integers(1, 30))
def test_ttft_falls_with_prefill_instances_and_tpot_with_decode_instances(mix, rate, prefill, decode, x, y):
    pool = _pool(mix, rate, prefill, decode)
    here, more_x, more_y = pool.metrics(x, y), pool.metrics(x + 1, y), pool.metrics(x, y + 1)
    assert more_x.ttft_p99_ms <= here.ttft_p99_ms * (1 + 1e-9) or math.isinf(here.ttft_p99_ms)
    assert more_y.ttft_p99_ms <= here.ttft_p99_ms * (1 + 1e-9) or math.isinf(here.ttft_p99_ms)
    assert more_y.tpot_p99_ms <= here.tpot_p99_ms * (1 + 1e-9) or math.isinf(here.tpot_p99_ms)
    assert here.tpot_p99_ms >= here.tpot_mean_ms * (1 - 1e-9) or math.isinf(here.tpot_p99_ms)


@pytest.mark.unit
@settings(max_examples=15, deadline=None)
@given(mixes, st.floats(0.5, 30.0), steps, steps, st.floats(1000.0, 6000.0), st.floats(40.0, 120.0))
def test_the_frontier_is_monotone_and_exactly_the_least_feasible_counts(mix, rate, prefill, decode, ttft, tpot):
    pool = _pool(mix, rate, prefill, decode, targets=PoolTargets(ttft, tpot, 0.85))
    frontier = pool.frontier()
    for (x0, y0), (x1, y1) in zip(frontier, frontier[1:]):
        assert y1 > y0 and x1 < x0
    for x, y in frontier:
        assert pool.metrics(x, y).feasible
        assert x == 1 or not pool.metrics(x - 1, y).feasible
        assert y == 1 or not pool.metrics(x, y - 1).feasible
    for x, y in itertools.product(range(1, 7), repeat=2):  # every feasible count is at or above a frontier point
        assert not pool.metrics(x, y).feasible or any(xk <= x and yk <= y for xk, yk in frontier)


@pytest.mark.unit
def test_a_frontier_of_several_points_is_every_least_count_of_a_grid():
    """A decode step of 5 ms per sequence makes the first decode step (at the mean batch) a large part of a 500 ms TTFT,
    so more decode instances let fewer prefill instances meet it: the frontier has several points, and by brute force
    over 1..20 x 1..20 every feasible count is at or above one and every point is a least count."""
    pool = DisaggregatedPool(np.array([2000, 4000]), np.array([500, 300]), np.array([0.5, 0.5]), 5.0, AffineStep(10.0, 0.0, 0.0, 0.05, 0.0),
                             2048, TransferLink(50.0, 131072.0), AffineStep(20.0, 5.0, 0.0, 0.0, 0.0), 256, 8600,
                             PoolTargets(500.0, 1000.0, 0.85))
    frontier = pool.frontier()
    assert len(frontier) >= 3
    feasible = {(x, y) for x, y in itertools.product(range(1, 21), repeat=2) if pool.metrics(x, y).feasible}
    least = {(x, y) for x, y in feasible if (x - 1, y) not in feasible and (x, y - 1) not in feasible}
    assert least == set(frontier)
    assert all(any(xk <= x and yk <= y for xk, yk in frontier) for x, y in feasible)


@pytest.mark.unit
def test_the_model_of_the_roles_is_the_model_of_their_parts():
    """``DisaggregatedPool.of_roles`` (the simulator's entry: roles.py's dataclasses) is the same model."""
    prefill, decode = AffineStep(8.0, 0.05, 2e-5, 0.03, 0.0), AffineStep(12.0, 0.2, 3e-5, 0.0, 0.0)
    link = TransferLink(10.0, 131072.0)
    l_in, l_out, w = np.array([1000, 3000]), np.array([100, 300]), np.array([0.6, 0.4])
    targets = PoolTargets(2000.0, 60.0, 0.85)
    parts = DisaggregatedPool(l_in, l_out, w, 5.0, prefill, 2048, link, decode, 64, 4096, targets)
    roles = DisaggregatedPool.of_roles(l_in, l_out, w, 5.0, PrefillRole(3, prefill, 2048), link, DecodeRole(2, decode, 64), 4096, targets)
    assert roles.metrics(3, 2) == parts.metrics(3, 2) and roles.frontier() == parts.frontier()


# ------------------------------------------------------------------ bad input through the CLI


BAD = [
    ("prefill.tp", [3], "prefill.tp[0]"),  # 3 does not divide Llama-3-8B's 8 KV heads
    ("decode.max_batch", [100000], "decode.max_batch[0]"),
    ("links.default_gb_per_s", 0, "links.default_gb_per_s"),
    ("prefill.gpus", [], "prefill.gpus"),
    ("decode.gpus", [], "decode.gpus"),
    ("pools.windows_tokens", [2048], "pools.windows_tokens"),
    ("decode.max_batch_by_gpu", {"H100-SXM": [8]}, "decode.max_batch_by_gpu.H100-SXM"),  # not a decode GPU here
    ("decode.max_batch_by_gpu", {"L40S": [8], "l40s": [16]}, "decode.max_batch_by_gpu.l40s"),  # one GPU twice
    ("decode.max_batch_by_gpu", {"L40S": [100000]}, "decode.max_batch_by_gpu.L40S[0]"),
]


def test_a_gpu_s_own_max_batches_replace_the_shared_list_for_it_only():
    document = copy.deepcopy(small())
    document["decode"]["max_batch_by_gpu"] = {"a100 80gb": [8, 32]}  # catalog names match as the gpus list's do
    batches = {}
    for option in problem_of(document).decode:
        batches.setdefault(option.gpu, set()).add(option.max_batch)
    assert batches == {"L40S": {16}, "A100-80GB": {8, 32}}


@pytest.mark.unit
@pytest.mark.parametrize("field, value, named", BAD, ids=[f"{b[0]}={b[1]}" for b in BAD])
def test_bad_inputs_exit_2_naming_the_field(field, value, named, tmp_path, capsys):
    document = copy.deepcopy(small())
    head, tail = field.split(".")
    document[head][tail] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(document))
    out = tmp_path / "out"
    assert main(["solve", str(path), "--out", str(out)]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


# ------------------------------------------------------------------ shipped instances (regression)

# The costs the MILP computes on the shipped instances (roofline engine, catalog prices; each file's header explains
# its answer): a change to the analytic model, the fleet's batching sizing or the catalog moves them.
SHIPPED = {
    "chat": (5.38, {"aggregated"}),
    "llama70b_h100": (64.56, {"aggregated"}),
    "rag_long_prompt": (208.08, {"aggregated", "disaggregated"}),
    "mixed_gpus": (113.76, {"disaggregated"}),
}


def _shipped_cases():
    for name, expected in SHIPPED.items():
        marks = () if name in ("chat", "llama70b_h100") else (pytest.mark.slow,)
        yield pytest.param(name, *expected, marks=marks, id=name)


@pytest.mark.solved
@pytest.mark.parametrize("name, cost_per_hour, modes", list(_shipped_cases()))
def test_shipped_instances_solve_to_their_pinned_cost(name, cost_per_hour, modes):
    problem = prepare(load_instance(INSTANCES / f"{name}.yaml"))
    result = solve_pd(problem)
    assert result.report.proven_optimal and result.evaluation.feasible
    assert result.evaluation.cost_per_hour == pytest.approx(cost_per_hour, abs=0.005)
    assert {p.mode for p in result.evaluation.pools} == modes


@pytest.mark.parametrize(("change", "says"), [
    ({"slo": {"ttft_p99_ms": 1e-9, "tpot_p99_ms": 40}}, "no option that meets the SLO"),  # ended in a math domain error
    ({"links": {"default_gb_per_s": 1e-300}}, "greater than or equal to 0.001"),  # overflowed the transfer moments
])
def test_extreme_targets_and_links_are_explained_not_crashes(change, says, tmp_path, capsys):
    """An unreachable TTFT target is infeasible (exit 1, the pool and its options named); a link of 1e-300 GB/s is
    refused (exit 2): both ended in an internal error or an overflow warning."""
    doc = {**yaml.safe_load((INSTANCES / "chat.yaml").read_text()), **change}
    path = tmp_path / "instance.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    code = main(["solve", str(path), "--quiet"])
    captured = capsys.readouterr()
    assert code in (1, 2) and says in captured.out + captured.err and "internal error" not in captured.err
