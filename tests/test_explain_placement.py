"""optfleet explain on placement (issue 39 for the hindsight placement MILP): the fixed-placement LP is the placement's
Lindley recursion, its prefill duals checked by finite differences (of the LP and of the recursion), TTFT monotone in
the rate and in the prefill time, the SLO curve of the excess objective, alternatives, bad options exit 2; the
rate_growth session's model is a fresh build's at every point."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet import api
from optfleet.errors import InputError
from optfleet.models.placement import build, model_ttft_ms
from optfleet.problems.placement import explain as placement_explain
from optfleet.problems.placement.bounds import relaxation_bound
from optfleet.problems.placement.exact import placement_data
from optfleet.sensitivity.run import curve, parse_curve
from optfleet.solvers.highs import _compile, _pass_model_args
from tests.support import REPO, assert_explain_refuses, explain_objectives
from tests.test_explain import duals_checked_by_finite_differences, solved_for_explain

TINY = REPO / "instances" / "placement" / "tiny.yaml"  # 40 requests, two identical servers


@pytest.fixture(scope="module")
def tiny():
    problem, explainer, solved = solved_for_explain(TINY)
    assert solved.objective == pytest.approx(20.3594, abs=5e-5)  # the hindsight MILP's proven optimum, mean TTFT in ms
    return problem, explainer, solved


def mean_model_ttft_ms(problem, placement) -> float:
    """The MILP service model's mean TTFT of ``placement`` by its Lindley recursion (models.placement.model_ttft_ms)."""
    return float(model_ttft_ms(placement_data(problem, 0, len(problem.requests)), placement).mean())


def test_the_fixed_placement_lp_is_the_placements_lindley_recursion(tiny):
    problem, _, solved = tiny
    placement, report = solved.detail
    _, lp = placement_explain.fixed_placement_lp(problem, placement)
    assert lp.report.objective == pytest.approx(report.objective, rel=1e-9)
    assert lp.report.objective == pytest.approx(mean_model_ttft_ms(problem, placement), rel=1e-9)


def test_prefill_duals_match_finite_differences_of_the_lp(tiny):
    """Each request's prefill dual (1/n per TTFT that moves with its prefill) equals the fixed LP's change per ms of
    extra prefill; the queue heads (dual above 1/n) and a few requests that hold no one up are checked."""
    problem, _, solved = tiny
    placement = solved.detail[0]
    model, lp = placement_explain.fixed_placement_lp(problem, placement)
    heads = [row.name for row in placement_explain.queue_heads(lp, len(placement))]
    assert heads and all(lp.row(name).dual == pytest.approx(round(lp.row(name).dual * 40) / 40) for name in heads)  # whole TTFTs / n
    alone = [row.name for row in lp.rows if row.name.startswith("prefill[") and row.name not in heads][:2]
    assert duals_checked_by_finite_differences(model, lp, heads + alone, lambda m: []) >= 2 * len(heads)


def test_the_price_of_prefill_speed_is_the_lindley_recursions_slope(tiny):
    """``d mean TTFT / d prefill_ms_per_token`` of the fixed placement, from the LP's duals, equals the slope of the
    recursion (an independent evaluation) when the servers' prefill time per token moves either way."""
    problem, explainer, solved = tiny
    placement = solved.detail[0]
    shown = explainer.analyse(problem, solved).tables["shadow_prices"].set_index("where")
    price = shown.loc["gpu servers", "shadow_price"]
    assert price > 0
    step = 1e-5
    base = mean_model_ttft_ms(problem, placement)
    for delta in (step, -step):
        moved = placement_explain.with_prefill(problem, "gpu", problem.engines[0].prefill_ms_per_token + delta)
        assert (mean_model_ttft_ms(moved, placement) - base) / delta == pytest.approx(price, rel=1e-6)


def test_the_binding_table_reads_the_queue_off_the_placement(tiny):
    problem, explainer, solved = tiny
    placement = solved.detail[0]
    binding = explainer.analyse(problem, solved).tables["binding"]
    arrival = binding[binding["rows"].str.startswith("arrival")]
    assert list(arrival["count"]) == [int((placement == k).sum()) for k in range(2)]
    fcfs = binding[binding["rows"].str.startswith("fcfs")]
    queued = fcfs["binding"].sum()
    assert queued >= 1 and queued + arrival["binding"].sum() == len(placement)  # each request starts on arrival or queued


@settings(max_examples=3, deadline=None)
@given(st.lists(st.floats(0.5, 3.0), min_size=2, max_size=2))
def test_mean_ttft_is_monotone_in_the_rate(growths):
    """Denser arrivals never shorten a placement's Lindley waits, so the optimum over placements cannot fall."""
    low, high = explain_objectives(TINY, "rate_growth", sorted(growths))
    assert low <= high + 1e-6


