"""The oracle's fast forward run (forecast.forecast over a Snapshot) against the reference forward run
(forecast.oracle_latency, the simulator's own Server.step on a copy): equal bit for bit, on constructed states that
exercise each rule (idle wake-up, a decode-only stretch cut by the arrival, chunked prefill, a head blocked by KV
or by the running limit, one-token answers, reused prefixes) and on random states."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet.problems.placement.evaluate import live_request
from optfleet.problems.placement.forecast import OracleBoard, forecast, oracle_latency, snapshot
from optfleet.problems.placement.policies import Cluster, OraclePredictor, PredictedLatency, route

from test_placement import TIMING, TINY, instance, with_requests


def fast_latency(server, r, t_ms: float) -> tuple[float, float]:
    hit = server.cache.hit_blocks(r)
    return forecast(snapshot(server), r.prompt, r.output, r.total_blocks - hit, hit * server.cache.block_tokens, t_ms)


def agree_at_every_arrival(problem, placement) -> tuple[int, int]:
    """Dispatch the requests by ``placement``; before each arrival, compare the reference forecast on every server
    with the snapshot's forward run and with the board (all servers at once), exact equality (and the cluster's
    reused blocks with every server's cache).  Returns how many
    forecasts were compared and how many of them the board computed in its common (numpy) case."""
    cluster = Cluster(problem)
    board = OracleBoard(cluster.servers)
    compared = common = 0
    for i in range(len(problem.requests)):
        t = float(problem.requests.arrival_ms[i])
        r = live_request(problem, i)
        servers = [cluster.at(k, t) for k in range(len(cluster.servers))]
        hits = np.array([s.cache.hit_blocks(r) for s in servers])
        assert np.array_equal(cluster.hits(r), hits)  # asked only where the session or group was placed
        ttft, tpot = board.predict(t, r.prompt, r.output, r.total_blocks, hits, cluster.versions)
        for k, server in enumerate(servers):
            reference = oracle_latency(server, r, t)
            assert fast_latency(server, r, t) == reference, (i, k)
            assert (ttft[k], tpot[k]) == reference, (i, k)
            compared += 1
        common += board.common_last
        cluster.dispatch(i, int(placement[i]), t)
    return compared, common


def test_an_idle_server_wakes_at_the_arrival():
    problem = with_requests(instance(), [(0.0, 40, 3, 0, -1, 0), (500.0, 40, 3, 0, -1, 1)])
    cluster = Cluster(problem)
    cluster.dispatch(0, 0, 0.0)
    server = cluster.at(0, 500.0)
    assert server.iteration_end_ms is None
    r = live_request(problem, 1)
    prefill = 4 + 0.25 * 3 + 0.5 * 40  # 3 blocks held, 40 prompt tokens
    step = 4 + 1 + 0.25 * 3
    assert fast_latency(server, r, 500.0) == oracle_latency(server, r, 500.0) == (prefill, step)


def test_a_decode_stretch_in_flight_is_cut_at_the_arrival():
    problem = with_requests(instance(), [(0.0, 16, 50, 0, -1, 0), (30.0, 16, 4, 0, -1, 1)])
    cluster = Cluster(problem)
    cluster.dispatch(0, 0, 0.0)
    server = cluster.at(0, 30.0)
    assert server._repeats > 1 and server._start_ms < 30.0 < server.iteration_end_ms
    r = live_request(problem, 1)
    ttft, tpot = fast_latency(server, r, 30.0)
    assert (ttft, tpot) == oracle_latency(server, r, 30.0)
    prefill0 = 4 + 0.25 * 5 + 0.5 * 16
    step = 4 + 1 + 0.25 * 5
    join = prefill0 + np.ceil((30.0 - prefill0) / step) * step
    assert ttft == pytest.approx(join + 4 + 1 + 0.25 * 7 + 0.5 * 16 - 30.0)
    assert tpot == pytest.approx(4 + 2 + 0.25 * 7)


@pytest.mark.parametrize("reused", [False, True])
def test_an_arrival_in_a_stretchs_last_iteration_sees_the_state_after_it(reused):
    """Request 1 (P = 40, O = 5) prefills, then decodes 4 tokens in one stretch; request 2 arrives in its last
    iteration (not a cut): the board forecasts it from the state at the stretch's end, where request 1 is done and
    nothing is held, as the reference does.  With ``reused``, request 1 reuses the 2 blocks of its group's system
    prompt that request 0 left cached, so the blocks it holds are more than those its admission added."""
    group, t = (0, 1030.0) if reused else (-1, 1045.0)  # its first token at 1008.75 (8 tokens to prefill) or 1024.75
    rows = [(0.0, 40, 2, 32, group, 0), (1000.0, 40, 5, 32, group, 1), (t, 40, 3, 32, group, 2)]
    problem = with_requests(instance(), rows)
    cluster = Cluster(problem)
    cluster.dispatch(0, 0, 0.0)
    cluster.dispatch(1, 0, 1000.0)
    server = cluster.at(0, t)
    assert server.running[0].hit == (2 if reused else 0)
    assert server._repeats == 4 and server.iteration_end_ms - server._step_ms < t < server.iteration_end_ms
    compared, common = agree_at_every_arrival(problem, np.zeros(3, dtype=int))
    assert (compared, common) == (3, 3)  # all in the board's numpy case


@pytest.mark.parametrize(("seqs", "kv", "budget"), [(2, 64, 1000), (8, 12, 1000), (8, 64, 24)])
def test_queues_behind_the_running_limit_kv_and_chunked_prefill(seqs, kv, budget):
    """Five requests at once on one server with room for two (seats), for about two (KV, 12 blocks) or a 24-token
    budget (chunks): the later ones wait, and the forecast of a sixth agrees with the reference."""
    rows = [(0.0, 60, 20 + 5 * j, 0, -1, j) for j in range(5)] + [(1.0, 50, 7, 0, -1, 9)]
    problem = with_requests(instance(seqs=seqs, kv=kv, budget=budget), rows)
    cluster = Cluster(problem)
    for i in range(5):
        cluster.dispatch(i, 0, 0.0)
    server = cluster.at(0, 1.0)
    waiting_or_chunked = server.queue_depth > 0 or any(r.computed + r.chunk < r.prompt for r in server.running)
    assert waiting_or_chunked
    r = live_request(problem, 5)
    assert fast_latency(server, r, 1.0) == oracle_latency(server, r, 1.0)


def test_reused_prefixes_and_one_token_answers():
    """A second turn reuses its session's blocks; a one-token answer has TPOT 0 in both."""
    rows = [(0.0, 50, 30, 0, -1, 7), (40.0, 33, 1, 0, -1, 3), (60.0, 100, 4, 0, -1, 7), (61.0, 20, 1, 0, -1, 4)]
    problem = with_requests(instance(), rows)
    assert agree_at_every_arrival(problem, np.zeros(4, dtype=int))[0] == 4
    cluster = Cluster(problem)
    cluster.dispatch(0, 0, 0.0)
    server = cluster.at(0, 40.0)
    one = live_request(problem, 1)
    assert fast_latency(server, one, 40.0)[1] == 0.0


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(2, 30), servers=st.integers(1, 3), seqs=st.integers(1, 6),
       kv=st.integers(0, 40), budget=st.integers(8, 200), burst=st.booleans(), pair=st.sampled_from((0.0, 0.0011)))
