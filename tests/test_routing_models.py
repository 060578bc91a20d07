"""The routing models against brute force: every placement of a few requests, every candidate of a grid."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from optfleet.models.routing import HindsightData, design_arrays, hindsight_arrays, hindsight_placement
from optfleet.solvers.highs import solve_arrays


def _placements(data: HindsightData):
    """Every placement (long, short, compressed per request) the options allow: its short and long seconds per request."""
    for choice in itertools.product((0, 1, 2), repeat=len(data.long_s)):
        choice = np.array(choice)
        short = np.where(choice == 1, data.short_s, np.where(choice == 2, data.compressed_s, 0.0))
        if not np.isnan(short).any():
            yield short, np.where(choice == 0, data.long_s, 0.0)


def _brute_force(data: HindsightData) -> float | None:
    """The least busy GPU instances over every placement (long, short, compressed) meeting the capacity rows."""
    n_s, n_l = data.slots_per_gpu
    best = None
    windows = len(data.capacity_short)
    for short, long in _placements(data):
        if (np.bincount(data.window, short, windows) > data.capacity_short + 1e-9).any():
            continue
        if (np.bincount(data.window, long, windows) > data.capacity_long + 1e-9).any():
            continue
        value = (short.sum() / n_s + long.sum() / n_l) / data.span_s
        best = value if best is None or value < best else best
    return best


def _data(draw_seconds, allowed, windows, caps) -> HindsightData:
    short, compressed, long = (np.array(x, dtype=np.float64) for x in zip(*draw_seconds, strict=True))
    short[~np.array([a[0] for a in allowed])] = np.nan
    compressed[~np.array([a[1] for a in allowed])] = np.nan
    return HindsightData(np.array(windows, dtype=np.int64), short, compressed, long, np.array(caps[0], dtype=np.float64),
                         np.array(caps[1], dtype=np.float64), (8, 2), 10.0)


# small hindsight cases: (short, compressed, long) seconds, which options exist, windows, capacities
CASES = st.integers(1, 6).flatmap(lambda n: st.tuples(
    st.lists(st.tuples(st.floats(0.5, 20), st.floats(0.5, 20), st.floats(0.5, 20)), min_size=n, max_size=n),
    st.lists(st.tuples(st.booleans(), st.booleans()), min_size=n, max_size=n),
    st.lists(st.integers(0, 1), min_size=n, max_size=n),
    st.tuples(st.lists(st.floats(0, 40), min_size=2, max_size=2), st.lists(st.floats(0, 40), min_size=2, max_size=2))))


@settings(max_examples=40, deadline=None)
@given(CASES)
def test_hindsight_model_matches_brute_force(case):
    seconds, allowed, windows, caps = case
    data = _data(seconds, allowed, windows, caps)
    args, columns = hindsight_arrays(data)
    report, values = solve_arrays(args, what="hindsight test")
    expected = _brute_force(data)
    if expected is None:
        assert values is None and report.status == "infeasible"
        return
    assert report.status == "optimal" and report.objective == pytest.approx(expected, rel=1e-6, abs=1e-7)
    short, compressed = hindsight_placement(values, columns, len(data.long_s))
    assert not (short & compressed).any()


def _brute_force_overflow(data: HindsightData) -> float:
    """The least slot-seconds above the capacity rows over every placement (long, short, compressed)."""
    windows = len(data.capacity_short)
    best = np.inf
    for short, long in _placements(data):
        over = (np.maximum(np.bincount(data.window, short, windows) - data.capacity_short, 0.0).sum()
                + np.maximum(np.bincount(data.window, long, windows) - data.capacity_long, 0.0).sum())
        best = min(best, float(over))
    return best


@settings(max_examples=40, deadline=None)
@given(CASES)
def test_hindsight_overflow_model_matches_brute_force(case):
    seconds, allowed, windows, caps = case
    data = _data(seconds, allowed, windows, caps)
    args, columns = hindsight_arrays(data, objective="overflow")
    report, values = solve_arrays(args, what="hindsight overflow test")
    assert report.status == "optimal"  # always feasible: every request long, overflow as needed
    assert report.objective == pytest.approx(_brute_force_overflow(data), rel=1e-6, abs=1e-7)
    short, compressed = hindsight_placement(values, columns, len(data.long_s))
    assert not (short & compressed).any()


def test_design_model_is_the_cheapest_candidate_within_epsilon():
    cost = np.array([5.0, 3.0, 4.0, 2.0])
    misroute = np.array([0.0, 0.02, 0.005, 0.5])
    report, values = solve_arrays(design_arrays(cost, misroute, 0.01), what="design test")
    assert report.status == "optimal" and report.objective == pytest.approx(4.0) and int(np.argmax(values)) == 2
    report, values = solve_arrays(design_arrays(cost, misroute, 0.001), what="design test")
    assert report.objective == pytest.approx(5.0)
    report, values = solve_arrays(design_arrays(cost, misroute + 0.1, 0.01), what="design test")
    assert values is None
