"""The placement kind: the server simulator against hand-worked timelines, prefix reuse counted exactly, each
scorer's decision on constructed states, the MILP against brute force, the bounds against the simulator, the
capacity table and bad input."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet.errors import InputError
from optfleet.problems.placement.bounds import relaxation_bound, srpt_total_flow_ms
from optfleet.problems.placement.capacity import capacity_row
from optfleet.problems.placement.evaluate import evaluate, replay
from optfleet.problems.placement.policies import (
    LoadPrefix,
    affinity_candidates,
    make_policy,
    pick_by_latency,
    queue_score,
    route,
)
from optfleet.problems.placement.workload import Requests

from support import REPO, documentation_text

PLACEMENT = REPO / "instances" / "placement"
TINY = PLACEMENT / "tiny.yaml"

TIMING = {"prefill_ms_per_token": 0.5, "step_base_ms": 4.0, "step_ms_per_seq": 1.0, "step_ms_per_kv_block": 0.25}


def instance(servers: int = 1, *, seqs: int = 8, kv: int = 64, budget: int = 1000, timing: dict | None = None, **solve) -> dict:
    return {"kind": "placement", "name": "t",
            "servers": [{"count": servers, "max_running_seqs": seqs, "kv_capacity_blocks": kv, "prefill_budget_tokens": budget,
                         "timing": timing or TIMING}],
            "workload": {"shared_prefix": {"num_groups": 1, "num_prompts_per_group": 1, "system_prompt_len": 0, "question_len": 8,
                                           "output_len": 2}, "arrivals": {"process": "poisson", "rate_rps": 1, "requests": 1}},
            "policies": ["round_robin"], "solve": solve}


def with_requests(doc: dict, rows: list[tuple]) -> object:
    """The prepared problem of ``doc`` with its requests replaced by ``rows``:
    (arrival_ms, prompt, output, shared, group, session)."""
    problem = optfleet.load(doc).problem
    a = np.array(rows, dtype=float)
    n = len(rows)
    requests = Requests(a[:, 0], a[:, 1].astype(np.int64), a[:, 2].astype(np.int64), a[:, 3].astype(np.int64), a[:, 4].astype(np.int64),
                        a[:, 5].astype(np.int64), np.ones(n, dtype=np.int64), np.zeros(n, dtype=np.int64))
    block = problem.block_tokens
    total = -(-(requests.prompt_tokens + requests.output_tokens) // block)
    return replace(problem, requests=requests, total_blocks=total)


# --- the simulator against closed forms ---------------------------------------------------------------------------

def test_one_request_prefill_then_decode_closed_form():
    """P = 40 prompt tokens, O = 5 output: blocks = ceil(45/16) = 3 held.  Prefill iteration: 4 + 0.25 x 3 + 0.5 x 40
    = 24.75 ms (first token); then 4 decode iterations of 4 + 1 + 0.75 = 5.75 ms: E2E = 24.75 + 23 = 47.75 ms."""
    problem = with_requests(instance(), [(100.0, 40, 5, 0, -1, 0)])
    e = evaluate(problem, np.zeros(1, dtype=int))
    assert e.ttft_ms[0] == pytest.approx(24.75)
    assert e.e2e_ms[0] == pytest.approx(47.75)
    assert e.tpot_ms[0] == pytest.approx(5.75)
    assert e.ntpot_ms[0] == pytest.approx(47.75 / 5)


@pytest.mark.parametrize("n", [1, 3, 6])
def test_a_batch_arriving_together_is_the_closed_form_timeline(n):
    """n requests of P = 32, O = 10 at t = 0 (3 blocks each): one prefill iteration of 4 + 0.25 x 3n + 0.5 x 32n, then
    9 decode iterations of 4 + n + 0.25 x 3n; every request finishes together."""
    problem = with_requests(instance(), [(0.0, 32, 10, 0, -1, i) for i in range(n)])
    e = evaluate(problem, np.zeros(n, dtype=int))
    prefill = 4 + 0.75 * n + 16 * n
    decode = 4 + n + 0.75 * n
    assert np.allclose(e.ttft_ms, prefill)
    assert np.allclose(e.e2e_ms, prefill + 9 * decode)


def test_chunked_prefill_and_the_running_limit():
    """Budget 16 tokens: P = 40 prefills in chunks 16, 16, 8; with max 1 running sequence the second request waits
    for the first to finish."""
    problem = with_requests(instance(seqs=1, budget=16), [(0.0, 40, 2, 0, -1, 0), (0.0, 40, 2, 0, -1, 1)])
    e = evaluate(problem, np.zeros(2, dtype=int))
    held = 0.25 * 3  # ceil(42 / 16) = 3 blocks
    first = (4 + held + 8) * 2 + (4 + held + 4)
    assert e.ttft_ms[0] == pytest.approx(first)
    done = first + 4 + 1 + held
    assert e.e2e_ms[0] == pytest.approx(done)
    assert e.ttft_ms[1] == pytest.approx(done + first)  # admitted only after the first completes


def test_a_decode_stretch_is_cut_by_an_arrival_exactly_as_iteration_by_iteration():
    """A request arriving mid-decode joins at the end of the iteration in flight (the stretch is cut there)."""
    problem = with_requests(instance(), [(0.0, 16, 50, 0, -1, 0), (30.0, 16, 1, 0, -1, 1)])
    e = evaluate(problem, np.zeros(2, dtype=int))
    prefill0 = 4 + 0.25 * 5 + 0.5 * 16  # 5 blocks (66 tokens)
    step = 4 + 1 + 0.25 * 5
    k = int(np.ceil((30.0 - prefill0) / step))  # the first iteration ending at or after the arrival
    join = prefill0 + k * step
    second = 4 + 1 + 0.25 * (5 + 2) + 0.5 * 16  # decodes request 0 and prefills request 1 (2 blocks)
    assert e.ttft_ms[1] == pytest.approx(join + second - 30.0)


# --- prefix reuse counted exactly -------------------------------------------------------------------------------

def test_group_prefix_reuse_is_whole_blocks_of_the_system_prompt():
    """System prompt 100 tokens = 6 whole blocks of 16 (96 tokens): a later request of the group reuses 96 tokens
    on the same server, none on another."""
    rows = [(0.0, 150, 2, 100, 0, 0), (1000.0, 160, 2, 100, 0, 1), (2000.0, 160, 2, 100, 0, 2)]
    problem = with_requests(instance(servers=2), rows)
    t = replay(problem, np.array([0, 0, 1]))
    assert t.hit_tokens.tolist() == [0, 96, 0]


def test_multi_turn_reuses_the_previous_prompt_and_answer():
    """Turn 1: P = 50, O = 30 publishes floor(80/16) = 5 blocks; turn 2 (P = 80 + 20 = 100) reuses 80 tokens."""
    problem = with_requests(instance(), [(0.0, 50, 30, 0, -1, 7), (5000.0, 100, 4, 0, -1, 7)])
    t = replay(problem, np.zeros(2, dtype=int))
    assert t.hit_tokens.tolist() == [0, 80]


def test_a_fully_cached_prompt_still_computes_its_last_token():
    """P = 32 all cached: reuse stops at floor((32 - 1) / 16) = 1 block."""
    problem = with_requests(instance(), [(0.0, 32, 1, 32, 0, 0), (1000.0, 32, 1, 32, 0, 1)])
    assert replay(problem, np.zeros(2, dtype=int)).hit_tokens.tolist() == [0, 16]


def test_lru_evicts_the_least_recent_prefix_deepest_block_first():
    """Capacity 9 blocks, requests of 5 blocks whose first 4 are their group's system prompt.  Request 2 needs 5
    blocks beside groups 0 and 1 cached (8): it evicts group 0's 4 blocks (least recently used, deepest first) and
    keeps group 1's whole, which request 3 reuses; request 4 finds group 0 gone."""
    rows = [(0.0, 70, 1, 64, 0, 0), (100.0, 70, 1, 64, 1, 1), (200.0, 70, 1, 64, 2, 2),
            (300.0, 70, 1, 64, 1, 3), (400.0, 70, 1, 64, 0, 4)]
    problem = with_requests(instance(kv=9), rows)
    t = replay(problem, np.zeros(5, dtype=int))
    assert t.hit_tokens.tolist() == [0, 0, 0, 64, 0]


