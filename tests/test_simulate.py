"""The simulator: exact M/M/c and M/D/c references, agreement with the evaluator, batching mode, CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy import stats

from optfleet.cli import main
from optfleet.errors import InputError
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.heuristics import sweep
from optfleet.queueing import erlang_c
from optfleet.problems.fleet.simulate import simulate_plan
from optfleet.problems.fleet.simulate.batching import simulate_batching
from optfleet.problems.fleet.simulate.slots import fcfs_starts, queue_lengths

from support import FLEET_INSTANCES, fleet_problem

pytestmark = pytest.mark.unit


def _poisson_arrivals(rate: float, count: int, rng: np.random.Generator) -> np.ndarray:
    return np.cumsum(rng.exponential(1.0 / rate, size=count))


def test_mmc_matches_erlang_c_and_the_exact_wait_tail():
    rng = np.random.default_rng(7)
    c, rate, mean_service = 5, 4.0, 1.0  # a = 4, rho = 0.8
    arrival = _poisson_arrivals(rate, 400_000, rng)
    wait = (fcfs_starts(arrival, rng.exponential(mean_service, size=len(arrival)), c) - arrival)[40_000:]
    prob_wait = float(erlang_c(c, rate * mean_service))
    drain = c / mean_service - rate
    assert np.mean(wait > 0) == pytest.approx(prob_wait, abs=0.01)
    assert wait.mean() == pytest.approx(prob_wait / drain, rel=0.05)
    # M/M/c: P[W > t] = C exp(-(c mu - lambda) t), so the P99 is ln(C / 0.01) / (c mu - lambda).
    assert np.percentile(wait, 99) == pytest.approx(math.log(prob_wait / 0.01) / drain, rel=0.05)


def _mdc_exact(c: int, a: float, states: int = 400) -> tuple[float, float]:
    """P[wait] and E[number waiting] of M/D/c: N(t) = max(N(t - D) - c, 0) + Poisson(a) (Crommelin)."""
    arrivals = stats.poisson.pmf(np.arange(states), a)
    transition = np.zeros((states, states))
    for n in range(states):
        base = max(n - c, 0)
        transition[n, base:] = arrivals[: states - base]
    pi = np.full(states, 1.0 / states)
    for _ in range(5000):
        pi = pi @ transition
        pi /= pi.sum()
    n = np.arange(states)
    return float(pi[c:].sum()), float(np.dot(pi, np.maximum(n - c, 0)))


def test_mdc_matches_the_exact_embedded_chain():
    rng = np.random.default_rng(11)
    c, service, rate = 3, 1.0, 2.4  # a = 2.4, rho = 0.8
    arrival = _poisson_arrivals(rate, 400_000, rng)
    wait = (fcfs_starts(arrival, np.full(len(arrival), service), c) - arrival)[40_000:]
    prob_wait, mean_queue = _mdc_exact(c, rate * service)
    assert np.mean(wait > 0) == pytest.approx(prob_wait, abs=0.01)
    assert wait.mean() == pytest.approx(mean_queue / rate, rel=0.05)  # Little's law


def test_queue_lengths_count_the_requests_not_yet_started():
    arrival = np.array([0.0, 0.1, 0.2, 0.3])
    start = fcfs_starts(arrival, np.array([1.0, 1.0, 1.0, 1.0]), servers=1)
    assert start.tolist() == [0.0, 1.0, 2.0, 3.0]
    assert queue_lengths(arrival, start).tolist() == [0, 0, 1, 2]


def test_a_stationary_start_leaves_the_idle_slots_to_the_arrivals():
    """Three of ten slots busy at time 0 and four arrivals: every arrival starts at once (the queue once kept only
    max(arrivals, busy) slots, so these four waited for the busy ones); with three slots in all, they queue."""
    arrival = np.array([0.0, 0.1, 0.2, 0.3])
    busy = np.array([5.0, 6.0, 7.0])
    assert fcfs_starts(arrival, np.ones(4), servers=10, busy_until_s=busy).tolist() == arrival.tolist()
    assert fcfs_starts(arrival, np.ones(4), servers=3, busy_until_s=busy).tolist() == [5.0, 6.0, 6.0, 7.0]


@pytest.mark.parametrize(("name", "preset"), [("azure_2023", "paper"), ("azure_2023", "fleetsim_compatible"), ("lmsys_multiturn", "paper")])
def test_utilisation_within_3_percent_of_the_evaluator(name, preset):
    problem = fleet_problem(name, preset)
    plan = sweep(problem).plan
    analytic = evaluate(problem, plan)
    result = simulate_plan(problem, plan, requests=150_000, reps=2, seed=3)
    for pool in analytic.pools:
        if pool.share < 0.1:
            continue  # a pool with little traffic needs longer runs (the slow test)
        simulated = result.metrics[pool.name]["utilisation"][0]
        assert simulated == pytest.approx(pool.utilisation, rel=0.03), pool.name
    fleet = sum(p.load_erlangs for p in analytic.pools) / sum(p.servers for p in analytic.pools)
    assert result.metrics["fleet"]["utilisation"][0] == pytest.approx(fleet, rel=0.03)


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["paper", "fleetsim_compatible"])
@pytest.mark.parametrize("name", ["azure_2023", "lmsys_multiturn", "agent_heavy"])
def test_every_pool_within_3_percent_at_full_size(name, preset):
    problem = fleet_problem(name, preset)
    try:
        plan = sweep(problem).plan
    except Exception:
        pytest.skip("no feasible plan under this preset")
    result = simulate_plan(problem, plan, requests=1_000_000, reps=3, seed=5)
    for pool in evaluate(problem, plan).pools:
        if pool.instances:
            assert result.metrics[pool.name]["utilisation"][0] == pytest.approx(pool.utilisation, rel=0.03), pool.name


def test_slot_ttft_equals_the_evaluator_floor_when_nothing_waits():
    problem = fleet_problem("azure_2023")
    plan = sweep(problem).plan
    result = simulate_plan(problem, plan, requests=60_000, reps=1, seed=1)
    pool = evaluate(problem, plan).pools[0]
    assert result.metrics[pool.name]["wait_p99_ms"][0] == 0.0
    assert result.metrics[pool.name]["ttft_p99_ms"][0] == pytest.approx(pool.ttft_p99_ms)


def test_same_seed_same_numbers():
    problem = fleet_problem("toy")
    plan = sweep(problem).plan
    first = simulate_plan(problem, plan, requests=20_000, reps=2, seed=9)
    again = simulate_plan(problem, plan, requests=20_000, reps=2, seed=9)
    assert first.metrics == again.metrics


def test_batching_with_constant_iterations_matches_slots():
    # H = 0: every iteration lasts W whatever the batch, so both modes hold a slot for the same time.
    problem = fleet_problem("toy")
    plan = sweep(problem).plan
    slots = simulate_plan(problem, plan, requests=40_000, reps=1, seed=2, mode="slots")
    batching = simulate_plan(problem, plan, requests=40_000, reps=1, seed=2, mode="batching")
    for name in ("short", "long"):
        assert batching.metrics[name]["utilisation"][0] == pytest.approx(slots.metrics[name]["utilisation"][0], rel=0.03)


def test_batching_admits_a_request_into_the_iteration_that_starts_as_it_is_admitted():
    """Toy 2,000-token pool: 4 slots a GPU, W = 1 ms, H = 0, a 1,000-token prefill budget.  Four requests of 750
    prompt tokens at t = 0 share the budget in admission order (750 + 250, 500 + 500, 250 + 750): prefilled at the
    ends of iterations 1, 2, 3, 3, first tokens at 2, 3, 4, 4 ms.  The fifth takes the slot freed at 251 ms and
    joins the iteration starting then: first token 253 ms (it once joined one iteration later: 254)."""
    config = fleet_problem("toy").pool(2000)
    assert (config.slots_per_instance, config.w_ms, config.h_ms_per_slot, config.chunk_tokens) == (4, 1.0, 0.0, 1000)
    times = simulate_batching(config, 1, np.zeros(5), np.full(5, 750), np.full(5, 250))
    assert (1000 * times.start_s).tolist() == pytest.approx([0, 0, 0, 0, 251])
    assert (1000 * times.first_token_s).tolist() == pytest.approx([2, 3, 4, 4, 253])
    assert (1000 * times.finish_s).tolist() == pytest.approx([251, 252, 253, 253, 502])


def test_batching_times_are_consistent():
    problem = fleet_problem("azure_2023", "fleetsim_compatible")
    config = problem.pool(4096)
    rng = np.random.default_rng(4)
    count = 3000
    arrival = _poisson_arrivals(40.0, count, rng)
    l_in = rng.integers(0, 3000, size=count)
    l_out = rng.integers(1, 800, size=count)
    times = simulate_batching(config, 2, arrival, l_in, l_out)
    assert np.all(times.start_s >= arrival)
    assert np.all(times.first_token_s > times.start_s)
    assert np.all(times.finish_s >= times.first_token_s)
    # One chunk of prefill per iteration: a request needs at least ceil(L_in/chunk) + 1 iterations to its first token.
    fastest_iteration = config.w_ms / 1000.0
    assert np.all(times.first_token_s - times.start_s >= (np.ceil(l_in / config.chunk_tokens) + 1) * fastest_iteration - 1e-9)


def test_bad_arguments_name_the_field():
    problem = fleet_problem("toy")
    plan = sweep(problem).plan
    with pytest.raises(InputError, match="reps"):
        simulate_plan(problem, plan, reps=0)
    with pytest.raises(InputError, match="mode"):
        simulate_plan(problem, plan, mode="fluid")
    with pytest.raises(InputError, match="requests"):
        simulate_plan(problem, plan, requests=0)
    with pytest.raises(InputError, match="at least two requests"):
        simulate_plan(problem, plan, requests=1)  # its measured window would be empty (utilisation 0/0)
    empty = Plan((PoolPlan("short", 2000, 0), PoolPlan("long", 4000, 5)))
    with pytest.raises(InputError, match=r"plan.pools\[0\].instances"):
        simulate_plan(problem, empty, requests=1000)
    with pytest.raises(InputError, match="too few to reach steady state"):
        simulate_plan(problem, plan, requests=50, mode="batching")


def test_cli_simulates_a_solved_plan(tmp_path, capsys):
    toy = str(FLEET_INSTANCES / "toy.yaml")
    assert main(["solve", toy, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["simulate", toy, "--plan", str(tmp_path / "plan.json"), "--requests", "20000", "--reps", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["plan"]["pools"][0]["instances"] == 10
    assert {row["metric"] for row in data["comparison"]} == {"utilisation", "wait_p99_ms", "ttft_p99_ms"}
    assert main(["simulate", toy, "--method", "homogeneous", "--requests", "20000", "--reps", "1"]) == 0
    assert "analytic (evaluator) vs simulated" in capsys.readouterr().out
    assert main(["simulate", toy, "--reps", "0"]) == 2


def test_simulate_defaults_to_the_instances_service_model(capsys):
    """Found by a review: a batching instance was simulated with slot servers unless --mode said otherwise."""
    toy = str(FLEET_INSTANCES / "toy.yaml")
    assert main(["simulate", toy, "--set", "slo.service_model=batching", "--requests", "5000", "--reps", "1", "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["mode"] == "batching"
    assert main(["simulate", toy, "--requests", "5000", "--reps", "1", "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["mode"] == "slots" and data["comparison_note"] is None
    # another mode than the instance's model: said, in the table's text and in JSON
    assert main(["simulate", toy, "--mode", "batching", "--requests", "5000", "--reps", "1", "--json", "--quiet"]) == 0
    assert "compares two different models" in json.loads(capsys.readouterr().out)["comparison_note"]
    assert main(["simulate", toy, "--mode", "batching", "--requests", "5000", "--reps", "1", "--quiet"]) == 0
    assert "the evaluator scores the slots service model" in capsys.readouterr().out


def test_a_pool_measured_on_few_requests_is_pointed_out(capsys):
    # 3,000 toy requests: every row says how many requests its pool measured; a pool under 1,000 gets a note
    toy = str(FLEET_INSTANCES / "toy.yaml")
    assert main(["simulate", toy, "--requests", "3000", "--reps", "1", "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    measured = {row["pool"]: row["requests"] for row in data["comparison"]}
    assert measured and all(n == round(data["metrics"][pool]["requests"]["mean"]) for pool, n in measured.items())
    assert main(["simulate", toy, "--requests", "3000", "--reps", "1", "--quiet"]) == 0
    out = capsys.readouterr().out
    thin = [pool for pool, n in measured.items() if n < 1000]
    assert thin and all(f"note: pool {pool} measured" in out for pool in thin)


def test_a_pool_whose_requests_all_fall_in_the_warm_up_has_no_latency_figure(capsys):
    """11 requests, seed 15: the long pool's only request is the first, which the warm-up discards (it raised an
    IndexError, exit 3): its percentiles are null in JSON and "-" in the table."""
    assert main(["simulate", str(FLEET_INSTANCES / "toy.yaml"), "--requests", "11", "--reps", "1", "--seed", "15", "--json"]) == 0
    long = json.loads(capsys.readouterr().out)["metrics"]["long"]
    assert long["requests"]["mean"] == 0 and long["ttft_p99_ms"]["mean"] is None and long["slo_attainment"]["mean"] is None
    assert main(["simulate", str(FLEET_INSTANCES / "toy.yaml"), "--requests", "11", "--reps", "1", "--seed", "15"]) == 0
    long_row = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("long "))
    assert long_row.split()[2:6] == ["-", "-", "-", "-"] and long_row.split()[-1] == "0"
