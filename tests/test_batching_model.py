"""The continuous-batching service model (optfleet/queueing/batching.py) and its use by the evaluator and the sweep."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet.cli import main
from optfleet.problems.fleet import evaluate
from optfleet.problems.fleet.batching_pool import min_instances_batching, state_at
from optfleet.problems.fleet.heuristics import sweep
from optfleet.queueing import erlang_c
from optfleet.queueing.batching import PREFILL_BINS, BatchingWorkload, batching_state, in_gpu_quantile

ROOT = Path(__file__).resolve().parents[1]
AZURE = ROOT / "instances/fleet/azure_2023.yaml"


def workload(rate: float, iterations: float, *, scv: float = 0.0, tau_bins: dict[int, float] | None = None, chunks: int = 1, columns: int = 4) -> BatchingWorkload:
    """One pool; ``tau_bins`` maps prefill work in 1/PREFILL_BINS iterations to its share (default: none)."""
    share = np.zeros(columns)
    share[chunks] = 1.0
    prefill = np.zeros(columns * PREFILL_BINS)
    for b, p in (tau_bins or {0: 1.0}).items():
        prefill[b] = p
    return BatchingWorkload(np.array([rate]), np.array([iterations]), np.array([scv]), np.array([1.0]), prefill[None, :], share[None, :])


def chain_wait_probability(lam: float, hold: float, n: int, s: int, w_s: float, h_s: float) -> float:
    """P(N >= c) of the birth-death chain summed state by state (the tail above c geometric)."""
    c = n * s
    log_pi = [0.0]
    for i in range(1, c + 1):
        departures = i / ((w_s + h_s * i / n) * hold)
        log_pi.append(log_pi[-1] + np.log(lam / departures))
    log_pi = np.array(log_pi)
    q = lam * hold * (w_s + h_s * s) / c
    weights = np.exp(log_pi - log_pi.max())
    tail = weights[-1] / (1 - q)
    return float(tail / (weights[:-1].sum() + tail))


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 6), s=st.integers(1, 12), w_ms=st.floats(1.0, 30.0), h_ms=st.floats(0.05, 3.0), load=st.floats(0.05, 0.95),
       iterations=st.floats(5.0, 300.0))
def test_wait_probability_is_the_birth_death_chain(n, s, w_ms, h_ms, load, iterations):
    hold = iterations + 0.5
    lam = load * n * s / (hold * (w_ms + h_ms * s) / 1000.0)  # a share ``load`` of the full-batch capacity
    state = batching_state(workload(lam, iterations), n, s, w_ms, h_ms)
    assert state.stable[0]
    expected = chain_wait_probability(lam, hold, n, s, w_ms / 1000.0, h_ms / 1000.0)
    assert state.wait_probability[0] == pytest.approx(expected, rel=1e-6, abs=1e-12)


def test_constant_iteration_gives_erlang_c():
    lam, hold, n, s, w_ms = 30.0, 100.5, 2, 8, 5.0
    state = batching_state(workload(lam, 100.0), n, s, w_ms, 0.0)
    assert state.wait_probability[0] == pytest.approx(float(erlang_c(n * s, lam * hold * w_ms / 1000.0)), rel=1e-9)
    assert state.iteration_ms[0] == pytest.approx(w_ms)


def test_operating_point_without_prefill_is_the_closed_form():
    """No prefill work: t = W + H lambda_g (E[X] + 1/2) t, so t = W / (1 - H lambda_g (E[X] + 1/2)) (hand-checked toy)."""
    lam, n, s, w_ms, h_ms, ex = 10.0, 4, 64, 8.0, 0.65, 200.0
    state = batching_state(workload(lam, ex), n, s, w_ms, h_ms)
    lam_gpu = lam / n
    t = (w_ms / 1000.0) / (1 - h_ms / 1000.0 * lam_gpu * (ex + 0.5))
    assert state.iteration_ms[0] == pytest.approx(1000 * t, rel=1e-9)
    assert state.utilisation[0] == pytest.approx(lam_gpu * (ex + 0.5) * t / s, rel=1e-9)


def test_operating_point_with_prefill_solves_the_fixed_point():
    lam, n, s, w_ms, h_ms, ex = 10.0, 4, 64, 8.0, 0.65, 200.0
    state = batching_state(workload(lam, ex, tau_bins={8: 0.5, 24: 0.5}), n, s, w_ms, h_ms)  # tau = 1 or 3 iterations
    tau, tau2 = 2.0, 5.0
    t = state.iteration_ms[0] / 1000.0
    lam_gpu = lam / n
    u = lam_gpu * t * tau
    q = lam_gpu * t * tau2 / (2 * (1 - u))
    assert state.prefill_load[0] == pytest.approx(u)
    assert state.prefill_wait_iterations[0] == pytest.approx(q)
    assert t == pytest.approx(w_ms / 1000.0 + h_ms / 1000.0 * lam_gpu * (ex + 0.5 + q) * t, rel=1e-9)


def test_overload_is_unstable():
    # full-batch capacity n s / ((W + H s) E[h]) = 4 * 16 / (0.0184 * 100.5) = 34.6 req/s
    state = batching_state(workload(40.0, 100.0), 4, 16, 8.0, 0.65)
    assert not state.stable[0]
    assert state.ttft_p99_ms[0] == np.inf


def test_in_gpu_quantile_is_the_mg1_mixture():
    """The FFT quantile of chunks + 1 + J + Q against a Monte Carlo of the same mixture, Q from Lindley's recursion
    of an M/G/1 queue with the same binned prefill work (u = 0.45)."""
    rng = np.random.default_rng(3)
    prefill_share = np.zeros(PREFILL_BINS * 4)
    prefill_share[[2, 8, 20]] = [0.5, 0.3, 0.2]  # tau = 0.25, 1, 2.5 iterations
    chunk_share = np.array([0.0, 0.6, 0.3, 0.1])
    tau_bins = np.arange(len(prefill_share)) / PREFILL_BINS
    mean_tau = prefill_share @ tau_bins
    u = 0.45
    count = 400_000
    gaps = rng.exponential(mean_tau / u, count)  # arrivals at rate u / E[tau] per iteration
    work = rng.choice(tau_bins, size=count, p=prefill_share)
    wait = np.zeros(count)
    for i in range(1, count):
        wait[i] = max(wait[i - 1] + work[i - 1] - gaps[i], 0.0)
    draws = rng.choice(4, size=count, p=chunk_share) + 1 + rng.random(count) + wait
    expected = np.percentile(draws[count // 10:], 99)
    got = in_gpu_quantile(chunk_share, prefill_share, np.array([u]), np.array([True]))[0]
    assert got == pytest.approx(expected, abs=0.1)


def test_in_gpu_quantile_of_a_single_chunk_count():
    """Every request has 2 chunks, no prefill wait: time to first token 2 + 1 + U(0,1) iterations, P99 = 3.99 t
    (J's eight bins at their midpoints: the 0.99 point is the last, 3 + 15/16 iterations)."""
    state = batching_state(workload(1e-9, 10.0, chunks=2), 1, 4, 10.0, 0.0)
    assert state.in_gpu_p99_ms[0] == pytest.approx((3 + 15 / 16) * 10.0, rel=1e-6)


@pytest.fixture(scope="module")
def azure_batching():
    return optfleet.load(AZURE, slo__service_model="batching").problem


def test_sweep_plan_passes_the_evaluator_and_each_pool_is_minimal(azure_batching):
    plan = sweep(azure_batching).plan
    evaluation = evaluate(azure_batching, plan)
    assert evaluation.meets_slo and evaluation.service_model == "batching"
    fewer = plan.with_instances([max(p.instances - 1, 0) if p.instances > 0 else 0 for p in plan.pools])
    short_of = evaluate(azure_batching, fewer)
    for pool, smaller in zip(evaluation.pools, short_of.pools, strict=True):
        assert pool.min_instances == pool.instances
        if pool.instances > 0:
            assert not smaller.meets_slo


def test_min_gpus_is_the_smallest_feasible_count(azure_batching):
    plan = sweep(azure_batching).plan
    from optfleet.problems.fleet.routing import route
    from optfleet.problems.fleet.batching_pool import batching_workload, meets_slo

    traffic = route(azure_batching.mix, plan, azure_batching.compressible_fraction)
    configs = [azure_batching.pool(p.window_tokens) for p in plan.pools]
    load = batching_workload(configs, [(t.l_in, t.l_out, t.weight) for t in traffic], azure_batching.rate_rps * np.array([t.weight.sum() for t in traffic]))
    need = min_instances_batching(load, configs, azure_batching.ttft_p99_ms, azure_batching.rho_max)
    slo, rho = azure_batching.ttft_p99_ms, azure_batching.rho_max
    assert meets_slo(state_at(load, configs, need), slo, rho).all()
    assert not meets_slo(state_at(load, configs, need - 1), slo, rho).any()


def test_azure_regression_under_the_batching_model(azure_batching):
    """Pinned to the shipped instance (benchmarks/results/batching_fleets.md): the batching model buys 283 GPUs, the slot model 325."""
    plan = sweep(azure_batching).plan
    assert [(p.window_tokens, p.instances) for p in plan.pools] == [(4096, 247), (65536, 36)]
    assert evaluate(azure_batching, plan).cost_per_hour == pytest.approx(283 * 2.21)


def test_batching_with_the_fleetsim_rule_is_refused(capsys):
    assert main(["validate", str(AZURE), "--set", "slo.service_model=batching", "--set", "slo.ttft_rule=fleetsim"]) == 2
    err = capsys.readouterr().err
    assert "slo.service_model" in err and "ttft_rule" in err