# --- scorers on constructed states ------------------------------------------------------------------------------

def test_best_fit_picks_the_least_positive_headroom():
    ttft = np.array([100.0, 300.0, 500.0, 700.0])
    tpot = np.array([10.0, 10.0, 10.0, 10.0])
    idle = np.zeros(4, dtype=bool)
    assert pick_by_latency(ttft, tpot, idle, 600.0, 20.0, 1.0, 0.8) == 2  # 700 breaks the SLO; 500 fits tightest


def test_negative_headroom_tiers_idle_then_tpot_only_then_ttft_only_then_both():
    ttft = np.array([900.0, 500.0, 800.0, 950.0])
    tpot = np.array([30.0, 30.0, 10.0, 40.0])
    assert pick_by_latency(ttft, tpot, np.array([False, False, False, True]), 600.0, 20.0, 1.0, 0.8) == 3  # idle first
    none_idle = np.zeros(4, dtype=bool)
    assert pick_by_latency(ttft, tpot, none_idle, 600.0, 20.0, 1.0, 0.8) == 1  # only TPOT negative
    assert pick_by_latency(ttft[[0, 2, 3]], tpot[[0, 2, 3]], none_idle[:3], 600.0, 20.0, 1.0, 0.8) == 1  # only TTFT negative
    both = pick_by_latency(np.array([900.0, 700.0]), np.array([30.0, 40.0]), np.zeros(2, dtype=bool), 600.0, 20.0, 1.0, 0.8)
    assert both == 1  # combined headroom 0.8 x 1 + 0.2 x 0 beats 0.8 x 0 + 0.2 x 1


