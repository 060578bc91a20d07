"""optfleet explain on the caching kind's hindsight LP (issue 39): duals by finite differences, the price of capacity,
the capacity curve monotone and warm (bad input and output: tests/test_explain_cli_kinds.py)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet import api
from optfleet.problems.caching import explain as caching_explain
from optfleet.problems.caching.hindsight import solve_hindsight
from optfleet.sensitivity.run import PointSolver
from optfleet.solvers.sensitivity import arrays_sensitivity
from tests.support import REPO

TINY = REPO / "instances" / "caching" / "tiny.yaml"
SHAREGPT = REPO / "instances" / "caching" / "sharegpt_like.yaml"
SMALL = {"trace__generator__conversations": 60}  # the ShareGPT-like generator, 212 turns


def small_question(capacity_tokens: int) -> caching_explain.Question:
    return caching_explain.Question(api.load(SHAREGPT, **SMALL).problem, capacity_tokens)


def shifted_lp_objective(data, sensitivity, rows: np.ndarray | slice, delta: float) -> float:
    """The LP's optimum with the right-hand sides of ``rows`` raised by ``delta``."""
    args = list(caching_explain.lp.highs_whole(data).pass_model_args)
    upper = np.array(args[10], dtype=float)
    upper[rows] += delta
    args[10] = upper
    names = [r.name for r in sensitivity.rows], [c.name for c in sensitivity.columns]
    return arrays_sensitivity(tuple(args), *names, "the shifted LP").report.objective


def test_tiny_capacity_price_is_one_ms_per_token():
    """tiny.yaml (worked out in its file): at C = 100 TEL = 110 - C, so one more token of capacity saves 1 ms; the
    only capacity row binds, and its bound may move from 60 to 110 tokens with the same basis."""
    result = optfleet.explain(TINY)
    assert result.base.objective == pytest.approx(10.0)
    prices = result.tables()["shadow_prices"]
    assert prices.iloc[0]["shadow_price"] == pytest.approx(-1.0)
    assert prices.iloc[1]["shadow_price"] == pytest.approx(-16.0)  # a block of 16 tokens
    row = prices[prices["row"] == "capacity[2]"].iloc[0]
    assert (row["bound_low"], row["bound_high"]) == (60, 110)
    curve = result.curves["capacity_tokens"]
    assert list(curve["objective"]) == pytest.approx([10.0, 0.0])
    problem = api.load(TINY).problem
    at_101 = solve_hindsight(problem.trace, 101, problem.ttft, problem.xi_ms).report.objective
    assert at_101 - result.base.objective == pytest.approx(-1.0)


def test_row_duals_and_the_price_of_capacity_match_finite_differences():
    """Every shown row's dual is the LP's change per token of its bound (both sides inside its range), and the sum
    of the duals is the change per token of the whole capacity: in the LP and by re-solving at C + 1 (whole tokens,
    the evaluator's TEL)."""
    question = small_question(300)
    data, sensitivity = caching_explain.lp_of(question)
    base = sensitivity.report.objective
    shown = [r for r in sensitivity.rows if abs(r.dual) > 1e-9][:5]
    assert shown
    for row in shown:
        index = [r.name for r in sensitivity.rows].index(row.name)
        for step in (0.5, -0.5):
            if row.bound_low <= row.bound + step <= row.bound_high:
                slope = (shifted_lp_objective(data, sensitivity, np.array([index]), step) - base) / step
                assert slope == pytest.approx(row.dual, rel=1e-9, abs=1e-9)
    price = caching_explain.capacity_price_ms_per_token(data, sensitivity)
    assert price < 0
    assert (shifted_lp_objective(data, sensitivity, slice(None), 1e-3) - base) / 1e-3 == pytest.approx(price, rel=1e-6)
    solved, one_more = caching_explain.solve(question), caching_explain.solve(small_question(301))
    assert one_more.objective - solved.objective == pytest.approx(price, rel=1e-9)


@settings(max_examples=5, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=3000), min_size=2, max_size=4, unique=True))
def test_tel_never_rises_with_capacity(capacities):
    """A larger cache relaxes every capacity row: the hindsight optimum is non-increasing in C."""
    tels = [caching_explain.solve(small_question(c)).objective for c in sorted(capacities)]
    assert all(b <= a + 1e-9 for a, b in zip(tels, tels[1:]))


@settings(max_examples=4, deadline=None)
@given(st.lists(st.floats(min_value=10.0, max_value=400.0), min_size=2, max_size=3, unique=True))
def test_tel_never_rises_with_xi(xis):
    """A larger xi lowers every turn's excess need: the optimum TEL is non-increasing in it."""
    question = small_question(500)
    xi = caching_explain.parameters(question)["xi_ms"]
    tels = [caching_explain.solve(xi.apply(question, v)).objective for v in sorted(xis)]
    assert all(b <= a + 1e-9 for a, b in zip(tels, tels[1:]))


def test_the_warm_capacity_session_gives_the_full_solves_optimum():
    """One LP whose right-hand sides move (and is built again below its capacity) reaches the optimum TEL of a full
    solve at every point, in any order; xi and forced caching have no warm path."""
    question = small_question(300)
    warm = caching_explain.session(question, "capacity_tokens")
    for capacity in (300, 700, 1500, 200, 900, 0):
        at = replace(question, capacity_tokens=capacity)
        assert warm(at).objective == pytest.approx(caching_explain.solve(at).objective, rel=1e-12, abs=1e-9)
    assert caching_explain.session(question, "xi_ms") is None
    forced = replace(question, problem=replace(question.problem, forced_caching=True))
    assert caching_explain.session(forced, "capacity_tokens") is None


def test_a_curve_point_at_the_instances_value_is_the_instances_solve():
    explainer = caching_explain.explainer(small_question(300).problem)
    question = explainer.subject  # the instance's first capacity, 1,000 tokens
    base = caching_explain.solve(question)
    solve_at = PointSolver(explainer, question, explainer.parameters["capacity_tokens"], base)
    assert solve_at(1000) is base and solve_at(1001) is not base


def test_the_capacity_break_even_is_a_whole_number_of_tokens():
    """Capacity is whole tokens (a solve rounds it): the break-even is the whole capacity at which the plan changes
    (tiny: 101 tokens, where the hindsight LP keeps one token more), the one below keeps the instance's plan."""
    result = optfleet.explain(TINY, break_even_of=["capacity_tokens"], near_optimal=False)
    row = result.break_even.iloc[0]
    assert (row["low"], row["break_even"]) == (100, 101) and "the plan changes at 101" in row["note"]
    from optfleet.sensitivity.api import explainer_of

    explainer = explainer_of(api.load(TINY))
    capacity, subject = explainer.parameters["capacity_tokens"], explainer.subject
    assert explainer.solve(capacity.apply(subject, 100)).plan == result.base.plan
    assert explainer.solve(capacity.apply(subject, 101)).plan == row["plan_there"] != result.base.plan
