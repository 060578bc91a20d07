"""The batching MILP's table building reports its progress (which options, which search, how far)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import optfleet
from optfleet.problems.fleet.batching_pool import TABLE_SEARCH_ROUNDS, batching_workload, cap_seconds_per_request, rates_per_gpu
from optfleet.problems.fleet.milp import solve_milp
from optfleet.problems.fleet.milp_data import prepare_milp_data
from optfleet.problems.fleet.pool_config import PoolConfig

ROOT = Path(__file__).resolve().parents[1]
TOY = ROOT / "instances/fleet/toy.yaml"


def test_rates_per_gpu_tells_each_search_round_with_advancing_counts():
    """Every round of the three searches is told once, ``done / total`` rising through ``[0, 1)`` (``total`` counts
    entries, set once the third search's are known); the labels name the searches in order."""
    cfg = PoolConfig(window_tokens=8192, slots_per_instance=16, w_ms=8.0, h_ms_per_slot=0.65, chunk_tokens=512, length_scale_tokens=None,
                     cost_per_instance_hour=1.0, gpu="test")
    traffic = [(np.array([200, 4000]), np.array([300, 200]), np.array([0.6, 0.4])), (np.array([100]), np.array([100]), np.array([1.0]))]
    unit = batching_workload([cfg, cfg], traffic, 1.0)
    ceiling = np.array([0.85 * 16 / float(w @ cap_seconds_per_request(cfg, i, o, 0.85)) for i, o, w in traffic])
    calls: list[tuple[str, float, float]] = []
    told = rates_per_gpu(unit, [cfg, cfg], 500.0, 0.85, ceiling, steps=6, progress=lambda label, done, total: calls.append((label, done, total)))
    silent = rates_per_gpu(unit, [cfg, cfg], 500.0, 0.85, ceiling, steps=6)
    assert all(np.array_equal(a, b) for a, b in zip(told, silent, strict=True))  # telling changes nothing
    share = np.array([c[1] / c[2] for c in calls])
    assert share[0] == 0 and np.all(np.diff(share) > 0) and share[-1] < 1.0
    table = [c for c in calls if c[0].startswith("rates at")]
    searched = int(table[0][0].split()[2])  # "rates at N GPU counts ..."
    assert {c[2] for c in table} == {2 * 2 + searched} and len({c[2] for c in calls}) == 2  # the total is set once the counts are known
    assert max(c[1] for c in calls if "least GPU count" in c[0]) <= 2 * 2 and len([c for c in calls if "least GPU count" in c[0]]) <= TABLE_SEARCH_ROUNDS
    assert sum("rate without slot wait of 2 pools" in c[0] for c in calls) == 6
    assert any("least GPU count" in c[0] for c in calls)
    first_search = next(i for i, c in enumerate(calls) if "least GPU count" in c[0])
    assert all("rate without slot wait" in c[0] for c in calls[:first_search])
    assert [c[0].split("halving ")[1] for c in table] == [f"{i}/6" for i in range(1, 7)]


def test_the_batching_milp_tells_each_models_tables_and_solve():
    """``solve_milp``'s progress names the model, the options tabulated and the search; ``done`` never falls and stays
    below ``total`` (the method's end is told by the caller)."""
    problem = optfleet.load(TOY, slo__service_model="batching").problem
    calls: list[tuple[str, float, float]] = []
    result = solve_milp(problem, progress=lambda label, done, total: calls.append((label, done, total)))
    assert result.evaluation.meets_slo
    done = np.array([c[1] for c in calls])
    assert len(calls) > 10 and np.all(np.diff(done) >= 0) and np.all(done < np.array([c[2] for c in calls]))
    assert calls[0][0].startswith("model 1 of at most ") and "tables of " in calls[0][0] and "halving 1/" in calls[0][0]
    assert any(c[0].endswith("HiGHS solve") for c in calls)
    names = {p.name for p in prepare_milp_data(problem).pools}
    assert any(name in calls[0][0] for name in names)


def test_a_refresh_at_the_mix_a_curve_was_computed_at_reuses_it():
    """``BatchingTables.refreshed`` tabulates only the pools whose mix is new: refreshing twice with one plan runs the
    searches once (no progress the second time) and gives the same curves; ``same_mix`` is blind to scale only."""
    from optfleet.problems.fleet.heuristics import sweep
    from optfleet.problems.fleet.milp_batching import BatchingTables, initial_traffic, plan_traffic, same_mix

    problem = optfleet.load(TOY, slo__service_model="batching").problem
    data = prepare_milp_data(problem)
    plan = sweep(problem).plan
    tables = BatchingTables.start(data, initial_traffic(data, None))
    calls: list[str] = []
    once, _ = tables.refreshed(data, plan, failed=False, progress=lambda label, done, total: calls.append(label))
    first = len(calls)
    twice, changed = once.refreshed(data, plan, failed=False, progress=lambda label, done, total: calls.append(label))
    routed = plan_traffic(data, plan)
    assert 0 < first and len(calls) == first and not changed
    assert all(np.array_equal(twice.capacity[j], once.capacity[j]) for j in routed)
    l_in, l_out, weight = max(routed.values(), key=lambda t: len(t[2]))
    assert len(weight) > 1
    assert same_mix((l_in, l_out, weight), (l_in, l_out, 3.0 * weight))
    assert not same_mix((l_in, l_out, weight), (l_in, l_out, weight * np.linspace(1.0, 2.0, len(weight))))