def test_without_slo_the_lowest_combined_prediction_wins_and_the_buffer_scales_the_slo():
    ttft, tpot = np.array([100.0, 120.0, 90.0]), np.array([50.0, 10.0, 60.0])
    assert pick_by_latency(ttft, tpot, np.zeros(3, dtype=bool), None, None, 1.0, 0.8) == 2
    # SLO 110 x buffer 1.0: only 100 and 90 fit -> best fit 100; buffer 1.2 lets 120 in -> it fits tightest
    assert pick_by_latency(ttft, tpot, np.zeros(3, dtype=bool), 110.0, None, 1.0, 0.8) == 0
    assert pick_by_latency(ttft, tpot, np.zeros(3, dtype=bool), 110.0, None, 1.2, 0.8) == 1


def test_affinity_gate_keeps_sticky_servers_unless_exploring_or_too_slow():
    prefix = np.array([0.9, 0.85, 0.1])
    assert affinity_candidates(prefix, np.array([5400.0, 5600.0, 500.0]), 0.8, 5000.0, False).tolist() == [0, 1]
    assert affinity_candidates(prefix, np.array([5600.0, 5700.0, 500.0]), 0.8, 5000.0, False).tolist() == [0, 1, 2]
    assert affinity_candidates(prefix, np.array([100.0, 100.0, 100.0]), 0.8, 5000.0, True).tolist() == [0, 1, 2]
    assert affinity_candidates(np.array([0.5, 0.79]), np.array([1.0, 1.0]), 0.8, 5000.0, False).tolist() == [0, 1]


def test_load_prefix_scores_weigh_prefix_queue_and_kv():
    state = {"prefix": np.array([1.0, 0.0, 0.5]), "queue": np.array([4.0, 0.0, 2.0]), "kv": np.array([0.5, 0.9, 0.2])}
    assert queue_score(state["queue"]).tolist() == [0.0, 1.0, 0.5]
    assert np.allclose(LoadPrefix(1, 1, 1, 0).scores(state), [1.5, 1.1, 1.8])
    assert np.allclose(LoadPrefix(3, 2, 2, 0).scores(state), [4.0, 2.2, 4.1])
    assert queue_score(np.array([3.0, 3.0])).tolist() == [1.0, 1.0]


def test_round_robin_and_least_requests_on_a_trace():
    problem = with_requests(instance(servers=3), [(float(i), 16, 100, 0, -1, i) for i in range(6)])
    assert route(problem, make_policy(problem, "round_robin", {}, "p")).tolist() == [0, 1, 2, 0, 1, 2]
    assert route(problem, make_policy(problem, "least_requests", {}, "p")).tolist() == [0, 1, 2, 0, 1, 2]


# --- the MILP against brute force, the bounds against the simulator --------------------------------------------

def _tiny(seed: int, n: int, servers: int = 2):
    rng = np.random.default_rng(seed)
    rows = [(float(t), int(p), int(o), 32, int(g), int(s)) for t, p, o, g, s in
            zip(np.sort(rng.uniform(0, 60, n)), rng.integers(40, 120, n), rng.integers(1, 6, n), rng.integers(0, 2, n), rng.integers(0, 3, n), strict=True)]
    rows = [(t, p, o, 32, g, 10 * g + s) for t, p, o, _, g, s in rows]  # sessions belong to one group
    return with_requests(instance(servers=servers, kv=64), rows)


@pytest.mark.solved
@pytest.mark.parametrize(("seed", "objective", "heterogeneous"), [(0, "total_ttft", False), (1, "total_ttft", True), (2, "ttft_excess", False),
                                                                  (3, "ttft_excess", True)])
