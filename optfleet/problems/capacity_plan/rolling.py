"""A rolling-horizon method for long horizons: the MILP (models/capacity_plan.py) over a window of ``W`` periods,
its first ``S`` periods committed, then the window moves on by ``S``.

Each window starts from what is committed before it: the reserved GPUs still held from earlier reservations (paid
when they were made) and the instances running in the period before it (for the load charge).  A reservation made
in a committed period is kept for its whole term; decisions in a window's uncommitted tail are made again by the
next window.  Each window's MILP starts from the cheapest plan of the practitioners' rules for the window
(exact.best_rule_plan, with the reservations still held counted as held GPUs) that the evaluator accepts; HiGHS
refuses a start whose new reservations and those still held break a reserved cap.  Each window's solve gets
``solve.time_limit_s x S / T`` seconds, so the whole run takes about the time limit; a window without a plan by
then is solved again with the whole time limit.  The windows leave out the MILP's load-rounding rows: they only
lift the bound, which a window does not report, and they slow its short solves (on week_three_models the rolling
horizon planned $20,316.8 in 55 s without them and $20,598.5 in 62 s with them, one-off).  The budget bounds the
whole horizon's cost and is left out of the windows (the evaluator checks it); GPU-mix shares hold per period and
are kept.  The plan has no bound of its own:
it is compared with the full MILP's bound.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from optfleet.errors import InfeasibleError
from optfleet.models.capacity_plan import build, extract, warm_start
from optfleet.problems.capacity_plan.exact import best_rule_plan
from optfleet.problems.capacity_plan.plan import NO_TYPE, Schedule
from optfleet.problems.capacity_plan.problem import CapacityProblem
from optfleet.solvers import highs


def rolling_horizon(problem: CapacityProblem) -> Schedule:
    """The committed schedule of every window (module docstring)."""
    options, rolling = problem.spec.solve, problem.spec.rolling
    periods, n_types = problem.periods, len(problem.offers)
    step = min(rolling.step_periods, periods)
    window = max(rolling.window_periods, step)
    gpu_type = np.full((len(problem.model_names), periods), NO_TYPE, dtype=np.int64)
    instances = np.zeros_like(gpu_type)
    starts, on_demand, spot = (np.zeros((n_types, periods), np.int64) for _ in range(3))
    for start in range(0, periods, step):
        stop, commit = min(periods, start + window), min(periods, start + step)
        held = Schedule(gpu_type, instances, starts, on_demand, spot).reserved_held(problem)[:, start:stop]
        before = np.zeros((len(problem.model_names), n_types), np.int64)
        if start > 0:
            running = gpu_type[:, start - 1] >= 0
            before[running, gpu_type[running, start - 1]] = instances[running, start - 1]
        sub = problem.window(start, stop, budget=False)
        model = build(sub, reserved_before=held, instances_before=before, load_rounding=False)
        rule = best_rule_plan(replace(sub, held=replace(sub.held, pool=sub.held.pool + held)))
        if rule is not None:
            warm_start(model, sub, rule)
        report = highs.solve(model, solver=options.solver, time_limit=options.time_limit_s * step / periods, mip_gap=options.mip_gap,
                             warm_start=rule is not None)
        if not report.has_solution:  # no plan within the window's share: the window gets the whole time limit
            report = highs.solve(model, solver=options.solver, time_limit=options.time_limit_s, mip_gap=options.mip_gap)
        if not report.has_solution:
            raise InfeasibleError(f"periods {start}-{stop - 1}: the window's MILP found no plan ({report.status}) given the "
                                  "reservations and instances committed before it")
        part, kept = Schedule(**extract(model, sub)), slice(0, commit - start)
        gpu_type[:, start:commit], instances[:, start:commit] = part.gpu_type[:, kept], part.instances[:, kept]
        starts[:, start:commit], on_demand[:, start:commit], spot[:, start:commit] = (
            part.reserved_starts[:, kept], part.on_demand_gpus[:, kept], part.spot_gpus[:, kept])
    return Schedule(gpu_type, instances, starts, on_demand, spot, "rolling_horizon")
