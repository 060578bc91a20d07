"""optfleet explain (issue 39): duals checked by finite differences, monotone curves, break-even, bad input."""

from __future__ import annotations

import json
import math

import pyomo.environ as pyo
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet import api
from dataclasses import replace
from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT, EXIT_OK
from optfleet.problems.fleet import explain as fleet_explain
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.milp import plan_model
from optfleet.solvers.sensitivity import fixed_lp_sensitivity
from tests.support import FLEET_INSTANCES

TOY = FLEET_INSTANCES / "toy.yaml"
TOY_HETERO = FLEET_INSTANCES / "toy_hetero.yaml"


def shifted_objective(model: pyo.ConcreteModel, row_name: str, delta: float, continuous) -> float:
    """The fixed LP's optimum with the bound of row ``row_name`` moved by ``delta`` (the row replaced by a shifted copy)."""
    row = model.find_component(row_name)
    row.deactivate()
    body, lower, upper = row.body, row.lower, row.upper
    shifted = pyo.Constraint(expr=pyo.inequality(None if lower is None else pyo.value(lower) + delta, body,
                                                 None if upper is None else pyo.value(upper) + delta))
    model.add_component("finite_difference", shifted)
    try:
        return fixed_lp_sensitivity(model, continuous=continuous(model)).report.objective
    finally:
        model.del_component("finite_difference")
        row.activate()


def duals_checked_by_finite_differences(model: pyo.ConcreteModel, lp, row_names, continuous, step: float = 1e-4) -> int:
    """Check each named row's dual against the fixed LP's change in cost when its bound moves by ``step`` either way
    inside its range; the number of checks made."""
    checked = 0
    for name in row_names:
        raw = lp.row(name)
        for delta in (step, -step):
            if raw.bound_low <= raw.bound + delta <= raw.bound_high:
                slope = (shifted_objective(model, raw.name, delta, continuous) - lp.report.objective) / delta
                assert slope == pytest.approx(raw.dual, rel=1e-6, abs=1e-9), name
                checked += 1
    return checked


def solved_for_explain(source):
    """``(problem, explainer, solved)``: the instance ``source`` (a path or a document) solved by its kind's explain
    hooks, proven optimal."""
    from optfleet.sensitivity.api import explainer_of

    loaded = api.load(source)
    explainer = explainer_of(loaded)
    solved = explainer.solve(loaded.problem)
    assert solved.status == "optimal", solved.plan
    return loaded.problem, explainer, solved


def fleet_model_at(path, **overrides):
    problem = api.load(path, **overrides).problem
    solved = fleet_explain.solve(problem)
    model, report = plan_model(problem, solved.detail)
    assert report.status == "optimal"
    for var in model.n.values():
        var.unfix()
    return model


def test_fleet_duals_match_finite_differences():
    """Every dual the report shows equals the fixed LP's change in cost per unit of its row's bound (both directions
    inside the bound's range), on the toy fleet at 1000 req/s (a pool beyond its Erlang table)."""
    model = fleet_model_at(TOY, workload__rate_rps=1000)
    continuous = lambda m: [m.n, m.nbig]  # noqa: E731
    lp = fixed_lp_sensitivity(model, continuous=continuous(model))
    shown = fleet_explain.dual_frame(model, lp)
    assert len(shown) >= 2  # the class's route row and the pool's capacity row
    for _, row in shown.iterrows():
        delta = 1e-4 * max(1.0, abs(row["bound"]))
        steps = [d for d in (delta, -delta) if row["bound_low"] <= row["bound"] + d <= row["bound_high"]]
        assert steps  # the range reaches at least one side (a share of 1 cannot rise: x <= 1)
        for step in steps:
            slope = (shifted_objective(model, row["row"], step, continuous) - lp.report.objective) / step
            assert slope == pytest.approx(row["dual"], rel=1e-6, abs=1e-7)


