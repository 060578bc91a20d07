"""The HiGHS driver: status, bound and gap; time limits; the MIP start reaching HiGHS; other solvers."""

from __future__ import annotations

import random

import numpy as np
import pyomo.environ as pyo
from pyomo.core.expr.numeric_expr import LinearExpression
import pytest

from optfleet.errors import InputError
from optfleet.solvers import solve
from optfleet.solvers.highs import _compile, _pass_model_args, _without_columns, case_optima, solve_cases, start_is_feasible

pytestmark = pytest.mark.solved


def knapsack(items: int = 3, seed: int = 0) -> pyo.ConcreteModel:
    """max sum v x  s.t. two knapsack rows, x binary."""
    rng = random.Random(seed)
    weight = [rng.randint(10, 60) for _ in range(items)]
    other = [rng.randint(10, 60) for _ in range(items)]
    value = [w + o + rng.randint(0, 5) for w, o in zip(weight, other, strict=True)]
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(items), domain=pyo.Binary)
    m.cap1 = pyo.Constraint(expr=sum(weight[i] * m.x[i] for i in range(items)) <= 12 * items)
    m.cap2 = pyo.Constraint(expr=sum(other[i] * m.x[i] for i in range(items)) <= 11 * items)
    m.value = pyo.Objective(expr=sum(value[i] * m.x[i] for i in range(items)), sense=pyo.maximize)
    return m


def tiny() -> pyo.ConcreteModel:
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), domain=pyo.Binary)
    m.pick_two = pyo.Constraint(expr=sum(m.x[i] for i in range(3)) <= 2)
    m.value = pyo.Objective(expr=m.x[0] + 2 * m.x[1] + 3 * m.x[2], sense=pyo.maximize)
    return m


def test_optimal_solve_reports_objective_bound_and_zero_gap():
    m = tiny()
    report = solve(m)
    assert report.status == "optimal" and report.proven_optimal
    assert report.objective == pytest.approx(5.0) and report.bound == pytest.approx(5.0)
    assert report.gap == 0.0
    assert [pyo.value(m.x[i]) for i in range(3)] == pytest.approx([0, 1, 1])
    assert report.counts["solver_runs"] == 1
    assert report.summary.startswith("optimal")


def test_time_limit_returns_incumbent_and_bound_not_proven():
    m = knapsack(items=400, seed=3)
    for var in m.x.values():
        var.set_value(0)  # a feasible MIP start, so an incumbent exists however slow the machine
    for limit_s in (0.05, 0.2, 0.5):  # under heavy load 0.05 s can end before the root LP gives a bound
        report = solve(m, time_limit=limit_s, warm_start=True)
        if report.bound is not None:
            break
    assert report.status == "time_limit" and not report.proven_optimal
    assert report.objective is not None and report.bound is not None
    assert report.bound >= report.objective - 1e-6
    assert report.gap is not None and report.gap > 0
    assert "not proven optimal" in report.summary


def test_mip_start_reaches_highs():
    m = tiny()
    for i, v in enumerate([1, 1, 0]):
        m.x[i].value = v
    report = solve(m, warm_start=True)
    assert report.counts["mip_starts"] == 1 and report.counts["feasible_mip_starts"] == 1
    assert report.objective == pytest.approx(5.0)
    # Stopped before it could search, HiGHS holds the start (a feasible, non-optimal point) and nothing else.
    started = knapsack(items=400, seed=3)
    for i, var in started.x.items():
        var.set_value(1 if i in (0, 5) else 0)
    at_once = solve(started, time_limit=0.0, warm_start=True)
    assert at_once.status == "time_limit" and at_once.objective == pytest.approx(pyo.value(started.value))
    cold = solve(knapsack(items=400, seed=3), time_limit=0.0)
    assert cold.counts["mip_starts"] == 0 and not cold.has_solution


def test_an_infeasible_mip_start_is_counted_as_such():
    m = tiny()
    for i in range(3):
        m.x[i].value = 1  # breaks pick_two
    report = solve(m, warm_start=True)
    assert report.counts["mip_starts"] == 1 and report.counts["feasible_mip_starts"] == 0
    assert report.objective == pytest.approx(5.0)


def test_warm_start_refuses_unset_variables():
    m = tiny()
    m.x[0].value = 1
    with pytest.raises(ValueError, match="unset"):
        solve(m, warm_start=True)


