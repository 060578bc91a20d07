"""The continuous-batching service model under the engine model (optfleet/queueing/batching_engine.py, lindley.py):
operating point and TPOT by hand, the prefill queue against Pollaczek-Khinchine and a Lindley simulation, the TTFT
law's quantile against Monte Carlo, and the model against the batching simulator on a small pool."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from optfleet.errors import InfeasibleError, InputError
from optfleet.instance import load_instance
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.assumptions import assumption_lines
from optfleet.problems.fleet.batching_pool import batching_workload, min_instances_batching, state_at
from optfleet.problems.fleet.heuristics import sweep
from optfleet.problems.fleet.plan import Plan, PoolPlan
from optfleet.problems.fleet.problem import prepare
from optfleet.problems.fleet.simulate.batching import simulate_batching
from optfleet.queueing.batching import PREFILL_BINS, slot_wait_probability
from optfleet.queueing.batching_engine import (DEPARTURE_SCV, _behind_pmf, arrival_shape, busy_period_cumulants, met_share,
                                               prefill_iteration_ms)
from optfleet.queueing.lindley import renewal_wait_pmf

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[1]

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
    # TTFT in the GPU = J + Q + 2 s + P + first + (s - t_d) + B, J ~ U(0, t), Q the M/D/1 wait, s = t_d + Z sd the
    # decode step at a normal level Z: the other decoders' work has variance A lambda E[sigma^2 A S] = 1.25 x 0.002 x
    # 1 x 1.25 x 100 t (A = 1 / (1 - lambda E[D]) = 1.25, S = L_out t); B the next prompt's chunk (E[P] / E[tau] =
    # 5 ms) in its first decode step when a prompt arrived during its wait and prefill.  A Lindley simulation, in
    # which B follows each request's own wait (the model takes the mean wait).
    state = _state(_problem(), 1)
    t = 11.0 / 0.78
    t_d = 10.0 + 0.002 * t * 100.0
    service = 2.0 * t_d + 10.0
    sd = np.sqrt(1.25 * 0.002 * 1.25 * 100.0 * t)
    rng = np.random.default_rng(0)
    gaps = rng.exponential(1 / 0.002, 400_001)
    waits = np.zeros(len(gaps))
    for i in range(1, len(gaps)):
        waits[i] = max(0.0, waits[i - 1] + service - gaps[i])
    behind = np.where(gaps[1:] < waits[:-1] + service, 5.0, 0.0)
    waits = waits[:-1]
    step = np.maximum(t_d + sd * rng.standard_normal(len(waits)), 10.0)
    ttft = rng.uniform(0, t, len(waits)) + waits + 2.0 * step + 10.0 + (t_d + 1.0) + step - t_d + behind
    assert state.in_gpu_p99_ms[0] == pytest.approx(np.percentile(ttft, 99), rel=0.02)


def test_behind_law_is_a_capped_compound_poisson_law():
    # prompts of one eighth of a budget, m = 3 arriving on average: Poisson(3) below the cap of 8 + slack eighths
    share = np.zeros((1, 17))
    share[0, 1] = 1.0
    law = _behind_pmf(share, np.full((1, 17), 3.0))
    assert law.shape == (1, 17, 16)
    np.testing.assert_allclose(law.sum(axis=-1), 1.0, rtol=1e-12)
    poisson = np.exp(-3.0) * 3.0 ** np.arange(16) / np.cumprod(np.r_[1.0, np.arange(1, 16)])
    np.testing.assert_allclose(law[0, 8, :8], poisson[:8], rtol=1e-12)  # a whole number of chunks: cap 8 eighths
    assert law[0, 8, 8] == pytest.approx(1.0 - poisson[:8].sum(), rel=1e-12) and not law[0, 8, 9:].any()
    np.testing.assert_allclose(law[0, 1, :15], poisson[:15], rtol=1e-12)  # one eighth: 7 eighths of slack, cap 15
    # prompts of two budgets: one arrival fills any cap
    share = np.zeros((1, 17))
    share[0, 16] = 1.0
    law = _behind_pmf(share, np.full((1, 17), 0.5))
    assert law[0, 3, 0] == pytest.approx(np.exp(-0.5)) and law[0, 3, 13] == pytest.approx(1.0 - np.exp(-0.5))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 64), st.integers(2, 200), st.floats(0.05, 0.9), st.floats(1.0, 4.0))
def test_the_slot_chain_in_units_of_a_jump(gpus, slots, load, jump):
    # jump 1 is the negative binomial chain (scipy's law); a larger jump, the same mean with more variance, waits more
    # below the cap
    n, s = np.array([float(gpus)]), np.array([float(slots)])
    hold, w, hphi = np.array([100.0]), np.array([0.01]), np.array([0.0005])
    lam = load * n * s / (hold * (w + hphi * s))  # arrival rate over the full-batch departure rate = load
    stable = np.array([True])
    plain = slot_wait_probability(lam, hold, n, s, w, hphi, stable)
    c, x, r = n * s, lam * hold * hphi / n, n * w / hphi + 1.0
    q = lam * hold * (w + hphi * s) / c
    tail = stats.nbinom.pmf(c, r, 1.0 - x) / (1.0 - q)
    assert plain[0] == pytest.approx((tail / (stats.nbinom.cdf(c - 1, r, 1.0 - x) + tail))[0], rel=1e-9, abs=1e-300)
    wider = slot_wait_probability(lam, hold, n, s, w, hphi, stable, jump)
    assert wider[0] >= plain[0] * (1.0 - 1e-9)


def test_a_gpu_of_a_pool_receives_a_stream_between_turns_and_poisson():
    shape = arrival_shape(np.array([1.0, 2.0, 6.0, 1e6]), np.zeros(4))
    assert shape[0] == 1.0  # one GPU: the pool's Poisson stream
    assert np.all(np.diff(shape) > 0) and shape[-1] == pytest.approx(1.0 / DEPARTURE_SCV)
    # many arrivals per iteration: the dispatcher takes turns (Erlang n in the limit)
    busy = arrival_shape(np.array([6.0, 6.0]), np.array([1.0, 1e9]))
    assert shape[2] < busy[0] < busy[1] and busy[1] == pytest.approx(6.0)


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
    busy = np.clip(np.minimum(times.finish_s, end) - np.maximum(times.start_s, start), 0, None).sum() / (config.slots_per_instance * (end - start))
    ttft = 1000 * (times.first_token_s - arrival)[keep]
    many = keep & (l_out >= 2)
    tpot = 1000 * (times.finish_s - times.first_token_s)[many] / (l_out[many] - 1)
    assert state.utilisation[0] == pytest.approx(busy, rel=0.05)
    assert state.ttft_p99_ms[0] == pytest.approx(np.percentile(ttft, 99), rel=0.10)
    assert state.tpot_p99_ms[0] == pytest.approx(np.percentile(tpot, 99), rel=0.10)


def test_a_tpot_target_sizes_the_pool():
    free = _problem(workload__rate_rps=8)
    need = int(evaluate(free, sweep(free).plan).pools[0].instances)
    at_need = evaluate(free, Plan((PoolPlan("long", 2000, need),))).pools[0]
    tight = _problem(workload__rate_rps=8, slo={"ttft_p99_ms": 1000, "service_model": "batching", "tpot_p99_ms": 0.98 * at_need.tpot_p99_ms})
    pool = evaluate(tight, sweep(tight).plan).pools[0]
    assert pool.instances > need and pool.meets_slo and pool.binding == "tpot"
    assert not evaluate(tight, Plan((PoolPlan("long", 2000, need),))).pools[0].meets_slo


def test_an_unreachable_tpot_target_is_explained():
    problem = _problem(slo={"ttft_p99_ms": 1000, "service_model": "batching", "tpot_p99_ms": 10.5})  # below base + own step
    config = problem.pool(2000)
    workload = batching_workload([config], [(problem.mix.l_in, problem.mix.l_out, problem.mix.prob)], np.array([problem.rate_rps]))
    assert min_instances_batching(workload, [config], 1000, problem.rho_max, problem.tpot_targets)[0] == -1
    assert evaluate(problem, Plan((PoolPlan("long", 2000, 3),))).pools[0].binding == "tpot"


def test_a_budget_above_the_window_is_the_window():
    # every prompt of the 2000-token pool prefills in one iteration either way: the same pool, the same plan
    at_window = _problem(hardware__iteration={"chunk_tokens": 2000})
    above = _problem(hardware__iteration={"chunk_tokens": 2000}, hardware__engine={"max_num_batched_tokens": 1_000_000})
    assert above.pool(2000).chunk_tokens == 2000 and above.pool(2000).step == at_window.pool(2000).step
    assert evaluate(above, sweep(above).plan).total_instances == evaluate(at_window, sweep(at_window).plan).total_instances


def test_an_unreachable_tpot_target_is_explained_by_the_batching_model():
    problem = _problem(slo={"ttft_p99_ms": 1000, "service_model": "batching", "tpot_mean_ms": 10.5})
    with pytest.raises(InfeasibleError, match="mean TPOT is 1[0-9.]+ ms even when idle \\(the batching model\\)"):
        sweep(problem)


def test_the_header_says_what_tpot_targets_meet():
    lines = assumption_lines(_problem(slo={"ttft_p99_ms": 1000, "service_model": "batching", "tpot_p50_ms": 20}))
    assert "p50 20 ms (percentiles checked against the batching model's P99 TPOT)" in "\n".join(lines)
    assert "MILP: " in lines[-1] and "K = 2 pools" in lines[-1]


def test_a_token_budget_too_small_for_the_window_is_refused():
    # 2,000-token window, 4-token chunks: 500 budgets per prompt, beyond the batching model's 256 (its laws would not fit)
    with pytest.raises(InputError, match="hardware.iteration.chunk_tokens = 4: splits a 2,000-token prompt into 500 budgets"):
        _problem(hardware__iteration__chunk_tokens=4)
    assert _problem(hardware__iteration__chunk_tokens=8).hardware.chunk_tokens == 8  # 250 budgets
    prepare(load_instance(ONE_SIZE, hardware__iteration__chunk_tokens=4, slo__service_model="slots"))  # the slot model takes it


@settings(max_examples=12, deadline=None)
@given(load=st.floats(0.1, 0.6), start_mean=st.floats(50.0, 400.0), start_shape=st.floats(1.0, 8.0))
def test_busy_period_cumulants_match_a_branching_monte_carlo(load, start_mean, start_shape):
    # a busy period started by gamma work W_0, Poisson arrivals whose work is uniform on [50, 150]: the arrivals
    # during each generation's work bring the next generation's (the busy period's work, so its length)
    rng = np.random.default_rng(7)
    work = (50.0, 150.0)
    moments = tuple((work[1] ** (k + 1) - work[0] ** (k + 1)) / ((k + 1) * (work[1] - work[0])) for k in (1, 2, 3))
    rate = load / moments[0]
    scale = start_mean / start_shape
    start = rng.gamma(start_shape, scale, size=200_000)
    total, pending = start.copy(), start.copy()
    while pending.max() > 0:
        count = rng.poisson(rate * pending)
        pending = np.zeros_like(pending)
        live = np.flatnonzero(count)
        if not len(live):
            break
        draws = rng.uniform(*work, size=int(count.sum()))
        pending[live] = np.add.reduceat(draws, np.concatenate(([0], np.cumsum(count[live])[:-1])))
        total += pending
    k1, k2, k3 = busy_period_cumulants((start_mean, start_shape * scale**2, 2.0 * start_shape * scale**3), rate, moments)
    # tolerances about 3 standard errors of 200,000 draws (measured over seeds at load 0.7: 0.7 %, 2.5 %, 8.4 %)
    assert total.mean() == pytest.approx(k1, rel=0.02)
    assert total.var() == pytest.approx(k2, rel=0.05)
    assert stats.moment(total, 3) == pytest.approx(k3, rel=0.2)


def test_the_tpot_law_holds_where_prompts_take_half_of_an_instance():
    # Llama-3-70B H100 x8 at a 8,192-token budget, prompts of 3k-5k tokens taking half of each of 2 instances' time:
    # the busy-period law is within 10 % of the simulator's P99 TPOT (a window of fixed length put it 16 % low)
    problem = load_instance(ROOT / "instances" / "pd_fleet" / "rag_long_prompt.yaml")
    from optfleet.problems.pd_fleet.problem import prepare as prepare_pd
    from optfleet.problems.pd_fleet.sizing import aggregated_states
    pd = prepare_pd(problem)
    option = pd.option("agg H100-SXM x8 B8192")
    pool = pd.pools[0]
    l_in = np.rint(np.linspace(0.75, 1.25, 9) * 4096).astype(np.int64)
    l_out = np.maximum(np.rint(l_in * 0.04 / 0.96), 1).astype(np.int64)
    weight = np.full(9, 1 / 9)
    config = option.pool(pool.window_tokens)
    rate_rps = 0.5 * 2 / (float(weight @ config.step.prefill_compute_ms(l_in)) / 1000.0)
    pool = dataclasses.replace(pool, l_in=l_in, l_out=l_out, weight=weight, rate_rps=rate_rps)
    state = aggregated_states(pd, pool, option, [2])[0]
    rng = np.random.default_rng(0)
    draws = rng.choice(9, size=60_000)
    arrival = np.cumsum(rng.exponential(1 / rate_rps, len(draws)))
    times = simulate_batching(config, 2, arrival, l_in[draws], l_out[draws])
    keep = arrival >= arrival[6_000]
    tpot = 1000 * (times.finish_s - times.first_token_s)[keep] / (l_out[draws][keep] - 1)
    simulated = np.percentile(tpot, 99)
    assert state.tpot_p99_ms == pytest.approx(simulated, rel=0.10)


def test_a_prefilling_iteration_is_a_prompts_service_over_the_iterations_it_spans():
    # half the prompts span 2.5 budgets (3 iterations, 300 ms), half half a budget (1 iteration, 50 ms):
    # t_p = (0.5 * 300 + 0.5 * 50) / (0.5 * 3 + 0.5 * 1) = 87.5 ms
    share = np.zeros((1, 4 * PREFILL_BINS))
    service = np.full((1, 4 * PREFILL_BINS), np.inf)
    share[0, [PREFILL_BINS // 2, 5 * PREFILL_BINS // 2]] = 0.5
    service[0, [PREFILL_BINS // 2, 5 * PREFILL_BINS // 2]] = [50.0, 300.0]
    assert prefill_iteration_ms(share, service)[0] == pytest.approx(87.5)
    assert prefill_iteration_ms(np.zeros_like(share), service)[0] == 0.0  # no prompts: no prefilling iteration


def test_the_ttft_law_holds_for_long_prompts_behind_the_dispatcher():
    # the shipped RAG instance's short pool at its plan (3 x H100 x8 at a 2,048-token budget, prompts of 8k-17k
    # tokens): the dispatcher's turns span a prefilling iteration, and the P99 TTFT is within 10 % of the simulator's
    # (counted per mean iteration instead, the model put it 12 % above: 1,674 ms against about 1,500)
    from optfleet.problems.pd_fleet.problem import prepare as prepare_pd
    from optfleet.problems.pd_fleet.sizing import aggregated_states
    pd = prepare_pd(load_instance(ROOT / "instances" / "pd_fleet" / "rag_long_prompt.yaml"))
    option = pd.option("agg H100-SXM x8 B2048")
    pool = pd.pools[0]
    state = aggregated_states(pd, pool, option, [3])[0]
    rng = np.random.default_rng(0)
    draws = rng.choice(len(pool.l_in), size=60_000, p=pool.weight / pool.weight.sum())
    arrival = np.cumsum(rng.exponential(1 / pool.rate_rps, len(draws)))
    l_in, l_out = pool.l_in[draws].astype(np.int64), pool.l_out[draws].astype(np.int64)
    times = simulate_batching(option.pool(pool.window_tokens), 3, arrival, l_in, l_out)
    keep = arrival >= arrival[6_000]
    simulated = np.percentile(1000 * (times.first_token_s - arrival)[keep], 99)
    assert state.ttft_p99_ms == pytest.approx(simulated, rel=0.10)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-3, 400.0), st.floats(1e-6, 1.0), st.integers(1, 300))
def test_met_share_falls_as_the_held_count_rises(held, step, slots):
    """``met_share`` is non-increasing in the held count (its docstring's proof; the relaxation's cycle row and the
    operating point's alternating updates rest on it)."""
    low, high = met_share(np.array([held, held * (1.0 + step)]), np.array([float(slots), float(slots)]))
    assert high <= low * (1.0 + 1e-12)
