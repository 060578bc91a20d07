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
from optfleet.problems.placement.predictor import StratifiedWindow, bucket  # noqa: E402

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
        window.add(low, float(value), 1.0)
    window.add(high, 99.0, None)
    x, ttft, tpot, has_tpot = window.arrays()
    assert len(window) == 3 and sorted(ttft.tolist()) == [3.0, 4.0, 99.0]  # the old regime survives the new one
    assert has_tpot.tolist().count(False) == 1


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
