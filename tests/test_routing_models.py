"""The routing models against brute force: every placement of a few requests, every candidate of a grid."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from optfleet.models.routing import HindsightData, hindsight_arrays, hindsight_placement
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
    n_s, n_l = data.slots_per_instance
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


CLOSED_GAP = 1e-9
"""The solves below are compared with brute force at a relative 1e-6, so they close their gap below that: at HiGHS's
default relative gap (1e-4) a solve stopped 'optimal' at 5.5 over a bound of 5.49976, the true optimum."""


@settings(max_examples=40, deadline=None)
@given(CASES)
def test_hindsight_model_matches_brute_force(case):
    seconds, allowed, windows, caps = case
    data = _data(seconds, allowed, windows, caps)
    args, columns = hindsight_arrays(data)
    report, values = solve_arrays(args, what="hindsight test", mip_gap=CLOSED_GAP)
    expected = _brute_force(data)
    if expected is None:
        assert values is None and report.status == "infeasible"
        return
    assert report.status == "optimal" and report.objective == pytest.approx(expected, rel=1e-6, abs=_mip_slack(data, args))
    short, compressed = hindsight_placement(values, columns, len(data.long_s))
    assert not (short & compressed).any()


def _mip_slack(data: HindsightData, args: tuple) -> float:
    """How far HiGHS's optimum may sit from the exact one: it accepts a binary within ``mip_feasibility_tolerance``
    (1e-6) of 0 or 1, so each binary can move the objective by 1e-6 times its cost, or (through a capacity row) an
    overflow column by 1e-6 times its slot-seconds (seen: 0.499999 for 0.5)."""
    work = np.nansum(np.abs(np.concatenate([data.short_s, data.compressed_s, data.long_s])))
    return 1e-6 * (float(np.abs(args[6]).sum()) + float(work)) + 1e-9


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
@example(([(1.0, 2.0, 1.5), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0), (1.0, 1.0, 1.0)],
          [(False, True), (False, False), (False, False), (False, False), (True, True)], [1, 0, 0, 0, 1],
          ([0.0, 0.000244140625], [0.0, 0.0])))  # a window of 2^-12 slot-seconds: 5.49976 within the default gap of 5.5
def test_hindsight_overflow_model_matches_brute_force(case):
    seconds, allowed, windows, caps = case
    data = _data(seconds, allowed, windows, caps)
    args, columns = hindsight_arrays(data, objective="overflow")
    report, values = solve_arrays(args, what="hindsight overflow test", mip_gap=CLOSED_GAP)
    assert report.status == "optimal"  # always feasible: every request long, overflow as needed
    assert report.objective == pytest.approx(_brute_force_overflow(data), rel=1e-6, abs=_mip_slack(data, args))
    short, compressed = hindsight_placement(values, columns, len(data.long_s))
    assert not (short & compressed).any()


A, H = "A100-80GB", "H100-SXM"
# (candidate, pool, GPU type, window, fewest instances, $/instance-hour): candidate 0 is accurate but costly,
# candidate 1 cheap but mis-routes 2 %, candidate 2 in between; H100 is dearer per instance but needs fewer
OPTIONS = [(0, 0, A, 2000, 6, 1.0), (0, 0, H, 2000, 3, 1.6), (0, 1, A, 4000, 8, 1.0), (0, 1, H, 4000, 5, 1.6),
           (1, 0, A, 1000, 2, 1.0), (1, 0, H, 1000, 1, 1.6), (1, 1, A, 4000, 3, 1.0), (1, 1, H, 4000, 2, 1.6),
           (2, 0, A, 1500, 4, 1.0), (2, 0, H, 1500, 2, 1.6), (2, 1, A, 4000, 6, 1.0), (2, 1, H, 4000, 4, 1.6)]
MISROUTE = [0.0, 0.02, 0.005]


def _design(misroute, constraints=(), epsilon=0.01, extra=0):
    from types import SimpleNamespace

    from optfleet.models.routing_design import DesignData, DesignOption

    pools = tuple(DesignOption(c, p, gpu, gpu, 1, w, n, price) for c, p, gpu, w, n, price in OPTIONS)
    problem = SimpleNamespace(catalog_types=(A, H), configuration_label=lambda gpu, tp, field: gpu)
    return DesignData(np.array(misroute), pools, np.array([o.fewest + extra for o in pools], dtype=np.int64), problem, epsilon, tuple(constraints))


def _solve_design(data):
    from optfleet.models.routing_design import build_design, chosen
    from optfleet.problems.routing.design_milp import DESIGN_CONSTRAINTS
    from optfleet.solvers.highs import solve

    model = build_design(data, DESIGN_CONSTRAINTS)
    report = solve(model)
    return report, (chosen(model) if report.objective is not None else None)


def _brute_force_design(data, extra: int) -> float:
    """Every candidate, GPU pair and count up to ``extra`` above the fewest, checked by the constraints' own rules."""
    best = np.inf
    for c in range(len(data.misroute)):
        if data.misroute[c] > data.epsilon:
            continue
        short = [o for o in data.pools if (o.candidate, o.pool) == (c, 0)]
        long = [o for o in data.pools if (o.candidate, o.pool) == (c, 1)]
        for s, l in itertools.product(short, long):
            for ns, nl in itertools.product(range(s.fewest, s.fewest + extra + 1), range(l.fewest, l.fewest + extra + 1)):
                gpus = {A: 0, H: 0}
                gpus[s.gpu] += ns
                gpus[l.gpu] += nl
                cost = ns * s.cost_per_instance_hour + nl * l.cost_per_instance_hour
                ok = True
                for spec in data.constraints:
                    if spec.kind == "availability":
                        ok &= gpus[spec.gpu] <= spec.max_gpus
                    elif spec.kind == "gpu_mix":
                        share = gpus[spec.gpu] / (ns + nl) if ns + nl else 0.0
                        ok &= spec.min_share - 1e-9 <= share <= spec.max_share + 1e-9
                    elif spec.kind == "max_types":
                        ok &= sum(v > 0 for v in gpus.values()) <= spec.count
                    elif spec.kind == "node_multiple":
                        ok &= all(v % spec.gpus_per_node == 0 for v in gpus.values())
                    elif spec.kind == "budget":
                        ok &= cost <= spec.max_cost_per_hour + 1e-9
                if ok:
                    best = min(best, cost)
    return best