def test_hindsight_milp_equals_brute_force_of_its_model_and_bounds_the_simulator(seed, objective, heterogeneous):
    """Six requests on two servers (identical, or one twice as slow to prefill): the MILP's optimum is the best of
    the 64 placements under its own model, and its bound is below every placement's simulated objective."""
    from optfleet.models.placement import model_ttft_ms
    from optfleet.problems.placement.exact import hindsight, placement_data

    problem = _tiny(seed, 6)
    problem = replace(problem, slo=problem.slo.model_copy(update={"ttft_ms": 30.0}), solve=problem.solve.model_copy(update={"objective": objective}))
    if heterogeneous:
        slow = replace(problem.engines[1], prefill_ms_per_token=1.0, step_base_ms=6.0)
        problem = replace(problem, engines=(problem.engines[0], slow))
    data = placement_data(problem, 0, 6)
    placement, report = hindsight(problem)
    assert report.proven_optimal

    def model_objective(p) -> float:
        ttft = model_ttft_ms(data, np.array(p))
        return float(np.maximum(0.0, ttft - 30.0).mean() if objective == "ttft_excess" else ttft.mean())

    placements = list(itertools.product(range(2), repeat=6))
    assert report.objective == pytest.approx(min(model_objective(p) for p in placements), rel=1e-6, abs=1e-6)
    best_simulated = min(evaluate(problem, np.array(p)).objective_ms for p in placements)
    assert report.bound <= best_simulated + 1e-6
    assert relaxation_bound(problem)[0] <= best_simulated + 1e-6


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 9), kv=st.integers(16, 40))
def test_the_model_ttft_is_below_the_simulated_ttft_request_by_request(seed, n, kv):
    """The proof of bounds.py, checked: for any placement, every request's model TTFT <= its simulated TTFT."""
    from optfleet.models.placement import model_ttft_ms
    from optfleet.problems.placement.exact import placement_data

    problem = _tiny(seed, n, servers=2)
    kv = max(kv, int(problem.total_blocks.max()))
    problem = replace(problem, engines=tuple(replace(e, kv_capacity_blocks=kv) for e in problem.engines))
    placement = np.random.default_rng(seed).integers(0, 2, n)
    simulated = evaluate(problem, placement).ttft_ms
    model = model_ttft_ms(placement_data(problem, 0, n), placement)
    assert np.all(model <= simulated + 1e-6)


def test_srpt_relaxation_on_a_hand_worked_case():
    """Jobs (release, work) = (0, 4), (1, 1) at rate 1: SRPT runs job 1 at 1..2, job 0 ends at 5: flows 5 + 1 = 6."""
    assert srpt_total_flow_ms(np.array([0.0, 1.0]), np.array([4.0, 1.0]), 1.0) == pytest.approx(6.0)
    assert srpt_total_flow_ms(np.array([0.0, 10.0]), np.array([4.0, 1.0]), 2.0) == pytest.approx(2.5)


# --- the capacity table -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("groups", "users", "sys", "user", "out", "unique_user", "user_fit"), [
    (6, 1000, 1000, 30, 1000, 24_720_000, 20.69), (6, 1000, 1000, 3000, 1000, 96_000_000, 5.33),
    (150, 5, 6000, 1200, 1000, 6_600_000, 63.94), (150, 5, 1000, 6200, 1000, 21_600_000, 23.01)])
def test_the_blog_appendix_capacity_table(groups, users, sys, user, out, unique_user, user_fit):
    row = capacity_row(groups, users, sys, user, out)
    assert row["capacity_tokens"] == 5_120_000 and row["unique_sys_tokens"] == groups * sys
    assert row["unique_user_tokens"] == unique_user
    assert row["sys_fit_pct"] == 100.0 and round(row["user_fit_pct"], 2) == user_fit


def test_validate_prints_the_capacity_check():
    text = optfleet.validate(PLACEMENT / "scenario_c.yaml").text
    assert "63.94 % of user histories fit" in text


# --- bad input --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d.update(servers=[]), "servers"),
    (lambda d: d["servers"][0].update(kv_capacity_blocks=4) or d["workload"]["shared_prefix"].update(question_len=100),
     "servers[0].kv_capacity_blocks"),
    (lambda d: d["workload"]["shared_prefix"].update(output_len=-3), "workload.shared_prefix.output_len"),
    (lambda d: d.update(slo={"ttft_ms": -5}), "slo.ttft_ms"),
    (lambda d: d.update(policies=[{"name": "load_prefix", "weights": {"prefix": 0, "queue": 0, "kv": 0}}]), "policies.0.weights"),
    (lambda d: d.update(policies=["nearest"]), "policies[0]"),
    (lambda d: d.update(solve={"objective": "ttft_excess"}), "solve.objective"),
])
def test_bad_input_names_the_field(change, field):
    doc = instance()
    change(doc)
    with pytest.raises(InputError) as caught:
        optfleet.load(doc)
    assert caught.value.field.startswith(field)


