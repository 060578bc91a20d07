"""The disaggregated-pool simulator (optfleet/problems/pd_fleet/simulate/) against exact results: a request alone,
spaced arrivals, a binding batch cap, M/M/c prefill (Erlang C), a slow link's busy share, the per-token brute force,
and the invariants every run keeps (hypothesis)."""

from __future__ import annotations

import doctest
import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.engine import AffineStep, roofline_engine
from optfleet.errors import InputError
from optfleet.problems.pd_fleet.roles import DecodeRole, PrefillRole, TransferLink
from optfleet.problems.pd_fleet.simulate import measure, pool, simulate_pool, simulate_requests, ttft_floor_ms
from optfleet.queueing.erlang import erlang_c

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[1]
ENGINE = AffineStep(base_ms=8.0, per_seq_ms=0.05, per_kv_token_ms=2e-4, per_prefill_token_ms=0.02, per_prefill_pair_ms=1e-7)
LINK = TransferLink(gb_per_s=25.0, kv_bytes_per_token=160e3)


def _brute_force():
    """The per-token decode loop of benchmarks/bench_pd_simulate.py (kept there only)."""
    spec = importlib.util.spec_from_file_location("bench_pd_simulate", REPO / "benchmarks" / "bench_pd_simulate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.per_token_decode


def _alone(l_in: int, l_out: int, *, budget: int = 2048, link: TransferLink = LINK):
    """One request through a 1P1D pool."""
    return simulate_requests([0.0], [l_in], [l_out], PrefillRole(1, ENGINE, budget), link, DecodeRole(1, ENGINE, 8), np.random.default_rng(0))


def test_a_request_alone_sees_its_chunks_the_transfer_and_one_decode_step() -> None:
    trace = _alone(5000, 3)
    chunks = [(2048, 0), (2048, 2048), (904, 4096)]  # ceil(5000 / 2048) = 3 chunks, the last of 904 tokens
    prefill_ms = sum(float(ENGINE.step_ms(p, 0, 0, o)) for p, o in chunks)
    transfer_ms = 1e3 * 5000 * 160e3 / 25e9
    expected = prefill_ms + transfer_ms + float(ENGINE.step_ms(0, 1, 5000))
    assert trace.ttft_ms[0] == pytest.approx(expected, rel=1e-12)
    assert trace.ttft_ms[0] == pytest.approx(ttft_floor_ms([5000], PrefillRole(1, ENGINE, 2048), LINK, DecodeRole(1, ENGINE, 8))[0], rel=1e-12)
    assert trace.prefill_wait_ms[0] == trace.link_wait_ms[0] == trace.decode_wait_ms[0] == 0.0


def test_spaced_arrivals_give_the_exact_tpot() -> None:
    """Alone, a request's decode iterations after the first run at contexts L_in + 1 .. L_in + L_out - 1, so its
    TPOT is base + per_seq + per_kv_token (L_in + L_out / 2)."""
    l_in, l_out = np.array([300, 1200, 50, 4000]), np.array([2, 10, 257, 64])
    trace = simulate_requests(1000.0 * np.arange(4), l_in, l_out, PrefillRole(2, ENGINE, 512), LINK, DecodeRole(3, ENGINE, 4),
                              np.random.default_rng(1))
    expected = ENGINE.base_ms + ENGINE.per_seq_ms + ENGINE.per_kv_token_ms * (l_in + l_out / 2)
    np.testing.assert_allclose(trace.tpot_ms, expected, rtol=1e-9)


def test_a_full_batch_makes_the_next_request_wait_for_a_completion() -> None:
    """Two equal requests at once: with room for one sequence the second is admitted when the first leaves, after
    its L_out iterations alone; with room for two they share every iteration."""
    l_in, l_out = 1000, 20
    prefill, rng = PrefillRole(2, ENGINE, 4096), np.random.default_rng(0)
    one = simulate_requests([0.0, 0.0], [l_in] * 2, [l_out] * 2, prefill, LINK, DecodeRole(1, ENGINE, 1), rng)
    alone_ms = sum(float(ENGINE.step_ms(0, 1, l_in + j)) for j in range(l_out))
    assert one.decode_wait_ms.tolist() == pytest.approx([0.0, alone_ms], rel=1e-12)
    two = simulate_requests([0.0, 0.0], [l_in] * 2, [l_out] * 2, prefill, LINK, DecodeRole(1, ENGINE, 2), rng)
    assert two.decode_wait_ms.tolist() == [0.0, 0.0]
    np.testing.assert_allclose(two.tpot_ms, ENGINE.base_ms + 2 * ENGINE.per_seq_ms + ENGINE.per_kv_token_ms * 2 * (l_in + l_out / 2), rtol=1e-12)


def test_a_request_arriving_mid_iteration_joins_at_the_next_boundary() -> None:
    """Two equal prompts on two prefill instances reach the one decode instance 2.5 iterations apart: the second
    waits for the end of the first's third iteration."""
    step_s = [float(ENGINE.step_ms(0, 1, 1000 + j)) / 1e3 for j in range(3)]
    trace = simulate_requests([0.0, step_s[0] + step_s[1] + 0.5 * step_s[2]], [1000, 1000], [50, 50], PrefillRole(2, ENGINE, 4096),
                              LINK, DecodeRole(1, ENGINE, 4), np.random.default_rng(0))
    assert trace.decode.admit_s[1] == pytest.approx(trace.decode.admit_s[0] + sum(step_s), rel=1e-12)
    assert trace.decode_wait_ms[1] == pytest.approx(1e3 * 0.5 * step_s[2], rel=1e-9)


def test_prefill_alone_is_an_mmc_queue_with_the_erlang_c_mean_wait() -> None:
    """One chunk per prompt, time proportional to its geometric length (mean 1,000 tokens: service close to
    exponential, Cs^2 = 0.999): 4 prefill instances at load 0.75 are M/M/4, mean wait C(4, 3) / (4 mu - lambda),
    inside the 95 % interval of 8 replications, an interval under 10 % of it.  The decode side emits one token per
    request (it does not touch the prefill figures)."""
    engine = AffineStep(base_ms=1e-3, per_seq_ms=0.0, per_kv_token_ms=0.0, per_prefill_token_ms=0.1, per_prefill_pair_ms=0.0)
    lengths = np.arange(1, 15_001)
    weights = 1e-3 * (1 - 1e-3) ** (lengths - 1)
    service_s = float((weights * (1e-6 + 1e-4 * lengths)).sum() / weights.sum())
    rate = 0.75 * 4 / service_s
    result = simulate_pool(PrefillRole(4, engine, 20_000), LINK, DecodeRole(2, engine, 1024), rate_rps=rate, l_in_tokens=lengths,
                           l_out_tokens=np.ones_like(lengths), weights=weights, requests=15_000, reps=8, seed=3)
    exact_ms = 1e3 * float(erlang_c(4, rate * service_s)) / (4 / service_s - rate)
    mean, half = result.metrics["prefill_wait_mean_ms"]  # 52.0 +- 4.6 ms against 50.9 ms
    assert abs(mean - exact_ms) <= half <= 0.1 * exact_ms, (mean, half, exact_ms)
    assert result.metrics["prefill_busy_share"][0] == pytest.approx(0.75, rel=0.02)


def test_a_slow_link_queues_transfers_and_is_busy_lambda_tau_over_x() -> None:
    """Fast prefill, a link taking 60 % of each prefill instance's time: transfers wait, and the links' busy share
    is lambda E[tau] / x."""
    link = TransferLink(gb_per_s=1.0, kv_bytes_per_token=100e3)  # 0.1 ms per token
    prompts = np.array([500, 1000, 2000, 4000])
    tau_s = float(np.mean([link.transfer_ms(p) for p in prompts])) / 1e3
    rate = 0.6 * 3 / tau_s
    result = simulate_pool(PrefillRole(3, ENGINE, 8192), link, DecodeRole(4, ENGINE, 512), rate_rps=rate, l_in_tokens=prompts,
                           l_out_tokens=np.full(4, 2), requests=20_000, reps=2, seed=5)
    assert result.metrics["link_busy_share"][0] == pytest.approx(rate * tau_s / 3, rel=0.03)
    assert result.metrics["link_wait_mean_ms"][0] > 0.1 * 1e3 * tau_s
    fast = simulate_pool(PrefillRole(3, ENGINE, 8192), TransferLink(1e4, 100e3), DecodeRole(4, ENGINE, 512), rate_rps=rate,
                         l_in_tokens=prompts, l_out_tokens=np.full(4, 2), requests=20_000, reps=1, seed=5)
    assert fast.metrics["link_wait_mean_ms"][0] < 1e-3 * result.metrics["link_wait_mean_ms"][0]


def test_a_binding_batch_cap_creates_admission_waits_at_load() -> None:
    kwargs = dict(rate_rps=20.0, l_in_tokens=[500, 1500], l_out_tokens=[100, 300], requests=5_000, reps=1)
    roomy = simulate_pool(PrefillRole(4, ENGINE, 2048), LINK, DecodeRole(2, ENGINE, 512), **kwargs)
    tight = simulate_pool(PrefillRole(4, ENGINE, 2048), LINK, DecodeRole(2, ENGINE, 24), **kwargs)
    iteration_ms = roomy.metrics["tpot_max_ms"][0]
    assert roomy.metrics["decode_wait_p99_ms"][0] <= iteration_ms  # at most the iteration in progress
    assert tight.metrics["decode_wait_p99_ms"][0] > 10 * iteration_ms
    assert tight.metrics["decode_occupancy_share"][0] > 0.9


def test_closed_form_runs_equal_the_per_token_brute_force() -> None:
    per_token_decode = _brute_force()
    rng = np.random.default_rng(11)
    count = 400
    arrival = np.cumsum(rng.exponential(0.05, count))
    l_in, l_out = rng.integers(1, 3000, count), rng.integers(1, 120, count)
    decode = DecodeRole(3, ENGINE, 5)
    trace = simulate_requests(arrival, l_in, l_out, PrefillRole(2, ENGINE, 1024), LINK, decode, rng)
    admit, first, finish, tokens = per_token_decode(decode, trace.upstream.link_end_s, l_in, l_out, trace.decode_instance)
    np.testing.assert_allclose(trace.decode.admit_s, admit, rtol=0, atol=1e-9)
    np.testing.assert_allclose(trace.decode.first_token_s, first, rtol=0, atol=1e-9)
    np.testing.assert_allclose(trace.decode.finish_s, finish, rtol=0, atol=1e-9)
    assert tokens == trace.decode.tokens == int(l_out.sum())
    assert trace.decode_wait_ms.max() > 0  # the cap of 5 bound: the comparison covered queued admissions


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 2.0), st.integers(1, 300), st.integers(1, 40)), min_size=1, max_size=30),
    st.integers(1, 3), st.integers(1, 3), st.integers(1, 4), st.integers(1, 128), st.integers(0, 2**32 - 1),
)
def test_every_run_keeps_its_invariants(requests, x, y, max_batch, budget, seed) -> None:
    """TTFT never below the request's floor alone; every request admitted and finished in stage order; tokens
    emitted = sum L_out; no decode run above max_batch."""
    gaps, l_in, l_out = (np.array(v) for v in zip(*requests))
    arrival = np.cumsum(gaps)
    prefill, decode = PrefillRole(x, ENGINE, budget), DecodeRole(y, ENGINE, max_batch)
    trace = simulate_requests(arrival, l_in, l_out, prefill, LINK, decode, np.random.default_rng(seed))
    floor = ttft_floor_ms(l_in, prefill, LINK, decode)
    assert np.all(trace.ttft_ms >= floor * (1 - 1e-12))
    up, times = trace.upstream, trace.decode
    stages = [arrival, up.prefill_start_s, up.prefill_end_s, up.link_start_s, up.link_end_s, times.admit_s, times.first_token_s,
              times.finish_s]
    for earlier, later in zip(stages, stages[1:]):
        assert np.all(np.isfinite(later)) and np.all(later >= earlier)
    assert times.tokens == int(l_out.sum())
    assert times.run_batch.max() <= max_batch
    assert float(((times.run_end_s - times.run_start_s) > 0).all())


