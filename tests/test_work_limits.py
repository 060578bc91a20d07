"""Limits refused up front (the reliability issue): inputs whose size makes a run hopeless, or whose values overflow
the results, are exit-2 errors naming the field and the limit, before any work."""

from __future__ import annotations

import pytest

import optfleet
from optfleet.errors import InputError

from support import REPO

DIURNAL = REPO / "instances" / "reserved" / "diurnal_7day.yaml"


@pytest.mark.parametrize(("split_s", "said"), [
    (1e-7, "is shorter than cost_window_s (1 s)"),  # 6e12 pieces of the week: it never finished
    (60.0, "cuts the 604,800 s trace into 10,080 pieces, above the limit of 10,000"),
])
def test_a_robust_split_into_too_many_pieces_is_refused_before_any_is_made(split_s, said):
    with pytest.raises(InputError) as caught:
        optfleet.load(DIURNAL, plans__robust__split_s=split_s)
    assert caught.value.field == "plans.robust.split_s" and said in str(caught.value)


def test_a_robust_split_within_the_limit_makes_one_scenario_per_piece_that_holds_requests():
    problem = optfleet.load(DIURNAL, plans__robust__split_s=21_600).problem  # quarter days: 28 pieces
    assert len(problem.scenarios) == 28


TINY_RESERVED = REPO / "instances" / "reserved" / "tiny.yaml"


@pytest.mark.parametrize("field", ["unit_per_hour", "paygo_input_per_million", "paygo_cached_per_million", "paygo_output_per_million"])
def test_prices_beyond_ten_thousand_times_the_dearest_are_refused(field):
    """1e308 $/unit-hour printed $inf/h columns and a hybrid MILP row 'optimal' at $nan/h."""
    with pytest.raises(InputError) as caught:
        optfleet.load(TINY_RESERVED, **{f"prices__{field}": 1e308})
    assert caught.value.field == f"prices.{field}" and "above the limit of 1,000,000" in str(caught.value)


def test_prices_at_the_limit_give_finite_numbers_in_every_row():
    import math

    outcome = optfleet.gap(TINY_RESERVED, prices__unit_per_hour=1e6, prices__paygo_input_per_million=1e6,
                           prices__paygo_output_per_million=1e6)
    numbers = outcome.select_dtypes("number").astype("float64").to_numpy().ravel()
    assert all(math.isfinite(v) for v in numbers if v == v)  # NaN marks an empty cell, never a number
    assert outcome["objective"].notna().any()


TINY_PLACEMENT = REPO / "instances" / "placement" / "tiny.yaml"
LARGE_PLACEMENT = {"workload__arrivals__requests": 2000, "workload__arrivals__rate_rps": 1000, "solve__max_milp_requests": 5000,
                   "solve__time_limit_s": 5}  # the hindsight MILP has 4 million rows: minutes to build in Pyomo


def test_a_placement_milp_too_large_to_build_within_its_time_limit_is_refused_with_its_size():
    """2,000 requests (the schema allows 5,000) under solve.time_limit_s = 5: the build alone would take minutes."""
    loaded = optfleet.load(TINY_PLACEMENT, **LARGE_PLACEMENT)
    from optfleet.problems.placement.kind import default_method, gap_methods

    assert default_method(loaded.problem) == "lookahead_milp" and "hindsight_milp" not in gap_methods(loaded.problem)
    with pytest.raises(InputError) as caught:
        optfleet.solve(loaded, method="hindsight_milp")
    message = str(caught.value)
    assert caught.value.field == "--method" and "3,988,852 rows" in message and "more than solve.time_limit_s = 5 s" in message
    assert "fewer requests or servers" in message


def test_a_placement_milp_build_that_outlasts_its_time_limit_stops_at_it(monkeypatch):
    """The same MILP (under a 1 s limit) with the size estimate made blind (as on a machine slower than the estimate
    assumes): the build checks the clock and stops at the limit with a row that says so, instead of building for
    minutes.  The MILP runs alone (gap with that one method): solve would also run the relaxation bound beside it,
    an LP of its own on the 2,000 requests (about 20 s) that this test is not about."""
    from optfleet.problems.placement import exact

    monkeypatch.setattr(exact, "BUILD_S_PER_ROW", 0.0)
    monkeypatch.setattr(exact, "BUILD_S_PER_NONZERO", 0.0)
    outcome = optfleet.run_gap(TINY_PLACEMENT, ["hindsight_milp"], **{**LARGE_PLACEMENT, "solve__time_limit_s": 1})
    [row] = outcome.results
    assert row.method == "hindsight_milp" and not row.has_plan and row.available
    assert "the time limit of 1 s passed while the placement MILP was being built" in row.note, row.note
    assert "rows built" in row.note


def _placement_data(**overrides):
    from optfleet.problems.placement.exact import placement_data

    problem = optfleet.load(TINY_PLACEMENT, **overrides).problem
    return placement_data(problem, 0, len(problem.requests))


@pytest.mark.parametrize("overrides", [{}, {"servers__0__count": 5}, {"workload__arrivals__rate_rps": 500, "workload__arrivals__requests": 60},
                                       {"solve__objective": "ttft_excess"}])
def test_the_placement_milp_size_is_known_before_the_build(overrides):
    """model_size counts the rows and columns build makes, and bounds its nonzeros (terms with a zero coefficient,
    a request without a shared prefix, are counted); the FCFS pairs are the brute-force definition's."""
    import pyomo.environ as pyo

    from optfleet.models.placement import build, completion_upper_bounds, fcfs_pairs, model_size
    from optfleet.solvers.highs import _compile

    data = _placement_data(**overrides)
    size, model = model_size(data), build(data)
    assert size["rows"] == sum(1 for _ in model.component_data_objects(pyo.Constraint, active=True))
    assert size["columns"] == sum(1 for _ in model.component_data_objects(pyo.Var))
    nonzeros = _compile(model, False)[0].A.nnz
    assert nonzeros <= size["nonzeros"] <= 1.05 * nonzeros
    upper = completion_upper_bounds(data)
    assert fcfs_pairs(data) == [(q, r) for r in range(data.n) for q in range(r) if upper[q] - data.arrival_ms[r] > 0]


def test_a_solve_whose_deadline_passed_in_the_build_does_not_start_the_solver():
    import time

    import pyomo.environ as pyo

    from optfleet.solvers import highs

    model = pyo.ConcreteModel()
    model.x = pyo.Var(domain=pyo.Binary)
    model.obj = pyo.Objective(expr=model.x)
    report = highs.solve(model, time_limit=10, deadline=time.perf_counter() - 1.0)
    assert (report.status, report.objective, report.counts["solver_runs"]) == ("time_limit", None, 0)
    assert "not started" in report.log
    assert highs.solve(model, time_limit=10, deadline=time.perf_counter() + 60).proven_optimal


def test_a_build_clock_stops_a_rule_without_printing(capfd):
    """Pyomo logs an exception raised in a rule to stdout; a clock's build keeps that log to itself."""
    import pyomo.environ as pyo

    from optfleet.errors import NoPlanInTimeError
    from optfleet.models.clock import BuildClock, ruled

    clock = BuildClock(0.0, "a model")
    model = pyo.ConcreteModel()
    model.x = pyo.Var(range(3))
    with pytest.raises(NoPlanInTimeError, match=r"the time limit of 0 s passed while a model was being built \(0 rows built, in c\)"):
        with clock.building():
            model.c = pyo.Constraint(range(3), rule=ruled(clock, "c", lambda m, i: m.x[i] >= 0))
    assert capfd.readouterr() == ("", "")
