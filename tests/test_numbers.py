"""Numbers for people (optfleet/numbers.py): no exponent notation, round-off gaps as 0, directions named, durations in
the unit people read; and the solver's one-line summary that uses them."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from optfleet import numbers
from optfleet.solvers.report import OPTIMAL, SolveReport

pytestmark = pytest.mark.unit

FINITE = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e18, max_value=1e18)
COUNT_TEXT = re.compile(r"^-?\d{1,3}(,\d{3})*$")
POSITIONAL = re.compile(r"^-?\d{1,3}(,\d{3})*(\.\d+)?$")


@given(st.one_of(st.integers(min_value=-10**15, max_value=10**15), FINITE))
def test_a_count_is_digits_in_groups_of_three_never_an_exponent(value):
    shown = numbers.count(value)
    assert COUNT_TEXT.match(shown), shown
    assert int(shown.replace(",", "")) == round(value)


def test_a_count_of_180_thousand_is_written_out():
    assert numbers.count(1.8e5) == "180,000"
    assert numbers.count(None) == numbers.count(float("nan")) == "-"


@given(FINITE, st.integers(min_value=1, max_value=8))
def test_a_measured_value_is_positional_and_keeps_its_significant_figures(value, digits):
    shown = numbers.significant(value, digits)
    assert POSITIONAL.match(shown), shown
    if abs(value) >= 1e-6:  # rounded to `digits` significant figures (or to a whole number, at least as precise)
        assert float(shown.replace(",", "")) == pytest.approx(value, rel=10.0 ** (1 - digits))


@pytest.mark.parametrize(("value", "digits", "shown"), [(180_000.0, 4, "180,000"), (1234.5678, 4, "1,235"), (0.000123456, 3, "0.000123"),
                                                        (12.5, 4, "12.5"), (0.0, 4, "0"), (-0.004, 2, "-0.004")])
def test_significant_figures_examples(value, digits, shown):
    assert numbers.significant(value, digits) == shown


@given(st.floats(min_value=0, max_value=1e-9, exclude_max=True))
def test_a_relative_gap_below_round_off_prints_0(gap):
    assert numbers.relative_gap_text(gap) == "0 %"
    assert numbers.gap_percent(100 * gap) == "0"


@given(st.floats(min_value=1e-9, max_value=1e6))
def test_a_gap_above_round_off_is_never_shown_as_0_or_with_an_exponent(gap):
    shown = numbers.relative_gap_text(gap)
    assert shown != "0 %" and "e" not in shown


@pytest.mark.parametrize(("gap_pct", "shown"), [(0.0, "0"), (1.78e-14, "0"), (0.001, "<0.01"), (-0.001, ">-0.01"), (8.333, "8.33"),
                                                (1198.89, "1,198.89"), (None, "-")])
def test_gap_percent_examples(gap_pct, shown):
    assert numbers.gap_percent(gap_pct) == shown


@given(st.floats(min_value=0.01, max_value=1e7), st.floats(min_value=0.01, max_value=1e7))
def test_a_comparison_names_its_direction_and_is_never_negative(value, reference):
    shown = numbers.versus(value, reference, "homogeneous")
    assert "-" not in shown
    if "above" in shown:
        assert value > reference
    elif "below" in shown:
        assert value < reference
    else:
        assert shown == "the same as homogeneous" and value == pytest.approx(reference, rel=1e-3)


def test_versus_examples():
    assert numbers.versus(718.25, 983.45, "homogeneous") == "27.0 % below homogeneous"
    assert numbers.versus(101.9, 100.0, "homogeneous") == "1.9 % above homogeneous"


@pytest.mark.parametrize(("seconds", "shown"), [(0.5234, "0.52 s"), (45.23, "45.2 s"), (119.0, "119.0 s"), (258.0, "4.3 min"),
                                                (7560.0, "2.1 h"), (755_566.0, "8.7 days"), (None, "-")])
def test_a_duration_is_in_the_unit_people_read(seconds, shown):
    assert numbers.duration(seconds) == shown


@given(st.floats(min_value=0, max_value=1e9))
def test_a_duration_has_one_unit_and_no_exponent(seconds):
    shown = numbers.duration(seconds)
    number, unit = shown.split(" ")
    assert unit in ("s", "min", "h", "days") and POSITIONAL.match(number), shown


@given(st.floats(min_value=0, max_value=1e6))
def test_a_time_column_cell_has_fixed_decimals_and_no_exponent(seconds):
    assert POSITIONAL.match(numbers.seconds(seconds))


def test_the_solver_summary_prints_a_round_off_gap_as_0_and_large_numbers_without_exponent():
    report = SolveReport(OPTIMAL, 1_274.08, 1_274.08, 1.78e-16, 3.561, "highs")
    assert report.summary == "optimal, objective 1,274.08, bound 1,274.08, gap 0 %, 3.56 s"
    large = SolveReport(OPTIMAL, 1_081_920.84, 1_081_000.0, 8.6e-4, 0.2, "highs")
    assert large.summary == "optimal, objective 1,081,921, bound 1,081,000, gap 0.09 %, 0.20 s"