def test_route_price_is_the_dual_per_request_per_second():
    model = fleet_model_at(TOY, workload__rate_rps=1000)
    lp = fixed_lp_sensitivity(model, continuous=[model.n, model.nbig])
    frame = fleet_explain.dual_frame(model, lp)
    route = frame[frame["row"].str.startswith("route")].iloc[0]
    k = int(route["row"][len("route["):-1])
    assert route["shadow_price"] == pytest.approx(route["dual"] / (1000 * model.data.mass[k]))


def test_binding_table_names_the_pools_and_their_slack():
    result = optfleet.explain(TOY_HETERO, break_even_of=(), near_optimal=False)
    binding = result.tables()["binding"]
    assert set(binding["pool"]) >= {"H100-SXM w1000", "A100-80GB w4000", "H100-SXM w4000", "fleet"}
    k_row = binding[binding["row"] == "max_pools"].iloc[0]
    assert k_row["slack"] == pytest.approx(4 - 3) and not k_row["binds"]  # K = 4, three pools open
    assert (binding["slack"] >= 0).all()
    assert binding["binds"].any()


def test_break_even_brackets_a_plan_change_on_the_toy_catalog():
    """The second-cheapest type (H100, $1.5) is worth 2 A100s of work: the plan changes within the bracket, the plan
    at ``low`` is the instance's and the one at ``break_even`` another, no dearer than the old plan repriced there."""
    result = optfleet.explain(TOY_HETERO, near_optimal=False)
    row = result.break_even.iloc[0]
    assert row["parameter"] == "price:H100-SXM"
    assert row["low"] < row["break_even"] <= row["low"] * 1.01
    problem = api.load(TOY_HETERO).problem
    at_low = fleet_explain.solve(fleet_explain.with_gpu_price(problem, "H100-SXM", row["low"]))
    assert at_low.plan == result.base.plan
    old_plan_there = sum(p.instances * (row["break_even"] if p.gpu == "H100-SXM" else 1.0) for p in result.base.detail.plan.pools)
    assert row["plan_there"] != result.base.plan
    assert row["objective_there"] <= old_plan_there + 1e-9


def test_alternatives_are_restrictions_no_cheaper_than_the_optimum():
    result = optfleet.explain(TOY_HETERO, break_even_of=())
    frame = result.alternatives
    assert set(frame["alternative"]) == {"no H100-SXM", "no A100-80GB", "one pool fewer (K = 2)"}
    assert (frame["objective"] >= result.base.objective - 1e-9).all()
    no_a100 = frame[frame["alternative"] == "no A100-80GB"].iloc[0]
    assert no_a100["objective"] == pytest.approx(13.5)  # the best single type (instance file's comment)
    assert no_a100["within"] and "A100" not in no_a100["plan"]


@settings(max_examples=4, deadline=None)
@given(st.lists(st.floats(min_value=0.5, max_value=2.5), min_size=2, max_size=3, unique=True))
def test_cost_is_monotone_in_the_rate(growths):
    """More traffic never costs less: every plan at a higher rate also serves a lower one (the curve is re-solved)."""
    explainer = fleet_explain.explainer(api.load(TOY).problem)
    problem = api.load(TOY).problem
    costs = [explainer.solve(explainer.parameters["rate_growth"].apply(problem, g)).objective for g in sorted(growths)]
    assert all(a <= b + 1e-9 for a, b in zip(costs, costs[1:]))


@settings(max_examples=4, deadline=None)
@given(st.lists(st.sampled_from([0.9, 0.95, 0.975, 0.99, 0.995, 0.999]), min_size=2, max_size=3, unique=True))
def test_cost_is_monotone_in_the_ttft_percentile(percentiles):
    """A higher percentile at the same target never costs less: every plan meeting P(q') also meets P(q) for q < q'
    (Kimura's wait and the floor's quantile both rise with q).  Each plan passes the evaluator at its own percentile."""
    problem = api.load(TOY, slo__ttft_p99_ms=30, workload__rate_rps=10).problem  # small pools: the wait decides
    explainer = fleet_explain.explainer(problem)
    costs = []
    for q in sorted(percentiles):
        at_q = explainer.parameters["percentile"].apply(problem, q)
        solved = explainer.solve(at_q)
        assert evaluate(at_q, solved.detail.plan).meets_slo
        costs.append(solved.objective)
    assert all(a <= b + 1e-9 for a, b in zip(costs, costs[1:]))