def test_decode_occupancy_obeys_littles_law() -> None:
    """Time-average running sequences = admission rate x mean time from admission to the last token (Little's law,
    over the whole run: every request is admitted and leaves inside it)."""
    rng = np.random.default_rng(7)
    arrival = np.cumsum(rng.exponential(0.05, 4_000))
    l_in, l_out = rng.integers(100, 3000, 4_000), rng.integers(1, 200, 4_000)
    prefill, decode = PrefillRole(3, ENGINE, 1024), DecodeRole(3, ENGINE, 16)
    trace = simulate_requests(arrival, l_in, l_out, prefill, LINK, decode, rng)
    times = trace.decode
    start, end = float(times.run_start_s.min()), float(times.run_end_s.max())
    occupancy = float(((times.run_end_s - times.run_start_s) * times.run_batch).sum()) / (end - start)
    assert occupancy == pytest.approx(float((times.finish_s - times.admit_s).sum()) / (end - start), rel=1e-9)
    window = measure(trace, prefill, decode, warmup_share=0.0)
    assert window["decode_mean_occupancy"] * decode.instances == pytest.approx(occupancy * (end - start) / (arrival[-1] - arrival[0]), rel=0.02)


def test_measure_leaves_out_the_warm_up_share_and_stays_json() -> None:
    result = simulate_pool(PrefillRole(2, ENGINE, 2048), LINK, DecodeRole(2, ENGINE, 32), rate_rps=5.0, l_in_tokens=[800, 2400],
                           l_out_tokens=[1, 150], requests=1_001, reps=1, warmup_share=0.2, ttft_target_ms=1e-3, tpot_target_ms=1e6)
    assert result.metrics["requests"][0] == 1_001 - 200
    assert math.isnan(result.metrics["requests"][1])  # one replication: no interval
    assert result.metrics["ttft_attainment"][0] == result.metrics["attainment"][0] == 0.0
    assert result.metrics["tpot_attainment"][0] == 1.0
    document = json.loads(json.dumps(result.to_dict()))
    assert document["metrics"]["requests"] == {"mean": 801.0, "ci95": None}
    trace = simulate_requests([0.0, 0.1], [10, 20], [1, 3], PrefillRole(1, ENGINE, 8), LINK, DecodeRole(1, ENGINE, 2), np.random.default_rng(0))
    rows = json.loads(json.dumps(trace.to_dict()))
    assert rows["requests"]["tpot_ms"][0] is None and rows["decode_tokens"] == 4
    figures = measure(trace, PrefillRole(1, ENGINE, 8), DecodeRole(1, ENGINE, 2), warmup_share=0.0)
    assert 0 < figures["decode_busy_share"] <= 1 and figures["decode_mean_occupancy"] <= 2


