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
