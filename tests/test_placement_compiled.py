"""The compiled placement simulator (placement/compiled/) against the Python reference: the same placement, the same oracle
accuracy and the same timeline, bit for bit, on every shipped instance and on random instances that exercise the
rules (heterogeneous servers, KV tight enough to evict, bursts of equal arrival times, multi-turn sessions, one-token
answers, every SLO combination, exploration and the affinity gate)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet.errors import InputError
from optfleet.problems.placement.engines import compiled_engine
from optfleet.problems.placement.evaluate import replay
from optfleet.problems.placement.policies import OraclePredictor, PredictedLatency, make_policy, route
from optfleet.problems.placement.schema import SloSpec

from test_placement import PLACEMENT, TIMING, with_requests

pytest.importorskip("numba")


def same_timeline(problem, placement) -> None:
    python, compiled = replay(problem, placement, engine="python"), replay(problem, placement, engine="compiled")
    for name in ("server", "hit_tokens", "first_token_ms", "done_ms"):
        assert np.array_equal(getattr(python, name), getattr(compiled, name)), name


def same_oracle_route(problem, **options) -> np.ndarray:
    """The predicted-latency scorer with the oracle, both engines: equal placements and accuracy summaries."""
    python = PredictedLatency(problem, OraclePredictor, seed=problem.seed, **options)
    compiled = PredictedLatency(problem, OraclePredictor, seed=problem.seed, **options)
    placement = route(problem, python, engine="python")
    assert np.array_equal(placement, route(problem, compiled, engine="compiled"))
    assert python.summary() == compiled.summary()
    assert python.rng.random() == compiled.rng.random()  # one exploration draw per request, both ways
    return placement


@pytest.mark.parametrize("path", sorted(PLACEMENT.glob("*.yaml")), ids=lambda p: p.stem)
def test_every_shipped_instance_routes_and_replays_alike(path: Path):
    problem = optfleet.load(path).problem
    same_timeline(problem, same_oracle_route(problem))
    rng = np.random.default_rng(0)
    same_timeline(problem, rng.integers(0, len(problem.engines), len(problem.requests)))


def test_progress_hears_every_percent_and_the_accuracy_counts_every_request():
    problem = optfleet.load(PLACEMENT / "sharegpt_like.yaml").problem
    n = len(problem.requests)
    for engine in ("compiled", "python"):
        policy = make_policy(problem, "predicted_latency", {}, "test")
        shares = []
        route(problem, policy, shares.append, engine=engine)
        assert shares == [i / n for i in range(0, n, max(1, n // 100))]
        assert policy.summary()["predicted_requests"] == n


SLOS = ({}, {"ttft_ms": 40.0}, {"tpot_ms": 9.0}, {"ttft_ms": 40.0, "tpot_ms": 9.0}, {"ttft_ms": 40.0, "tpot_ms": 9.0, "buffer": 0.9})


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(2, 40), counts=st.tuples(st.integers(1, 3), st.integers(0, 2)),
       seqs=st.integers(1, 6), kv=st.integers(0, 40), budget=st.integers(8, 200), burst=st.booleans(), slo=st.sampled_from(SLOS),
       explore=st.sampled_from((0.0, 0.3, 1.0)), tau=st.sampled_from((0.0, 0.5, 0.8)), penalty=st.sampled_from((5.0, 5000.0)))
def test_random_instances_route_and_replay_alike(seed, n, counts, seqs, kv, budget, burst, slo, explore, tau, penalty):
    rng = np.random.default_rng(seed)
    span = 20.0 if burst else 400.0
    arrival = np.sort(np.round(rng.uniform(0, span, n), 0 if burst else 3))
    group = rng.integers(-1, 2, n)
    rows = [(float(arrival[i]), int(rng.integers(20, 160)), int(rng.integers(1, 40)), 32 if group[i] >= 0 else 0, int(group[i]),
             10 * (int(group[i]) + 1) + int(rng.integers(0, 4))) for i in range(n)]  # a session belongs to one group
    largest = max(-(-(p + o) // 16) for _, p, o, *_ in rows)
    other = {"prefill_ms_per_token": 0.3, "step_base_ms": 7.1, "step_ms_per_seq": 0.7, "step_ms_per_kv_block": 0.1,
             "prefill_ms_per_pair": 0.0013}  # the prefill attention term on one server type
    servers = [{"count": counts[0], "max_running_seqs": seqs, "kv_capacity_blocks": largest + kv, "prefill_budget_tokens": budget,
                "timing": TIMING}]
    if counts[1]:
        servers.append({"name": "other", "count": counts[1], "max_running_seqs": seqs + 2, "kv_capacity_blocks": largest + 2 * kv,
                        "prefill_budget_tokens": budget + 31, "timing": other})
    doc = {"kind": "placement", "name": "t", "servers": servers,
           "workload": {"shared_prefix": {"num_groups": 1, "num_prompts_per_group": 1, "system_prompt_len": 0, "question_len": 8,
                                          "output_len": 2}, "arrivals": {"process": "poisson", "rate_rps": 1, "requests": 1}},
           "policies": ["round_robin"]}
    problem = replace(with_requests(doc, rows), slo=SloSpec(**slo))
    placement = same_oracle_route(problem, explore_probability=explore, affinity_tau=tau, affinity_max_ttft_penalty_ms=penalty)
    same_timeline(problem, placement)
    same_timeline(problem, rng.integers(0, len(problem.engines), n))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(20, 90), servers=st.integers(1, 2), seqs=st.integers(1, 8), kv=st.integers(0, 8),
       sessions=st.integers(1, 4), pair=st.sampled_from((0.0, 0.0007)))
def test_cache_heavy_random_instances_replay_alike(seed, n, servers, seqs, kv, sessions, pair):
    """Few sessions with prompts of many blocks, KV a few blocks above the largest request, a third of the answers
    one token long: the caches hold several cached segments per origin, evict often, and requests complete at their
    prefill beside decoders completing in the same iteration."""
    rng = np.random.default_rng(seed)
    arrival = np.sort(np.round(rng.uniform(0, 30.0 * n, n), 0))
    output = np.where(rng.random(n) < 0.35, 1, rng.integers(2, 30, n))
    session = rng.integers(0, sessions, n)
    group = session % 2 - 1  # a session keeps its group (even ones have none)
    rows = [(float(arrival[i]), int(rng.integers(49, 400)), int(output[i]), 48 if group[i] >= 0 else 0, int(group[i]), int(session[i]))
            for i in range(n)]
    largest = max(-(-(p + o) // 16) for _, p, o, *_ in rows)
    doc = {"kind": "placement", "name": "t",
           "servers": [{"count": servers, "max_running_seqs": seqs, "kv_capacity_blocks": largest + kv, "prefill_budget_tokens": 64,
                        "timing": {**TIMING, "prefill_ms_per_pair": pair}}],
           "workload": {"shared_prefix": {"num_groups": 1, "num_prompts_per_group": 1, "system_prompt_len": 0, "question_len": 8,
                                          "output_len": 2}, "arrivals": {"process": "poisson", "rate_rps": 1, "requests": 1}},
           "policies": ["round_robin"]}
    problem = with_requests(doc, rows)
    same_timeline(problem, same_oracle_route(problem))
    same_timeline(problem, rng.integers(0, servers, n))


def compiled_choice(ttft, tpot, prefix, idle, explore, slo: SloSpec, tau, penalty, weight) -> int:
    from optfleet.problems.placement.compiled.kernels import choose

    k = len(ttft)
    settings_ = np.array([weight, tau, penalty, slo.buffer, np.nan if slo.ttft_ms is None else slo.ttft_ms,
                          np.nan if slo.tpot_ms is None else slo.tpot_ms])
    has_slo = np.array([slo.ttft_ms is not None, slo.tpot_ms is not None])
    scratch = [np.zeros(k), np.zeros(k), np.zeros(k, dtype=np.int64), np.zeros(k, dtype=np.int64)]
    return int(choose(np.array(ttft), np.array(tpot), np.array(prefix), np.array(idle), explore, settings_, has_slo, *scratch))


def python_choice(ttft, tpot, prefix, idle, explore, slo: SloSpec, tau, penalty, weight) -> int:
    from optfleet.problems.placement.policies import affinity_candidates, pick_by_latency

    ttft, tpot, prefix, idle = np.array(ttft), np.array(tpot), np.array(prefix), np.array(idle)
    candidates = affinity_candidates(prefix, ttft, tau, penalty, explore)
    return int(candidates[pick_by_latency(ttft[candidates], tpot[candidates], idle[candidates], slo.ttft_ms, slo.tpot_ms, slo.buffer, weight)])


@pytest.mark.parametrize("case, expected", [
    # the sticky server exactly `penalty` (2 ms) behind the best keeps the request (the gate breaks only beyond it)
    (([40.0, 38.0], [9.0, 9.0], [1.0, 0.0], [False, False], False, SloSpec(), 0.5, 2.0, 0.8), 0),
    # TTFT headroom exactly 0 with TPOT negative is the TPOT-only tier, ahead of TTFT-only negative
    (([40.0, 41.0], [9.25, 8.5], [0.0, 0.0], [False, False], False, SloSpec(ttft_ms=40.0, tpot_ms=9.0), 0.8, 5000.0, 0.0), 0),
    # TPOT headroom exactly 0 with TTFT negative is the TTFT-only tier, ahead of both negative
    (([41.0, 40.5], [9.0, 9.5], [0.0, 0.0], [False, False], False, SloSpec(ttft_ms=40.0, tpot_ms=9.0), 0.8, 5000.0, 0.8), 0),
    # an idle server comes before every negative tier
    (([41.0, 40.5], [9.0, 9.5], [0.0, 0.0], [False, True], False, SloSpec(ttft_ms=40.0, tpot_ms=9.0), 0.8, 5000.0, 0.8), 1),
])
def test_the_compiled_choice_on_constructed_states(case, expected):
    assert python_choice(*case) == compiled_choice(*case) == expected


@settings(max_examples=300, deadline=None)
@given(data=st.data(), k=st.integers(1, 6), slo=st.sampled_from(SLOS), explore=st.booleans(), tau=st.sampled_from((0.0, 0.5, 1.0)),
       penalty=st.sampled_from((0.0, 1.0, 2.0)), weight=st.sampled_from((0.0, 0.8, 1.0)))
def test_the_compiled_choice_is_the_scorers(data, k, slo, explore, tau, penalty, weight):
    """compiled.choose against policies.affinity_candidates + pick_by_latency on small whole numbers, so that ties,
    a sticky server exactly ``penalty`` behind the best, headrooms exactly 0 and equal normalisations all occur."""
    values = st.lists(st.sampled_from((38.0, 39.0, 40.0, 41.0, 42.0)), min_size=k, max_size=k)
    ttft, tpot = data.draw(values), [v / 4.0 - 1.0 for v in data.draw(values)]  # TPOT 8.5-9.5 about the SLO of 9
    prefix = data.draw(st.lists(st.sampled_from((0.0, 0.5, 1.0)), min_size=k, max_size=k))
    idle = data.draw(st.lists(st.booleans(), min_size=k, max_size=k))
    case = (ttft, tpot, prefix, idle, explore, SloSpec(**slo), tau, penalty, weight)
    assert compiled_choice(*case) == python_choice(*case)


def test_session_ids_up_to_2_53_name_no_other_server_s_cache():
    """A trace's ids may reach 2**53; the compiled caches key an origin by server and id, renumbered densely first
    (keyed by the raw id, server 1024 read server 0's blocks of session 7 through an int64 overflow)."""
    rows = [(0.0, 200, 4, 0, -1, 7), (1000.0, 200, 4, 0, -1, 7), (2000.0, 20, 2, 0, -1, 2**53 - 1)]
    doc = {"kind": "placement", "name": "t",
           "servers": [{"count": 1025, "max_running_seqs": 2, "kv_capacity_blocks": 64, "prefill_budget_tokens": 512, "timing": TIMING}],
           "workload": {"shared_prefix": {"num_groups": 1, "num_prompts_per_group": 1, "system_prompt_len": 0, "question_len": 8,
                                          "output_len": 2}, "arrivals": {"process": "poisson", "rate_rps": 1, "requests": 1}},
           "policies": ["round_robin"]}
    problem = with_requests(doc, rows)
    placement = np.array([0, 1024, 5])
    same_timeline(problem, placement)
    assert replay(problem, placement, engine="compiled").hit_tokens.tolist() == [0, 0, 0]


def small_doc(timing: dict | None = None, kv: int = 19, seqs: int = 1) -> dict:
    return {"kind": "placement", "name": "t",
            "servers": [{"count": 2, "max_running_seqs": seqs, "kv_capacity_blocks": kv, "prefill_budget_tokens": 64, "timing": timing or TIMING}],
            "workload": {"shared_prefix": {"num_groups": 1, "num_prompts_per_group": 1, "system_prompt_len": 0, "question_len": 8,
                                           "output_len": 2}, "arrivals": {"process": "poisson", "rate_rps": 1, "requests": 1}},
            "policies": ["round_robin"]}


def test_iterations_below_the_times_resolution_leave_the_mape_defined():
    """Picosecond iterations at t = 1e9 ms: arrival + step == arrival, so TTFT and TPOT are 0 and have no percentage
    error; both engines leave them out of the MAPE (the reference divided by zero) and agree."""
    timing = {"prefill_ms_per_token": 1e-12, "step_base_ms": 1e-12, "step_ms_per_seq": 0.0, "step_ms_per_kv_block": 0.0}
    problem = with_requests(small_doc(timing, kv=64), [(1e9, 40, 5, 0, -1, 0), (1e9 + 1000, 40, 5, 0, -1, 1)])
    same_timeline(problem, same_oracle_route(problem))
    policy = PredictedLatency(problem, OraclePredictor, seed=problem.seed)
    route(problem, policy, engine="compiled")
    assert policy.summary() == {"predicted_requests": 2, "ttft_mape_pct": None, "tpot_mape_pct": None}


def test_requests_that_disagree_on_their_origins_stop_both_engines():
    """A session first without a group, then in group 0 (the trace loader refuses it; here built directly): the
    Python cache raises KeyError, the compiled one a RuntimeError saying why (it used to loop for ever)."""
    problem = with_requests(small_doc(), [(51.0, 144, 18, 0, -1, 0), (393.0, 199, 6, 16, 0, 0)])
    with pytest.raises(KeyError):
        replay(problem, np.array([0, 0]), engine="python")
    with pytest.raises(RuntimeError, match="groups and sessions disagree"):
        replay(problem, np.array([0, 0]), engine="compiled")


def test_an_engine_is_named_or_refused(monkeypatch):
    from optfleet.problems.placement import engines
    from optfleet.problems.placement.compiled import runs

    problem = optfleet.load(PLACEMENT / "tiny.yaml").problem
    monkeypatch.delenv(engines.ENVIRONMENT, raising=False)
    assert compiled_engine(problem, "python") is None
    assert compiled_engine(problem, "compiled") is runs
    assert compiled_engine(problem) is compiled_engine(problem, "auto") is None  # 40 requests: below the floor, Python
    monkeypatch.setattr(engines, "AUTO_MIN_REQUESTS", 40)
    assert compiled_engine(problem, "auto") is runs
    with pytest.raises(InputError, match="engine = 'gpu': unknown simulator engine; known: auto, python, compiled"):
        compiled_engine(problem, "gpu")
    monkeypatch.setenv(engines.ENVIRONMENT, "python")  # the command line's choice, when the caller names none
    assert compiled_engine(problem) is None and compiled_engine(problem, "compiled") is runs
    monkeypatch.setenv(engines.ENVIRONMENT, "numba")
    with pytest.raises(InputError, match="OPTFLEET_PLACEMENT_ENGINE = 'numba': unknown simulator engine"):
        compiled_engine(problem)
    monkeypatch.setattr(runs, "MAX_CELLS", 10)  # tables too large: auto falls back to Python, compiled says why not
    assert compiled_engine(problem, "auto") is None
    with pytest.raises(InputError, match="running slots exceed the compiled tables' 10 cells"):
        compiled_engine(problem, "compiled")


def test_the_command_line_chooses_the_engine_by_environment(tmp_path, capsys, monkeypatch):
    """OPTFLEET_PLACEMENT_ENGINE reaches the command line: both engines print the same result; a bad value is one
    error naming the variable, exit 2, nothing on stdout."""
    from optfleet.cli import main

    tiny = str(PLACEMENT / "tiny.yaml")
    outputs = []
    for engine in ("python", "compiled"):
        monkeypatch.setenv("OPTFLEET_PLACEMENT_ENGINE", engine)
        assert main(["solve", tiny, "--method", "predicted_latency", "--json", "--quiet"]) == 0
        document = json.loads(capsys.readouterr().out)
        outputs.append([{k: v for k, v in r.items() if k not in ("seconds", "time_s")} for r in document["results"]])
    assert outputs[0] == outputs[1]
    monkeypatch.setenv("OPTFLEET_PLACEMENT_ENGINE", "gpu")
    assert main(["solve", tiny, "--method", "round_robin", "--json", "--quiet"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "OPTFLEET_PLACEMENT_ENGINE = 'gpu'" in captured.err
