"""optfleet explain on capacity_plan (issue 39 for the capacity-plan kind): duals checked by finite differences and
against the prices they stand for, cost monotone in demand and in a price, alternatives no cheaper than the optimum,
bad options exit 2."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.models import capacity_plan as model_lib
from optfleet.solvers.sensitivity import fixed_lp_sensitivity
from tests.support import REPO, assert_explain_refuses, explain_objectives
from tests.test_explain import duals_checked_by_finite_differences, solved_for_explain

TINY = REPO / "instances" / "capacity_plan" / "tiny.yaml"


@pytest.fixture(scope="module")
def tiny():
    return solved_for_explain(TINY)


def test_capacity_duals_match_finite_differences_and_the_prices_they_stand_for(tiny):
    """A capacity row's dual is minus what the marginal GPU costs in its period: an H100 on-demand GPU-period ($3.50 x
    4 h), and on A100 at most an on-demand GPU-period ($2.00 x 4 h) and at least a third of a 3-period reservation
    ($1.20 x 4 h x 3 / 3), reservations being shared across periods; each is checked by moving the row's bound."""
    problem, explainer, solved = tiny
    model = model_lib.build(problem)
    model_lib.warm_start(model, problem, solved.detail)
    continuous = lambda m: [m.x, m.r, m.o, m.l, m.w]  # noqa: E731
    lp = fixed_lp_sensitivity(model, continuous=continuous(model))
    shown = explainer.analyse(problem, solved).tables["shadow_prices"]
    assert len(shown) >= 2
    for _, row in shown.iterrows():
        if row["where"].startswith("H100"):
            assert row["shadow_price"] == pytest.approx(-3.5 * 4)
        else:
            assert -2.0 * 4 - 1e-9 <= row["shadow_price"] <= -1.2 * 4 + 1e-9
    assert duals_checked_by_finite_differences(model, lp, shown["row"], continuous) >= 2


def test_the_binding_table_counts_each_types_rows(tiny):
    problem, explainer, solved = tiny
    binding = explainer.analyse(problem, solved).tables["binding"]
    capacity = binding[binding["rows"].str.startswith("capacity")].set_index("type")
    assert set(capacity.index) == {"A100", "H100"} and (capacity["periods"] == problem.periods).all()
    assert (capacity["binding"] >= 1).all() and (capacity["least_slack"] == 0).all()  # a least-cost plan buys no idle GPU somewhere
    on_demand = binding[binding["rows"].str.startswith("on-demand cap")]
    assert list(on_demand["type"]) == ["A100"]  # only A100's on-demand is capped (4 GPUs)


@settings(max_examples=3, deadline=None)
@given(st.lists(st.floats(0.5, 1.5), min_size=2, max_size=2))
def test_cost_is_monotone_in_demand(growths):
    low, high = explain_objectives(TINY, "rate_growth", sorted(growths))
    assert low <= high + 1e-6


def test_a_dearer_reservation_never_costs_less_and_alternatives_are_restrictions(tiny):
    problem, explainer, solved = tiny
    price = explainer.parameters["price:A100:reserved"]
    assert price.current == pytest.approx(1.2)
    assert price.apply(problem, 1.2).offers[0].reserved_cost_per_gpu == pytest.approx(problem.offers[0].reserved_cost_per_gpu)
    assert explainer.solve(price.apply(problem, 1.5)).objective >= solved.objective - 1e-6
    for label, restricted in explainer.alternatives(problem, solved):
        result = explainer.solve(restricted)
        assert result.objective is None or result.objective >= solved.objective - 1e-6, label


@pytest.mark.parametrize(("args", "option"), [
    (["--curve", "percentile=0.9,0.99"], "--curve"),  # the kind has no percentile
    (["--curve", "confidence:H100=0,0.5"], "--curve"),  # outside (0, 1]
    (["--curve", "price:H100:reserved=1,2"], "--curve"),  # H100 is not offered reserved
    (["--break-even", "price:B200:on_demand"], "--break-even"),
])
def test_bad_options_exit_2_naming_the_option(args, option, capsys):
    assert_explain_refuses(TINY, args, option, capsys)


def test_the_fixed_lp_keeps_reservations_non_negative_when_gpus_are_already_held(tiny):
    """A review found the fixed LP's cost at $-2.00 with reservations already held: relaxing the reservation starts to
    continuous dropped their domain's lower bound 0, and the LP sold reservations back where held GPUs left slack."""
    import yaml

    document = yaml.safe_load(TINY.read_text())
    document["reservations"] = [{"gpu_type": "A100", "gpus": 3, "start_period": 0, "end_period": 6}]
    document["name"] = "tiny_held"
    problem, explainer, solved = solved_for_explain(document)
    model = model_lib.build(problem)
    model_lib.warm_start(model, problem, solved.detail)
    lp = fixed_lp_sensitivity(model, continuous=[model.x, model.r, model.o, model.l, model.w])
    assert lp.report.objective >= 0
    assert all(column.value >= -1e-9 for column in lp.columns if column.name.startswith("r["))
    assert all(var.is_integer() and var.lb == 0 for var in model.r.values())  # domains and bounds restored


def test_the_plot_draws_the_reservations_already_held(tiny):
    """A review saw the plot's purchase band leave out the reservations already held (capacity_plan/plot.py)."""
    import yaml

    from optfleet.problems.capacity_plan.plot import held_by_option

    problem, _, solved = tiny
    assert [label for label, _ in held_by_option(problem, solved.detail)] == ["reserved", "on-demand", "spot"]
    document = yaml.safe_load(TINY.read_text())
    document["reservations"] = [{"gpu_type": "A100", "gpus": 3, "start_period": 0, "end_period": 6}]
    held_problem, _, held_solved = solved_for_explain(document)
    series = dict(held_by_option(held_problem, held_solved.detail))
    assert list(series["already held"]) == [3] * 6


def test_the_demand_curves_kept_sizings_and_shared_tables_change_no_result(tiny):
    """The rate_growth points keep the capacity tables' sizings (capacity.py ``instances_needed``'s memo) and reuse
    an earlier point's proven optimum when their tables are equal (explain.py ``SameTableSession``): each point's
    table, objective and plan equal a fresh sizing's and a fresh solve's.  1.1 to 1.2 share one table on tiny
    (the published curve's plan A100 R14)."""
    from optfleet.problems.capacity_plan.capacity import capacity_table
    from optfleet.problems.capacity_plan.explain import SameTableSession

    problem, explainer, _ = tiny
    growth = explainer.parameters["rate_growth"]
    warm = SameTableSession()
    points = [growth.apply(problem, g) for g in (1.1, 1.15, 1.2, 1.45)]
    for point in points:
        fresh = capacity_table(list(problem.spec.models), list(problem.spec.gpus), point.rates_rps, problem.base_dir)
        assert (point.table.instances == fresh.instances).all() and (point.table.tp == fresh.tp).all()
    reused = [warm(point) for point in points]
    assert len(warm.solved) == 2  # two distinct tables, two solves
    for point, found in zip(points, reused, strict=True):
        again = explainer.solve(point)
        assert (found.objective, found.plan) == (again.objective, again.plan)
