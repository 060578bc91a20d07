"""The quantile-regression latency predictor: its stratified window, its online fits and its accuracy report;
and the oracle predictor, which is the simulator's own forecast."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("sklearn")

import optfleet  # noqa: E402
from optfleet.problems.placement.evaluate import live_request  # noqa: E402
from optfleet.problems.placement.forecast import oracle_latency  # noqa: E402
from optfleet.problems.placement.policies import Cluster, make_policy, route  # noqa: E402
from optfleet.problems.placement.predictor import QuantilePredictor, StratifiedWindow, bucket  # noqa: E402

from test_placement import TINY, instance, with_requests  # noqa: E402


def test_buckets_are_queue_classes_kv_tenths_and_prefix_quarters():
    assert bucket(0, 0.05, 0.0) == (0, 0, 0)
    assert bucket(1, 0.15, 0.3) == (1, 1, 1)
    assert bucket(3, 0.99, 0.8) == (2, 9, 3)
    assert bucket(9, 1.0, 1.0) == (4, 9, 3)


def test_the_window_keeps_the_newest_samples_of_every_stratum():
    window = StratifiedWindow(per_bucket=2)
    low = np.array([0.1, 100, 0, 1, 0.0, 100])
    high = np.array([0.7, 100, 9, 8, 0.9, 5000])
    for value in range(5):
        window.add(low, float(value))
    window.add(high, 99.0)
    x, ttft = window.arrays()
    assert len(window) == 3 and sorted(ttft.tolist()) == [3.0, 4.0, 99.0]  # the old regime survives the new one
    assert x.shape == (3, 6)


def _trained_on_light_load(seed: int = 0) -> QuantilePredictor:
    """A predictor fitted on light-load samples only (queue 0-2, at most 40,000 prompt tokens in flight) of a server
    whose TTFT is the prefill of the tokens ahead plus its own, about 0.06 ms a token, and 10 ms a queued request."""
    rng = np.random.default_rng(seed)
    predictor = QuantilePredictor(optfleet.load(TINY).problem)
    for _ in range(400):
        kv, prompt, queue, running = rng.uniform(0, 0.3), rng.uniform(1000, 5000), rng.integers(0, 3), rng.integers(0, 8)
        prefix, in_flight = rng.uniform(0, 1), rng.uniform(0, 40_000)
        x = np.array([kv, prompt, queue, running, prefix, in_flight])
        ttft = 0.06 * (in_flight + prompt * (1 - prefix)) + 10 * queue + rng.uniform(0, 5)
        predictor.ttft_window.add(x, ttft)
        predictor.tpot_window.add(x, 10 + 0.15 * running + rng.uniform(0, 1))
    predictor._fit()
    return predictor


def test_an_overload_beyond_the_samples_is_predicted_slower_than_an_idle_server():
    """The failure behind scenarios B-D: trees predict a constant beyond the range they were fitted on, so with TTFT
    itself as the target a server with 30 queued requests and 300,000 tokens in flight (never seen) looked as fast as
    an idle one, every server got the same prediction and the scorer's tie sent everything to the first server.
    TTFT per token of work keeps growing with the work beyond the samples and orders servers by it."""
    predictor = _trained_on_light_load()
    _, seen = predictor.ttft_window.arrays()
    idle = [0.0, 3000, 0, 0, 0.0, 0]
    busy = [0.2, 3000, 2, 6, 0.0, 38_000]
    overloaded = [0.3, 3000, 30, 8, 0.0, 300_000]
    ttft, tpot = predictor.latency(np.array([idle, busy, overloaded]))
    assert ttft[0] < ttft[1] < ttft[2]
    assert ttft[2] > 4 * ttft[1] and ttft[2] > 2 * seen.max()  # beyond anything observed: it extrapolates
    assert ttft[2] == pytest.approx(0.06 * 303_000, rel=0.5)
    assert np.all(tpot > 0)


def test_more_queue_or_less_prefix_predicts_a_slower_ttft():
    """The monotone constraints shape the splits: at equal work, a long queue or many running requests predict a
    TTFT no lower than a short one, a full prefix hit none higher than a miss.  (scikit-learn then resets each leaf to
    the p90 of its residuals, which can break the order a little: only the ends are compared, within 1 %.)"""
    predictor = _trained_on_light_load(1)
    base = np.array([0.1, 3000, 1, 4, 0.5, 20_000])
    for column, low, high, direction in ((2, 0, 2, 1), (3, 0, 7, 1), (4, 0.0, 1.0, -1)):
        rows = np.repeat(base[None, :], 2, axis=0)
        rows[:, column] = (low, high)
        ttft, _ = predictor.latency(rows)
        assert direction * (ttft[1] - ttft[0]) >= -0.01 * ttft.max()


def test_ttft_is_sampled_at_the_first_token_not_at_completion():
    """A request with a long output gives its TTFT sample as soon as its first token is out; its TPOT sample waits
    for the completion.  (At completion, 1,000-token outputs delayed the first fit by 30-45 s on scenarios B-D.)"""
    problem = with_requests(instance(servers=1, kv=640), [(0.0, 40, 400, 0, -1, 0), (5000.0, 40, 2, 0, -1, 1)])
    cluster = Cluster(problem)
    predictor = QuantilePredictor(problem)
    state = cluster.state(0, 0.0)
    ttft, tpot = predictor.predict(cluster, 0, 0.0, state)
    predictor.chosen(cluster, 0, 0.0, 0, state, ttft[0], tpot[0])
    cluster.dispatch(0, 0, 0.0)
    state = cluster.state(1, 500.0)  # the first token came at 24.75 ms + blocks; 400 tokens take over a second
    predictor.predict(cluster, 1, 500.0, state)
    assert len(predictor.ttft_window) == 1 and len(predictor.tpot_window) == 0
    _, seen = predictor.ttft_window.arrays()
    done = cluster.servers[0].running[0]
    assert seen[0] == pytest.approx(done.first_token_ms)
    cluster.servers[0].drain()
    predictor.predict(cluster, 1, 5000.0, cluster.state(1, 5000.0))
    assert len(predictor.ttft_window) == 1 and len(predictor.tpot_window) == 1


def test_the_quantile_predictor_trains_online_and_reports_its_error():
    problem = optfleet.load(TINY).problem
    policy = make_policy(problem, "predicted_latency", {"predictor": "quantile", "retrain_every": 5, "per_bucket": 50}, "p")
    placement = route(problem, policy)
    summary = policy.summary()
    assert placement.min() >= 0 and summary["predictor_fits"] >= 1
    assert 0 < summary["predicted_requests"] <= len(problem.requests)
    assert summary["ttft_mape_pct"] > 0


def test_the_oracle_forecast_is_exact_without_later_arrivals():
    """With nothing arriving after it, the oracle's forecast is what the simulator then does."""
    problem = with_requests(instance(servers=1), [(0.0, 40, 30, 0, -1, 0), (50.0, 64, 20, 0, -1, 1)])
    cluster = Cluster(problem)
    cluster.dispatch(0, 0, 0.0)
    r = live_request(problem, 1)
    ttft, tpot = oracle_latency(cluster.at(0, 50.0), r, 50.0)
    cluster.dispatch(1, 0, 50.0)
    server = cluster.servers[0]
    server.drain()
    done = {q.index: q for q in server.finished}[1]
    assert ttft == pytest.approx(done.first_token_ms - 50.0)
    assert tpot == pytest.approx((done.done_ms - done.first_token_ms) / 19)