def test_infeasible_model_is_reported_not_raised():
    m = tiny()
    m.impossible = pyo.Constraint(expr=m.x[0] + m.x[1] + m.x[2] >= 4)
    report = solve(m)
    assert report.status in ("infeasible", "infeasible_or_unbounded")
    assert report.objective is None and not report.has_solution


def test_a_row_no_values_meet_is_reported_infeasible_by_both_drivers():
    m = tiny()
    m.empty = pyo.Constraint(expr=LinearExpression([]) == 1)  # as the fleet model writes a class no pool can hold
    m.value.sense = pyo.minimize
    for report in (solve(m), solve_cases(m, [[m.x[0]], [m.x[1]]], [[0], [1]])):
        assert report.status == "infeasible" and not report.has_solution and report.bound is None
        assert "empty" in report.log


def test_unknown_solver_is_bad_input():
    with pytest.raises(InputError, match="not installed"):
        solve(tiny(), solver="no_such_solver")


@pytest.mark.skipif(not pyo.SolverFactory("glpk").available(exception_flag=False), reason="glpk not installed")
def test_glpk_through_solver_factory():
    report = solve(tiny(), solver="glpk", time_limit=10)
    assert report.status == "optimal" and report.objective == pytest.approx(5.0)
    started = tiny()
    for i, v in enumerate([1, 1, 0]):
        started.x[i].value = v
    # GLPK's interface takes no MIP start and whole seconds only: the start is dropped, 2.5 s becomes 3 s
    again = solve(started, solver="glpk", time_limit=2.5, warm_start=True)
    assert again.status == "optimal" and again.objective == pytest.approx(5.0) and again.counts["solver_runs"] == 1


def test_ranged_rows_fixed_variables_and_objective_constants_reach_highs():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(domain=pyo.NonNegativeIntegers, bounds=(0, 10))
    m.y = pyo.Var(bounds=(0, 5))
    m.y.fix(2.0)  # a constant to the compiler: moved into the row bounds
    m.w = pyo.Var(bounds=(None, 4))
    m.band = pyo.Constraint(expr=pyo.inequality(3, m.x + m.y, 7.5))
    m.floor = pyo.Constraint(expr=m.w >= m.x - 3)
    m.value = pyo.Objective(expr=m.x + m.y - 0.5 * m.w + 10, sense=pyo.maximize)
    report = solve(m)
    assert report.proven_optimal
    assert pyo.value(m.x) == pytest.approx(5) and pyo.value(m.w) == pytest.approx(2) and m.y.value == 2.0
    assert report.objective == pytest.approx(5 + 2 - 1 + 10) and report.bound == pytest.approx(report.objective)


def test_an_lp_reports_its_optimum_as_the_bound():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(2), bounds=(0, None))
    m.mix = pyo.Constraint(expr=m.x[0] + 2 * m.x[1] >= 4)
    m.cost = pyo.Objective(expr=3 * m.x[0] + 4 * m.x[1])
    report = solve(m)
    assert report.proven_optimal and report.objective == pytest.approx(8.0) and report.bound == pytest.approx(8.0)
    assert [pyo.value(m.x[i]) for i in range(2)] == pytest.approx([0, 2])


def test_a_known_bound_stops_highs_at_a_plan_that_reaches_it():
    m = knapsack(items=60, seed=5)
    reference = solve(knapsack(items=60, seed=5))
    assert reference.proven_optimal
    report = solve(m, known_bound=reference.objective)
    assert report.proven_optimal and report.objective == pytest.approx(reference.objective)
    assert report.bound == pytest.approx(reference.objective) and report.gap == pytest.approx(0.0, abs=1e-12)


def test_known_bound_is_highs_only():
    with pytest.raises(InputError, match="HiGHS only"):
        solve(tiny(), solver="glpk", known_bound=5.0)


def test_highs_options_reach_the_solver_and_are_highs_only():
    """``options`` are set on HiGHS by name (its log says presolve is off); another solver refuses them."""
    assert "Presolve is switched off" not in solve(knapsack(items=10, seed=1)).log
    report = solve(knapsack(items=10, seed=1), options={"presolve": "off"})
    assert report.proven_optimal and "Presolve is switched off" in report.log
    with pytest.raises(InputError, match="HiGHS only"):
        solve(tiny(), solver="glpk", options={"presolve": "off"})