def test_p95_to_p99_is_in_every_fleet_report():
    """At 10 req/s and a 30 ms target the toy's one pool is small enough for the wait to decide: 5 GPUs at P99 (the
    instance's plan), fewer at P95."""
    result = optfleet.explain(TOY, break_even_of=(), near_optimal=False, slo__ttft_p99_ms=30, workload__rate_rps=10)
    frame = result.curves["percentile"]
    assert list(frame["percentile"]) == [0.95, 0.99]
    assert frame["objective"].iloc[1] == pytest.approx(result.base.objective) == pytest.approx(5.0)  # the instance is at P99
    assert frame["objective"].iloc[0] < frame["objective"].iloc[1]


def test_a_p99_instance_solves_as_before_and_a_p95_one_is_scored_at_p95():
    """An instance file is at P99; at 0.95 (the percentile explain varies) the evaluator's wait is Kimura's 95th percentile."""
    from optfleet.queueing import wait_quantile_s

    assert api.load(TOY).problem.ttft_quantile == 0.99
    p95 = replace(api.load(TOY, slo__ttft_p99_ms=30, workload__rate_rps=10).problem, ttft_quantile=0.95)
    plan = fleet_explain.solve(p95).detail.plan
    pool = evaluate(p95, plan).pools[0]
    expected = float(wait_quantile_s(pool.servers, pool.load_erlangs, pool.mean_service_ms / 1000, pool.service_scv, 0.95)) * 1000
    assert pool.wait_p99_ms == pytest.approx(expected)


def test_curve_marks_plan_changes_and_json_is_one_document(capsys):
    assert main(["explain", str(TOY), "--curve", "ttft_ms=2000,10000", "--no-alternatives", "--json", "--quiet"]) == EXIT_OK
    data = json.loads(capsys.readouterr().out)
    rows = data["tables"]["curve:ttft_ms"]
    assert [r["ttft_ms"] for r in rows] == [2000, 10000]
    assert rows[0]["objective"] >= rows[1]["objective"]  # a looser target never costs more
    assert rows[1]["plan_changes"] == (rows[1]["plan"] != rows[0]["plan"])
    assert "binding" in data["tables"] and data["notes"]


