"""The continuous-batching service model under the engine model (optfleet/queueing/batching_engine.py, lindley.py):
operating point and TPOT by hand, the prefill queue against Pollaczek-Khinchine and a Lindley simulation, the TTFT
law's quantile against Monte Carlo, and the model against the batching simulator on a small pool."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.errors import InfeasibleError, InputError, NotApplicableError
from optfleet.instance import load_instance
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.assumptions import assumption_lines
from optfleet.problems.fleet.batching_pool import batching_workload, min_gpus_batching, state_at
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.problem import prepare
from optfleet.problems.fleet.simulate.batching import simulate_batching
from optfleet.queueing.batching_engine import met_share
from optfleet.queueing.lindley import renewal_wait_pmf

pytestmark = pytest.mark.unit

# L_in = 1000, L_out = 100, chunk 500, 64 slots; engine t = 10 + 1 b + 0.01 p (ms)
ONE_SIZE = {
    "kind": "fleet", "name": "one-size-batching",
    "workload": {"rate_rps": 2, "lengths": {"cdf": [[1099, 0.0], [1100, 1.0]]},
                 "split": {"rule": "fixed_output_fraction", "output_fraction": 1 / 11}},
    "hardware": {"gpu": "A100-80GB", "model": "Llama-3-8B", "iteration": {"chunk_tokens": 500}, "slots": {"table": {700: 64, 2000: 64}},
                 "performance": {"source": "affine", "base_ms": 10.0, "per_seq_ms": 1.0, "per_prefill_token_ms": 0.01}},
    "pools": {"long_window_tokens": 2000},
    "compression": {"enabled": False},
    "slo": {"ttft_p99_ms": 1000, "service_model": "batching"},
}


def _problem(**changes: object):
    return prepare(load_instance(ONE_SIZE, **changes))


def _state(problem, gpus: int):
    config = problem.pool(2000)
    workload = batching_workload([config], [(problem.mix.l_in, problem.mix.l_out, problem.mix.prob)], np.array([problem.rate_rps]))
    return state_at(workload, [config], np.array([gpus]))


def test_operating_point_by_hand():
    # lambda = 0.002 / ms on one GPU; E[D] = 1 x 100 = 100 ms, E[P] = 0.01 x 1000 = 10 ms, own work 1 ms per step:
    # t = (10 + 1) / (1 - 0.002 x 110) = 14.1026; t_d = 10 + 0.002 t 100 = 12.8205; S = 2 t_d + 10 = 35.641 (M/D/1)
    state = _state(_problem(), 1)
    t = 11.0 / 0.78
    t_d = 10.0 + 0.002 * t * 100.0
    service = 2.0 * t_d + 10.0
    u = 0.002 * service
    wait = 0.002 * service**2 / (2.0 * (1.0 - u))  # Pollaczek-Khinchine, Poisson arrivals on one GPU
    hold = 0.5 * t + wait + 2.0 * t_d + 10.0 + 100.0 * t
    assert state.iteration_ms[0] == pytest.approx(t, rel=1e-9)
    assert state.prefill_load[0] == pytest.approx(u, rel=1e-9)
    assert state.prefill_wait_iterations[0] * t == pytest.approx(wait, rel=0.02)  # the grid's rounding of S
    assert state.hold_ms[0] == pytest.approx(hold, rel=1e-4)
    assert state.utilisation[0] == pytest.approx(0.002 * hold / 64, rel=1e-4)
    # no KV term: every decode step of the request is base + own + others + prefill per step = t
    assert state.tpot_mean_ms[0] == pytest.approx(t, rel=1e-9)


def test_in_gpu_ttft_quantile_matches_monte_carlo():
    # TTFT in the GPU = J + Q + 2 s + P + first + (s - t_d), J ~ U(0, t), Q the M/D/1 wait, s = t_d + Z sd the decode
    # step at a normal level Z: the other decoders' work has variance A lambda E[sigma^2 A S] = 1.25 x 0.002 x 1 x
    # 1.25 x 100 t (A = 1 / (1 - lambda E[D]) = 1.25, S = L_out t): checked by a Lindley simulation
    state = _state(_problem(), 1)
    t = 11.0 / 0.78
    t_d = 10.0 + 0.002 * t * 100.0
    service, u = 2.0 * t_d + 10.0, 0.002 * (2.0 * t_d + 10.0)
    first = t_d + 1.0 + u * 5.0  # a waiting prompt's chunk (E[P] / E[tau] = 5 ms) in the first decode step w.p. u
    sd = np.sqrt(1.25 * 0.002 * 1.25 * 100.0 * t)
    rng = np.random.default_rng(0)
    gaps = rng.exponential(1 / 0.002, 400_000)
    waits = np.zeros(len(gaps))
    for i in range(1, len(gaps)):
        waits[i] = max(0.0, waits[i - 1] + service - gaps[i])
    step = np.maximum(t_d + sd * rng.standard_normal(len(gaps)), 10.0)
    ttft = rng.uniform(0, t, len(gaps)) + waits + 2.0 * step + 10.0 + first + step - t_d
    assert state.in_gpu_p99_ms[0] == pytest.approx(np.percentile(ttft, 99), rel=0.02)


def test_lindley_against_known_queues():
    cell = np.array([0.01])
    law, lost, _ = renewal_wait_pmf(np.array([[1.0]]), np.array([[1.0]]), np.array([0.5]), np.array([1.0]), cell, 4096)
    grid = np.arange(4096) * 0.01
    assert float(law[0] @ grid) == pytest.approx(0.5, rel=1e-3)  # M/D/1 at load 1/2: E[W] = lambda S^2 / (2 (1 - u))
    assert law[0, 0] == pytest.approx(0.5, abs=2e-3) and lost[0] < 1e-12
    law, _, _ = renewal_wait_pmf(np.array([[1.0]]), np.array([[1.0]]), np.array([0.5]), np.array([1e6]), cell, 1024)
    assert law[0, 0] == pytest.approx(1.0)  # D/D/1 below capacity: nobody waits


def test_lindley_gives_up_above_a_limit():
    args = (np.array([[1.0]]), np.array([[1.0]]), np.array([0.9]), np.array([1.0]), np.array([0.01]), 8192)
    full, _, stopped = renewal_wait_pmf(*args)
    assert not stopped[0]
    p99 = np.argmax(np.cumsum(full[0]) >= 0.99) * 0.01
    _, _, stopped = renewal_wait_pmf(*args, give_up_ms=np.array([0.5 * p99]))
    assert stopped[0]


@settings(max_examples=50, deadline=None)
@given(st.floats(0.01, 500.0), st.integers(1, 300))
def test_met_share_is_between_a_full_gpu_and_the_time_average(held, slots):
    share = float(met_share(np.array([held]), np.array([float(slots)]))[0])
    assert (slots - 1) / slots - 1e-9 <= share <= 1.0 + 1e-9


def test_model_agrees_with_the_simulator_on_a_small_pool():
    # one GPU at about 45 % of its time: utilisation within 5 %, P99 TTFT and P99 TPOT within 10 % of the simulator
    problem = _problem(workload__rate_rps=4, workload__lengths={"cdf": [[100, 0.0], [600, 0.5], [1900, 1.0]]})
    config = problem.pool(2000)
    state = _state(problem, 1)
    rng = np.random.default_rng(1)
    draws = rng.choice(len(problem.mix.prob), size=30_000, p=problem.mix.prob)
    arrival = np.cumsum(rng.exponential(1 / problem.rate_rps, len(draws)))
    l_in, l_out = problem.mix.l_in[draws], problem.mix.l_out[draws]
    times = simulate_batching(config, 1, arrival, l_in, l_out)
    keep = arrival > arrival[len(arrival) // 5]
    start, end = arrival[len(arrival) // 5], arrival[-1]
    busy = np.clip(np.minimum(times.finish_s, end) - np.maximum(times.start_s, start), 0, None).sum() / (config.slots_per_gpu * (end - start))
    ttft = 1000 * (times.first_token_s - arrival)[keep]
    many = keep & (l_out >= 2)
    tpot = 1000 * (times.finish_s - times.first_token_s)[many] / (l_out[many] - 1)
    assert state.utilisation[0] == pytest.approx(busy, rel=0.05)
    assert state.ttft_p99_ms[0] == pytest.approx(np.percentile(ttft, 99), rel=0.10)
    assert state.tpot_p99_ms[0] == pytest.approx(np.percentile(tpot, 99), rel=0.10)


def test_a_tpot_target_sizes_the_pool():
    free = _problem(workload__rate_rps=8)
    need = int(evaluate(free, sweep(free).plan).pools[0].gpus)
    at_need = evaluate(free, Plan((PoolPlan("long", 2000, need),))).pools[0]
    tight = _problem(workload__rate_rps=8, slo={"ttft_p99_ms": 1000, "service_model": "batching", "tpot_p99_ms": 0.98 * at_need.tpot_p99_ms})
    pool = evaluate(tight, sweep(tight).plan).pools[0]
    assert pool.gpus > need and pool.meets_slo and pool.binding == "tpot"
    assert not evaluate(tight, Plan((PoolPlan("long", 2000, need),))).pools[0].meets_slo


def test_an_unreachable_tpot_target_is_explained():
    problem = _problem(slo={"ttft_p99_ms": 1000, "service_model": "batching", "tpot_p99_ms": 10.5})  # below base + own step
    config = problem.pool(2000)
    workload = batching_workload([config], [(problem.mix.l_in, problem.mix.l_out, problem.mix.prob)], np.array([problem.rate_rps]))
    assert min_gpus_batching(workload, [config], 1000, problem.rho_max, problem.tpot_targets)[0] == -1
    assert evaluate(problem, Plan((PoolPlan("long", 2000, 3),))).pools[0].binding == "tpot"


def test_the_milp_refuses_the_engine_batching_model():
    with pytest.raises(NotApplicableError, match="slo.service_model"):
        solve_milp(_problem())


def test_a_budget_above_the_window_is_the_window():
    # every prompt of the 2000-token pool prefills in one iteration either way: the same pool, the same plan
    at_window = _problem(hardware__iteration={"chunk_tokens": 2000})
    above = _problem(hardware__iteration={"chunk_tokens": 2000}, hardware__engine={"max_num_batched_tokens": 1_000_000})
    assert above.pool(2000).chunk_tokens == 2000 and above.pool(2000).step == at_window.pool(2000).step
    assert evaluate(above, sweep(above).plan).total_gpus == evaluate(at_window, sweep(at_window).plan).total_gpus


def test_an_unreachable_tpot_target_is_explained_by_the_batching_model():
    problem = _problem(slo={"ttft_p99_ms": 1000, "service_model": "batching", "tpot_mean_ms": 10.5})
    with pytest.raises(InfeasibleError, match="mean TPOT is 1[0-9.]+ ms even when idle \\(the batching model\\)"):
        sweep(problem)


def test_the_instance_may_not_ask_for_the_milp_and_the_header_says_what_tpot_targets_meet():
    with pytest.raises(InputError, match="solve.method"):
        _problem(solve={"method": "milp"})
    lines = assumption_lines(_problem(slo={"ttft_p99_ms": 1000, "service_model": "batching", "tpot_p50_ms": 20}))
    assert "p50 20 ms (percentiles checked against the batching model's P99 TPOT)" in "\n".join(lines)