def test_the_fast_forecast_equals_the_reference_on_random_states(seed, n, servers, seqs, kv, budget, burst, pair):
    rng = np.random.default_rng(seed)
    span = 20.0 if burst else 400.0
    arrival = np.sort(np.round(rng.uniform(0, span, n), 0 if burst else 3))  # bursts: equal arrival times too
    group = rng.integers(-1, 2, n)
    rows = [(float(arrival[i]), int(rng.integers(20, 160)), int(rng.integers(1, 40)), 32 if group[i] >= 0 else 0, int(group[i]),
             10 * (int(group[i]) + 1) + int(rng.integers(0, 4))) for i in range(n)]  # a session belongs to one group
    largest = max(-(-(p + o) // 16) for _, p, o, *_ in rows)
    problem = with_requests(instance(servers, seqs=seqs, kv=largest + kv, budget=budget,
                                     timing={**TIMING, "prefill_ms_per_pair": pair}), rows)
    assert agree_at_every_arrival(problem, rng.integers(0, servers, n))[0] == n * servers


def test_the_predictor_with_snapshots_places_as_the_exact_one():
    """The oracle predictor (snapshots kept per server state, in Python) and its exact variant make the same
    placement and the same predictions."""
    problem = optfleet.load(TINY).problem
    fast = PredictedLatency(problem, OraclePredictor, seed=problem.seed)
    exact = PredictedLatency(problem, lambda: OraclePredictor(exact=True), seed=problem.seed)
    assert np.array_equal(route(problem, fast, engine="python"), route(problem, exact))
    assert fast.predictor.accuracy.predicted == exact.predictor.accuracy.predicted
    assert fast.summary() == exact.summary()


def test_a_server_that_empties_holds_no_blocks_in_the_forecast():
    """Turn 2 of session 7 runs reusing 5 blocks; a 10-block request waits (12 blocks).  When turn 2 completes,
    nothing runs, so nothing is held (FrozenCache.release): the forecast admits the request, and it is what the
    simulator then does.  (Counting turn 2's reused blocks as held for ever kept it out: 5 + 10 > 12.)"""
    rows = [(0.0, 50, 30, 0, -1, 7), (5000.0, 100, 20, 0, -1, 7), (5001.0, 150, 10, 0, -1, 9)]
    problem = with_requests(instance(kv=12), rows)
    cluster = Cluster(problem)
    cluster.dispatch(0, 0, 0.0)
    cluster.dispatch(1, 0, 5000.0)
    server = cluster.at(0, 5001.0)
    assert server.running[0].hit == 5 and server.cache.held_blocks == 8
    r = live_request(problem, 2)
    ttft, tpot = oracle_latency(server, r, 5001.0)
    assert fast_latency(server, r, 5001.0) == (ttft, tpot)
    cluster.dispatch(2, 0, 5001.0)
    server.drain()
    done = {q.index: q for q in server.finished}[2]
    assert ttft == pytest.approx(done.first_token_ms - 5001.0)
    assert tpot == pytest.approx((done.done_ms - done.first_token_ms) / 9)


def test_the_board_takes_both_paths_on_a_realistic_load():
    """The shipped ShareGPT-like workload (cut to 150 requests on its eight servers): the board's numpy case covers
    most forecasts and the forward run the rest, both equal to the reference."""
    problem = optfleet.load(TINY.parent / "sharegpt_like.yaml", workload__arrivals={"process": "poisson", "rate_rps": 60,
                                                                                    "requests": 150}).problem
    compared, common = agree_at_every_arrival(problem, np.arange(150) % 8)
    assert compared == 150 * 8 and compared // 2 < common < compared
