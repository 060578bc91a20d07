"""Routing rules printed as a planner reads them: cut points for threshold routing, a table otherwise."""

from __future__ import annotations

import pytest

from optfleet.problems.fleet.plan import Plan, PoolPlan, RouteRule
from optfleet.problems.fleet.routing_text import merged_ranges, routing_blocks, threshold_cuts
from optfleet.tables import page

pytestmark = pytest.mark.unit

POOLS = (PoolPlan("short", 8192, 10), PoolPlan("long", 24576, 5))


def routing_lines(plan: Plan) -> list[str]:
    """The routing as printed: the lines of its page."""
    return page(routing_blocks(plan)).splitlines()


def _plan(*rules: RouteRule) -> Plan:
    return Plan(pools=POOLS, rules=rules)


def _to(pool: str, above: int, to: int, out_from: int = 0, out_below: int | None = None) -> RouteRule:
    return RouteRule(above, to, ((pool, 1.0),), (), out_from, out_below)


def test_threshold_rules_in_several_output_bands_print_as_one_cut():
    plan = _plan(_to("short", 0, 300, 0, 64), _to("short", 300, 2611, 64, 512), _to("short", 2458, 2611, 512, 768),
                 _to("long", 2611, 3891, 512, 768), _to("long", 3891, 20000, 768, None))
    assert threshold_cuts(plan) == [(2611, "short"), (20000, "long")]
    assert routing_lines(plan) == ["routing (threshold): L_total <= 2,611 -> short; above -> long"]


def test_classes_that_interleave_or_split_are_a_table():
    interleaved = _plan(_to("short", 0, 3000, 0, 64), _to("long", 2000, 2500, 64, None))
    assert threshold_cuts(interleaved) is None
    split = _plan(_to("short", 0, 1000), RouteRule(1000, 2000, (("short", 0.71), ("long", 0.29))), _to("long", 2000, 9000))
    lines = routing_lines(split)
    assert lines[0].startswith("routing (split, 3 ranges") and any("71 %" in line and "29 %" in line for line in lines)


def test_touching_classes_with_equal_shares_merge_and_compress_and_route_is_named():
    plan = _plan(_to("short", 0, 100), _to("short", 100, 8192), _to("long", 8192, 12288),
                 RouteRule(12288, 16384, (("long", 0.25),), (("short", 0.75),)))
    assert [(r.total_above, r.total_to) for r in merged_ranges(plan)] == [(0, 8192), (8192, 12288), (12288, 16384)]
    lines = routing_lines(plan)
    assert lines[0] == "routing (threshold): L_total <= 8,192 -> short; above -> long"
    compress_and_route = " ".join(line.strip() for line in lines[1:])
    assert "12,289-16,384" in compress_and_route and "75 % compressed into short" in compress_and_route and "rest -> long" in compress_and_route
