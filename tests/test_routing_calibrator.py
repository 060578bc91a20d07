"""The calibrator variants on hand-computed sequences, and the vectorised code against the one-by-one oracle."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.errors import InputError
from optfleet.problems.routing.calibrator import PaperCalibrator, RouterCalibrator, StaticCalibrator, calibrate, observed_ratios
from optfleet.problems.routing.dispatcher import DispatchRule, estimated_total, route
from optfleet.problems.routing.sequential import route_one_by_one


def test_paper_variant_by_hand():
    # beta 0.5, gamma 1, cold start 4; observations 2, 4, 3:
    # c1 = 0.5*4 + 0.5*2 = 3, s1 = 0.5*|2-3| = 0.5; c2 = 0.5*3 + 0.5*4 = 3.5, s2 = 0.5*0.5 + 0.5*|4-3.5| = 0.5
    # routing ratios before each observation: 4 - 0, 3 - 0.5, 3.5 - 0.5
    c = calibrate(PaperCalibrator(beta=0.5, gamma=1.0), np.zeros(3, dtype=np.int64), np.array([2.0, 4.0, 3.0]))
    assert c.route_ratio == pytest.approx([4.0, 2.5, 3.0])
    assert c.mean_ratio == pytest.approx([4.0, 3.0, 3.5])


def test_paper_variant_keeps_categories_apart_and_clamps_at_min_ratio():
    # category 1 sees only its own observation; a huge sigma would drive the ratio below 1: clamped
    c = calibrate(PaperCalibrator(beta=0.5, gamma=10.0), np.array([0, 1, 0, 1]), np.array([2.0, 8.0, 2.0, 8.0]))
    # category 0: c1 = 3, s1 = 0.5*|2-3| = 0.5 -> 3 - 5 = -2 -> 1; category 1: c1 = 6, s1 = 0.5*|8-6| = 1 -> 6 - 10 -> 1
    assert c.route_ratio == pytest.approx([4.0, 4.0, 1.0, 1.0])
    assert c.mean_ratio == pytest.approx([4.0, 4.0, 3.0, 6.0])


def test_router_variant_by_hand():
    # decay 0.5, trackers from the first observation 3; warm-up 2 samples.  obs 1 < 3: q = 3 + 0.9 (1 - 3) = 1.2;
    # obs 2 >= 1.2: q = 1.2 + 0.1 (2 - 1.2) = 1.28.  mean: 3, then 0.5*3 + 0.5*1 = 2, then 0.5*2 + 0.5*2 = 2.
    cal = RouterCalibrator(decay=0.5, warmup_samples=2)
    c = calibrate(cal, np.zeros(4, dtype=np.int64), np.array([3.0, 1.0, 2.0, 5.0]))
    assert c.route_ratio == pytest.approx([4.0, 4.0, 1.2, 1.28])
    assert c.mean_ratio == pytest.approx([4.0, 3.0, 2.0, 2.0])


def test_router_variant_floors_estimates_at_one_and_shares_the_default_tracker():
    c = calibrate(RouterCalibrator(warmup_samples=0), np.zeros(3, dtype=np.int64), np.array([0.5, 0.5, 0.5]))
    assert c.route_ratio == pytest.approx([4.0, 1.0, 1.0])
    # two tracked categories at most: categories 2 and 3 share one tracker, so 3 meets 2's observation
    shared = calibrate(RouterCalibrator(warmup_samples=0, max_categories=2), np.array([0, 1, 2, 3]), np.array([2.0, 3.0, 5.0, 6.0]))
    assert shared.route_ratio == pytest.approx([4.0, 4.0, 4.0, 5.0])


def test_static_variant_and_observed_ratios():
    assert calibrate(StaticCalibrator(3.0), np.zeros(2, dtype=np.int64), np.ones(2)).route_ratio.tolist() == [3.0, 3.0]
    assert observed_ratios(np.array([10, 9]), np.array([4, 3])).tolist() == [2.5, 3.0]


@pytest.mark.parametrize(("make", "field"), [
    (lambda: PaperCalibrator(beta=1.0), "calibrator.beta"), (lambda: PaperCalibrator(beta=0.0), "calibrator.beta"),
    (lambda: RouterCalibrator(decay=1.5), "calibrator.decay"), (lambda: RouterCalibrator(decay=-0.1), "calibrator.decay"),
    (lambda: PaperCalibrator(gamma=-1.0), "calibrator.gamma"), (lambda: RouterCalibrator(max_categories=0), "calibrator.max_categories"),
    (lambda: StaticCalibrator(0.0), "calibrator.static_ratio"), (lambda: observed_ratios(np.array([5, 0]), np.array([1, 1])), "stream.bytes"),
    (lambda: observed_ratios(np.array([5, -3]), np.array([1, 1])), "stream.bytes"),
])
def test_bad_options_name_their_field(make, field):
    with pytest.raises(InputError) as caught:
        make()
    assert caught.value.field == field


requests = st.lists(st.tuples(st.integers(1, 200_000), st.integers(1, 40_000), st.integers(0, 5_000), st.integers(0, 4)), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(requests, st.sampled_from(["paper", "router", "static"]), st.floats(1.0, 3.0), st.integers(1, 4))
def test_vectorised_calibrator_and_dispatcher_match_algorithm_1_one_by_one(reqs, variant, gamma, limit):
    calibrator = {"paper": PaperCalibrator(), "router": RouterCalibrator(warmup_samples=3, max_categories=limit), "static": StaticCalibrator()}[variant]
    rule = DispatchRule(8192, 16384, gamma, (0, 2))
    size, tokens, out, cat = (np.array(column, dtype=np.int64) for column in zip(*reqs, strict=True))
    c = calibrate(calibrator, cat, observed_ratios(size, tokens))
    d = route(rule, estimated_total(size, c.route_ratio, out), out, cat)
    ratios, pools, compressed = route_one_by_one(calibrator, rule, size.tolist(), tokens.tolist(), out.tolist(), cat.tolist())
    assert c.route_ratio == pytest.approx(ratios, rel=1e-9)
    # a ratio within round-off of an integer division boundary may flip a ceil: compare where the estimate is clear
    clear = np.abs(size / c.route_ratio - np.round(size / c.route_ratio)) > 1e-6
    assert (d.pool[clear] == np.array(pools)[clear]).all() and (d.compressed[clear] == np.array(compressed)[clear]).all()