@pytest.mark.parametrize(("call", "field"), [
    (lambda: simulate_requests([0.0, -1.0], [1, 1], [1, 1], *_roles(), np.random.default_rng(0)), "arrival_s"),
    (lambda: simulate_requests([0.0, 1.0], [1, 0], [1, 1], *_roles(), np.random.default_rng(0)), "l_in"),
    (lambda: simulate_requests([0.0], [5], [1.5], *_roles(), np.random.default_rng(0)), "l_out"),
    (lambda: simulate_requests([0.0], [5], [1], *_roles(decode_step=roofline_engine("H100-SXM", "Llama-3-8B", 1)),
                               np.random.default_rng(0)), "decode.step"),
    (lambda: simulate_pool(*_roles(), rate_rps=0.0, l_in_tokens=[5], l_out_tokens=[5]), "rate_rps"),
    (lambda: simulate_pool(*_roles(), rate_rps=1.0, l_in_tokens=[5, 6], l_out_tokens=[5]), "l_out_tokens"),
    (lambda: simulate_pool(*_roles(), rate_rps=1.0, l_in_tokens=[5], l_out_tokens=[5], weights=[-1]), "weights"),
    (lambda: simulate_pool(*_roles(), rate_rps=1.0, l_in_tokens=[5], l_out_tokens=[5], requests=1), "requests"),
    (lambda: simulate_pool(*_roles(), rate_rps=1.0, l_in_tokens=[5], l_out_tokens=[5], warmup_share=1.0), "warmup_share"),
    (lambda: simulate_pool(*_roles(), rate_rps=1.0, l_in_tokens=[5], l_out_tokens=[5], requests=16_000_000), "requests"),
    (lambda: simulate_pool(*_roles(), rate_rps=1.0, l_in_tokens=[5], l_out_tokens=[5], tpot_target_ms=float("nan")), "tpot_target_ms"),
    (lambda: simulate_requests([0.0], [10**9], [1], PrefillRole(1, ENGINE, 1), LINK, DecodeRole(1, ENGINE, 1),
                               np.random.default_rng(0)), "prefill.token_budget"),
])
def test_bad_input_names_the_field(call, field) -> None:
    with pytest.raises(InputError) as error:
        call()
    assert error.value.field == field


def _roles(decode_step=ENGINE):
    return PrefillRole(1, ENGINE, 64), LINK, DecodeRole(1, decode_step, 4)


def test_the_docstring_example_runs() -> None:
    assert doctest.testmod(pool, raise_on_error=False).failed == 0


def test_the_guide_example_prints_what_the_guide_quotes(capsys) -> None:
    page = (REPO / "docs" / "guide" / "pd-simulation.md").read_text()
    code = page.split("```python\n")[1].split("```")[0]
    quoted = page.split("```text\n")[1].split("```")[0]
    exec(compile(code, "pd-simulation.md", "exec"), {})
    assert capsys.readouterr().out == quoted
