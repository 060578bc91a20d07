"""Sensitivity of the hindsight prefix-cache MILP (``optfleet explain``): binding rows, the price of capacity, curves.

The plan explained is the ``optimum`` method's at the instance's first capacity ``C`` (blocks): the hindsight MILP of
models/prefix_cache.py, one binary ``y_j`` per gap between two uses of a block, for the instance's objective (hit
tokens, TEL or SLO violations), scored by the kind's evaluator.

* **binding**, read off the solved MILP: the capacity rows (2) (blocks kept after each event within ``C``) with how
  many bind and the least slack in blocks; the tree rows (3) (a kept block's parent kept, ``leaves``) or (5) (a hit
  needs its parent's hit, ``any``); with ``prefill_server: fcfs`` the wait rows (9).
* **shadow prices**: every decision of this MILP is a binary, so with them fixed nothing is left to price (every dual
  would be 0).  The duals are those of its **LP relaxation** (``0 <= y_j <= 1``), a bound on the optimum, not of the
  MILP's schedule; the output says so and gives both values.  Row ``i``'s dual is ``d objective / d C_i`` per block
  of capacity after its event, and raising every row together is one more block of cache:

      d objective / d C  =  sum_i dual_i      [objective units per block; per token: / block_tokens]

  (the LP's one-sided rate while its basis stays optimal; rows dropped as unable to bind at ``C`` stay so above).
  The rows with the largest prices are listed (at most :data:`SHOWN_ROWS`).
* **parameters**: ``capacity_blocks`` (the instance's capacities are the default curve) and the objective's
  threshold, ``xi_ms`` (TEL) or ``slo_ms`` (violations).  Each point is a MILP solve within ``solve.time_limit_s``;
  its status is shown.  No break-even and no alternatives (one schedule, no restriction a planner names).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pyomo.environ as pyo

from optfleet.models import prefix_cache as milp
from optfleet.problems.prefix_cache.hindsight import objective_threshold_ms, prepare, solve_hindsight
from optfleet.problems.prefix_cache.problem import PrefixCacheProblem
from optfleet.sensitivity.explainer import Analysis, Explainer, Parameter, Solved, plan_digest
from optfleet.solvers.sensitivity import fixed_lp_sensitivity, row_binds, row_slack

UNITS = {"hit_tokens": "hit tokens", "tel": "TEL ms", "violations": "violations"}
SHOWN_ROWS = 10
DUAL_ZERO = 1e-9
MAX_CAPACITY_BLOCKS = 2**53  # a whole number of blocks a float holds exactly (as the instance file's capacities)
TREE_ROWS = {"closure": "(3) a kept block's parent is kept", "prefix": "(5) a hit needs its parent's hit", "kept_hit": "(5) a hit needs its block kept"}


def explainer(problem: PrefixCacheProblem) -> Explainer:
    """The prefix_cache kind's sensitivity hooks (optfleet/sensitivity/explainer.py)."""
    curves = (f"capacity_blocks={','.join(str(c) for c in problem.capacities_blocks)}",) if len(problem.capacities_blocks) > 1 else ()
    return Explainer(UNITS[problem.objective], solve, analyse, parameters(problem), lambda p, s: [], default_curves=curves)


def solve(problem: PrefixCacheProblem) -> Solved:
    captured: list[pyo.ConcreteModel] = []
    h = solve_hindsight(problem.trace, problem.capacities_blocks[0], problem.eviction, problem.objective, problem.ttft, problem.xi_ms,
                        problem.slo_ms, time_limit_s=problem.time_limit_s, customize=captured.append, fcfs_server=problem.fcfs_server)
    digest = plan_digest(np.packbits(h.kept))
    plan = f"{int(h.kept.sum()):,} block gaps kept #{digest}"  # the schedule only: a capacity with the same one is the same plan
    return Solved(h.report.objective, h.report.status, plan, (h, captured[0] if captured else None))


