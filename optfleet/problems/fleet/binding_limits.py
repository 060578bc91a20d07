"""Which of the instance's own limits decide a plan, and what would change it.

A plan is optimal for the instance as written; some of what is written is a modelling limit rather than a
requirement, and when one of them binds the output should say so.  Each check here returns a note ('' when the
limit does not bind), and re-solves with the limit relaxed where that costs milliseconds:

* **the time limit** (``solve.time_limit_s``): a MILP stopped by it has a gap left to its proven bound;
* **the utilisation cap** (``slo.rho_max``): the pools whose cap binds (the evaluator's ``binding``), and the cost of
  the same routing re-sized by the evaluator at a looser cap ``rho' = min(rho_max + 0.05, (1 + rho_max) / 2)``,
  an upper bound on the optimum at ``rho'`` (the same routing is one plan of that instance);
* **the window grid**: on a trace workload the short windows tried are a standard grid
  (``TRACE_BOUNDARY_CANDIDATES``), not the workload's own breakpoints; the sweep (milliseconds) tries the midpoints
  around each window the plan uses, and a cheaper plan there shows the grid decides it.

K (``solve.max_pools``) is :func:`optfleet.problems.fleet.milp.pool_limit_note`; the chunk, when its prefill floor
makes a pool infeasible, is named by :func:`optfleet.problems.fleet.plan_sizing.infeasible_pool_message`.
"""

from __future__ import annotations

from dataclasses import replace

from optfleet.errors import InfeasibleError
from optfleet.numbers import relative_gap_text
from optfleet.problems.fleet.evaluator import FleetEvaluation, evaluate
from optfleet.problems.fleet.heuristics.sweep import candidate_table
from optfleet.problems.fleet.plan_sizing import size_plan
from optfleet.problems.fleet.problem import FleetProblem
from optfleet.solvers.report import TIME_LIMIT, SolveReport

RHO_STEP = 0.05
"""How far the utilisation cap is loosened to price it: ``rho' = min(rho_max + RHO_STEP, (1 + rho_max) / 2)``."""

CHEAPER = 1e-9
"""A relaxed plan counts as cheaper when it saves more than this share of the plan's cost (float noise aside)."""


def time_limit_note(problem: FleetProblem, report: SolveReport | None) -> str:
    """When ``solve.time_limit_s`` stopped the solve before it proved its plan optimal: the gap left and the remedy."""
    if report is None or report.status != TIME_LIMIT:
        return ""
    gap = f" with {relative_gap_text(report.gap)} left to the bound" if report.gap is not None else " without a bound"
    return (f"the time limit decides the plan: solve.time_limit_s = {problem.time_limit_s:g} s stopped the solve{gap}; "
            "raise solve.time_limit_s (--time-limit) to close the gap")


def rho_max_note(problem: FleetProblem, evaluation: FleetEvaluation) -> str:
    """The pools whose utilisation cap binds, and the cost of the same routing re-sized at the looser cap ``rho'``
    (module docstring); '' when no used pool is held by the cap."""
    held = [p.name for p in evaluation.pools if p.instances > 0 and p.binding == "utilisation"]
    if not held:
        return ""
    looser = min(problem.rho_max + RHO_STEP, (1.0 + problem.rho_max) / 2)
    where = f"slo.rho_max = {problem.rho_max:g} decides the size of pool{'s' if len(held) > 1 else ''} {', '.join(held)} (the utilisation cap binds)"
    if problem.constraints:
        return where  # the re-sized plan may break a constraint: the cap's price is not stated without the MILP
    relaxed = replace(problem, rho_max=looser)
    try:
        resized = evaluate(relaxed, size_plan(relaxed, evaluation.plan))
    except InfeasibleError:
        return where
    cost, looser_cost = evaluation.cost_per_hour, resized.cost_per_hour
    if looser_cost < cost * (1 - CHEAPER):
        return (f"{where}: at rho_max {looser:g} the same routing, re-sized, costs ${looser_cost:,.2f}/h "
                f"({100 * (looser_cost / cost - 1):+.1f} %)")
    return f"{where}; at rho_max {looser:g} the same routing needs as many instances"


def window_grid_note(problem: FleetProblem, evaluation: FleetEvaluation) -> str:
    """On a trace workload (short windows from the standard grid): the sweep over the midpoints around each short
    window the plan uses, and the cheapest plan there when it beats this one; '' for a CDF workload, whose
    breakpoints are every window that matters."""
    if not problem.standard_windows:
        return ""
    grid = sorted(problem.boundary_candidates)
    used = sorted({p.window_tokens for p in evaluation.plan.pools if p.instances > 0 and p.window_tokens in grid})
    if not used:
        return ""
    bounds = [0, *grid, problem.long_window_tokens]
    middles = tuple(sorted({(a + b) // 2 for w in used for a, b in ((bounds[bounds.index(w) - 1], w), (w, bounds[bounds.index(w) + 1]))}
                           - {0, *grid}))
    middles = tuple(m for m in middles if problem.hardware.slots_per_instance(m) >= 1)
    tried = f"the short windows come from the standard grid for traces ({grid[0]:,}-{grid[-1]:,} tokens)"
    if not middles or problem.constraints:
        return f"{tried}; pools.short_window_candidates adds windows"  # a sweep plan may break a constraint
    table = candidate_table(problem, boundaries=middles)
    feasible = table[table["feasible"]]
    if not feasible.empty:
        best = feasible.loc[feasible["cost_per_hour"].idxmin()]
        if best["cost_per_hour"] < evaluation.cost_per_hour * (1 - CHEAPER):
            return (f"the window grid decides the plan: {tried}; with a short window of {int(best['B']):,} tokens the sweep finds "
                    f"${best['cost_per_hour']:,.2f}/h; add it to pools.short_window_candidates")
    return (f"{tried}; the sweep at the midpoints {', '.join(f'{m:,}' for m in middles)} around the plan's windows finds "
            "nothing cheaper; pools.short_window_candidates adds windows")


def limit_notes(problem: FleetProblem, evaluation: FleetEvaluation, report: SolveReport | None) -> list[str]:
    """Every binding limit's note (module docstring), in the order time limit, utilisation cap, window grid."""
    notes = [time_limit_note(problem, report), rho_max_note(problem, evaluation), window_grid_note(problem, evaluation)]
    return [n for n in notes if n]
