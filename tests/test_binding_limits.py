"""Binding limits are reported (issue 34): the time limit, the utilisation cap and the window grid, each with what
would change the plan; numbers checked by hand on the toy fleet and a two-size trace."""

from __future__ import annotations

import yaml

import optfleet
from optfleet.problems.fleet.binding_limits import rho_max_note, time_limit_note, window_grid_note
from optfleet.problems.fleet.evaluator import evaluate
from optfleet.problems.fleet.heuristics.sweep import sweep
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.solvers.report import OPTIMAL, TIME_LIMIT, SolveReport

from support import FLEET_INSTANCES, prose


def _report(status: str, gap: float | None) -> SolveReport:
    return SolveReport(status=status, objective=17.0, bound=None if gap is None else 17.0 * (1 - gap), gap=gap, seconds=60.0, solver="highs")


def test_a_solve_stopped_by_its_time_limit_says_so_with_the_gap_and_the_remedy():
    problem = optfleet.load(FLEET_INSTANCES / "toy.yaml", time_limit_s=7).problem
    note = time_limit_note(problem, _report(TIME_LIMIT, 0.125))
    assert "solve.time_limit_s = 7 s stopped the solve with 12.50 % left to the bound" in note and "--time-limit" in note
    assert time_limit_note(problem, _report(OPTIMAL, 0.0)) == "" and time_limit_note(problem, None) == ""


def test_the_toys_utilisation_cap_is_priced_at_a_looser_cap_by_hand():
    """The toy's sweep plan (C&R at gamma 2): short load 20.08 + 10.01 = 30.09 erlangs on 4 slots, long 10.03 on 2.
    At rho_max 0.8: ceil(30.09 / 3.2) = 10 and ceil(10.03 / 1.6) = 7, $17/h; at 0.85: ceil(30.09 / 3.4) = 9 and
    ceil(10.03 / 1.7) = 6, $15/h."""
    problem = optfleet.load(FLEET_INSTANCES / "toy.yaml").problem
    evaluation = evaluate(problem, sweep(problem).plan)
    assert evaluation.cost_per_hour == 17.0
    note = rho_max_note(problem, evaluation)
    assert "slo.rho_max = 0.8 decides the size of pools short, long" in note
    assert "at rho_max 0.85 the same routing, re-sized, costs $15.00/h (-11.8 %)" in note


def test_a_cap_that_binds_nowhere_is_not_reported():
    """With a P99 TTFT SLO of 5 ms the toy's pools are sized by TTFT (floors 2 and 4 ms leave 3 and 1 ms of wait),
    not by the cap: no note."""
    problem = optfleet.load(FLEET_INSTANCES / "toy.yaml", slo__ttft_p99_ms=5, compression__enabled=False).problem
    evaluation = evaluate(problem, sweep(problem).plan)
    assert {p.binding for p in evaluation.pools if p.instances > 0} == {"ttft"}
    assert rho_max_note(problem, evaluation) == ""


def _two_size_trace(tmp_path) -> FleetProblem:
    """A trace of two sizes: 80 % of (4000, 1000) tokens and 20 % of (12000, 4000), 100 req/s, flat 1 ms iterations,
    chunk 1000, KV for 40,000 tokens per GPU (floor(40000 / C) slots), long window 16,384, no compression."""
    doc = yaml.safe_load((FLEET_INSTANCES / "toy.yaml").read_text())
    (tmp_path / "trace.csv").write_text("l_in,l_out\n" + "4000,1000\n" * 8 + "12000,4000\n" * 2)
    doc["workload"] = {"rate_rps": 100, "lengths": {"trace_file": "trace.csv"}}
    doc["hardware"]["slots"] = {"kv_tokens_per_gpu": 40000}
    doc["pools"] = {"long_window_tokens": 16384}
    doc["compression"] = {"enabled": False}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(doc))
    return optfleet.load(path).problem


def test_the_standard_window_grid_decides_a_trace_plan_and_the_midpoint_is_priced(tmp_path):
    """The 5,000-token requests (service ceil(4000 / 1000) + 1000 = 1004 ms, 80 erlangs) get the grid's 6,144 window:
    6 slots, ceil(80.32 / 4.8) = 17 instances.  The midpoint 5,120 holds 7 slots: ceil(80.32 / 5.6) = 15, two fewer,
    with the same long pool: $2/h less."""
    problem = _two_size_trace(tmp_path)
    assert problem.standard_windows
    evaluation = evaluate(problem, sweep(problem).plan)
    assert [(p.window_tokens, p.instances) for p in evaluation.pools][0] == (6144, 17)
    note = window_grid_note(problem, evaluation)
    assert note.startswith("the window grid decides the plan")
    assert f"with a short window of 5,120 tokens the sweep finds ${evaluation.cost_per_hour - 2:,.2f}/h" in note
    assert "pools.short_window_candidates" in note


def test_a_cdf_workload_has_no_grid_note_and_its_windows_are_its_breakpoints():
    problem = optfleet.load(FLEET_INSTANCES / "toy.yaml").problem
    assert not problem.standard_windows
    assert window_grid_note(problem, evaluate(problem, sweep(problem).plan)) == ""


def test_the_notes_reach_the_solve_output(tmp_path, capsys):
    from optfleet.cli import main

    _two_size_trace(tmp_path)
    assert main(["solve", str(tmp_path / "grid.yaml")]) == 0
    out = capsys.readouterr().out
    note = prose(out[out.index("\nnote:"):])
    assert "slo.rho_max = 0.8 decides the size of pools short, long" in note and "the window grid decides the plan" in note