@settings(max_examples=3, deadline=None)
@given(st.lists(st.floats(0.1, 0.4), min_size=2, max_size=2))
def test_mean_ttft_is_monotone_in_the_prefill_time(ms_per_token):
    fast, slow = explain_objectives(TINY, "prefill_ms_per_token:gpu", sorted(ms_per_token))
    assert fast <= slow + 1e-6


def test_the_excess_over_a_looser_slo_never_grows_and_reaches_zero():
    result = optfleet.explain(TINY, curves=["slo_ttft_ms=50,100,200,400"], near_optimal=False, solve__objective="ttft_excess")
    excess = list(result.curves["slo_ttft_ms"]["objective"])
    assert all(b <= a + 1e-6 for a, b in zip(excess, excess[1:], strict=False)) and excess[0] > 0
    assert excess[-1] == pytest.approx(0, abs=1e-6)  # tiny's own SLO (400 ms): every model TTFT is under it


def test_one_server_fewer_is_every_request_on_the_other(tiny):
    problem, explainer, solved = tiny
    (label, fewer), = explainer.alternatives(problem, solved)
    assert label == "one gpu server fewer" and len(fewer.engines) == 1
    alone = explainer.solve(fewer)
    assert alone.objective == pytest.approx(mean_model_ttft_ms(fewer, np.zeros(len(fewer.requests), dtype=np.int64)), rel=1e-9)
    assert alone.objective > solved.objective
    # the same instance as one written with one server: its requests' blocks were cut to one entry per server kept
    one = api.load(TINY, servers__0__count=1).problem
    assert np.array_equal(fewer.total_blocks, one.total_blocks) and relaxation_bound(fewer) == relaxation_bound(one)


@pytest.mark.parametrize(("args", "option"), [
    (["--curve", "rate_growth=0,1"], "--curve"),
    (["--curve", "rate_growth=1e-20"], "--curve"),  # arrival times x 1e20: HiGHS refused the arrays (exit 3 before)
    (["--curve", "slo_ttft_ms=100,200"], "--curve"),  # total_ttft: the SLO is no parameter of the MILP
    (["--curve", "prefill_ms_per_token:h100=0.1,0.2"], "--curve"),
    (["--break-even", "price:gpu"], "--break-even"),
    (["--set", "solve.max_milp_requests=10"], "solve.max_milp_requests"),
])
def test_bad_options_exit_2_naming_the_option(args, option, capsys):
    assert_explain_refuses(TINY, args, option, capsys)


def test_a_trace_too_long_for_the_milp_is_refused_before_any_solve():
    with pytest.raises(InputError, match="solve.max_milp_requests"):
        optfleet.explain(api.load(TINY, solve__max_milp_requests=10))


def model_arrays(model) -> tuple:
    """What HiGHS receives for ``model`` (its ``passModel`` arrays), with the names of its columns and rows."""
    form, integer = _compile(model, warm_start=False)
    return (_pass_model_args(form, integer), [v.name for v in form.columns], [(row.constraint.name, row.bound_type) for row in form.rows])


def assert_same_arrays(one: tuple, other: tuple) -> None:
    (args, columns, rows), (other_args, other_columns, other_rows) = one, other
    assert columns == other_columns and rows == other_rows
    for mine, theirs in zip(args, other_args, strict=True):
        assert np.array_equal(np.asarray(mine), np.asarray(theirs))


@pytest.mark.parametrize("objective", ["total_ttft", "ttft_excess"])
def test_the_rate_growth_session_hands_highs_a_fresh_builds_model(objective):
    """At each growth the session's model (built at the first, its arrival families declared again since) gives HiGHS
    the arrays a fresh build gives, so its points are the cold solves' (more FCFS rows at 1.5x: the structure changes)."""
    loaded = api.load(TINY, solve__objective=objective)
    explainer = placement_explain.explainer(loaded.problem)
    growth = explainer.parameters["rate_growth"]
    session = explainer.session(loaded.problem, "rate_growth")
    sizes = []
    for value in (1.25, 1.5, 0.8):
        problem = growth.apply(loaded.problem, value)
        solved = session(problem)  # solved: the model holds the values of the point before when the next is declared
        data = placement_data(problem, 0, len(problem.requests))
        fresh = build(data)
        assert_same_arrays(model_arrays(session.model), model_arrays(fresh))
        assert solved.objective == pytest.approx(explainer.solve(problem).objective, rel=1e-9)
        sizes.append(len(fresh.fcfs))
    assert sizes[0] < sizes[1] and sizes[2] < sizes[0]
    assert explainer.session(loaded.problem, "prefill_ms_per_token:gpu") is None


def test_a_curve_with_the_session_is_the_curve_without(tiny):
    problem, explainer, solved = tiny
    request = parse_curve("rate_growth=1:1.5:4", explainer)
    warm = curve(explainer, problem, request, solved)
    cold = curve(replace(explainer, session=None), problem, request, solved)
    assert warm.equals(cold)
