"""optfleet explain on the caching kind's hindsight LP (issue 39): duals by finite differences, the price of capacity,
the capacity curve monotone, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet import api
from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT, EXIT_OK
from optfleet.problems.caching import explain as caching_explain
from optfleet.problems.caching.hindsight import solve_hindsight
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


@pytest.mark.parametrize("option, value", [
    ("--curve", "capacity_tokens=0,100"),
    ("--curve", "capacity_tokens=200:100:3"),
    ("--curve", "rate_growth=1:2:3"),
    ("--break-even", "percentile"),
])
def test_bad_options_exit_2_naming_the_option(option, value, capsys):
    assert main(["explain", str(TINY), option, value, "--quiet"]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert option in err and value.split("=")[0] in err


def test_json_is_one_document_and_plot_is_written(tmp_path, capsys):
    png = tmp_path / "curves.png"
    assert main(["explain", str(TINY), "--json", "--quiet", "--curve", "xi_ms=30,50,80", "--plot", str(png)]) == EXIT_OK
    document = json.loads(capsys.readouterr().out)
    assert document["kind"] == "caching" and document["plan"]["objective"] == pytest.approx(10.0)
    assert {"binding", "shadow_prices", "curve:capacity_tokens", "curve:xi_ms"} <= set(document["tables"])
    assert png.stat().st_size > 0
