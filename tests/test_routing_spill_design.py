"""The spill design (spill_design.py): the bisection, the search against brute force where the pools are
independent (no spillover), the replay's verdict against its own numbers, and the CLI's handling."""

from __future__ import annotations

import itertools

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT
from optfleet.instance import load_instance
from optfleet.problems.routing.design_milp import solve_design
from optfleet.problems.routing.problem import prepare
from optfleet.problems.routing.spill_design import GROWTH, SpillDesign, design_spill, least_count, replay_spill, search_limit

from support import REPO

TINY = REPO / "instances" / "routing" / "tiny.yaml"


@pytest.fixture(scope="module")
def tiny():
    return prepare(load_instance(TINY))


@given(threshold=st.integers(1, 400), extra=st.integers(0, 100))
def test_least_count_finds_a_monotone_predicates_threshold(threshold, extra):
    calls = []

    def meets(n: int) -> bool:
        calls.append(n)
        return n >= threshold

    assert least_count(meets, threshold + extra) == threshold
    assert all(n >= 1 for n in calls)


def test_without_spillover_the_search_is_the_brute_force_least_fleet(tiny):
    """No spillover: each pool's replay depends on its own count only, so the pool-by-pool search must find the
    least counts of the whole box that meet the design."""
    design, _ = solve_design(tiny)
    found = search_limit(tiny, design, None)
    short, long = design.instances
    box = [(ns, nl) for ns, nl in itertools.product(range(1, GROWTH * short + 1), range(1, GROWTH * long + 1))]
    replays = {gpus: replay_spill(tiny, SpillDesign(None, design, gpus)) for gpus in box}
    meeting = [gpus for gpus in box if replays[gpus].meets]
    cheapest = min(meeting, key=lambda g: replays[g].cost_per_hour)
    assert found.meets
    assert found.cost_per_hour == pytest.approx(replays[cheapest].cost_per_hour)
    assert (found.spill.instances[0] - 1, found.spill.instances[1]) not in meeting and (found.spill.instances[0], found.spill.instances[1] - 1) not in meeting


def test_a_replayed_spill_design_meets_exactly_when_its_numbers_do(tiny):
    design, _ = solve_design(tiny)
    slo, eps = tiny.fleet.ttft_p99_ms, tiny.spec.design.epsilon
    for gpus, limit in [((1, 1), 0), (design.instances, 0), (design.instances, None), ((design.instances[0], 2), 4)]:
        o = replay_spill(tiny, SpillDesign(limit, design, gpus))
        e = o.evaluation
        numbers_meet = (all(p.ttft_p99_ms is None or p.ttft_p99_ms <= slo for p in e.pools) and e.capacity_ok
                        and e.misroutes <= eps * e.requests)
        assert o.meets == numbers_meet, (gpus, limit, o.reasons)
        assert [p.instances for p in e.pools] == list(gpus)
        assert (e.spills > 0) <= (limit is not None)


def test_the_spill_design_is_the_cheapest_limit_that_meets_the_design(tiny):
    design, _ = solve_design(tiny)
    best, searched = design_spill(tiny, design)
    assert [o.spill.queue_limit for o in searched] == [None, 0, 4, 16, 64]
    costs = [o.cost_per_hour for o in searched if o.meets]
    assert best is not None and best.meets and best.cost_per_hour == min(costs)


def _write(tmp_path, **design) -> str:
    doc = yaml.safe_load(TINY.read_text())
    doc["fleet"]["instance"] = str(REPO / "instances" / "fleet" / "toy.yaml")
    doc["design"].update(design)
    path = tmp_path / "routing.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_gap_runs_the_spill_design_only_when_the_instance_lists_queue_limits(tmp_path, capsys):
    assert main(["gap", _write(tmp_path), "--json", "--quiet"]) == 0
    assert "design_spill" not in capsys.readouterr().out
    assert main(["gap", _write(tmp_path, queue_limits=[None, 2]), "--json", "--quiet"]) == 0
    out = yaml.safe_load(capsys.readouterr().out)
    row = next(r for r in out["rows"] if r["method"] == "design_spill")
    assert row["queue_limit"] in (None, 2) and row["status"] == "heuristic"
    tried = row["design"]["queue_limits_tried"]
    assert [t["queue_limit"] for t in tried] == [None, 2] and all(t["meets"] for t in tried)
    assert next(r for r in out["references"] if r["question"] == "spill")["bound"] is None


@pytest.mark.parametrize("limits", [[-1], [], [1.5]])
def test_a_bad_queue_limit_is_refused_naming_the_field(tmp_path, capsys, limits):
    assert main(["validate", _write(tmp_path, queue_limits=limits)]) == EXIT_BAD_INPUT
    assert "design.queue_limits" in capsys.readouterr().err


def test_the_search_grows_the_pool_that_breaks_the_slo():
    """A tight SLO on the tiny instance: the static design's long pool misses it in replay; the search doubles the
    failing pool instead of giving up, and finds the same least fleet as brute force over the box."""
    doc = yaml.safe_load(TINY.read_text())
    doc["fleet"]["instance"] = str(REPO / "instances" / "fleet" / "toy.yaml")
    doc["fleet"]["ttft_p99_ms"] = 200
    problem = prepare(load_instance(_dump(doc)))
    design, _ = solve_design(problem)
    static = replay_spill(problem, SpillDesign(None, design, design.instances))
    assert not static.meets and static.failing_pools
    found = search_limit(problem, design, None)
    assert found.meets
    box = itertools.product(range(1, GROWTH * design.instances[0] + 1), range(1, GROWTH * design.instances[1] + 1))
    best = min(o.cost_per_hour for o in (replay_spill(problem, SpillDesign(None, design, g)) for g in box) if o.meets)
    assert found.cost_per_hour == pytest.approx(best)


def _dump(doc: dict) -> str:
    import tempfile

    handle = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
    handle.write(yaml.safe_dump(doc))
    handle.close()
    return handle.name


def test_a_pool_whose_p99_does_not_fall_with_more_instances_is_explained(tiny):
    """The search gives up on a pool whose P99 TTFT stays above the SLO at 4x its count: the outcome says the P99
    did not fall with more instances; a P99 that fell is not so explained."""
    from dataclasses import replace

    from optfleet.problems.routing.spill_design import _with_plateaus

    design, _ = solve_design(tiny)
    static = replay_spill(tiny, SpillDesign(None, design, design.instances))

    def outcome(long_count: int, long_p99_ms: float):
        pools = (static.evaluation.pools[0], replace(static.evaluation.pools[1], ttft_p99_ms=long_p99_ms))
        spill = SpillDesign(None, design, (design.instances[0], long_count))
        return replace(static, spill=spill, evaluation=replace(static.evaluation, pools=pools), reasons=("long P99 TTFT above the SLO",),
                       failing_pools=(1,))

    first = outcome(design.instances[1], 3000.0)
    flat = _with_plateaus(outcome(GROWTH * design.instances[1], 2990.0), first)
    assert len(flat.reasons) == 2 and "more instances do not lower it" in flat.reasons[1] and f"at {GROWTH * design.instances[1]}" in flat.reasons[1]
    assert _with_plateaus(outcome(GROWTH * design.instances[1], 2000.0), first).reasons == ("long P99 TTFT above the SLO",)