@pytest.mark.solved
def test_lookahead_windows_commit_every_request_and_respect_the_balance_cap():
    from optfleet.problems.placement.exact import lookahead

    problem = _tiny(3, 10, servers=2)
    problem = replace(problem, solve=problem.solve.model_copy(update={"lookahead_requests": 4, "lookahead_commit": 2, "lookahead_balance": 1.0}))
    placement, counts = lookahead(problem)
    assert counts["windows"] == 5 and placement.min() >= 0
    for first in range(0, 10, 2):  # each window of 4 puts at most 2 on a server; its first 2 are kept
        assert np.bincount(placement[first:first + 2], minlength=2).max() <= 2
    assert evaluate(problem, placement).objective_ms > 0


def test_the_docs_quote_the_published_placement_tables():
    readme = documentation_text()
    for name in ("placement.md", "placement_scenarios.md"):
        table = [line for line in (REPO / "benchmarks" / "results" / name).read_text().splitlines() if line.startswith("|")]
        assert "\n".join(table) in readme, f"README does not quote benchmarks/results/{name}"


def test_a_csv_trace_replays_with_its_groups_and_sessions(tmp_path):
    """Two conversations of one group (system prompt 64 tokens = 4 blocks) and a request without group or
    session; sorted by arrival on load."""
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens,group,shared_prefix_tokens,session\n"
                                    "1.0,100,20,0,64,5\n0.0,80,20,0,64,4\n2.0,150,5,0,64,4\n3.0,40,3,,,\n")
    doc = instance()
    doc["workload"] = {"trace": {"file": str(tmp_path / "t.csv")}}
    problem = optfleet.load(doc).problem
    q = problem.requests
    assert q.arrival_ms.tolist() == [0.0, 1000.0, 2000.0, 3000.0] and q.session[:3].tolist() == [4, 5, 4]
    assert q.group[3] == -1 and q.shared_tokens[3] == 0 and q.session[3] not in (4, 5)
    # request 1 reuses the group's 4 blocks; request 2 (turn 2 of session 4) its first turn's prompt + answer (100 tokens: 6 blocks)
    assert replay(problem, np.zeros(4, dtype=int)).hit_tokens.tolist() == [0, 64, 96, 0]


def test_a_trace_without_its_columns_is_refused(tmp_path):
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens\n0,10\n")
    doc = instance()
    doc["workload"] = {"trace": {"file": str(tmp_path / "t.csv")}}
    with pytest.raises(InputError, match="output_tokens"):
        optfleet.load(doc)


def test_simulate_draws_fresh_workloads_and_scores_a_given_plan(tmp_path):
    outcome = optfleet.simulate(TINY, method="round_robin", reps=2, seed=5)
    body = outcome.to_dict()
    assert [r["seed"] for r in body["replications"]] == [5, 6]
    assert body["summary"]["objective_ms"]["half_width_95"] is not None
    problem = optfleet.load(TINY, workload__seed=5).problem
    placement = route(problem, make_policy(problem, "round_robin", {}, "p"))
    assert body["replications"][0]["objective_ms"] == pytest.approx(evaluate(problem, placement).objective_ms)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"placement": [0] * len(optfleet.load(TINY).problem.requests)}))
    single = optfleet.simulate(TINY, plan=str(plan)).to_dict()
    assert len(single["replications"]) == 1 and single["replications"][0]["seed"] is None
    assert body["notes"] == [] and single["notes"] == []  # nothing was given that does not apply
    noted = optfleet.simulate(TINY, plan=str(plan), reps=3, requests=10).to_dict()["notes"]
    assert noted == ["--requests does not apply to placement (the instance's workload, the continuous-batching simulator)",
                     "--reps does not apply to --plan: the placement is scored once, on the instance's own workload"]


def test_routing_reports_its_progress_every_percent_of_the_requests():
    problem = optfleet.load(TINY).problem  # 40 requests: every request is 1 % or more
    shares: list[float] = []
    route(problem, make_policy(problem, "round_robin", {}, "p"), shares.append)
    assert shares == [i / 40 for i in range(40)]


def test_simulating_the_relaxation_bound_is_refused_before_any_run():
    with pytest.raises(InputError, match="is a bound and places nothing"):
        optfleet.simulate(TINY, method="relaxation_bound")