@pytest.mark.parametrize(("args", "option"), [
    (["--curve", "percentile=0.9:1.0:3"], "--curve"),  # a percentile outside (0, 1)
    (["--curve", "gpu_memory=1:2:3"], "--curve"),  # a parameter the fleet does not have
    (["--curve", "rate_growth=2:1:3"], "--curve"),  # empty range
    (["--curve", "rate_growth=1:2:1"], "--curve"),
    (["--curve", "rho_max=0.5:1.5:3"], "--curve"),  # outside (0, 1]
    (["--break-even", "price:B200"], "--break-even"),
    (["--within", "-1"], "--within"),
    (["--within", "inf"], "--within"),
    (["--within", "1e308"], "--within"),
])
def test_bad_options_exit_2_naming_the_option(args, option, capsys):
    assert main(["explain", str(TOY), "--quiet", *args]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert option in captured.err and captured.out == ""


@pytest.mark.parametrize(("spec", "says"), [
    ("rate_growth=2:1:3", "empty range"),  # an InputError is a ValueError: its message was replaced by "must be numbers"
    ("rate_growth=1:2:1", "empty range"),
    ("rate_growth=a:2:3", "(three numbers)"),
    ("rate_growth=1:2", "(three numbers)"),
    ("rate_growth=1:1.5:2.5", "N = '2.5' must be a whole number"),
    ("rate_growth=1:1.5:\u00b3", "must be a whole number"),  # a superscript digit: isdigit, but no int
])
def test_a_bad_curve_is_refused_with_the_reason(spec, says, capsys):
    assert main(["explain", str(TOY), "--quiet", "--curve", spec]) == EXIT_BAD_INPUT
    assert says in capsys.readouterr().err


def test_a_kind_without_explain_is_refused_naming_every_kind_that_has_it():
    """Every registered kind has explain hooks now, so a kind without them is made by taking placement's away."""
    from optfleet.errors import InputError
    from optfleet.sensitivity.api import explainer_of

    loaded = api.load(FLEET_INSTANCES.parent / "placement" / "tiny.yaml")
    with pytest.raises(InputError, match="explain does not cover this kind yet") as refused:
        explainer_of(replace(loaded, kind=replace(loaded.kind, explain=None)))
    covered = str(refused.value).split("it covers: ", 1)[1]
    assert "placement" in str(refused.value) and all(kind in covered for kind in ("fleet", "profiled_fleet", "reserved", "routing", "caching",
                                                                                  "pd_fleet", "capacity_plan", "prefix_cache", "placement"))


def test_the_help_names_each_kinds_curve_parameters(capsys):
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for parameter in ("rate_growth", "ttft_ms", "percentile", "rho_max", "max_utilisation", "unit_price", "price:<GPU type>",
                      "epsilon", "capacity_tokens", "xi_ms", "prefill_ms_per_token:<server name>", "slo_ttft_ms"):
        assert parameter in text, parameter


@pytest.mark.parametrize(("path", "field"), [
    (FLEET_INSTANCES / "azure_2023_budget.yaml", "constraints"),  # the served-share objective
    (FLEET_INSTANCES / "azure_2023_h100_batching.yaml", "slo.service_model"),
])
def test_what_explain_does_not_cover_exits_2_naming_the_field(path, field, capsys):
    assert main(["explain", str(path), "--quiet"]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert field in captured.err and captured.out == ""


# ---------------------------------------------------------------- reserved (instances/reserved/tiny.yaml, worked by hand)

RESERVED_TINY = FLEET_INSTANCES.parent / "reserved" / "tiny.yaml"
MELANGE = FLEET_INSTANCES.parent / "profiled" / "melange_example.yaml"


def test_reserved_duals_match_finite_differences():
    """The hybrid LP with G = 3 fixed: window 2 (X = 5) spills, its row's dual is pi = $0.90/h x H per unit-window."""
    from optfleet.problems.reserved import explain as reserved_explain

    explainer = reserved_explain.explainer(api.load(RESERVED_TINY).problem)
    solved = explainer.solve(explainer.subject)
    model = reserved_explain.solved_model(explainer.subject, solved.detail[0].units)
    lp = fixed_lp_sensitivity(model)
    spilling = [row for row in lp.rows if row.name.startswith("spill_beyond_units") and abs(row.dual) > 1e-12]
    assert [row.name for row in spilling] == ["spill_beyond_units[2]"]
    hours = explainer.subject.problem.cost_windows.hours
    assert spilling[0].dual / hours == pytest.approx(0.9)
    for row in lp.rows:
        for step in (1e-3, -1e-3):
            if not row.degenerate and row.bound_low <= row.bound + step <= row.bound_high:
                slope = (shifted_objective(model, row.name, step, lambda m: []) - lp.report.objective) / step
                assert slope == pytest.approx(row.dual, rel=1e-6, abs=1e-9)


def test_reserved_break_even_unit_price_is_the_spill_saved_by_the_third_unit():
    """cost(G) = c G + 0.9 sum (X_n - G)+ with X = [3, 1, 5, 2]: the third unit saves 0.9 x 2 windows = $1.80/h, so G
    falls from 3 to 2 once a unit costs more than $1.80/h."""
    result = optfleet.explain(RESERVED_TINY)
    row = result.break_even.iloc[0]
    assert row["parameter"] == "unit_price" and row["plan_there"] == "2 units"
    assert row["low"] <= 1.8 <= row["break_even"] and row["break_even"] - row["low"] < 0.01
    p95_p99 = result.curves["percentile"]
    assert list(p95_p99["percentile"]) == [0.95, 0.99]
    assert list(p95_p99["plan"]) == ["5 units", "5 units"]  # floor(0.05 x 4) = 0 windows may overload: G = max X
    # the hybrid plan answers another question: the first percentile plan is not marked as a change from it
    assert p95_p99["plan_changes"].tolist() == [None, False]


@settings(max_examples=5, deadline=None)
@given(st.lists(st.floats(min_value=0.05, max_value=0.999), min_size=2, max_size=4, unique=True))
def test_reserved_units_are_monotone_in_the_percentile(percentiles):
    """A stricter overload percentile never buys fewer units (every plan at p' > p meets p)."""
    from optfleet.problems.reserved import explain as reserved_explain

    explainer = reserved_explain.explainer(api.load(RESERVED_TINY).problem)
    units = [explainer.solve(explainer.parameters["percentile"].apply(explainer.subject, p)).detail[0].units for p in sorted(percentiles)]
    assert all(a <= b for a, b in zip(units, units[1:]))


@pytest.mark.parametrize("curve", ["percentile=0.9,1.0", "unit_price=1e300"])  # outside (0, 1); above the file's price bound
def test_reserved_curve_values_outside_the_domain_exit_2(curve, capsys):
    assert main(["explain", str(RESERVED_TINY), "--quiet", "--curve", curve]) == EXIT_BAD_INPUT
    assert "--curve" in capsys.readouterr().err


# ---------------------------------------------------------------- profiled (Mélange's example)


def test_profiled_duals_match_finite_differences_and_break_even():
    """Capacity duals are -p_g (u = 1, one GPU per instance); the A100 break-even is where A10G x 12 ($12.12) meets the
    plan A10G x 3 + A100 x 1 (3 x 1.01 + p): p = $9.09."""
    from optfleet.problems.profiled_fleet import explain as profiled_explain

    problem = api.load(MELANGE).problem
    explainer = profiled_explain.explainer(problem)
    solved = explainer.solve(problem)
    model = profiled_explain.model_lib.build(problem)
    profiled_explain.model_lib.warm_start(model, solved.detail.plan)
    continuous = lambda m: [m.n, m.instances]  # noqa: E731
    lp = fixed_lp_sensitivity(model, continuous=continuous(model))
    assert lp.row("capacity[A10G]").dual == pytest.approx(-1.01)
    checked = 0
    for row in lp.rows:
        for step in (1e-4, -1e-4):
            if abs(row.dual) > 1e-9 and row.bound_low <= row.bound + step <= row.bound_high:  # a slice link cannot move alone
                slope = (shifted_objective(model, row.name, step, continuous) - lp.report.objective) / step
                assert slope == pytest.approx(row.dual, rel=1e-6, abs=1e-9)
                checked += 1
    assert checked >= 4  # both capacity rows, both ways
    result = optfleet.explain(MELANGE, near_optimal=False)
    row = result.break_even.iloc[0]
    assert row["parameter"] == "price:A100-80GB" and row["low"] <= 9.09 <= row["break_even"]


# ---------------------------------------------------------------- the shipped instances (slow: the catalog MILPs re-solved)

SHIPPED = [FLEET_INSTANCES / "azure_2023_catalog.yaml", FLEET_INSTANCES / "lmsys_llama3_8b_catalog.yaml", MELANGE,
           MELANGE.parent / "melange_availability.yaml", MELANGE.parent / "melange_gpu_mix.yaml",
           RESERVED_TINY.parent / "azure_2023_flash.yaml"]


@pytest.mark.slow
@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_a_shipped_instance_shows_the_binding_rows_p95_to_p99_and_a_break_even(path):
    """Issue 39's acceptance on the shipped instances: the binding table, the cost of P95 -> P99 (fleet and reserved; the
    profiled kind has no percentile) and the break-even of the default parameter, bracketed by plans that differ."""
    result = optfleet.explain(path, near_optimal=False)
    assert len(result.tables()["binding"]) > 0
    if result.kind != "profiled_fleet":
        curve = result.curves["percentile"]
        assert list(curve["percentile"]) == [0.95, 0.99] and curve["objective"].iloc[0] <= curve["objective"].iloc[1] + 1e-9
    row = result.break_even.iloc[0]
    if row["break_even"] is not None and row["break_even"] == row["break_even"]:
        assert row["plan_there"] != result.base.plan
    else:
        assert row["note"]


def test_the_text_heads_costs_with_their_unit_and_rounds_what_people_read(capsys):
    """Costs in $/h to the cent, percentages to a tenth, break-even values to four figures (they were printed to six
    significant figures under a bare "objective"); --json keeps the full values."""
    assert main(["explain", str(FLEET_INSTANCES / "toy_hetero.yaml"), "--quiet"]) == EXIT_OK
    out = capsys.readouterr().out
    assert "objective $/h" in out and "objective_there $/h" in out
    assert "  33.6  " in out and "33.5938" not in out  # the H100 break-even's change_pct
    assert "  2.004  " in out and "2.00391" not in out
    assert "  30.8  " in out and "30.7692" not in out  # "no H100-SXM" over the optimum


def test_a_reserved_plan_of_one_unit_is_named_in_the_singular():
    """X = [3, 1, 5, 2] at $3/unit-h buys one unit: the first saves 0.9 x 4 windows = $3.60/h, the second only $2.70/h
    (it printed "1 units")."""
    result = optfleet.explain(RESERVED_TINY, curves=["unit_price=2,3,4"], near_optimal=False)
    assert list(result.curves["unit_price"]["plan"]) == ["2 units", "1 unit", "0 units"]


def test_the_reserved_binding_table_says_what_each_row_family_means_and_its_slack_unit():
    """The families are the model's names (steps_need_buy, spill_beyond_units): each row says what it means and the
    unit of its slack (they were bare names with a unitless slack)."""
    binding = optfleet.explain(RESERVED_TINY, near_optimal=False).tables()["binding"]
    assert list(binding["constraint"]) == ["steps_need_buy", "spill_beyond_units"]
    assert all(binding["meaning"].str.len() > 0) and list(binding["slack_unit"]) == ["steps", "units"]


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 400), st.integers(1, 399), st.booleans())
def test_a_whole_number_break_even_is_the_first_whole_value_with_another_plan(threshold, current, down):
    """``narrowed`` on a plan that changes at a whole ``threshold`` (solves round the value, as the capacity parameters'
    do): from any bracket it ends at adjacent whole values, ``break_even`` the first with the other plan."""
    from optfleet.sensitivity.explainer import Solved
    from optfleet.sensitivity.run import narrowed

    if down:  # the plan is the instance's at and above the threshold, another below it
        current = threshold + current
        plan_at = lambda v: "kept" if round(v) >= threshold else "other"  # noqa: E731
        low, high = current, threshold - 1 - 0.4
    else:
        current = min(current, threshold - 1)
        plan_at = lambda v: "kept" if round(v) < threshold else "other"  # noqa: E731
        low, high = current, threshold * 5 + 0.3
    probed, width = [], abs(round(high) - round(low))

    def solve_at(value: float) -> Solved:
        probed.append(value)
        return Solved(float(round(value)), "optimal", plan_at(value))

    low, high, other = narrowed(solve_at, "kept", low, high, solve_at(high), integral=True)
    assert abs(high - low) == 1 and other.plan == "other" and all(v == int(v) for v in (low, high))
    assert (high, low) == ((threshold - 1, threshold) if down else (threshold, threshold - 1))
    assert len(probed) <= 1 + math.ceil(math.log2(width))  # the probe at high, then halvings, not a walk
