"""``hindsight_search`` (search.py): the brute-force optimum on small cases, never worse than its start, one
evaluator, its limits; and the shipped best-known placements that bound how close any valid bound can come."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

import optfleet
from optfleet.errors import InputError
from optfleet.problems.placement.evaluate import evaluate
from optfleet.problems.placement.policies import make_policy, route
from optfleet.problems.placement.search import hindsight_search, objective_ms

from support import REPO
from test_placement import instance, with_requests

PLACEMENT = REPO / "instances" / "placement"

# six requests on three servers (729 placements): bursts that queue, two conversations and a shared group prompt
ROWS = [(0.0, 120, 6, 64, 0, 0), (1.0, 90, 4, 64, 0, 1), (2.0, 200, 3, 0, -1, 2), (30.0, 150, 8, 64, 0, 0), (31.0, 60, 5, 0, -1, 3),
        (32.0, 180, 2, 64, 0, 1)]


def small_problem(servers: int, evaluations: int, seed: int = 0, **solve):
    doc = instance(servers, seqs=2, kv=40, budget=64, search_evaluations=evaluations, search_seed=seed, **solve)
    doc["policies"] = ["round_robin", "least_requests"]
    return with_requests(doc, ROWS)


def brute_force_ms(problem) -> float:
    k, n = len(problem.engines), len(problem.requests)
    return min(evaluate(problem, np.array(p)).objective_ms for p in itertools.product(range(k), repeat=n))


@pytest.mark.parametrize("servers", [2, 3])
def test_the_search_finds_the_brute_force_optimum_of_a_small_case(servers):
    """2 x 6 and 3 x 6 placements: 64 and 729 candidates, every one scored; the search (2,000 evaluations) ends on
    the least objective."""
    problem = small_problem(servers, 2000)
    placement, summary = hindsight_search(problem)
    assert evaluate(problem, placement).objective_ms == pytest.approx(brute_force_ms(problem), rel=1e-12)
    assert summary.evaluations == 2000 and summary.stopped_by == "count"


def test_the_search_returns_the_best_placement_it_scored_and_never_one_worse_than_its_start(monkeypatch):
    """Its start is the best of the instance's policies; it returns the least objective among every placement it
    scored (the start, the calibration moves and the annealing's candidates), which is the simulator's (evaluate.py)
    score of the placement returned."""
    from optfleet.problems.placement import search

    problem = small_problem(3, 300, seed=3)
    starts = {name: evaluate(problem, route(problem, make_policy(problem, name, {}, "x"))).objective_ms
              for name in ("round_robin", "least_requests")}
    scored = []

    def recording(problem, placement, engine):
        scored.append(objective_ms(problem, placement, engine))
        return scored[-1]

    monkeypatch.setattr(search, "objective_ms", recording)
    placement, summary = hindsight_search(problem)
    assert summary.start_objective_ms == pytest.approx(min(starts.values()))
    assert summary.start_method == min(starts, key=starts.get)
    assert len(scored) == len(starts) + summary.evaluations
    score = evaluate(problem, placement).objective_ms
    assert score == pytest.approx(min(scored), rel=1e-12) and score <= summary.start_objective_ms
    assert 0 < summary.accepted < summary.evaluations


def test_the_search_repeats_itself_for_a_seed_and_stops_at_the_time_limit():
    first, _ = hindsight_search(small_problem(3, 200, seed=5))
    again, _ = hindsight_search(small_problem(3, 200, seed=5))
    assert np.array_equal(first, again)
    problem = small_problem(3, 5000, time_limit_s=1e-6)
    placement, summary = hindsight_search(problem)
    assert summary.stopped_by == "time" and summary.evaluations == 0
    assert evaluate(problem, placement).objective_ms == pytest.approx(summary.start_objective_ms)


def test_one_server_has_nothing_to_search_and_says_so():
    problem = small_problem(1, 100)
    placement, summary = hindsight_search(problem)
    assert summary.stopped_by == "one server" and summary.evaluations == 0 and not placement.any()
    assert "one server (nothing to move)" in summary.note(summary.start_objective_ms)


def test_the_excess_objective_is_searched_too():
    doc = instance(2, seqs=2, kv=40, budget=64, search_evaluations=300, objective="ttft_excess")
    doc["slo"] = {"ttft_ms": 30.0}
    problem = with_requests(doc, ROWS)
    placement, _ = hindsight_search(problem)
    assert evaluate(problem, placement).objective_ms == pytest.approx(brute_force_ms(problem), rel=1e-12)


def test_solve_runs_the_search_beside_the_policies_and_names_its_start(tmp_path, capsys):
    """``optfleet solve --method hindsight_search --json``: its row with its own columns, the instance's policies
    beside it, and its placement is what ``simulate --plan`` scores alike."""
    from optfleet.cli import main

    out = tmp_path / "run"
    assert main(["solve", str(PLACEMENT / "tiny.yaml"), "--method", "hindsight_search", "--set", "solve.search_evaluations=40",
                 "--out", str(out), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (search,) = document["results"]
    beside = {r["method"]: r for r in document["baselines"]}
    assert {"round_robin", "load_prefix_111", "relaxation_bound"} <= set(beside)
    assert search["search_evaluations"] == 40 and search["search_stopped_by"] == "solve.search_evaluations"
    assert search["note"].startswith("a hindsight heuristic (no policy, no bound): from ")
    assert search["objective"] <= min(r["objective"] for r in beside.values() if r.get("objective") is not None) + 1e-9
    assert document["summary"]["best_known_objective_ms"] == pytest.approx(search["objective"])
    assert main(["simulate", str(PLACEMENT / "tiny.yaml"), "--plan", str(out / "plan.json"), "--json"]) == 0
    simulated = json.loads(capsys.readouterr().out)
    assert simulated["replications"][0]["objective_ms"] == pytest.approx(search["objective"])


@pytest.mark.parametrize(("field", "value"), [("search_evaluations", 0), ("search_evaluations", -3), ("search_evaluations", 1.5),
                                               ("search_evaluations", True), ("search_evaluations", 10**9), ("search_seed", -1),
                                               ("search_seed", 0.5), ("search_seed", "x")])
def test_a_bad_search_setting_is_refused_naming_the_field(field, value):
    with pytest.raises(InputError) as info:
        optfleet.load(instance(2, **{field: value}))
    assert info.value.field == f"solve.{field}"


CERTIFIED = sorted(p.name.removesuffix("_best_known.json") for p in (PLACEMENT / "plans").glob("*_best_known.json"))


@pytest.mark.parametrize("name", CERTIFIED)
def test_a_shipped_best_known_placement_keeps_every_valid_bound_over_50_percent_from_the_best_policy(name):
    """instances/placement/plans/<scenario>_best_known.json: scored by the simulator, it is below the best of the
    scenario's policies divided by 1.5, so no valid lower bound (at most the best placement, hence at most this
    one) can bring the best policy within 50 %; the relaxation bound stays below it."""
    from optfleet.problems.placement.bounds import relaxation_bound

    problem = optfleet.load(PLACEMENT / f"{name}.yaml").problem
    document = json.loads((PLACEMENT / "plans" / f"{name}_best_known.json").read_text())
    known = evaluate(problem, np.array(document["placement"])).objective_ms
    assert known == pytest.approx(document["mean_ttft_ms"], rel=1e-9)
    best_policy = min(evaluate(problem, route(problem, make_policy(problem, e.name, e.params, "policies"))).objective_ms
                      for e in problem.policies)
    assert best_policy / known - 1.0 > 0.5
    assert relaxation_bound(problem)[0] <= known