def test_cases_cover_a_model_and_agree_with_the_whole_solve():
    # Exactly two of four binaries: every solution has x0 = 0, or x1 = 0, or x2 = x3 = 0, so the three
    # cases below cover the model.
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(4), domain=pyo.Binary)
    m.two = pyo.Constraint(expr=sum(m.x[i] for i in range(4)) == 2)
    m.cost = pyo.Objective(expr=4 * m.x[0] + 1 * m.x[1] + 3 * m.x[2] + 2 * m.x[3])
    report = solve_cases(m, [[m.x[i]] for i in range(4)], [[0], [1], [2, 3]])
    assert report.proven_optimal and report.objective == pytest.approx(3.0) and report.bound == pytest.approx(3.0)
    assert [round(pyo.value(m.x[i])) for i in range(4)] == [0, 1, 0, 1]
    infeasible = solve_cases(m, [[m.x[i]] for i in range(4)], [[0, 1, 2]])  # one binary left: cannot reach two
    assert infeasible.status == "infeasible" and infeasible.objective is None


def test_case_optima_solves_every_case_in_full():
    # The cases of the test above, whose optima are 3 (x1 + x3), 5 (x2 + x3) and 5 (x0 + x1), each plus y at its
    # lower bound 1; leaving one binary cannot reach two, and a case fixing y at 0, outside its bounds, has nothing.
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(4), domain=pyo.Binary)
    m.y = pyo.Var(bounds=(1, 2))
    m.two = pyo.Constraint(expr=sum(m.x[i] for i in range(4)) == 2)
    m.cost = pyo.Objective(expr=4 * m.x[0] + 1 * m.x[1] + 3 * m.x[2] + 2 * m.x[3] + m.y)
    groups = [[m.x[i]] for i in range(4)] + [[m.y]]
    optima = case_optima(m, groups, [[0], [1], [2, 3], [0, 1, 2], [4]])
    assert optima.tolist() == pytest.approx([4.0, 6.0, 6.0, np.inf, np.inf])
    for case, optimum in zip([[0], [1], [2, 3]], optima, strict=False):
        assert solve_cases(m, groups, [case]).objective == pytest.approx(optimum)


def test_cases_go_best_first_and_a_case_bounded_at_or_above_the_incumbent_is_never_solved():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(4), domain=pyo.Binary)
    m.two = pyo.Constraint(expr=sum(m.x[i] for i in range(4)) == 2)
    m.cost = pyo.Objective(expr=4 * m.x[0] + 1 * m.x[1] + 3 * m.x[2] + 2 * m.x[3])
    # Case optima 3, 5, 5.  The third case's given bound (100) and the second's LP bound (5) exceed the
    # first case's optimum, so only the first is solved.
    report = solve_cases(m, [[m.x[i]] for i in range(4)], [[0], [1], [2, 3]], case_bounds=[0.0, 0.0, 100.0])
    assert report.proven_optimal and report.objective == pytest.approx(3.0) and report.bound == pytest.approx(3.0)
    assert "3 cases: 0 refined bounds, 2 LP relaxations, 1 solved, 2 left pruned" in report.log
    assert report.counts == {"cases": 3, "refined_bounds": 0, "lp_relaxations": 2, "case_solves": 1, "empty_cases": 0, "mip_starts": 0,
                             "feasible_mip_starts": 0, "cases_left": 2, "solver_runs": 3}


def test_a_refined_case_bound_comes_before_the_lp_and_prunes_or_drops_the_case():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(4), domain=pyo.Binary)
    m.two = pyo.Constraint(expr=sum(m.x[i] for i in range(4)) == 2)
    m.cost = pyo.Objective(expr=4 * m.x[0] + 1 * m.x[1] + 3 * m.x[2] + 2 * m.x[3])
    asked: list[int] = []

    def refine(c: int) -> float:  # case optima 3, 5, 5: the second proven at 5, the third proven empty
        asked.append(c)
        return [0.0, 5.0, np.inf][c]

    report = solve_cases(m, [[m.x[i]] for i in range(4)], [[0], [1], [2, 3]], case_bounds=[0.0, 1.0, 2.0], case_refine=refine)
    assert report.proven_optimal and report.objective == pytest.approx(3.0) and report.bound == pytest.approx(3.0)
    # best first: case 0 (bound 0) refined, its LP and MILP; case 1 refined to 5 >= 3 and case 2 dropped
    assert asked == [0, 1, 2]
    assert report.counts["refined_bounds"] == 3 and report.counts["lp_relaxations"] == 1 and report.counts["case_solves"] == 1
    assert report.counts["cases_left"] == 1  # case 1, pruned by its refined bound; case 2 is gone


