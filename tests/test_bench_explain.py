"""benchmarks/bench_explain.py's clock of the time inside HiGHS, its cold baseline, and its --only option."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import highspy
import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def bench(monkeypatch):
    """The benchmark module (it imports ``output`` from its own folder)."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location("bench_explain", REPO / "benchmarks" / "bench_explain.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _knapsack() -> highspy.Highs:
    """max 5 a + 4 b + 3 c  s.t.  2 a + 3 b + c <= 5, binaries: a small MIP (optimum 9 at a = b = 1)."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(3, 1, 3, 1, -1, 0.0, np.array([5.0, 4.0, 3.0]), np.zeros(3), np.ones(3), np.array([-np.inf]), np.array([5.0]),
                np.array([0, 1, 2], dtype=np.int32), np.array([0, 0, 0], dtype=np.int32), np.array([2.0, 3.0, 1.0]),
                np.ones(3, dtype=np.int32))
    return h


@pytest.mark.solved
def test_highs_clock_adds_each_run_and_restores_the_method(bench):
    original = highspy.Highs.run
    first, second = _knapsack(), _knapsack()
    start = time.perf_counter()
    with bench.highs_clock() as seconds:
        first.run()
        after_one = seconds[0]
        second.run()
    wall = time.perf_counter() - start
    assert 0 < after_one < seconds[0] <= wall
    assert first.getInfo().objective_function_value == pytest.approx(9.0)
    assert highspy.Highs.run is original
    outside = seconds[0]
    _knapsack().run()
    assert seconds[0] == outside  # runs after the block are not counted


def test_only_is_refused_with_publish(bench, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["bench_explain.py", "--only", "tiny", "--publish"])
    with pytest.raises(SystemExit) as exit_info:
        bench.main()
    assert exit_info.value.code == 2
    assert "--publish writes the whole table" in capsys.readouterr().err


@pytest.mark.solved
def test_the_cold_points_are_the_curves_points_solved_on_their_own(bench):
    """The second baseline solves the curve's own values (the instance's included), each to the curve's objective."""
    spec = "rate_growth=1:1.5:4"
    explainer, subject = bench.fresh("instances/reserved/tiny.yaml")
    frame = bench.curve(explainer, subject, bench.parse_curve(spec, explainer), explainer.solve(subject))
    points = bench.cold_points("instances/reserved/tiny.yaml", spec)
    assert [p["value"] for p in points] == list(frame["rate_growth"])
    assert [p["objective"] for p in points] == pytest.approx(list(frame["objective"]), rel=1e-12)
    assert all(p["wall_s"] >= p["highs_s"] > 0 and p["cpu_s"] > 0 for p in points)