def parameters(problem: PrefixCacheProblem) -> dict[str, Parameter]:
    found = {"capacity_blocks": Parameter("capacity_blocks", "blocks", "cache capacity C (rounded to whole blocks)", float(problem.capacities_blocks[0]),
                                          lambda p, v: replace(p, capacities_blocks=(int(round(v)),)), 1.0, MAX_CAPACITY_BLOCKS,
                                          open_interval=False, low_included=True, integral=True)}  # [1, 2**53], as an instance's
    if problem.objective == "tel":
        found["xi_ms"] = Parameter("xi_ms", "ms", "TTFT threshold xi: TEL counts TTFT above it", problem.xi_ms, lambda p, v: replace(p, xi_ms=v),
                                   low_included=True)
    elif problem.objective == "violations":
        found["slo_ms"] = Parameter("slo_ms", "ms", "the TTFT SLO a violation breaks", problem.slo_ms, lambda p, v: replace(p, slo_ms=v))
    return found


def analyse(problem: PrefixCacheProblem, solved: Solved) -> Analysis:
    h, model = solved.detail
    records = []
    if model is not None:
        families = [("capacity", "(2) blocks kept after an event within C", "blocks")]
        families += [(name, meaning, "") for name, meaning in TREE_ROWS.items()]
        families += [("wait_row", "(9) a wait at least Lindley's (prefill server)", "ms")]
        for name, meaning, unit in families:
            block = getattr(model, name, None)
            if isinstance(block, pyo.Constraint) and len(block):
                rows = list(block.values())
                records.append({"rows": meaning, "count": len(rows), "binding": sum(row_binds(row) for row in rows),
                                "least_slack": min(row_slack(row) for row in rows), "slack_unit": unit})
    capacity = problem.capacities_blocks[0]
    data = prepare(problem.trace, capacity, problem.eviction, problem.objective, problem.ttft, objective_threshold_ms(problem.objective, problem.xi_ms, problem.slo_ms), fcfs_server=problem.fcfs_server)
    notes = []
    duals = []
    if data.n_columns:
        relaxed = milp.build(data, relax=True)
        lp = fixed_lp_sensitivity(relaxed)
        rows = [row for row in lp.rows if row.name.startswith("capacity[")]
        price = sum(row.dual for row in rows)
        block_tokens = problem.trace.block_tokens
        duals.append({"where": "every row", "constraint": f"cache capacity C = {capacity:,} blocks", "shadow_price": price,
                      "unit": f"{UNITS[problem.objective]} per block", "bound": capacity, "bound_low": np.nan, "bound_high": np.nan, "row": "capacity[*]"})
        duals.append({"where": "every row", "constraint": "one token of capacity more", "shadow_price": price / block_tokens,
                      "unit": f"{UNITS[problem.objective]} per token", "bound": capacity * block_tokens, "bound_low": np.nan, "bound_high": np.nan,
                      "row": "capacity[*]"})
        priced = sorted((row for row in rows if abs(row.dual) > DUAL_ZERO), key=lambda row: -abs(row.dual))
        for row in priced[:SHOWN_ROWS]:
            event = int(data.row_event[int(row.name[len("capacity["):-1])])
            duals.append({"where": f"after event {event}", "constraint": "capacity after the event", "shadow_price": row.dual,
                          "unit": f"{UNITS[problem.objective]} per block", "bound": row.bound, "bound_low": row.bound_low, "bound_high": row.bound_high,
                          "row": row.name})
        notes.append(f"shadow prices are the LP relaxation's (0 <= y <= 1; value {lp.report.objective:,.4g}, a bound on the MILP's "
                     f"{solved.objective:,.4g}), not the MILP schedule's: with its binaries fixed nothing is left to price; "
                     f"{len(priced):,} of {len(rows):,} capacity rows have a price")
    else:
        notes.append("no block is used twice: nothing to keep, nothing to price")
    return Analysis({"binding": pd.DataFrame(records),
                     "shadow_prices": pd.DataFrame(duals, columns=["where", "constraint", "shadow_price", "unit", "bound", "bound_low", "bound_high", "row"])},
                    tuple(notes))