def test_design_model_picks_the_cheapest_rule_within_epsilon_and_each_pools_cheapest_gpu():
    # candidate 2: short H100 x2 ($3.2) + long A100 x6 ($6) = $9.2 (candidate 0: $4.8 + $8 = $12.8; candidate 1 is out at 2 % > 1 %)
    report, (c, pools) = _solve_design(_design(MISROUTE))
    assert report.status == "optimal" and report.objective == pytest.approx(9.2) and c == 2
    assert (pools[0][0].gpu, pools[0][1], pools[1][0].gpu, pools[1][1]) == (H, 2, A, 6)
    report, (c, _) = _solve_design(_design(MISROUTE, epsilon=0.001))
    assert c == 0 and report.objective == pytest.approx(12.8)
    report, chosen = _solve_design(_design([0.1, 0.1, 0.1]))
    assert report.status == "infeasible" and chosen is None


@pytest.mark.parametrize("constraints", [
    [SimpleNamespace(kind="availability", gpu=A, max_gpus=3)],
    [SimpleNamespace(kind="max_types", count=1)],
    [SimpleNamespace(kind="gpu_mix", gpu=H, min_share=0.45, max_share=1.0), SimpleNamespace(kind="availability", gpu=H, max_gpus=5)],
    [SimpleNamespace(kind="gpu_mix", gpu=A, min_share=0.0, max_share=0.3), SimpleNamespace(kind="node_multiple", gpu=None, gpus_per_node=4)],
    [SimpleNamespace(kind="budget", max_cost_per_hour=9.5), SimpleNamespace(kind="availability", gpu=H, max_gpus=1)],
], ids=["availability", "max_types", "mix_min", "mix_max_nodes", "budget_infeasible"])
def test_design_model_under_fleet_constraints_matches_brute_force_design(constraints):
    extra = 8
    report, _ = _solve_design(_design(MISROUTE, constraints, extra=extra))
    best = _brute_force_design(_design(MISROUTE, constraints, extra=extra), extra)
    if np.isinf(best):
        assert report.status == "infeasible"
    else:
        assert report.status == "optimal" and report.objective == pytest.approx(best)


def test_design_model_buys_instances_above_the_fewest_for_whole_nodes():
    # only H100 (no A100 available), whole nodes of 7 GPUs: candidate 2's 2 + 4 H100 round up to 7 ($11.2);
    # candidate 0's 3 + 5 would need 14 ($22.4)
    constraints = [SimpleNamespace(kind="availability", gpu=A, max_gpus=0), SimpleNamespace(kind="node_multiple", gpu=H, gpus_per_node=7)]
    report, (c, pools) = _solve_design(_design(MISROUTE, constraints, extra=8))
    assert report.status == "optimal" and report.objective == pytest.approx(11.2) and c == 2
    assert sum(n for _, n in pools.values()) == 7 and any(n > o.fewest for o, n in pools.values())
    assert report.objective == pytest.approx(_brute_force_design(_design(MISROUTE, constraints, extra=8), 8))