def test_cases_reach_highs_without_their_fixed_columns_and_a_row_they_break_empties_the_case():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), domain=pyo.Binary)
    m.y = pyo.Var(bounds=(1, 2))
    m.need = pyo.Constraint(expr=m.x[0] >= 1)  # no solution with x0 = 0
    m.pair = pyo.Constraint(expr=m.x[1] + m.x[2] >= 1)
    m.cost = pyo.Objective(expr=m.x[0] + 2 * m.x[1] + 3 * m.x[2] + m.y)
    report = solve_cases(m, [[m.x[0]], [m.y], [m.x[1]]], [[0], [1], [2]])  # y = 0 is outside its bounds: the second case is empty too
    assert report.proven_optimal and report.objective == pytest.approx(5.0)
    assert [round(pyo.value(m.x[i])) for i in range(3)] == [1, 0, 1] and pyo.value(m.y) == pytest.approx(1.0)
    assert report.counts["case_solves"] == 1 and report.counts["empty_cases"] == 2
    nothing = solve_cases(m, [[m.x[0]]], [[0]])
    assert nothing.status == "infeasible" and nothing.objective is None


def test_cases_that_cannot_beat_the_cutoff_bound_the_optimum_and_a_known_bound_stops_early():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(4), bounds=(0, 1))  # an LP: HiGHS ends a cut-off case with "objective bound reached"
    m.two = pyo.Constraint(expr=sum(m.x[i] for i in range(4)) >= 2)
    m.cost = pyo.Objective(expr=1 * m.x[0] + 2 * m.x[1] + 3 * m.x[2] + 4 * m.x[3])
    report = solve_cases(m, [[m.x[0], m.x[1]]], [[], [0]])  # the second case (cost 7) cannot beat 3
    assert report.proven_optimal and report.objective == pytest.approx(3.0) and report.bound == pytest.approx(3.0)
    again = solve_cases(m, [[m.x[2]], [m.x[0]]], [[0], [1]], known_bound=3.0)  # the first case reaches the bound: done
    assert again.proven_optimal and again.objective == pytest.approx(3.0) and again.bound == pytest.approx(3.0)
    assert again.counts["case_solves"] == again.counts["solver_runs"] == 1  # the second case never ran


def test_cases_refuse_a_maximised_objective():
    with pytest.raises(ValueError, match="minimises"):
        solve_cases(tiny(), [], [[]])


def test_a_case_reaches_highs_without_its_fixed_columns_and_rows_left_empty():
    m = pyo.ConcreteModel()
    m.x = pyo.Var(range(3), domain=pyo.Binary)
    m.need = pyo.Constraint(expr=m.x[0] >= 1)
    m.pair = pyo.Constraint(expr=m.x[1] + m.x[2] >= 1)
    m.only = pyo.Constraint(expr=m.x[1] <= 1)
    m.cost = pyo.Objective(expr=m.x[0] + 2 * m.x[1] + 3 * m.x[2])
    form, integer = _compile(m, warm_start=False)
    args = _pass_model_args(form, integer)
    position = {id(var): j for j, var in enumerate(form.columns)}
    fixed = np.array([position[id(m.x[1])]])
    case_args, kept = _without_columns(args, fixed)
    assert case_args[0] == 2 and list(kept) == [j for j in range(3) if j != fixed[0]]  # x1 left out
    assert case_args[1] == 2  # `only` lost its one entry and is dropped; `need` and `pair` stay
    assert _without_columns(args, np.array([position[id(m.x[0])]])) is None  # `need` cannot hold


def test_start_feasibility_is_checked_on_rows_bounds_and_integrality():
    m = tiny()
    form, integer = _compile(m, warm_start=False)
    args = _pass_model_args(form, integer)
    assert start_is_feasible(args, np.array([0.0, 1.0, 1.0]))
    assert not start_is_feasible(args, np.array([1.0, 1.0, 1.0]))  # pick_two broken
    assert not start_is_feasible(args, np.array([0.0, 0.5, 1.0]))  # not whole
    assert not start_is_feasible(args, np.array([0.0, 2.0, 0.0]))  # above the upper bound 1
