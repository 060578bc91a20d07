"""The dispatcher's rules (C&R band, hard rule, budget rule) and the spillover rules on hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.errors import InputError
from optfleet.problems.routing.dispatcher import LONG, SHORT, DispatchRule, estimated_total, route
from optfleet.problems.routing.spill import SpillRule, spill


def test_estimate_is_ceil_bytes_over_ratio_plus_output():
    assert estimated_total(np.array([10, 12, 1]), np.array([4.0, 4.0, 2.5]), np.array([5, 0, 1])).tolist() == [8, 3, 2]


def test_budget_and_hard_rules():
    # B = 800 below the window 1000: <= B short; (B, C] long by the budget rule; > C long by the hard rule
    d = route(DispatchRule(800, 1000), np.array([800, 801, 1000, 1001]), np.zeros(4, dtype=np.int64), np.zeros(4, dtype=np.int64))
    assert d.pool.tolist() == [SHORT, LONG, LONG, LONG] and not d.compressed.any()


def test_compress_and_route_band():
    # B = C = 1000, gamma 1.5: compressible categories (0) with 1000 < L <= 1500 and L_out < 1000 go short at T_c = B - L_out
    est = np.array([1200, 1500, 1501, 1200, 1200, 900])
    out = np.array([200, 300, 300, 200, 1000, 100])
    cat = np.array([0, 0, 0, 1, 0, 0])
    d = route(DispatchRule(1000, 1000, 1.5, (0,)), est, out, cat)
    assert d.pool.tolist() == [SHORT, SHORT, LONG, LONG, LONG, SHORT]
    assert d.compressed.tolist() == [True, True, False, False, False, False]
    assert d.compressed_input_tokens[:2].tolist() == [800, 700]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40_000), st.integers(0, 20_000), st.integers(0, 2)), min_size=1, max_size=50),
       st.integers(1, 16_384), st.floats(1.0, 3.0))
def test_every_compressed_request_meets_the_budget_exactly(reqs, b, gamma):
    est, out, cat = (np.array(c, dtype=np.int64) for c in zip(*reqs, strict=True))
    d = route(DispatchRule(b, 16_384, gamma, (0, 1)), est, out, cat)
    assert ((d.compressed_input_tokens + out)[d.compressed] == b).all()  # T_c + L_out = B (FleetOpt Eq. 15)
    assert (d.compressed_input_tokens[d.compressed] > 0).all()
    assert (est[(d.pool == SHORT) & ~d.compressed] <= b).all()
    assert not d.compressed[cat == 2].any()


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"b_short_tokens": 2000, "short_window_tokens": 1000}, "dispatcher.b_short_tokens"),
    ({"b_short_tokens": 0, "short_window_tokens": 1000}, "dispatcher.b_short_tokens"),
    ({"b_short_tokens": 800, "short_window_tokens": 1000, "compress_gamma": 0.9}, "dispatcher.compress_gamma"),
])
def test_bad_dispatcher_options(kwargs, field):
    with pytest.raises(InputError) as caught:
        DispatchRule(**kwargs)
    assert caught.value.field == field


def _one_short_slot(rule: SpillRule, fits: bool = True) -> list[int]:
    # a short pool of one GPU with one slot, service 10 s; the long pool idle; arrivals at 0, 1, 2 s, all sent short
    arrival = np.array([0.0, 1.0, 2.0])
    service = (np.full(3, 10.0), np.full(3, 10.0))
    return spill(rule, arrival, np.full(3, SHORT), np.full(3, fits), service, (1, 16), (1, 1)).tolist()


def test_queue_depth_spill():
    # request 1 finds 1 in the system (in service) and no queue: stays; request 2 finds a queue of 1 > 0: spills
    assert _one_short_slot(SpillRule(queue_limit=0)) == [SHORT, SHORT, LONG]
    assert _one_short_slot(SpillRule(queue_limit=1)) == [SHORT, SHORT, SHORT]


def test_pressure_spill_is_requests_per_gpu():
    # (active + queued) / gpus >= 0.85: one request in the system on one GPU already spills the next
    assert _one_short_slot(SpillRule(pressure_limit=0.85)) == [SHORT, LONG, LONG]
    assert _one_short_slot(SpillRule(pressure_limit=2.0)) == [SHORT, SHORT, LONG]
    assert _one_short_slot(SpillRule()) == [SHORT, SHORT, SHORT]


def test_long_to_short_spill_only_when_the_estimate_fits():
    arrival = np.array([0.0, 1.0, 2.0])
    service = (np.full(3, 10.0), np.full(3, 10.0))
    target = np.full(3, LONG)
    rule = SpillRule(queue_limit=0)
    assert spill(rule, arrival, target, np.array([True, True, True]), service, (4, 1), (1, 1)).tolist() == [LONG, LONG, SHORT]
    assert spill(rule, arrival, target, np.array([True, True, False]), service, (4, 1), (1, 1)).tolist() == [LONG, LONG, LONG]


def test_no_spill_to_a_pool_without_slots():
    # the long pool of the same stream has no GPU: the overloaded short pool keeps its requests
    arrival = np.array([0.0, 1.0, 2.0])
    service = (np.full(3, 10.0), np.full(3, 10.0))
    assert spill(SpillRule(queue_limit=0), arrival, np.full(3, SHORT), np.full(3, True), service, (1, 0), (1, 0)).tolist() == [SHORT] * 3
