"""The reserved kind: the hand-checked tiny instance, scan == exact on random traces, the math's pieces
(fluid queue, window curves, grid merging) against direct computations, profiles, traces and bad input."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optfleet
from optfleet.cli import main
from optfleet.errors import EXIT_BAD_INPUT, EXIT_INFEASIBLE, InputError
from optfleet.problems.reserved import exact, heuristics
from optfleet.problems.reserved.evaluator import (
    UnitsPlan,
    backlog_spill_per_hour,
    evaluate,
    schedule_is_covered,
    spill_per_hour,
)
from optfleet.problems.reserved.backlog import online_segments, solve_backlog_by_units
from optfleet.problems.reserved.latency import queue_delay_s
from optfleet.problems.reserved.stats import curves
from optfleet.problems.reserved.windows import window_series

from support import REPO

TINY = REPO / "instances" / "reserved" / "tiny.yaml"
AZURE = REPO / "instances" / "reserved" / "azure_2023_flash.yaml"


def _problem(source=TINY, **overrides):
    return optfleet.load(source, **overrides).problem


def _document(frame: pd.DataFrame, **extra) -> dict:
    """A reserved instance on ``frame`` (custom profile: 100 adjusted tokens/s per unit, unit weights)."""
    doc = {"kind": "reserved", "name": "random", "trace": {"frame": frame, "time_unit": "s"},
           "profile": {"provider": "custom", "tau_tokens_per_s_per_unit": 100},
           "prices": {"unit_per_hour": 1.0, "paygo_input_per_million": 7.0, "paygo_output_per_million": 21.0}, "windows_s": [1, 3]}
    doc.update(extra)
    return doc


def _random_frame(seed: int, n: int = 60, span_s: float = 30.0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"t": np.sort(rng.uniform(0, span_s, n)), "input_tokens": rng.integers(0, 400, n),
                         "output_tokens": rng.integers(0, 150, n)})


# ---------------------------------------------------------------- the tiny instance, by hand (tiny.yaml's comment)


@pytest.mark.unit
def test_tiny_windows_and_hybrid_costs_by_hand():
    problem = _problem()
    assert problem.cost_windows.units_needed.tolist() == [3.0, 1.0, 5.0, 2.0]
    assert problem.cost_windows.hours == pytest.approx(4 / 3600)
    costs = [problem.prices.unit_per_hour * g + spill_per_hour(problem.cost_windows, g) for g in range(6)]
    assert costs == pytest.approx([9.90, 7.65, 6.30, 5.85, 6.30, 6.75])
    assert [backlog_spill_per_hour(problem.cost_windows, g, 1.0) + 1.35 * g for g in (1, 2, 3)] == pytest.approx([6.75, 3.60, 4.05])


@pytest.mark.unit
def test_tiny_queue_delays_by_hand():
    problem = _problem()
    delays = queue_delay_s(problem.trace.arrival_s, problem.work, 2 * 100.0)
    assert delays == pytest.approx([0.0, 0.6, 0.3, 0.0, 0.8])
    assert queue_delay_s(problem.trace.arrival_s, problem.work, 100.0)[1] == pytest.approx(1.6)


@pytest.mark.solved
def test_tiny_every_method_by_hand():
    table = optfleet.gap(TINY).set_index("method")
    expected_units = {"percentile_p50": 3, "overload_scan_p50": 2, "chance_p50": 2, "percentile_p95": 5, "overload_scan_p95": 5,
                      "chance_p95": 5, "latency_scan": 2, "latency": 2, "hybrid_scan": 3, "hybrid": 3, "backlog_scan": 2, "backlog": 2}
    assert table["units"].to_dict() == expected_units
    assert table.loc["hybrid", "objective"] == pytest.approx(5.85)
    assert table.loc["backlog", "objective"] == pytest.approx(3.60)
    assert table.loc["percentile_p50", "gap_pct"] == pytest.approx(50.0)
    assert table.loc["latency", "p99_e2e_s"] == pytest.approx(1.292)
    assert (table["status"][[m for m in expected_units if m in ("chance_p50", "chance_p95", "latency", "hybrid", "backlog")]] == "optimal").all()
    assert optfleet.load(TINY, quantile_method="inverted_cdf").kind.run(_problem(quantile_method="inverted_cdf"), "percentile_p50",
                                                                         optfleet.progress.silent)[0].plan.units == 2


# ---------------------------------------------------------------- scan == exact on random traces


@pytest.mark.solved
@pytest.mark.parametrize("seed", range(6))
def test_exact_models_equal_the_scans_on_random_traces(seed):
    rng = np.random.default_rng(100 + seed)
    grid = {"min_units": int(rng.integers(1, 4)), "increment_units": int(rng.integers(1, 3))}
    doc = _document(_random_frame(seed), plans={"percentiles": [0.9], "backlog": {"max_wait_s": float(rng.uniform(0.5, 3))},
                                                "latency": {"threshold_s": 2.0}, "robust": {"split_s": 10}},
                    quantile_method="inverted_cdf", baseline_latency={"intercept_s": 0.2})
    doc["profile"].update(grid)
    problem = optfleet.load(doc).problem
    price = problem.prices.unit_per_hour

    def hybrid_cost(g):
        return price * g + spill_per_hour(problem.cost_windows, g)

    plan, report = exact.hybrid(problem)
    assert report.objective == pytest.approx(hybrid_cost(heuristics.hybrid_scan_units(problem)), rel=1e-7)
    assert hybrid_cost(plan.units) == pytest.approx(report.objective, rel=1e-7)
    arrays_report, _ = exact.highs.solve_arrays(exact.hybrid_arrays(exact.spill_windows(problem.cost_windows), exact.purchase_grid(problem), price),
                                                what="hybrid arrays")
    assert arrays_report.objective / problem.cost_windows.hours == pytest.approx(report.objective, rel=1e-7)

    assert exact.chance(problem, 0.9)[0].units == heuristics.overload_scan_units(problem, 0.9) == heuristics.percentile_units(problem, 0.9)
    assert exact.latency_bisect(problem)[0].units == heuristics.latency_scan_units(problem)

    backlog_plan, backlog_report = exact.backlog(problem)
    scan = heuristics.backlog_scan_units(problem)
    wait = problem.plans.backlog.max_wait_s
    online = price * scan + backlog_spill_per_hour(problem.cost_windows, scan, wait)
    assert backlog_report.bound <= online + 1e-9  # hindsight spill bounds the online rule
    assert backlog_report.objective <= report.objective + 1e-9  # waiting can only help
    units, by_units = solve_backlog_by_units(exact.spill_windows(problem.cost_windows), exact.grid_points(exact.purchase_grid(problem)), price, wait)
    assert by_units.status == "optimal" and by_units.objective == pytest.approx(backlog_report.objective, rel=1e-7)
    assert price * units + 0 * wait <= by_units.objective + 1e-9

    robust_plan, robust_report = exact.robust(problem)
    worst = [max(price * g + spill_per_hour(s.cost_windows, g) for s in problem.scenarios) for g in problem.grid()]
    assert robust_report.objective == pytest.approx(min(worst), rel=1e-7)
    arrays_robust, _ = exact.highs.solve_arrays(
        exact.robust_arrays([exact.spill_windows(s.cost_windows) for s in problem.scenarios], exact.purchase_grid(problem), price), what="robust")
    assert arrays_robust.objective / exact.robust_hours([exact.spill_windows(s.cost_windows) for s in problem.scenarios]) == pytest.approx(min(worst))


@pytest.mark.solved
@pytest.mark.parametrize("seed", range(8))
def test_online_volume_and_segment_bounds_hold_against_the_lp(seed):
    """The online rule spills the least volume any plan can, so pi_min x volume bounds every plan's cost in a
    segment (backlog.py): check both against the fixed-units LP on random windows with uneven prices."""
    from optfleet.models.reserved import backlog_fixed_arrays

    rng = np.random.default_rng(seed)
    needed = rng.gamma(0.7, 3.0, 200) * (rng.random(200) < 0.8)
    price = rng.uniform(0.5, 2.0, 200)
    units, wait_windows = float(rng.integers(1, 4)), float(rng.uniform(0.5, 4))
    online = online_segments(needed, units, wait_windows)
    starts = np.concatenate([[True], online.segment[1:] != online.segment[:-1]])
    report, values = exact.highs.solve_arrays(backlog_fixed_arrays(needed, price, starts, units, wait_windows), what="lp")
    whole, _ = exact.highs.solve_arrays(backlog_fixed_arrays(needed, price, np.r_[True, np.zeros(199, bool)], units, wait_windows), what="lp")
    assert report.objective == pytest.approx(whole.objective, rel=1e-7, abs=1e-9)  # segments are independent
    assert values[200:].sum() >= online.spill.sum() - 1e-7  # no plan spills less than the online rule
    assert report.objective <= float(np.dot(price, online.spill)) + 1e-9


@pytest.mark.solved
def test_backlog_with_one_price_equals_the_online_rule():
    """With one pay-as-you-go price per adjusted token, spilling the newest work when the queue is full is optimal."""
    frame = _random_frame(3)
    doc = _document(frame, prices={"unit_per_hour": 1.0, "paygo_input_per_million": 9.0, "paygo_output_per_million": 9.0},
                    plans={"percentiles": [], "backlog": {"max_wait_s": 1.5}})
    problem = optfleet.load(doc).problem
    _, report = exact.backlog(problem)
    scan = heuristics.backlog_scan_units(problem)
    assert report.objective == pytest.approx(1.0 * scan + backlog_spill_per_hour(problem.cost_windows, scan, 1.5), rel=1e-7)


@pytest.mark.solved
def test_commitment_reduces_to_hybrid_without_on_demand_and_beats_flat_with_it():
    frame = _random_frame(5, n=120, span_s=40.0)
    frame["class"] = np.where(np.arange(len(frame)) % 3 == 0, "a", "b")
    base = {"percentiles": [], "commitment": {"block_s": 10, "on_demand_per_unit_hour": 1e6, "term_blocks": 1}}
    problem = optfleet.load(_document(frame, plans=base)).problem
    hybrid_plan, hybrid_report = exact.hybrid(problem)
    plan, report = exact.commitment(problem)
    assert report.objective == pytest.approx(hybrid_report.objective, rel=1e-7)
    assert plan.reservation_units == hybrid_plan.units and plan.lots.sum() == 0

    models = {"a": {"provider": "custom", "tau_tokens_per_s_per_unit": 100}, "b": {"provider": "custom", "tau_tokens_per_s_per_unit": 50}}
    cheap = {"percentiles": [], "commitment": {"block_s": 10, "on_demand_per_unit_hour": 1.2, "term_blocks": 2, "models": models}}
    problem = optfleet.load(_document(frame, plans=cheap)).problem
    plan, report = exact.commitment(problem)
    flat = heuristics.flat_commitment(problem)
    assert schedule_is_covered(problem, plan) and schedule_is_covered(problem, flat)
    assert evaluate(problem, plan).commitment_per_hour == pytest.approx(report.objective, rel=1e-7)
    assert report.objective <= evaluate(problem, flat).commitment_per_hour + 1e-9


# ---------------------------------------------------------------- the math's pieces


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 20), st.floats(0, 500)), min_size=1, max_size=40), st.floats(1, 400))
def test_vectorised_fluid_queue_equals_lindley_loop(requests, rate):
    requests.sort()
    arrival = np.array([t for t, _ in requests])
    work = np.array([w for _, w in requests])
    backlog, last, expected = 0.0, arrival[0], []
    for t, w in zip(arrival, work, strict=True):
        backlog = max(0.0, backlog - rate * (t - last))
        expected.append(backlog / rate)
        backlog += w
        last = t
    assert queue_delay_s(arrival, work, rate) == pytest.approx(expected, abs=1e-6)


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0, 1e4), min_size=1, max_size=50), st.lists(st.floats(0, 120), min_size=1, max_size=8))
def test_window_curves_equal_direct_sums(work, units):
    series = window_series(np.arange(len(work), dtype=float), np.array(work), np.zeros(len(work)), 10.0, 1.0)
    found = curves(series, np.array(units))
    x = series.units_needed
    for i, g in enumerate(units):
        assert found["overload_probability"][i] == pytest.approx(np.mean(x > g))
        assert found["expected_overflow_units"][i] == pytest.approx(np.maximum(x - g, 0).mean(), abs=1e-9)
        assert found["expected_spare_units"][i] == pytest.approx(np.maximum(g - x, 0).mean(), abs=1e-9)


@pytest.mark.unit
@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 30), st.floats(0, 5)), min_size=1, max_size=40), st.integers(1, 5), st.integers(1, 4), st.integers(1, 25))
def test_merging_windows_between_grid_points_is_exact_on_the_grid(windows, first, step, top):
    from optfleet.models.reserved import PurchaseGrid, SpillWindows, grid_points, merge_between_grid_points

    needed = np.array([x for x, _ in windows])
    price = np.array([p for _, p in windows])
    grid = PurchaseGrid(first, step, max(first, top))
    merged = merge_between_grid_points(SpillWindows(needed, price, 1.0, 1.0), grid)
    for g in grid_points(grid):
        assert np.dot(merged.spill_price, np.maximum(merged.units_needed - g, 0)) == pytest.approx(np.dot(price, np.maximum(needed - g, 0)),
                                                                                                   rel=1e-9, abs=1e-9)


# ---------------------------------------------------------------- profiles and traces


@pytest.mark.unit
def test_profiles_charge_uncached_input_and_switch_above_the_long_context_threshold():
    from optfleet.problems.reserved.profiles import resolve
    from optfleet.problems.reserved.schema import AzurePtuProfileSpec, VertexProfileSpec

    pro = resolve(VertexProfileSpec(provider="vertex", model="gemini-2.5-pro"))
    work = pro.work(np.array([1000, 300_000]), np.array([400, 100_000]), np.array([10, 10]), np.array([5, 0]))
    assert work.tolist() == pytest.approx([600 + 0.1 * 400 + 8 * 15, 2 * 200_000 + 0.2 * 100_000 + 12 * 10])
    flash = resolve(VertexProfileSpec(provider="vertex", model="gemini-2.5-flash"))
    assert (flash.tau_tokens_per_s_per_unit, flash.weights.w_out, flash.weights.w_think) == (2690, 9, 9)
    azure = resolve(AzurePtuProfileSpec(provider="azure_ptu", tau_tokens_per_s_per_unit=3000, deployment="regional"))
    assert (azure.weights.w_out, azure.weights.w_cache, azure.min_units, azure.increment_units) == (4, 0, 50, 50)
    assert [azure.round_up(u) for u in (0, 1, 50, 51, 160)] == [0, 50, 50, 100, 200]


@pytest.mark.unit
def test_trace_notes_unsorted_rows_and_a_suspect_unit():
    frame = pd.DataFrame({"t": [3_000, 1_000, 2_000_000, 5_000_000], "input_tokens": [10, 20, 30, 40], "output_tokens": [1, 2, 3, 4]})
    problem = optfleet.load(_document(frame, plans={"percentiles": [0.5]})).problem
    notes = " ".join(problem.notes)
    assert "not in order" in notes and "read as s" in notes and "read as ms it would span" in notes
    assert problem.trace.arrival_s.tolist() == [0.0, 2000.0, 1_999_000.0, 4_999_000.0]


@pytest.mark.unit
@pytest.mark.parametrize(("column", "value", "field"), [
    ("cached_tokens", 500, "cached_tokens"), ("input_tokens", -1, "input_tokens"), ("output_tokens", float("nan"), "output_tokens"),
    ("input_tokens", 1.5, "input_tokens"), ("t", "soon", "t"),
])
def test_bad_trace_values_name_the_column_and_row(column, value, field):
    frame = pd.DataFrame({"t": [0.0, 1.0], "input_tokens": [100, 100], "output_tokens": [5, 5], "cached_tokens": [0, 0]})
    frame[column] = frame[column].astype(object)
    frame.loc[1, column] = value
    with pytest.raises(InputError) as error:
        optfleet.load(_document(frame))
    assert field in error.value.field and "index 1" in error.value.field


@pytest.mark.unit
def test_a_bad_value_in_a_second_file_is_named_by_its_file_and_line(tmp_path: Path):
    (tmp_path / "a.csv").write_text("t,input_tokens,output_tokens\n0,10,1\n1,10,1\n")
    (tmp_path / "b.csv").write_text("t,input_tokens,output_tokens\n0.5,10,1\n1.5,-4,1\n")
    doc = {"kind": "reserved", "name": "two", "trace": {"file": [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")], "time_unit": "s"},
           "profile": {"provider": "custom", "tau_tokens_per_s_per_unit": 100}}
    with pytest.raises(InputError) as error:
        optfleet.load(doc)
    assert str(error.value).startswith(f"trace:input_tokens line 3 of {tmp_path / 'b.csv'} = -4:")


@pytest.mark.unit
def test_bad_instances_exit_2_naming_the_field(tmp_path: Path, capsys):
    cases = [
        ({"profile": {"provider": "vertex", "model": "gemini-9"}}, "profile.model"),
        ({"profile": {"provider": "openai", "model": "x"}}, "profile"),
        ({"profile": {"provider": "custom", "tau_tokens_per_s_per_unit": float("nan")}}, "tau_tokens_per_s_per_unit"),
        ({"trace": {"file": "tiny.csv"}}, "trace.time_unit"),
        ({"trace": {"file": "empty.csv", "time_unit": "s"}}, "trace"),
        ({"max_units": 2, "profile": {"provider": "custom", "tau_tokens_per_s_per_unit": 100, "min_units": 5}}, "max_units"),
    ]
    (tmp_path / "empty.csv").write_text("t,input_tokens,output_tokens\n")
    (tmp_path / "tiny.csv").write_text((TINY.parent / "tiny.csv").read_text())
    import yaml

    base = yaml.safe_load(TINY.read_text())
    for i, (change, field) in enumerate(cases):
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(yaml.safe_dump({**base, **change}))
        assert main(["solve", str(path), "--out", str(tmp_path / f"out{i}")]) == EXIT_BAD_INPUT, change
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and field in err[0], (change, err)
        assert not (tmp_path / f"out{i}").exists()


@pytest.mark.solved
def test_an_unreachable_target_exits_1_naming_the_binding_window(capsys):
    assert main(["solve", str(TINY), "--method", "chance_p95", "--set", "max_units=4"]) == EXIT_INFEASIBLE
    err = capsys.readouterr()
    assert "needs 5.00" in err.out + err.err and "max_units" in err.out + err.err


@pytest.mark.unit
def test_synthetic_trace_is_seeded_and_follows_its_rate():
    from optfleet.problems.reserved.schema import SyntheticSpec
    from optfleet.problems.reserved.synthetic import generate

    spec = SyntheticSpec(seed=3, days=1, mean_rps=2, peak_to_trough=3, peak_hour=12,
                         classes=[{"name": "a", "share": 1, "input_tokens": {"mean_tokens": 100, "sigma": 0.5}, "output_tokens": {"mean_tokens": 10}}])
    one, two = generate(spec), generate(spec)
    assert np.array_equal(one.arrival_s, two.arrival_s) and np.array_equal(one.input_tokens, two.input_tokens)
    assert len(one) == pytest.approx(2 * 86_400, rel=0.02)
    hour = np.floor(one.arrival_s / 3600).astype(int)
    counts = np.bincount(hour, minlength=24)
    assert counts[12] / counts[0] == pytest.approx(3.0, rel=0.15)
    assert one.input_tokens.mean() == pytest.approx(100, rel=0.03)


# ---------------------------------------------------------------- the Azure 2023 instance (the shipped trace)


@pytest.mark.solved
def test_azure_2023_flash_plans():
    table = optfleet.gap(AZURE, "percentile_p95,chance_p95,percentile_p99,chance_p99,latency,hybrid_scan,hybrid").set_index("method")
    assert table.loc[["percentile_p95", "chance_p95"], "units"].tolist() == [20, 20]
    assert table.loc[["percentile_p99", "chance_p99"], "units"].tolist() == [32, 32]
    assert table.loc["latency", "units"] == 34 and table.loc["latency", "p99_e2e_s"] <= 1.5
    # at $3.70 per GSU-hour a fully used GSU costs more than pay-as-you-go for its tokens: the cheapest plan buys none
    assert table.loc["hybrid", "units"] == table.loc["hybrid_scan", "units"] == 0
    assert table.loc["hybrid", "objective"] == pytest.approx(23.52, abs=0.01)
    problem = _problem(AZURE)
    assert len(problem.trace) == 28_185 and problem.trace.class_names == ("code", "conv")
    assert not math.isnan(evaluate(problem, UnitsPlan(34)).latency.p99_e2e_s)


@pytest.mark.solved
def test_gap_plot_writes_a_png(tmp_path: Path):
    path = tmp_path / "reserved.png"
    assert main(["gap", str(TINY), "--methods", "percentile_p95,hybrid_scan,hybrid", "--plot", str(path), "--quiet"]) == 0
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


@pytest.mark.solved
def test_solve_out_writes_the_window_curves(tmp_path: Path):
    assert main(["solve", str(TINY), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    table = pd.read_csv(tmp_path / "out" / "window_curves.csv")
    assert table["units"].tolist() == [0, 1, 2, 3, 4, 5]
    assert table["overload_probability"].tolist() == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.25, 0.0])
    assert table["expected_overflow_units"].tolist() == pytest.approx([2.75, 1.75, 1.0, 0.5, 0.25, 0.0])


@pytest.mark.unit
def test_baseline_latency_is_fitted_from_20_observations_and_falls_back_below():
    from optfleet.problems.reserved.latency import FALLBACK, MIN_LATENCY_OBSERVATIONS, baseline_latency
    from optfleet.problems.reserved.trace import trace_from_frame

    rng = np.random.default_rng(0)
    n = MIN_LATENCY_OBSERVATIONS
    frame = pd.DataFrame({"t": np.arange(n, dtype=float), "input_tokens": rng.integers(100, 5000, n), "output_tokens": rng.integers(1, 500, n)})
    frame["cached_tokens"] = frame["input_tokens"] // 3
    frame["latency_s"] = 0.2 + 1e-4 * frame["input_tokens"] + 2e-3 * frame["output_tokens"] - 5e-5 * frame["cached_tokens"]
    fitted = baseline_latency(trace_from_frame(frame, "s", "trace", "test"), None)
    assert fitted.per_cached_s == 0.0  # a negative coefficient is clipped
    assert fitted.per_output_s == pytest.approx(2e-3, rel=0.05) and "least squares on 20" in fitted.how
    frame.loc[0, "latency_s"] = np.nan
    fallback = baseline_latency(trace_from_frame(frame, "s", "trace", "test"), None)
    assert (fallback.intercept_s, fallback.per_input_s, fallback.per_cached_s, fallback.per_output_s, fallback.per_thinking_s) == FALLBACK


@pytest.mark.solved
def test_backlog_by_units_under_a_tiny_time_limit_keeps_a_valid_bound():
    problem = optfleet.load(_document(_random_frame(9), plans={"percentiles": [], "backlog": {"max_wait_s": 2.0}})).problem
    windows, grid = exact.spill_windows(problem.cost_windows), exact.grid_points(exact.purchase_grid(problem))
    _, optimum = solve_backlog_by_units(windows, grid, 1.0, 2.0)
    units, report = solve_backlog_by_units(windows, grid, 1.0, 2.0, time_limit_s=1e-9)
    assert report.status == "time_limit" and report.bound <= optimum.objective + 1e-9 <= report.objective + 2e-9
